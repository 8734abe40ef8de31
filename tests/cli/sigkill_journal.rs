//! A process that owns its store (`Options::exclusive`, so every commit goes through the
//! commit journal of docs/design.md, "Commit journal") killed at any moment (SIGKILL) loses
//! nothing it acknowledged. The child is this test binary itself, run as the hidden test
//! `journal_sigkill_child`: it opens the store exclusively and writes notes and session batches,
//! printing each one as soon as the call returned (acknowledged: its journal record synced). It
//! is killed after a random delay; the next child's open replays the journal. At the end the
//! store must hold every acknowledged note under the id printed and every acknowledged batch
//! whole, no note nobody wrote, pass `verify`, and keep working.
//!
//! `SOMNA_CRASH_LONG=1` runs 100 kills instead of 12; `SOMNA_CRASH_SEED=N` picks the seed.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use somna::{NewMemory, Options, Store};
use somna_testkit::simdisk::SimRng;

const CHILD: &str = "SOMNA_JOURNAL_CHILD";
const SHARED: &str = "SOMNA_JOURNAL_SHARED";

/// The child: journaled writes until 300 are done, each printed once acknowledged.
#[test]
fn journal_sigkill_child() {
    let Some(db) = std::env::var_os(CHILD) else {
        return;
    };
    let round = std::env::var("SOMNA_JOURNAL_ROUND").unwrap();
    // Shared: the default mode (many processes, the shared journal); else exclusive
    let opts = match std::env::var_os(SHARED) {
        Some(_) => Options::default(),
        None => Options::default().exclusive(true),
    };
    let s = Store::open_with(&db, opts).unwrap();
    for k in 0..300u64 {
        if k % 7 == 6 {
            let b = format!("{round}.{k}");
            let items: Vec<String> = (0..3)
                .map(|n| format!(r#"{{"batch":"{b}","n":{n}}}"#))
                .collect();
            let refs: Vec<&str> = items.iter().map(String::as_str).collect();
            s.session_append("s1", &refs, None, None).unwrap();
            println!("ack batch {b}");
        } else {
            let text = format!("r{round} n{k}");
            let id = s.note("default", NewMemory::new(text.clone())).unwrap();
            println!("ack note {id} {text}");
        }
    }
}

#[derive(Default)]
struct Ledger {
    notes: BTreeMap<u64, String>,
    batches: Vec<String>,
    killed: u64,
}

/// A child writing as round `round` (a text of its own), exclusive or `shared`.
fn spawn_child(db: &Path, round: &str, shared: bool) -> Child {
    let mut c = Command::new(std::env::current_exe().unwrap());
    c.args([
        "--exact",
        "sigkill_journal::journal_sigkill_child",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD, db)
    .env("SOMNA_JOURNAL_ROUND", round)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    if shared {
        c.env(SHARED, "1");
    }
    c.spawn().unwrap()
}

/// One child, killed after `kill_after` (or left to finish); its acknowledgements go to the
/// ledger.
fn run_child(db: &Path, round: u64, kill_after: Option<Duration>, ledger: &mut Ledger) {
    let mut child = spawn_child(db, &round.to_string(), false);
    if let Some(d) = kill_after {
        std::thread::sleep(d);
        let _ = child.kill();
    }
    collect(child, ledger);
}

/// Waits for a child (killed or not) and takes its acknowledgements into the ledger.
fn collect(child: Child, ledger: &mut Ledger) {
    let out = child.wait_with_output().unwrap();
    let killed = out.status.code().is_none();
    assert!(
        killed || out.status.success(),
        "a child that was not killed failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    ledger.killed += u64::from(killed);
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some(rest) = line.strip_prefix("ack note ") {
            let (id, text) = rest.split_once(' ').unwrap();
            let old = ledger.notes.insert(id.parse().unwrap(), text.to_string());
            assert!(old.is_none(), "id {id} acknowledged twice");
        } else if let Some(b) = line.strip_prefix("ack batch ") {
            ledger.batches.push(b.to_string());
        }
    }
}

fn check(db: &Path, ledger: &Ledger) {
    let mut s = Store::open(db).unwrap();
    let count = s.count("default").unwrap();
    let mems = s.read(|r| r.memories("default", 0, count)).unwrap();
    let mut seen = std::collections::HashSet::new();
    for m in &mems {
        assert!(seen.insert(m.text.clone()), "{:?} stored twice", m.text);
        assert!(m.text.starts_with('r'), "#{} holds {:?}", m.id, m.text);
        if let Some(t) = ledger.notes.get(&m.id) {
            assert_eq!(*t, m.text, "#{} changed", m.id);
        }
    }
    for (id, t) in &ledger.notes {
        let got = mems.get(*id as usize).map(|m| m.text.as_str());
        assert_eq!(got, Some(t.as_str()), "acknowledged note #{id} lost");
    }
    let items = s.session_items("s1", None).unwrap_or_default();
    let mut batches = Vec::new();
    for chunk in items.chunks(3) {
        let v: Vec<serde_json::Value> = chunk
            .iter()
            .map(|i| serde_json::from_str(i).unwrap())
            .collect();
        let b = v[0]["batch"].as_str().unwrap().to_string();
        for (n, x) in v.iter().enumerate() {
            assert_eq!(
                (x["batch"].as_str(), x["n"].as_u64()),
                (Some(&*b), Some(n as u64))
            );
        }
        batches.push(b);
    }
    for b in &ledger.batches {
        assert!(batches.contains(b), "acknowledged batch {b} lost");
    }
    let report = s.verify().unwrap();
    assert!(report.ok(), "{:?}", report.problems);
}

#[test]
fn sigkill_of_a_journaled_writer_loses_no_acknowledged_write() {
    let (long, seed) = crate::sigkill::long_and_seed(20261202);
    let kills = if long { 100 } else { 12 };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("memory.redb");
    Store::create(&db).unwrap().close().unwrap();
    let mut ledger = Ledger::default();
    // One child left to finish: how long a whole run takes, to spread the kills over it.
    let t0 = Instant::now();
    run_child(&db, 0, None, &mut ledger);
    let typical = t0.elapsed().max(Duration::from_millis(1));
    let mut rng = SimRng::new(seed);
    for round in 1..=kills {
        let us = rng.below(typical.as_micros() as u64);
        run_child(&db, round, Some(Duration::from_micros(us)), &mut ledger);
    }
    check(&db, &ledger);
    let s = Store::open_with(&db, Options::default().exclusive(true)).unwrap();
    let id = s.note("default", NewMemory::new("r after")).unwrap();
    assert_eq!(s.memory("default", id).unwrap().text, "r after");
    eprintln!(
        "sigkill journal: {kills} rounds, {} killed, {} notes and {} batches acknowledged",
        ledger.killed,
        ledger.notes.len(),
        ledger.batches.len()
    );
}

/// The default mode's shared journal (docs/design.md 14.9): four writer processes on one file at
/// once, each a journaled writer of its own killed with SIGKILL at a random moment (one of the
/// four, at random, left to finish), round after round; every write any of them acknowledged
/// survives, under the id it printed, and the store stays sound.
#[test]
fn sigkill_of_four_shared_journal_writers_loses_no_acknowledged_write() {
    let (long, seed) = crate::sigkill::long_and_seed(20261206);
    let rounds = if long { 40 } else { 5 };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("memory.redb");
    Store::create(&db).unwrap().close().unwrap();
    let mut ledger = Ledger::default();
    let t0 = Instant::now();
    collect(spawn_child(&db, "0", true), &mut ledger);
    // Four at once share two cores: spread the kills over twice one alone's run
    let typical = (t0.elapsed() * 2).max(Duration::from_millis(1));
    let mut rng = SimRng::new(seed);
    for round in 1..=rounds {
        let spared = rng.below(4);
        let mut kills: Vec<(Duration, usize)> = (0..4u64)
            .filter(|&c| c != spared)
            .map(|c| {
                let at = Duration::from_micros(rng.below(typical.as_micros() as u64));
                (at, c as usize)
            })
            .collect();
        kills.sort();
        let start = Instant::now();
        let mut children: Vec<Option<Child>> = (0..4)
            .map(|c| Some(spawn_child(&db, &format!("{round}c{c}"), true)))
            .collect();
        for (at, c) in kills {
            std::thread::sleep(at.saturating_sub(start.elapsed()));
            if let Some(child) = children[c].as_mut() {
                let _ = child.kill();
            }
        }
        for child in children.iter_mut().filter_map(Option::take) {
            collect(child, &mut ledger);
        }
    }
    check(&db, &ledger);
    let s = Store::open(&db).unwrap();
    let id = s.note("default", NewMemory::new("r after")).unwrap();
    assert_eq!(s.memory("default", id).unwrap().text, "r after");
    eprintln!(
        "sigkill shared journal: {rounds} rounds of 4 writers, {} killed, {} notes and {} batches \
         acknowledged",
        ledger.killed,
        ledger.notes.len(),
        ledger.batches.len()
    );
}
