//! Talking to `somna mcp` without an SDK: JSON-RPC lines over stdio, and raw HTTP/1.1 requests
//! to `somna mcp --http` (the status, the headers and the body, SSE events included).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, ChildStdin, ChildStdout, Stdio};
use std::time::Duration;

use serde_json::{json, Value};

use super::Env;

/// An `somna mcp` server over stdio, initialized.
pub struct StdioServer {
    pub child: Child,
    /// The server's stdin, until [`StdioServer::exit`] closes it.
    stdin: Option<ChildStdin>,
    pub stdout: BufReader<ChildStdout>,
    next_id: u64,
}

impl StdioServer {
    /// Starts `somna [global] mcp [extra]` and completes the handshake.
    pub fn start(e: &Env, global: &[&str], extra: &[&str]) -> StdioServer {
        StdioServer::start_at(e, global, extra, "2025-06-18")
    }

    /// As [`StdioServer::start`], negotiating protocol `version`.
    pub fn start_at(e: &Env, global: &[&str], extra: &[&str], version: &str) -> StdioServer {
        let mut c = e.cmd();
        c.args(global).arg("mcp").args(extra);
        c.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = c.spawn().expect("spawn somna mcp");
        let stdin = child.stdin.take().expect("stdin");
        let stdout = BufReader::new(child.stdout.take().expect("stdout"));
        let mut s = StdioServer {
            child,
            stdin: Some(stdin),
            stdout,
            next_id: 1,
        };
        let init = json!({"protocolVersion": version, "capabilities": {},
            "clientInfo": {"name": "somna-tests", "version": "0"}});
        s.request("initialize", init);
        s.send_line(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string());
        s
    }

    /// Writes one line (a newline is added).
    pub fn send_line(&mut self, line: &str) {
        self.send_bytes(line.as_bytes());
    }

    /// Writes one line of raw bytes, which need not be UTF-8 (a newline is added).
    pub fn send_bytes(&mut self, line: &[u8]) {
        let stdin = self.stdin.as_mut().expect("the server's stdin is open");
        stdin.write_all(line).expect("write");
        stdin.write_all(b"\n").expect("write");
        stdin.flush().expect("flush");
    }

    /// The next message the server sends (None when stdout closes).
    pub fn read_message(&mut self) -> Option<Value> {
        let mut line = String::new();
        loop {
            line.clear();
            if self.stdout.read_line(&mut line).ok()? == 0 {
                return None;
            }
            if !line.trim().is_empty() {
                return serde_json::from_str(&line).ok();
            }
        }
    }

    /// Sends a request and returns its response (notifications before it are skipped).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&msg.to_string());
        loop {
            let m = self.read_message().expect("a response");
            if m.get("id") == Some(&json!(id)) {
                return m;
            }
        }
    }

    /// Calls a tool; returns the result.
    pub fn call(&mut self, tool: &str, args: Value) -> Value {
        let r = self.request("tools/call", json!({"name": tool, "arguments": args}));
        r.get("result")
            .cloned()
            .unwrap_or_else(|| panic!("no result: {r}"))
    }

    /// Closes the server's stdin, as a client that is done does, and waits up to 30 s for it to
    /// exit (it closes its store on the way out); its exit status. Killed and `None` if it does
    /// not.
    pub fn exit(&mut self) -> Option<std::process::ExitStatus> {
        drop(self.stdin.take());
        super::wait_within(&mut self.child, Duration::from_secs(30))
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An `somna mcp --http 127.0.0.1:0` server.
pub struct HttpServer {
    pub child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl HttpServer {
    /// Starts the server and waits for the line that names its address.
    pub fn start(e: &Env, extra: &[&str]) -> HttpServer {
        let mut c = e.cmd();
        c.args(["mcp", "--http", "127.0.0.1:0"]).args(extra);
        c.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        let mut child = c.spawn().expect("spawn somna mcp --http");
        let mut err = BufReader::new(child.stderr.take().expect("stderr"));
        let mut line = String::new();
        let addr = loop {
            line.clear();
            assert!(
                err.read_line(&mut line).expect("stderr") > 0,
                "no address line"
            );
            if let Some(rest) = line.trim().strip_prefix("somna: serving MCP at http://") {
                break rest.trim_end_matches("/mcp").to_string();
            }
        };
        // Keep draining stderr so that the server never blocks on it.
        std::thread::spawn(move || {
            let _ = std::io::copy(&mut err, &mut std::io::sink());
        });
        HttpServer { child, addr }
    }

    /// A connected socket with a read timeout.
    pub fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(&self.addr).expect("connect");
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .expect("timeout");
        s
    }

    /// POSTs `body` to `/mcp` with the extra header lines; returns the status and the response
    /// head and body (the connection is closed after it).
    pub fn post(&self, headers: &[(&str, &str)], body: &str) -> (u16, String) {
        let mut s = self.connect();
        let mut req = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\nContent-Length: {}\r\n",
            body.len()
        );
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        req.push_str(body);
        s.write_all(req.as_bytes()).expect("send");
        read_status(&mut s)
    }
}

/// The status and the whole response of a connection that closes after one response.
pub fn read_status(s: &mut TcpStream) -> (u16, String) {
    let mut resp = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => resp.extend_from_slice(&buf[..n]),
            Err(_) => break,
        }
        // One SSE response per POST: stop once its result arrived.
        if resp.windows(9).any(|w| w == b"\"result\":")
            || resp.windows(8).any(|w| w == b"\"error\":")
        {
            break;
        }
    }
    let text = String::from_utf8_lossy(&resp).into_owned();
    (status_of(&text), text)
}

/// The status code of a response that starts with its status line (0 when there is none).
pub fn status_of(response: &str) -> u16 {
    response
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0)
}

/// The `initialize` request body.
pub fn initialize_body() -> String {
    initialize_body_at("2025-06-18")
}

/// The `initialize` request body for protocol `version`.
pub fn initialize_body_at(version: &str) -> String {
    json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": {},
        "clientInfo": {"name": "somna-tests", "version": "0"}}})
    .to_string()
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A new bearer token for `principal` (`somna token add`).
pub fn token(e: &Env, principal: &str) -> String {
    token_and_id(e, principal).0
}

/// A new bearer token for `principal` and the id `somna token revoke` takes.
pub fn token_and_id(e: &Env, principal: &str) -> (String, String) {
    let mut c = e.cmd();
    c.args(["token", "add", principal]);
    let r = super::run_raw(c, None);
    assert_eq!(r.code, 0, "{r:?}");
    let out = String::from_utf8_lossy(&r.out);
    let err = String::from_utf8_lossy(&r.err);
    let tok = out.split_whitespace().find(|w| w.starts_with("somna_"));
    let id = err.split_whitespace().skip_while(|w| *w != "token").nth(1);
    match (tok, id) {
        (Some(t), Some(i)) => (t.to_string(), i.to_string()),
        _ => panic!("no token or id in {r:?}"),
    }
}

/// The class of an `isError` tool result: the text before its first `: ` (the result carries
/// no `structuredContent`, which would have to match the tool's output schema).
pub fn error_class(r: &Value) -> String {
    assert_eq!(r["isError"], true, "not an error: {r}");
    assert!(r.get("structuredContent").is_none(), "{r}");
    let text = r["content"][0]["text"].as_str().unwrap_or_default();
    text.split_once(": ")
        .map(|(c, _)| c)
        .unwrap_or(text)
        .to_string()
}
