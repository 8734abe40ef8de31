//! Every input somna reads is bounded (issue 27, point 5): a session folder, an import file or
//! an OptMem `LOG.txt` that is a FIFO, a device (`/dev/zero`) or a link to one is refused with a
//! clear error before it is read (never a hang, never an unbounded read), and stdin longer than
//! the cap (256 MiB) is refused after the cap.

use std::io::Write;
use std::os::unix::fs::symlink;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::common::{Env, Raw};

/// Runs `somna ARGS`, killing it (and failing) when it has not exited within a minute.
fn bounded(e: &Env, args: &[&str]) -> Raw {
    let mut c = e.cmd();
    c.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawn");
    assert!(
        crate::common::wait_within(&mut child, Duration::from_secs(60)).is_some(),
        "somna {args:?} was still running after a minute"
    );
    let o = child.wait_with_output().expect("output");
    Raw {
        code: o.status.code().unwrap_or(-1),
        out: o.stdout,
        err: o.stderr,
    }
}

fn refused(r: &Raw, says: &str) {
    let err = String::from_utf8_lossy(&r.err);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(err.contains(says), "{err}");
}

fn mkfifo(p: &std::path::Path) {
    assert!(Command::new("mkfifo")
        .arg(p)
        .status()
        .expect("mkfifo")
        .success());
}

#[test]
fn a_session_folder_with_dev_zero_or_a_fifo_is_refused() {
    let e = Env::init();
    let dir = e.dir.path().join("sessions");
    std::fs::create_dir(&dir).unwrap();
    symlink("/dev/zero", dir.join("zero.json")).unwrap();
    let d = dir.to_str().unwrap();
    refused(
        &bounded(&e, &["session", "import-dir", d]),
        "not a regular file",
    );
    std::fs::remove_file(dir.join("zero.json")).unwrap();
    mkfifo(&dir.join("fifo.json"));
    refused(
        &bounded(&e, &["session", "import-dir", d]),
        "not a regular file",
    );
}

#[test]
fn imports_of_devices_and_fifos_are_refused() {
    let e = Env::init();
    refused(
        &bounded(&e, &["import", "--jsonl", "/dev/zero"]),
        "not a regular file",
    );
    let fifo = e.dir.path().join("in.jsonl");
    mkfifo(&fifo);
    refused(
        &bounded(&e, &["import", "--jsonl", fifo.to_str().unwrap()]),
        "not a regular file",
    );
    let om = e.dir.path().join("om");
    std::fs::create_dir(&om).unwrap();
    symlink("/dev/zero", om.join("LOG.txt")).unwrap();
    let r = bounded(
        &e,
        &["--scope", "om", "import", "--optmem", om.to_str().unwrap()],
    );
    refused(&r, "not a regular file");
}

#[test]
fn stdin_past_the_cap_is_refused() {
    let e = Env::init();
    let mut c = e.cmd();
    c.args(["session", "save", "big"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().expect("spawn");
    let mut stdin = child.stdin.take().expect("stdin");
    // 300 MiB of blanks, written a MiB at a time until somna stops reading.
    let writer = std::thread::spawn(move || {
        let chunk = vec![b' '; 1 << 20];
        for _ in 0..300 {
            if stdin.write_all(&chunk).is_err() {
                break;
            }
        }
    });
    let o = child.wait_with_output().expect("output");
    let _ = writer.join();
    let r = Raw {
        code: o.status.code().unwrap_or(-1),
        out: o.stdout,
        err: o.stderr,
    };
    refused(&r, "more than 256 MiB");
}
