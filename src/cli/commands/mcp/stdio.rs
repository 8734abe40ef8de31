//! The stdio transport with a bound on each message: a line over [`MAX_MESSAGE_BYTES`] is never
//! handed to rmcp (which would drop it without a word, leaving the client waiting forever); it
//! is answered with a JSON-RPC error carrying the request's id (read from the line's start) and
//! noted on stderr, and the server goes on with the next line. A line that is not JSON is
//! answered with a parse error (-32700) with id null, as JSON-RPC asks (rmcp would drop it
//! silently), and a batch goes to [`super::batch`]: split for rmcp in a session of
//! 2025-03-26, refused (-32600, id null) in any other. Everything else passes through
//! unchanged: stdin to rmcp through one pipe, rmcp's lines and the refusals to stdout through
//! one writer, so that they never interleave.

use std::sync::{Arc, Mutex};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream};

use serde_json::Value;
use tokio::sync::mpsc;

use rmcp::ServiceExt;
use somna::Error;

use super::batch::{self, Batches, Incoming};
use super::SomnaMcp;

/// The most bytes one message (one line) may take, as over HTTP.
pub const MAX_MESSAGE_BYTES: usize = 4 << 20;

/// How much of a refused line is kept to find its id.
const HEAD_BYTES: usize = 4096;

/// Serves one client over stdin and stdout until it goes away.
pub async fn serve(handler: SomnaMcp) -> Result<(), Error> {
    let (to_rmcp, rmcp_in) = tokio::io::duplex(64 << 10);
    let (rmcp_out, from_rmcp) = tokio::io::duplex(64 << 10);
    let (refusals, refused) = mpsc::unbounded_channel();
    let batches = Arc::new(Mutex::new(Batches::default()));
    let reader = tokio::spawn(pump_in(
        tokio::io::stdin(),
        to_rmcp,
        refusals,
        batches.clone(),
    ));
    let writer = tokio::spawn(pump_out(from_rmcp, refused, tokio::io::stdout(), batches));
    let io = |e: String| Error::Io(std::io::Error::other(e));
    let running = handler
        .serve((rmcp_in, rmcp_out))
        .await
        .map_err(|e| io(e.to_string()))?;
    let waited = running.waiting().await.map_err(|e| io(e.to_string()));
    reader.abort();
    let _ = writer.await;
    waited.map(|_| ())
}

/// Copies stdin to rmcp line by line; a line over the limit becomes a refusal instead.
async fn pump_in(
    input: impl AsyncRead + Unpin,
    mut to: DuplexStream,
    refusals: mpsc::UnboundedSender<String>,
    batches: Arc<Mutex<Batches>>,
) {
    let mut r = BufReader::with_capacity(64 << 10, input);
    let mut line = Vec::new();
    let mut over = false;
    while let Ok(buf) = r.fill_buf().await {
        if buf.is_empty() {
            break;
        }
        let end = buf.iter().position(|&b| b == b'\n');
        let chunk = buf.get(..end.map_or(buf.len(), |i| i + 1)).unwrap_or(buf);
        if !over && line.len() + chunk.len() > MAX_MESSAGE_BYTES + 1 {
            over = true;
            line.extend_from_slice(chunk.get(..HEAD_BYTES).unwrap_or(chunk));
            line.truncate(HEAD_BYTES);
        } else if !over {
            line.extend_from_slice(chunk);
        }
        let n = chunk.len();
        r.consume(n);
        if end.is_some() {
            if over {
                let _ = refusals.send(refusal(&line));
            } else {
                let lines = match malformed(&line) {
                    Some(Line::Refused(refused)) => {
                        let _ = refusals.send(refused);
                        Vec::new()
                    }
                    Some(Line::Batch(batch)) => match batches.lock().map(|mut b| b.incoming(batch))
                    {
                        Ok(Incoming::Forward(lines)) => lines,
                        Ok(Incoming::Answer(answer)) => {
                            let _ = refusals.send(answer);
                            Vec::new()
                        }
                        Err(_) => Vec::new(),
                    },
                    None => vec![std::mem::take(&mut line)],
                };
                for l in lines {
                    if to.write_all(&l).await.is_err() {
                        return;
                    }
                }
            }
            line.clear();
            over = false;
        }
    }
    if !over && !line.is_empty() {
        let _ = to.write_all(&line).await;
    }
}

