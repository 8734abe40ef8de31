//! A PostgreSQL server killed with SIGKILL loses nothing somna acknowledged. A private server
//! (fsync on, `synchronous_commit` on) takes a loop of CLI notes and `session append`s; the
//! postmaster and all its children are SIGKILLed mid-loop and the server restarted about a
//! second later, while clients wait for it (`--busy-timeout-ms 15000`). Afterwards every
//! `Saved as #N.` printed is present under its id with its text, every acknowledged session
//! append is present exactly once, no write is present twice, writes acknowledged after the
//! restart exist (clients came back), and `somna verify` exits 0. A command that failed or was
//! killed by its time limit is an outcome the client could not know: counted apart, allowed.
//!
//! Needs a server named by `SOMNA_TEST_PG` to run at all (the gate of the server tier), and
//! the PostgreSQL binaries for its own server. Bounded: at most 600 commands and 60 s of loop.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use somna_testkit::pg::{fresh_schema_url, test_server_url, PgServer};

use crate::common::pg::{saved_id, show, Host, Outcome};

const MAX_COMMANDS: usize = 600;
const LOOP_LIMIT: Duration = Duration::from_secs(60);

enum Write {
    Note(String),
    Append(String),
}

#[derive(Default)]
struct Ledger {
    /// id -> text of every acknowledged note.
    notes: BTreeMap<u64, String>,
    /// Contents of acknowledged session appends.
    appends: Vec<String>,
    /// Writes whose outcome the client could not know (failed or timed out).
    unknown_notes: Vec<String>,
    unknown_appends: Vec<String>,
    failed: Vec<Outcome>,
    /// A command that failed before any fault was injected (the loop stops there): a bug.
    early_failure: Option<Outcome>,
    /// Acknowledged writes that started after the restart.
    after_restart: usize,
    /// Outputs that are neither an acknowledgement nor a failure: a bug.
    odd: Vec<Outcome>,
}

