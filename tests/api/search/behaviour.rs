//! Guards ranked search end to end, one behaviour per test: the best match ranks first; a query's
//! irregular verb in its base form finds its other forms, counted as one term; a
//! summary hit names its block; retracted and superseded memories rank only on request, marked;
//! redacted text is purged from the index (no posting, no hit) with its vector; a reader of one
//! scope gets no hit, count or score from another; accents and CJK are found; the index survives
//! the fold of its tail; vectors rank alone and fused, and travel (with the scope's dimension)
//! through export and import, while an export without them still imports; the format-1 fixture is upgraded on its
//! first read-write open and read as it is read-only.

use std::path::Path;

use somna::trust::Access;
use somna::Decision;
use somna::{Error, Kind, NewMemory, Options, SearchMode, SearchQuery, Store};

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::create(crate::backend::location(dir.path(), "t.redb")).unwrap();
    (dir, s)
}

fn ids(s: &Store, scope: &str, q: &SearchQuery) -> Vec<Option<u64>> {
    s.search(scope, q)
        .unwrap()
        .hits
        .iter()
        .map(|h| h.id)
        .collect()
}

/// A query that ranks only the documents holding one of its words (no neighbour propagation).
fn exact(text: &str) -> SearchQuery {
    let mut q = SearchQuery::new(text);
    q.params.neighbour_weight = 0.0;
    q
}

fn clean(s: &mut Store) {
    let r = s.verify().unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
}

#[test]
fn the_best_match_ranks_first_and_names_its_terms() {
    let (_d, mut s) = store();
    for t in [
        "the build uses cargo and make",
        "Caroline went to the LGBTQ support group on Tuesday",
        "lunch was pasta",
        "the support desk closes at five",
    ] {
        s.note("u", NewMemory::new(t)).unwrap();
    }
    let r = s.search("u", &exact("support group Caroline")).unwrap();
    assert_eq!(r.hits[0].id, Some(1));
    assert_eq!(
        r.hits[0].terms,
        ["support", "group", "carolin"],
        "stemmed query terms"
    );
    assert!(r.hits[0].line.starts_with("#1 "), "{}", r.hits[0].line);
    assert!(
        r.hits.iter().all(|h| h.id != Some(2)),
        "lunch matches nothing"
    );
    clean(&mut s);
}

#[test]
fn a_verb_asked_in_its_base_form_finds_its_past_forms_as_one_term() {
    let (_d, mut s) = store();
    for t in [
        "Caroline went to the support group",
        "the group photo is online",
        "we have gone there, going again",
        "they leave at noon",
    ] {
        s.note("u", NewMemory::new(t)).unwrap();
    }
    let r = s
        .search("u", &exact("when did Caroline go to the group?"))
        .unwrap();
    assert_eq!(r.hits[0].id, Some(0), "{:?}", r.hits);
    assert_eq!(
        r.hits[0].terms,
        ["carolin", "go", "group"],
        "named by the base form"
    );
    let mut go = ids(&s, "u", &exact("go"));
    go.sort();
    assert_eq!(
        go,
        [Some(0), Some(2)],
        "went, gone and going are forms of go"
    );
    assert_eq!(
        ids(&s, "u", &exact("went")),
        [Some(0)],
        "a past form matches only itself"
    );
    assert!(
        ids(&s, "u", &exact("left")).is_empty(),
        "left is not a base form"
    );
    assert_eq!(ids(&s, "u", &exact("leave")), [Some(3)]);
    clean(&mut s);
}

#[test]
fn a_summary_hit_names_its_block() {
    let (_d, mut s) = store();
    s.note("u", NewMemory::new("first")).unwrap();
    s.note("u", NewMemory::new("second")).unwrap();
    let b = s.next_prompt("u").unwrap().unwrap().block;
    s.nap("u", b, "the quarterly zeppelin review").unwrap();
    let r = s.search("u", &SearchQuery::new("zeppelin")).unwrap();
    assert_eq!(r.hits.len(), 1);
    assert_eq!(r.hits[0].block, b);
    assert_eq!(r.hits[0].id, None);
    assert_eq!(r.hits[0].line, "#0-1 the quarterly zeppelin review");
    s.forget("u", b).unwrap();
    assert!(s
        .search("u", &SearchQuery::new("zeppelin"))
        .unwrap()
        .hits
        .is_empty());
    clean(&mut s);
}