/// Writes rmcp's lines and the refusals to stdout, each whole, until both are done.
async fn pump_out(
    from: DuplexStream,
    mut refused: mpsc::UnboundedReceiver<String>,
    mut out: impl AsyncWrite + Unpin,
    batches: Arc<Mutex<Batches>>,
) {
    let mut r = BufReader::new(from);
    let mut buf = Vec::new();
    let (mut rmcp_open, mut refusals_open) = (true, true);
    while rmcp_open || refusals_open {
        tokio::select! {
            n = r.read_until(b'\n', &mut buf), if rmcp_open => match n {
                Ok(n) if n > 0 => {
                    let line = std::mem::take(&mut buf);
                    let now = match batches.lock() {
                        Ok(mut b) => b.output(line),
                        Err(_) => Some(line),
                    };
                    if let Some(line) = now {
                        if out.write_all(&line).await.is_err() || out.flush().await.is_err() {
                            return;
                        }
                    }
                }
                _ => rmcp_open = false,
            },
            m = refused.recv(), if refusals_open => match m {
                Some(m) => {
                    let line = format!("{m}\n");
                    if out.write_all(line.as_bytes()).await.is_err() || out.flush().await.is_err() {
                        return;
                    }
                }
                None => refusals_open = false,
            },
        }
    }
}

/// A line rmcp cannot take as it is.
enum Line {
    /// Not JSON: the answer.
    Refused(String),
    /// A JSON array: a batch.
    Batch(Vec<Value>),
}

/// A line that is not a JSON-RPC message rmcp can take, which rmcp would drop without a word
/// (or answer without an id): not JSON at all, or JSON that is not (invalid UTF-8, a lone
/// surrogate, nesting past serde_json's 128 levels): the parse error -32700 with id null; JSON
/// that is not a message rmcp can read: -32600 with its id ([`batch::unreadable`]); or a batch.
/// None for a blank line or a message rmcp reads.
fn malformed(line: &[u8]) -> Option<Line> {
    let text = line
        .strip_prefix(b"\xEF\xBB\xBF".as_slice())
        .unwrap_or(line);
    let start = text.iter().find(|b| !b.is_ascii_whitespace())?;
    let parsed = match start {
        b'[' => serde_json::from_slice::<Vec<Value>>(text).map(|b| Some(Line::Batch(b))),
        _ => {
            serde_json::from_slice::<Value>(text).map(|v| batch::unreadable(&v).map(Line::Refused))
        }
    };
    match parsed {
        Ok(line) => line,
        Err(_) => Some(Line::Refused(batch::parse_error("message"))),
    }
}

/// The JSON-RPC error for a line over the limit, with the id found at its start (or null).
fn refusal(head: &[u8]) -> String {
    eprintln!("somna: refused an MCP message of more than {MAX_MESSAGE_BYTES} bytes");
    let id = id_of(&String::from_utf8_lossy(head)).unwrap_or(serde_json::Value::Null);
    serde_json::json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600, "message": format!(
        "the message takes more than {MAX_MESSAGE_BYTES} bytes, this server's limit; send less (docs/security.md)"
    )}})
    .to_string()
}

/// The `"id"` of a JSON-RPC message from the start of its text: a number or a string that
/// comes before `"params"`, as clients write them.
fn id_of(head: &str) -> Option<serde_json::Value> {
    let before = head.split("\"params\"").next()?;
    let (_, rest) = before.split_once("\"id\"")?;
    let rest = rest.trim_start().strip_prefix(':')?.trim_start();
    if let Some(s) = rest.strip_prefix('"') {
        let end = s.find('"')?;
        return Some(serde_json::Value::String(s.get(..end)?.to_string()));
    }
    let digits: String = rest
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '-')
        .collect();
    digits.parse::<i64>().ok().map(serde_json::Value::from)
}
