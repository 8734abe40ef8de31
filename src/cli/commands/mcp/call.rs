//! Running one tool call: the CLI command of its verb on the shared store, as the caller, its
//! text lines as the content and its `--json` value as the structured content, both within the
//! byte budget; any failure an `isError` result with its class, never a crash of the server.

use rmcp::model::{CallToolResult, ContentBlock, Tool};
use rmcp::ErrorData as McpError;
use serde_json::{json, Value};
use somna::text;
use somna::{Error, Store};

use super::args::Call;
use super::catalog::TOOLS;
use super::tools::{offered, Group, ToolSpec};
use super::{Caller, Server};
use crate::cli::commands;
use crate::cli::context::Context;

/// The class of an error, as a tool result names it: invalid, conflict, not_found, busy,
/// corrupt, denied, server or ambiguous (the CLI's exit codes 2, 1, 3, 4, 5, 6, 7, 8; an id or
/// block past the end of the log is not_found; a failure of the storage engine corrupt, of the
/// system busy).
pub fn class(e: &Error) -> &'static str {
    match e {
        Error::Storage(_) => "corrupt",
        Error::Io(_) => "busy",
        Error::Unsupported(_) => "invalid",
        Error::OutOfRange { .. } => "not_found",
        Error::Server(_) | Error::Embedder(_) => "server",
        Error::Ambiguous(_) => "ambiguous",
        e => match e.exit_code() {
            2 => "invalid",
            3 => "not_found",
            4 => "busy",
            5 => "corrupt",
            6 => "denied",
            _ => "conflict",
        },
    }
}

/// An `isError` result: `class: message` as its text, and no `structuredContent` (the spec
/// requires structured content to conform to the tool's `outputSchema`, which describes the
/// success shape; clients that validate it, such as the TypeScript SDK's, would otherwise hide
/// the message behind a schema error). A message that starts with its class already
/// (`denied: ...`) does not repeat it.
pub fn error_result(class: &str, message: &str) -> CallToolResult {
    let message = text::display_safe(unlabelled(class, message));
    let message = cut(&message, ERROR_BYTES);
    CallToolResult::error(vec![ContentBlock::text(format!("{class}: {message}"))])
}

/// The most bytes of an error's message a result carries: errors echo the value they refuse,
/// which may be megabytes, and every result stays within `--max-bytes` (at least 1,000).
const ERROR_BYTES: usize = 900;

/// `s` whole when it fits `max` bytes, else its first bytes up to a character boundary and how
/// many were cut.
fn cut(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    // Room for the marker, so that the whole stays within `max`.
    let keep = text::prefix_within(s, max.saturating_sub(40));
    format!("{keep} [... {} bytes cut]", s.len() - keep.len())
}

/// `message` without a leading `class: ` (an error's text may start with its own class).
fn unlabelled<'a>(class: &str, message: &'a str) -> &'a str {
    message
        .strip_prefix(class)
        .and_then(|m| m.strip_prefix(": "))
        .unwrap_or(message)
}

/// `class: message` for an error, the class said once.
pub fn labelled(e: &Error) -> String {
    let class = class(e);
    format!("{class}: {}", unlabelled(class, &e.to_string()))
}

/// The caller's store handle and whether the caller is the admin.
fn handle(server: &Server, caller: &Caller) -> Result<(Store, bool), Error> {
    let store = server.store()?.as_principal(caller.0.as_deref());
    let admin = store.read(|r| r.is_admin())?;
    Ok((store, admin))
}

/// The tools offered to this caller (admin tools only to the admin).
pub fn listed(server: &Server, caller: &Caller) -> Vec<Tool> {
    let admin = handle(server, caller).map(|h| h.1).unwrap_or(false);
    TOOLS
        .iter()
        .filter(|t| offered(t, &server.groups, server.read_only, admin))
        .map(ToolSpec::tool)
        .collect()
}

/// Runs the tool `name` with `arguments` as the caller; with the result, the scope it wrote
/// (a write tool of the memory verbs that succeeded), for the subscribers of its wake. A tool
/// this caller is not offered is a protocol error (-32602, as the spec says of unknown tools),
/// not a result.
pub fn call(
    server: &Server,
    caller: &Caller,
    name: &str,
    arguments: Value,
) -> Result<(CallToolResult, Option<String>), McpError> {
    let result = run_tool(server, caller, name, arguments.clone())?;
    if result.is_error == Some(true) {
        return Ok((result, None));
    }
    let writes_memory = TOOLS
        .iter()
        .any(|t| t.name == name && !t.read_only && t.group != Group::Sessions);
    let scope = arguments
        .get("scope")
        .and_then(Value::as_str)
        .map_or_else(|| server.scope.clone(), str::to_string);
    Ok((result, writes_memory.then_some(scope)))
}

/// The protocol error for a tool that is not offered here.
fn unknown_tool(name: &str) -> McpError {
    let name = text::display_safe(name);
    McpError::invalid_params(
        format!("unknown tool: no tool {name:?} is offered here"),
        None,
    )
}

/// Runs the tool `name` with `arguments` as the caller.
fn run_tool(
    server: &Server,
    caller: &Caller,
    name: &str,
    arguments: Value,
) -> Result<CallToolResult, McpError> {
    if !TOOLS.iter().any(|t| t.name == name) {
        return Err(unknown_tool(name));
    }
    let (store, admin) = match handle(server, caller) {
        Ok(h) => h,
        Err(e) => return Ok(error_result(class(&e), &e.to_string())),
    };
    let spec = TOOLS
        .iter()
        .find(|t| t.name == name && offered(t, &server.groups, server.read_only, admin));
    let Some(spec) = spec else {
        return Err(unknown_tool(name));
    };
    Ok(run_spec(server, caller, spec, &store, arguments))
}

