//! Failover as teams run it (issue 23): a Patroni cluster started by `scripts/patroni.sh` (one
//! etcd, a leader and a replica in `synchronous_mode`, on loopback) and somna through its
//! two-host URL with `target_session_attrs=read-write`. Two clients write while the leader is
//! SIGKILLed whole (its Patroni, its postmaster and their children, as when a machine dies):
//! a loop of `somna note` and `somna session append` processes, and one long-lived `somna mcp`
//! process calling `note` and `session_append`. Patroni promotes the replica by itself; then
//!
//! - every note and every session item acknowledged (before, during or after the failover) is
//!   on the promoted server with its text, in order for the sessions;
//! - both clients write again through the same URL, the MCP client through the same process;
//! - the figures, acknowledged / present / lost per client and the unavailability window (the
//!   first failure after the kill to the first success after it, and the kill to the first
//!   success) are printed on stderr (`--nocapture`).
//!
//! Needs the server tier (`SOMNA_TEST_PG`) and Patroni with etcd (Debian's `patroni` and
//! `etcd-server`, which the script installs when run as root; without them the test skips, or
//! fails under CI). Bounded: 150 s of loop at most, every command killed after 60 s, every wait
//! of the script 90 s.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use somna_testkit::pg::{fresh_schema_name, test_server_url, with_query};

use crate::common::mcp::StdioServer;
use crate::common::pg::{saved_id, Host, BUSY_TIMEOUT_MS};
use crate::common::Env;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/scripts/patroni.sh");
const LOOP_LIMIT: Duration = Duration::from_secs(150);

/// A cluster of `scripts/patroni.sh`, stopped on drop.
struct Cluster {
    dir: tempfile::TempDir,
    url: String,
}

impl Cluster {
    /// Starts one, or `None` (after saying why) when Patroni cannot be had here.
    fn start() -> Option<Cluster> {
        let have = |p: &str| {
            Command::new("sh")
                .args(["-c", &format!("command -v {p}")])
                .output()
                .is_ok_and(|o| o.status.success())
        };
        let root = Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"0"));
        let installed = have("patroni") && have("etcd");
        if !installed && !root {
            let why = "patroni and etcd are not installed (apt-get install patroni etcd-server)";
            assert!(
                std::env::var_os("CI").is_none(),
                "{why}: CI must run this test"
            );
            eprintln!("skipped: {why}");
            return None;
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let url = script(&["start", &path(dir.path())]);
        Some(Cluster { dir, url })
    }

    fn verb(&self, verb: &str, extra: &[&str]) -> String {
        let mut args = vec![verb.to_string(), path(self.dir.path())];
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        script(&args)
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new("bash")
            .args([SCRIPT, "stop", &path(self.dir.path())])
            .status();
    }
}

