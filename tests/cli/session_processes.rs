//! Guards sessions across real processes: two `somna session append` processes writing to the
//! same session at once each land every item exactly once, each process's items in the order it
//! sent them; and a long-running reader (an MCP server) loads what other processes saved since
//! its last read.

use std::io::Write;
use std::process::{Command, Stdio};

fn somna(db: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_somna"));
    c.arg("--db").arg(db);
    c
}

#[test]
fn two_processes_appending_to_one_session_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.redb");
    assert!(somna(&db).arg("init").output().unwrap().status.success());
    let per = 40;
    let writers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|w| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..per {
                    let mut child = somna(&db)
                        .args(["session", "append", "shared", "--key", &format!("{w}-{i}")])
                        .stdin(Stdio::piped())
                        .stdout(Stdio::null())
                        .spawn()
                        .unwrap();
                    let item = format!(r#"[{{"writer":"{w}","i":{i}}}]"#);
                    child
                        .stdin
                        .take()
                        .unwrap()
                        .write_all(item.as_bytes())
                        .unwrap();
                    assert!(child.wait().unwrap().success());
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let out = somna(&db)
        .args(["session", "items", "shared"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let items: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(items.len(), 2 * per);
    for w in ["a", "b"] {
        let seq: Vec<i64> = items
            .iter()
            .filter(|v| v["writer"] == w)
            .map(|v| v["i"].as_i64().unwrap())
            .collect();
        assert_eq!(seq, (0..per as i64).collect::<Vec<_>>(), "writer {w}");
    }
}

/// A long-running reader (an MCP server) loads what other processes saved since its last read:
/// a new session, messages appended to one it has read, a save that rewrites it shorter. Each of
/// its reads starts a new snapshot of the store, and nothing it learned about the last one (the
/// tables it opened, the pages it cached) may leak into the next.
#[cfg(feature = "mcp")]
#[test]
fn a_running_server_loads_what_other_processes_saved() {
    use crate::common::mcp::StdioServer;
    use crate::common::{run_raw, Env};
    use serde_json::json;

    let e = Env::init();
    let save = |verb: &str, id: &str, items: &str| {
        let mut c = e.cmd();
        c.args(["session", verb, id]);
        let r = run_raw(c, Some(items.as_bytes()));
        assert_eq!(r.code, 0, "session {verb} {id}: {r:?}");
    };
    let mut s = StdioServer::start(&e, &[], &[]);
    let mut load = |id: &str| -> Vec<serde_json::Value> {
        let r = s.call("session_load", json!({ "id": id }));
        assert_ne!(r["isError"], true, "{r}");
        let text = r["content"][0]["text"].as_str().expect("text");
        serde_json::from_str(text).unwrap_or_else(|err| panic!("{err}: {text}"))
    };
    save("save", "a", r#"[{"n":0},{"n":1}]"#);
    assert_eq!(load("a"), vec![json!({"n":0}), json!({"n":1})]);
    for n in 2..40 {
        save(
            "append",
            "a",
            &format!(r#"[{{"n":{n},"pad":"{}"}}]"#, "x".repeat(300)),
        );
        let got = load("a");
        assert_eq!(got.len(), n + 1, "after append {n}");
        assert_eq!(got[n]["n"], n, "after append {n}");
    }
    save("save", "b", r#"[{"b":true}]"#);
    assert_eq!(load("b"), vec![json!({"b":true})]);
    save("save", "a", r#"[{"n":0}]"#);
    assert_eq!(load("a"), vec![json!({"n":0})]);
}
