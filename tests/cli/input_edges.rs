//! The command line's input edges (issue 52, points 11 to 16): a value at the edge of what an
//! option takes either works as documented or is refused with exit 2 and a message that says
//! what to do, never a busy store that is idle, a loop, a panic or a bare I/O error.

use crate::common::{run_raw, Env, Raw};

/// Runs `somna ARGS` (stdin null) and returns what it did, whatever its exit code.
fn run(e: &Env, args: &[&str]) -> Raw {
    let mut c = e.cmd();
    c.args(args);
    run_raw(c, None)
}

/// Asserts that a run was refused as invalid (exit 2) with `says` on stderr, and printed nothing.
fn refused(r: &Raw, says: &str) {
    let err = String::from_utf8_lossy(&r.err);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(err.contains(says), "{err}");
    assert!(r.out.is_empty(), "{r:?}");
}

#[test]
fn a_busy_timeout_of_0_tries_once_and_reads_an_idle_store() {
    let e = Env::init();
    e.ok(&["note", "written before"]);
    for _ in 0..5 {
        let out = e.ok(&["--busy-timeout-ms", "0", "wake"]);
        assert!(out.contains("written before"), "{out}");
        e.ok(&["--busy-timeout-ms", "0", "note", "written with no wait"]);
    }
    let mut c = e.cmd();
    c.env("SOMNA_BUSY_TIMEOUT_MS", "0")
        .args(["recall", "no wait"]);
    let r = run_raw(c, None);
    assert_eq!(r.code, 0, "{r:?}");
}

#[test]
fn init_makes_a_store_of_an_empty_file() {
    let e = Env::new();
    if e.on_server() {
        return;
    }
    std::fs::write(&e.db, b"").unwrap();
    let r = run(&e, &["wake"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(String::from_utf8_lossy(&r.err).contains("init"), "{r:?}");
    assert!(e.ok(&["init"]).starts_with("Created somna store at "));
    e.ok(&["note", "kept in the file that was empty"]);
    assert!(e.ok(&["wake"]).contains("kept in the file that was empty"));
    assert!(e.ok(&["verify"]).starts_with("OK: "));
    let left: Vec<_> = std::fs::read_dir(e.dir.path()).unwrap().collect();
    assert_eq!(left.len(), 1, "init left files behind: {left:?}");
}

#[test]
fn inits_at_once_on_an_empty_file_make_one_store() {
    let e = Env::new();
    if e.on_server() {
        return;
    }
    std::fs::write(&e.db, b"").unwrap();
    let children: Vec<_> = (0..4)
        .map(|_| {
            let mut c = e.cmd();
            c.arg("init")
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped());
            c.spawn().expect("spawn")
        })
        .collect();
    for c in children {
        let o = c.wait_with_output().expect("wait");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    }
    e.ok(&["note", "one store"]);
    assert!(e.ok(&["wake"]).contains("one store"));
}

#[test]
fn init_refuses_a_link_to_an_empty_file_and_says_what_to_do() {
    let e = Env::new();
    if e.on_server() {
        return;
    }
    let empty = e.dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    std::os::unix::fs::symlink(&empty, &e.db).unwrap();
    refused(
        &run(&e, &["init"]),
        "a symbolic link to an empty file; remove",
    );
    assert_eq!(std::fs::metadata(&empty).unwrap().len(), 0);
}

#[test]
fn the_last_day_of_year_9999_is_a_date_everywhere() {
    let e = Env::init();
    for day in ["9999-12-30", "9999-12-31"] {
        e.ok(&["note", "--valid-until", day, &format!("valid until {day}")]);
        e.ok(&["note", "--observed", day, &format!("observed on {day}")]);
        e.ok(&["recall", ".", "--since", day]);
        e.ok(&["recall", ".", "--until", day]);
        e.ok(&["search", "valid", "--since", day]);
    }
    e.ok(&[
        "note",
        "--valid-until",
        "9999-12-31T23:59:59Z",
        "until the very end",
    ]);
    let shown = e.ok(&["show", "2"]);
    assert!(shown.contains("9999-12-31T00:00:00Z"), "{shown}");
    let shown = e.ok(&["show", "4"]);
    assert!(shown.contains("9999-12-31T23:59:59Z"), "{shown}");
    let late = e.ok(&["recall", ".", "--since", "9999-12-31"]);
    assert!(late.contains("observed on 9999-12-31"), "{late}");
    assert!(!late.contains("observed on 9999-12-30"), "{late}");
    refused(
        &run(&e, &["note", "--valid-until", "10000-01-01", "x"]),
        "date",
    );
    let lines = e.file("dated.txt", b"2024-01-01 first\n9999-12-31 last day\n");
    let other = Env::init();
    other.ok(&["import", &lines]);
    assert!(other.ok(&["recall", "last day"]).contains("9999-12-31"));
    let jsonl = e.export();
    let third = Env::init();
    let f = third.file("export.jsonl", jsonl.as_bytes());
    third.ok(&["import", "--jsonl", &f]);
    assert_eq!(third.export(), jsonl);
}

#[test]
fn a_search_page_that_cannot_hold_a_hit_is_refused() {
    let e = Env::init();
    for i in 0..5 {
        e.ok(&["note", &format!("deploy the staging server, step {i}")]);
    }
    refused(&run(&e, &["search", "deploy", "--limit", "0"]), "limit");
    refused(&run(&e, &["search", "deploy", "--bytes", "0"]), "budget");
    refused(&run(&e, &["search", "deploy", "--bytes", "1"]), "budget");
    refused(
        &run(&e, &["search", "deploy", "--offset", "2", "--bytes", "5"]),
        "budget",
    );
    // Following the cursor ends: every page makes progress.
    let mut offset = 0;
    let mut seen = 0;
    loop {
        let page = e.ok(&[
            "--json",
            "search",
            "deploy",
            "--limit",
            "2",
            "--offset",
            &offset.to_string(),
        ]);
        let v: serde_json::Value = serde_json::from_str(&page).expect("JSON");
        seen += v["hits"].as_array().expect("hits").len();
        match v["next_offset"].as_u64() {
            Some(next) => {
                assert!(next > offset, "next_offset {next} after {offset}");
                offset = next;
            }
            None => break,
        }
    }
    assert_eq!(seen, 5);
}

#[cfg(feature = "mcp")]
#[test]
fn the_search_tool_refuses_limit_0() {
    use crate::common::mcp::{error_class, StdioServer};
    let e = Env::init();
    e.ok(&["note", "deploy the staging server"]);
    let mut s = StdioServer::start(&e, &[], &[]);
    let r = s.call("search", serde_json::json!({"query": "deploy", "limit": 0}));
    assert_eq!(error_class(&r), "invalid", "{r}");
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("limit"), "{r}");
    let r = s.call("search", serde_json::json!({"query": "deploy", "limit": 1}));
    assert_ne!(r["isError"], true, "{r}");
}

