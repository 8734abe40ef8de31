//! PostgreSQL servers for the server tests, through `scripts/pg-server.sh` (the one place that
//! knows how to start, kill and replicate a throwaway PostgreSQL 15 on 127.0.0.1).
//!
//! - [`test_server_url`] is the gate of every server test: the server named by `SOMNA_TEST_PG`,
//!   `None` (skip) when it is unset, and a panic when it is unset under CI (`CI` set), so that
//!   CI can never skip the server tier silently. `scripts/pg-server.sh run -- cargo test ...`
//!   sets it.
//! - [`fresh_schema_url`] names a new, unique schema in a server URL, so that tests sharing one
//!   server never see each other's stores.
//! - [`PgServer`] is a private server in its own temporary directory, for the tests that kill,
//!   restart, replicate or promote one: [`PgServer::start`], [`PgServer::kill9`],
//!   [`PgServer::restart`], [`PgServer::standby`], [`PgServer::promote`],
//!   [`PgServer::walsender_pid`]. Dropping it stops the server and removes the directory.
//!
//! Run as root, the script runs every server binary as the `postgres` user; the temporary
//! directory is made under [`std::env::temp_dir`], which that user must be able to enter.

use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// The environment variable that names the server of the server tests.
pub const TEST_PG_ENV: &str = "SOMNA_TEST_PG";

/// The script this module drives (`scripts/pg-server.sh` of the repository).
pub const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../scripts/pg-server.sh");

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// The server the server tests run against: `SOMNA_TEST_PG` when it is set (and not empty);
/// `None` when it is unset, so that the test skips (a line on stderr says so).
///
/// # Panics
///
/// When `SOMNA_TEST_PG` is unset and `CI` is set: CI must never skip the server tier
/// silently; run the tests under `scripts/pg-server.sh run -- ...`.
#[allow(clippy::panic)]
pub fn test_server_url() -> Option<String> {
    let url = std::env::var(TEST_PG_ENV).ok();
    let ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
    match gate(url, ci) {
        Ok(Some(url)) => Some(url),
        Ok(None) => {
            eprintln!(
                "skipped: {TEST_PG_ENV} is not set (run under `scripts/pg-server.sh run -- cargo test ...`)"
            );
            None
        }
        Err(message) => panic!("{message}"),
    }
}

/// The decision of [`test_server_url`], from the value of `SOMNA_TEST_PG` and whether `CI` is
/// set: the URL, a skip, or the message of the failure.
pub fn gate(url: Option<String>, ci: bool) -> Result<Option<String>, String> {
    match url {
        Some(url) if !url.trim().is_empty() => Ok(Some(url)),
        _ if ci => Err(format!(
            "{TEST_PG_ENV} is not set but CI is: the PostgreSQL tests must run in CI, never skip. \
             Run the tests under `scripts/pg-server.sh run -- cargo test ...` (it starts a \
             throwaway server and sets {TEST_PG_ENV})"
        )),
        _ => Ok(None),
    }
}

/// A unique schema name: `t_<pid>_<counter>_<nanoseconds>` (lower case, under PostgreSQL's 63
/// bytes).
pub fn fresh_schema_name() -> String {
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("t_{}_{n}_{nanos}", std::process::id())
}

/// `base` with the query parameter `schema=<a fresh schema name>` added (with `?` or `&`, as
/// the URL needs): a store of its own on the server of `base` (`somna init` creates the
/// schema).
pub fn fresh_schema_url(base: &str) -> String {
    with_query(base, "schema", &fresh_schema_name())
}

/// `url` with `key=value` added to its query string.
pub fn with_query(url: &str, key: &str, value: &str) -> String {
    let (url, fragment) = match url.find('#') {
        Some(i) => url.split_at(i),
        None => (url, ""),
    };
    let sep = if url.ends_with('?') || url.ends_with('&') {
        ""
    } else if url.contains('?') {
        "&"
    } else {
        "?"
    };
    format!("{url}{sep}{key}={value}{fragment}")
}

