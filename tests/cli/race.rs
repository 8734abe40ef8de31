//! Many `somna` processes writing one store at once never lose, duplicate or reorder a memory:
//! 16 concurrent `note` processes get exactly the ids 0..15, each id holds the text of the
//! process that was told it, and `verify` passes afterwards. A writer that finds the store held
//! by another waits for it (up to its busy timeout) instead of failing at once, and when the wait
//! runs out it fails as busy (exit 4) without writing; a reader never waits without bound.

use std::io::Write;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use somna::{NewMemory, Options, Store};

use crate::common::{wait_within, Env};

/// The binary with `args`, stdin null and the output piped, for processes run side by side.
trait RaceEnv {
    fn command(&self, args: &[&str]) -> Command;
}

impl RaceEnv for Env {
    /// The binary with `args`, stdin null and the output piped.
    fn command(&self, args: &[&str]) -> Command {
        let mut c = self.cmd();
        c.args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c
    }
}

fn saved_id(out: &str) -> u64 {
    let first = out.lines().next().unwrap_or_default();
    first
        .strip_prefix("Saved as #")
        .and_then(|s| s.strip_suffix('.'))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a `Saved as #N.` line: {out:?}"))
}

fn finish(child: Child) -> (i32, String, String) {
    let o = child.wait_with_output().expect("wait somna");
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8(o.stdout).expect("UTF-8"),
        String::from_utf8(o.stderr).expect("UTF-8"),
    )
}

#[test]
fn sixteen_concurrent_notes_get_ids_0_to_15() {
    let e = Env::init();
    // Half the writers give the text as an argument, half on stdin; all start before any ends.
    let children: Vec<(usize, Child)> = (0..16)
        .map(|k| {
            let text = format!("writer {k:02} was here");
            let child = if k % 2 == 0 {
                e.command(&["note", &text]).spawn().expect("spawn")
            } else {
                let mut c = e.command(&["note", "-"]);
                c.stdin(Stdio::piped());
                let mut child = c.spawn().expect("spawn");
                let mut stdin = child.stdin.take().expect("stdin");
                stdin.write_all(text.as_bytes()).expect("write stdin");
                drop(stdin);
                child
            };
            (k, child)
        })
        .collect();
    let mut got: Vec<(u64, usize)> = Vec::new();
    for (k, child) in children {
        let (code, out, err) = finish(child);
        assert_eq!(code, 0, "writer {k} failed: {err}");
        got.push((saved_id(&out), k));
    }
    let mut ids: Vec<u64> = got.iter().map(|g| g.0).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..16).collect::<Vec<u64>>(), "ids lost or duplicated");
    // Each id holds the text of the writer that was told it.
    let recall = e.ok(&["recall", "writer"]);
    let lines: Vec<&str> = recall.lines().collect();
    assert_eq!(lines.len(), 17, "{recall}");
    assert_eq!(lines[16], "16 matches.");
    for (id, k) in &got {
        let line = lines[*id as usize];
        assert!(line.starts_with(&format!("#{id} ")), "{line}");
        assert!(line.ends_with(&format!("writer {k:02} was here")), "{line}");
    }
    // Every completed block is pending exactly once: 16 - popcount(16) = 15.
    assert_eq!(e.ok(&["pending"]).lines().count(), 15);
    assert!(e
        .ok(&["verify"])
        .starts_with("OK: 1 scope, 16 memories, 0 summaries"));
}

#[test]
fn concurrent_naps_and_notes_keep_the_store_consistent() {
    let e = Env::init();
    for i in 0..8 {
        e.ok(&["note", &format!("seed {i}")]);
    }
    // Eight processes all answer the same merge while eight more notes land.
    let naps: Vec<Child> = (0..8)
        .map(|k| {
            e.command(&["nap", "0-1", &format!("answer {k}")])
                .spawn()
                .expect("spawn")
        })
        .collect();
    let notes: Vec<Child> = (0..8)
        .map(|k| {
            e.command(&["note", &format!("late {k}")])
                .spawn()
                .expect("spawn")
        })
        .collect();
    let mut saved = 0;
    for child in naps {
        let (code, out, err) = finish(child);
        assert_eq!(code, 0, "{err}");
        if out.starts_with("Saved 0-1.") {
            saved += 1;
        } else {
            assert!(out.starts_with("0-1 is already settled.\n"), "{out}");
        }
    }
    assert_eq!(saved, 1, "exactly one answer is stored");
    let mut ids: Vec<u64> = notes
        .into_iter()
        .map(|c| {
            let (code, out, err) = finish(c);
            assert_eq!(code, 0, "{err}");
            saved_id(&out)
        })
        .collect();
    ids.sort_unstable();
    assert_eq!(ids, (8..16).collect::<Vec<u64>>());
    assert!(e.ok(&["zoom", "0-3"]).starts_with("#0-1 answer "));
    assert!(e
        .ok(&["verify"])
        .starts_with("OK: 1 scope, 16 memories, 1 summary"));
}

#[test]
fn a_second_writer_waits_for_the_first() {
    let e = Env::init();
    let store = Store::open(&e.db).expect("open");
    let child = store
        .write(|tx| {
            let id = tx.note("default", NewMemory::new("held by the test"))?;
            assert_eq!(id, 0);
            // While this transaction is open, another process tries to write.
            let child = e
                .command(&["note", "--busy-timeout-ms", "60000", "the waiting writer"])
                .spawn()
                .expect("spawn");
            std::thread::sleep(Duration::from_millis(700));
            Ok(child)
        })
        .expect("commit");
    // It waited instead of failing, and its note comes after the one it waited for.
    let (code, out, err) = finish(child);
    assert_eq!(
        code, 0,
        "the second writer failed instead of waiting: {err}"
    );
    assert_eq!(saved_id(&out), 1);
    drop(store);
    let r = e.ok(&["recall", "."]);
    assert!(
        r.contains("#0 ") && r.contains(" held by the test\n"),
        "{r}"
    );
    assert!(r.contains(" the waiting writer\n2 matches.\n"), "{r}");
}

