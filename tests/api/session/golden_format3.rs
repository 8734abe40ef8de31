//! Guards store format 3's session layout (docs/design.md, section 13) with a real store written
//! by the `somna` binary of the format-3 code and committed as
//! `tests/fixtures/format3-sessions.redb` (never regenerated: a later format migrates it). It was
//! made with:
//!
//! ```text
//! somna init
//! echo '[{"role":"user","content":"hi"},{"role":"assistant","content":"hello"},{"role":"user","content":"東京 café?"}]' | somna session save chat-1
//! echo '[{"role":"assistant","content":"hello"},{"role":"user","content":"東京 café?"},{"role":"assistant","content":"yes"}]' | somna session save chat-1
//! echo '[{"type":"message","content":"x"},{"type":"function_call","name":"f","arguments":"{}"}]' | somna session append chat-2 --key k1
//! echo '[{"type":"message","content":"y"}]' | somna session append chat-2
//! somna session pop chat-2
//! echo '[]' | somna session save empty
//! (100 messages {"role":"user","content":"turn I"}, I = 0..99) | somna session save long
//! (the same without turns 10 to 19, then {"role":"assistant","content":"after the trim"}) | somna session save long
//! (3 messages {"role":"tool","content":"bI zzz..."} of 4,000 z) | somna session save big
//! somna session pop big
//! somna note "sessions live in chunks" --observed 2024-05-01
//! ```
//!
//! The test opens a copy and checks every session through the API, the chunks under the engine
//! (their keys, their sizes, the gap the trim left, the chain of each), the bytes of one chunk, a
//! save of the same list writing nothing, and a clean `verify`.

use std::path::{Path, PathBuf};

use redb::{ReadableDatabase, ReadableTable};
use somna::format::{chain_next, decode_chunk, CHAIN_START, SESSION_CHUNKS};
use somna::Store;

const CHAT2: [&str; 2] = [
    r#"{"type":"message","content":"x"}"#,
    r#"{"type":"function_call","name":"f","arguments":"{}"}"#,
];

fn fixture_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format3-sessions.redb");
    let dst = dir.path().join("format3-sessions.redb");
    std::fs::copy(src, &dst).unwrap();
    (dir, dst)
}