/// Whether the PostgreSQL server binaries are installed (`PGBIN`, by default
/// `/usr/lib/postgresql/15/bin`, holds `initdb` and `pg_ctl`).
pub fn binaries_present() -> bool {
    let bin = std::env::var_os("PGBIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/lib/postgresql/15/bin"));
    bin.join("initdb").is_file() && bin.join("pg_ctl").is_file()
}

/// Runs `pg-server.sh ARGS`; its stdout, trimmed, or an error carrying its stderr.
fn script<S: AsRef<OsStr>>(args: &[S]) -> io::Result<String> {
    let out = Command::new("bash")
        .arg(SCRIPT)
        .args(args)
        .stdin(Stdio::null())
        .output()?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        let shown: Vec<String> = args
            .iter()
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        Err(io::Error::other(format!(
            "pg-server.sh {} failed ({}): {}{}",
            shown.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim(),
        )))
    }
}

/// A new, empty directory under the temporary directory, unique to this call.
fn fresh_dir(what: &str) -> io::Result<PathBuf> {
    let dir = std::env::temp_dir().join(format!("somna-{what}-{}", fresh_schema_name()));
    std::fs::create_dir(&dir)?;
    Ok(dir)
}

/// A private PostgreSQL server on 127.0.0.1 in its own temporary directory (started by
/// `scripts/pg-server.sh`). Dropping it stops the server and removes the directory.
#[derive(Debug)]
pub struct PgServer {
    dir: PathBuf,
    url: String,
    port: u16,
}

