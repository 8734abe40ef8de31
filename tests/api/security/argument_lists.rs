//! Every list a client can send is bounded (issue 27, point 4): more than `MAX_SCOPES` named
//! scopes (in the CLI's list and in the library's reads over several scopes), or a note that supersedes or conflicts with more than `MAX_LINKS` memories, is
//! refused before anything is read or written; the limits themselves are accepted.

use somna::text::validate_scopes;
use somna::text::MAX_SCOPES;
use somna::MAX_LINKS;
use somna::{Error, NewMemory, Store};

#[test]
fn more_scopes_than_the_limit_are_refused() {
    let at: Vec<String> = (0..MAX_SCOPES).map(|i| format!("s{i}")).collect();
    assert!(validate_scopes(&at.join(",")).is_ok());
    let over: Vec<String> = (0..200_000).map(|i| format!("s{i}")).collect();
    let err = validate_scopes(&over.join(",")).unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err:?}");
}

#[test]
fn a_note_with_too_many_links_is_refused_and_writes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::create(crate::backend::location(dir.path(), "t.redb")).unwrap();
    let many: Vec<NewMemory> = (0..100).map(|i| NewMemory::new(format!("m{i}"))).collect();
    s.append("u", many, None).unwrap();
    let ids: Vec<u64> = (0..100).collect();
    let over = NewMemory::new("supersedes a hundred")
        .supersedes(ids[..MAX_LINKS].to_vec())
        .conflicts_with(vec![99]);
    let err = s.note("u", over).unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err:?}");
    assert_eq!(s.read(|r| r.count("u")).unwrap(), 100);
    let at = NewMemory::new("supersedes the limit").supersedes(ids[..MAX_LINKS].to_vec());
    assert_eq!(s.note("u", at).unwrap(), 100);
}

#[test]
fn the_librarys_reads_over_several_scopes_refuse_more_than_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::create(crate::backend::location(dir.path(), "t.redb")).unwrap();
    s.note("s0", NewMemory::new("alpha")).unwrap();
    let at: Vec<String> = (0..MAX_SCOPES).map(|i| format!("s{i}")).collect();
    let over: Vec<String> = (0..=MAX_SCOPES).map(|i| format!("s{i}")).collect();
    let invalid = |e: Error| matches!(e, Error::Invalid { what: "scope", .. });
    let search = somna::SearchQuery::new("alpha");
    assert_eq!(s.search_scopes(&at, &search).unwrap().hits.len(), 1);
    assert!(invalid(s.search_scopes(&over, &search).unwrap_err()));
    let recall = somna::RecallQuery::new("alpha");
    assert_eq!(s.recall_scopes(&at, &recall).unwrap().len(), MAX_SCOPES);
    assert!(invalid(s.recall_scopes(&over, &recall).unwrap_err()));
    let wake = somna::WakeOptions::default();
    assert!(s.wake_scopes(&at, &wake).is_ok());
    assert!(invalid(s.wake_scopes(&over, &wake).unwrap_err()));
}
