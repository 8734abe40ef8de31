//! An MCP message over stdio larger than the limit (4 MiB) gets an answer (issue 27, point 8):
//! a 20 MB `tools/call` line is refused with a JSON-RPC error carrying its id, a line without
//! an id with an error of id null, and the server goes on serving the next request; a message
//! just under the limit is still handled.

use serde_json::json;

use crate::common::mcp::StdioServer;
use crate::common::Env;

#[test]
fn an_oversized_message_is_answered_and_the_server_goes_on() {
    let e = Env::init();
    let mut s = StdioServer::start(&e, &[], &[]);
    let big = "x".repeat(20_000_000);
    let line = json!({"jsonrpc": "2.0", "id": 77, "method": "tools/call",
        "params": {"name": "note", "arguments": {"text": big}}});
    s.send_line(&line.to_string());
    let r = s.read_message().expect("an answer");
    assert_eq!(r["id"], 77, "{r}");
    assert_eq!(r["error"]["code"], -32600, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("4194304"),
        "{r}"
    );
    let no_id = format!("{{\"jsonrpc\":\"2.0\",\"method\":\"x\",\"params\":\"{big}\"}}");
    s.send_line(&no_id);
    let r = s.read_message().expect("an answer");
    assert!(r["id"].is_null() && r["error"].is_object(), "{r}");
    let r = s.call("note", json!({"text": "still here"}));
    assert_ne!(r["isError"], true, "{r}");
    // Just under the limit: handled (refused by the tool as too long a line, not dropped).
    let under = "y".repeat(4_000_000);
    let r = s.call("note", json!({"text": under}));
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(crate::common::mcp::error_class(&r), "invalid", "{r}");
}
