//! Guards store format 4's commit journal (docs/design.md, "Commit journal") with a real crash
//! image committed as `tests/fixtures/format4-journal.redb` and its
//! `tests/fixtures/format4-journal.redb-journal` (never regenerated: a later format must still
//! replay it). The pair was made by `make_format4_fixture` below (run with
//! `SOMNA_MAKE_FIXTURE=1 cargo test --test api -- --ignored make_format4_fixture`): an
//! exclusive store with a 16 KiB journal, three notes and a session saved through the journal,
//! both files copied while the store was open, and the store then forgotten (no checkpoint, no
//! close), so the three commits exist only as journal records past redb's durable marker. The
//! test opens a copy and finds them all, the journal header and first record's fixed bytes as
//! specified, and a clean `verify`; a second open finds the same. The file without its journal holds none
//! of the notes. The pair predates the project's rename (docs/design.md, "History"): its journal
//! starts with the old magic, which this build still reads, while a journal it makes starts
//! with the new one (the last test). Format 5's fixture, the shared journal of the default mode,
//! is described at its test.

use std::path::{Path, PathBuf};

use somna::{NewMemory, Options, Store};

const NOTES: [&str; 3] = [
    "the journal keeps this",
    "and this, café 東京",
    "and the third",
];
const CHAT: [&str; 2] = [
    r#"{"role":"user","content":"hi"}"#,
    r#"{"role":"assistant","content":"hello"}"#,
];

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

fn journal_of(p: &Path) -> PathBuf {
    let mut s = p.as_os_str().to_os_string();
    s.push("-journal");
    PathBuf::from(s)
}

/// Opens the store at `path` twice (the first open replays its journal), finding the three
/// notes and the session each time, with a clean `verify`.
fn holds_everything_twice(path: &Path) {
    for _ in 0..2 {
        let mut s = Store::open(path).unwrap();
        assert_eq!(s.count("default").unwrap(), 3);
        for (i, n) in NOTES.iter().enumerate() {
            assert_eq!(s.memory("default", i as u64).unwrap().text, *n);
        }
        assert_eq!(s.session_load("chat").unwrap().unwrap(), CHAT);
        let report = s.verify().unwrap();
        assert!(report.ok(), "{:?}", report.problems);
        s.close().unwrap();
    }
}

#[test]
#[ignore = "makes the fixture; run by hand once"]
fn make_format4_fixture() {
    if std::env::var_os("SOMNA_MAKE_FIXTURE").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let o = Options::default().exclusive(true).journal_bytes(16 << 10);
    let s = Store::create_with(&path, o).unwrap();
    for n in NOTES {
        s.note("default", NewMemory::new(n)).unwrap();
    }
    s.session_save("chat", &CHAT, None).unwrap();
    let dst = fixtures().join("format4-journal.redb");
    std::fs::copy(&path, &dst).unwrap();
    std::fs::copy(journal_of(&path), journal_of(&dst)).unwrap();
    std::mem::forget(s);
}

#[test]
fn the_format4_journal_fixture_replays_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f.redb");
    let src = fixtures().join("format4-journal.redb");
    std::fs::copy(&src, &path).unwrap();
    std::fs::copy(journal_of(&src), journal_of(&path)).unwrap();
    // The header: magic (the one from before the rename), journal format 1, zeros; the first
    // record: epoch e, seq 1.
    let j = std::fs::read(journal_of(&path)).unwrap();
    assert_eq!(j.len(), 16 << 10);
    assert_eq!(&j[..8], b"ENGRAMJ\0");
    assert_eq!(&j[8..12], b"\x01\0\0\0");
    assert!(j[12..4096].iter().all(|b| *b == 0));
    let len = u32::from_le_bytes(j[4096..4100].try_into().unwrap()) as usize;
    assert_eq!(
        u32::from_le_bytes(j[4100..4104].try_into().unwrap()),
        crc32fast::hash(&j[4104..4104 + len])
    );
    assert_eq!(u64::from_le_bytes(j[4112..4120].try_into().unwrap()), 1);
    // Without its journal the file holds none of the three notes: they are the journal's.
    let alone = dir.path().join("alone.redb");
    std::fs::copy(&src, &alone).unwrap();
    let s = Store::open(&alone).unwrap();
    assert_eq!(s.count("default").unwrap_or(0), 0);
    drop(s);
    holds_everything_twice(&path);
}