#[test]
fn a_server_killed_mid_loop_keeps_every_acknowledged_write() {
    if test_server_url().is_none() {
        return;
    }
    let pg = PgServer::start(false).expect("start a private server");
    let url = fresh_schema_url(pg.url());
    eprintln!("store: {url}");
    let admin = Host::new(&url);
    admin.ok(&["init"]);

    let stop = Arc::new(AtomicBool::new(false));
    let restarted = Arc::new(AtomicBool::new(false));
    let fault = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicUsize::new(0));
    let client = {
        let (stop, restarted, acked, fault) = (
            stop.clone(),
            restarted.clone(),
            acked.clone(),
            fault.clone(),
        );
        let url = url.clone();
        std::thread::spawn(move || {
            let host = Host::new(&url);
            let mut ledger = Ledger::default();
            let start = Instant::now();
            for i in 0..MAX_COMMANDS {
                if stop.load(Ordering::SeqCst) || start.elapsed() > LOOP_LIMIT {
                    break;
                }
                let after = restarted.load(Ordering::SeqCst);
                let (what, o) = if i % 3 == 2 {
                    let content = format!("m {i}");
                    let body = serde_json::json!([{"role": "user", "content": content}]);
                    let o = host.run(&["session", "append", "s1"], Some(&body.to_string()));
                    (Write::Append(content), o)
                } else {
                    let text = format!("kill note {i}");
                    (Write::Note(text.clone()), host.run(&["note", &text], None))
                };
                let ack = match what {
                    Write::Note(text) => match saved_id(&o.out) {
                        Some(id) if o.ok() => {
                            if let Some(old) = ledger.notes.insert(id, text.clone()) {
                                panic!("#{id} was printed for {old:?} and {text:?}");
                            }
                            true
                        }
                        _ => {
                            ledger.unknown_notes.push(text);
                            false
                        }
                    },
                    Write::Append(content) => {
                        // "1 items" as docs/cli.md has it; "1 item" as the backend branch prints.
                        if o.ok()
                            && (o.out.starts_with("Appended 1 item at revision ")
                                || o.out.starts_with("Appended 1 items at revision "))
                        {
                            ledger.appends.push(content);
                            true
                        } else {
                            ledger.unknown_appends.push(content);
                            false
                        }
                    }
                };
                if ack {
                    acked.fetch_add(1, Ordering::SeqCst);
                    if after {
                        ledger.after_restart += 1;
                    }
                } else if o.ok() {
                    ledger.odd.push(o);
                } else if !fault.load(Ordering::SeqCst) {
                    ledger.early_failure = Some(o);
                    break;
                } else {
                    ledger.failed.push(o);
                }
            }
            ledger
        })
    };

    // Kill once the loop is well under way (at least 20 acknowledged writes, at most 20 s).
    let t = Instant::now();
    while acked.load(Ordering::SeqCst) < 20
        && t.elapsed() < Duration::from_secs(20)
        && !client.is_finished()
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    let before_kill = acked.load(Ordering::SeqCst);
    fault.store(true, Ordering::SeqCst);
    let t = Instant::now();
    pg.kill9().expect("kill -9 the server");
    let kill_took = t.elapsed();
    std::thread::sleep(Duration::from_secs(1));
    let t = Instant::now();
    pg.restart().expect("restart the server");
    let restart_took = t.elapsed();
    restarted.store(true, Ordering::SeqCst);
    eprintln!("server log after the restart:\n{}", pg.log_tail(12));
    // Let the loop run on until 20 more writes are acknowledged (at most 30 s).
    let t = Instant::now();
    let at_restart = acked.load(Ordering::SeqCst);
    while acked.load(Ordering::SeqCst) < at_restart + 20
        && t.elapsed() < Duration::from_secs(30)
        && !client.is_finished()
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::SeqCst);
    let ledger = client.join().expect("the client loop");
    if let Some(o) = &ledger.early_failure {
        panic!("a command failed before the server was killed: {o:?}");
    }

    eprintln!(
        "acknowledged before the kill: {before_kill}; kill -9 took {kill_took:?}, restart \
         {restart_took:?}; acknowledged: {} notes, {} appends ({} started after the restart); \
         unknown outcome: {} notes, {} appends",
        ledger.notes.len(),
        ledger.appends.len(),
        ledger.after_restart,
        ledger.unknown_notes.len(),
        ledger.unknown_appends.len()
    );
    show("commands without an acknowledgement", &ledger.failed, 10);
    show(
        "commands that exited 0 without an acknowledgement",
        &ledger.odd,
        10,
    );
    assert!(ledger.odd.is_empty(), "unexpected output (see above)");
    assert!(
        before_kill >= 20,
        "the loop acknowledged only {before_kill} writes before the kill"
    );
    assert!(
        ledger.after_restart > 0,
        "no write was acknowledged after the restart; server log:\n{}",
        pg.log_tail(30)
    );

    let held = admin.default_memories();
    let mut lost = Vec::new();
    for (id, text) in &ledger.notes {
        if held.get(id) != Some(text) {
            lost.push(format!("#{id} {text:?} (holds {:?})", held.get(id)));
        }
    }
    let mut count: BTreeMap<&str, usize> = BTreeMap::new();
    for text in held.values() {
        *count.entry(text.as_str()).or_default() += 1;
    }
    let twice: Vec<_> = count.iter().filter(|(_, n)| **n > 1).collect();
    let unknown_present = ledger
        .unknown_notes
        .iter()
        .filter(|t| count.contains_key(t.as_str()))
        .count();
    let strangers: Vec<_> = held
        .iter()
        .filter(|(id, t)| !ledger.notes.contains_key(id) && !ledger.unknown_notes.contains(*t))
        .collect();

    let contents = admin.session_contents("s1");
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    for c in &contents {
        *seen.entry(c.as_str()).or_default() += 1;
    }
    let lost_appends: Vec<_> = ledger
        .appends
        .iter()
        .filter(|c| seen.get(c.as_str()) != Some(&1))
        .collect();
    let appended_twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    let unknown_appends_present = ledger
        .unknown_appends
        .iter()
        .filter(|c| seen.contains_key(c.as_str()))
        .count();
    eprintln!(
        "after the restart: {} notes held, {} acknowledged notes lost, {unknown_present} of the \
         unknown notes present; {} session items held, {} acknowledged appends lost, \
         {unknown_appends_present} of the unknown appends present",
        held.len(),
        lost.len(),
        contents.len(),
        lost_appends.len()
    );
    assert!(lost.is_empty(), "acknowledged notes lost: {lost:?}");
    assert!(twice.is_empty(), "notes held twice: {twice:?}");
    assert!(strangers.is_empty(), "notes nobody wrote: {strangers:?}");
    assert!(
        lost_appends.is_empty(),
        "acknowledged appends lost or repeated: {lost_appends:?}"
    );
    assert!(
        appended_twice.is_empty(),
        "items held twice: {appended_twice:?}"
    );
    assert_eq!(
        contents.len(),
        ledger.appends.len() + unknown_appends_present,
        "the session holds items nobody appended: {contents:?}"
    );
    admin.verify();
}
