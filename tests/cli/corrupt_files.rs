//! A damaged store file is a clear error, never a crash. A real store (two scopes, notes,
//! summaries, a forget, settings, sessions with an archive, idempotency keys) is copied, one
//! byte is changed at many offsets (the header, then every page), and every command of the
//! real CLI runs on each copy: its exit status must not be 101 (an uncaught panic) nor a signal,
//! it must not hang, a failure must say why on stderr, and stderr must never say "panicked": redb
//! panics on some damaged pages, and somna must turn each of those panics into "the store file
//! is damaged" (exit 5), including the ones raised while closing the file, and including the
//! damaged allocator page on which redb 4.6.0 panicked twice and aborted the process (fixed by
//! the patch in vendor/). The library's `open` + reads + `verify` on each copy must return an
//! error or a report, never panic; and redb's `set_check_integrity_on_open` is checked to turn
//! every sampled damage into an error (what `Options::check_on_open` offers).
//!
//! `SOMNA_CRASH_LONG=1` damages many more offsets.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use somna::{Block, NewMemory, Store, WakeOptions};
use somna_testkit::simdisk::SimRng;

const BIN: &str = env!("CARGO_BIN_EXE_somna");

fn long() -> bool {
    std::env::var("SOMNA_CRASH_LONG").is_ok_and(|v| v == "1")
}

