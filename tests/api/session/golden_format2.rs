//! Guards how sessions are stored in store format 2 with a real store written by the `somna`
//! binary of the format-2 code (commit 00dd3a1) and committed as
//! `tests/fixtures/format2-sessions.redb` (never regenerated: a store written by this somna must
//! stay readable, and a later format migrates it). It was made with:
//!
//! ```text
//! somna init
//! echo '[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"東京 café?"}]' | somna session save chat-1
//! echo '[{"role":"assistant","content":"hello"},{"role":"user","content":"東京 café?"},{"role":"assistant","content":"yes"}]' | somna session save chat-1
//! echo '[{"type":"message","content":"x"},{"type":"function_call","name":"f","arguments":"{}"}]' | somna session append chat-2 --key k1
//! (the same again: replayed)
//! echo '[{"type":"message","content":"y"}]' | somna session append chat-2
//! somna session pop chat-2
//! echo '[]' | somna session save empty
//! echo '[{ "n" : [1, 2.50, 1e400], "s": "a  b" }]' | somna session save tools
//! somna note "sessions live beside the log" --observed 2024-05-01
//! ```
//!
//! The test pins the format-2 rows of a copy (the raw bytes of a message, its hash and a session
//! record), reads it read-only through the kept format-2 read path, then opens it read-write,
//! which migrates it to format 3 (docs/design.md, section 13.4) and on to 4, and checks every session's
//! messages, counters, archive and idempotency key through the API, that a save of the same
//! list writes nothing (the migrated chain matches), a clean `verify`, the chunks' bytes, and
//! that the old rows are gone. A damaged format-2 row stops the migration, leaving format 2.

use std::path::{Path, PathBuf};

use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata};
use somna::format::{
    chain_next, decode, decode_chunk, CHAIN_START, META, SESSIONS, SESSION_CHUNKS, SESSION_HASHES,
    SESSION_MESSAGES,
};
use somna::store::Migration;
use somna::{Error, Options, Store};

const CHAT1: [&str; 3] = [
    r#"{"role":"assistant","content":"hello"}"#,
    r#"{"role":"user","content":"東京 café?"}"#,
    r#"{"role":"assistant","content":"yes"}"#,
];
const CHAT2: [&str; 2] = [
    r#"{"type":"message","content":"x"}"#,
    r#"{"type":"function_call","name":"f","arguments":"{}"}"#,
];
const TOOLS: &str = r#"{"n":[1,2.50,1e400],"s":"a  b"}"#;

fn fixture_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format2-sessions.redb");
    let dst = dir.path().join("format2-sessions.redb");
    std::fs::copy(src, &dst).unwrap();
    (dir, dst)
}

#[test]
fn the_format2_sessions_still_read_exactly() {
    let (_dir, path) = fixture_copy();
    raw_bytes(&path);
    assert_eq!(stored_format(&path), 2);
    // A read-only handle reads the format-2 rows as they are, and writes nothing.
    let mut ro = Store::open_with(&path, Options::default().read_only(true)).unwrap();
    check_sessions(&ro);
    assert_eq!(ro.session_items("chat-1", Some(2)).unwrap(), CHAT1[1..]);
    let report = ro.verify().unwrap();
    assert!(report.ok(), "{:?}", report.problems);
    assert!(ro.migrate().is_err());
    drop(ro);
    assert_eq!(stored_format(&path), 2);
    raw_bytes(&path);

    // The first read-write open migrates it.
    let mut s = Store::open(&path).unwrap();
    assert_eq!(s.migrate().unwrap(), Migration { from: 2, to: 7 });
    assert_eq!(stored_format(&path), 7);
    check_sessions(&s);

    // The stored idempotency key still replays; the migrated chain matches a resave.
    let again = s
        .session_append("chat-2", &CHAT2, Some("k1"), None)
        .unwrap();
    assert_eq!(
        (again.first_index, again.count, again.replayed),
        (0, 2, true)
    );
    let same = s.session_save("chat-1", &CHAT1, None).unwrap();
    assert_eq!((same.kept, same.written, same.archived), (3, 0, 0));

    let report = s.verify().unwrap();
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!((report.memories, report.sessions), (1, 4));
    drop(s);
    chunk_bytes(&path);
    // Opening it again migrates nothing.
    let s = Store::open(&path).unwrap();
    assert_eq!(s.migrate().unwrap(), Migration { from: 7, to: 7 });
    check_sessions(&s);
}

