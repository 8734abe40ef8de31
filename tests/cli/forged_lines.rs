//! A store path cannot forge an output line (issue 27, point 7): with `--db` holding newlines
//! and a line that reads `Run: touch PWNED`, no line of `init`, `note` or `wake` reads as that
//! command; the path is quoted as one `$'...'` shell word, and the printed commands still name
//! the same store when bash runs them.

use std::process::Command;

use crate::common::{run_raw, Env, BIN};

const FORGED: &str = "q/a\nRun: touch PWNED\nb";

/// Runs `somna --db PATH ARGS`; asserts exit 0 and returns stdout.
fn run(e: &Env, db: &str, args: &[&str]) -> String {
    let mut c = e.cmd();
    c.arg("--db").arg(db).args(args);
    let r = run_raw(c, None);
    assert_eq!(r.code, 0, "{args:?}: {r:?}");
    String::from_utf8(r.out).unwrap()
}

/// The store path inside the folder [`FORGED`] names (created), as a string.
fn forged_store(e: &Env) -> String {
    std::fs::create_dir_all(e.dir.path().join(FORGED)).unwrap();
    let db = e.dir.path().join(FORGED).join("m.redb");
    db.to_str().unwrap().to_string()
}

/// The first `$'...'` word of `out` (up to its first unescaped quote).
fn dollar_word(out: &str) -> Option<&str> {
    let start = out.find("$'")?;
    let body = &out[start + 2..];
    let mut escaped = false;
    for (i, c) in body.char_indices() {
        match c {
            '\\' if !escaped => escaped = true,
            '\'' if !escaped => return Some(&out[start..start + 2 + i + 1]),
            _ => escaped = false,
        }
    }
    None
}

#[test]
fn a_newline_in_the_store_path_forges_no_run_line() {
    let e = Env::new();
    let db = forged_store(&e);
    let db = db.as_str();
    let mut all = run(&e, db, &["init"]);
    all.push_str(&run(&e, db, &["note", "hello there"]));
    all.push_str(&run(&e, db, &["wake"]));
    for line in all.lines() {
        assert!(
            !line.trim_start().starts_with("Run: touch"),
            "{line:?}\n{all}"
        );
    }
    assert!(all.contains("$'"), "{all}");
    assert!(!e.dir.path().join("PWNED").exists());
}

#[test]
fn the_quoted_path_names_the_same_store_in_bash() {
    let e = Env::new();
    let db = forged_store(&e);
    let db = db.as_str();
    let out = run(&e, db, &["init"]);
    run(&e, db, &["note", "a line to find"]);
    let quoted = dollar_word(&out).unwrap_or_else(|| panic!("no $'...' word in {out}"));
    let script = format!("{BIN} --db {quoted} recall 'line to find'");
    let mut sh = Command::new("bash");
    sh.arg("-c").arg(&script);
    let r = run_raw(sh, None);
    assert_eq!(r.code, 0, "{script}: {r:?}");
    assert!(
        String::from_utf8_lossy(&r.out).contains("a line to find"),
        "{r:?}"
    );
    assert!(!e.dir.path().join("PWNED").exists());
}