/// Builds the store that gets damaged, and returns its bytes.
fn build(path: &Path) -> Vec<u8> {
    let store = Store::create(path).unwrap();
    store.set_config("SESSION_ARCHIVE_MAX", "5").unwrap();
    for i in 0..150 {
        let scope = if i % 5 == 0 {
            "project:acme"
        } else {
            "default"
        };
        let key = format!("k{i}");
        store
            .append(
                scope,
                vec![NewMemory::new(format!(
                    "note number {i}, with a little padding text"
                ))],
                (i % 7 == 0).then_some(key.as_str()),
            )
            .unwrap();
    }
    for _ in 0..40 {
        if let Some(p) = store.next_prompt("default").unwrap() {
            store
                .nap("default", p.block, "a summary of those notes")
                .unwrap();
        }
    }
    let batch: Vec<(Block, String)> = store
        .read(|r| r.prompts("default", 4))
        .unwrap()
        .iter()
        .map(|p| (p.block, "batched summary".to_string()))
        .collect();
    if !batch.is_empty() {
        store.nap_many("default", batch).unwrap();
    }
    store.forget("default", "0-1".parse().unwrap()).unwrap();
    for i in 0..20 {
        let m = format!(
            r#"{{"role":"user","content":"message {i} {}"}}"#,
            "x".repeat(200)
        );
        store
            .session_append("s1", &[&m], Some(&format!("sk{i}")), None)
            .unwrap();
    }
    store
        .session_save("s2", &[r#"{"a":1}"#, r#"{"b":2}"#], None)
        .unwrap();
    store
        .session_save("s2", &[r#"{"b":2}"#, r#"{"c":3}"#], None)
        .unwrap();
    drop(store);
    std::fs::read(path).unwrap()
}

/// The offsets to damage: the first bytes of the header, then seeded offsets in every page
/// (more of them in the long run).
fn offsets(len: usize, per_page: u64, seed: u64) -> Vec<usize> {
    let mut rng = SimRng::new(seed);
    let mut out: Vec<usize> = (0..64).step_by(3).collect();
    for page in 0..len / 4096 {
        for _ in 0..per_page {
            out.push(page * 4096 + rng.below(4096) as usize);
        }
    }
    out.retain(|o| *o < len);
    out
}

fn damaged(dir: &Path, bytes: &[u8], off: usize, seed: u64) -> PathBuf {
    let x = 1 + SimRng::new(seed ^ off as u64).below(255) as u8;
    damaged_with(dir, bytes, off, x)
}

fn damaged_with(dir: &Path, bytes: &[u8], off: usize, x: u8) -> PathBuf {
    let mut b = bytes.to_vec();
    b[off] ^= x;
    let p = dir.join(format!("damaged-{off}.redb"));
    std::fs::write(&p, &b).unwrap();
    p
}

const COMMANDS: &[&[&str]] = &[
    &["wake"],
    &["recall", "note"],
    &["stats"],
    &["verify"],
    &["pending"],
    &["zoom", "0-3"],
    &["nap"],
    &["export"],
    &["config"],
    &["--scope", "project:acme", "wake"],
    &["session", "load", "s1"],
    &["session", "history", "s2"],
    &["note", "written to a damaged store"],
    &["session", "append", "s1"],
];

struct Outcome {
    code: Option<i32>,
    stdout: String,
    stderr: String,
    hung: bool,
}

fn run(db: &Path, args: &[&str]) -> Outcome {
    let mut c = Command::new(BIN);
    c.arg("--db")
        .arg(db)
        .args(args)
        .env_remove("SOMNA_DB")
        .env_remove("SOMNA_SCOPE")
        .env("SOMNA_BUSY_TIMEOUT_MS", "5000")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write;
        let _ = stdin.write_all(br#"[{"role":"user","content":"appended"}]"#);
    }
    let drain = |r: Option<Box<dyn std::io::Read + Send>>| {
        std::thread::spawn(move || {
            let mut v = Vec::new();
            if let Some(mut r) = r {
                let _ = r.read_to_end(&mut v);
            }
            String::from_utf8_lossy(&v).into_owned()
        })
    };
    let out = drain(child.stdout.take().map(|s| Box::new(s) as _));
    let err = drain(child.stderr.take().map(|s| Box::new(s) as _));
    let status = crate::common::wait_within(&mut child, Duration::from_secs(30));
    Outcome {
        code: status.and_then(|s| s.code()),
        stdout: out.join().unwrap(),
        stderr: err.join().unwrap(),
        hung: status.is_none(),
    }
}

struct CliSweep {
    runs: u64,
    failed_cleanly: u64,
    internal_errors: Vec<String>,
    busy: Vec<String>,
    crashes: Vec<String>,
    misreported: Vec<String>,
}

fn cli_sweep() -> CliSweep {
    let dir = tempfile::tempdir().unwrap();
    let bytes = build(&dir.path().join("original.redb"));
    let per_page = if long() { 24 } else { 1 };
    let mut s = CliSweep {
        runs: 0,
        failed_cleanly: 0,
        internal_errors: Vec::new(),
        busy: Vec::new(),
        crashes: Vec::new(),
        misreported: Vec::new(),
    };
    for off in offsets(bytes.len(), per_page, 1) {
        let db = damaged(dir.path(), &bytes, off, 1);
        for args in COMMANDS {
            let o = run(&db, args);
            s.runs += 1;
            let what = format!("byte {off} changed, `somna {}`", args.join(" "));
            if o.hung {
                s.crashes.push(format!("{what}: hung for 30 s"));
            } else if o.code.is_none() || o.code == Some(101) {
                s.crashes
                    .push(format!("{what}: exit {:?}: {}", o.code, o.stderr.trim()));
            } else if o.stderr.contains("panicked") {
                s.internal_errors
                    .push(format!("{what}: exit {:?}: {}", o.code, o.stderr.trim()));
            } else if o.code == Some(4) || o.stderr.contains("busy") {
                // Nobody else has the file open: "busy" misreports a failed open.
                s.busy.push(format!("{what}: {}", o.stderr.trim()));
            } else if o.code != Some(0) {
                // An error on stderr; or, for verify and recall, the damage reported on stdout.
                let said = o.stderr.starts_with("somna: ")
                    || o.stdout.contains("PROBLEM")
                    || o.stdout.contains("damaged record");
                if !said {
                    s.crashes
                        .push(format!("{what}: failed without a message: {:?}", o.stderr));
                } else if o.code != Some(5) {
                    s.misreported
                        .push(format!("{what}: exit {:?}: {}", o.code, o.stderr.trim()));
                }
                s.failed_cleanly += 1;
            }
        }
        std::fs::remove_file(&db).unwrap();
    }
    eprintln!(
        "corrupt files (CLI): {} runs, {} clean errors, {} internal errors (escaped panics), {} misreported as busy, {} other exit codes, {} crashes or hangs",
        s.runs,
        s.failed_cleanly,
        s.internal_errors.len(),
        s.busy.len(),
        s.misreported.len(),
        s.crashes.len()
    );
    s
}

/// No uncaught panic (exit 101), no signal, no hang, no "internal error" (a panic of redb that
/// escaped the library), no "busy", and every failure says why: damage is reported as damage
/// (exit 5), never as a generic I/O or storage error.
#[test]
fn a_damaged_store_never_panics_in_any_command() {
    let s = cli_sweep();
    assert!(
        s.internal_errors.is_empty()
            && s.busy.is_empty()
            && s.crashes.is_empty()
            && s.misreported.is_empty(),
        "{} crashes, {} internal errors, {} busy, {} misreported:\n{}\n{}\n{}\n{}",
        s.crashes.len(),
        s.internal_errors.len(),
        s.busy.len(),
        s.misreported.len(),
        s.crashes.join("\n"),
        s.internal_errors.join("\n"),
        s.busy.join("\n"),
        s.misreported.join("\n")
    );
}

/// Damage at the start of an early page (the fixture's page 2) makes redb panic inside
/// `open()`, which somna runs on a helper thread (`open_bounded`); the thread dies, its channel
/// disconnects, and somna reports `Error::Busy` ("the store is busy: another writer held it for
/// 0 ms; try again", exit 4) although nobody else has the file open: a caller that retries on
/// busy retries forever. (Offsets depend on the fixture's layout: the first bytes of pages 1-5.)
#[test]
fn a_damaged_store_is_never_reported_busy() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = build(&dir.path().join("original.redb"));
    let mut busy = Vec::new();
    for off in (1..6).flat_map(|p| p * 4096..p * 4096 + 32) {
        let db = damaged_with(dir.path(), &bytes, off, 0x5a);
        let o = run(&db, &["stats"]);
        if o.code == Some(4) || o.stderr.contains("busy") {
            busy.push(format!(
                "byte {off}: exit {:?}: {}",
                o.code,
                o.stderr.trim()
            ));
        }
        let lib = std::panic::catch_unwind(|| Store::open(&db).map(drop));
        if let Ok(Err(e @ somna::Error::Busy { .. })) = lib {
            busy.push(format!("byte {off}: Store::open: {e}"));
        }
        std::fs::remove_file(&db).unwrap();
    }
    assert!(busy.is_empty(), "{}", busy.join("\n"));
}

/// Damage in a page of redb's allocated-pages table (in this fixture, bytes of page 1 such as
/// 4316, xor 0x5a) opens and reads fine, but every commit, including the one that closes a
/// multi-writer handle, reads that table: redb panics in `flush_data_allocated_pages`, and
/// redb 4.6.0's `ExtractIf` destructor then panicked again while unwinding, which aborts the
/// process (SIGABRT) where no `catch_unwind` can help. With the patch in vendor/ the second panic
/// cannot happen, and the CLI reports the damage (exit 5). Every byte of the first 512 of pages 1
/// and 2 (where this fixture keeps redb's bookkeeping) is damaged in turn.
#[test]
fn a_damaged_store_never_aborts_a_command() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = build(&dir.path().join("original.redb"));
    let mut aborted = Vec::new();
    let mut failed = 0;
    for off in (4096..4608).chain(8192..8704) {
        let db = damaged_with(dir.path(), &bytes, off, 0x5a);
        let o = run(&db, &["stats"]);
        let mut outcomes = vec![("stats", o)];
        if outcomes[0].1.code != Some(0) {
            failed += 1;
            outcomes.push(("note x", run(&db, &["note", "x"])));
        }
        for (args, o) in outcomes {
            if o.code.is_none() || o.code == Some(134) || o.stderr.contains("panicked") {
                aborted.push(format!(
                    "byte {off}, `somna {args}`: exit {:?}: {}",
                    o.code,
                    o.stderr.trim()
                ));
            }
        }
        std::fs::remove_file(&db).unwrap();
    }
    eprintln!("allocator pages: 1024 damaged copies, {failed} refused by `stats`");
    assert!(aborted.is_empty(), "{}", aborted.join("\n"));
}

fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_default()
}

/// Opens, verifies and wakes every damaged copy through the library; returns the panics.
fn library_sweep(per_page: u64) -> (u64, u64, u64, Vec<String>) {
    let dir = tempfile::tempdir().unwrap();
    let bytes = build(&dir.path().join("original.redb"));
    let (mut reported, mut intact, mut refused) = (0, 0, 0);
    let mut panics = Vec::new();
    // Seeded offsets in every page, and parts of pages 1 and 2 (where this fixture keeps redb
    // bookkeeping that panics when damaged, and where byte 4316 aborted the process before the
    // patch in vendor/).
    let mut offs = offsets(bytes.len(), per_page, 2);
    offs.extend((4300..4340).chain(8192..8240));
    for off in offs {
        let db = damaged(dir.path(), &bytes, off, 2);
        let image = std::fs::read(&db).unwrap();
        let r = std::panic::catch_unwind(|| -> Result<bool, somna::Error> {
            let mut store = Store::open(&db)?;
            let reads = (|| -> Result<(), somna::Error> {
                store.wake_text("default", &WakeOptions::default())?;
                store.read(|r| r.stats())?;
                store.recall("default", &somna::RecallQuery::new("note"))?;
                store.session_load("s1")?;
                store.session_archived("s2")?;
                store.export(&mut std::io::sink())?;
                Ok(())
            })();
            let report = store.verify()?;
            reads?;
            store.close()?;
            Ok(report.ok())
        });
        match r {
            Ok(Ok(true)) => intact += 1,
            Ok(Ok(false)) => reported += 1,
            Ok(Err(_)) => refused += 1,
            Err(p) => panics.push(format!("byte {off}: {}", panic_message(p))),
        }
        // The same image through a storage backend (how hosts and the crash tests open stores).
        let r = std::panic::catch_unwind(|| {
            let disk = somna_testkit::simdisk::SimDisk::from_image(image, off as u64);
            let store = Store::with_backend(disk, "damaged", somna::Options::default())?;
            store.wake_text("default", &WakeOptions::default())?;
            store.close()
        });
        if let Err(p) = r {
            panics.push(format!("byte {off}, backend: {}", panic_message(p)));
        }
        std::fs::remove_file(&db).unwrap();
    }
    eprintln!(
        "corrupt files (library): {} copies: {intact} unaffected (unused bytes), {reported} reported by verify, {refused} refused with an error, {} panics",
        intact + reported + refused + panics.len() as u64,
        panics.len()
    );
    (intact, reported, refused, panics)
}

#[test]
fn a_damaged_store_gives_an_error_or_a_report_from_open_verify_and_wake() {
    let (_, _, _, panics) = library_sweep(if long() { 24 } else { 4 });
    assert!(
        panics.is_empty(),
        "{} panics:\n{}",
        panics.len(),
        panics.join("\n")
    );
}

/// The premise of the suggested fix: with redb's integrity check on open, every sampled damage
/// is an error or goes unnoticed (bytes no live page uses), never a panic.
#[test]
fn redb_integrity_check_on_open_turns_damage_into_errors() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = build(&dir.path().join("original.redb"));
    let (mut ok, mut refused) = (0u64, 0u64);
    let mut panics = Vec::new();
    for off in offsets(bytes.len(), if long() { 24 } else { 4 }, 3) {
        let db = damaged(dir.path(), &bytes, off, 3);
        let r = std::panic::catch_unwind(|| {
            let mut b = redb::Database::builder();
            b.set_check_integrity_on_open(true);
            b.open(&db).map(drop)
        });
        match r {
            Ok(Ok(())) => ok += 1,
            Ok(Err(_)) => refused += 1,
            Err(p) => panics.push(format!("byte {off}: {}", panic_message(p))),
        }
        std::fs::remove_file(&db).unwrap();
    }
    eprintln!(
        "corrupt files (redb, integrity check on open): {ok} opened, {refused} refused, {} panics",
        panics.len()
    );
    assert!(panics.is_empty(), "{}", panics.join("\n"));
}

