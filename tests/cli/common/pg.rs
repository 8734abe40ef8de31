//! Helpers of the PostgreSQL fault tests (`pg_*.rs`): a client host (the real binary with its
//! own working directory and HOME, the store named by `--db URL`), commands bounded in time,
//! and readers of what a store holds (`export`, `session load`).

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use super::BIN;

/// How long any single command may run before it is killed (and counted as an unknown
/// outcome): longer than the busy timeout the tests pass.
pub const COMMAND_LIMIT: Duration = Duration::from_secs(60);

/// The busy timeout the fault tests give clients, so that they wait out a server restart or a
/// failover.
pub const BUSY_TIMEOUT_MS: &str = "15000";

/// What one bounded run produced.
#[derive(Clone)]
pub struct Outcome {
    /// The command line, for messages.
    pub what: String,
    /// The exit code; `None` when killed by a signal (or by the time limit).
    pub code: Option<i32>,
    /// Whether the time limit killed it.
    pub timed_out: bool,
    pub out: String,
    pub err: String,
    pub took: Duration,
}

impl Outcome {
    pub fn ok(&self) -> bool {
        self.code == Some(0)
    }
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "`{}` -> {} in {:?}\n  stdout: {}\n  stderr: {}",
            self.what,
            match (self.code, self.timed_out) {
                (_, true) => "timed out (killed)".to_string(),
                (Some(c), _) => format!("exit {c}"),
                (None, _) => "killed by a signal".to_string(),
            },
            self.took,
            self.out.trim_end(),
            self.err.trim_end()
        )
    }
}

/// Runs `c` with `input` on stdin (null without), killing it after `limit`.
pub fn run_bounded(mut c: Command, input: Option<Vec<u8>>, limit: Duration) -> Outcome {
    let what = format!("{c:?}");
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    c.stdin(if input.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let start = Instant::now();
    let mut child = c.spawn().expect("spawn somna");
    if let Some(bytes) = input {
        let mut stdin = child.stdin.take().expect("stdin");
        std::thread::spawn(move || {
            let _ = stdin.write_all(&bytes);
        });
    }
    let pid = child.id();
    let mut stdout = child.stdout.take().expect("stdout");
    let mut stderr = child.stderr.take().expect("stderr");
    let out_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stdout.read_to_end(&mut s);
        s
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = Vec::new();
        let _ = stderr.read_to_end(&mut s);
        s
    });
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait());
    });
    let (status, timed_out) = match rx.recv_timeout(limit) {
        Ok(s) => (s, false),
        Err(_) => {
            let _ = Command::new("kill")
                .args(["-KILL", &pid.to_string()])
                .status();
            (rx.recv().expect("the waiter answers"), true)
        }
    };
    let status = status.expect("wait somna");
    Outcome {
        what,
        code: status.code(),
        timed_out,
        out: String::from_utf8_lossy(&out_reader.join().expect("stdout reader")).into_owned(),
        err: String::from_utf8_lossy(&err_reader.join().expect("stderr reader")).into_owned(),
        took: start.elapsed(),
    }
}

/// One client machine: a working directory that is also its HOME, and the store URL.
pub struct Host {
    pub home: tempfile::TempDir,
    pub url: String,
    /// Extra environment for every command (for example `SOMNA_PG_FAULT_EVERY`).
    pub env: Vec<(String, String)>,
}

impl Host {
    pub fn new(url: &str) -> Host {
        Host {
            home: tempfile::tempdir().expect("tempdir"),
            url: url.to_string(),
            env: Vec::new(),
        }
    }

