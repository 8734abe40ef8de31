//! Power loss never loses a write acknowledged through the commit journal (docs/design.md,
//! section 14). An exclusive store runs on two simulated disks on one power line
//! (`SimDisk::share_power`): one backs the redb file, the other the journal
//! (`Store::with_backends`). A workload of notes, batched appends and session saves runs with a
//! 12 KiB journal (so it checkpoints, and one batch is larger than the whole journal), and the
//! power is cut at every sync of either disk in turn, each file keeping an arbitrary part of its
//! writes since its last sync, torn at sectors. Both images are rebooted and reopened (which
//! replays the journal): every acknowledged write is there, the one in flight wholly or not at
//! all, nothing else, and `verify` is clean. The reopen is done once as an exclusive journaled
//! handle and once more after it was itself killed.
//!
//! The same sweep runs on the default mode's shared journal (a multi-writer handle, redb's
//! journaled commits): there the reopen in the next boot rolls redb back to its last synced
//! commit and replays the journal's records past it.
//!
//! `SOMNA_CRASH_LONG=1` runs the workload three times over (so several checkpoints) and three
//! seeds per crash point instead of one.

use somna::{NewMemory, Options, Store};
use somna_testkit::simdisk::SimDisk;

/// One step of the workload: how many notes it adds (a session save adds none).
#[derive(Clone, Copy)]
enum Step {
    Note,
    Batch(usize),
    Session(usize),
}

const STEPS: &[Step] = &[
    Step::Note,
    Step::Session(2),
    Step::Note,
    Step::Batch(3),
    Step::Note,
    Step::Session(4),
    Step::Batch(60),
    Step::Note,
    Step::Note,
    Step::Session(5),
    Step::Note,
    Step::Batch(4),
    Step::Note,
    Step::Note,
    Step::Note,
    Step::Session(7),
    Step::Note,
];

fn opts() -> Options {
    Options::default().exclusive(true).journal_bytes(12 << 10)
}

/// The default mode with the shared journal, as small.
fn shared() -> Options {
    Options::default().journal_bytes(12 << 10)
}

