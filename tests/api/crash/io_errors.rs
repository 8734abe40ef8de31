//! An I/O error never loses an acknowledged write nor corrupts the store. The workload of
//! the crash harness (every write path) runs on the simulated disk with the N-th I/O operation
//! failing, for N = 1, 2, ... until the workload completes untouched, once as a transient error
//! (that one operation fails) and once as a persistent one (every operation fails from then
//! on). The failing operation is in flight; the workload stops there. Two outcomes are checked
//! for each N: the process closes the store and the disk recovers (reopen on what was written),
//! and the power fails at the moment of the error (reopen on what a power loss leaves). Each
//! must hold every acknowledged operation, the one in flight wholly or not at all, pass
//! `verify`, and keep working; then an I/O error is injected into the repair too, and the
//! result is checked again.
//!
//! `cargo test --release` sweeps every N for a few seeds; `SOMNA_CRASH_LONG=1` runs the long
//! sweep (docs/reliability.md), `SOMNA_CRASH_SEED=N` one seed.

use somna_testkit::crash::*;
use somna_testkit::simdisk::{Fault, FaultPlan, SimDisk, SimRng};

fn sweep_seed(seed: u64, ops: usize, stride: u64, failures: &mut Vec<String>) -> Tally {
    let mut t = Tally::default();
    let script = Script::generate(seed, seed % 2 == 1, ops, Choices::Rng(SimRng::new(seed)));
    let mut rng = SimRng::new(mix(seed, 7));
    for fault in [Fault::Transient, Fault::Persistent] {
        let mut n = 1 + rng.below(stride);
        loop {
            let case = format!(
                "{}, {fault:?} error at I/O operation {n}",
                script.describe()
            );
            let disk = SimDisk::new(mix(seed, n));
            disk.set_plan(FaultPlan {
                fail_op: Some((n, fault)),
                ..FaultPlan::default()
            });
            let mut at_error = None;
            let p = match replay(&script, &disk, |d| {
                at_error = Some(power_loss_now(d, mix(seed, n + 1)));
            }) {
                Ok(p) => p,
                Err(e) => {
                    failures.push(format!("{case}: {e}"));
                    break;
                }
            };
            if disk.fired().is_none() {
                break; // the workload completed untouched: every N was explored
            }
            t.crash_points += 1;
            let live = disk.live_image();
            for (what, image) in [
                ("closed", Some(live)),
                ("power lost at the error", at_error),
            ] {
                let Some(image) = image else { continue };
                if let Err(e) = check_recovery(&script, image.clone(), &p, mix(seed, n), &mut t) {
                    failures.push(format!("{case}, {what}: {e}"));
                    continue;
                }
                // An I/O error during the repair, at a random operation of it.
                let (_, repair_ops) = repair_cost(&script, &image);
                let m = 1 + rng.below(repair_ops.max(1));
                let plan = FaultPlan {
                    fail_op: Some((m, fault)),
                    ..FaultPlan::default()
                };
                if let Err(e) =
                    check_crash_in_repair(&script, &image, &p, plan, mix(seed, n + 2), &mut t)
                {
                    failures.push(format!("{case}, {what}, then at repair I/O {m}: {e}"));
                }
            }
            if failures.len() > 50 {
                break;
            }
            n += 1 + rng.below(stride);
        }
    }
    t
}

#[test]
fn an_io_error_at_any_operation_loses_no_acknowledged_write() {
    let sweep = Sweep::from_env(3, 24, 16, 40);
    let stride = std::env::var("SOMNA_CRASH_STRIDE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if sweep.long { 1 } else { 4 });
    let start = std::time::Instant::now();
    let mut total = Tally::default();
    let mut failures = Vec::new();
    for &seed in &sweep.seeds {
        total.add(&sweep_seed(seed, sweep.ops, stride, &mut failures));
    }
    eprintln!(
        "I/O errors: {} seeds x {} ops, {}: {} faults injected, {}, acknowledged writes lost: {}, {:.1?}",
        sweep.seeds.len(),
        sweep.ops,
        if stride == 1 {
            "every I/O operation".to_string()
        } else {
            format!("steps of 1 to {stride} I/O operations")
        },
        total.crash_points,
        total.recoveries_line("an error"),
        failures.len(),
        start.elapsed()
    );
    assert_no_failures(&failures);
}
