//! A counting TCP proxy between the bench and the server, to count the round trips of one
//! operation: it forwards bytes both ways and counts the client's Sync (`S`) and simple Query
//! (`Q`) messages. The synchronous client sends one of them per statement and waits for the
//! answer before it sends anything else (it does not pipeline), so each is one round trip.
//! Only for counting: nothing timed goes through it.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;

pub struct Proxy {
    pub port: u16,
    count: Arc<AtomicU64>,
}

impl Proxy {
    /// Listens on a free port of 127.0.0.1 and forwards every connection to `host:port`.
    pub fn start(host: &str, port: u16) -> Proxy {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind the proxy");
        let local = l.local_addr().expect("the proxy's address").port();
        let count = Arc::new(AtomicU64::new(0));
        let c = Arc::clone(&count);
        let host = host.to_string();
        thread::spawn(move || {
            for s in l.incoming() {
                let Ok(client) = s else { continue };
                let Ok(server) = TcpStream::connect((host.as_str(), port)) else {
                    continue;
                };
                let _ = client.set_nodelay(true);
                let _ = server.set_nodelay(true);
                let (cr, sw) = (
                    client.try_clone().expect("clone a socket"),
                    server.try_clone().expect("clone a socket"),
                );
                let c = Arc::clone(&c);
                thread::spawn(move || forward_counting(cr, sw, &c));
                thread::spawn(move || forward(server, client));
            }
        });
        Proxy { port: local, count }
    }

    /// Round trips so far (every connection through this proxy).
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }

    /// Round trips `f` makes.
    pub fn trips(&self, f: impl FnOnce()) -> u64 {
        let a = self.count();
        f();
        self.count() - a
    }
}

fn forward(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(Shutdown::Write);
}

/// Forwards the client's bytes, parsing the message frames: the startup message (a length, no
/// type byte), then messages of one type byte and a length that counts itself.
fn forward_counting(mut from: TcpStream, mut to: TcpStream, n: &AtomicU64) {
    let mut buf = vec![0u8; 1 << 16];
    let mut hdr: Vec<u8> = Vec::with_capacity(5);
    let mut skip = 0usize;
    let mut startup = true;
    loop {
        let k = match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(k) => k,
        };
        let mut i = 0;
        while i < k {
            if skip > 0 {
                let t = skip.min(k - i);
                skip -= t;
                i += t;
                continue;
            }
            hdr.push(buf[i]);
            i += 1;
            let need = if startup { 4 } else { 5 };
            if hdr.len() == need {
                let mut len = [0u8; 4];
                len.copy_from_slice(&hdr[need - 4..]);
                let len = u32::from_be_bytes(len) as usize;
                if !startup && (hdr[0] == b'S' || hdr[0] == b'Q') {
                    n.fetch_add(1, Ordering::SeqCst);
                }
                startup = false;
                skip = len.saturating_sub(4);
                hdr.clear();
            }
        }
        if to.write_all(&buf[..k]).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}
