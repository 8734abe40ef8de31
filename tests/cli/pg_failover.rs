//! Failover to a synchronous standby loses no acknowledged write, and the harness can see a loss
//! when there is one. A private primary with a streaming standby on loopback; a client loop of
//! `somna note` through a multi-host URL (`postgresql://postgres@127.0.0.1:P1,127.0.0.1:P2/
//! postgres?target_session_attrs=read-write&schema=...`); after a few seconds the primary's
//! postmaster and all its children are SIGKILLed and the standby promoted, and the client
//! reconnects to it. Then every `Saved as #N.` printed must be on the promoted server under its
//! id with its text. A command that failed or timed out is an outcome the client could not
//! know: counted apart, never as lost.
//!
//! - Synchronous standby: 0 acknowledged notes lost, and notes acknowledged after the promote.
//! - Synchronous standby, the primary's walsender stopped for the last second: commits wait for
//!   it, so nothing acknowledged is lost either (what was in flight is unknown).
//! - Asynchronous standby, the primary's walsender stopped (SIGSTOP) for the last second before
//!   the kill: the standby lags, and the same check must see acknowledged notes lost (on
//!   loopback an asynchronous standby almost never lags, so a test that does not create lag
//!   proves nothing).
//!
//! Both print their figures on stderr (`--nocapture`). Needs a server named by
//! `SOMNA_TEST_PG` to run at all (the gate of the server tier) and the PostgreSQL binaries.
//! Bounded: at most 2000 commands, 90 s of loop, every command killed after 60 s.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use somna_testkit::pg::{fresh_schema_name, test_server_url, with_query, PgServer};

use crate::common::pg::{saved_id, show, signal, Host, Outcome};

const MAX_COMMANDS: usize = 2000;
const LOOP_LIMIT: Duration = Duration::from_secs(90);

/// What one run saw.
#[derive(Debug, Default)]
struct Figures {
    acknowledged: usize,
    acknowledged_after_promote: usize,
    held: usize,
    lost: usize,
    unknown: usize,
    unknown_present: usize,
}

#[derive(Default)]
struct Ledger {
    /// id -> text of every acknowledged note, in order of acknowledgement (an id lost with the
    /// old primary can be given again by the new one, so a later entry may replace one).
    acked: Vec<(u64, String)>,
    after_promote: usize,
    unknown: Vec<String>,
    failed: Vec<Outcome>,
    /// A command that failed before any fault was injected (the loop stops there): a bug.
    early_failure: Option<Outcome>,
    odd: Vec<Outcome>,
}

