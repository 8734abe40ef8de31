//! Several hosts share one store on a PostgreSQL server without losing, repeating or
//! misplacing a memory. Eight client processes at a time, each with its own working directory
//! and HOME (as eight machines would be), append 50 notes each to one scope through one server:
//! the ids printed are exactly 0..399, each id holds the text of the note that was told it, and
//! `verify` passes. Then idempotent appends under injected retries (`SOMNA_PG_FAULT_EVERY=3`:
//! every third SQL statement fails with a synthetic serialization error, 40001): processes run
//! `note --key K` for overlapping sets of keys, each key twice per process, and every key lands
//! exactly once, every run of a key printing the same id.
//!
//! Runs against the server named by `SOMNA_TEST_PG` (each test in a schema of its own);
//! skipped without one, failed under CI without one (`somna_testkit::pg::test_server_url`).
//! Bounded: 400 + 96 notes, every command killed after 60 s, the whole test after 300 s.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use somna_testkit::pg::{fresh_schema_url, test_server_url};

use crate::common::pg::{saved_id, show, Host, Outcome};

const HOSTS: usize = 8;
const NOTES_PER_HOST: usize = 50;
const DEADLINE: Duration = Duration::from_secs(300);

#[test]
fn eight_hosts_append_400_notes_with_ids_0_to_399() {
    let Some(base) = test_server_url() else {
        return;
    };
    let url = fresh_schema_url(&base);
    eprintln!("store: {url}");
    let admin = Host::new(&url);
    admin.ok(&["init"]);
    let start = Instant::now();
    let threads: Vec<_> = (0..HOSTS)
        .map(|h| {
            let url = url.clone();
            std::thread::spawn(move || {
                let host = Host::new(&url);
                let mut saved: Vec<(u64, String)> = Vec::new();
                let mut failed: Vec<Outcome> = Vec::new();
                for i in 0..NOTES_PER_HOST {
                    if start.elapsed() > DEADLINE {
                        break;
                    }
                    let text = format!("host {h} note {i}");
                    let o = host.run(&["note", &text], None);
                    match saved_id(&o.out) {
                        Some(id) if o.ok() => saved.push((id, text)),
                        _ => failed.push(o),
                    }
                }
                (saved, failed)
            })
        })
        .collect();
    let mut saved: BTreeMap<u64, String> = BTreeMap::new();
    let mut repeated = Vec::new();
    let mut failed = Vec::new();
    for t in threads {
        let (s, f) = t.join().expect("a host thread");
        for (id, text) in s {
            if let Some(old) = saved.insert(id, text.clone()) {
                repeated.push(format!("#{id} printed for {old:?} and {text:?}"));
            }
        }
        failed.extend(f);
    }
    eprintln!(
        "{} notes saved by {HOSTS} hosts in {:?}",
        saved.len(),
        start.elapsed()
    );
    show("failed notes", &failed, 10);
    assert!(repeated.is_empty(), "ids repeated: {repeated:?}");
    assert!(failed.is_empty(), "{} notes failed", failed.len());
    let ids: Vec<u64> = saved.keys().copied().collect();
    let want: Vec<u64> = (0..(HOSTS * NOTES_PER_HOST) as u64).collect();
    assert_eq!(ids, want, "the ids printed are not exactly 0..399");
    // What the store holds: exactly those memories, each with the text of its note.
    let held = admin.default_memories();
    assert_eq!(
        held.len(),
        saved.len(),
        "the store holds another number of notes"
    );
    for (id, text) in &saved {
        assert_eq!(
            held.get(id),
            Some(text),
            "#{id} does not hold the note it was printed for"
        );
    }
    admin.verify();
}

#[test]
fn keyed_notes_land_once_under_injected_retries() {
    let Some(base) = test_server_url() else {
        return;
    };
    const KEYS: usize = 24;
    const PROCESSES: usize = 4;
    let url = fresh_schema_url(&base);
    eprintln!("store: {url}");
    let admin = Host::new(&url);
    admin.ok(&["init"]);
    let text_of = |k: usize| format!("keyed note {k:02}");
    // Process p takes keys 6p..6p+12 (mod 24): every key is run by two processes, twice each,
    // and the two processes start on it at about the same time as another's second run.
    let threads: Vec<_> = (0..PROCESSES)
        .map(|p| {
            let url = url.clone();
            std::thread::spawn(move || {
                let mut host = Host::new(&url);
                host.env
                    .push(("SOMNA_PG_FAULT_EVERY".to_string(), "3".to_string()));
                let mut runs: Vec<(usize, Outcome)> = Vec::new();
                for j in 0..12 {
                    let k = (6 * p + j) % KEYS;
                    let key = format!("k{k:02}");
                    let text = format!("keyed note {k:02}");
                    for _ in 0..2 {
                        runs.push((k, host.run(&["note", "--key", &key, &text], None)));
                    }
                }
                runs
            })
        })
        .collect();
    let mut ids_of: BTreeMap<usize, BTreeSet<u64>> = BTreeMap::new();
    let mut failed = Vec::new();
    let mut runs = 0;
    for t in threads {
        for (k, o) in t.join().expect("a process thread") {
            runs += 1;
            match saved_id(&o.out) {
                Some(id) if o.ok() => {
                    ids_of.entry(k).or_default().insert(id);
                }
                _ => failed.push(o),
            }
        }
    }
    show("failed keyed notes", &failed, 10);
    assert!(
        failed.is_empty(),
        "{} of {runs} keyed notes failed",
        failed.len()
    );
    assert_eq!(runs, PROCESSES * 12 * 2);
    assert_eq!(ids_of.len(), KEYS, "keys without a saved id: {ids_of:?}");
    for (k, ids) in &ids_of {
        assert_eq!(ids.len(), 1, "key k{k:02} printed several ids: {ids:?}");
    }
    let ids: BTreeSet<u64> = ids_of.values().flatten().copied().collect();
    assert_eq!(
        ids,
        (0..KEYS as u64).collect::<BTreeSet<u64>>(),
        "keys share an id, or ids are not dense"
    );
    let held = admin.default_memories();
    assert_eq!(held.len(), KEYS, "a key landed more than once: {held:?}");
    for (k, ids) in &ids_of {
        let id = ids.first().expect("one id");
        assert_eq!(held.get(id), Some(&text_of(*k)), "#{id} (key k{k:02})");
    }
    admin.verify();
}