fn msg(n: usize) -> Vec<String> {
    (0..n)
        .map(|i| format!(r#"{{"role":"user","content":"m{i} {}"}}"#, "x".repeat(40)))
        .collect()
}

/// Two disks on one power line, the store made on the first (before the power line counts:
/// a crash during `init` is another test's, tests/cli/sigkill.rs), with the power cut at the
/// `k`-th sync of either from then on.
fn disks(seed: u64, k: Option<u64>) -> (SimDisk, SimDisk) {
    let (db, j) = (SimDisk::new(seed), SimDisk::new(seed + 1));
    Store::with_backend(db.clone(), "jp", Options::default())
        .unwrap()
        .close()
        .unwrap();
    SimDisk::share_power(&[&db, &j], k);
    (db, j)
}

/// Runs the workload until it fails; (notes acknowledged, session length acknowledged, the
/// step in flight).
fn run(
    db: &SimDisk,
    j: &SimDisk,
    rounds: usize,
    o: &Options,
    handles: usize,
) -> (u64, Option<usize>, Option<Step>) {
    let mut all = Vec::new();
    for _ in 0..handles {
        match Store::with_backends(db.clone(), j.clone(), "jp", o.clone()) {
            Ok(s) => all.push(s),
            Err(_) => {
                all.into_iter().for_each(std::mem::forget);
                return (0, None, None);
            }
        }
    }
    let (mut notes, mut session) = (0u64, None);
    let steps = STEPS.iter().cycle().take(STEPS.len() * rounds);
    for (i, step) in steps.enumerate() {
        // The handles take turns, each continuing the others' commits
        let s = &all[i % handles];
        let ok = match *step {
            Step::Note => s
                .note("default", NewMemory::new(format!("n{notes}")))
                .is_ok(),
            Step::Batch(k) => {
                let items = (0..k as u64)
                    .map(|i| NewMemory::new(format!("n{}", notes + i)))
                    .collect();
                s.append("default", items, None).is_ok()
            }
            Step::Session(n) => {
                let m = msg(n);
                let refs: Vec<&str> = m.iter().map(String::as_str).collect();
                s.session_save("chat", &refs, None).is_ok()
            }
        };
        if !ok {
            all.into_iter().for_each(std::mem::forget);
            return (notes, session, Some(*step));
        }
        match *step {
            Step::Note => notes += 1,
            Step::Batch(k) => notes += k as u64,
            Step::Session(n) => session = Some(n),
        }
    }
    all.into_iter().for_each(std::mem::forget);
    (notes, session, None)
}

/// Checks a reopened store against what was acknowledged.
fn check(
    s: &mut Store,
    notes: u64,
    session: Option<usize>,
    flight: Option<Step>,
) -> Result<(), String> {
    let count = s.count("default").unwrap_or(0);
    let extra = match flight {
        Some(Step::Note) => 1,
        Some(Step::Batch(k)) => k as u64,
        _ => 0,
    };
    if count != notes && count != notes + extra {
        return Err(format!(
            "{count} notes, {notes} acknowledged (+{extra} in flight)"
        ));
    }
    for i in 0..count {
        let t = s.memory("default", i).map_err(|e| e.to_string())?.text;
        if t != format!("n{i}") {
            return Err(format!("#{i} holds {t:?}"));
        }
    }
    let got = s
        .session_load("chat")
        .map_err(|e| e.to_string())?
        .map(|v| v.len());
    let in_flight = match flight {
        Some(Step::Session(n)) => Some(n),
        _ => None,
    };
    if got != session && (in_flight.is_none() || got != in_flight) {
        return Err(format!("session of {got:?}, {session:?} acknowledged"));
    }
    let r = s.verify().map_err(|e| e.to_string())?;
    if !r.ok() {
        return Err(format!("verify: {:?}", r.problems));
    }
    Ok(())
}

fn images(db: &SimDisk, j: &SimDisk) -> (Vec<u8>, Vec<u8>) {
    let a = db.crash_image().unwrap_or_else(|| db.cut_power());
    let b = j.crash_image().unwrap_or_else(|| j.cut_power());
    (a, b)
}

#[test]
fn power_loss_at_every_sync_of_store_or_journal_keeps_every_acknowledged_write() {
    sweep(&opts(), 1);
}

#[test]
fn power_loss_at_every_sync_of_the_shared_journal_keeps_every_acknowledged_write() {
    sweep(&shared(), 1);
}

/// Two handles of the default mode on one simulated disk (and one journal) take turns: each
/// commit is published without a sync and continued by the other handle.
#[test]
fn power_loss_at_every_sync_with_two_shared_handles_taking_turns_keeps_every_acknowledged_write() {
    sweep(&shared(), 2);
}

fn sweep(o: &Options, handles: usize) {
    let long = std::env::var("SOMNA_CRASH_LONG").is_ok_and(|v| v == "1");
    let rounds = if long { 3 } else { 1 };
    // Syncs of a whole uncut run, on both disks.
    let (db, j) = disks(1, None);
    let before = db.syncs_total() + j.syncs_total();
    let (notes, _, flight) = run(&db, &j, rounds, o, handles);
    assert!(flight.is_none() && notes > 60);
    let syncs = db.syncs_total() + j.syncs_total() - before;
    assert!(
        j.syncs_total() > 10,
        "the journal synced {} times",
        j.syncs_total()
    );
    let mut failures = Vec::new();
    let mut replayed = 0;
    for k in 1..=syncs + 1 {
        for seed in 0..if long { 3 } else { 1 } {
            let (db, j) = disks(k * 7 + seed * 1000, Some(k));
            let (notes, session, flight) = run(&db, &j, rounds, o, handles);
            let (a, b) = images(&db, &j);
            let case = format!("power loss at sync {k} (seed {seed})");
            // Reopen as an exclusive journaled handle (which replays), then kill it too.
            let (db2, j2) = (
                SimDisk::from_image(a, seed),
                SimDisk::from_image(b, seed + 1),
            );
            let r = Store::with_backends(db2.clone(), j2.clone(), "jp", o.clone());
            match r {
                Ok(mut s) => {
                    replayed += 1;
                    if let Err(e) = check(&mut s, notes, session, flight) {
                        failures.push(format!("{case}: {e}"));
                    }
                    std::mem::forget(s);
                }
                Err(e) => failures.push(format!("{case}: reopen: {e}")),
            }
            let (a, b) = images(&db2, &j2);
            let again = Store::with_backends(
                SimDisk::from_image(a, 5),
                SimDisk::from_image(b, 6),
                "jp",
                Options::default(),
            );
            match again {
                Ok(mut s) => {
                    if let Err(e) = check(&mut s, notes, session, flight) {
                        failures.push(format!("{case}, reopened twice: {e}"));
                    }
                }
                Err(e) => failures.push(format!("{case}: second reopen: {e}")),
            }
        }
    }
    eprintln!(
        "journal power loss: {syncs} syncs, {replayed} crash images reopened, failures: {}",
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_failed_journal_write_refuses_every_later_write_and_loses_nothing_acknowledged() {
    use somna_testkit::simdisk::{Fault, FaultPlan};
    let (db, j) = disks(77, None);
    let s = Store::with_backends(db.clone(), j.clone(), "jp", opts()).unwrap();
    s.note("default", NewMemory::new("n0")).unwrap();
    j.set_plan(FaultPlan {
        fail_op: Some((1, Fault::Transient)),
        ..FaultPlan::default()
    });
    assert!(s.note("default", NewMemory::new("lost")).is_err());
    // The disk works again, but the handle's journal tail is unknown: it refuses to write.
    let e = s.note("default", NewMemory::new("refused")).unwrap_err();
    assert!(e.to_string().contains("reopen"), "{e}");
    assert_eq!(s.count("default").unwrap(), 1);
    std::mem::forget(s);
    let (a, b) = images(&db, &j);
    let mut s = Store::with_backends(
        SimDisk::from_image(a, 1),
        SimDisk::from_image(b, 2),
        "jp",
        opts(),
    )
    .unwrap();
    assert_eq!(s.count("default").unwrap(), 1);
    assert_eq!(s.memory("default", 0).unwrap().text, "n0");
    s.note("default", NewMemory::new("n1")).unwrap();
    assert!(s.verify().unwrap().ok());
}
