//! Guards the vendored redb's table-type check (vendor/README.md, "table opens"): the key and
//! value type names an open compares with the stored ones are built once per type and kept, so
//! this checks that the kept names still refuse every wrong type, whatever was opened before, and
//! that somna still reports a store whose table was retyped behind its back as damaged.

use redb::{backends::InMemoryBackend, Database, ReadableDatabase, TableDefinition, TableError};
use somna::{Error, Options, Store};

const RIGHT: TableDefinition<(u32, u64), &[u8]> = TableDefinition::new("t");

fn mismatch<K: redb::Key + 'static, V: redb::Value + 'static>(
    db: &Database,
    def: TableDefinition<K, V>,
) -> bool {
    let tx = db.begin_read().expect("read");
    matches!(
        tx.open_table(def),
        Err(TableError::TableTypeMismatch { .. })
    )
}

#[test]
fn an_open_with_other_types_is_refused_before_and_after_the_right_one() {
    let db = Database::builder()
        .create_with_backend(InMemoryBackend::new())
        .expect("db");
    let tx = db.begin_write().expect("write");
    tx.open_table(RIGHT)
        .expect("table")
        .insert((1, 2), &b"v"[..])
        .expect("insert");
    tx.commit().expect("commit");
    // Wrong types first (nothing kept yet for them), then the right one, then wrong ones again
    // (their names kept now): every wrong open is refused, every right one reads the value.
    for round in 0..2 {
        assert!(
            mismatch(&db, TableDefinition::<(u64, u32), &[u8]>::new("t")),
            "round {round}"
        );
        assert!(mismatch(
            &db,
            TableDefinition::<(u32, u8, u64), &[u8]>::new("t")
        ));
        assert!(mismatch(&db, TableDefinition::<(u32, u64), &str>::new("t")));
        assert!(mismatch(&db, TableDefinition::<(u32, u64), u64>::new("t")));
        assert!(mismatch(&db, TableDefinition::<u32, &[u8]>::new("t")));
        let tx = db.begin_read().expect("read");
        let t = tx.open_table(RIGHT).expect("the right types open");
        assert_eq!(t.get((1, 2)).expect("get").expect("value").value(), b"v");
    }
    // A write transaction checks the same way.
    let tx = db.begin_write().expect("write");
    assert!(matches!(
        tx.open_table(TableDefinition::<(u32, u64), &str>::new("t")),
        Err(TableError::TableTypeMismatch { .. })
    ));
    assert!(tx.open_table(RIGHT).is_ok());
}

#[test]
fn a_store_whose_log_was_retyped_is_reported_damaged() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("s.redb");
    let store = Store::create(&path).expect("create");
    store
        .note("default", somna::NewMemory::new("a memory"))
        .expect("note");
    store.close().expect("close");
    {
        let db = Database::create(&path).expect("raw open");
        let tx = db.begin_write().expect("write");
        tx.delete_table(TableDefinition::<(u32, u64), &[u8]>::new("log"))
            .expect("delete");
        tx.open_table(TableDefinition::<(u32, u64), u64>::new("log"))
            .expect("retyped")
            .insert((0, 0), 7)
            .expect("insert");
        tx.commit().expect("commit");
    }
    let err = match Store::open_with(&path, Options::default()) {
        Err(e) => e,
        Ok(s) => s
            .wake_text("default", &Default::default())
            .expect_err("retyped log"),
    };
    assert!(
        matches!(err, Error::Corrupt { .. }),
        "a retyped table is a damaged store: {err:?}"
    );
}