fn turn(i: usize) -> String {
    format!(r#"{{"role":"user","content":"turn {i}"}}"#)
}

/// The live list of "long": turns 0-9 and 20-99, then the trim's new message.
fn long() -> Vec<String> {
    let mut v: Vec<String> = (0..100)
        .filter(|i| !(10..20).contains(i))
        .map(turn)
        .collect();
    v.push(r#"{"role":"assistant","content":"after the trim"}"#.into());
    v
}

#[test]
fn the_format3_sessions_read_exactly() {
    let (_dir, path) = fixture_copy();
    let mut s = Store::open(&path).unwrap();
    let shape: Vec<(String, u64, u64)> = s
        .session_list("", None, None)
        .unwrap()
        .into_iter()
        .map(|i| (i.id, i.count, i.archived))
        .collect();
    let want = [
        ("big", 2, 0),
        ("chat-1", 3, 1),
        ("chat-2", 2, 0),
        ("empty", 0, 0),
        ("long", 91, 10),
    ];
    let want: Vec<(String, u64, u64)> = want
        .iter()
        .map(|(i, c, a)| (i.to_string(), *c, *a))
        .collect();
    assert_eq!(shape, want);
    assert_eq!(s.session_load("chat-2").unwrap().unwrap(), CHAT2);
    assert_eq!(s.session_load("long").unwrap().unwrap(), long());
    assert_eq!(s.session_items("long", Some(3)).unwrap(), long()[88..]);
    let big = s.session_load("big").unwrap().unwrap();
    assert_eq!(big.len(), 2);
    assert!(big[1].starts_with(r#"{"role":"tool","content":"b1 zzz"#) && big[1].len() == 4031);
    let archived = s.session_archived("long").unwrap();
    assert_eq!(
        archived
            .iter()
            .map(|a| a.message.clone())
            .collect::<Vec<_>>(),
        (10..20).map(turn).collect::<Vec<_>>()
    );
    let again = s
        .session_append("chat-2", &CHAT2, Some("k1"), None)
        .unwrap();
    assert!(again.replayed);
    let refs: Vec<String> = long();
    let refs: Vec<&str> = refs.iter().map(String::as_str).collect();
    let same = s.session_save("long", &refs, None).unwrap();
    assert_eq!((same.kept, same.written, same.archived), (91, 0, 0));
    let report = s.verify().unwrap();
    assert!(report.ok(), "{:?}", report.problems);
    assert_eq!((report.memories, report.sessions), (1, 5));
    drop(s);
    chunks(&path);
}

/// The chunks under the engine: key, sequence numbers of their messages, and the chain.
fn chunks(path: &Path) {
    let db = redb::Database::builder()
        .set_concurrency_mode(redb::ConcurrencyMode::MultiWriter)
        .open(path)
        .unwrap();
    let rtx = db.begin_read().unwrap();
    let t = rtx.open_table(SESSION_CHUNKS).unwrap();
    let mut got: Vec<(String, u64, Vec<u64>)> = Vec::new();
    let mut chain = CHAIN_START;
    let mut last = String::new();
    for r in t.iter().unwrap() {
        let (k, v) = r.unwrap();
        let (id, key) = k.value();
        if id != last {
            chain = CHAIN_START;
            last = id.to_string();
        }
        let c = decode_chunk(id, key, v.value()).unwrap();
        let mut seq = key;
        let mut seqs = Vec::new();
        for (i, e) in c.entries.iter().enumerate() {
            if i > 0 {
                seq += 1 + e.gap;
            } else {
                assert_eq!(e.gap, 0);
            }
            assert_eq!(
                e.hash,
                xxhash_rust::xxh3::xxh3_128(e.text.as_bytes()).to_le_bytes()
            );
            chain = chain_next(&chain, &e.hash);
            seqs.push(seq);
        }
        assert_eq!(c.chain, chain, "({id}, {key})");
        got.push((id.to_string(), key, seqs));
    }
    let shape: Vec<(String, u64, usize, u64)> = got
        .iter()
        .map(|(id, k, s)| (id.clone(), *k, s.len(), *s.last().unwrap()))
        .collect();
    let want: Vec<(String, u64, usize, u64)> = WANT
        .iter()
        .map(|(i, k, n, l)| (i.to_string(), *k, *n, *l))
        .collect();
    assert_eq!(shape, want);
    // The trim left a gap: "long"'s first chunk holds 0-9, then 20 (gap 10).
    let long0 = &got.iter().find(|g| g.0 == "long").unwrap().2;
    assert_eq!(long0[..11], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 20]);

    // chat-2's chunk, byte for byte: version, chain, 2 entries (gap, hash, length, text), CRC.
    let v = t.get(("chat-2", 0)).unwrap().unwrap();
    let h: Vec<[u8; 16]> = CHAT2
        .iter()
        .map(|m| xxhash_rust::xxh3::xxh3_128(m.as_bytes()).to_le_bytes())
        .collect();
    let mut want = vec![0x01];
    want.extend_from_slice(&chain_next(&chain_next(&CHAIN_START, &h[0]), &h[1]));
    want.push(0x02);
    for (m, h) in CHAT2.iter().zip(&h) {
        want.push(0x00);
        want.extend_from_slice(h);
        want.push(m.len() as u8);
        want.extend_from_slice(m.as_bytes());
    }
    want.extend_from_slice(&crc32fast::hash(&want[1..]).to_le_bytes());
    assert_eq!(v.value(), want);
}

/// (session, chunk key, messages, last sequence number) of every chunk.
/// "big": each 4 KB message a chunk of its own; "long": 57 messages of about 35 bytes reach the
/// 3 KB bound of the code that wrote the fixture (3.8 KB since; the file keeps its chunks).
const WANT: [(&str, u64, usize, u64); 6] = [
    ("big", 0, 1, 0),
    ("big", 1, 1, 1),
    ("chat-1", 1, 3, 3),
    ("chat-2", 0, 2, 1),
    ("long", 0, 57, 66),
    ("long", 67, 34, 100),
];