#[test]
fn copy_from_a_missing_store_names_it_on_the_run_line() {
    let e = Env::new();
    if e.on_server() {
        return;
    }
    let src = e.dir.path().join("missing source.redb");
    let dst = e.dir.path().join("copy.redb");
    let mut c = e.cmd();
    c.env_remove("SOMNA_DB").arg("copy").arg(&src).arg(&dst);
    let r = run_raw(c, None);
    let err = String::from_utf8_lossy(&r.err);
    assert_eq!(r.code, 3, "{r:?}");
    let run_line = format!(
        "Run: somna --db {} init",
        crate::common::quoted(&src.display().to_string())
    );
    assert!(
        err.lines().any(|l| l == run_line),
        "{err}\nwanted: {run_line}"
    );
    assert!(!dst.exists(), "the copy made its destination");
}

#[test]
fn an_empty_import_is_refused_whatever_its_format() {
    let e = Env::init();
    let before = e.export();
    for content in [&b""[..], b"\n", b"\n  \n"] {
        let f = e.file("empty", content);
        refused(&run(&e, &["import", &f]), "no memories");
        refused(&run(&e, &["import", "--jsonl", &f]), "the input is empty");
    }
    assert_eq!(e.export(), before);
    // The export of an empty store is not empty: it imports.
    let f = e.file("export.jsonl", before.as_bytes());
    Env::init().ok(&["import", "--jsonl", &f]);
}

/// Runs `somna ARGS` with `input` on stdin.
fn run_with(e: &Env, args: &[&str], input: &str) -> Raw {
    let mut c = e.cmd();
    c.args(args);
    run_raw(c, Some(input.as_bytes()))
}

#[test]
fn a_session_id_that_is_not_a_file_name_is_refused_at_save() {
    let e = Env::init();
    for id in [
        "../escape",
        "a/../../b",
        "/abs",
        "a//b",
        "a/",
        "..",
        ".",
        "back\\slash",
    ] {
        refused(
            &run_with(&e, &["session", "save", id], "[{\"n\":1}]"),
            "not a relative file path",
        );
        refused(
            &run_with(&e, &["session", "append", id], "[{\"n\":1}]"),
            "not a relative file path",
        );
    }
    let list = e.ok(&["session", "list"]);
    assert!(list.is_empty(), "{list}");
    for id in ["a.b..c", "team/alice"] {
        let r = run_with(&e, &["session", "save", id], "[{\"n\":1}]");
        assert_eq!(r.code, 0, "{r:?}");
    }
}