fn failover(sync: bool, stall: bool) -> Figures {
    let label = match (sync, stall) {
        (true, false) => "sync standby",
        (true, true) => "sync standby, walsender stalled",
        (false, false) => "async standby",
        (false, true) => "async standby, walsender stalled",
    };
    let primary = PgServer::start(false).expect("start the primary");
    let t = Instant::now();
    let standby = primary.standby(sync).expect("start the standby");
    eprintln!("[{label}] standby streaming after {:?}", t.elapsed());
    let schema = fresh_schema_name();
    let url = with_query(
        &PgServer::multi_host_url(&[&primary, &standby]),
        "schema",
        &schema,
    );
    eprintln!("[{label}] store: {url}");
    let admin = Host::new(&url);
    admin.ok(&["init"]);

    let stop = Arc::new(AtomicBool::new(false));
    let promoted = Arc::new(AtomicBool::new(false));
    let fault = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicUsize::new(0));
    let client = {
        let (stop, promoted, acked, fault) =
            (stop.clone(), promoted.clone(), acked.clone(), fault.clone());
        let url = url.clone();
        std::thread::spawn(move || {
            let host = Host::new(&url);
            let mut ledger = Ledger::default();
            let start = Instant::now();
            for i in 0..MAX_COMMANDS {
                if stop.load(Ordering::SeqCst) || start.elapsed() > LOOP_LIMIT {
                    break;
                }
                let after = promoted.load(Ordering::SeqCst);
                let text = format!("failover note {i}");
                let o = host.run(&["note", &text], None);
                match saved_id(&o.out) {
                    Some(id) if o.ok() => {
                        ledger.acked.push((id, text));
                        acked.fetch_add(1, Ordering::SeqCst);
                        if after {
                            ledger.after_promote += 1;
                        }
                    }
                    _ => {
                        ledger.unknown.push(text);
                        if o.ok() {
                            ledger.odd.push(o);
                        } else if !fault.load(Ordering::SeqCst) {
                            ledger.early_failure = Some(o);
                            break;
                        } else {
                            ledger.failed.push(o);
                        }
                    }
                }
            }
            ledger
        })
    };

    // A few seconds of load (and at least 20 acknowledged notes, waiting at most 20 s).
    let t = Instant::now();
    while (acked.load(Ordering::SeqCst) < 20 || t.elapsed() < Duration::from_secs(3))
        && t.elapsed() < Duration::from_secs(20)
        && !client.is_finished()
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    fault.store(true, Ordering::SeqCst);
    if stall {
        let walsender = primary.walsender_pid().expect("the walsender's pid");
        signal(walsender, "STOP");
        eprintln!("[{label}] walsender {walsender} stopped");
        std::thread::sleep(Duration::from_secs(1));
    }
    let at_kill = acked.load(Ordering::SeqCst);
    let t = Instant::now();
    primary.kill9().expect("kill -9 the primary");
    let kill_took = t.elapsed();
    let t = Instant::now();
    standby.promote().expect("promote the standby");
    let promote_took = t.elapsed();
    promoted.store(true, Ordering::SeqCst);
    // Let the client find the promoted server: 10 more acknowledged notes, at most 30 s.
    let t = Instant::now();
    let at_promote = acked.load(Ordering::SeqCst);
    while acked.load(Ordering::SeqCst) < at_promote + 10
        && t.elapsed() < Duration::from_secs(30)
        && !client.is_finished()
    {
        std::thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::SeqCst);
    let ledger = client.join().expect("the client loop");
    if let Some(o) = &ledger.early_failure {
        panic!("[{label}] a command failed before any fault: {o:?}");
    }
    eprintln!(
        "[{label}] acknowledged at the kill: {at_kill}; kill -9 took {kill_took:?}, promote \
         {promote_took:?}"
    );
    show(
        &format!("[{label}] commands without an acknowledgement"),
        &ledger.failed,
        5,
    );
    show(
        &format!("[{label}] commands that exited 0 without an acknowledgement"),
        &ledger.odd,
        5,
    );
    assert!(ledger.odd.is_empty(), "unexpected output (see above)");

    // What the promoted server holds, read through its own address.
    let survivor = Host::new(&with_query(standby.url(), "schema", &schema));
    let held = survivor.default_memories();
    let mut lost = Vec::new();
    for (id, text) in &ledger.acked {
        if held.get(id) != Some(text) {
            lost.push(format!("#{id} {text:?}"));
        }
    }
    let texts: BTreeMap<&str, u64> = held.iter().map(|(id, t)| (t.as_str(), *id)).collect();
    let unknown_present = ledger
        .unknown
        .iter()
        .filter(|t| texts.contains_key(t.as_str()))
        .count();
    let figures = Figures {
        acknowledged: ledger.acked.len(),
        acknowledged_after_promote: ledger.after_promote,
        held: held.len(),
        lost: lost.len(),
        unknown: ledger.unknown.len(),
        unknown_present,
    };
    eprintln!(
        "[{label}] | acknowledged | of them after the promote | held after promote | \
         acknowledged but lost | unknown outcome | unknown but present |"
    );
    eprintln!(
        "[{label}] | {} | {} | {} | {} | {} | {} |",
        figures.acknowledged,
        figures.acknowledged_after_promote,
        figures.held,
        figures.lost,
        figures.unknown,
        figures.unknown_present
    );
    if !lost.is_empty() {
        eprintln!(
            "[{label}] lost: {}{}",
            lost.iter().take(10).cloned().collect::<Vec<_>>().join(", "),
            if lost.len() > 10 { ", ..." } else { "" }
        );
    }
    // Nothing held that nobody wrote, and no text held twice.
    let strangers: Vec<_> = held
        .iter()
        .filter(|(_, t)| !ledger.acked.iter().any(|(_, a)| a == *t) && !ledger.unknown.contains(*t))
        .collect();
    assert!(
        strangers.is_empty(),
        "[{label}] notes nobody wrote: {strangers:?}"
    );
    assert_eq!(texts.len(), held.len(), "[{label}] a note is held twice");
    survivor.verify();
    figures
}

#[test]
fn failover_to_a_sync_standby_loses_no_acknowledged_note() {
    if test_server_url().is_none() {
        return;
    }
    let f = failover(true, false);
    assert!(f.acknowledged >= 20, "too little load to judge: {f:?}");
    assert!(
        f.acknowledged_after_promote > 0,
        "the client never reached the promoted server: {f:?}"
    );
    assert_eq!(f.lost, 0, "acknowledged notes lost in failover: {f:?}");
}

#[test]
fn failover_to_a_stalled_sync_standby_loses_no_acknowledged_note() {
    if test_server_url().is_none() {
        return;
    }
    // Commits wait for the stopped walsender: what was in flight at the kill is unknown, and
    // nothing acknowledged is lost.
    let f = failover(true, true);
    assert!(f.acknowledged >= 20, "too little load to judge: {f:?}");
    assert_eq!(f.lost, 0, "acknowledged notes lost in failover: {f:?}");
}

#[test]
fn failover_to_a_lagging_async_standby_is_seen_to_lose_notes() {
    if test_server_url().is_none() {
        return;
    }
    let f = failover(false, true);
    assert!(f.acknowledged >= 20, "too little load to judge: {f:?}");
    assert!(
        f.lost > 0,
        "an async standby stalled for 1 s lost nothing: the test cannot see loss: {f:?}"
    );
}
