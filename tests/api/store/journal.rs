//! The commit journal of an exclusive handle (store format 4, docs/design.md "Commit journal")
//! never loses an acknowledged write. A store written with `Options::exclusive(true)` is
//! "killed" by `std::mem::forget` after its writes were acknowledged, and the store file and its
//! `-journal` are copied while it is still open, as a crash leaves them; the copy must open with
//! every acknowledged note and session, and pass `verify`. Also: checkpoints forced by a small
//! journal keep everything, a record larger than the journal commits durably, a replay run twice
//! is harmless, a journal cut at every byte of its last two records loses only the record cut
//! (never an earlier one), a read-only open of a store with records to replay is sent to a
//! read-write open first, a record whose crc matches but whose changes do not decode is
//! `Corrupt`, `verify` reports records past the applied marker, a stale journal of another
//! store at the same path is never replayed, and a journal path that is a symbolic link or a
//! FIFO is refused, never followed or waited on.

use std::path::{Path, PathBuf};

use somna::{NewMemory, Options, Store};

fn journal_of(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_os_string();
    s.push("-journal");
    PathBuf::from(s)
}

fn opts() -> Options {
    Options::default().exclusive(true)
}

/// Copies the store and its journal into `to` (as a crash would leave them); the new path.
fn copy_pair(from: &Path, to: &Path) -> PathBuf {
    let dst = to.join("copy.redb");
    std::fs::copy(from, &dst).unwrap();
    std::fs::copy(journal_of(from), journal_of(&dst)).unwrap();
    dst
}

