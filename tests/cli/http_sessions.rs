//! An HTTP session belongs to the principal whose `initialize` opened it: another token holder
//! who names its `Mcp-Session-Id` gets 404, as for a session that does not exist, whether it
//! POSTs, opens the notification stream or DELETEs (before, it was served inside the session,
//! could listen to its subscriptions' notifications and could end it). The owner keeps the
//! session, and ends it.
//!
//! Sessions are bounded (issue 52, point 1: one read-only token opened 10,000 sessions in 3 s,
//! 529 MB): a principal keeps at most 64 and the server 1,024 in all, the least recently used
//! ended first, and another principal's sessions are untouched by one principal's flood; both
//! bounds are flags (`--max-sessions-per-principal`, `--max-sessions`).

use std::io::Write;

use crate::common::mcp::{initialize_body, read_status, token, HttpServer};
use crate::common::Env;

/// A request with a method, the session and the token; returns the status and the response.
fn send(s: &HttpServer, method: &str, session: &str, tok: &str, body: &str) -> (u16, String) {
    let mut c = s.connect();
    let req = format!(
        "{method} /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nConnection: close\r\nAuthorization: Bearer {tok}\r\nMcp-Session-Id: {session}\r\nMCP-Protocol-Version: 2025-06-18\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    c.write_all(req.as_bytes()).expect("send");
    read_status(&mut c)
}

/// The session id in a response's head.
fn session_id(resp: &str) -> String {
    resp.lines()
        .take_while(|l| !l.is_empty())
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("mcp-session-id")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_else(|| panic!("no session id in {resp}"))
}

/// Sends `initialize` as the holder of `tok`; returns the new session's id.
fn initialize(s: &HttpServer, tok: &str) -> String {
    let (status, resp) = s.post(
        &[("Authorization", &format!("Bearer {tok}"))],
        &initialize_body(),
    );
    assert_eq!(status, 200, "{resp}");
    session_id(&resp)
}

/// Opens a session as the holder of `tok` (`initialize`, then `notifications/initialized`) and
/// returns its id.
fn open_session(s: &HttpServer, tok: &str) -> String {
    let id = initialize(s, tok);
    let (status, resp) = send(s, "POST", &id, tok, INITIALIZED);
    assert!((200..300).contains(&status), "{resp}");
    id
}

const PING: &str = r#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#;
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

#[test]
fn another_principal_cannot_use_or_end_a_session() {
    let e = Env::init();
    let (alice, bob) = (token(&e, "user:alice"), token(&e, "user:bob"));
    let s = HttpServer::start(&e, &[]);
    let id = open_session(&s, &alice);
    let (status, resp) = send(&s, "POST", &id, &alice, PING);
    assert_eq!(status, 200, "{resp}");
    assert!(resp.contains("\"result\""), "{resp}");
    for method in ["POST", "GET", "DELETE"] {
        let body = if method == "POST" { PING } else { "" };
        let (status, resp) = send(&s, method, &id, &bob, body);
        assert_eq!(status, 404, "{method} as bob: {resp}");
    }
    // The owner's session is still there, and the owner may end it.
    let (status, resp) = send(&s, "POST", &id, &alice, PING);
    assert_eq!(status, 200, "{resp}");
    let (status, resp) = send(&s, "DELETE", &id, &alice, "");
    assert!((200..300).contains(&status), "{resp}");
    let (status, resp) = send(&s, "POST", &id, &alice, PING);
    assert_eq!(status, 404, "{resp}");
    // Bob's own session works.
    let own = open_session(&s, &bob);
    let (status, resp) = send(&s, "POST", &own, &bob, PING);
    assert_eq!(status, 200, "{resp}");
}

/// The bounds of src/cli/commands/mcp/sessions.rs.
const PER_PRINCIPAL: usize = 64;
const IN_ALL: usize = 1024;

/// Whether the session `id` still answers a ping of its owner.
fn alive(s: &HttpServer, id: &str, tok: &str) -> bool {
    let (status, resp) = send(s, "POST", id, tok, PING);
    assert!(status == 200 || status == 404, "{resp}");
    status == 200
}

#[test]
fn one_principal_keeps_a_bounded_number_of_sessions_the_least_recently_used_ended_first() {
    let e = Env::init();
    let (alice, bob) = (token(&e, "user:alice"), token(&e, "user:bob"));
    let s = HttpServer::start(&e, &[]);
    let bobs = open_session(&s, &bob);
    let (first, used) = (open_session(&s, &alice), open_session(&s, &alice));
    let mut newest = String::new();
    for i in 0..3 * PER_PRINCIPAL {
        newest = initialize(&s, &alice);
        if i % 16 == 0 {
            assert!(alive(&s, &used, &alice), "a session in use was ended");
        }
    }
    assert!(
        !alive(&s, &first, &alice),
        "the least recently used session is kept"
    );
    assert!(alive(&s, &used, &alice));
    assert!(alive(&s, &newest, &alice));
    assert!(
        alive(&s, &bobs, &bob),
        "another principal's session was ended"
    );
}

#[test]
fn the_server_keeps_a_bounded_number_of_sessions_in_all() {
    let e = Env::init();
    let bob = token(&e, "user:bob");
    let s = HttpServer::start(&e, &[]);
    let oldest = open_session(&s, &bob);
    let next = open_session(&s, &bob);
    for n in 0..IN_ALL / PER_PRINCIPAL {
        let tok = token(&e, &format!("user:p{n}"));
        for _ in 0..PER_PRINCIPAL {
            initialize(&s, &tok);
        }
    }
    // 1,024 others opened since: the two oldest ended.
    assert!(
        !alive(&s, &oldest, &bob),
        "more than {IN_ALL} sessions kept"
    );
    assert!(!alive(&s, &next, &bob), "more than {IN_ALL} sessions kept");
    let again = open_session(&s, &bob);
    assert!(alive(&s, &again, &bob));
}

#[test]
fn the_bounds_are_flags() {
    let e = Env::init();
    let (alice, bob) = (token(&e, "user:alice"), token(&e, "user:bob"));
    let flags = ["--max-sessions-per-principal", "2", "--max-sessions", "3"];
    let s = HttpServer::start(&e, &flags);
    let a1 = open_session(&s, &alice);
    let a2 = open_session(&s, &alice);
    let a3 = open_session(&s, &alice);
    assert!(
        !alive(&s, &a1, &alice),
        "a third session of one principal kept the first"
    );
    let b1 = open_session(&s, &bob);
    let b2 = open_session(&s, &bob);
    assert!(
        !alive(&s, &a2, &alice),
        "a fourth session in all kept the least recently used"
    );
    for (id, tok) in [(&a3, &alice), (&b1, &bob), (&b2, &bob)] {
        assert!(alive(&s, id, tok), "{id}");
    }
}
