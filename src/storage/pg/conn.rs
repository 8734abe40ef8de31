//! The connections to the server and the transaction loop: the connection settings, a pool of
//! idle connections, the SQL of each table, the first round trip of a transaction (its `BEGIN`
//! with what nearly every transaction reads), and the loop that runs an attempt again when the
//! server asks (a serialization failure, a deadlock, a lost connection before `COMMIT`), with
//! backoff up to the busy timeout. A connection lost during `COMMIT` is never retried blindly:
//! the commit id written in the transaction is fenced and read back ([`Server::resolve`]).
//! [`super::kv`] runs the statements of a transaction on these; [`super::engine`] opens the
//! store. docs/scale-out.md has the design and the portable SQL subset.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio_postgres::error::SqlState;
use tokio_postgres::types::Type;
use tokio_postgres::SimpleQueryMessage;

use crate::error::{Error, Result};
use crate::storage::kv::TableId;
use crate::storage::pg::client::{self, Client, SqlError};
use crate::storage::pg::fault::{classify, db_message, server_error, Fault};
use crate::storage::pg::settings::{parse_url, ServerUrl, MIN_STATEMENT_TIMEOUT};

/// The table that records each write's commit id, so that an ambiguous commit can be resolved.
pub(crate) const COMMITS: &str = "somna_commits";

/// The schema a URL that names none meant before the project was renamed from engram to somna
/// (docs/design.md, "History"): a store found there, when [`super::settings::DEFAULT_SCHEMA`] holds none, is
/// opened where it is.
pub(crate) const LEGACY_SCHEMA: &str = "engram";

/// The name [`COMMITS`] had before the rename; the first read-write open renames it.
pub(crate) const LEGACY_COMMITS: &str = "engram_commits";

/// One connection. Statements are sent typed and unprepared (`query_typed`): one round trip
/// each, even the first on a fresh connection.
pub(crate) struct Conn {
    client: Client,
}

impl Conn {
    pub(crate) fn client(&mut self) -> &mut Client {
        &mut self.client
    }
}

/// The SQL of the point operations of one table, built once.
pub(crate) struct TableSql {
    /// The table's qualified, quoted name.
    pub(crate) name: String,
    pub(crate) get: String,
    pub(crate) get_for_update: String,
    pub(crate) put: String,
    pub(crate) delete: String,
}

/// An open server store: the connection settings, idle connections, and the retry policy.
pub(crate) struct Server {
    url: ServerUrl,
    pool: Mutex<Vec<Conn>>,
    busy: Duration,
    /// Each transaction's `statement_timeout`: four busy timeouts, at least 30 s. A round trip
    /// waits for its answer this long plus `connect_timeout`, then the connection is given up.
    statement_timeout: Duration,
    /// What each transaction sets first, with `SET LOCAL` (so that it holds for the transaction
    /// alone, as a pooler in transaction mode needs): the lock and statement timeouts, and
    /// `bytea` in hex, which the transaction's first round trip parses.
    settings: String,
    /// Every Nth statement of a write fails with a synthetic serialization error
    /// (`SOMNA_PG_FAULT_EVERY=N`, for tests; 0: never).
    fault_every: u64,
    statements: AtomicU64,
    /// Every Nth commit loses its connection on purpose, alternately just before and just after
    /// `COMMIT` reached the server (`SOMNA_PG_LOSE_COMMIT=N`, for tests; 0: never).
    lose_every: u64,
    commit_count: AtomicU64,
    tables: Vec<TableSql>,
    commits: String,
    /// Set by the first connection when it sent a password without TLS to a host other than
    /// loopback: the warning to give once.
    insecure: std::sync::OnceLock<String>,
    /// The query of what nearly every transaction reads first ([`CONTEXT`]), sent with its
    /// `BEGIN` in one round trip.
    context: String,
}

/// What nearly every transaction reads before anything else: the settings, the admin, the
/// grants and the policies (the trust layer's checks). Small tables, fetched whole (the admin:
/// one key) with the transaction's `BEGIN`, and served from the transaction's cache after.
const CONTEXT: [(TableId, Option<&str>); 4] = [
    (TableId::Config, None),
    (TableId::Meta, Some("admin")),
    (TableId::Grants, None),
    (TableId::Policies, None),
];

