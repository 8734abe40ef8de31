//! JSON-RPC batches, for the one protocol version that requires them: a session of
//! [`BATCH_VERSION`] (2025-03-26) may send a JSON array of messages. On stdio, that is a
//! session whose `initialize` was answered with that version; over HTTP, a POST without an
//! `MCP-Protocol-Version` header or with that version (the header is required from 2025-06-18
//! on, and its absence means 2025-03-26, as rmcp also reads it). rmcp takes one message at a time, so a batch is split into its messages, each
//! handed to rmcp as its own line, and the responses to its requests are held back and written
//! as one array once the last has come (JSON-RPC 2.0, "Batch"): an empty batch is one
//! invalid-request error, an element that is not a message gets an invalid-request error in the
//! array, and a batch of notifications only is answered with nothing. Any other session gets
//! the invalid-request error with id null that every later version calls for.

use axum::extract::Request;
use axum::http::{header, request, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// The protocol version whose sessions may send batches.
pub const BATCH_VERSION: &str = "2025-03-26";

/// The error of a batch's element that cannot be handed on.
const NOT_A_MESSAGE: &str =
    "invalid request: not a JSON-RPC message, or an initialize (which is never batched)";

/// The batches of one stdio session.
#[derive(Default)]
pub struct Batches {
    /// The server's answer to `initialize` has been seen.
    negotiated: bool,
    /// It was [`BATCH_VERSION`].
    allowed: bool,
    /// The batches whose responses are not all in, oldest first.
    open: Vec<Open>,
}

/// One batch waiting for responses.
struct Open {
    /// The ids of its requests not answered yet.
    waiting: Vec<Value>,
    /// The responses so far, in the order they came.
    got: Vec<Value>,
}

/// What to do with a batch that came in.
pub enum Incoming {
    /// Hand each line to rmcp (the batch's answer, if any, comes through [`Batches::output`]).
    Forward(Vec<Vec<u8>>),
    /// Answer the client with this line at once (a refusal, or a batch of invalid elements).
    Answer(String),
}

impl Batches {
    /// A JSON array `batch` from the client.
    pub fn incoming(&mut self, batch: Vec<Value>) -> Incoming {
        if !self.allowed {
            return Incoming::Answer(refused_batch("line"));
        }
        if batch.is_empty() {
            return Incoming::Answer(invalid(Value::Null, "invalid request: an empty batch"));
        }
        let (mut lines, mut waiting, mut got) = (Vec::new(), Vec::new(), Vec::new());
        for message in batch {
            match kind(&message) {
                Some(Kind::Request(id)) => waiting.push(id),
                Some(Kind::Other) => {}
                None => {
                    let id = message.get("id").cloned().unwrap_or(Value::Null);
                    got.push(error_value(id, NOT_A_MESSAGE));
                    continue;
                }
            }
            let mut line = message.to_string().into_bytes();
            line.push(b'\n');
            lines.push(line);
        }
        if waiting.is_empty() {
            if got.is_empty() {
                return Incoming::Forward(lines);
            }
            // Nothing rmcp will answer is in the batch: its errors are the whole answer.
            return Incoming::Answer(Value::Array(got).to_string());
        }
        self.open.push(Open { waiting, got });
        Incoming::Forward(lines)
    }

    /// A line rmcp wrote: Some(what to write to the client now), None to hold it back (a
    /// response of a batch that is not complete yet).
    pub fn output(&mut self, line: Vec<u8>) -> Option<Vec<u8>> {
        if self.negotiated && self.open.is_empty() {
            return Some(line);
        }
        let Ok(v) = serde_json::from_slice::<Value>(&line) else {
            return Some(line);
        };
        if !self.negotiated {
            if let Some(version) = v.pointer("/result/protocolVersion") {
                self.negotiated = true;
                self.allowed = version == BATCH_VERSION;
            }
            return Some(line);
        }
        let is_response = v.get("method").is_none();
        let id = v.get("id").cloned().unwrap_or(Value::Null);
        let found = self
            .open
            .iter()
            .position(|b| is_response && b.waiting.contains(&id));
        let Some(at) = found else {
            return Some(line);
        };
        let batch = self.open.get_mut(at)?;
        batch.waiting.retain(|w| *w != id);
        batch.got.push(v);
        if !batch.waiting.is_empty() {
            return None;
        }
        let done = self.open.remove(at);
        let mut out = Value::Array(done.got).to_string().into_bytes();
        out.push(b'\n');
        Some(out)
    }
}

/// What an element of a batch is.
enum Kind {
    /// A request, with its id: it will be answered.
    Request(Value),
    /// A notification, or a response to a request of the server: nothing answers it.
    Other,
}

/// The kind of an element of a batch, None when it may not be one: not a JSON-RPC message, or
/// an initialize, which 2025-03-26 keeps out of batches.
fn kind(message: &Value) -> Option<Kind> {
    if message.get("method").is_some_and(|x| x == "initialize") {
        return None;
    }
    classify(message)
}

/// A single message (not in a batch) that rmcp cannot read as a client message: the
/// invalid-request error (-32600) to answer it with, carrying its id when it has one a client
/// can wait on (a string or an integer), else id null. rmcp itself would answer without any
/// id, which JSON-RPC requires, or (over HTTP) with 415.
pub fn unreadable(message: &Value) -> Option<String> {
    if classify(message).is_some() {
        return None;
    }
    let id = message
        .get("id")
        .filter(|id| waitable(id))
        .cloned()
        .unwrap_or(Value::Null);
    Some(invalid(
        id,
        "invalid request: not a JSON-RPC 2.0 message this server can read (an object with \"jsonrpc\": \"2.0\", a string or integer id, a method and object params)",
    ))
}

/// The answer to a batch in a session whose protocol version has none: -32600, id null, asking
/// for one message per `unit` (a line on stdio, a request over HTTP).
pub fn refused_batch(unit: &str) -> String {
    invalid(
        Value::Null,
        &format!(
            "invalid request: JSON-RPC batches are not supported in this protocol version; send one message per {unit}"
        ),
    )
}

/// The parse error (-32700, id null) for a `what` (a line's message, an HTTP body) that is not
/// JSON serde_json accepts.
pub fn parse_error(what: &str) -> String {
    json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": format!("parse error: the {what} is not valid JSON")}})
        .to_string()
}

/// An id a client can wait on: MCP's ids are strings or integers.
fn waitable(id: &Value) -> bool {
    id.is_string() || id.is_i64() || id.is_u64()
}

/// The kind of a JSON-RPC message, None when it is not one rmcp can read.
fn classify(message: &Value) -> Option<Kind> {
    let m = message.as_object()?;
    if m.get("jsonrpc")? != "2.0" {
        return None;
    }
    // What rmcp cannot read as a client message (a known method with bad params, a float id)
    // it answers with id null, which no client waits for: refused here, with its id.
    // Read through the borrowed value: no copy of a message that may take megabytes.
    if <rmcp::model::ClientJsonRpcMessage as serde::Deserialize>::deserialize(message).is_err() {
        return None;
    }
    if m.get("id").is_some_and(|id| !waitable(id)) {
        return None; // a fractional id (16.0): rmcp answers it as 16, which nobody waits for
    }
    let id = m.get("id");
    match (m.get("method"), id) {
        (Some(Value::String(_)), Some(id)) => Some(Kind::Request(id.clone())),
        (Some(Value::String(_)), None) if !m.contains_key("id") => Some(Kind::Other),
        (None, Some(_)) if m.contains_key("result") || m.contains_key("error") => Some(Kind::Other),
        _ => None,
    }
}

/// An invalid-request error (-32600) as a value.
fn error_value(id: Value, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600, "message": message}})
}