#[test]
fn inactive_memories_rank_only_on_request_and_marked() {
    let (_d, mut s) = store();
    let a = s
        .note("u", NewMemory::new("the deploy key rotates weekly"))
        .unwrap();
    let b = s
        .note(
            "u",
            NewMemory::new("the deploy key rotates daily").supersedes(vec![a]),
        )
        .unwrap();
    let c = s
        .note("u", NewMemory::new("the deploy uses blue green"))
        .unwrap();
    s.decide("u", c, Decision::Retract, None).unwrap();
    let p = s
        .note(
            "u",
            NewMemory::new("the deploy might move").kind(Kind::Inference),
        )
        .unwrap();
    let q = exact("deploy");
    let mut shown = ids(&s, "u", &q);
    shown.sort();
    assert_eq!(shown, [Some(b), Some(p)]);
    let r = s.search("u", &q).unwrap();
    let proposed = r.hits.iter().find(|h| h.id == Some(p)).unwrap();
    assert!(proposed.line.contains("[proposed]"), "{}", proposed.line);
    let mut all = q.clone();
    all.include_inactive = true;
    let r = s.search("u", &all).unwrap();
    assert_eq!(r.hits.len(), 4);
    let retracted = r.hits.iter().find(|h| h.id == Some(c)).unwrap();
    assert!(
        retracted.inactive && retracted.line.contains("retracted"),
        "{}",
        retracted.line
    );
    clean(&mut s);
}

#[test]
fn redacted_text_is_purged_from_the_index() {
    let (_d, mut s) = store();
    s.note("u", NewMemory::new("the password hint is marmalade"))
        .unwrap();
    let id = s
        .note("u", NewMemory::new("marmalade sandwich recipe"))
        .unwrap();
    s.set_vector("u", id, &[1.0, 0.0]).unwrap();
    s.redact("u", id, "private").unwrap();
    assert_eq!(ids(&s, "u", &exact("marmalade sandwich")), [Some(0)]);
    let content = s.read(|r| r.search_index("u")).unwrap();
    assert!(
        content.docs.keys().all(|d| *d != id),
        "a posting still refers to #{id}"
    );
    let mut v = SearchQuery::new("");
    v.vector = Some(vec![1.0, 0.0]);
    v.mode = Some(SearchMode::Vector);
    assert!(
        s.search("u", &v).unwrap().hits.is_empty(),
        "its vector is gone too"
    );
    clean(&mut s);
}

#[test]
fn a_reader_of_one_scope_gets_nothing_from_another() {
    let (_d, s) = store();
    s.note("team/a", NewMemory::new("alpha launch plan"))
        .unwrap();
    s.note("team/b", NewMemory::new("alpha secret budget"))
        .unwrap();
    s.note("team/b", NewMemory::new("alpha alpha alpha"))
        .unwrap();
    s.grant("user:ann", Access::Read, "team/a").unwrap();
    let ann = s.as_principal(Some("user:ann"));
    let readable = ann.read(|r| r.scopes()).unwrap();
    assert_eq!(readable, ["team/a"]);
    let r = ann
        .search_scopes(&readable, &exact("alpha budget"))
        .unwrap();
    assert_eq!(r.hits.len(), 1);
    assert_eq!(r.candidates, 1, "no count from team/b");
    assert_eq!(r.hits[0].scope, "team/a");
    let alone = s.search("team/a", &exact("alpha budget")).unwrap();
    assert_eq!(
        alone.hits[0].score, r.hits[0].score,
        "team/b changed team/a's score"
    );
    let denied = ann.search_scopes(&["team/b".to_string()], &SearchQuery::new("alpha"));
    assert!(matches!(denied, Err(Error::Denied(_))), "{denied:?}");
}

#[test]
fn accents_and_cjk_are_found() {
    let (_d, s) = store();
    s.note("u", NewMemory::new("Rendez-vous au café à Noël"))
        .unwrap();
    s.note("u", NewMemory::new("東京で会議があります")).unwrap();
    s.note("u", NewMemory::new("Straße gesperrt")).unwrap();
    assert_eq!(ids(&s, "u", &exact("CAFÉ noël")), [Some(0)]);
    assert_eq!(ids(&s, "u", &exact("東京")), [Some(1)]);
    assert_eq!(ids(&s, "u", &exact("straße")), [Some(2)]);
}

