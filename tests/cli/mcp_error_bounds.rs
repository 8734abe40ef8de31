//! What one MCP tool call may cost when its arguments are hostile: a recall pattern over
//! `MAX_PATTERN_BYTES` (8 KiB) is refused before the regex crate parses it (a 3.9 MB pattern took
//! 1.4 GB of memory to refuse before), and an error's text, which echoes the value it refuses, is
//! cut short so the result stays within `--max-bytes` (a 3 MB `id` came back whole). An error
//! tells the tool caller what it can do: the `note` tool's refusal of a secret does not say
//! "pass --force", which no tool call can (issue 52, point 6), while the CLI's still does.

use serde_json::json;

use crate::common::mcp::{error_class, StdioServer};
use crate::common::Env;

/// The text of a tool result's first content block.
fn text(r: &serde_json::Value) -> String {
    r["content"][0]["text"].as_str().unwrap_or("").to_string()
}

#[test]
fn an_oversized_recall_pattern_is_refused_and_errors_stay_short() {
    let e = Env::init();
    let mut s = StdioServer::start(&e, &[], &[]);
    let r = s.call("note", json!({"text": "a memory to recall"}));
    assert_ne!(r["isError"], true, "{r}");
    let big = "q".repeat(3_900_000);
    let r = s.call("recall", json!({"pattern": big}));
    assert_eq!(r["isError"], true, "{r}");
    assert_eq!(error_class(&r), "invalid", "{r}");
    assert!(text(&r).contains("at most 8192"), "{}", text(&r));
    let words: Vec<String> = (0..64).map(|i| format!("{i}{}", "w".repeat(200))).collect();
    let r = s.call("recall", json!({"pattern": words.join(" "), "words": true}));
    assert_eq!(error_class(&r), "invalid", "{r}");
    for (tool, args) in [
        ("show", json!({"id": "7".repeat(3_000_000)})),
        ("zoom", json!({"block": "1".repeat(3_000_000)})),
        ("note", json!({"text": "x", "kind": "k".repeat(2_000_000)})),
        (
            "recall",
            json!({"pattern": format!("({}", "a".repeat(8_000))}),
        ),
    ] {
        let r = s.call(tool, args);
        assert_eq!(r["isError"], true, "{tool}: {r}");
        let t = text(&r);
        assert!(t.len() <= 1_000, "{tool}: {} bytes", t.len());
        assert!(t.contains("bytes cut]"), "{tool}: {t}");
    }
    // A short error is whole, and the pattern at the bound still works.
    let r = s.call("recall", json!({"pattern": "("}));
    assert!(!text(&r).contains("bytes cut"), "{r}");
    let r = s.call(
        "recall",
        json!({"pattern": format!("recall|{}", "z".repeat(8_000))}),
    );
    assert_ne!(r["isError"], true, "{r}");
    assert!(text(&r).contains("a memory to recall"), "{r}");
}

#[test]
fn a_secrets_refusal_tells_the_tool_caller_what_it_can_do() {
    let e = Env::init();
    let mut s = StdioServer::start(&e, &[], &[]);
    let r = s.call("note", json!({"text": "deploy key AKIAIOSFODNN7EXAMPLE"}));
    assert_eq!(error_class(&r), "invalid", "{r}");
    let t = text(&r);
    assert!(
        t.contains("AWS access key") && !t.contains("pass --force"),
        "{t}"
    );
    assert!(
        t.contains("a person can store it with `somna note --force`"),
        "{t}"
    );
    let mut c = e.cmd();
    c.args(["note", "deploy key AKIAIOSFODNN7EXAMPLE"]);
    let cli = crate::common::run_raw(c, None);
    let err = String::from_utf8_lossy(&cli.err);
    assert!(
        cli.code == 2 && err.contains("(pass --force if it is not a secret)"),
        "{err}"
    );
}
