//! Guards store format 2, the search index, with a real store written by the `somna` binary of
//! the format-2 code and committed as `tests/fixtures/format2.redb` (never regenerated: a store
//! written by this somna must stay readable). It was made with:
//!
//! ```text
//! somna init
//! somna note "deploys go through the staging branch" --observed 2024-05-01
//! somna note "the user prefers small commits" --observed 2024-05-02
//! somna note "ci runs cargo nextest" --observed 2024-05-03 --vector a.json    # [1, 0]
//! somna note "the api lives in crates/api" --observed 2024-05-04 --vector b.json  # [0, 1]
//! somna nap 0-1 "deploys via staging; small commits"
//! somna --scope project:acme note "acme uses postgres 16" --observed 2024-05-05
//! somna note "東京 café secret plan" --observed 2024-05-06
//! somna redact 4 --reason private
//! somna reindex                      # every document into posting blocks
//! somna note "staging is down today" --observed 2024-05-07   # one document in the tail
//! ```
//!
//! The test opens a copy and checks the ranked output, that the redacted memory is not found,
//! the vector ranking, a clean `verify` (the index equals a rebuild), and raw bytes of the
//! format value, a tail entry, the statistics, a posting block and a vector.

use std::path::{Path, PathBuf};

use redb::{ReadableDatabase, TableDefinition};
use somna::{SearchMode, SearchQuery, Store};

const TAIL: TableDefinition<(u32, u64), &[u8]> = TableDefinition::new("search_tail");
const POSTINGS: TableDefinition<(u32, &str, u64), &[u8]> = TableDefinition::new("search_postings");
const VECTORS: TableDefinition<(u32, u64), &[u8]> = TableDefinition::new("vectors");

fn fixture_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format2.redb");
    let dst = dir.path().join("format2.redb");
    std::fs::copy(src, &dst).unwrap();
    (dir, dst)
}

fn lines(s: &Store, scope: &str, q: &SearchQuery) -> Vec<String> {
    s.search(scope, q)
        .unwrap()
        .hits
        .into_iter()
        .map(|h| h.line)
        .collect()
}

#[test]
fn the_format2_fixture_still_searches_exactly() {
    let (_dir, path) = fixture_copy();
    let mut s = Store::open(&path).unwrap();
    assert_eq!(
        lines(&s, "default", &SearchQuery::new("staging")),
        [
            "#5 2024-05-07 staging is down today",
            "#0-1 deploys via staging; small commits",
            "#0 2024-05-01 deploys go through the staging branch",
            "#3 2024-05-04 the api lives in crates/api",
            "#1 2024-05-02 the user prefers small commits",
            "#2 2024-05-03 ci runs cargo nextest",
        ]
    );
    assert!(
        lines(&s, "default", &SearchQuery::new("café 東京")).is_empty(),
        "#4 is redacted"
    );
    let mut v = SearchQuery::new("");
    v.vector = Some(vec![0.0, 1.0]);
    v.mode = Some(SearchMode::Vector);
    assert_eq!(
        lines(&s, "default", &v),
        [
            "#3 2024-05-04 the api lives in crates/api",
            "#2 2024-05-03 ci runs cargo nextest"
        ]
    );
    let scopes = ["default".to_string(), "project:acme".to_string()];
    let r = s
        .search_scopes(&scopes, &SearchQuery::new("postgres"))
        .unwrap();
    assert_eq!(r.hits.len(), 1);
    assert_eq!(r.hits[0].scope, "project:acme");
    let report = s.verify().unwrap();
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    drop(s);

    let db = redb::Database::builder()
        .set_concurrency_mode(redb::ConcurrencyMode::MultiWriter)
        .open(&path)
        .unwrap();
    let r = db.begin_read().unwrap();
    let meta = r.open_table(somna::format::META).unwrap();
    assert_eq!(
        meta.get("format").unwrap().unwrap().value(),
        // The read-write open above upgraded it to the current format, 7 (sections 12.8, 13
        // and "Commit journal" of docs/design.md).
        [0x01, 0x07, 0x2e, 0x7a, 0x66, 0x4c]
    );
    let tail = r.open_table(TAIL).unwrap();
    // "staging is down today": length 4; down, is, stage, today once each.
    assert_eq!(
        tail.get((0, 5)).unwrap().unwrap().value(),
        [
            0x01, 0x04, 0x04, 0x04, 0x64, 0x6f, 0x77, 0x6e, 0x01, 0x02, 0x69, 0x73, 0x01, 0x05,
            0x73, 0x74, 0x61, 0x67, 0x65, 0x01, 0x05, 0x74, 0x6f, 0x64, 0x61, 0x79, 0x01, 0x75,
            0xa7, 0xb1, 0x07
        ]
    );
    // 6 documents (memories 0-3 and 5, summary 0-1), total length 30, 1 in the tail.
    assert_eq!(
        tail.get((0, u64::MAX)).unwrap().unwrap().value(),
        [0x01, 0x06, 0x1e, 0x01, 0xe9, 0xaa, 0x8a, 0x58]
    );
    // "stage": memory #0 (tf 1, length 6), then summary 0-1 (document 1 << 56, length 5).
    let postings = r.open_table(POSTINGS).unwrap();
    assert_eq!(
        postings.get((0, "stage", 0)).unwrap().unwrap().value(),
        [
            0x01, 0x02, 0x00, 0x01, 0x06, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01,
            0x01, 0x05, 0x62, 0x20, 0xde, 0x4b
        ]
    );
    let vectors = r.open_table(VECTORS).unwrap();
    assert_eq!(
        vectors.get((0, 3)).unwrap().unwrap().value(),
        [0x01, 0x02, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x80, 0x3f, 0x5e, 0x89, 0x1a, 0x45]
    );
}