#[test]
fn the_index_survives_folding_its_tail() {
    let (_d, mut s) = store();
    let batch: Vec<NewMemory> = (0..300)
        .map(|i| NewMemory::new(format!("entry {i} about topic{}", i % 7)))
        .collect();
    s.append("u", batch, None).unwrap();
    for i in 300..600 {
        s.note(
            "u",
            NewMemory::new(format!("entry {i} about topic{}", i % 7)),
        )
        .unwrap();
    }
    let r = s.search("u", &SearchQuery::new("entry 5")).unwrap();
    assert_eq!(r.hits[0].id, Some(5));
    let r = s.search("u", &SearchQuery::new("599")).unwrap();
    assert_eq!(r.hits[0].id, Some(599));
    let mut q = exact("topic3");
    q.limit = 1000;
    assert_eq!(s.search("u", &q).unwrap().hits.len(), 86);
    clean(&mut s);
}

#[test]
fn vectors_rank_alone_and_fused() {
    let (_d, mut s) = store();
    let a = s.note("u", NewMemory::new("apples are red")).unwrap();
    let b = s.note("u", NewMemory::new("the sky is blue")).unwrap();
    s.set_vector("u", a, &[1.0, 0.0, 0.0]).unwrap();
    s.set_vector("u", b, &[0.0, 1.0, 0.0]).unwrap();
    let bad = s.set_vector("u", b, &[0.0, 1.0]);
    assert!(matches!(bad, Err(Error::Invalid { .. })), "{bad:?}");
    let mut q = SearchQuery::new("");
    q.vector = Some(vec![0.1, 0.9, 0.0]);
    q.mode = Some(SearchMode::Vector);
    assert_eq!(ids(&s, "u", &q), [Some(b), Some(a)]);
    let mut h = exact("apples");
    h.vector = Some(vec![0.1, 0.9, 0.0]);
    let r = s.search("u", &h).unwrap();
    assert_eq!(r.hits.len(), 2, "fused: the word's hit and the vector's");
    clean(&mut s);
}

#[test]
fn vectors_and_dimensions_travel_through_export_and_import() {
    let (_d, s) = store();
    let a = s
        .note("u", NewMemory::new("apples").vector(vec![1.0, 0.0, 0.0]))
        .unwrap();
    s.note("u", NewMemory::new("no vector")).unwrap();
    let c = s
        .note("u", NewMemory::new("sky").vector(vec![0.0, 0.5, 0.25]))
        .unwrap();
    let gone = s
        .note(
            "w",
            NewMemory::new("w's only vector").vector(vec![1.0, 2.0]),
        )
        .unwrap();
    s.redact("w", gone, "private").unwrap();
    let mut exported = Vec::new();
    s.export(&mut exported).unwrap();
    let text = String::from_utf8(exported.clone()).unwrap();
    assert!(
        text.contains(r#"{"type":"vectors","scope":"w","dimension":2}"#),
        "{text}"
    );
    let (_d2, t) = store();
    t.import_jsonl(&mut exported.as_slice()).unwrap();
    let mut again = Vec::new();
    t.export(&mut again).unwrap();
    assert_eq!(
        String::from_utf8(again).unwrap(),
        text,
        "the import gave another export"
    );
    let mut q = SearchQuery::new("");
    q.vector = Some(vec![0.0, 1.0, 0.5]);
    q.mode = Some(SearchMode::Vector);
    assert_eq!(ids(&t, "u", &q), [Some(c), Some(a)]);
    let bad = t.set_vector("w", 0, &[1.0, 2.0, 3.0]);
    assert!(
        matches!(bad, Err(Error::Invalid { .. })),
        "w's dimension was lost: {bad:?}"
    );
}

#[test]
fn an_export_without_vectors_still_imports() {
    let old = concat!(
        r#"{"type":"store","format":1}"#,
        "\n",
        r#"{"type":"memory","scope":"default","id":0,"observed_us":1717200000000000,"#,
        r#""recorded_us":1795980325853570,"text":"fact 0","kind":"Observation","#,
        r#""status":"Accepted","source":null,"source_uri":null,"supersedes":[],"#,
        r#""conflicts_with":[],"valid_until_us":null}"#,
        "\n",
    );
    let (_d, s) = store();
    s.import_jsonl(&mut old.as_bytes()).unwrap();
    assert_eq!(ids(&s, "default", &SearchQuery::new("fact")), [Some(0)]);
    let bad = r#"{"type":"vectors","scope":"x","dimension":0}"#;
    let e = s.import_jsonl(&mut bad.as_bytes());
    assert!(matches!(e, Err(Error::Invalid { .. })), "{e:?}");
}

fn fixture(dir: &Path) -> std::path::PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format1.redb");
    let dst = dir.join("format1.redb");
    std::fs::copy(src, &dst).unwrap();
    dst
}