/// A store with `n` journaled notes, killed (forgotten) after copying its files into `to`.
fn killed_after(n: u64, o: Options, to: &Path) -> PathBuf {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let s = Store::create_with(&path, o).unwrap();
    for i in 0..n {
        s.note("default", NewMemory::new(format!("note {i}")))
            .unwrap();
    }
    s.session_save("chat", &[r#"{"role":"user","content":"hi"}"#], None)
        .unwrap();
    let copy = copy_pair(&path, to);
    std::mem::forget(s);
    copy
}

fn check(path: &Path, o: Options, n: u64) {
    let mut s = Store::open_with(path, o).unwrap();
    assert_eq!(s.count("default").unwrap(), n);
    for i in 0..n {
        assert_eq!(s.memory("default", i).unwrap().text, format!("note {i}"));
    }
    assert_eq!(
        s.session_load("chat").unwrap().unwrap(),
        [r#"{"role":"user","content":"hi"}"#]
    );
    let report = s.verify().unwrap();
    assert!(report.ok(), "{:?}", report.problems);
    s.close().unwrap();
}

#[test]
fn journaled_writes_survive_a_kill_and_replay_twice_harmlessly() {
    let to = tempfile::tempdir().unwrap();
    let copy = killed_after(20, opts(), to.path());
    // The journal holds the notes: it is longer than its header and not all zeros there.
    let j = std::fs::read(journal_of(&copy)).unwrap();
    assert!(j[4096..4104].iter().any(|b| *b != 0));
    // A keep of the crashed pair, to replay again below.
    let again = tempfile::tempdir().unwrap();
    let copy2 = copy_pair(&copy, again.path());
    check(&copy, Options::default(), 20);
    check(&copy, opts(), 20);
    // Replayed by an exclusive handle that is killed in turn, then by a multi-writer one.
    let s = Store::open_with(&copy2, opts()).unwrap();
    s.note("default", NewMemory::new("note 20")).unwrap();
    std::mem::forget(s);
    let third = tempfile::tempdir().unwrap();
    let copy3 = copy_pair(&copy2, third.path());
    check(&copy3, Options::default(), 21);
}

#[test]
fn checkpoints_of_a_small_journal_keep_everything() {
    let to = tempfile::tempdir().unwrap();
    let o = opts().journal_bytes(12 << 10);
    let copy = killed_after(150, o.clone(), to.path());
    check(&copy, o.clone(), 150);
    // A batch larger than the whole journal commits durably in redb.
    let s = Store::open_with(&copy, o.clone()).unwrap();
    let big: Vec<NewMemory> = (150..250)
        .map(|i| NewMemory::new(format!("note {i}")))
        .collect();
    s.append("default", big, None).unwrap();
    s.note("default", NewMemory::new("note 250")).unwrap();
    let more = tempfile::tempdir().unwrap();
    let copy2 = copy_pair(&copy, more.path());
    std::mem::forget(s);
    check(&copy2, o, 251);
}

#[test]
fn without_the_journal_option_commits_are_durable_and_no_journal_is_made() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let s = Store::create_with(&path, opts().journal(false)).unwrap();
    s.note("default", NewMemory::new("durable")).unwrap();
    drop(s);
    assert!(!journal_of(&path).exists());
    let s = Store::open_with(&path, opts()).unwrap();
    assert!(journal_of(&path).exists());
    assert_eq!(s.count("default").unwrap(), 1);
}

/// The offsets where each record of the journal ends, walking its length fields from 4096.
fn record_ends(j: &[u8]) -> Vec<usize> {
    let mut at = 4096;
    let mut ends = Vec::new();
    loop {
        let len = u32::from_le_bytes(j[at..at + 4].try_into().unwrap()) as usize;
        if len == 0 {
            return ends;
        }
        at += 8 + len;
        ends.push(at);
    }
}

#[test]
fn a_journal_cut_anywhere_in_its_last_records_loses_only_the_cut_record() {
    let to = tempfile::tempdir().unwrap();
    let n = 8;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let s = Store::create_with(&path, opts()).unwrap();
    s.session_save("chat", &[r#"{"role":"user","content":"hi"}"#], None)
        .unwrap();
    for i in 0..n {
        s.note("default", NewMemory::new(format!("note {i}")))
            .unwrap();
    }
    let base = copy_pair(&path, to.path());
    std::mem::forget(s);
    let journal = std::fs::read(journal_of(&base)).unwrap();
    let ends = record_ends(&journal);
    assert_eq!(ends.len() as u64, n + 1, "one record per commit");
    let from = ends[ends.len() - 3];
    let last = ends[ends.len() - 1];
    for cut in from..=last {
        let case = tempfile::tempdir().unwrap();
        let db = case.path().join("c.redb");
        std::fs::copy(&base, &db).unwrap();
        // The file is preallocated: a torn write leaves zeros (or old bytes) past the cut.
        let mut j = journal.clone();
        j[cut..].fill(0);
        std::fs::write(journal_of(&db), &j).unwrap();
        let whole = ends.iter().filter(|e| **e <= cut).count() as u64 - 1;
        let mut s = Store::open(&db).unwrap();
        let got = s.count("default").unwrap();
        assert!(
            got >= whole && got <= n,
            "cut {cut}: {got} notes, {whole} synced"
        );
        if cut % 16 == 0 || cut == last {
            let report = s.verify().unwrap();
            assert!(report.ok(), "cut {cut}: {:?}", report.problems);
        }
    }
}

#[test]
fn a_read_only_open_applies_the_journal_through_one_read_write_open() {
    let to = tempfile::tempdir().unwrap();
    let copy = killed_after(3, opts(), to.path());
    let s = Store::open_with(&copy, Options::default().read_only(true)).unwrap();
    assert_eq!(s.count("default").unwrap(), 3);
}

#[test]
fn a_journal_record_that_does_not_decode_is_corrupt() {
    let to = tempfile::tempdir().unwrap();
    let copy = killed_after(2, opts(), to.path());
    let mut j = std::fs::read(journal_of(&copy)).unwrap();
    // Record 1: its first change's kind byte (after len, crc, epoch, seq and the count
    // varint) becomes 9, and the crc is made to match.
    let len = u32::from_le_bytes(j[4096..4100].try_into().unwrap()) as usize;
    j[4096 + 8 + 16 + 1] = 9;
    let crc = crc32fast::hash(&j[4104..4104 + len]);
    j[4100..4104].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(journal_of(&copy), &j).unwrap();
    match Store::open(&copy) {
        Err(somna::Error::Corrupt { table, key, .. }) => {
            assert_eq!(table, "(journal)");
            assert!(key.contains("record"), "{key}");
        }
        other => panic!("expected Corrupt, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn verify_reports_records_past_the_applied_marker() {
    let to = tempfile::tempdir().unwrap();
    let copy = killed_after(2, opts(), to.path());
    // The multi-writer open (without the shared journal, which would go on writing it)
    // replays epoch E and moves the marker to (E + 1, 0).
    let mut s = Store::open_with(&copy, Options::default().shared_journal(false)).unwrap();
    assert!(s.verify().unwrap().ok());
    let mut j = std::fs::read(journal_of(&copy)).unwrap();
    let epoch = u64::from_le_bytes(j[4104..4112].try_into().unwrap());
    // A record of epoch E + 1, seq 1, with no changes, appears behind the open handle's back.
    let mut body = Vec::new();
    body.extend((epoch + 1).to_le_bytes());
    body.extend(1u64.to_le_bytes());
    body.push(0);
    let mut rec = (body.len() as u32).to_le_bytes().to_vec();
    rec.extend(crc32fast::hash(&body).to_le_bytes());
    rec.extend(&body);
    j[4096..4096 + rec.len()].copy_from_slice(&rec);
    std::fs::write(journal_of(&copy), &j).unwrap();
    let report = s.verify().unwrap();
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.contains("past the applied marker")),
        "{:?}",
        report.problems
    );
}

#[test]
fn a_stale_journal_of_another_store_is_never_replayed() {
    let to = tempfile::tempdir().unwrap();
    let old = killed_after(5, opts(), to.path());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("new.redb");
    Store::create(&path).unwrap().close().unwrap();
    std::fs::copy(journal_of(&old), journal_of(&path)).unwrap();
    for o in [Options::default(), opts()] {
        let s = Store::open_with(&path, o).unwrap();
        assert!(s.count("default").unwrap_or(0) == 0);
        s.close().unwrap();
    }
    let s = Store::open_with(&path, opts()).unwrap();
    s.note("default", NewMemory::new("mine")).unwrap();
    std::mem::forget(s);
    let again = tempfile::tempdir().unwrap();
    let copy = copy_pair(&path, again.path());
    let s = Store::open(&copy).unwrap();
    assert_eq!(s.count("default").unwrap(), 1);
    assert_eq!(s.memory("default", 0).unwrap().text, "mine");
}

#[cfg(unix)]
#[test]
fn a_journal_path_that_is_a_link_or_a_fifo_is_refused_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let s = Store::create_with(&path, opts()).unwrap();
    s.note("default", NewMemory::new("kept")).unwrap();
    s.close().unwrap();
    let journal = journal_of(&path);
    let elsewhere = dir.path().join("elsewhere");
    std::fs::rename(&journal, &elsewhere).unwrap();
    let before = std::fs::read(&elsewhere).unwrap();
    let refused = |what: &str| {
        for o in [
            Options::default(),
            opts(),
            Options::default().read_only(true),
        ] {
            match Store::open_with(&path, o) {
                Err(somna::Error::Invalid {
                    what: "journal path",
                    reason,
                }) => {
                    assert!(reason.contains("remove it"), "{what}: {reason}")
                }
                other => panic!("{what}: {:?}", other.map(|_| ())),
            }
        }
    };
    // A link to a journal, a dangling link and a FIFO (opened without waiting for a writer).
    std::os::unix::fs::symlink(&elsewhere, &journal).unwrap();
    refused("a link");
    std::fs::remove_file(&journal).unwrap();
    std::os::unix::fs::symlink(dir.path().join("nothing"), &journal).unwrap();
    refused("a dangling link");
    std::fs::remove_file(&journal).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(&journal)
        .status()
        .unwrap();
    assert!(made.success());
    refused("a FIFO");
    // The file the link pointed at was never written through it.
    assert_eq!(std::fs::read(&elsewhere).unwrap(), before);
    std::fs::remove_file(&journal).unwrap();
    std::fs::rename(&elsewhere, &journal).unwrap();
    let s = Store::open_with(&path, opts()).unwrap();
    assert_eq!(s.memory("default", 0).unwrap().text, "kept");
}

/// The shared journal's commits hold every page they free until the next checkpoint (no page of
/// the last synced commit is reused, docs/design.md 14.9), so each takes fresh pages; a
/// checkpoint every `SHARED_CHECKPOINT_EVERY` records keeps the file from growing by them. 1,000
/// notes without it grew the file to 136 MiB.
#[test]
fn a_shared_journal_store_does_not_grow_by_the_pages_it_holds() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let s = Store::create(&path).unwrap();
    for i in 0..1_000 {
        s.note("default", NewMemory::new(format!("note {i}")))
            .unwrap();
    }
    let len = std::fs::metadata(&path).unwrap().len();
    assert!(len < 16 << 20, "{len} bytes for 1,000 notes");
    assert!(journal_of(&path).exists());
    drop(s);
    let s = Store::open(&path).unwrap();
    assert_eq!(s.count("default").unwrap(), 1_000);
}
