//! `somna mcp` as clients nobody here wrote speak it (issue 22), without an SDK:
//! a failing tool's result carries its message with its class as text and no
//! `structuredContent` (which would have to match the tool's output schema, so that the
//! TypeScript SDK's client and the Inspector hid the message behind a schema error); and the
//! protocol errors of the 2025-11-25 specification: an unknown tool and a `tools/call` without
//! `name` are -32602, a bogus cursor -32602, a line that is not JSON -32700 with id null, a
//! batch -32600 with id null, and over HTTP both of the latter are 400 with a JSON-RPC body;
//! and every tool refuses an argument its schema does not name (a misspelt one is never dropped).

use serde_json::{json, Value};

use crate::common::mcp::{
    error_class, initialize_body, initialize_body_at, token, HttpServer, StdioServer,
};
use crate::common::Env;

/// The error object of a JSON-RPC response (panics when it is a result).
fn rpc_error(r: &Value) -> &Value {
    assert!(r.get("result").is_none(), "a result, not an error: {r}");
    &r["error"]
}

#[test]
fn a_failing_tool_says_its_class_in_text_without_structured_content() {
    let e = Env::init();
    e.ok(&["note", "first"]);
    e.ok(&["note", "second"]);
    let mut s = StdioServer::start(&e, &[], &[]);
    let r = s.call("note", json!({"text": "keyed", "key": "k1"}));
    assert_ne!(r["isError"], true, "{r}");
    let failing = [
        ("show", json!({"id": 999}), "not_found"),
        ("note", json!({}), "invalid"),
        ("note", json!({"text": "other", "key": "k1"}), "conflict"),
        (
            "decide",
            json!({"id": 999, "action": "accept"}),
            "not_found",
        ),
        ("zoom", json!({"block": "not-a-block"}), "invalid"),
        ("why", json!({"block": "0-1"}), "invalid"),
        ("session_load", json!({"id": "nope"}), "not_found"),
    ];
    for (tool, args, class) in failing {
        let r = s.call(tool, args.clone());
        assert_eq!(error_class(&r), class, "{tool} {args}: {r}");
        let text = r["content"][0]["text"].as_str().unwrap_or_default();
        assert!(text.len() > class.len() + 2, "{tool}: no message: {r}");
    }
}

