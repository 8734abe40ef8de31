//! A process killed at any moment (SIGKILL) loses nothing it acknowledged and leaves a store
//! that the next process repairs. The real `somna` binary runs in a loop of notes and session
//! appends (sometimes two processes at once), each killed with SIGKILL (`Child::kill`) after a
//! random delay; every `Saved as #N.` and `Appended ... at revision R.` that reached stdout is an
//! acknowledged write. At the end (and now and then in between, through an unkilled `somna
//! wake`) the store must open, hold every acknowledged note under the id it printed and every
//! acknowledged session batch, hold each killed write wholly or not at all and nothing else,
//! pass `verify`, and keep working.
//!
//! `SOMNA_CRASH_LONG=1` runs more iterations; `SOMNA_CRASH_SEED=N` picks the seed.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use somna::{NewMemory, Store};
use somna_testkit::simdisk::SimRng;

fn somna(db: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_somna"));
    c.arg("--db")
        .arg(db)
        .env_remove("SOMNA_DB")
        .env_remove("SOMNA_SCOPE")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c
}

enum Write_ {
    Note { text: String },
    Append { batch: u64 },
}

struct Running {
    child: Child,
    what: Write_,
    kill_at: Option<Instant>,
}

fn spawn(db: &Path, i: u64, rng: &mut SimRng) -> Running {
    if rng.chance(60, 100) {
        let text = format!("sigkill note {i}");
        let child = somna(db)
            .arg("note")
            .arg(&text)
            .stdin(Stdio::null())
            .spawn()
            .expect("spawn somna note");
        Running {
            child,
            what: Write_::Note { text },
            kill_at: None,
        }
    } else {
        let mut child = somna(db)
            .args(["session", "append", "s1", "--key"])
            .arg(format!("key{i}"))
            .stdin(Stdio::piped())
            .spawn()
            .expect("spawn somna session append");
        let body =
            format!(r#"[{{"batch":{i},"n":0}},{{"batch":{i},"n":1}},{{"batch":{i},"n":2}}]"#);
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(body.as_bytes());
        }
        Running {
            child,
            what: Write_::Append { batch: i },
            kill_at: None,
        }
    }
}

#[derive(Default)]
struct Ledger {
    /// id -> text of every acknowledged note.
    notes: BTreeMap<u64, String>,
    /// Texts of notes whose process was killed before acknowledging.
    maybe_notes: Vec<String>,
    /// Acknowledged session batches.
    batches: Vec<u64>,
    maybe_batches: Vec<u64>,
    killed: u64,
    completed: u64,
}

fn finish(r: Running, ledger: &mut Ledger) -> Result<(), String> {
    let out = r.child.wait_with_output().map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    if stderr.contains("panicked") || out.status.code() == Some(101) {
        return Err(format!("somna panicked: {stderr}"));
    }
    let killed = out.status.code().is_none();
    if killed {
        ledger.killed += 1;
    } else if !out.status.success() {
        return Err(format!(
            "a somna that was not killed failed ({:?}): {stderr}",
            out.status
        ));
    } else {
        ledger.completed += 1;
    }
    match r.what {
        Write_::Note { text } => {
            let id = stdout.lines().find_map(|l| {
                l.strip_prefix("Saved as #")?
                    .strip_suffix('.')?
                    .parse()
                    .ok()
            });
            match id {
                Some(id) => {
                    if let Some(old) = ledger.notes.insert(id, text.clone()) {
                        return Err(format!("#{id} was printed for {old:?} and {text:?}"));
                    }
                }
                None if killed => ledger.maybe_notes.push(text),
                None => return Err(format!("note printed no id: {stdout:?}")),
            }
        }
        Write_::Append { batch } => {
            if stdout.starts_with("Appended 3 items at revision ") {
                ledger.batches.push(batch);
            } else if killed {
                ledger.maybe_batches.push(batch);
            } else {
                return Err(format!("session append printed {stdout:?}"));
            }
        }
    }
    Ok(())
}

/// Checks the store against the ledger: every acknowledged write present, every killed one
/// wholly present or absent, nothing else; verify clean; a further write works.
fn check(db: &Path, ledger: &Ledger) -> Result<(), String> {
    let mut store = Store::open(db).map_err(|e| format!("open: {e}"))?;
    let count = store.count("default").map_err(|e| e.to_string())?;
    let mems = store
        .read(|r| r.memories("default", 0, count))
        .map_err(|e| e.to_string())?;
    if mems.len() as u64 != count {
        return Err(format!("{count} memories counted, {} read", mems.len()));
    }
    let mut seen = std::collections::HashSet::new();
    for m in &mems {
        if !seen.insert(m.text.clone()) {
            return Err(format!("{:?} is stored twice", m.text));
        }
        match ledger.notes.get(&m.id) {
            Some(t) if *t == m.text => {}
            Some(t) => {
                return Err(format!(
                    "#{} holds {:?}, but {t:?} was acknowledged",
                    m.id, m.text
                ))
            }
            None if ledger.maybe_notes.contains(&m.text) => {}
            None => return Err(format!("#{} holds {:?}, which nobody wrote", m.id, m.text)),
        }
    }
    for (id, t) in &ledger.notes {
        if mems.get(*id as usize).map(|m| &m.text) != Some(t) {
            return Err(format!("acknowledged note #{id} {t:?} is lost"));
        }
    }
    // Session: whole batches in order, every acknowledged one present.
    let items = store.session_items("s1", None).map_err(|e| e.to_string())?;
    let mut batches = Vec::new();
    for chunk in items.chunks(3) {
        let parsed: Vec<(u64, u64)> = chunk
            .iter()
            .map(|s| {
                let v: serde_json::Value = serde_json::from_str(s).unwrap();
                (v["batch"].as_u64().unwrap(), v["n"].as_u64().unwrap())
            })
            .collect();
        let b = parsed[0].0;
        if parsed != [(b, 0), (b, 1), (b, 2)] {
            return Err(format!("a session batch is torn: {chunk:?}"));
        }
        batches.push(b);
    }
    for b in &batches {
        if !ledger.batches.contains(b) && !ledger.maybe_batches.contains(b) {
            return Err(format!("session batch {b} was never written"));
        }
    }
    for b in &ledger.batches {
        if !batches.contains(b) {
            return Err(format!("acknowledged session batch {b} is lost"));
        }
    }
    let report = store.verify().map_err(|e| format!("verify: {e}"))?;
    if !report.ok() {
        return Err(format!("verify: {:?}", report.problems));
    }
    Ok(())
}