#[test]
fn the_format1_fixture_is_indexed_on_its_first_read_write_open() {
    let dir = tempfile::tempdir().unwrap();
    let mut s = Store::open(fixture(dir.path())).unwrap();
    let first = s.memory("default", 0).unwrap();
    let r = s.search("default", &exact(&first.text)).unwrap();
    assert_eq!(r.hits.first().and_then(|h| h.id), Some(0));
    clean(&mut s);
    assert!(s.reindex(&mut |_, _| {}).unwrap() > 0);
    clean(&mut s);
}

/// Turns a store of this somna back into format 1: no index tables, `format` = 1.
fn downgrade(path: &Path) {
    let db = redb::Database::builder()
        .set_concurrency_mode(redb::ConcurrencyMode::MultiWriter)
        .open(path)
        .unwrap();
    let w = db.begin_write().unwrap();
    use somna::format::{META, SEARCH_POSTINGS, SEARCH_TAIL, VECTORS};
    w.delete_table(SEARCH_TAIL).unwrap();
    w.delete_table(SEARCH_POSTINGS).unwrap();
    w.delete_table(VECTORS).unwrap();
    let one = somna::format::encode(&1u32).unwrap();
    w.open_table(META)
        .unwrap()
        .insert("format", one.as_slice())
        .unwrap();
    w.commit().unwrap();
}

#[test]
fn a_format1_store_is_read_as_it_is_read_only_and_upgraded_read_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("old.redb");
    Store::create(&path)
        .unwrap()
        .note("u", NewMemory::new("old words"))
        .unwrap();
    downgrade(&path);
    let ro = Store::open_with(&path, Options::default().read_only(true)).unwrap();
    assert_eq!(ro.count("u").unwrap(), 1);
    let e = ro.search("u", &SearchQuery::new("words"));
    assert!(
        matches!(&e, Err(Error::Unsupported(m)) if m.contains("somna reindex")),
        "{e:?}"
    );
    drop(ro);
    let mut rw = Store::open(&path).unwrap();
    assert_eq!(ids(&rw, "u", &SearchQuery::new("words")), [Some(0)]);
    clean(&mut rw);
}

#[test]
fn a_search_mode_is_one_of_three_names() {
    use somna::SearchMode;
    assert_eq!(
        "lexical".parse::<SearchMode>().unwrap(),
        SearchMode::Lexical
    );
    assert_eq!("hybrid".parse::<SearchMode>().unwrap(), SearchMode::Hybrid);
    assert_eq!("vector".parse::<SearchMode>().unwrap(), SearchMode::Vector);
    let err = "fuzzy".parse::<SearchMode>().unwrap_err();
    assert!(
        matches!(err, somna::Error::Invalid { what: "mode", .. }),
        "{err:?}"
    );
}

#[test]
fn rank_parameters_no_ranking_could_use_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let s = somna::Store::create(dir.path().join("p.redb")).unwrap();
    s.note("a", somna::NewMemory::new("alpha beta")).unwrap();
    let with = |f: &dyn Fn(&mut somna::search::RankParams)| {
        let mut q = somna::SearchQuery::new("alpha");
        f(&mut q.params);
        s.search("a", &q)
    };
    assert_eq!(with(&|_| {}).unwrap().hits.len(), 1);
    for bad in [
        with(&|p| p.neighbours = u32::MAX),
        with(&|p| p.k1 = f64::NAN),
        with(&|p| p.b = -1.0),
        with(&|p| p.coverage = f64::INFINITY),
    ] {
        let err = bad.unwrap_err();
        assert!(
            matches!(
                err,
                somna::Error::Invalid {
                    what: "rank parameters",
                    ..
                }
            ),
            "{err:?}"
        );
    }
}
