//! Guards concurrent session appends across real processes: two `engram session append`
//! processes writing to the same session at once each land every item exactly once, and each
//! process's items stay in the order it sent them.

use std::io::Write;
use std::process::{Command, Stdio};

fn engram(db: &std::path::Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_engram"));
    c.arg("--db").arg(db);
    c
}

#[test]
fn two_processes_appending_to_one_session_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.redb");
    assert!(engram(&db).arg("init").output().unwrap().status.success());
    let per = 40;
    let writers: Vec<_> = ["a", "b"]
        .into_iter()
        .map(|w| {
            let db = db.clone();
            std::thread::spawn(move || {
                for i in 0..per {
                    let mut child = engram(&db)
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
    let out = engram(&db)
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