/// What the first round trip fetched of one [`CONTEXT`] table: the table, the one key asked
/// for (or all), the rows in key order.
pub(crate) type ContextRows = (TableId, Option<&'static str>, Vec<(Vec<u8>, Vec<u8>)>);

/// Bytes from PostgreSQL's text form of a `bytea` (`\x` and hex digits).
fn unhex(s: &str) -> Option<Vec<u8>> {
    let h = s.strip_prefix("\\x")?.as_bytes();
    let digit = |c: u8| (c as char).to_digit(16).and_then(|d| u8::try_from(d).ok());
    h.chunks(2)
        .map(|p| match p {
            [a, b] => Some(digit(*a)? << 4 | digit(*b)?),
            _ => None,
        })
        .collect()
}

impl Server {
    /// Parses `url` and connects once (so that an unreachable server or a refused login is
    /// reported at the open). Nothing is created.
    pub(crate) fn connect(url: &str, busy: Duration) -> Result<Arc<Server>> {
        let url = parse_url(url)?;
        let q = |t: &str| format!("\"{}\".\"{t}\"", url.schema);
        let tables = TableId::ALL
            .iter()
            .map(|t| {
                let name = q(t.name());
                TableSql {
                    get: format!("SELECT v FROM {name} WHERE k = $1"),
                    get_for_update: format!("SELECT v FROM {name} WHERE k = $1 FOR UPDATE"),
                    put: format!(
                        "INSERT INTO {name} (k, v) VALUES ($1, $2) ON CONFLICT (k) DO UPDATE SET v = excluded.v"
                    ),
                    delete: format!("DELETE FROM {name} WHERE k = $1"),
                    name,
                }
            })
            .collect();
        let knob = |name: &str| -> u64 {
            std::env::var(name)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0)
        };
        let (fault_every, lose_every) =
            (knob("SOMNA_PG_FAULT_EVERY"), knob("SOMNA_PG_LOSE_COMMIT"));
        let context = CONTEXT
            .iter()
            .enumerate()
            .map(|(i, (t, key))| {
                let cond = key.map_or(String::new(), |k| {
                    let hex: String = k.bytes().map(|b| format!("{b:02x}")).collect();
                    format!(" WHERE k = '\\x{hex}'")
                });
                format!("SELECT {i}, k, v FROM {}{cond}", q(t.name()))
            })
            .collect::<Vec<_>>()
            .join(" UNION ALL ");
        let statement_timeout = (busy * 4).max(MIN_STATEMENT_TIMEOUT);
        // A row lock is waited for no longer than the busy timeout (then 55P03, which the
        // transaction loop retries until the timeout is spent).
        let settings = format!(
            "SET LOCAL lock_timeout = {}; SET LOCAL statement_timeout = {}; SET LOCAL bytea_output = 'hex'",
            busy.as_millis().max(1),
            statement_timeout.as_millis()
        );
        let engine = Arc::new(Server {
            statement_timeout,
            settings,
            insecure: std::sync::OnceLock::new(),
            context,
            commits: q(COMMITS),
            url,
            pool: Mutex::new(Vec::new()),
            busy,
            fault_every,
            statements: AtomicU64::new(0),
            lose_every,
            commit_count: AtomicU64::new(0),
            tables,
        });
        let conn = engine.take()?;
        if let Some(w) = engine.url.insecure(&conn.client) {
            let _ = engine.insecure.set(w);
        }
        engine.give(conn);
        Ok(engine)
    }

    /// The warning the first connection called for, if any ([`ServerUrl::insecure`]).
    pub(crate) fn insecure(&self) -> Option<&str> {
        self.insecure.get().map(String::as_str)
    }

    /// The URL as it may be shown (no password).
    pub(crate) fn shown(&self) -> &str {
        &self.url.shown
    }

    /// The schema the store lives in.
    pub(crate) fn schema(&self) -> &str {
        &self.url.schema
    }

    pub(crate) fn table(&self, t: TableId) -> Result<&TableSql> {
        self.tables
            .get(t.index())
            .ok_or_else(|| Error::Storage(format!("no SQL for table {}", t.name())))
    }

    pub(crate) fn commits_table(&self) -> &str {
        &self.commits
    }

    /// Whether the next statement of a write fails on purpose (`SOMNA_PG_FAULT_EVERY`).
    pub(crate) fn inject(&self) -> bool {
        self.fault_every > 0
            && (self.statements.fetch_add(1, Ordering::Relaxed) + 1)
                .is_multiple_of(self.fault_every)
    }

    /// Whether this commit loses its connection on purpose (`SOMNA_PG_LOSE_COMMIT`): `Some(true)`
    /// just after `COMMIT` reached the server, `Some(false)` just before.
    pub(crate) fn lose_commit(&self) -> Option<bool> {
        if self.lose_every == 0 {
            return None;
        }
        let n = self.commit_count.fetch_add(1, Ordering::Relaxed) + 1;
        n.is_multiple_of(self.lose_every)
            .then_some((n / self.lose_every) % 2 == 1)
    }

    /// An idle connection, or a new one. A server that cannot be reached yet (refused, starting
    /// up, in recovery) is tried again until the busy timeout.
    pub(crate) fn take(&self) -> Result<Conn> {
        if let Some(c) = self.pool.lock().ok().and_then(|mut p| p.pop()) {
            if !c.client.is_closed() {
                return Ok(c);
            }
        }
        let start = Instant::now();
        let mut pause = Duration::from_millis(20);
        loop {
            let connected = client::connect(
                &self.url.hosts,
                &self.url.rustls,
                self.url.connect_timeout,
                self.statement_timeout + self.url.connect_timeout,
            );
            match connected {
                Ok(client) => return Ok(Conn { client }),
                Err(e) => {
                    let transient = matches!(classify(&e), Some(Fault::Lost(_)))
                        && !matches!(e.code(), Some(c) if c.code().starts_with("28") || *c == SqlState::INVALID_CATALOG_NAME);
                    let waited = start.elapsed();
                    if !transient || waited + pause > self.busy {
                        return Err(self.unreachable(&e, waited));
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
            }
        }
    }

    fn unreachable(&self, e: &SqlError, waited: Duration) -> Error {
        let shown = &self.url.shown;
        match e.code() {
            Some(c) if c.code().starts_with("28") => Error::Server(format!(
                "the server at {shown} refused the login: {}",
                db_message(e)
            )),
            Some(c) if *c == SqlState::INVALID_CATALOG_NAME => Error::Server(format!(
                "the server at {shown} has no such database: {}",
                db_message(e)
            )),
            _ => Error::Server(format!(
                "cannot reach the PostgreSQL server at {shown} (tried for {} ms): {}",
                waited.as_millis(),
                db_message(e)
            )),
        }
    }

    /// Returns a connection to the pool (a closed one is dropped).
    pub(crate) fn give(&self, c: Conn) {
        if c.client.is_closed() {
            return;
        }
        if let Ok(mut p) = self.pool.lock() {
            if p.len() < 16 {
                p.push(c);
            }
        }
    }

    /// Runs `attempt` until it is done, backing off between attempts, up to the busy timeout.
    pub(crate) fn retrying<R>(&self, mut attempt: impl FnMut() -> Attempt<R>) -> Result<R> {
        let start = Instant::now();
        let mut pause = Duration::from_millis(2);
        let mut n: u64 = 0;
        loop {
            let last = match attempt() {
                Attempt::Done(r) => return r,
                Attempt::Again(f) => f,
            };
            n += 1;
            let waited = start.elapsed();
            if waited >= self.busy {
                return Err(match last {
                    Fault::Retry(_) | Fault::Injected => Error::Busy { waited },
                    Fault::Lost(m) => Error::Server(format!(
                        "lost the PostgreSQL server at {} and could not get it back in {} ms ({m})",
                        self.url.shown,
                        waited.as_millis()
                    )),
                });
            }
            // Jitter from the clock, so that contenders do not retry in step.
            let jitter = u64::from(start.elapsed().subsec_nanos()) % (pause.as_micros() as u64 + 1);
            let sleep = (pause / 2 + Duration::from_micros(jitter)).min(self.busy - waited);
            std::thread::sleep(sleep);
            pause = (pause * 2).min(Duration::from_millis(if n > 20 { 200 } else { 50 }));
        }
    }

    /// Sends `begin` and the [`CONTEXT`] query in one round trip; the context's rows per table
    /// (empty when the server's text could not be read: the transaction then reads as it goes).
    pub(crate) fn begin(
        &self,
        conn: &mut Conn,
        begin: &str,
    ) -> std::result::Result<Vec<ContextRows>, SqlError> {
        let msgs = conn
            .client
            .simple_query(&format!("{begin}; {}; {}", self.settings, self.context))?;
        let mut rows: Vec<Vec<(Vec<u8>, Vec<u8>)>> = vec![Vec::new(); CONTEXT.len()];
        for m in msgs {
            let SimpleQueryMessage::Row(r) = m else {
                continue;
            };
            let parsed = (|| {
                let i: usize = r.get(0)?.parse().ok()?;
                Some((i, unhex(r.get(1)?)?, unhex(r.get(2)?)?))
            })();
            match parsed.and_then(|(i, k, v)| rows.get_mut(i).map(|t| t.push((k, v)))) {
                Some(()) => {}
                None => return Ok(Vec::new()),
            }
        }
        Ok(CONTEXT
            .iter()
            .zip(rows)
            .map(|((t, key), mut r)| {
                r.sort();
                (*t, *key, r)
            })
            .collect())
    }

    /// After a connection was lost during `COMMIT`: whether the transaction with `commit_id`
    /// committed. The id is fenced by inserting it in a new transaction: if the lost one is
    /// still finishing, the insert waits for it; if it committed, the insert finds its row; if
    /// not, the insert takes the id, so the lost one can never commit later. `None` when the
    /// server cannot be asked before the busy timeout.
    pub(crate) fn resolve(&self, commit_id: &[u8]) -> Option<bool> {
        let sql = format!(
            "INSERT INTO {} (k, v) VALUES ($1, '\\x') ON CONFLICT (k) DO NOTHING",
            self.commits
        );
        self.on_conn(|c| c.client.execute_typed(&sql, &[(&commit_id, Type::BYTEA)]))
            .map(|n| n == 0)
            .ok()
    }

    /// Creates the schema and every table that is missing, in one transaction (run again when
    /// another process creates them at the same moment). YugabyteDB needs range-ordered keys.
    pub(crate) fn create_tables(&self) -> Result<()> {
        self.on_conn(|conn| {
            let version = (conn.client.simple_query("SELECT version()")?)
                .iter()
                .find_map(|m| match m {
                    SimpleQueryMessage::Row(r) => r.get(0).map(str::to_string),
                    _ => None,
                })
                .unwrap_or_default();
            let key = if version.contains("-YB-") || version.contains("Yugabyte") {
                "PRIMARY KEY (k ASC)"
            } else {
                "PRIMARY KEY (k)"
            };
            // A schema made for somna by an administrator is used as it is: creating it (even
            // `IF NOT EXISTS`) needs the CREATE privilege on the database, which a role limited
            // to its schema lacks (docs/scale-out.md, "A role that can use one schema").
            let exists = !conn
                .client
                .query_typed(
                    "SELECT 1 FROM information_schema.schemata WHERE schema_name = $1",
                    &[(&self.url.schema, Type::TEXT)],
                )?
                .is_empty();
            let mut sql = String::from("BEGIN ISOLATION LEVEL SERIALIZABLE;");
            if !exists {
                sql.push_str(&format!(
                    " CREATE SCHEMA IF NOT EXISTS \"{}\";",
                    self.url.schema
                ));
            }
            for t in self.tables.iter().map(|t| &t.name).chain([&self.commits]) {
                sql.push_str(&format!(
                    " CREATE TABLE IF NOT EXISTS {t} (k bytea NOT NULL, v bytea NOT NULL, {key});"
                ));
            }
            sql.push_str(" COMMIT;");
            conn.client.batch_execute(&sql)
        })
    }

    /// Whether the URL left the schema to the default, the default schema holds no table, and
    /// [`LEGACY_SCHEMA`] holds a store (its `meta` table): a store made before the rename.
    pub(crate) fn legacy_default(&self) -> Result<bool> {
        if self.url.schema_named || !self.table_names()?.is_empty() {
            return Ok(false);
        }
        self.on_conn(|conn| {
            Ok(!conn
                .client
                .query_typed(
                    "SELECT 1 FROM information_schema.tables WHERE table_schema = $1 AND table_name = 'meta'",
                    &[(&LEGACY_SCHEMA, Type::TEXT)],
                )?
                .is_empty())
        })
    }

    /// Renames the commit-id table of a store made before the rename ([`LEGACY_COMMITS`]) to
    /// [`COMMITS`], when `names` (the schema's tables) hold the one and not the other.
    pub(crate) fn adopt_legacy_commits(&self, names: &[String]) -> Result<bool> {
        let has = |n: &str| names.iter().any(|m| m == n);
        if !has(LEGACY_COMMITS) || has(COMMITS) {
            return Ok(false);
        }
        let sql = format!(
            "ALTER TABLE \"{}\".\"{LEGACY_COMMITS}\" RENAME TO \"{COMMITS}\"",
            self.url.schema
        );
        self.on_conn(|conn| conn.client.batch_execute(&sql))?;
        Ok(true)
    }

    /// `VACUUM` of every table of the store, one statement each outside any transaction; a
    /// table the role may not vacuum (the server warns and skips it) or a lost connection is
    /// left to autovacuum ([`crate::storage::engine::Engine::scrub`]).
    pub(crate) fn vacuum(&self) {
        for t in &self.tables {
            let sql = format!("VACUUM {}", t.name);
            let _ = self.on_conn(|conn| conn.client.batch_execute(&sql));
        }
    }

    /// The names of the tables in the store's schema.
    pub(crate) fn table_names(&self) -> Result<Vec<String>> {
        self.on_conn(|conn| {
            conn.client
                .query_typed(
                    "SELECT table_name::text FROM information_schema.tables WHERE table_schema = $1",
                    &[(&self.url.schema, Type::TEXT)],
                )?
                .iter()
                .map(|r| Ok(r.try_get::<_, String>(0)?))
                .collect()
        })
    }

    /// Runs `f` on a pooled connection, again after a fault that calls for it (up to the busy
    /// timeout); the connection goes back to the pool after a success.
    pub(crate) fn on_conn<R>(
        &self,
        mut f: impl FnMut(&mut Conn) -> std::result::Result<R, SqlError>,
    ) -> Result<R> {
        self.retrying(|| {
            let mut conn = match self.take() {
                Ok(c) => c,
                Err(e) => return Attempt::Done(Err(e)),
            };
            match f(&mut conn) {
                Ok(r) => {
                    self.give(conn);
                    Attempt::Done(Ok(r))
                }
                Err(e) => match classify(&e) {
                    Some(f) => Attempt::Again(f),
                    None => Attempt::Done(Err(server_error(&e))),
                },
            }
        })
    }

    /// Drops commit ids older than a day (best effort, in its own transaction; rare).
    pub(crate) fn prune_commits(&self, now_us: i64) {
        let cutoff = (now_us - 86_400_000_000).max(0) as u64;
        let sql = format!("DELETE FROM {} WHERE k < $1", self.commits);
        if let Ok(mut conn) = self.take() {
            let key = cutoff.to_be_bytes().to_vec();
            let ok = conn
                .client
                .execute_typed(&sql, &[(&key, Type::BYTEA)])
                .is_ok();
            if ok {
                self.give(conn);
            }
        }
    }
}

/// The outcome of one attempt of a transaction.
pub(crate) enum Attempt<R> {
    /// Finished: the result to return.
    Done(Result<R>),
    /// Run it again (the fault is what to report if time runs out).
    Again(Fault),
}
