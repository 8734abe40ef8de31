//! A long-lived process (an MCP server, a Python `Store`) keeps one handle: after the server
//! restarts, the same handle reads and writes again by itself, its dead pooled connections
//! replaced; a read issued while the server is down waits for it (within the busy timeout)
//! instead of failing. Needs the server binaries (skipped with the server tier, failed under CI
//! without them).

use std::time::Duration;

use somna::{NewMemory, Options, Store};
use somna_testkit::pg::{fresh_schema_url, test_server_url, PgServer};

#[test]
fn one_handle_survives_a_server_restart_and_a_read_waits_for_it() {
    if test_server_url().is_none() {
        return;
    }
    let server = PgServer::start(true).expect("start a server");
    let url = fresh_schema_url(server.url());
    let opts = Options::default().busy_timeout(Duration::from_secs(60));
    let store = Store::create_with(&url, opts).expect("create");
    assert_eq!(
        store
            .note("default", NewMemory::new("before"))
            .expect("note"),
        0
    );

    // Stopped and started again: the handle's pooled connection is dead.
    server.stop().expect("stop");
    server.restart().expect("restart");
    assert_eq!(store.count("default").expect("a read after the restart"), 1);
    assert_eq!(
        store
            .note("default", NewMemory::new("after"))
            .expect("note"),
        1
    );

    // Down while a read starts: the read waits until the server is back.
    server.stop().expect("stop");
    let back = std::thread::scope(|s| {
        let restarter = s.spawn(|| {
            std::thread::sleep(Duration::from_millis(500));
            server.restart()
        });
        let n = store.count("default");
        restarter
            .join()
            .expect("the restarting thread")
            .expect("restart");
        n
    });
    assert_eq!(back.expect("a read while the server was down"), 2);
}