/// Whether `SOMNA_CRASH_LONG=1` asks for the long run, and the seed (`SOMNA_CRASH_SEED`, or
/// `default`).
pub(crate) fn long_and_seed(default: u64) -> (bool, u64) {
    let long = std::env::var("SOMNA_CRASH_LONG").is_ok_and(|v| v == "1");
    let seed = std::env::var("SOMNA_CRASH_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    (long, seed)
}

#[test]
fn sigkill_at_random_moments_loses_no_acknowledged_write() {
    let (long, seed) = long_and_seed(20240501);
    let iterations = if long { 2000 } else { 150 };
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("memory.redb");
    let st = somna(&db).arg("init").output().unwrap();
    assert!(st.status.success(), "{st:?}");

    // How long one note takes, to spread the kills over a whole run.
    let t0 = Instant::now();
    let st = somna(&db).args(["note", "warm-up note"]).output().unwrap();
    assert!(st.status.success(), "{st:?}");
    let typical = t0.elapsed().max(Duration::from_millis(1));

    let mut ledger = Ledger::default();
    ledger.notes.insert(0, "warm-up note".into());
    let mut rng = SimRng::new(seed);
    let start = Instant::now();
    let mut failures = Vec::new();
    for i in 0..iterations {
        let n = if rng.chance(25, 100) { 2 } else { 1 };
        let mut running: Vec<Running> = (0..n).map(|k| spawn(&db, i * 2 + k, &mut rng)).collect();
        for r in &mut running {
            // Kill most processes somewhere in their run; let some finish.
            if rng.chance(85, 100) {
                let us = rng.below(typical.as_micros() as u64);
                r.kill_at = Some(Instant::now() + Duration::from_micros(us));
            }
        }
        loop {
            let now = Instant::now();
            let mut pending = false;
            for r in &mut running {
                if let Some(at) = r.kill_at {
                    if now >= at {
                        let _ = r.child.kill(); // SIGKILL on Unix
                        r.kill_at = None;
                    } else {
                        pending = true;
                    }
                }
            }
            if !pending {
                break;
            }
            std::thread::sleep(Duration::from_micros(50));
        }
        for r in running {
            if let Err(e) = finish(r, &mut ledger) {
                failures.push(format!("iteration {i}: {e}"));
            }
        }
        if i % 25 == 24 {
            // A process that is not killed opens (and repairs) the store and reads it.
            let out = somna(&db).arg("wake").output().unwrap();
            if !out.status.success() {
                failures.push(format!(
                    "iteration {i}: wake after kills failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        if !failures.is_empty() {
            break;
        }
    }
    if let Err(e) = check(&db, &ledger) {
        failures.push(format!("final check: {e}"));
    }
    // The store keeps working.
    let store = Store::open(&db).unwrap();
    let id = store
        .note("default", NewMemory::new("after the kills"))
        .unwrap();
    assert_eq!(store.memory("default", id).unwrap().text, "after the kills");
    drop(store);
    eprintln!(
        "sigkill: {iterations} rounds, {} processes killed, {} completed, {} notes and {} session batches acknowledged, {} killed in flight; lost: {}, {:.1?}",
        ledger.killed,
        ledger.completed,
        ledger.notes.len(),
        ledger.batches.len(),
        ledger.maybe_notes.len() + ledger.maybe_batches.len(),
        failures.len(),
        start.elapsed()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A kill during `somna init` must leave either no store or one that opens: otherwise every
/// command fails on that file until the user deletes it.
fn init_killed_once(
    dir: &Path,
    i: u64,
    rng: &mut SimRng,
    typical: Duration,
) -> Result<bool, String> {
    let db = dir.join(format!("init{i}.redb"));
    let mut child = somna(&db).arg("init").spawn().unwrap();
    let us = rng.below(typical.as_micros() as u64 + 1);
    std::thread::sleep(Duration::from_micros(us));
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    let killed = out.status.code().is_none();
    let again = somna(&db).arg("init").output().unwrap();
    let note = somna(&db).args(["note", "after init"]).output().unwrap();
    if !again.status.success() || !note.status.success() {
        return Err(format!(
            "after a killed init ({} bytes left), init says {:?} and note says {:?}",
            std::fs::metadata(&db).map(|m| m.len()).unwrap_or(0),
            String::from_utf8_lossy(&again.stderr).trim(),
            String::from_utf8_lossy(&note.stderr).trim()
        ));
    }
    Ok(killed)
}

#[test]
fn an_interrupted_init_leaves_a_store_that_init_can_open() {
    let dir = tempfile::tempdir().unwrap();
    let t0 = Instant::now();
    let st = somna(&dir.path().join("warm.redb"))
        .arg("init")
        .output()
        .unwrap();
    assert!(st.status.success());
    let typical = t0.elapsed();
    let mut rng = SimRng::new(7);
    let mut failures = Vec::new();
    for i in 0..300 {
        if let Err(e) = init_killed_once(dir.path(), i, &mut rng, typical) {
            failures.push(e);
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 300:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