/// A session id with `/` (as grants on `session:team/*` expect) is exported into folders and
/// imported back under the same id; a link planted where a folder goes is not written through
#[test]
fn session_ids_with_slashes_export_into_folders_and_import_back() {
    let e = Env::init();
    for (id, n) in [("team/alice", 1), ("team/bob/x", 2), ("solo", 3)] {
        let r = run_with(&e, &["session", "save", id], &format!("[{{\"n\":{n}}}]"));
        assert_eq!(r.code, 0, "{r:?}");
    }
    let out = e.dir.path().join("out");
    let said = e.ok(&["session", "export-dir", out.to_str().unwrap()]);
    assert!(said.contains("Exported 3 sessions"), "{said}");
    let alice = std::fs::read_to_string(out.join("team").join("alice.json")).unwrap();
    assert!(alice.contains("\"n\":1"), "{alice}");
    assert!(out.join("team").join("bob").join("x.json").is_file());

    let other = Env::init();
    let said = other.ok(&["session", "import-dir", out.to_str().unwrap()]);
    assert!(said.contains("Imported 3 sessions"), "{said}");
    let loaded = other.ok(&["session", "load", "team/bob/x"]);
    assert!(loaded.contains("\"n\":2"), "{loaded}");

    // A link where the folder `team` goes: refused, nothing written through it
    let planted = e.dir.path().join("planted");
    let target = e.dir.path().join("elsewhere");
    std::fs::create_dir_all(&planted).unwrap();
    std::fs::create_dir_all(&target).unwrap();
    std::os::unix::fs::symlink(&target, planted.join("team")).unwrap();
    let r = run(&e, &["session", "export-dir", planted.to_str().unwrap()]);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(
        String::from_utf8_lossy(&r.err).contains("is not a folder"),
        "{r:?}"
    );
    assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
}

#[test]
fn export_dir_skips_only_the_session_it_cannot_name() {
    let e = Env::init();
    // The longest id (256 bytes) is valid but too long for `<id>.json`, as an id with `..` saved
    // before such ids were refused: the others are still exported.
    let long = "x".repeat(256);
    for id in ["one", long.as_str(), "two"] {
        let r = run_with(&e, &["session", "save", id], "[{\"n\":1}]");
        assert_eq!(r.code, 0, "{r:?}");
    }
    let out = e.dir.path().join("out");
    let r = run(&e, &["session", "export-dir", out.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&r.err);
    assert_eq!(r.code, 1, "{r:?}");
    assert!(err.contains("skipped session \"xxx"), "{err}");
    assert!(err.contains("session load xxx"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    let said = String::from_utf8_lossy(&r.out);
    assert!(
        said.contains("Exported 2 sessions") && said.contains("skipped 1"),
        "{said}"
    );
    let mut names: Vec<_> = std::fs::read_dir(&out)
        .unwrap()
        .map(|f| f.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["one.json", "two.json"]);
}

/// The bytes, the mtime and the folder's listing of a store file: unchanged means not written.
fn file_state(e: &Env) -> (Vec<u8>, std::time::SystemTime, Vec<std::ffi::OsString>) {
    let mut names: Vec<_> = std::fs::read_dir(e.dir.path())
        .unwrap()
        .map(|f| f.unwrap().file_name())
        .collect();
    names.sort();
    let m = std::fs::metadata(&e.db).unwrap();
    (std::fs::read(&e.db).unwrap(), m.modified().unwrap(), names)
}

#[test]
fn migrate_on_an_up_to_date_store_writes_nothing() {
    let e = Env::init();
    if e.on_server() {
        return;
    }
    e.ok(&["note", "kept as it is"]);
    let before = file_state(&e);
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let said = e.ok(&["migrate"]);
    assert!(said.contains("nothing to migrate"), "{said}");
    let v: serde_json::Value = serde_json::from_str(&e.ok(&["--json", "migrate"])).unwrap();
    assert_eq!(v["from"], v["to"], "{v}");
    assert!(file_state(&e) == before, "migrate changed the file");
}

#[test]
fn a_loop_of_links_at_the_store_path_is_named() {
    let e = Env::new();
    if e.on_server() {
        return;
    }
    let (a, b) = (e.dir.path().join("a"), e.dir.path().join("b"));
    std::os::unix::fs::symlink(&b, &a).unwrap();
    std::os::unix::fs::symlink(&a, &b).unwrap();
    let shown = a.display().to_string();
    for args in [&["wake"][..], &["init"], &["note", "x"]] {
        let mut c = e.cmd();
        c.arg("--db").arg(&a).args(args);
        let r = run_raw(c, None);
        refused(
            &r,
            &format!("{shown} is a symbolic link that never reaches a file"),
        );
    }
    let mut c = e.cmd();
    c.arg("--db").arg(a.join("memory.redb")).arg("wake");
    refused(&run_raw(c, None), "a folder on the way to it is a loop");
    let mut c = e.cmd();
    c.arg("copy").arg(&a).arg(e.dir.path().join("copy.redb"));
    refused(&run_raw(c, None), &shown);
    assert!(!e.dir.path().join("copy.redb").exists());
}
