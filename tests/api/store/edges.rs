//! The library's side of the command line's input edges (issue 52, points 11, 12, 14 and 16):
//! a busy timeout of 0 tries once, `Store::create` makes a store of an empty file, a search page
//! that cannot hold a hit is refused, an empty JSON Lines import is refused, and `migrate` on a
//! store at this format writes nothing. tests/cli/input_edges.rs runs the same through the binary.

use std::time::Duration;

use somna::{Error, NewMemory, Options, RecallQuery, SearchQuery, Store};

/// How many memories of `scope` match `pattern`.
fn found(s: &Store, pattern: &str) -> usize {
    s.recall("default", &RecallQuery::new(pattern))
        .unwrap()
        .matches
        .len()
}

fn invalid(e: Error, what: &str) {
    assert!(
        matches!(&e, Error::Invalid { what: w, .. } if *w == what),
        "expected invalid {what}: {e}"
    );
}

#[test]
fn a_busy_timeout_of_0_opens_reads_and_writes_an_idle_store() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    Store::create(&path).unwrap().close().unwrap();
    for read_only in [false, true] {
        let opts = Options::default()
            .busy_timeout(Duration::ZERO)
            .read_only(read_only);
        let s = Store::open_with(&path, opts).unwrap();
        if !read_only {
            s.note("default", NewMemory::new("no wait")).unwrap();
        }
        assert_eq!(found(&s, "no wait"), 1);
        s.close().unwrap();
    }
}

#[test]
fn create_makes_a_store_of_an_empty_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    std::fs::write(&path, b"").unwrap();
    assert!(!Store::exists(&path));
    assert!(matches!(Store::open(&path), Err(Error::NotFound { .. })));
    let s = Store::create(&path).unwrap();
    assert!(s.was_created());
    s.note("default", NewMemory::new("in the empty file"))
        .unwrap();
    s.close().unwrap();
    // The store and its shared commit journal, no temporary file
    let mut names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["s.redb", "s.redb-journal"]);
    let s = Store::open(&path).unwrap();
    assert_eq!(found(&s, "in the empty file"), 1);
}

#[test]
fn a_search_page_that_cannot_hold_a_hit_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::create(crate::backend::location(dir.path(), "s.redb")).unwrap();
    s.note("default", NewMemory::new("deploys go through staging"))
        .unwrap();
    let mut q = SearchQuery::new("deploys");
    q.limit = 0;
    invalid(s.search("default", &q).unwrap_err(), "limit");
    for budget in [0, 1, 10] {
        let mut q = SearchQuery::new("deploys");
        q.max_bytes = budget;
        invalid(s.search("default", &q).unwrap_err(), "byte budget");
    }
    let found = s.search("default", &SearchQuery::new("deploys")).unwrap();
    assert_eq!(found.hits.len(), 1);
    assert_eq!(found.next_offset, None);
}

#[test]
fn an_empty_jsonl_import_is_refused_and_an_empty_export_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::create(crate::backend::location(dir.path(), "s.redb")).unwrap();
    for input in ["", "\n", " \n\n"] {
        invalid(s.import_jsonl(&mut input.as_bytes()).unwrap_err(), "import");
    }
    let mut export = Vec::new();
    s.export(&mut export).unwrap();
    let other = Store::create(crate::backend::location(dir.path(), "t.redb")).unwrap();
    other.import_jsonl(&mut export.as_slice()).unwrap();
}

#[test]
fn migrate_on_a_store_at_this_format_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let s = Store::create(&path).unwrap();
    s.note("default", NewMemory::new("kept")).unwrap();
    s.close().unwrap();
    let ro = Store::open_with(&path, Options::default().read_only(true)).unwrap();
    assert!(!ro.needs_migration().unwrap());
    let m = ro.migrate().unwrap();
    assert_eq!(m.from, m.to);
    ro.close().unwrap();
    let s = Store::open(&path).unwrap();
    let before = std::fs::read(&path).unwrap();
    let m = s.migrate().unwrap();
    assert_eq!(m.from, m.to);
    assert_eq!(std::fs::read(&path).unwrap(), before, "migrate wrote");
}
