//! Messages say what happened (issue 27, point 11): `init` on a directory, a FIFO, a device or
//! a dangling symbolic link names what the path is (never "create one with `somna init`"); a
//! store the file system does not let this user open names the path and exits 6; `recall
//! --limit 0` is refused; counts of one are singular; over MCP an error's class is said once and
//! an unreachable server is class `server`, not `conflict`.

use std::process::Command;

use serde_json::json;

use crate::common::{run_raw, Env, Raw};

fn run(e: &Env, args: &[&str]) -> Raw {
    let mut c = e.cmd();
    c.args(args);
    run_raw(c, None)
}

#[test]
fn init_on_what_is_not_a_file_says_what_it_is() {
    let e = Env::new();
    let d = e.dir.path();
    std::fs::create_dir(d.join("adir")).unwrap();
    assert!(Command::new("mkfifo")
        .arg(d.join("fifo"))
        .status()
        .unwrap()
        .success());
    std::os::unix::fs::symlink(d.join("nowhere/x.redb"), d.join("dangling")).unwrap();
    let cases = [
        (d.join("adir"), "a directory"),
        (d.join("fifo"), "not a regular file"),
        ("/dev/null".into(), "not a regular file"),
        (
            d.join("dangling"),
            "symbolic link to a file that does not exist",
        ),
    ];
    for (path, says) in cases {
        let r = run(&e, &["--db", path.to_str().unwrap(), "init"]);
        let err = String::from_utf8_lossy(&r.err);
        assert_eq!(r.code, 2, "{path:?}: {r:?}");
        assert!(err.contains(says), "{path:?}: {err}");
        assert!(!err.contains("create one"), "{path:?}: {err}");
    }
}

#[test]
fn a_store_the_file_system_refuses_names_its_path_and_exits_6() {
    let e = Env::init();
    let db = e.db.to_str().unwrap().to_string();
    let r = if nix_uid() == 0 {
        // Root may open anything: run as nobody, who may not read root's folder.
        std::fs::set_permissions(
            e.dir.path(),
            std::os::unix::fs::PermissionsExt::from_mode(0o711),
        )
        .unwrap();
        std::fs::set_permissions(&e.db, std::os::unix::fs::PermissionsExt::from_mode(0o600))
            .unwrap();
        let mut c = Command::new("setpriv");
        c.args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            crate::common::BIN,
        ])
        .args(["--db", &db, "wake"]);
        run_raw(c, None)
    } else {
        std::fs::set_permissions(&e.db, std::os::unix::fs::PermissionsExt::from_mode(0o000))
            .unwrap();
        run(&e, &["wake"])
    };
    let err = String::from_utf8_lossy(&r.err);
    assert_eq!(r.code, 6, "{r:?}");
    assert!(err.contains(&db), "{err}");
}

/// This process's user id, from `id -u`.
fn nix_uid() -> u32 {
    let o = Command::new("id").arg("-u").output().unwrap();
    String::from_utf8_lossy(&o.stdout).trim().parse().unwrap()
}

#[test]
fn recall_limit_zero_is_refused_and_counts_of_one_are_singular() {
    let e = Env::init();
    e.ok(&["note", "only one memory"]);
    let r = run(&e, &["recall", ".", "--limit", "0"]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(String::from_utf8_lossy(&r.err).contains("limit"), "{r:?}");
    let wake = e.ok(&["wake"]);
    assert!(wake.contains("(1 memory)."), "{wake}");
    let verify = e.ok(&["verify"]);
    assert!(
        verify.starts_with("OK: 1 scope, 1 memory, 0 summaries, 0 sessions verified"),
        "{verify}"
    );
}

#[cfg(feature = "mcp")]
#[test]
fn an_mcp_error_says_its_class_once() {
    use crate::common::mcp::StdioServer;
    let e = Env::init();
    e.ok(&["--scope", "team/a", "note", "a secret plan"]);
    // Once a grant exists, grants are enforced: bob has none.
    e.ok(&["grant", "user:alice", "read", "team/a"]);
    let mut s = StdioServer::start(&e, &["--as", "user:bob"], &[]);
    let r = s.call("recall", json!({"pattern": "plan", "scope": "team/a"}));
    let text = r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert_eq!(crate::common::mcp::error_class(&r), "denied", "{r}");
    assert!(text.starts_with("denied: "), "{text}");
    assert!(!text.contains("denied: denied"), "{text}");
}

#[cfg(feature = "mcp")]
#[test]
fn an_unreachable_server_is_class_server_over_mcp() {
    use crate::common::mcp::StdioServer;
    let e = Env::new();
    // Nothing listens on port 1: the connection is refused at once.
    let url = "postgresql://nobody@127.0.0.1:1/none?schema=s&connect_timeout=2";
    let mut s = StdioServer::start(&e, &["--db", url], &[]);
    let r = s.call("wake", json!({}));
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(crate::common::mcp::error_class(&r), "server", "{r}");
}