impl PgServer {
    /// Starts a new server (initdb, then start on a free port; about 1 s). `fast` turns
    /// durability off (`fsync`, `synchronous_commit`, `full_page_writes`), for tests that commit
    /// a lot and never crash the server; the crash and failover tests want `false`.
    pub fn start(fast: bool) -> io::Result<PgServer> {
        let dir = fresh_dir("pg")?;
        let mut args: Vec<&OsStr> = vec![OsStr::new("start"), dir.as_os_str()];
        if fast {
            args.push(OsStr::new("--fast"));
        }
        match script(&args) {
            Ok(url) => PgServer::adopt(dir, url),
            Err(e) => {
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    /// The server whose directory `dir` is, started with URL `url` (stopped and removed on
    /// drop).
    fn adopt(dir: PathBuf, url: String) -> io::Result<PgServer> {
        let port = std::fs::read_to_string(dir.join("port"))?
            .trim()
            .parse()
            .map_err(|e| io::Error::other(format!("{}/port: {e}", dir.display())))?;
        Ok(PgServer { dir, url, port })
    }

    /// `postgresql://postgres@127.0.0.1:PORT/postgres`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The TCP port it listens on (127.0.0.1 only); it stays the same across restarts.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Its directory (`data/`, `log`, `port`, `pid`).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The pid of its postmaster (as of the last start).
    pub fn pid(&self) -> io::Result<u32> {
        std::fs::read_to_string(self.dir.join("pid"))?
            .trim()
            .parse()
            .map_err(|e| io::Error::other(format!("{}/pid: {e}", self.dir.display())))
    }

    /// The last `lines` lines of the server's log, for failure messages.
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(self.dir.join("log")).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        let skip = all.len().saturating_sub(lines);
        all.into_iter().skip(skip).collect::<Vec<_>>().join("\n")
    }

    /// SIGKILL of the postmaster and all its children; returns once the postmaster is gone
    /// (a killed postmaster can stay a zombie for about 2 s).
    pub fn kill9(&self) -> io::Result<()> {
        script(&[OsStr::new("kill"), self.dir.as_os_str()]).map(drop)
    }

    /// Starts it again on the same data directory and port, after [`PgServer::kill9`] or
    /// [`PgServer::stop`] (crash recovery runs after a kill).
    pub fn restart(&self) -> io::Result<()> {
        script(&[OsStr::new("restart"), self.dir.as_os_str()]).map(drop)
    }

    /// Fast shutdown (SIGINT) by pid, waiting until the postmaster has removed its pid file.
    pub fn stop(&self) -> io::Result<()> {
        script(&[OsStr::new("stop"), self.dir.as_os_str()]).map(drop)
    }

    /// A streaming standby of this server (`pg_basebackup -R -X stream`), on its own port and
    /// directory, streaming when this returns. With `sync` it is this server's synchronous
    /// standby (`synchronous_standby_names`), and a commit on this server returns only once the
    /// standby has flushed it.
    pub fn standby(&self, sync: bool) -> io::Result<PgServer> {
        let dir = fresh_dir("pgstandby")?;
        let mode = if sync { "--sync" } else { "--async" };
        match script(&[
            OsStr::new("standby"),
            self.dir.as_os_str(),
            dir.as_os_str(),
            OsStr::new(mode),
        ]) {
            Ok(url) => PgServer::adopt(dir, url),
            Err(e) => {
                let _ = script(&[OsStr::new("stop"), dir.as_os_str()]);
                let _ = std::fs::remove_dir_all(&dir);
                Err(e)
            }
        }
    }

    /// Promotes this standby; returns once it accepts writes.
    pub fn promote(&self) -> io::Result<()> {
        script(&[OsStr::new("promote"), self.dir.as_os_str()]).map(drop)
    }

    /// The pid of this primary's walsender (the process that streams to its standby), for
    /// SIGSTOP/SIGCONT stalls that make an asynchronous standby lag.
    pub fn walsender_pid(&self) -> io::Result<u32> {
        let out = script(&[OsStr::new("walsender-pid"), self.dir.as_os_str()])?;
        out.parse()
            .map_err(|e| io::Error::other(format!("walsender pid {out:?}: {e}")))
    }

    /// Runs `sql` with psql (unaligned, tuples only); its output, trimmed.
    pub fn psql(&self, sql: &str) -> io::Result<String> {
        script(&[
            OsStr::new("psql"),
            self.dir.as_os_str(),
            OsStr::new("-q"),
            OsStr::new("-At"),
            OsStr::new("-v"),
            OsStr::new("ON_ERROR_STOP=1"),
            OsStr::new("-c"),
            OsStr::new(sql),
        ])
    }

    /// A multi-host URL naming `servers` in order, for a client that must find the one that
    /// accepts writes:
    /// `postgresql://postgres@127.0.0.1:P1,127.0.0.1:P2/postgres?target_session_attrs=read-write`.
    pub fn multi_host_url(servers: &[&PgServer]) -> String {
        let hosts: Vec<String> = servers
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        format!(
            "postgresql://postgres@{}/postgres?target_session_attrs=read-write",
            hosts.join(",")
        )
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            eprintln!("PgServer: {e}");
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn the_gate_skips_locally_and_fails_under_ci() {
        let url = "postgresql://postgres@127.0.0.1:5/postgres".to_string();
        assert_eq!(gate(Some(url.clone()), false), Ok(Some(url.clone())));
        assert_eq!(gate(Some(url.clone()), true), Ok(Some(url)));
        assert_eq!(gate(None, false), Ok(None));
        assert_eq!(gate(Some("  ".into()), false), Ok(None));
        let e = gate(None, true).expect_err("CI without a server must fail");
        assert!(
            e.contains("SOMNA_TEST_PG") && e.contains("pg-server.sh run"),
            "{e}"
        );
        assert!(gate(Some(String::new()), true).is_err());
    }

    #[test]
    fn schema_urls_are_unique_and_well_formed() {
        let a = fresh_schema_url("postgresql://postgres@127.0.0.1:5/postgres");
        let b = fresh_schema_url("postgresql://postgres@127.0.0.1:5/postgres");
        assert_ne!(a, b);
        assert!(
            a.starts_with("postgresql://postgres@127.0.0.1:5/postgres?schema=t_"),
            "{a}"
        );
        let name = a.rsplit('=').next().expect("a value");
        assert!(name.len() < 63, "{name}");
        assert!(name
            .bytes()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == b'_'));
        let c = fresh_schema_url("postgresql://h:1,h:2/db?target_session_attrs=read-write");
        assert!(
            c.starts_with("postgresql://h:1,h:2/db?target_session_attrs=read-write&schema=t_"),
            "{c}"
        );
        assert_eq!(with_query("u?", "k", "v"), "u?k=v");
        assert_eq!(with_query("u?a=1&", "k", "v"), "u?a=1&k=v");
        assert_eq!(with_query("u#f", "k", "v"), "u?k=v#f");
    }

    /// Starts, answers, survives a SIGKILL with its data, answers again after a restart.
    #[test]
    fn a_server_starts_is_killed_and_restarts_with_its_data() {
        if test_server_url().is_none() {
            return;
        }
        let t = Instant::now();
        let pg = PgServer::start(false).expect("start a server");
        let started = t.elapsed();
        assert!(pg.url().ends_with(&format!(":{}/postgres", pg.port())));
        assert_eq!(pg.psql("select 1").expect("select 1"), "1");
        assert_eq!(pg.psql("show fsync").expect("show fsync"), "on");
        pg.psql("create table t (x int primary key); insert into t values (1), (2)")
            .expect("create and insert");
        let old = pg.pid().expect("pid");
        let t = Instant::now();
        pg.kill9().expect("kill -9");
        let killed = t.elapsed();
        assert!(pg.psql("select 1").is_err(), "a killed server answered");
        let t = Instant::now();
        pg.restart().expect("restart");
        let restarted = t.elapsed();
        assert_ne!(pg.pid().expect("pid"), old);
        assert_eq!(
            pg.psql("select count(*) from t").expect("count"),
            "2",
            "{}",
            pg.log_tail(20)
        );
        eprintln!("start {started:?}, kill -9 {killed:?}, restart {restarted:?}");
        let dir = pg.dir().to_path_buf();
        drop(pg);
        assert!(!dir.exists(), "drop leaves {}", dir.display());
    }

    /// A synchronous standby holds every commit of its primary; promoted after the primary is
    /// killed, it accepts writes; a multi-host URL names both.
    #[test]
    fn a_sync_standby_is_promoted_after_its_primary_is_killed() {
        if test_server_url().is_none() {
            return;
        }
        let primary = PgServer::start(false).expect("start the primary");
        let t = Instant::now();
        let standby = primary.standby(true).expect("start a sync standby");
        let setup = t.elapsed();
        assert_eq!(
            primary
                .psql("select sync_state || '/' || state from pg_stat_replication")
                .expect("pg_stat_replication"),
            "sync/streaming"
        );
        assert_eq!(standby.psql("select pg_is_in_recovery()").expect("q"), "t");
        let walsender = primary.walsender_pid().expect("walsender pid");
        assert!(Path::new(&format!("/proc/{walsender}")).exists());
        primary
            .psql(
                "create table t (x int primary key); insert into t select generate_series(1, 100)",
            )
            .expect("insert on the primary");
        primary.kill9().expect("kill the primary");
        let t = Instant::now();
        standby.promote().expect("promote");
        let promoted = t.elapsed();
        assert_eq!(standby.psql("select pg_is_in_recovery()").expect("q"), "f");
        assert_eq!(
            standby.psql("select count(*) from t").expect("count"),
            "100"
        );
        standby
            .psql("insert into t values (101)")
            .expect("the promoted standby accepts writes");
        let url = PgServer::multi_host_url(&[&primary, &standby]);
        assert_eq!(
            url,
            format!(
                "postgresql://postgres@127.0.0.1:{},127.0.0.1:{}/postgres?target_session_attrs=read-write",
                primary.port(),
                standby.port()
            )
        );
        eprintln!("standby set up in {setup:?}, promoted in {promoted:?}");
    }
}