/// Waits for `child` while the caller holds the store. A child that never exits (it blocks
/// without bound instead of giving up) is killed after `watchdog` so the test fails instead of
/// deadlocking; returns `None` then.
fn wait_or_kill(mut child: Child, watchdog: Duration) -> Option<(i32, String, String)> {
    wait_within(&mut child, watchdog)?;
    Some(finish(child))
}

#[test]
fn a_writer_that_waits_too_long_fails_busy_and_writes_nothing() {
    let e = Env::init();
    let store = Store::open_with(&e.db, Options::default()).expect("open");
    let result = store
        .write(|tx| {
            tx.note("default", NewMemory::new("held until the other gives up"))?;
            // The other writer's wait is bounded (300 ms): it must give up while we still hold
            // the store. The watchdog is only there so that an unbounded wait fails the test
            // instead of hanging it.
            let child = e
                .command(&["--busy-timeout-ms", "300", "note", "impatient"])
                .spawn()
                .expect("spawn");
            Ok(wait_or_kill(child, Duration::from_secs(5)))
        })
        .expect("commit");
    drop(store);
    let (code, out, err) =
        result.expect("--busy-timeout-ms 300 was not honoured: the writer was still waiting");
    assert_eq!(code, 4, "expected busy: {out} {err}");
    assert!(out.is_empty(), "{out}");
    assert!(err.contains("busy"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let r = e.ok(&["recall", "."]);
    assert!(!r.contains("impatient"), "{r}");
    assert!(r.ends_with("1 match.\n"), "{r}");
    assert!(e.ok(&["verify"]).starts_with("OK: "));
}

#[test]
fn a_reader_is_not_held_up_without_bound_by_a_writer() {
    let e = Env::init();
    e.ok(&["note", "committed before"]);
    let store = Store::open(&e.db).expect("open");
    let result = store
        .write(|tx| {
            tx.note("default", NewMemory::new("not committed yet"))?;
            // wake only reads: it must either read the last committed state or give up as busy
            // after its timeout, never wait for as long as the writer pleases.
            let child = e
                .command(&["--busy-timeout-ms", "300", "wake"])
                .spawn()
                .expect("spawn");
            Ok(wait_or_kill(child, Duration::from_secs(5)))
        })
        .expect("commit");
    drop(store);
    let (code, out, err) =
        result.expect("wake waited without bound for another process's write transaction");
    match code {
        0 => {
            assert!(out.contains("committed before"), "{out}");
            assert!(
                !out.contains("not committed yet"),
                "read uncommitted data: {out}"
            );
        }
        4 => assert!(err.contains("busy"), "{err}"),
        _ => panic!("wake failed: {code} {out} {err}"),
    }
}

/// A long-running process that wrote (an MCP server) hides nothing other processes wrote after
/// it when it exits. Its close writes the header that marks the file consistent from its own
/// state: when its last commit is still the file's latest it writes that header alone, and when
/// another process committed since it commits once first, to reach the file's latest commit.
/// Both orders, then every note is there in order, `verify` passes, and a read-only open (which
/// refuses a file left to recover with no writer alive) reads them all.
#[cfg(feature = "mcp")]
#[test]
fn a_server_exiting_behind_other_writers_hides_none_of_their_notes() {
    use crate::common::mcp::StdioServer;
    use serde_json::json;

    let e = Env::init();
    let note = |s: &mut StdioServer, text: &str| {
        let r = s.call("note", json!({ "text": text }));
        assert_ne!(r["isError"], true, "{r}");
    };
    // The server writes last: its close owes no commit.
    let mut s = StdioServer::start(&e, &[], &[]);
    e.ok(&["note", "cli 0"]);
    note(&mut s, "server 0");
    assert!(s.exit().is_some_and(|st| st.success()), "the server exits");
    // Other processes write after the server: its close commits first.
    let mut s = StdioServer::start(&e, &[], &[]);
    note(&mut s, "server 1");
    for i in 1..4 {
        e.ok(&["note", &format!("cli {i}")]);
    }
    assert!(s.exit().is_some_and(|st| st.success()), "the server exits");
    e.ok(&["note", "cli 4"]);
    let want = [
        "cli 0", "server 0", "server 1", "cli 1", "cli 2", "cli 3", "cli 4",
    ];
    let export = e.export();
    let at: Vec<usize> = want
        .iter()
        .map(|t| {
            export
                .find(&format!("\"{t}\""))
                .unwrap_or_else(|| panic!("{t}: {export}"))
        })
        .collect();
    assert!(at.is_sorted(), "in order: {at:?}");
    assert!(e.ok(&["verify"]).starts_with("OK: 1 scope, 7 memories"));
    if !e.on_server() {
        let ro = Store::open_with(&e.db, Options::default().read_only(true)).expect("read-only");
        let texts: Vec<String> = ro
            .read(|r| r.memories("default", 0, 10))
            .expect("read")
            .into_iter()
            .map(|m| m.text)
            .collect();
        assert_eq!(texts, want);
    }
}
