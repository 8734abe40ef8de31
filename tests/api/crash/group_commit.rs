//! Group commit loses no acknowledged write under power loss. Several threads write through one
//! `Store` at once (notes and session appends, which share commits through
//! `Store::write_grouped`) on the simulated disk, and the power is cut at every sync in turn.
//! A write that returned is acknowledged. After the crash the reopened store must hold every
//! acknowledged note under the id it was given and every acknowledged session append, each
//! unacknowledged write wholly or not at all and nothing else, dense logs, and a clean `verify`.
//! Thread interleaving varies from run to run; the invariants do not depend on it.
//!
//! `SOMNA_CRASH_LONG=1` runs more seeds.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use somna::{NewMemory, Options, Store};
use somna_testkit::simdisk::{FaultPlan, SimDisk};

const THREADS: u64 = 4;
const OPS: u64 = 12;

#[derive(Default)]
struct Ledger {
    notes: BTreeMap<u64, String>,
    maybe_notes: BTreeSet<String>,
    appends: BTreeSet<(u64, u64)>,
    maybe_appends: BTreeSet<(u64, u64)>,
}

fn options(exclusive: bool) -> Options {
    Options::default().exclusive(exclusive).cache_bytes(4 << 20)
}

/// Runs the concurrent workload on `disk` until it ends or the disk dies.
fn workload(store: &Store) -> Ledger {
    let ledger = Mutex::new(Ledger::default());
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let ledger = &ledger;
            s.spawn(move || {
                for i in 0..OPS {
                    if (t + i) % 3 == 0 {
                        let item = format!(r#"{{"t":{t},"i":{i}}}"#);
                        let r = store.session_append(&format!("s{t}"), &[&item], None, None);
                        let mut l = ledger.lock().unwrap();
                        if r.is_ok() {
                            l.appends.insert((t, i));
                        } else {
                            l.maybe_appends.insert((t, i));
                            return;
                        }
                    } else {
                        let text = format!("thread {t} note {i}");
                        let r = store.note("default", NewMemory::new(text.clone()));
                        let mut l = ledger.lock().unwrap();
                        match r {
                            Ok(id) => {
                                assert!(l.notes.insert(id, text).is_none(), "id {id} given twice");
                            }
                            Err(_) => {
                                l.maybe_notes.insert(text);
                                return;
                            }
                        }
                    }
                }
            });
        }
    });
    ledger.into_inner().unwrap()
}

fn check(image: Vec<u8>, l: &Ledger, exclusive: bool) -> Result<(), String> {
    let mut store = Store::with_backend(
        SimDisk::from_image(image, 9),
        "recovered",
        options(exclusive),
    )
    .map_err(|e| format!("reopen: {e}"))?;
    let count = store.count("default").map_err(|e| e.to_string())?;
    let mems = store
        .read(|r| r.memories("default", 0, count))
        .map_err(|e| e.to_string())?;
    if mems.len() as u64 != count {
        return Err(format!("{count} counted, {} read", mems.len()));
    }
    let mut seen = BTreeSet::new();
    for (i, m) in mems.iter().enumerate() {
        if m.id != i as u64 || !seen.insert(m.text.clone()) {
            return Err(format!(
                "position {i} holds #{} {:?} (dense, unique)",
                m.id, m.text
            ));
        }
        match l.notes.get(&m.id) {
            Some(t) if *t == m.text => {}
            None if l.maybe_notes.contains(&m.text) => {}
            _ => {
                return Err(format!(
                    "#{} holds {:?}, acknowledged {:?}",
                    m.id,
                    m.text,
                    l.notes.get(&m.id)
                ))
            }
        }
    }
    for (id, t) in &l.notes {
        if mems.get(*id as usize).map(|m| &m.text) != Some(t) {
            return Err(format!("acknowledged #{id} {t:?} lost"));
        }
    }
    for t in 0..THREADS {
        let items = store
            .session_items(&format!("s{t}"), None)
            .map_err(|e| e.to_string())?;
        let got: Vec<(u64, u64)> = items
            .iter()
            .map(|s| {
                let v: serde_json::Value = serde_json::from_str(s).unwrap();
                (v["t"].as_u64().unwrap(), v["i"].as_u64().unwrap())
            })
            .collect();
        let mut sorted = got.clone();
        sorted.sort();
        if sorted != got {
            return Err(format!("session s{t} out of order: {got:?}"));
        }
        for a in &got {
            if !l.appends.contains(a) && !l.maybe_appends.contains(a) {
                return Err(format!("session item {a:?} never written"));
            }
        }
        for a in l.appends.iter().filter(|a| a.0 == t) {
            if !got.contains(a) {
                return Err(format!("acknowledged session append {a:?} lost"));
            }
        }
    }
    let report = store.verify().map_err(|e| format!("verify: {e}"))?;
    if !report.ok() {
        return Err(format!("verify: {:?}", report.problems));
    }
    store
        .note("default", NewMemory::new("after recovery"))
        .map_err(|e| format!("note after recovery: {e}"))?;
    Ok(())
}

#[test]
fn group_commit_loses_no_acknowledged_write_at_any_power_loss() {
    let long = std::env::var("SOMNA_CRASH_LONG").is_ok_and(|v| v == "1");
    let seeds = if long { 24 } else { 3 };
    let (mut points, mut acked, mut failures) = (0u64, 0u64, Vec::new());
    let start = std::time::Instant::now();
    for seed in 0..seeds {
        let exclusive = seed % 2 == 1;
        // A clean run, to know how many syncs a run takes (it varies with the interleaving).
        let disk = SimDisk::new(seed);
        let store = Store::with_backend(disk.clone(), "clean", options(exclusive)).unwrap();
        workload(&store);
        drop(store);
        let syncs = disk.syncs_total();
        for k in 1..=syncs + 1 {
            let disk = SimDisk::new(seed * 1000 + k);
            let store = match Store::with_backend(disk.clone(), "sim", options(exclusive)) {
                Ok(s) => s,
                Err(e) => {
                    failures.push(format!("seed {seed}: opening failed: {e}"));
                    continue;
                }
            };
            disk.set_plan(FaultPlan {
                power_loss_at_sync: Some(k),
                ..FaultPlan::default()
            });
            let l = workload(&store);
            drop(store);
            let image = disk.crash_image().unwrap_or_else(|| disk.cut_power());
            points += 1;
            acked += (l.notes.len() + l.appends.len()) as u64;
            if let Err(e) = check(image, &l, exclusive) {
                failures.push(format!(
                    "seed {seed} (exclusive: {exclusive}), power loss at sync {k}: {e}"
                ));
            }
        }
    }
    eprintln!(
        "group commit: {points} power losses under {THREADS} concurrent writers, {acked} acknowledged writes checked, lost: {}, {:.1?}",
        failures.len(),
        start.elapsed()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