/// The god byte's "journaled" bit and where the checkpoint slot and the writer's boot id sit in
/// redb's header (docs/design.md 14.9).
const GOD_BYTE: usize = 9;
const JOURNALED: u8 = 16;
const WRITER_BOOT: std::ops::Range<usize> = 40..56;
const CHECKPOINT_SLOT: std::ops::Range<usize> = 320..448;

#[test]
#[ignore = "makes the fixture; run by hand once"]
fn make_format5_fixture() {
    if std::env::var_os("SOMNA_MAKE_FIXTURE").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    // The default mode: many processes may share the file, commits go through the shared journal
    let mut s = Store::create_with(&path, Options::default().journal_bytes(16 << 10)).unwrap();
    s.note("default", NewMemory::new(NOTES[0])).unwrap();
    // `verify` checkpoints first: the first note is in redb's durable state, the checkpoint
    s.verify().unwrap();
    for n in &NOTES[1..] {
        s.note("default", NewMemory::new(*n)).unwrap();
    }
    s.session_save("chat", &CHAT, None).unwrap();
    let dst = fixtures().join("format5-shared.redb");
    let mut bytes = std::fs::read(&path).unwrap();
    assert_ne!(bytes[GOD_BYTE] & JOURNALED, 0);
    // No writer's boot: every open takes the power-loss path
    bytes[WRITER_BOOT].fill(0);
    std::fs::write(&dst, bytes).unwrap();
    std::fs::copy(journal_of(&path), journal_of(&dst)).unwrap();
    std::mem::forget(s);
}

/// Guards format 5 with `tests/fixtures/format5-shared.redb` and its journal (made by
/// `make_format5_fixture`, never regenerated): a default-mode store copied while open, its
/// header's primary a commit published without a sync, the checkpoint slot naming the synced
/// commit that holds the first note only, the writer's boot id zeroed. redb alone rolls it back to
/// that checkpoint (one note); somna rolls back and replays the journal (all of them), twice.
#[test]
fn the_format5_shared_fixture_rolls_back_and_replays() {
    let dir = tempfile::tempdir().unwrap();
    let src = fixtures().join("format5-shared.redb");
    let h = std::fs::read(&src).unwrap();
    assert_ne!(h[GOD_BYTE] & JOURNALED, 0, "the primary is journaled");
    assert!(h[WRITER_BOOT].iter().all(|b| *b == 0));
    assert!(
        h[CHECKPOINT_SLOT].iter().any(|b| *b != 0),
        "a checkpoint slot"
    );
    assert_ne!(h[64..192], h[CHECKPOINT_SLOT]);
    assert_ne!(h[192..320], h[CHECKPOINT_SLOT]);
    // redb alone: the journaled commits are gone, the checkpoint is whole
    let raw = dir.path().join("raw.redb");
    std::fs::copy(&src, &raw).unwrap();
    {
        use redb::{ReadableDatabase, ReadableTableMetadata};
        let mut db = redb::Database::builder()
            .set_concurrency_mode(redb::ConcurrencyMode::MultiWriter)
            .open(&raw)
            .unwrap();
        let r = db.begin_read().unwrap();
        assert_eq!(r.open_table(somna::format::LOG).unwrap().len().unwrap(), 1);
        drop(r);
        assert!(db.check_integrity().unwrap());
    }
    // somna: rolled back, then the three records replayed
    let path = dir.path().join("f.redb");
    std::fs::copy(&src, &path).unwrap();
    std::fs::copy(journal_of(&src), journal_of(&path)).unwrap();
    holds_everything_twice(&path);
}

#[test]
fn a_new_journal_starts_with_the_new_magic() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("n.redb");
    let o = Options::default().exclusive(true).journal_bytes(16 << 10);
    let s = Store::create_with(&path, o).unwrap();
    s.note("default", NewMemory::new(NOTES[0])).unwrap();
    let j = std::fs::read(journal_of(&path)).unwrap();
    assert_eq!(&j[..12], b"SOMNAJ\0\0\x01\0\0\0");
    drop(s);
    let s = Store::open(&path).unwrap();
    assert_eq!(s.memory("default", 0).unwrap().text, NOTES[0]);
}