/// Runs an offered tool, asking read tools for fewer lines while the result is over the budget.
fn run_spec(
    server: &Server,
    caller: &Caller,
    spec: &ToolSpec,
    store: &Store,
    arguments: Value,
) -> CallToolResult {
    let mut budget = server.max_bytes;
    let mut last_size = 0;
    loop {
        let c = match (spec.build)(arguments.clone(), budget) {
            Ok(c) => c,
            Err(e) => return error_result(class(&e), &e.to_string()),
        };
        let reads = commands::reads_only(&c.command);
        let (code, out, captured) = match run(server, store.as_principal(caller.0.as_deref()), c) {
            Ok(r) => r,
            // A smaller budget than asked for that no longer fits even one line.
            Err(_) if last_size > 0 => return too_large(spec, last_size, server.max_bytes),
            Err(e) => return error_result(class(&e), &e.to_string()),
        };
        let (out, value) = match shape(spec, code, out, captured) {
            Ok(r) => r,
            Err(refused) => return refused,
        };
        let size = out.len().max(value.to_string().len());
        if size <= server.max_bytes {
            return success(out, value);
        }
        if !reads {
            // A write that committed is never reported as a failure (the model would retry it).
            return success_cut(out, value, server.max_bytes);
        }
        // wake, recall and search take a byte budget for their lines; the JSON of a line is
        // larger, so ask again for fewer lines, in proportion (they read only: asking twice is
        // harmless).
        if !spec.shrinks || budget < 256 {
            return too_large(spec, size, server.max_bytes);
        }
        budget = budget.min(out.len()) * server.max_bytes / size * 9 / 10;
        last_size = size;
    }
}

/// Runs the command on the store; returns its exit code, its text and its `--json` value.
/// A panic (a damaged file the engine could not report as an error) becomes `corrupt`.
pub fn run(server: &Server, store: Store, c: Call) -> Result<(u8, String, Option<Value>), Error> {
    let scope = c.scope.unwrap_or_else(|| server.scope.clone());
    somna::text::validate_scopes(&scope)?;
    if scope.contains(',') && !commands::several_scopes(&c.command) {
        return Err(Error::Invalid {
            what: "scope",
            reason: "several scopes are only for wake, recall and search".into(),
        });
    }
    let prefix = if scope == somna::DEFAULT_SCOPE || scope.contains(',') {
        "somna".to_string()
    } else {
        format!("somna --scope {}", crate::cli::output::shell_quote(&scope))
    };
    // Hints name the scope when a call without one would go elsewhere.
    let named = (scope != server.scope && !scope.contains(',')).then(|| scope.clone());
    let mut out = Vec::new();
    let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let mut cx = Context::for_call(store, &scope, (prefix, named.clone()), &mut out);
        let code = commands::run(&mut cx, &c.command)?;
        Ok::<_, Error>((code, cx.captured.take()))
    }));
    let (code, captured) = match ran {
        Ok(r) => r?,
        Err(_) => {
            return Err(Error::Storage(
                "the storage engine failed on a damaged page; run the verify tool".into(),
            ))
        }
    };
    Ok((code, String::from_utf8_lossy(&out).into_owned(), captured))
}

/// The text and the structured value (the verb's typed result, under `result` when it is not
/// an object: no text is ever parsed back); a non-zero exit an `isError` result.
fn shape(
    spec: &ToolSpec,
    code: u8,
    out: String,
    captured: Option<Value>,
) -> Result<(String, Value), CallToolResult> {
    let value = captured;
    if code != 0 && code != 5 {
        // A verb that reports on stderr and exits non-zero: no such session.
        let what = if spec.group == Group::Sessions {
            "not_found"
        } else {
            "conflict"
        };
        let line = out.trim().lines().next().unwrap_or("the call failed");
        return Err(error_result(what, line));
    }
    let value = match value {
        Some(Value::Object(m)) => Value::Object(m),
        Some(v) => json!({ "result": v }),
        None => json!({}),
    };
    Ok((out, value))
}

/// A successful result.
fn success(text: String, value: Value) -> CallToolResult {
    let mut r = CallToolResult::success(vec![ContentBlock::text(text)]);
    r.structured_content = Some(value);
    r
}

/// A successful write whose result is over the budget: the text cut at a line within it, and
/// the structured fields that do not fit (long block lists) left out and named in `cut`.
fn success_cut(text: String, value: Value, max: usize) -> CallToolResult {
    let mut kept = String::new();
    for line in text.lines() {
        if kept.len() + line.len() + 80 > max {
            kept.push_str(&format!("[{} more bytes cut]\n", text.len() - kept.len()));
            break;
        }
        kept.push_str(line);
        kept.push('\n');
    }
    let Value::Object(fields) = value else {
        return success(kept, json!({"cut": ["result"]}));
    };
    let mut out = serde_json::Map::new();
    let mut cut = Vec::new();
    for (k, v) in fields {
        if v.to_string().len() <= max / 4 {
            out.insert(k, v);
        } else {
            cut.push(k);
        }
    }
    out.insert("cut".into(), json!(cut));
    success(kept, Value::Object(out))
}

/// The refusal of a result over the budget, with how to ask the tool for less.
fn too_large(spec: &ToolSpec, size: usize, max: usize) -> CallToolResult {
    error_result(
        "invalid",
        &format!(
            "the result would take {size} bytes, over this server's budget of {max}; ask for less ({})",
            spec.narrow
        ),
    )
}
