//! The command line's input edges (issue 52, points 11 to 16): a value at the edge of what an
//! option takes either works as documented or is refused with exit 2 and a message that says
//! what to do, never a busy store that is idle, a loop, a panic or a bare I/O error.

use crate::common::{run_raw, Env};

#[test]
fn a_busy_timeout_of_0_tries_once_and_reads_an_idle_store() {
    let e = Env::init();
    e.ok(&["note", "written before"]);
    for _ in 0..5 {
        let out = e.ok(&["--busy-timeout-ms", "0", "wake"]);
        assert!(out.contains("written before"), "{out}");
        e.ok(&["--busy-timeout-ms", "0", "note", "written with no wait"]);
    }
    let mut c = e.cmd();
    c.env("SOMNA_BUSY_TIMEOUT_MS", "0")
        .args(["recall", "no wait"]);
    let r = run_raw(c, None);
    assert_eq!(r.code, 0, "{r:?}");
}
