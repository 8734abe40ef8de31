//! `somna copy SRC DST` moves a whole store between backends without losing or changing
//! anything: a file copied to a server schema and back gives an export identical to the
//! original's (vectors included), sessions and grants included (they are compared by loading them), a copy into a
//! store that already holds memories is refused and writes nothing, and the source is left as
//! it was. The file-to-file case always runs; the server legs run against `SOMNA_TEST_PG`
//! (skipped without one, failed under CI without one).

use somna_testkit::pg::{fresh_schema_url, test_server_url};

use crate::common::{run_raw, Env, Raw};

/// `somna ARGS` with `input` on stdin; asserts exit 0.
fn ok_in(e: &Env, args: &[&str], input: &[u8]) {
    let mut c = e.cmd();
    c.args(args);
    let r = run_raw(c, Some(input));
    assert_eq!(r.code, 0, "somna {args:?}: {r:?}");
}

fn run(e: &Env, args: &[&str]) -> Raw {
    let mut c = e.cmd();
    c.args(args);
    run_raw(c, None)
}

/// A file store with memories, summaries, a session and a grant.
fn source() -> Env {
    let e = Env::init();
    let lines: String = (0..40)
        .map(|i| format!("2024-01-{:02} memory {i}\n", 1 + i / 4))
        .collect();
    ok_in(&e, &["import", "-"], lines.as_bytes());
    ok_in(&e, &["nap", "0-1", "-"], b"the first two\n");
    ok_in(
        &e,
        &["session", "append", "chat"],
        br#"[{"role":"user","content":"hi"}]"#,
    );
    e.ok(&["grant", "user:bob", "read", "default"]);
    let v = e.file("v.json", b"[0.6, 0.8]");
    e.ok(&["note", "a memory with a vector", "--vector", &v]);
    e
}

/// What a store holds, as the CLI shows it: the export (vectors included), the session, the
/// grants.
fn content(e: &Env, db: &str) -> (String, String, String) {
    let export = e.ok(&["--db", db, "export"]);
    assert!(export.contains(r#""vector":[0.6,0.8]"#), "{export}");
    (
        export,
        e.ok(&["--db", db, "session", "load", "chat"]),
        e.ok(&["--db", db, "grants"]),
    )
}

fn round_trip(e: &Env, middle: &str) {
    let src = e.db.to_str().expect("utf8").to_string();
    let before = content(e, &src);
    let out = e.ok(&["copy", &src, middle]);
    assert!(out.starts_with("Copied "), "{out}");
    assert!(out.contains("the same export"), "{out}");
    assert_eq!(content(e, middle), before, "after the first copy");
    let back = e.dir.path().join("back.redb");
    let back = back.to_str().expect("utf8");
    e.ok(&["copy", middle, back]);
    assert_eq!(content(e, back), before, "after the copy back");
    assert_eq!(content(e, &src), before, "the source is unchanged");
    // Into a store that is not empty: refused, nothing written.
    let r = run(e, &["copy", &src, back]);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(
        String::from_utf8_lossy(&r.err).contains("is not empty"),
        "{r:?}"
    );
    assert_eq!(content(e, back), before, "a refused copy wrote nothing");
}

#[test]
fn a_file_copied_to_another_file_and_back_is_the_same_store() {
    let e = source();
    if e.on_server() {
        return;
    }
    let middle = e.dir.path().join("middle.redb");
    round_trip(&e, middle.to_str().expect("utf8"));
}

#[test]
fn a_file_copied_to_a_server_and_back_is_the_same_store() {
    let Some(base) = test_server_url() else {
        return;
    };
    let e = source();
    if e.on_server() {
        return;
    }
    round_trip(&e, &fresh_schema_url(&base));
}

#[test]
fn copy_refuses_the_same_store_twice() {
    let e = source();
    let db = e.db.to_str().expect("utf8").to_string();
    let r = run(&e, &["copy", &db, &db]);
    assert_eq!(r.code, 2, "{r:?}");
}
