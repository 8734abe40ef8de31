//! Guards store format 7, the count of vector rewrites that a handle's cache of quantised
//! vectors trusts (docs/design.md 12.8): `meta["vector_rewrites"]` and `meta["format"]` byte by
//! byte in `tests/fixtures/format7-vectors.redb` (made by `make_format7_fixture`, run with
//! `SOMNA_MAKE_FIXTURE=1 cargo test --test api -- --ignored make_format7_fixture`, never
//! regenerated), a read-only handle ranking its vectors, the count raised by a replacement and
//! left alone by an append, and `verify` finding damaged or stray callers' vectors and a damaged
//! count.

use std::path::{Path, PathBuf};

use redb::{ReadableDatabase, ReadableTable, TableDefinition};
use somna::{NewMemory, Options, SearchMode, SearchQuery, Store};

const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
const VECTORS: TableDefinition<(u32, u64), &[u8]> = TableDefinition::new("vectors");

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// The top hit of a vector-only search for `v`.
fn top(s: &Store, v: &[f32]) -> Option<u64> {
    let mut q = SearchQuery::new("");
    q.vector = Some(v.to_vec());
    q.mode = Some(SearchMode::Vector);
    s.search("v", &q).unwrap().hits.first().and_then(|h| h.id)
}

/// `meta[key]`'s bytes, read with redb itself.
fn meta(path: &Path, key: &str) -> Vec<u8> {
    let db = redb::Database::open(path).unwrap();
    let r = db.begin_read().unwrap();
    let t = r.open_table(META).unwrap();
    let v = t.get(key).unwrap().unwrap().value().to_vec();
    v
}

#[test]
#[ignore = "makes the fixture; run by hand once"]
fn make_format7_fixture() {
    if std::env::var_os("SOMNA_MAKE_FIXTURE").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let s = Store::create_with(&path, Options::default().exclusive(true)).unwrap();
    for (i, v) in [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
        .iter()
        .enumerate()
    {
        s.note(
            "v",
            NewMemory::new(format!("memory {i}")).vector(v.to_vec()),
        )
        .unwrap();
    }
    // A replacement (the count becomes 1), then an append (it stays 1).
    s.set_vector("v", 0, &[0.0, 0.0, -1.0]).unwrap();
    s.note("v", NewMemory::new("memory 3").vector(vec![1.0, 1.0, 0.0]))
        .unwrap();
    s.close().unwrap();
    std::fs::copy(&path, fixtures().join("format7-vectors.redb")).unwrap();
}

#[test]
fn the_format7_fixture_counts_its_rewrites_byte_by_byte() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    std::fs::copy(fixtures().join("format7-vectors.redb"), &path).unwrap();
    // Enveloped: version 1, the varint, CRC-32 of the payload.
    assert_eq!(meta(&path, "format"), [0x01, 0x07, 0x2e, 0x7a, 0x66, 0x4c]);
    assert_eq!(
        meta(&path, "vector_rewrites"),
        [0x01, 0x01, 0x1b, 0xdf, 0x05, 0xa5]
    );
    let ro = Store::open_with(&path, Options::default().read_only(true)).unwrap();
    assert_eq!(top(&ro, &[0.0, 0.0, -1.0]), Some(0));
    assert_eq!(top(&ro, &[1.0, 1.0, 0.1]), Some(3));
    drop(ro);
    let s = Store::open_with(&path, Options::default().exclusive(true)).unwrap();
    assert_eq!(top(&s, &[0.0, 1.0, 0.0]), Some(1));
    // Replacing the highest id's vector is a rewrite; a new memory's vector is an append.
    s.set_vector("v", 3, &[0.0, 1.0, 0.1]).unwrap();
    s.note("v", NewMemory::new("memory 4").vector(vec![-1.0, 0.0, 0.0]))
        .unwrap();
    assert_eq!(top(&s, &[0.0, 1.0, 0.1]), Some(3));
    assert_eq!(top(&s, &[-1.0, 0.0, 0.0]), Some(4));
    s.close().unwrap();
    assert_eq!(
        meta(&path, "vector_rewrites"),
        [0x01, 0x02, 0xa1, 0x8e, 0x0c, 0x3c]
    );
}

#[test]
fn verify_finds_damaged_and_stray_caller_vectors_and_a_damaged_count() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    std::fs::copy(fixtures().join("format7-vectors.redb"), &path).unwrap();
    let mut s = Store::open_with(&path, Options::default().exclusive(true)).unwrap();
    let r = s.verify().unwrap();
    assert!(r.ok(), "{:?}", r.problems);
    s.close().unwrap();
    {
        let db = redb::Database::open(&path).unwrap();
        let w = db.begin_write().unwrap();
        {
            let mut t = w.open_table(VECTORS).unwrap();
            let good = t.get((0, 3)).unwrap().unwrap().value().to_vec();
            // A vector of a memory past the log, and one whose bytes are damaged.
            t.insert((0, 99), good.as_slice()).unwrap();
            t.insert((0, 1), [0x01, 0x02, 0x03].as_slice()).unwrap();
            let mut m = w.open_table(META).unwrap();
            m.insert("vector_rewrites", [0x01, 0x02, 0x03].as_slice())
                .unwrap();
        }
        w.commit().unwrap();
    }
    let mut s = Store::open_with(&path, Options::default().read_only(true)).unwrap();
    let r = s.verify().unwrap();
    let all = r.problems.join("\n");
    assert!(all.contains("#99, past the log"), "{all}");
    assert!(all.contains("(scope 0, #1)"), "{all}");
    assert!(all.contains("vector_rewrites"), "{all}");
    assert_eq!(r.problems.len(), 3, "{all}");
}
