//! A server store made before the project was renamed from engram to somna opens and takes
//! writes (docs/design.md, "History"): its commit-id table, `engram_commits`, is renamed to
//! `somna_commits` by the first read-write open (a read-only one reads and leaves it alone), and
//! a URL that names no schema finds the store in the schema `engram` that such a URL meant then,
//! when the default schema `somna` holds nothing. Needs the server `SOMNA_TEST_PG` names, reached
//! as a superuser that may create a database.

use somna_testkit::pg::{fresh_schema_name, test_server_url};

use crate::common::{run_raw, Env, Raw};

fn run(args: &[&str]) -> Raw {
    let e = Env::new();
    let mut c = e.cmd();
    c.env_remove("SOMNA_DB").args(args);
    run_raw(c, None)
}

fn ok(args: &[&str]) -> String {
    let r = run(args);
    assert_eq!(r.code, 0, "{args:?}: {r:?}");
    String::from_utf8_lossy(&r.out).into_owned()
}

/// The tables of `schema` whose names end in `_commits`.
fn commit_tables(admin: &mut postgres::Client, schema: &str) -> Vec<String> {
    admin
        .query(
            "SELECT table_name::text FROM information_schema.tables \
             WHERE table_schema = $1 AND table_name LIKE '%commits' ORDER BY 1",
            &[&schema],
        )
        .expect("tables")
        .iter()
        .map(|r| r.get(0))
        .collect()
}

/// Makes a store of two notes at `url` in `schema`, then gives its commit table the name a
/// store made before the rename has.
fn old_store(admin: &mut postgres::Client, url: &str, schema: &str) {
    ok(&["--db", url, "init"]);
    ok(&["--db", url, "note", "noted before the rename"]);
    admin
        .batch_execute(&format!(
            "ALTER TABLE \"{schema}\".somna_commits RENAME TO engram_commits"
        ))
        .expect("the old name");
}

#[test]
fn a_store_with_the_old_commit_table_opens_and_the_first_write_renames_it() {
    let Some(base) = test_server_url() else {
        return;
    };
    let schema = fresh_schema_name();
    let url = format!("{base}?schema={schema}");
    let mut admin = postgres::Client::connect(&base, postgres::NoTls).expect("connect");
    old_store(&mut admin, &url, &schema);
    let read = ok(&["--db", &url, "recall", "rename"]);
    assert!(read.contains("noted before the rename"), "{read}");
    assert_eq!(commit_tables(&mut admin, &schema), ["engram_commits"]);
    ok(&["--db", &url, "note", "noted after it"]);
    assert_eq!(commit_tables(&mut admin, &schema), ["somna_commits"]);
    let all = ok(&["--db", &url, "recall", "noted"]);
    assert!(
        all.contains("before the rename") && all.contains("after it"),
        "{all}"
    );
    ok(&["--db", &url, "verify"]);
}

#[test]
fn a_url_without_a_schema_finds_a_store_in_the_old_default_schema() {
    let Some(base) = test_server_url() else {
        return;
    };
    // A database of its own, so that no other test's store is in its default schema.
    let db = fresh_schema_name();
    let mut admin = postgres::Client::connect(&base, postgres::NoTls).expect("connect");
    admin
        .batch_execute(&format!("CREATE DATABASE {db}"))
        .expect("a database");
    let (server, _) = base.rsplit_once('/').expect("a database in the URL");
    let plain = format!("{server}/{db}");
    let mut inside = postgres::Client::connect(&plain, postgres::NoTls).expect("connect");
    old_store(&mut inside, &format!("{plain}?schema=engram"), "engram");
    let woke = ok(&["--db", &plain, "wake"]);
    assert!(woke.contains("noted before the rename"), "{woke}");
    ok(&["--db", &plain, "note", "noted after it"]);
    assert_eq!(commit_tables(&mut inside, "engram"), ["somna_commits"]);
    let n: i64 = inside
        .query_one(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = 'somna'",
            &[],
        )
        .expect("count")
        .get(0);
    assert_eq!(
        n, 0,
        "the store stayed where it was; no default schema was made"
    );
    // Once the default schema holds a store, a URL without a schema means that one.
    ok(&["--db", &format!("{plain}?schema=somna"), "init"]);
    let fresh = ok(&["--db", &plain, "recall", "noted"]);
    assert!(!fresh.contains("before the rename"), "{fresh}");
}
