//! A failed statement as the transaction loop sees it ([`Fault`]: run again, or reconnect and
//! run again) and as the caller sees it ([`server_error`]: a typed [`Error`]).

use tokio_postgres::error::SqlState;

use crate::error::Error;
use crate::storage::pg::client::{self, SqlError};

/// What went wrong with a statement, as the transaction loop sees it.
#[derive(Debug, Clone)]
pub(crate) enum Fault {
    /// The server refused this attempt but another may succeed: a serialization failure, a
    /// deadlock, a lock wait that timed out, a race creating the schema.
    Retry(String),
    /// A failure injected on purpose (`SOMNA_PG_FAULT_EVERY`): the next attempt runs clean,
    /// so that every transaction, however many statements it has, gets through.
    Injected,
    /// The connection is gone (or reached a server that cannot take writes, such as a standby
    /// after a failover): reconnect, then run again.
    Lost(String),
}

/// Whether an error is one the transaction loop handles by running again.
pub(crate) fn classify(e: &SqlError) -> Option<Fault> {
    if e.is_closed() {
        return Some(Fault::Lost(format!("the connection closed ({e})")));
    }
    if let SqlError::Stalled(m) = e {
        return Some(Fault::Lost(m.clone()));
    }
    let Some(code) = e.code() else {
        // No SQLSTATE: the socket failed, or the server spoke out of turn.
        return Some(Fault::Lost(format!("the connection failed ({e})")));
    };
    let c = code.code();
    let retry = [
        SqlState::T_R_SERIALIZATION_FAILURE,
        SqlState::T_R_DEADLOCK_DETECTED,
        SqlState::UNIQUE_VIOLATION,
        SqlState::DUPLICATE_TABLE,
        SqlState::DUPLICATE_SCHEMA,
        SqlState::LOCK_NOT_AVAILABLE,
    ];
    if retry.contains(code) {
        return Some(Fault::Retry(format!("{c}: {}", db_message(e))));
    }
    let lost = c.starts_with("08")
        || [
            SqlState::ADMIN_SHUTDOWN,
            SqlState::CRASH_SHUTDOWN,
            SqlState::CANNOT_CONNECT_NOW,
            SqlState::READ_ONLY_SQL_TRANSACTION,
            SqlState::T_R_STATEMENT_COMPLETION_UNKNOWN,
        ]
        .contains(code);
    lost.then(|| Fault::Lost(format!("{c}: {}", db_message(e))))
}

pub(super) fn db_message(e: &SqlError) -> String {
    match e {
        SqlError::Pg(e) => client::cause(e),
        SqlError::Stalled(m) => m.clone(),
    }
}

/// A server error that running again would not fix, as somna's error.
pub(crate) fn server_error(e: &SqlError) -> Error {
    match e.code() {
        Some(c) if *c == SqlState::UNDEFINED_TABLE => Error::ReadOnly(format!(
            "the store lacks a table that this somna adds on its first read-write open (any write, or `somna init`, adds it): {}",
            db_message(e)
        )),
        Some(c) if *c == SqlState::INSUFFICIENT_PRIVILEGE => {
            Error::Denied(format!("the PostgreSQL server refused: {}", db_message(e)))
        }
        Some(c) => Error::Server(format!("PostgreSQL error {}: {}", c.code(), db_message(e))),
        None => Error::Server(format!("PostgreSQL: {}", db_message(e))),
    }
}