    /// `somna --db URL --busy-timeout-ms 15000 ARGS` in a clean environment: no `SOMNA_*`
    /// from the caller, HOME and the working directory this host's own. `SOMNA_TEST_BIN`
    /// names another binary to run instead of this build's (to check the harness itself).
    pub fn cmd(&self, args: &[&str]) -> Command {
        let bin = std::env::var_os("SOMNA_TEST_BIN").unwrap_or_else(|| BIN.into());
        let mut c = Command::new(bin);
        c.env_remove("SOMNA_DB")
            .env_remove("SOMNA_SCOPE")
            .env_remove("SOMNA_PRINCIPAL")
            .env_remove("SOMNA_BUSY_TIMEOUT_MS")
            .env_remove("SOMNA_PG_FAULT_EVERY")
            .env_remove("SOMNA_TEST_PG")
            .env("HOME", self.home.path())
            .current_dir(self.home.path())
            .args(["--db", &self.url, "--busy-timeout-ms", BUSY_TIMEOUT_MS])
            .args(args);
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    /// Runs `somna ARGS` bounded by [`COMMAND_LIMIT`].
    pub fn run(&self, args: &[&str], input: Option<&str>) -> Outcome {
        run_bounded(
            self.cmd(args),
            input.map(|s| s.as_bytes().to_vec()),
            COMMAND_LIMIT,
        )
    }

    /// Runs `somna ARGS`; panics (showing the run) unless it exits 0; returns stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args, None);
        assert!(o.ok(), "{o:?}");
        o.out
    }

    /// Every memory of the store (all scopes), from `somna export`: (scope, id) -> text.
    pub fn memories(&self) -> BTreeMap<(String, u64), String> {
        let out = self.ok(&["export"]);
        let mut all = BTreeMap::new();
        for line in out.lines() {
            let v: serde_json::Value =
                serde_json::from_str(line).unwrap_or_else(|e| panic!("export line {line:?}: {e}"));
            if v["type"] != "memory" {
                continue;
            }
            let scope = v["scope"].as_str().expect("a scope").to_string();
            let id = v["id"].as_u64().expect("an id");
            let text = v["text"].as_str().expect("a text").to_string();
            assert!(
                all.insert((scope.clone(), id), text).is_none(),
                "export repeats {scope} #{id}"
            );
        }
        all
    }

    /// The memories of scope `default`: id -> text.
    pub fn default_memories(&self) -> BTreeMap<u64, String> {
        self.memories()
            .into_iter()
            .filter(|((scope, _), _)| scope == "default")
            .map(|((_, id), text)| (id, text))
            .collect()
    }

    /// The `content` of every message of session `id` (`somna session load`), in order.
    pub fn session_contents(&self, id: &str) -> Vec<String> {
        let out = self.ok(&["session", "load", id]);
        let v: serde_json::Value = serde_json::from_str(out.trim())
            .unwrap_or_else(|e| panic!("session load {out:?}: {e}"));
        v.as_array()
            .expect("an array")
            .iter()
            .map(|m| m["content"].as_str().expect("a content").to_string())
            .collect()
    }

    /// Asserts that `somna verify` exits 0.
    pub fn verify(&self) {
        let o = self.run(&["verify"], None);
        assert!(o.ok(), "verify failed: {o:?}");
    }
}

/// The id of `Saved as #N.` on the first line of `out`.
pub fn saved_id(out: &str) -> Option<u64> {
    out.lines()
        .next()?
        .strip_prefix("Saved as #")?
        .strip_suffix('.')?
        .parse()
        .ok()
}

/// Sends `signal` (`STOP`, `CONT`, ...) to `pid` with kill(1).
pub fn signal(pid: u32, signal: &str) {
    let s = Command::new("kill")
        .arg(format!("-{signal}"))
        .arg(pid.to_string())
        .status()
        .expect("run kill");
    assert!(s.success(), "kill -{signal} {pid} failed");
}

/// Prints up to `max` of `runs` on stderr, under `title`.
pub fn show(title: &str, runs: &[Outcome], max: usize) {
    if runs.is_empty() {
        return;
    }
    eprintln!("{title}: {} (showing {})", runs.len(), runs.len().min(max));
    for o in runs.iter().take(max) {
        eprintln!("{o:?}");
    }
}