/// An invalid-request error (-32600) as a line's text.
fn invalid(id: Value, message: &str) -> String {
    error_value(id, message).to_string()
}

/// Whether an HTTP request belongs to a session that may send batches.
pub fn allowed_over_http(parts: &request::Parts) -> bool {
    parts
        .headers
        .get("mcp-protocol-version")
        .is_none_or(|v| v == BATCH_VERSION)
}

/// The most bytes of one response of a batch over HTTP read back from rmcp.
const MAX_RESPONSE_BYTES: usize = 64 << 20;

/// A batch POSTed over HTTP: each message POSTed on to rmcp with the same head, and the
/// responses to its requests answered as one JSON array (202 with no body when it held only
/// notifications). A message rmcp refuses at the HTTP level (an unknown session: 404) refuses
/// the batch with that answer.
pub async fn serve_http(mut parts: request::Parts, batch: Vec<Value>, next: Next) -> Response {
    // Each message goes on with its own body: the batch's length is not its.
    parts.headers.remove(header::CONTENT_LENGTH);
    if batch.is_empty() {
        return refused_body(invalid(Value::Null, "invalid request: an empty batch"));
    }
    let mut answers = Vec::new();
    let mut forwarded = false;
    for message in batch {
        let id = message.get("id").cloned().unwrap_or(Value::Null);
        if kind(&message).is_none() {
            answers.push(error_value(id, NOT_A_MESSAGE));
            continue;
        }
        let body = axum::body::Body::from(message.to_string());
        let r = next
            .clone()
            .run(Request::from_parts(parts.clone(), body))
            .await;
        let status = r.status();
        if status == StatusCode::ACCEPTED {
            forwarded = true;
            continue;
        }
        if status != StatusCode::OK {
            if !forwarded {
                return r; // nothing of the batch ran: the refusal is the answer
            }
            // Earlier messages ran: their answers are kept, this one's refusal is an entry.
            let why = format!("invalid request: refused with HTTP {}", status.as_u16());
            answers.push(error_value(id, &why));
            continue;
        }
        forwarded = true;
        let Ok(bytes) = axum::body::to_bytes(r.into_body(), MAX_RESPONSE_BYTES).await else {
            continue;
        };
        answers.extend(responses(&bytes));
    }
    if answers.is_empty() {
        return StatusCode::ACCEPTED.into_response();
    }
    let json = [(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    )];
    (StatusCode::OK, json, Value::Array(answers).to_string()).into_response()
}

/// The JSON-RPC responses in a body of rmcp's: one JSON object, or an event stream whose
/// `data:` lines carry messages (progress and other notifications are left out).
fn responses(body: &[u8]) -> Vec<Value> {
    let text = String::from_utf8_lossy(body);
    let messages: Vec<Value> = match serde_json::from_str::<Value>(&text) {
        Ok(v) => vec![v],
        Err(_) => text
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str(d.trim()).ok())
            .collect(),
    };
    messages
        .into_iter()
        .filter(|m| m.get("method").is_none() && m.get("id").is_some())
        .collect()
}

/// A 400 carrying a JSON-RPC error.
fn refused_body(body: String) -> Response {
    let json = [(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    )];
    (StatusCode::BAD_REQUEST, json, body).into_response()
}
