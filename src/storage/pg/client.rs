//! One connection to the server, synchronous, with every wait bounded: the asynchronous client
//! (tokio-postgres) driven on a one-thread runtime of its own, as the `postgres` crate drives it,
//! but with a bound on the start-up of each host (the TCP connect, TLS and the login:
//! `connect_timeout`, as libpq reads it, per host) and on every round trip after (the statement
//! timeout the transaction sets on the server, plus a margin for its answer to arrive). A server
//! that accepts a connection and never answers, or stops answering mid-transaction, ends the call
//! with [`SqlError::Stalled`], naming the host and what timed out, instead of holding it until
//! TCP gives up. [`super::conn`] keeps these in its pool.

use std::future::Future;
use std::time::Duration;

use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::{Config, Row, SimpleQueryMessage};

use crate::storage::pg::tls::MakeRustls;

/// What a statement or a connection attempt met: the server's (or the socket's) error, or no
/// answer within the bound.
#[derive(Debug)]
pub(crate) enum SqlError {
    /// The client's error: the server refused, or the socket failed.
    Pg(tokio_postgres::Error),
    /// Nothing came back in time (what timed out, where, after how long), or the runtime that
    /// drives the connection could not be made. The connection, if any, is not used again.
    Stalled(String),
}

impl From<tokio_postgres::Error> for SqlError {
    fn from(e: tokio_postgres::Error) -> Self {
        SqlError::Pg(e)
    }
}

impl std::fmt::Display for SqlError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SqlError::Pg(e) => e.fmt(f),
            SqlError::Stalled(m) => f.write_str(m),
        }
    }
}

impl SqlError {
    /// The SQLSTATE the server sent, if it sent one.
    pub(crate) fn code(&self) -> Option<&SqlState> {
        match self {
            SqlError::Pg(e) => e.code(),
            SqlError::Stalled(_) => None,
        }
    }

    /// Whether the connection closed under the statement.
    pub(crate) fn is_closed(&self) -> bool {
        matches!(self, SqlError::Pg(e) if e.is_closed())
    }
}

/// A statement parameter with its type (statements are sent typed and unprepared).
pub(crate) type Param<'a> = (&'a (dyn ToSql + Sync), Type);

/// One open connection (see the module doc).
pub(crate) struct Client {
    inner: tokio_postgres::Client,
    driver: Driver,
    /// Whether the session is encrypted (TLS).
    encrypted: bool,
}

/// What runs a connection's round trips: its runtime and their bound.
struct Driver {
    rt: tokio::runtime::Runtime,
    /// The longest a round trip may wait for its answer.
    wait: Duration,
    /// The host it reached, as it may be shown.
    host: String,
    /// A round trip timed out: the connection's state is unknown, so it is never used again.
    stalled: bool,
}

/// The one-thread runtime a connection runs on.
fn runtime() -> Result<tokio::runtime::Runtime, SqlError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| SqlError::Stalled(format!("cannot start the client's runtime: {e}")))
}

/// Connects to the first host of `hosts` that takes the connection (each with its own
/// connection settings, in order, as libpq tries them), each within `bound`; round trips after
/// wait at most `wait`. The error names every host tried and what each met.
pub(crate) fn connect(
    hosts: &[(Config, String)],
    tls: &MakeRustls,
    bound: Duration,
    wait: Duration,
) -> Result<Client, SqlError> {
    let rt = runtime()?;
    let mut failures = Vec::new();
    let mut last = None;
    for (config, host) in hosts {
        // Forget a TLS session an earlier host set up before it failed: only this host's counts.
        tls.take_encrypted();
        let start = config.connect(tls.clone());
        // The timer is made inside the runtime, which owns the clock it needs.
        let attempt = rt.block_on(async { tokio::time::timeout(bound, start).await });
        match attempt {
            Ok(Ok((inner, connection))) => {
                rt.spawn(async move {
                    // Ends when the connection closes; its error is met by the next statement.
                    let _ = connection.await;
                });
                let driver = Driver {
                    rt,
                    wait,
                    host: host.clone(),
                    stalled: false,
                };
                let encrypted = tls.take_encrypted();
                return Ok(Client {
                    inner,
                    driver,
                    encrypted,
                });
            }
            Ok(Err(e)) => {
                failures.push(format!("{host}: {}", cause(&e)));
                last = Some(SqlError::Pg(e));
            }
            Err(_) => failures.push(format!(
                "{host}: no answer to the connection's start-up within {} ms (connect_timeout)",
                bound.as_millis()
            )),
        }
    }
    match (hosts.len(), last) {
        // One host, refused: the server's own error (a refused login keeps its SQLSTATE).
        (1, Some(e)) => Err(e),
        _ => Err(SqlError::Stalled(failures.join("; "))),
    }
}