/// `somna verify` on a file that opens (other commands work) but whose damage redb's integrity
/// check finds must print a report (PROBLEM lines, exit 5), not an error that tells the user to
/// run `somna verify`.
#[test]
fn verify_reports_engine_damage_as_a_problem() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = build(&dir.path().join("original.redb"));
    let mut wrong = Vec::new();
    for off in offsets(bytes.len(), 1, 5) {
        let db = damaged(dir.path(), &bytes, off, 5);
        let o = run(&db, &["verify"]);
        if o.code == Some(5)
            && !o.stdout.contains("PROBLEM")
            && run(&db, &["stats"]).code == Some(0)
        {
            wrong.push(format!("byte {off}: {}", o.stderr.trim()));
        }
        std::fs::remove_file(&db).unwrap();
    }
    assert!(
        wrong.is_empty(),
        "{} without a report:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// A key of the `pending` or `tree` table that is not an aligned block (damage to the key, which
/// redb's page checksums do not cover once the page is trusted) is damage, exit 5, not a rejected
/// input (exit 2, "invalid block"). Found by the long damaged-file sweep (byte 103111).
#[test]
fn a_damaged_block_key_is_reported_as_damage() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("m.redb");
    let store = Store::create(&db).unwrap();
    for i in 0..3 {
        store
            .note("default", NewMemory::new(format!("memory {i}")))
            .unwrap();
    }
    drop(store);
    for table in ["pending", "tree"] {
        let copy = dir.path().join(format!("{table}.redb"));
        std::fs::copy(&db, &copy).unwrap();
        let rdb = redb::Database::builder()
            .set_concurrency_mode(redb::ConcurrencyMode::MultiWriter)
            .open(&copy)
            .unwrap();
        let tx = rdb.begin_write().unwrap();
        if table == "pending" {
            let mut t = tx.open_table(somna::format::PENDING).unwrap();
            t.insert((0u32, 2u8, 197u64), ()).unwrap();
        } else {
            let mut t = tx.open_table(somna::format::TREE).unwrap();
            t.insert((0u32, 1u8, 1u64), &b"x"[..]).unwrap();
        }
        drop(tx.open_table(somna::format::META).unwrap());
        tx.commit().unwrap();
        drop(rdb);
        let cmds: &[&[&str]] = if table == "pending" {
            &[&["pending"], &["nap", "--batch", "8"]]
        } else {
            &[&["export"]]
        };
        for args in cmds {
            let o = run(&copy, args);
            assert_eq!(
                o.code,
                Some(5),
                "`somna {}` with a damaged {table} key: {}",
                args.join(" "),
                o.stderr
            );
            assert!(o.stderr.contains(table), "{}", o.stderr);
        }
    }
}
