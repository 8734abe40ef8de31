//! Subscriptions to wake resources over `somna mcp --http` stay with their subscriber (issue
//! 27, point 6): another principal's `resources/unsubscribe` does not end them, and a stream
//! opened before `token revoke` or `revoke PRINCIPAL read SCOPE` hears no more of that scope.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::common::mcp::{initialize_body, status_of, token, token_and_id, HttpServer};
use crate::common::Env;

const UPDATED: &str = "notifications/resources/updated";

/// One MCP session of one token holder.
struct Session<'a> {
    server: &'a HttpServer,
    auth: String,
    id: String,
    next: u64,
}

impl<'a> Session<'a> {
    fn open(server: &'a HttpServer, tok: &str) -> Session<'a> {
        let auth = format!("Bearer {tok}");
        let (status, resp) = server.post(&[("Authorization", &auth)], &initialize_body());
        assert_eq!(status, 200, "{resp}");
        let id = resp
            .lines()
            .find_map(|l| {
                let (k, v) = l.split_once(':')?;
                k.eq_ignore_ascii_case("mcp-session-id")
                    .then(|| v.trim().to_string())
            })
            .unwrap_or_else(|| panic!("no session id: {resp}"));
        let mut s = Session {
            server,
            auth,
            id,
            next: 2,
        };
        let (status, resp) =
            s.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        assert!(status == 202 || status == 200, "{resp}");
        s
    }

    fn post(&mut self, body: &Value) -> (u16, String) {
        let headers = [
            ("Authorization", self.auth.as_str()),
            ("Mcp-Session-Id", self.id.as_str()),
            ("MCP-Protocol-Version", "2025-06-18"),
        ];
        self.server.post(&headers, &body.to_string())
    }

    fn request(&mut self, method: &str, params: Value) -> String {
        let id = self.next;
        self.next += 1;
        let (status, resp) =
            self.post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        assert_eq!(status, 200, "{method}: {resp}");
        resp
    }

    /// The session's stream of server messages (GET /mcp), its head read.
    fn stream(&self) -> TcpStream {
        let mut t = self.server.connect();
        let req = format!(
            "GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\nAuthorization: {}\r\nMcp-Session-Id: {}\r\nMCP-Protocol-Version: 2025-06-18\r\n\r\n",
            self.auth, self.id
        );
        t.write_all(req.as_bytes()).expect("send");
        let (status, head) = read_head(&mut t);
        assert_eq!(status, 200, "{head}");
        t
    }

    fn subscribe(&mut self, scope: &str) {
        self.request(
            "resources/subscribe",
            json!({"uri": format!("somna://{scope}/wake")}),
        );
    }

    fn note(&mut self, scope: &str, text: &str) {
        let r = self.request(
            "tools/call",
            json!({"name": "note", "arguments": {"text": text, "scope": scope}}),
        );
        assert!(!r.contains("\"isError\":true"), "{r}");
    }
}

/// Reads a response head.
fn read_head(t: &mut TcpStream) -> (u16, String) {
    let mut head = Vec::new();
    let mut b = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && t.read(&mut b).map(|n| n == 1).unwrap_or(false) {
        head.push(b[0]);
    }
    let text = String::from_utf8_lossy(&head).into_owned();
    (status_of(&text), text)
}

/// What the stream says within `within`, stopping early once `until` appears.
fn heard(t: &mut TcpStream, within: Duration, until: &str) -> String {
    let end = Instant::now() + within;
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while Instant::now() < end && !String::from_utf8_lossy(&got).contains(until) {
        t.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        match t.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(_) => {}
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}

#[test]
fn another_principal_cannot_unsubscribe_the_caller() {
    let e = Env::init();
    e.ok(&["grant", "user:alice", "write", "user:alice"]);
    e.ok(&["grant", "user:alice", "read", "user:alice"]);
    let (alice, mallory) = (token(&e, "user:alice"), token(&e, "user:mallory"));
    let s = HttpServer::start(&e, &[]);
    let mut a = Session::open(&s, &alice);
    let mut events = a.stream();
    a.subscribe("user:alice");
    let mut m = Session::open(&s, &mallory);
    m.post(
        &json!({"jsonrpc": "2.0", "id": 9, "method": "resources/unsubscribe",
        "params": {"uri": "somna://user:alice/wake"}}),
    );
    a.note("user:alice", "alice's plan");
    let got = heard(&mut events, Duration::from_secs(60), UPDATED);
    assert!(got.contains(UPDATED), "alice heard nothing: {got}");
}

#[test]
fn revoked_tokens_and_grants_hear_no_more() {
    let e = Env::init();
    for (who, what) in [
        ("user:alice", "write"),
        ("user:alice", "read"),
        ("user:bob", "read"),
        ("user:carol", "read"),
        ("user:erin", "read"),
    ] {
        e.ok(&["grant", who, what, "project:acme"]);
    }
    let alice = token(&e, "user:alice");
    let (bob, carol) = (token(&e, "user:bob"), token(&e, "user:carol"));
    let (erin, erin_id) = token_and_id(&e, "user:erin");
    let s = HttpServer::start(&e, &[]);
    let mut streams = Vec::new();
    for tok in [&bob, &carol, &erin] {
        let mut sub = Session::open(&s, tok);
        streams.push(sub.stream());
        sub.subscribe("project:acme");
    }
    e.ok(&["revoke", "user:bob", "read", "project:acme"]);
    e.ok(&["token", "revoke", &erin_id]);
    Session::open(&s, &alice).note("project:acme", "acme ships on friday");
    let [bob_s, carol_s, erin_s] = &mut streams[..] else {
        unreachable!()
    };
    let got = heard(carol_s, Duration::from_secs(60), UPDATED);
    assert!(
        got.contains(UPDATED),
        "carol, who may read, heard nothing: {got}"
    );
    // Carol heard it: the others would have by now; give them a little longer.
    for (name, t) in [("bob", bob_s), ("erin", erin_s)] {
        let got = heard(t, Duration::from_secs(2), UPDATED);
        assert!(
            !got.contains(UPDATED),
            "{name} still hears project:acme: {got}"
        );
    }
}