#[test]
fn protocol_errors_over_stdio_follow_the_specification() {
    let e = Env::init();
    let mut s = StdioServer::start(&e, &[], &[]);
    let r = s.request(
        "tools/call",
        json!({"name": "no_such_tool", "arguments": {}}),
    );
    assert_eq!(rpc_error(&r)["code"], -32602, "{r}");
    let r = s.request("tools/call", json!({"arguments": {}}));
    assert_eq!(rpc_error(&r)["code"], -32602, "{r}");
    for method in [
        "tools/list",
        "resources/list",
        "prompts/list",
        "resources/templates/list",
    ] {
        let r = s.request(method, json!({"cursor": "bogus"}));
        assert_eq!(rpc_error(&r)["code"], -32602, "{method}: {r}");
    }
    let r = s.request("no/such/method", json!({}));
    assert_eq!(rpc_error(&r)["code"], -32601, "{r}");
    s.send_line("{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": ");
    let r = s.read_message().expect("an answer to malformed JSON");
    assert!(r["id"].is_null() && r.get("id").is_some(), "{r}");
    assert_eq!(rpc_error(&r)["code"], -32700, "{r}");
    s.send_line(r#"[{"jsonrpc": "2.0", "id": 6, "method": "ping"}]"#);
    let r = s.read_message().expect("an answer to a batch");
    assert!(r["id"].is_null() && r.get("id").is_some(), "{r}");
    assert_eq!(rpc_error(&r)["code"], -32600, "{r}");
    // JSON that serde_json refuses though a lenient skim took it (rmcp then dropped it without
    // an answer): invalid UTF-8, a lone surrogate, nesting past 128 levels: -32700, id null.
    let deep = format!("{}{}", "[".repeat(130), "]".repeat(130));
    for line in [
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"caf\xe9\"}}"
            .to_vec(),
        br#"{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":"\ud800 x"}}"#.to_vec(),
        format!(r#"{{"jsonrpc":"2.0","id":3,"method":"ping","params":{{"x":{deep}}}}}"#)
            .into_bytes(),
    ] {
        s.send_bytes(&line);
        let r = s.read_message().expect("an answer, not silence");
        assert!(r["id"].is_null() && r.get("id").is_some(), "{r}");
        assert_eq!(rpc_error(&r)["code"], -32700, "{r}");
    }
    // JSON that is not a message rmcp reads: -32600, with the id when a client can wait on it
    // (rmcp answered these without any id).
    for (line, id) in [
        ("42", Value::Null),
        (r#"{"jsonrpc":"1.0","id":6,"method":"ping"}"#, json!(6)),
        (
            r#"{"jsonrpc":"2.0","id":11,"method":"tools/list","params":[1,2]}"#,
            json!(11),
        ),
        (
            r#"{"jsonrpc":"2.0","id":"q","method":"tools/call","params":"wake"}"#,
            json!("q"),
        ),
        (
            r#"{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}"#,
            Value::Null,
        ),
        (
            r#"{"jsonrpc":"2.0","id":16.5,"method":"ping"}"#,
            Value::Null,
        ),
    ] {
        s.send_line(line);
        let r = s.read_message().expect("an answer, not silence");
        assert_eq!(r["id"], id, "{line}: {r}");
        assert!(r.get("id").is_some(), "{r}");
        assert_eq!(rpc_error(&r)["code"], -32600, "{line}: {r}");
    }
    // The server goes on.
    let r = s.request("ping", json!({}));
    assert!(r.get("result").is_some(), "{r}");
}

#[test]
fn malformed_json_and_batches_over_http_are_400_with_a_json_rpc_body() {
    let e = Env::init();
    let tok = token(&e, "user:bob");
    let s = HttpServer::start(&e, &[]);
    let auth = format!("Bearer {tok}");
    let cases = [
        ("{\"jsonrpc\": \"2.0\", \"id\": 1, ", -32700),
        (
            "[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]",
            -32600,
        ),
        // rmcp answered these 415 with a plain-text body.
        (
            r#"{"jsonrpc":"2.0","id":2,"method":"ping","params":{"x":"\ud800"}}"#,
            -32700,
        ),
        ("42", -32600),
        (r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#, -32600),
    ];
    // A version that has no batches (the header is sent from 2025-06-18 on).
    let version = ("MCP-Protocol-Version", "2025-06-18");
    for (body, code) in cases {
        let (status, resp) = s.post(&[("Authorization", &auth), version], body);
        assert_eq!(status, 400, "{body}: {resp}");
        let json = resp.split("\r\n\r\n").nth(1).unwrap_or_default();
        let v: Value = serde_json::from_str(json.trim()).expect(json);
        assert_eq!(v["error"]["code"], code, "{v}");
        assert!(v["id"].is_null() && v.get("id").is_some(), "{v}");
    }
    let (status, resp) = s.post(&[("Authorization", &auth)], &initialize_body());
    assert_eq!(status, 200, "{resp}");
}

/// The text of a successful tool result.
fn text_of(r: &Value) -> String {
    assert_ne!(r["isError"], true, "{r}");
    r["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

#[test]
fn hints_over_mcp_name_the_tool_call_never_a_shell_line() {
    // Issue 22, point 6: the store is not the default one, so a `Run: somna nap` would act on
    // another store; an MCP client is told to call `nap` with `block` and `text`.
    let e = Env::init();
    let mut s = StdioServer::start(&e, &[], &[]);
    s.call("note", json!({"text": "first"}));
    let noted = text_of(&s.call("note", json!({"text": "second"})));
    assert!(!noted.contains("Run:"), "{noted}");
    assert!(
        noted.ends_with(
            "Answer with the tool call `nap` with block `0-1` and text `<your line>`.\n"
        ),
        "{noted}"
    );
    let woke = text_of(&s.call("wake", json!({})));
    assert!(
        woke.ends_with("You are awake.\n1 merge is pending. Call `nap` for the next one.\n"),
        "{woke}"
    );
    let saved = text_of(&s.call(
        "nap",
        json!({"block": "0-1", "text": "first and second [#0, #1]"}),
    ));
    assert!(
        saved.starts_with("Saved 0-1.\nNothing left to compress.\n"),
        "{saved}"
    );
    // A scope other than the server's is named in the call.
    s.call("note", json!({"text": "a", "scope": "work"}));
    let other = text_of(&s.call("note", json!({"text": "b", "scope": "work"})));
    assert!(
        other.ends_with("`nap` with scope `work`, block `0-1` and text `<your line>`.\n"),
        "{other}"
    );
    let r = s.call(
        "nap",
        json!({"block": "0-1", "text": "x", "answers": [{"block": "0-1", "summary": "x"}]}),
    );
    assert_eq!(error_class(&r), "invalid", "{r}");
}

#[test]
fn the_servers_own_loopback_origin_is_accepted_and_others_still_refused() {
    // Issue 22, point 5: without --allow-origin, a request from the server's own origin.
    let e = Env::init();
    let tok = token(&e, "user:bob");
    let s = HttpServer::start(&e, &[]);
    let auth = format!("Bearer {tok}");
    let port = s.addr.rsplit(':').next().unwrap_or_default().to_string();
    let other = if port == "1" { "2" } else { "1" };
    for (origin, status) in [
        (format!("http://127.0.0.1:{port}"), 200),
        (format!("http://localhost:{port}"), 200),
        (format!("http://localhost:{other}"), 403),
        ("http://evil.example".to_string(), 403),
    ] {
        let headers = [
            ("Authorization", auth.as_str()),
            ("Origin", origin.as_str()),
        ];
        let (got, resp) = s.post(&headers, &initialize_body());
        assert_eq!(got, status, "{origin}: {resp}");
    }
}

/// Whether a schema says what its value is: one `type` (a string), or `anyOf` of such.
fn typed(schema: &Value) -> bool {
    match (schema.get("type"), schema.get("anyOf")) {
        (Some(t), None) => t.is_string(),
        (None, Some(Value::Array(any))) => !any.is_empty() && any.iter().all(typed),
        _ => false,
    }
}

#[test]
fn schemas_are_strict_and_old_sessions_get_no_caching_fields() {
    // Issue 22, point 3: no nullable type arrays, no bare `true` items in the argument schemas;
    // every output property typed (a single `type`, or `anyOf` of single types);
    // no `ttlMs`/`cacheScope` (2026-07-28 fields) in a session of an earlier version.
    let e = Env::init();
    let mut s = StdioServer::start(&e, &[], &["--tools", "all"]);
    let tools = s.request("tools/list", json!({}));
    assert!(
        tools["result"]["tools"]
            .as_array()
            .is_some_and(|t| t.len() > 20),
        "{tools}"
    );
    let list = tools["result"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    for tool in &list {
        let input = tool["inputSchema"].to_string();
        assert!(!input.contains("\"null\""), "a nullable type: {input}");
        assert!(!input.contains("\"items\":true"), "a bare true: {input}");
        let props = tool["outputSchema"]["properties"].as_object();
        for (field, schema) in props.into_iter().flatten() {
            assert!(
                typed(schema),
                "{}.{field} is untyped: {schema}",
                tool["name"]
            );
        }
    }
    for (method, params) in [
        ("tools/list", json!({})),
        ("resources/list", json!({})),
        ("resources/templates/list", json!({})),
        ("prompts/list", json!({})),
        ("resources/read", json!({"uri": "somna://default/wake"})),
    ] {
        let r = s.request(method, params);
        assert!(r.get("result").is_some(), "{method}: {r}");
        assert!(r["result"].get("ttlMs").is_none(), "{method}: {r}");
        assert!(r["result"].get("cacheScope").is_none(), "{method}: {r}");
    }
}

/// The JSON-RPC batch of issue 22: two requests, a notification and an element that is not a
/// message.
const BATCH: &str = r#"[{"jsonrpc":"2.0","id":7,"method":"ping"},{"jsonrpc":"2.0","id":"p","method":"tools/call","params":{"name":"pending","arguments":{}}},{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":99}},5]"#;

/// The answer to [`BATCH`]: one response per request and an error for the element `5`.
fn assert_batch_answer(answer: &Value) {
    let all = answer
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {answer}"));
    assert_eq!(all.len(), 3, "{answer}");
    let by_id = |id: Value| all.iter().find(|r| r["id"] == id).cloned();
    assert!(
        by_id(json!(7)).is_some_and(|r| r["result"] == json!({})),
        "{answer}"
    );
    let pending = by_id(json!("p")).unwrap_or_default();
    assert_eq!(
        pending["result"]["structuredContent"],
        json!({"result": []}),
        "{answer}"
    );
    assert_eq!(
        by_id(Value::Null).unwrap_or_default()["error"]["code"],
        -32600,
        "{answer}"
    );
}

/// A batch with a known method whose params are wrong, a request whose id rmcp cannot read (a
/// fraction: rmcp would answer it with id null, which no batch waits for) and a ping.
/// An id written `16.0` is refused too: rmcp would answer it as 16, which the batch does not
/// wait for, so the batch never closed and its answer went out bare.
const BAD_PARAMS_BATCH: &str = r#"[{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":5}},{"jsonrpc":"2.0","id":1.5,"method":"ping"},{"jsonrpc":"2.0","id":9,"method":"ping"},{"jsonrpc":"2.0","id":16.0,"method":"ping"}]"#;

/// The answer to [`BAD_PARAMS_BATCH`]: each bad element refused with its own id, the ping
/// answered.
fn assert_bad_params_answer(answer: &Value) {
    let all = answer.as_array().cloned().unwrap_or_default();
    assert_eq!(all.len(), 4, "{answer}");
    let by_id = |id: Value| {
        all.iter()
            .find(|r| r["id"] == id)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(by_id(json!(8))["error"]["code"], -32602, "{answer}");
    assert_eq!(by_id(json!(1.5))["error"]["code"], -32600, "{answer}");
    assert_eq!(by_id(json!(16.0))["error"]["code"], -32600, "{answer}");
    assert_eq!(by_id(json!(9))["result"], json!({}), "{answer}");
}

#[test]
fn batches_are_served_in_2025_03_26_sessions_over_stdio_and_refused_in_later_ones() {
    let e = Env::init();
    let mut old = StdioServer::start_at(&e, &[], &[], "2025-03-26");
    old.send_line(BATCH);
    assert_batch_answer(&old.read_message().expect("the batch's answer"));
    old.send_line("[]");
    let r = old.read_message().expect("an answer to an empty batch");
    assert_eq!(rpc_error(&r)["code"], -32600, "{r}");
    // Notifications only: no answer; the next request is answered next.
    old.send_line(
        r#"[{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}]"#,
    );
    let r = old.request("ping", json!({}));
    assert!(r.get("result").is_some(), "{r}");
    old.send_line(BAD_PARAMS_BATCH);
    assert_bad_params_answer(&old.read_message().expect("the batch's answer, not a hang"));
    let mut new = StdioServer::start_at(&e, &[], &[], "2025-11-25");
    new.send_line(BATCH);
    let r = new.read_message().expect("a refusal");
    assert!(r["id"].is_null() && r.get("id").is_some(), "{r}");
    assert_eq!(rpc_error(&r)["code"], -32600, "{r}");
}

#[test]
fn batches_are_served_in_2025_03_26_sessions_over_http_and_refused_in_later_ones() {
    let e = Env::init();
    let tok = token(&e, "user:bob");
    let s = HttpServer::start(&e, &[]);
    let auth = format!("Bearer {tok}");
    let (status, resp) = s.post(
        &[("Authorization", &auth)],
        &initialize_body_at("2025-03-26"),
    );
    assert_eq!(status, 200, "{resp}");
    let session = resp
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("mcp-session-id:")
                .map(|_| l)
        })
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_string())
        .expect("a session id");
    let head = [
        ("Authorization", auth.as_str()),
        ("Mcp-Session-Id", &session),
    ];
    let initialized = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
    assert_eq!(s.post(&head, initialized).0, 202);
    let (status, resp) = s.post(&head, BATCH);
    assert_eq!(status, 200, "{resp}");
    let body = resp.split("\r\n\r\n").nth(1).unwrap_or_default();
    assert_batch_answer(&serde_json::from_str(body.trim()).expect(body));
    let (status, resp) = s.post(&head, BAD_PARAMS_BATCH);
    assert_eq!(status, 200, "{resp}");
    let body = resp.split("\r\n\r\n").nth(1).unwrap_or_default();
    assert_bad_params_answer(&serde_json::from_str(body.trim()).expect(body));
    let later = [head[0], head[1], ("MCP-Protocol-Version", "2025-11-25")];
    let (status, resp) = s.post(&later, BATCH);
    assert_eq!(status, 400, "{resp}");
    assert!(resp.contains("-32600"), "{resp}");
}

/// Whether `v` conforms to `schema`, as far as the output schemas go (`type`, `properties`,
/// `required`, `items`, `anyOf`); the first mismatch, with its path.
fn conforms(v: &Value, schema: &Value, at: &str) -> Result<(), String> {
    if let Some(any) = schema["anyOf"].as_array() {
        return match any.iter().any(|s| conforms(v, s, at).is_ok()) {
            true => Ok(()),
            false => Err(format!("{at}: {v} matches no branch of {schema}")),
        };
    }
    let ok = match schema["type"].as_str() {
        Some("object") => v.is_object(),
        Some("array") => v.is_array(),
        Some("string") => v.is_string(),
        Some("integer") => v.is_u64() || v.is_i64(),
        Some("number") => v.is_number(),
        Some("boolean") => v.is_boolean(),
        Some("null") => v.is_null(),
        _ => true,
    };
    if !ok {
        return Err(format!("{at}: {v} is not of type {}", schema["type"]));
    }
    for field in schema["required"].as_array().into_iter().flatten() {
        let f = field.as_str().unwrap_or_default();
        if v.get(f).is_none() {
            return Err(format!("{at}: the required field {f} is missing from {v}"));
        }
    }
    for (f, s) in schema["properties"].as_object().into_iter().flatten() {
        if let Some(x) = v.get(f) {
            conforms(x, s, &format!("{at}.{f}"))?;
        }
    }
    for (i, x) in v.as_array().into_iter().flatten().enumerate() {
        if schema.get("items").is_some() {
            conforms(x, &schema["items"], &format!("{at}[{i}]"))?;
        }
    }
    Ok(())
}

#[test]
fn what_each_tool_returns_conforms_to_its_declared_output_schema() {
    // Issue 51: every tool callable without arguments (a typed one, `pending`, among them;
    // `verify` needs the only handle to the store, which a server never has)
    // returns structured content its declared output schema accepts, on a store with merges due.
    let e = Env::init();
    for n in 0..5 {
        e.ok(&["note", &format!("memory {n}")]);
    }
    let mut s = StdioServer::start(&e, &[], &["--tools", "all"]);
    let list = all_tools(&mut s);
    let schema_of = |name: &str| {
        list.iter()
            .find(|t| t["name"] == name)
            .map(|t| t["outputSchema"].clone())
            .unwrap_or_else(|| panic!("no tool {name}"))
    };
    let conforming = |s: &mut StdioServer, name: &str, args: Value| {
        let r = s.call(name, args.clone());
        assert_ne!(r["isError"], true, "{name} {args}: {r}");
        let got = r["structuredContent"].clone();
        if let Err(e) = conforms(&got, &schema_of(name), name) {
            panic!("{args}: {e}");
        }
        got
    };
    let calls = [
        "pending",
        "wake",
        "nap",
        "grants",
        "stats",
        "policy",
        "session_list",
    ];
    for name in calls {
        conforming(&mut s, name, json!({}));
    }
    // The verbs whose result's shape depends on the arguments: each shape (a union's branch).
    let one = conforming(
        &mut s,
        "note",
        json!({"text": "memory in scope b", "scope": "b"}),
    );
    assert_eq!(one["next_merge"], Value::Null, "{one}");
    let several = conforming(&mut s, "wake", json!({"scope": "default,b"}));
    assert_eq!(several["result"][1]["scope"], "b", "{several}");
    conforming(&mut s, "wake", json!({"all": true}));
    let found = conforming(&mut s, "recall", json!({"pattern": "memory"}));
    assert_eq!(found["total"], 5, "{found}");
    let found = conforming(&mut s, "recall", json!({"pattern": "memory", "all": true}));
    assert_eq!(found["result"][0]["scope"], "b", "{found}");
    let hits = conforming(&mut s, "search", json!({"query": "memory scope"}));
    assert_eq!(hits["hits"][0]["id"], 0, "{hits}");
    // A prompt's block is `{lo, hi}` (hi excluded); a tool names it `LO-HI` (HI included).
    let named = |b: &Value| format!("{}-{}", b["lo"], b["hi"].as_u64().unwrap_or(1) - 1);
    let next = conforming(&mut s, "nap", json!({}));
    let block = named(&next["next_merge"]["block"]);
    let batch = conforming(&mut s, "nap", json!({"batch": 2}));
    assert_eq!(named(&batch["result"][0]["block"]), block, "{batch}");
    let answered = conforming(
        &mut s,
        "nap",
        json!({"block": block, "text": "memories 0 and 1 [#0, #1]"}),
    );
    assert_eq!(answered["saved"], true, "{answered}");
    let later = named(&answered["next_merge"]["block"]);
    let summary = "memories 2 and 3 [#2, #3]";
    let answers = json!({"answers": [{"block": later, "summary": summary}]});
    let saved = conforming(&mut s, "nap", answers);
    assert_eq!(saved["saved"], json!([later]), "{saved}");
    let typed = schema_of("pending");
    assert_eq!(typed["properties"]["result"]["type"], "array", "{typed}");
    assert_eq!(typed["properties"]["result"]["items"]["type"], "string");
}

/// Every tool the server lists (`--tools all`: more than 20).
fn all_tools(s: &mut StdioServer) -> Vec<Value> {
    let tools = s.request("tools/list", json!({}));
    let list = tools["result"]["tools"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(list.len() > 20, "{tools}");
    list
}

#[test]
fn every_tool_refuses_an_argument_its_schema_does_not_name() {
    // A misspelt argument (here `bogus_argument`) must fail the call, never be dropped: each input schema says
    // `additionalProperties: false`, and the server holds to it. Tools whose every argument is
    // optional would otherwise run as if it had not been given.
    let e = Env::init();
    e.ok(&["note", "deploy staging on friday"]);
    let mut s = StdioServer::start(&e, &[], &["--tools", "all"]);
    for tool in &all_tools(&mut s) {
        let name = tool["name"].as_str().unwrap_or_default();
        let schema = &tool["inputSchema"];
        assert_eq!(schema["additionalProperties"], false, "{name}: {schema}");
        let r = s.call(name, json!({"bogus_argument": 1}));
        assert_eq!(error_class(&r), "invalid", "{name}: {r}");
        let required = schema["required"].as_array().map_or(0, Vec::len);
        if required == 0 {
            let text = r["content"][0]["text"].as_str().unwrap_or_default();
            assert!(text.contains("bogus_argument"), "{name}: {r}");
        }
    }
    // With their required arguments given, the unknown one is named too.
    for (tool, args) in [
        ("recall", json!({"pattern": "deploy", "bogus_argument": 1})),
        ("search", json!({"query": "deploy", "bogus_argument": 1})),
        ("note", json!({"text": "x", "bogus_argument": 1})),
    ] {
        let r = s.call(tool, args);
        let text = r["content"][0]["text"].as_str().unwrap_or_default();
        assert!(
            text.contains("unknown field `bogus_argument`"),
            "{tool}: {r}"
        );
    }
}
