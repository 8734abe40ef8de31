//! The official TypeScript SDK's client (npm `@modelcontextprotocol/sdk` 1.32) against
//! `somna mcp` over stdio (issue 22): after listing the tools (so that it validates results
//! against their output schemas), a failing call of every tool that can fail shows the user
//! somna's own message with its error class, and an unknown tool is the protocol error -32602.
//! The script is `tests/mcp-node/failing_calls.mjs`, run by `tests/mcp-node/run.sh` (which
//! installs the pinned packages under `target/mcp-node`). Skipped, with a message, when `node` or
//! `npm` is not on PATH, and on the server backend (the client drives a file store).

use std::process::Command;

use crate::common::{Env, BIN};

/// Whether `tool --version` runs.
fn on_path(tool: &str) -> bool {
    Command::new(tool)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn the_typescript_sdk_client_shows_each_failing_tools_message_and_class() {
    if !on_path("node") || !on_path("npm") {
        eprintln!("skipped: the TypeScript SDK client test needs node and npm on PATH");
        return;
    }
    let e = Env::init();
    if e.on_server() {
        return;
    }
    e.ok(&["note", "first"]);
    e.ok(&["note", "second"]);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/mcp-node/run.sh");
    let out = Command::new("bash")
        .args([script, "clients", BIN])
        .arg(&e.db)
        .output()
        .expect("run tests/mcp-node/run.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains("23 of 23 as expected"), "{stdout}");
}
