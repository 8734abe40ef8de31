//! A read never writes. Every read verb of the real `somna` (wake, recall, zoom, show, why,
//! pending, nap without an answer, stats, export, verify, config and policy listings, grants,
//! audit, session load/items/list/history/info/export-dir) and `init` on an existing store
//! leave the store file byte-identical, its mtime included; each works on a file this user may
//! only read (mode 0400, or, when the tests run as root, the file read by the `nobody` user);
//! readers run while another process holds the write lock; and with the read audit on, a read
//! on a file the user may only read fails with an error naming the audit instead of reading
//! unaudited.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::{run_raw, Env, Raw};

/// Every read verb, as arguments (`session export-dir` gets its folder appended).
const READS: &[&[&str]] = &[
    &["wake"],
    &["wake", "--all"],
    &["recall", "deploy"],
    &["search", "deploy"],
    &["zoom", "0-1"],
    &["show", "1"],
    &["why", "0-1"],
    &["pending"],
    &["nap"],
    &["nap", "--batch", "2"],
    &["stats"],
    &["export"],
    &["verify"],
    &["config"],
    &["policy"],
    &["grants"],
    &["audit"],
    &["session", "load", "chat-1"],
    &["session", "items", "chat-1", "--limit", "1"],
    &["session", "list"],
    &["session", "history", "chat-1"],
    &["session", "info", "chat-1"],
    &["init"],
];

fn ok(env: &Env, args: &[&str], input: Option<&[u8]>) -> String {
    let mut c = env.cmd();
    c.args(args);
    let r = run_raw(c, input);
    assert_eq!(r.code, 0, "somna {args:?}: {r:?}");
    String::from_utf8(r.out).expect("utf-8 output")
}

