//! `somna mcp --http` cannot be starved before authentication (issue 27, point 2): a few
//! thousand sockets that send half a request head and then nothing neither stop a token holder
//! from being served nor pile up in the server (it holds at most its connection cap), and a
//! half-open socket is closed by the server after the authentication timeout.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::mcp::{initialize_body, token, HttpServer};
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