/// An error with its cause, which the client's message leaves out ("error connecting to server").
pub(crate) fn cause(e: &tokio_postgres::Error) -> String {
    match (e.as_db_error(), std::error::Error::source(e)) {
        (Some(d), _) => d.message().to_string(),
        (None, Some(c)) => format!("{e}: {c}"),
        (None, None) => e.to_string(),
    }
}

impl Driver {
    /// Runs one round trip, waiting at most the bound for its answer.
    fn run<R>(
        &mut self,
        what: &str,
        f: impl Future<Output = Result<R, tokio_postgres::Error>>,
    ) -> Result<R, SqlError> {
        if self.stalled {
            return Err(SqlError::Stalled(format!(
                "the connection to {} stalled earlier",
                self.host
            )));
        }
        match self
            .rt
            .block_on(async { tokio::time::timeout(self.wait, f).await })
        {
            Ok(r) => Ok(r?),
            Err(_) => {
                self.stalled = true;
                Err(SqlError::Stalled(format!(
                    "the server at {} did not answer {what} within {} ms",
                    self.host,
                    self.wait.as_millis()
                )))
            }
        }
    }
}

// A statement that is one round trip of tokio-postgres's call of the same name, run through
// the driver: declared in one line each.
macro_rules! round_trips {
    ($($(#[$m:meta])* fn $name:ident($($a:ident: $t:ty),*) -> $r:ty;)*) => {
        impl Client {$(
            $(#[$m])*
            pub(crate) fn $name(&mut self, $($a: $t),*) -> Result<$r, SqlError> {
                let f = self.inner.$name($($a),*);
                self.driver.run("a statement", f)
            }
        )*}
    };
}

round_trips! {
    /// The rows of a typed, unprepared statement.
    fn query_typed(sql: &str, params: &[Param<'_>]) -> Vec<Row>;
    /// The row of a typed, unprepared statement that returns at most one.
    fn query_typed_opt(sql: &str, params: &[Param<'_>]) -> Option<Row>;
    /// The number of rows a typed, unprepared statement changed.
    fn execute_typed(sql: &str, params: &[Param<'_>]) -> u64;
    /// Statements in the simple-query protocol, with their rows as text.
    fn simple_query(sql: &str) -> Vec<SimpleQueryMessage>;
}

impl Client {
    /// Statements in the simple-query protocol, rows ignored.
    pub(crate) fn batch_execute(&mut self, sql: &str) -> Result<(), SqlError> {
        let f = self.inner.batch_execute(sql);
        self.driver.run(
            if sql.ends_with("COMMIT") {
                "COMMIT"
            } else {
                "a statement"
            },
            f,
        )
    }

    /// Whether the session is encrypted (TLS).
    pub(crate) fn encrypted(&self) -> bool {
        self.encrypted
    }

    /// The host it reached, as it may be shown.
    pub(crate) fn host(&self) -> &str {
        &self.driver.host
    }

    /// Whether the connection is gone (closed, or stalled once).
    pub(crate) fn is_closed(&self) -> bool {
        self.driver.stalled || self.inner.is_closed()
    }
}
