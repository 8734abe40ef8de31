//! Guards `verify` over the session tables: a row of `session_chunks`, `session_archive` or
//! `session_idempotency` whose session has no record is reported by table and key, and the
//! session it was copied from still checks clean.

use somna::format::{SESSION_ARCHIVE, SESSION_CHUNKS, SESSION_IDEMPOTENCY};
use somna::Store;

/// Copies every row of session `from` in `table` to session `to`, through redb itself (`key`
/// lends the rest of a key as the table takes it).
macro_rules! copy_rows {
    ($tx:expr, $table:expr, $from:expr, $to:expr, $key:expr) => {{
        let mut t = $tx.open_table($table).unwrap();
        let rows: Vec<_> = {
            use redb::ReadableTable;
            t.iter()
                .unwrap()
                .map(|r| r.unwrap())
                .filter(|(k, _)| k.value().0 == $from)
                .map(|(k, v)| (k.value().1.to_owned(), v.value().to_vec()))
                .collect()
        };
        assert!(
            !rows.is_empty(),
            "session {} has rows in {}",
            $from,
            stringify!($table)
        );
        for (k, v) in &rows {
            t.insert(($to, $key(k)), v.as_slice()).unwrap();
        }
    }};
}

#[test]
fn rows_of_no_session_are_reported_by_table_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.redb");
    let mut s = Store::create(&path).unwrap();
    let msgs = [r#"{"n":1}"#, r#"{"n":2}"#, r#"{"n":3}"#];
    s.session_save("real", &msgs, None).unwrap();
    // Saving a shorter list archives what it drops; an append with a key keeps the key.
    s.session_save("real", &msgs[..1], None).unwrap();
    s.session_append("real", &[r#"{"n":4}"#], Some("k1"), None)
        .unwrap();
    assert!(s.verify().unwrap().ok());
    s.close().unwrap();

    let db = redb::Database::builder()
        .set_concurrency_mode(redb::ConcurrencyMode::MultiWriter)
        .open(&path)
        .unwrap();
    let tx = db.begin_write().unwrap();
    copy_rows!(tx, SESSION_CHUNKS, "real", "ghost", |k: &u64| *k);
    copy_rows!(tx, SESSION_ARCHIVE, "real", "ghost", |k: &u64| *k);
    copy_rows!(tx, SESSION_IDEMPOTENCY, "real", "ghost", String::as_str);
    tx.commit().unwrap();
    drop(db);

    let mut s = Store::open(&path).unwrap();
    let report = s.verify().unwrap();
    let mut problems = report.problems.clone();
    problems.sort();
    assert_eq!(
        problems,
        [
            r#"archived message ("ghost", 0) belongs to no session"#,
            r#"archived message ("ghost", 1) belongs to no session"#,
            r#"session chunk ("ghost", 0) belongs to no session"#,
            r#"session idempotency key ("ghost", "k1") belongs to no session"#,
        ],
        "{report:?}"
    );
    // The session the rows were copied from is whole.
    assert_eq!(s.session_load("real").unwrap().unwrap().len(), 2);
}
