//! `somna mcp --http` cannot be starved before authentication (issue 27, point 2): a few
//! thousand sockets that send half a request head and then nothing neither stop a token holder
//! from being served nor pile up in the server (it holds at most its connection cap), and a
//! half-open socket is closed by the server after the authentication timeout.
//!
//! Nor by token holders (issue 52, point 2: 512 keep-alive connections of one token held every
//! slot, and revoking the token changed nothing): one token authenticates at most 32
//! connections (another is refused with 429 and closed), and a connection whose token was
//! revoked is answered 401 at its next request and closed.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::mcp::{initialize_body, status_of, token, token_and_id, HttpServer};
use crate::common::Env;

/// The server's connection cap (src/cli/commands/mcp/guard.rs), with room for the
/// descriptors every process holds (the store, stdio, the listener, the runtime).
const MOST_DESCRIPTORS: usize = 512 + 64;

/// A socket that sent the start of a request head and nothing more.
fn half_open(s: &HttpServer) -> TcpStream {
    let mut t = TcpStream::connect(&s.addr).expect("connect");
    t.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .expect("send");
    t
}

/// How many descriptors the server process holds.
fn descriptors(s: &HttpServer) -> usize {
    std::fs::read_dir(format!("/proc/{}/fd", s.child.id()))
        .map(|d| d.count())
        .unwrap_or(0)
}

#[test]
fn half_open_sockets_are_shed_and_token_holders_served() {
    let e = Env::init();
    let tok = token(&e, "user:alice");
    let s = HttpServer::start(&e, &[]);
    let auth = format!("Bearer {tok}");
    // An authenticated client first, on a connection it keeps.
    let (status, resp) = s.post(&[("Authorization", &auth)], &initialize_body());
    assert_eq!(status, 200, "{resp}");
    let flood: Vec<TcpStream> = (0..3_000).map(|_| half_open(&s)).collect();
    // A token holder who connects after the flood is served.
    let (status, resp) = s.post(&[("Authorization", &auth)], &initialize_body());
    assert_eq!(status, 200, "{resp}");
    let held = descriptors(&s);
    assert!(
        held < MOST_DESCRIPTORS,
        "the server holds {held} descriptors"
    );
    drop(flood);
}

#[test]
fn a_half_open_socket_is_closed_by_the_server() {
    let e = Env::init();
    let s = HttpServer::start(&e, &[]);
    let mut t = half_open(&s);
    // The authentication timeout is 10 s; a server that never closes leaves this read waiting
    // until the generous bound below, and the test fails.
    t.set_read_timeout(Some(Duration::from_secs(120))).unwrap();
    let mut buf = [0u8; 64];
    match t.read(&mut buf) {
        // Closed (0), or an error status before closing.
        Ok(n) => assert!(n == 0 || buf.starts_with(b"HTTP/1.1 4"), "{:?}", &buf[..n]),
        Err(e) => assert!(
            !matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ),
            "the server kept the socket open: {e}"
        ),
    }
}

/// The server's cap of connections one token authenticates (src/cli/commands/mcp/guard.rs).
const PER_TOKEN: usize = 32;

/// A `ping` outside any session on a kept-alive connection, as the holder of `tok`; the status
/// and the answer, read to its end (a `Content-Length` body or a chunked one).
fn ping(c: &mut TcpStream, tok: &str) -> (u16, String) {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let req = format!(
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nAuthorization: Bearer {tok}\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    c.write_all(req.as_bytes()).expect("send");
    let mut resp = Vec::new();
    let mut buf = [0u8; 4096];
    while !answered(&resp) {
        match c.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => resp.extend_from_slice(&buf[..n]),
        }
    }
    let text = String::from_utf8_lossy(&resp).into_owned();
    (status_of(&text), text)
}

/// Whether `resp` holds a whole answer.
fn answered(resp: &[u8]) -> bool {
    let text = String::from_utf8_lossy(resp);
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return false;
    };
    let length = head.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.eq_ignore_ascii_case("content-length")
            .then(|| v.trim().parse::<usize>().ok())?
    });
    match length {
        Some(n) => body.len() >= n,
        None => body.ends_with("0\r\n\r\n"),
    }
}

/// Whether the server closed `c` (rather than keeping it open until the read times out).
fn closed(c: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    match c.read(&mut buf) {
        Ok(n) => n == 0,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

#[test]
fn one_token_holds_a_bounded_number_of_connections_and_a_revoked_one_is_closed() {
    let e = Env::init();
    let (hog, id) = token_and_id(&e, "user:hog");
    let admin = token(&e, "admin");
    let s = HttpServer::start(&e, &[]);
    let mut held: Vec<TcpStream> = (0..PER_TOKEN)
        .map(|_| {
            let mut c = s.connect();
            let (status, resp) = ping(&mut c, &hog);
            assert!(status != 401 && status != 429 && status != 0, "{resp}");
            c
        })
        .collect();
    let mut extra = s.connect();
    let (status, resp) = ping(&mut extra, &hog);
    assert_eq!(status, 429, "{resp}");
    assert!(closed(&mut extra), "a connection beyond the cap was kept");
    // Another token's holder is served, on a new connection and on a kept one.
    let auth = format!("Bearer {admin}");
    let (status, resp) = s.post(&[("Authorization", &auth)], &initialize_body());
    assert_eq!(status, 200, "{resp}");
    let mut kept = s.connect();
    let (status, resp) = ping(&mut kept, &admin);
    assert!(status != 401 && status != 429 && status != 0, "{resp}");
    e.ok(&["token", "revoke", &id]);
    let (status, resp) = ping(&mut held[0], &hog);
    assert_eq!(status, 401, "{resp}");
    assert!(
        closed(&mut held[0]),
        "a revoked token's connection was kept"
    );
    // Its other connections are shed at their next request too, and the admin's stays.
    let (status, resp) = ping(&mut held[1], &hog);
    assert_eq!(status, 401, "{resp}");
    let (status, resp) = ping(&mut kept, &admin);
    assert!(status != 401 && status != 429 && status != 0, "{resp}");
}