/// The fixture's sessions, as the format-2 binary left them.
fn check_sessions(s: &Store) {
    let list = s.session_list("", None, None).unwrap();
    let shape: Vec<(&str, u64, u64, u64)> = list
        .iter()
        .map(|i| (i.id.as_str(), i.count, i.bytes, i.archived))
        .collect();
    assert_eq!(
        shape,
        [
            ("chat-1", 3, 115, 1),
            ("chat-2", 2, 84, 0),
            ("empty", 0, 0, 0),
            ("tools", 1, 31, 0)
        ]
    );
    for i in &list {
        assert!(i.created_us <= i.updated_us && i.revision >= i.updated_us as u64);
    }
    assert_eq!(s.session_load("chat-1").unwrap().unwrap(), CHAT1);
    assert_eq!(s.session_load("chat-2").unwrap().unwrap(), CHAT2);
    assert_eq!(
        s.session_load("empty").unwrap().unwrap(),
        Vec::<String>::new()
    );
    assert_eq!(s.session_load("tools").unwrap().unwrap(), [TOOLS]);
    assert_eq!(s.session_load("absent").unwrap(), None);
    assert_eq!(s.session_items("chat-1", Some(2)).unwrap(), CHAT1[1..]);
    let lossy = s.session_items_lossy("chat-1", None).unwrap();
    assert_eq!((lossy.items.len(), lossy.unreadable.len()), (3, 0));
    let archived = s.session_archived("chat-1").unwrap();
    assert_eq!(archived.len(), 1);
    assert_eq!(archived[0].message, r#"{"role":"user","content":"hi"}"#);
}

fn stored_format(path: &Path) -> u32 {
    let db = redb::Database::builder()
        .set_concurrency_mode(redb::ConcurrencyMode::MultiWriter)
        .open(path)
        .unwrap();
    let rtx = db.begin_read().unwrap();
    let meta = rtx.open_table(META).unwrap();
    let v = meta.get("format").unwrap().unwrap();
    decode("meta", &"format", v.value()).unwrap()
}

/// The chunks after the migration: one per session with messages, keyed by the first sequence
/// number it holds, its entries' gaps, hashes and texts those of the format-2 rows, its chain
/// the chain of the session's messages; the format-2 tables empty.
fn chunk_bytes(path: &Path) {
    let db = redb::Database::builder()
        .set_concurrency_mode(redb::ConcurrencyMode::MultiWriter)
        .open(path)
        .unwrap();
    let rtx = db.begin_read().unwrap();
    assert!(rtx
        .open_table(SESSION_MESSAGES)
        .unwrap()
        .is_empty()
        .unwrap());
    assert!(rtx.open_table(SESSION_HASHES).unwrap().is_empty().unwrap());
    let chunks = rtx.open_table(SESSION_CHUNKS).unwrap();
    let keys = keys_of(&chunks);
    assert_eq!(
        keys,
        [
            ("chat-1".to_string(), 1),
            ("chat-2".into(), 0),
            ("tools".into(), 0)
        ]
    );
    for (id, key, texts) in [
        ("chat-1", 1, &CHAT1[..]),
        ("chat-2", 0, &CHAT2[..]),
        ("tools", 0, &[TOOLS][..]),
    ] {
        let v = chunks.get((id, key)).unwrap().unwrap();
        let c = decode_chunk(id, key, v.value()).unwrap();
        let mut chain = CHAIN_START;
        for (e, t) in c.entries.iter().zip(texts) {
            let h = xxhash_rust::xxh3::xxh3_128(t.as_bytes()).to_le_bytes();
            assert_eq!((e.gap, e.hash, e.text.as_str()), (0, h, *t));
            chain = chain_next(&chain, &h);
        }
        assert_eq!((c.entries.len(), c.chain), (texts.len(), chain));
    }
    // The bytes of tools's chunk: version, chain, 1 entry (gap 0, hash, varint length, text),
    // CRC32.
    let v = chunks.get(("tools", 0)).unwrap().unwrap();
    let h = xxhash_rust::xxh3::xxh3_128(TOOLS.as_bytes()).to_le_bytes();
    let mut want = vec![0x01];
    want.extend_from_slice(&chain_next(&CHAIN_START, &h));
    want.extend_from_slice(&[0x01, 0x00]);
    want.extend_from_slice(&h);
    want.push(TOOLS.len() as u8);
    want.extend_from_slice(TOOLS.as_bytes());
    want.extend_from_slice(&crc32fast::hash(&want[1..]).to_le_bytes());
    assert_eq!(v.value(), want);
}

/// A format-2 message that does not match its stored hash stops the migration with `Corrupt`
/// naming it; the store stays at format 2, its rows as they were.
#[test]
fn a_damaged_format2_row_stops_the_migration_leaving_format_2() {
    let (_dir, path) = fixture_copy();
    {
        let db = redb::Database::builder()
            .set_concurrency_mode(redb::ConcurrencyMode::MultiWriter)
            .open(&path)
            .unwrap();
        let w = db.begin_write().unwrap();
        {
            let mut t = w.open_table(SESSION_MESSAGES).unwrap();
            let other = somna::format::encode(&r#"{"role":"user","content":"forged"}"#).unwrap();
            t.insert(("chat-2", 1u64), other.as_slice()).unwrap();
        }
        w.commit().unwrap();
    }
    match Store::open(&path) {
        Err(Error::Corrupt { table, key, .. }) => {
            assert_eq!(table, "session_messages");
            assert!(key.contains("chat-2") && key.contains('1'), "{key}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert_eq!(stored_format(&path), 2);
    let mut ro = Store::open_with(&path, Options::default().read_only(true)).unwrap();
    assert_eq!(ro.session_load("chat-1").unwrap().unwrap(), CHAT1);
    assert!(!ro.verify().unwrap().ok());
}

/// The rows under the engine: chat-1 holds sequence numbers 1 to 3 (0 was archived), chat-2
/// holds 0 and 1 (2 was popped).
fn raw_bytes(path: &Path) {
    let db = redb::Database::builder()
        .set_concurrency_mode(redb::ConcurrencyMode::MultiWriter)
        .open(path)
        .unwrap();
    let rtx = db.begin_read().unwrap();
    let msgs = rtx.open_table(SESSION_MESSAGES).unwrap();
    let seqs = keys_of(&msgs);
    let ids = |v: &[(&str, u64)]| -> Vec<(String, u64)> {
        v.iter().map(|(i, s)| (i.to_string(), *s)).collect()
    };
    assert_eq!(
        seqs,
        ids(&[
            ("chat-1", 1),
            ("chat-1", 2),
            ("chat-1", 3),
            ("chat-2", 0),
            ("chat-2", 1),
            ("tools", 0)
        ])
    );
    let yes = msgs.get(("chat-1", 3)).unwrap().unwrap();
    let mut want = vec![0x01, 0x24];
    want.extend_from_slice(CHAT1[2].as_bytes());
    want.extend_from_slice(&crc32fast::hash(&want[1..]).to_le_bytes());
    assert_eq!(
        yes.value(),
        want,
        "version 1, varint length 36, text, CRC32"
    );
    let hashes = rtx.open_table(SESSION_HASHES).unwrap();
    let h = hashes.get(("chat-1", 3)).unwrap().unwrap();
    let h: [u8; 16] = decode("session_hashes", &"(chat-1, 3)", h.value()).unwrap();
    assert_eq!(
        h,
        xxhash_rust::xxh3::xxh3_128(CHAT1[2].as_bytes()).to_le_bytes()
    );
    let sessions = rtx.open_table(SESSIONS).unwrap();
    let rec = sessions.get("chat-2").unwrap().unwrap();
    let rec = rec.value();
    // Nine varints after the version byte: created, updated (zigzag, 8 bytes each here), the
    // revision (8 bytes), next_seq 3, count 2, bytes 84, archive_next 0, archived 0, archived
    // bytes 0; then the CRC32.
    assert_eq!((rec.len(), rec[0]), (1 + 8 + 8 + 8 + 6 + 4, 0x01));
    assert_eq!(rec[25..31], [0x03, 0x02, 0x54, 0x00, 0x00, 0x00]);
}

/// The keys of a session table, in order.
fn keys_of(t: &impl ReadableTable<(&'static str, u64), &'static [u8]>) -> Vec<(String, u64)> {
    t.iter()
        .unwrap()
        .map(|r| {
            let (k, _) = r.unwrap();
            let (id, seq) = k.value();
            (id.to_string(), seq)
        })
        .collect()
}
