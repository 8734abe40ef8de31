//! Printed commands run as printed. Every command the real `somna` hands to the agent is on a
//! line that starts with `Run:`, names the binary as `PATH` finds it (or this binary's full path
//! when `PATH` finds another or none), and carries `--db`, `--scope` and `--as` whenever they are
//! not the defaults, wherever they came from: each test runs the printed line through `sh` in an
//! environment without the variables that produced it, and checks that it did what it says.
//! Usage errors name only what must be typed, never an option the environment already sets.

use std::path::Path;
use std::process::Command;

use crate::common::{run_raw, Env, Raw, BIN};

/// The `Run:` lines of an output, without the prefix.
fn run_lines(out: &[u8]) -> Vec<String> {
    String::from_utf8_lossy(out)
        .lines()
        .filter_map(|l| l.strip_prefix("Run: ").map(str::to_string))
        .collect()
}

/// `sh -c SCRIPT` with nothing but `PATH` (and `HOME`) in its environment.
fn sh(script: &str, path: &str, home: &Path) -> Raw {
    let mut c = Command::new("sh");
    c.env_clear()
        .env("PATH", path)
        .env("HOME", home)
        .arg("-c")
        .arg(script);
    run_raw(c, None)
}

/// `somna ARGS` with a `PATH` on which no `somna` is found.
fn somna(env: &Env, args: &[&str]) -> Raw {
    let mut c = env.cmd();
    c.env("PATH", BARE_PATH).args(args);
    run_raw(c, None)
}

/// A PATH on which no `somna` is found.
const BARE_PATH: &str = "/usr/bin:/bin";

#[test]
fn run_lines_name_this_binary_by_its_full_path_when_path_does_not_find_it() {
    let env = Env::new();
    assert_eq!(somna(&env, &["init"]).code, 0);
    somna(&env, &["note", "one"]);
    let r = somna(&env, &["note", "two"]);
    let lines = run_lines(&r.out);
    let quoted = format!(
        "{BIN} --db {} nap 0-1 \"<your line>\"",
        crate::common::quoted(&env.db.display().to_string())
    );
    assert_eq!(lines.last(), Some(&quoted), "{r:?}");
    // The printed line, with the answer filled in, runs as printed in a bare shell.
    let line = quoted.replace("<your line>", "one and two");
    let done = sh(&line, BARE_PATH, env.dir.path());
    assert_eq!(done.code, 0, "{done:?}");
    assert!(
        String::from_utf8_lossy(&done.out).starts_with("Saved 0-1."),
        "{done:?}"
    );
}

#[test]
fn run_lines_say_somna_when_path_finds_this_binary() {
    let env = Env::new();
    let dir = Path::new(BIN).parent().expect("the binary's folder");
    let path = format!("{}:{BARE_PATH}", dir.display());
    let mut c = env.cmd();
    c.env("PATH", &path).args(["init"]);
    assert_eq!(run_raw(c, None).code, 0);
    let mut c = env.cmd();
    c.env("PATH", &path).args(["wake"]);
    let r = run_raw(c, None);
    let out = String::from_utf8_lossy(&r.out);
    let expected = format!(
        "No memories yet. Record the first with: somna --db {} note",
        crate::common::quoted(&env.db.display().to_string())
    );
    assert!(out.starts_with(&expected), "{out}");
}

#[test]
fn run_lines_carry_db_scope_and_principal_from_the_environment() {
    let env = Env::new();
    assert_eq!(somna(&env, &["init"]).code, 0);
    for access in ["read", "write"] {
        assert_eq!(somna(&env, &["grant", "agent:a", access, "work"]).code, 0);
    }
    let with_env = |args: &[&str]| {
        let mut c = env.cmd();
        c.env("PATH", BARE_PATH)
            .env("SOMNA_SCOPE", "work")
            .env("SOMNA_PRINCIPAL", "agent:a")
            .args(args);
        run_raw(c, None)
    };
    with_env(&["note", "first"]);
    let r = with_env(&["note", "second"]);
    let lines = run_lines(&r.out);
    assert_eq!(lines.len(), 2, "{r:?}");
    let stdin_form = &lines[0];
    assert_eq!(
        stdin_form,
        &format!(
            "{BIN} --db {} --as agent:a --scope work nap 0-1 - <<'EOF'",
            crate::common::quoted(&env.db.display().to_string())
        )
    );
    // The stdin form, pasted into a shell that has none of the variables, with the line and EOF.
    let script = format!("{stdin_form}\nfirst and second, merged\nEOF\n");
    let done = sh(&script, BARE_PATH, env.dir.path());
    assert_eq!(done.code, 0, "{done:?}");
    let why = somna(&env, &["--scope", "work", "why", "0-1"]);
    assert!(
        String::from_utf8_lossy(&why.out).contains("first and second, merged"),
        "the answer was saved in scope work: {why:?}"
    );
}

