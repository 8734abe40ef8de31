//! Power loss never loses an acknowledged write. A workload mixing every write path (notes,
//! batched and keyed appends, naps, batched naps, forget, settings, session save, append, pop,
//! clear and delete) runs on the simulated disk (`somna_testkit::simdisk`), and the power is cut
//! at every sync in turn, keeping an arbitrary subset of the writes since the last sync, torn at
//! 512-byte sectors. After each crash the store is reopened (repaired) and must hold every
//! acknowledged operation, the one in flight wholly or not at all, pass `verify`, have dense
//! logs and a valid tree, and keep working; the power is then cut again during the repair and
//! all of it is checked once more. Both redb commit protocols are covered: `MultiWriter` (one
//! phase, the primary marked unflushed until its sync returns; the CLI's) on even seeds,
//! `ExclusiveWriter` (1PC+C) on odd ones.
//!
//! `cargo test --release` runs a bounded, seeded sweep; `SOMNA_CRASH_LONG=1` runs the long one
//! (docs/reliability.md has its figures), `SOMNA_CRASH_SEED=N` one seed.

use somna_testkit::crash::*;
use somna_testkit::simdisk::{FaultPlan, SimDisk, SimRng};

fn sweep_seed(seed: u64, ops: usize, subsets: u64, failures: &mut Vec<String>) -> Tally {
    let mut t = Tally::default();
    let script = Script::generate(seed, seed % 2 == 1, ops, Choices::Rng(SimRng::new(seed)));
    let mut rng = SimRng::new(mix(seed, 99));
    // k = syncs + 1: the power fails after the last operation, with nothing in flight.
    for k in 1..=script.syncs + 1 {
        for sub in 0..subsets {
            let case = format!(
                "{}, power loss at sync {k} (subset {sub})",
                script.describe()
            );
            let disk = SimDisk::new(mix(mix(seed, k), sub));
            disk.set_plan(FaultPlan {
                power_loss_at_sync: Some(k),
                ..FaultPlan::default()
            });
            let p = match replay(&script, &disk, |_| {}) {
                Ok(p) => p,
                Err(e) => {
                    failures.push(format!("{case}: {e}"));
                    continue;
                }
            };
            let image = match disk.crash_image() {
                Some(img) => img,
                None => disk.cut_power(),
            };
            t.crash_points += 1;
            if let Err(e) = check_recovery(&script, image.clone(), &p, mix(seed, k), &mut t) {
                failures.push(format!("{case}: {e}"));
                continue;
            }
            // Crash again, during the repair: at one of its syncs, chosen at random.
            let (syncs, _) = repair_cost(&script, &image);
            if syncs > 0 {
                let j = 1 + rng.below(syncs);
                let plan = FaultPlan {
                    power_loss_at_sync: Some(j),
                    ..FaultPlan::default()
                };
                if let Err(e) =
                    check_crash_in_repair(&script, &image, &p, plan, mix(seed, k + 7), &mut t)
                {
                    failures.push(format!("{case}, then at repair sync {j}: {e}"));
                }
            }
        }
    }
    t
}

#[test]
fn power_loss_at_every_sync_keeps_every_acknowledged_write() {
    let sweep = Sweep::from_env(4, 36, 64, 60);
    let subsets = if sweep.long { 3 } else { 1 };
    let start = std::time::Instant::now();
    let mut total = Tally::default();
    let mut failures = Vec::new();
    for &seed in &sweep.seeds {
        let t = sweep_seed(seed, sweep.ops, subsets, &mut failures);
        total.add(&t);
    }
    eprintln!(
        "power loss: {} seeds x {} ops: {} crash points, {}, acknowledged writes lost: {}, {:.1?}",
        sweep.seeds.len(),
        sweep.ops,
        total.crash_points,
        total.recoveries_line("a crash"),
        failures.len(),
        start.elapsed()
    );
    assert_no_failures(&failures);
}