fn path(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// `bash scripts/patroni.sh ARGS`; panics (with its stderr) unless it succeeds; its stdout.
fn script(args: &[&str]) -> String {
    let o = Command::new("bash")
        .arg(SCRIPT)
        .args(args)
        .output()
        .expect("run scripts/patroni.sh");
    assert!(
        o.status.success(),
        "patroni.sh {args:?} failed:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).trim().to_string()
}

/// What one client saw: each write's text and when it ended, acknowledged or not.
#[derive(Default)]
struct Ledger {
    notes: Vec<(u64, String)>,
    items: Vec<String>,
    unknown: usize,
    /// (when it ended, acknowledged) of every write.
    events: Vec<(Instant, bool)>,
}

impl Ledger {
    fn acked(&self) -> usize {
        self.events.iter().filter(|(_, ok)| *ok).count()
    }

    fn acked_since(&self, t: Instant) -> usize {
        self.events.iter().filter(|(at, ok)| *ok && *at > t).count()
    }

    /// The first failure after `kill` to the first success after that failure, and `kill` to
    /// the first success after the first failure (or after `kill` when nothing failed).
    fn window(&self, kill: Instant) -> (Option<Duration>, Option<Duration>) {
        let first_fail = self.events.iter().find(|(at, ok)| !ok && *at > kill);
        let from = first_fail.map_or(kill, |(at, _)| *at);
        let back = self.events.iter().find(|(at, ok)| *ok && *at > from);
        let outage = first_fail.zip(back).map(|((f, _), (b, _))| *b - *f);
        (outage, back.map(|(b, _)| *b - kill))
    }
}

/// One write by a client: a note or a session item, acknowledged with what it stored.
enum Acked {
    Note(u64),
    Item,
}

fn cli_write(host: &Host, i: usize) -> (String, Option<Acked>) {
    if i.is_multiple_of(2) {
        let text = format!("cli note {i}");
        let o = host.run(&["note", &text], None);
        let id = saved_id(&o.out).filter(|_| o.ok());
        (text, id.map(Acked::Note))
    } else {
        let text = format!("cli item {i}");
        let item = json!([{"role": "user", "content": text}]).to_string();
        let o = host.run(&["session", "append", "cli"], Some(&item));
        (text, o.ok().then_some(Acked::Item))
    }
}

fn mcp_write(s: &mut StdioServer, i: usize) -> (String, Option<Acked>) {
    let ok = |r: &Value| r["isError"] == false;
    if i.is_multiple_of(2) {
        let text = format!("mcp note {i}");
        let r = s.call("note", json!({"text": text}));
        let id = r["structuredContent"]["id"].as_u64().filter(|_| ok(&r));
        (text, id.map(Acked::Note))
    } else {
        let text = format!("mcp item {i}");
        let items = json!([{"role": "user", "content": text}]);
        let r = s.call("session_append", json!({"id": "mcp", "items": items}));
        (text, ok(&r).then_some(Acked::Item))
    }
}

/// Runs `write` until `stop` (or the loop limit), recording each outcome into `ledger`.
fn client(
    stop: Arc<AtomicBool>,
    ledger: Arc<Mutex<Ledger>>,
    mut write: impl FnMut(usize) -> (String, Option<Acked>),
) {
    let start = Instant::now();
    let mut i = 0;
    while !stop.load(Ordering::SeqCst) && start.elapsed() < LOOP_LIMIT {
        let (text, acked) = write(i);
        let mut l = ledger.lock().expect("ledger");
        l.events.push((Instant::now(), acked.is_some()));
        match acked {
            Some(Acked::Note(id)) => l.notes.push((id, text)),
            Some(Acked::Item) => l.items.push(text),
            None => l.unknown += 1,
        }
        drop(l);
        i += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Waits (at most `limit`) until `done` holds for both ledgers.
fn wait_for(a: &Mutex<Ledger>, b: &Mutex<Ledger>, limit: Duration, done: impl Fn(&Ledger) -> bool) {
    let t = Instant::now();
    while t.elapsed() < limit {
        if done(&a.lock().expect("ledger")) && done(&b.lock().expect("ledger")) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Checks what the promoted server holds against `ledger`; returns (acknowledged, lost).
fn check(
    label: &str,
    held: &std::collections::BTreeMap<u64, String>,
    items: &[String],
    l: &Ledger,
) -> (usize, usize) {
    let mut lost: Vec<String> = l
        .notes
        .iter()
        .filter(|(id, text)| held.get(id) != Some(text))
        .map(|(id, text)| format!("#{id} {text:?}"))
        .collect();
    // Every acknowledged item, in order (an unknown one may sit between two of them).
    let mut at = items.iter();
    for text in &l.items {
        if !at.any(|t| t == text) {
            lost.push(format!("item {text:?}"));
        }
    }
    let acked = l.notes.len() + l.items.len();
    eprintln!(
        "[{label}] acknowledged {acked} / present {} / lost {} / unknown outcome {}",
        acked - lost.len(),
        lost.len(),
        l.unknown
    );
    assert!(lost.is_empty(), "[{label}] acknowledged but lost: {lost:?}");
    (acked, lost.len())
}

#[test]
fn patroni_promotes_the_replica_and_no_acknowledged_write_is_lost() {
    if test_server_url().is_none() {
        return;
    }
    let Some(cluster) = Cluster::start() else {
        return;
    };
    let url = with_query(&cluster.url, "schema", &fresh_schema_name());
    eprintln!("[patroni] store: {url}");
    let host = Host::new(&url);
    host.ok(&["init"]);
    let env = Env {
        dir: tempfile::tempdir().expect("tempdir"),
        db: url.clone().into(),
    };
    let mut mcp = StdioServer::start(&env, &["--busy-timeout-ms", BUSY_TIMEOUT_MS], &[]);

    let stop = Arc::new(AtomicBool::new(false));
    let (cli_l, mcp_l) = (Arc::default(), Arc::default());
    let threads = [
        {
            let (stop, l, url) = (stop.clone(), Arc::clone(&cli_l), url.clone());
            std::thread::spawn(move || {
                let host = Host::new(&url);
                client(stop, l, |i| cli_write(&host, i));
            })
        },
        {
            let (stop, l) = (stop.clone(), Arc::clone(&mcp_l));
            std::thread::spawn(move || client(stop, l, |i| mcp_write(&mut mcp, i)))
        },
    ];

    // A few seconds of load: at least 20 acknowledged writes by each client.
    wait_for(&cli_l, &mcp_l, Duration::from_secs(30), |l| l.acked() >= 20);
    for (label, l) in [("somna processes", &cli_l), ("somna mcp", &mcp_l)] {
        let before = l.lock().expect("ledger").acked();
        assert!(
            before >= 20,
            "[{label}] too little load to judge: {before} acknowledged"
        );
    }
    let kill = Instant::now();
    let old = cluster.verb("kill-leader", &[]);
    let new = cluster.verb("wait-leader", &[&old]);
    eprintln!(
        "[patroni] {old} killed; {new} leads after {:?}",
        kill.elapsed()
    );
    // Both clients write again: 10 acknowledged writes each after the kill.
    wait_for(&cli_l, &mcp_l, Duration::from_secs(90), |l| {
        l.acked_since(kill) >= 10
    });
    stop.store(true, Ordering::SeqCst);
    for t in threads {
        t.join().expect("a client");
    }

    let held = host.default_memories();
    let (cli, mcp) = (cli_l.lock().expect("ledger"), mcp_l.lock().expect("ledger"));
    check(
        "patroni, somna processes",
        &held,
        &host.session_contents("cli"),
        &cli,
    );
    check(
        "patroni, one somna mcp process",
        &held,
        &host.session_contents("mcp"),
        &mcp,
    );
    for (label, l) in [("somna processes", &cli), ("somna mcp", &mcp)] {
        let (outage, back) = l.window(kill);
        eprintln!(
            "[patroni, {label}] first failure to first success: {outage:?}; kill to first \
             success: {back:?}; acknowledged after the kill: {}",
            l.acked_since(kill)
        );
        assert!(
            l.acked_since(kill) > 0,
            "[{label}] never wrote after the failover"
        );
    }
    host.verify();
}