#[test]
fn the_merge_prompt_offers_both_forms_on_run_lines_and_nothing_in_brackets() {
    let env = Env::new();
    somna(&env, &["init"]);
    somna(&env, &["note", "one"]);
    let r = somna(&env, &["note", "two"]);
    let out = String::from_utf8_lossy(&r.out);
    assert!(!out.contains("(To avoid"), "{out}");
    let lines = run_lines(&r.out);
    assert!(lines[0].ends_with("nap 0-1 - <<'EOF'"), "{lines:?}");
    assert!(lines[1].ends_with("nap 0-1 \"<your line>\""), "{lines:?}");
}

#[test]
fn usage_errors_do_not_show_an_option_the_environment_sets() {
    let env = Env::new();
    let mut c = env.cmd();
    c.env("SOMNA_SCOPE", "x")
        .env("SOMNA_PRINCIPAL", "agent:a")
        .env("SOMNA_BUSY_TIMEOUT_MS", "5")
        .arg("note");
    let r = run_raw(c, None);
    let err = String::from_utf8_lossy(&r.err);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(err.contains("Usage: somna note <TEXT>"), "{err}");
    for opt in ["--db", "--scope", "--as", "--busy-timeout-ms"] {
        assert!(!err.contains(opt), "{opt} in {err}");
    }
}

#[test]
fn a_bad_environment_variable_is_a_clear_error() {
    let env = Env::new();
    let mut c = env.cmd();
    c.env("SOMNA_BUSY_TIMEOUT_MS", "soon").arg("wake");
    let r = run_raw(c, None);
    let err = String::from_utf8_lossy(&r.err);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(err.contains("SOMNA_BUSY_TIMEOUT_MS"), "{err}");
}

#[test]
fn the_page_cache_is_set_by_the_environment() {
    let env = Env::new();
    let mut c = env.cmd();
    c.env("SOMNA_CACHE_MIB", "lots").arg("wake");
    let r = run_raw(c, None);
    let err = String::from_utf8_lossy(&r.err);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(err.contains("SOMNA_CACHE_MIB"), "{err}");
    let mut c = env.cmd();
    c.env("SOMNA_CACHE_MIB", "64").arg("init");
    let r = run_raw(c, None);
    assert_eq!(r.code, 0, "{r:?}");
}

#[test]
fn the_no_store_error_names_the_init_that_creates_the_store_asked_for() {
    // Issue 22, point 7: not a bare `somna init` (which would not run, or would set up the
    // default store), but this binary with `--db`, `--as` and `--scope`.
    let env = Env::new();
    let db = env.dir.path().join("team").join("memory.redb");
    std::fs::create_dir_all(db.parent().expect("a folder")).expect("mkdir");
    let db_arg = db.display().to_string();
    let r = somna(
        &env,
        &[
            "--db", &db_arg, "--scope", "work", "--as", "agent:a", "wake",
        ],
    );
    assert_eq!(r.code, 3, "{r:?}");
    let lines = run_lines(&r.err);
    let expected = format!(
        "{BIN} --db {} --as agent:a --scope work init",
        crate::common::quoted(&db_arg)
    );
    assert_eq!(lines, vec![expected.clone()], "{r:?}");
    let err = String::from_utf8_lossy(&r.err);
    assert!(
        err.starts_with(&format!("somna: no somna store at {db_arg}\n")),
        "{err}"
    );
    assert!(!err.contains("`somna init`"), "{err}");
    let done = sh(&expected, BARE_PATH, env.dir.path());
    assert_eq!(done.code, 0, "{done:?}");
    assert!(db.is_file(), "the store asked for was created: {done:?}");
}