/// A store with memories, a summary, a pending merge, a grant and a session with history.
fn build() -> Env {
    let env = Env::new();
    ok(&env, &["init"], None);
    for t in [
        "deploys go through staging",
        "the user prefers tabs",
        "ci runs nextest",
    ] {
        ok(&env, &["note", t], None);
    }
    ok(
        &env,
        &["nap", "0-1", "deploys via staging [#0]; tabs [#1]"],
        None,
    );
    ok(&env, &["grant", "user:bob", "read", "default"], None);
    ok(
        &env,
        &["session", "save", "chat-1"],
        Some(br#"[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"}]"#),
    );
    ok(
        &env,
        &["session", "save", "chat-1"],
        Some(br#"[{"role":"user","content":"again"}]"#),
    );
    env
}

/// The file's bytes and its modification time.
fn snapshot(path: &Path) -> (Vec<u8>, std::time::SystemTime) {
    let bytes = std::fs::read(path).expect("read the store");
    let mtime = std::fs::metadata(path)
        .and_then(|m| m.modified())
        .expect("mtime");
    (bytes, mtime)
}

fn read_args(env: &Env, args: &[&str]) -> Vec<String> {
    let mut v: Vec<String> = args.iter().map(|s| s.to_string()).collect();
    if args == ["init"] {
        return v;
    }
    if v.first().map(String::as_str) == Some("session")
        && v.get(1).map(String::as_str) == Some("export-dir")
    {
        v.push(env.dir.path().join("out").to_string_lossy().into_owned());
    }
    v
}

/// Whether the tests run as root (`id -u`: no unsafe `geteuid` call needed).
fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// `somna` as a user who may only read the store: mode 0400 for a normal user; as root (who
/// may write any file), the `nobody` user on a file it may read but not write.
fn read_only_cmd(env: &Env) -> Command {
    use std::os::unix::fs::PermissionsExt;
    use std::os::unix::process::CommandExt;
    let mut c = env.cmd();
    if is_root() {
        std::fs::set_permissions(env.dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod dir");
        std::fs::set_permissions(&env.db, std::fs::Permissions::from_mode(0o644))
            .expect("chmod file");
        c.uid(65534).gid(65534).env("HOME", "/tmp");
    } else {
        std::fs::set_permissions(&env.db, std::fs::Permissions::from_mode(0o400))
            .expect("chmod file");
    }
    c
}

#[test]
fn every_read_verb_leaves_the_file_byte_identical() {
    let env = build();
    let before = snapshot(&env.db);
    // Let a write show up as a changed mtime even on coarse clocks.
    std::thread::sleep(Duration::from_millis(20));
    let mut reads = READS.to_vec();
    reads.push(&["session", "export-dir"]);
    for args in reads {
        let args = read_args(&env, args);
        let a: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(&env, &a, None);
        let after = snapshot(&env.db);
        assert!(before.0 == after.0, "somna {a:?} changed the file's bytes");
        assert_eq!(before.1, after.1, "somna {a:?} changed the file's mtime");
    }
}

#[test]
fn every_read_verb_works_on_a_file_the_user_may_only_read() {
    let env = build();
    let wake = ok(&env, &["wake"], None);
    let before = snapshot(&env.db);
    for args in READS {
        let mut c = read_only_cmd(&env);
        c.args(*args);
        let r = run_raw(c, None);
        assert_eq!(r.code, 0, "somna {args:?} on a read-only file: {r:?}");
        if *args == ["wake"] {
            assert_eq!(String::from_utf8_lossy(&r.out), wake, "wake reads the same");
        }
    }
    assert!(snapshot(&env.db).0 == before.0, "a read changed the file");
    // A write is refused with a clear error naming the file, exit 6.
    let mut c = read_only_cmd(&env);
    c.args(["note", "a write"]);
    let r = run_raw(c, None);
    let err = String::from_utf8_lossy(&r.err);
    assert_eq!(r.code, 6, "{r:?}");
    assert!(err.contains("may not write"), "{err}");
}

#[test]
fn with_the_read_audit_on_a_read_of_a_read_only_file_names_the_audit() {
    let env = build();
    ok(&env, &["config", "AUDIT=1"], None);
    // A user who may write: the read is recorded.
    ok(&env, &["wake"], None);
    let audit = ok(&env, &["audit"], None);
    assert!(audit.contains(" wake default "), "{audit}");
    let before = snapshot(&env.db);
    let mut c = read_only_cmd(&env);
    c.args(["wake"]);
    let r = run_raw(c, None);
    let err = String::from_utf8_lossy(&r.err);
    assert_eq!(r.code, 6, "{r:?}");
    assert!(err.contains("read audit is on (AUDIT=1)"), "{err}");
    assert!(r.out.is_empty(), "nothing is shown unaudited: {r:?}");
    assert!(snapshot(&env.db).0 == before.0);
}

#[test]
fn readers_run_while_another_process_holds_the_write_lock() {
    let env = build();
    // This process holds the write lock (a write transaction kept open) while the readers,
    // other processes, run. A reader that waited for the writer would never finish (the writer
    // waits for the readers), and would fail busy after its timeout: exit 4, not 0.
    let store = somna::Store::open(&env.db).expect("open");
    let (hold_tx, hold_rx) = std::sync::mpsc::channel::<()>();
    let (held_tx, held_rx) = std::sync::mpsc::channel::<()>();
    let writer = std::thread::spawn(move || {
        store
            .write(|tx| {
                tx.note(
                    "default",
                    somna::NewMemory::new("written while readers read"),
                )?;
                held_tx.send(()).expect("signal");
                hold_rx.recv().expect("wait");
                Ok(())
            })
            .expect("the write commits");
    });
    held_rx.recv().expect("the writer holds the lock");
    let readers: Vec<_> = (0..4)
        .map(|_| {
            let mut c = env.cmd();
            c.args(["--busy-timeout-ms", "20000", "wake"]);
            std::thread::spawn(move || run_raw(c, None))
        })
        .collect();
    let results: Vec<Raw> = readers
        .into_iter()
        .map(|h| h.join().expect("join"))
        .collect();
    hold_tx.send(()).expect("release");
    writer.join().expect("writer");
    for r in &results {
        assert_eq!(r.code, 0, "{r:?}");
        let out = String::from_utf8_lossy(&r.out);
        assert!(
            !out.contains("written while readers read"),
            "a reader saw an uncommitted write"
        );
    }
    let after = ok(&env, &["recall", "written while readers read"], None);
    assert!(after.contains("1 match"), "{after}");
}

/// Appends `tail` to a copy of a sound store (or cuts it), runs `wake` and `export` and checks
/// that nothing is lost, that the stray bytes are in the side file, and that the note is said
/// once.
fn damaged_tail_recovers(extra: &[u8], cut: u64) {
    let env = build();
    let export = ok(&env, &["export"], None);
    let wake = ok(&env, &["wake"], None);
    let len = std::fs::metadata(&env.db).expect("stat").len();
    {
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&env.db)
            .expect("open for append");
        std::io::Write::write_all(&mut f, extra).expect("append");
        f.set_len(len + extra.len() as u64 - cut).expect("cut");
    }
    let damaged = std::fs::read(&env.db).expect("read the damaged file");
    let mut c = env.cmd();
    c.arg("wake");
    let r = run_raw(c, None);
    let err = String::from_utf8_lossy(&r.err);
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(String::from_utf8_lossy(&r.out), wake, "wake reads the same");
    assert!(
        err.contains("somna: note:") && err.contains("torn tail"),
        "{err}"
    );
    assert_eq!(ok(&env, &["export"], None), export, "export reads the same");
    let mut c = env.cmd();
    c.arg("wake");
    let again = run_raw(c, None);
    assert!(again.err.is_empty(), "said once: {again:?}");
    let sides: Vec<_> = std::fs::read_dir(env.dir.path())
        .expect("list")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.to_string_lossy().contains(".torn-tail-"))
        .collect();
    // The file is cut back to a whole layout (its recorded one, which may end before the
    // original length: redb can leave free pages past it), or padded to the next page; what
    // was cut off, the end of the damaged file, is in the side file byte for byte.
    assert!(sides.len() <= 1, "{sides:?}");
    match sides.first() {
        Some(side) => {
            let kept = std::fs::read(side).expect("side");
            assert!(kept.len() <= damaged.len());
            assert_eq!(
                kept,
                damaged[damaged.len() - kept.len()..],
                "the side file holds what was cut off"
            );
            assert!(kept.ends_with(extra), "the stray bytes are among them");
        }
        None => assert!(extra.is_empty(), "stray bytes dropped without a side file"),
    }
    assert!(ok(&env, &["verify"], None).starts_with("OK:"));
}

#[test]
fn stray_bytes_at_the_end_are_moved_aside_and_nothing_is_lost() {
    let mut rng = somna_testkit::simdisk::SimRng::new(7);
    for n in [1usize, 3, 511, 4095, 4097, 65537] {
        damaged_tail_recovers(&vec![0; n], 0);
        let random: Vec<u8> = (0..n).map(|_| rng.next_u64() as u8).collect();
        damaged_tail_recovers(&random, 0);
    }
}

#[test]
fn a_file_extended_by_set_len_and_never_written_is_recovered() {
    let env = build();
    let wake = ok(&env, &["wake"], None);
    let len = std::fs::metadata(&env.db).expect("stat").len();
    let f = std::fs::OpenOptions::new()
        .write(true)
        .open(&env.db)
        .expect("open");
    f.set_len(len + 1_000_003).expect("extend");
    drop(f);
    assert_eq!(ok(&env, &["wake"], None), wake);
    assert!(std::fs::metadata(&env.db).expect("stat").len() <= len);
    assert!(ok(&env, &["verify"], None).starts_with("OK:"));
}

#[test]
fn a_tail_cut_inside_the_last_page_is_padded_back_and_nothing_is_lost() {
    // A cut that takes only bytes the last page does not use (a crash while the file was being
    // extended): how many those are depends on where redb put the last commit's pages, so the
    // longest cut is the page's whole unused end. (A cut into live bytes is refused as damage:
    // tests/api/crash/torn_tail.rs.)
    let unused = {
        let env = build();
        let bytes = std::fs::read(&env.db).expect("read the store");
        let last_page = &bytes[bytes.len().saturating_sub(4096)..];
        last_page.iter().rev().take_while(|b| **b == 0).count() as u64
    };
    assert!(
        unused >= 100,
        "the last page's unused end is only {unused} bytes"
    );
    for cut in [1, 100, unused.min(4095)] {
        damaged_tail_recovers(&[], cut);
    }
}

#[test]
fn verify_on_a_torn_file_the_user_may_only_read_names_the_problem_and_the_fix() {
    let env = build();
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&env.db)
        .expect("open");
    std::io::Write::write_all(&mut f, b"abc").expect("append");
    drop(f);
    let mut c = read_only_cmd(&env);
    c.arg("verify");
    let r = run_raw(c, None);
    let err = String::from_utf8_lossy(&r.err);
    assert_eq!(r.code, 6, "{r:?}");
    assert!(err.contains("torn tail"), "names the problem: {err}");
    assert!(err.contains("somna verify"), "names the fix: {err}");
    assert!(
        !err.contains("region layout"),
        "not the opaque error: {err}"
    );
    // The fix, as a user who may write: verify recovers it and reports a sound store.
    let mut c = env.cmd();
    c.arg("verify");
    let r = run_raw(c, None);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(String::from_utf8_lossy(&r.out).starts_with("OK:"), "{r:?}");
}
