//! Helpers shared by the tests that run the real `somna` binary: a temporary store path, the
//! binary with a clean environment, and a run that feeds stdin and collects the output.
#![allow(dead_code)]

#[cfg(feature = "mcp")]
pub mod mcp;
pub mod pg;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_somna");

/// The server URL when this run tests the server backend (`SOMNA_TEST_BACKEND=postgres`).
pub fn server() -> Option<String> {
    if std::env::var("SOMNA_TEST_BACKEND").as_deref() != Ok("postgres") {
        return None;
    }
    Some(
        std::env::var("SOMNA_TEST_PG")
            .expect("SOMNA_TEST_BACKEND=postgres needs SOMNA_TEST_PG (a postgresql:// URL)"),
    )
}

/// A temp directory holding one store path (created or not).
pub struct Env {
    pub dir: tempfile::TempDir,
    pub db: PathBuf,
}

impl Env {
    /// A fresh temp directory; the store path `memory.redb` in it does not exist yet.
    /// With `SOMNA_TEST_BACKEND=postgres` (the conformance run of `scripts/conformance.sh`)
    /// the store is a schema of its own on the server `SOMNA_TEST_PG` names instead.
    pub fn new() -> Env {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = match server() {
            Some(base) => {
                let tag: String = dir
                    .path()
                    .file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .chars()
                    .filter(char::is_ascii_alphanumeric)
                    .map(|c| c.to_ascii_lowercase())
                    .collect();
                let sep = if base.contains('?') { '&' } else { '?' };
                PathBuf::from(format!("{base}{sep}schema=c_{}_{tag}", std::process::id()))
            }
            None => dir.path().join("memory.redb"),
        };
        Env { dir, db }
    }

    /// Whether the store is on a server (see [`Env::new`]).
    pub fn on_server(&self) -> bool {
        server().is_some()
    }

    /// The binary with a clean environment: the store comes from `SOMNA_DB`, `HOME` is the
    /// temp dir, and no `SOMNA_SCOPE`, `SOMNA_PRINCIPAL` or `SOMNA_BUSY_TIMEOUT_MS` leaks in
    /// from the caller. The binary's folder comes first on `PATH`, as after `cargo install`, so
    /// the `Run:` lines name it `somna` (tests/cli/run_lines.rs covers the other cases).
    pub fn cmd(&self) -> Command {
        let mut c = Command::new(BIN);
        let dir = std::path::Path::new(BIN)
            .parent()
            .expect("the binary's folder");
        let path = match std::env::var_os("PATH") {
            Some(p) => {
                let mut dirs = vec![dir.to_path_buf()];
                dirs.extend(std::env::split_paths(&p));
                std::env::join_paths(dirs).expect("a PATH")
            }
            None => dir.as_os_str().to_owned(),
        };
        c.env_remove("SOMNA_SCOPE")
            .env_remove("SOMNA_PRINCIPAL")
            .env_remove("SOMNA_BUSY_TIMEOUT_MS")
            .env("PATH", path)
            .env("HOME", self.dir.path())
            .env("SOMNA_DB", &self.db);
        c
    }

    /// A store created by `somna init` in a fresh temp directory.
    pub fn init() -> Env {
        let e = Env::new();
        e.ok(&["init"]);
        e
    }

    /// Runs `somna ARGS` (stdin null); asserts exit 0 and returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let mut c = self.cmd();
        c.args(args);
        let r = run_raw(c, None);
        assert_eq!(r.code, 0, "somna {args:?} failed: {r:?}");
        String::from_utf8(r.out).expect("stdout is UTF-8")
    }

    /// [`Env::ok`], split into lines.
    pub fn lines(&self, args: &[&str]) -> Vec<String> {
        self.ok(args).lines().map(str::to_string).collect()
    }

    /// Everything the store holds, as text: an unchanged export means nothing was written.
    pub fn export(&self) -> String {
        self.ok(&["export"])
    }

    /// Writes `content` to a file `name` in the temp directory; returns its path.
    pub fn file(&self, name: &str, content: &[u8]) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, content).expect("write file");
        p.to_str().expect("utf8 path").to_string()
    }

    /// How the `Run:` lines of [`Env::cmd`] start: `somna --db PATH` (the store is not the
    /// default one under `HOME`, so every printed command names it).
    pub fn prefix(&self) -> String {
        format!("somna --db {}", quoted(&self.db.display().to_string()))
    }
}

/// What one run produced: the exit code (-1 when killed by a signal), stdout and stderr bytes.
pub struct Raw {
    pub code: i32,
    pub out: Vec<u8>,
    pub err: Vec<u8>,
}

impl std::fmt::Debug for Raw {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run")
            .field("code", &self.code)
            .field("out", &String::from_utf8_lossy(&self.out))
            .field("err", &String::from_utf8_lossy(&self.err))
            .finish()
    }
}

/// Waits up to `limit` for `child` to exit and returns its status; a child still running then
/// is killed and reaped, and `None` returned, so that a test fails instead of hanging.
pub fn wait_within(child: &mut std::process::Child, limit: Duration) -> Option<ExitStatus> {
    let end = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            return Some(status);
        }
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return None;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Runs `c`, writing `input` to its stdin from another thread (stdin is null without input).
pub fn run_raw(mut c: Command, input: Option<&[u8]>) -> Raw {
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = c.spawn().expect("spawn somna");
    if let Some(bytes) = input {
        let mut stdin = child.stdin.take().expect("stdin");
        let bytes = bytes.to_vec();
        std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
    }
    let o = child.wait_with_output().expect("wait somna");
    Raw {
        code: o.status.code().unwrap_or(-1),
        out: o.stdout,
        err: o.stderr,
    }
}

/// `s` as the CLI quotes it for a shell: as it is when every character is safe, else in single
/// quotes (a server URL's `?` and `&` need them).
pub fn quoted(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:@-+=,".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}
