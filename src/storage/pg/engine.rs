//! The server engine: a store kept in one schema of a PostgreSQL-protocol database
//! (PostgreSQL; by the same SQL CockroachDB and YugabyteDB), reached by a `postgresql://` URL.
//! Opening it checks the schema (a somna store, an empty schema to create one in, or a
//! refusal) and the format; a read is one `REPEATABLE READ READ ONLY` transaction; a write runs
//! at `SERIALIZABLE`, again and whole while the server asks ([`super::conn`] has the loop).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::storage::engine::{
    check_format_value, initialize, read, read_only_handle, read_txn, upgrade, write_txn, Engine,
    Opened, ReadFn, WriteFn,
};
use crate::storage::options::Options;
use crate::storage::pg::conn::{Attempt, Server, COMMITS, LEGACY_SCHEMA};
use crate::storage::pg::fault::{classify, server_error, Fault};
use crate::storage::pg::kv::PgTx;
use crate::storage::pg::settings::with_schema;
use crate::storage::tables::{META, STORE_FORMAT, TABLE_NAMES};

/// An open server store: its connections, and whether this handle may write.
pub(crate) struct PgEngine {
    server: Arc<Server>,
    read_only: bool,
}

impl PgEngine {
    /// Starts a read: one consistent snapshot (`REPEATABLE READ READ ONLY`, never aborted for
    /// serialization on PostgreSQL). A lost connection is replaced until the busy timeout. With
    /// `inject`, its statements count towards `SOMNA_PG_FAULT_EVERY`.
    pub(crate) fn begin_read(&self, inject: bool) -> Result<PgTx> {
        self.server.retrying(|| {
            let mut conn = match self.server.take() {
                Ok(c) => c,
                Err(e) => return Attempt::Done(Err(e)),
            };
            match self.server.begin(
                &mut conn,
                "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
            ) {
                Ok(context) => {
                    let tx = PgTx::new(Arc::clone(&self.server), conn, false, inject);
                    tx.seed(context);
                    Attempt::Done(Ok(tx))
                }
                Err(e) => match classify(&e) {
                    Some(f) => Attempt::Again(f),
                    None => Attempt::Done(Err(server_error(&e))),
                },
            }
        })
    }

    /// Starts one attempt of a write (`SERIALIZABLE`); with `inject`, its statements count
    /// towards `SOMNA_PG_FAULT_EVERY`.
    pub(crate) fn begin_write<R>(&self, inject: bool) -> std::result::Result<PgTx, Attempt<R>> {
        let mut conn = self.server.take().map_err(|e| Attempt::Done(Err(e)))?;
        if inject && self.server.inject() {
            self.server.give(conn);
            return Err(Attempt::Again(Fault::Injected));
        }
        match self
            .server
            .begin(&mut conn, "BEGIN ISOLATION LEVEL SERIALIZABLE")
        {
            Ok(context) => {
                let tx = PgTx::new(Arc::clone(&self.server), conn, true, inject);
                tx.seed(context);
                Ok(tx)
            }
            Err(e) => Err(match classify(&e) {
                Some(f) => Attempt::Again(f),
                None => Attempt::Done(Err(server_error(&e))),
            }),
        }
    }

    /// The tables of the schema: how many of somna's it holds, whether it holds `meta`, and
    /// whether every table (the commit ids included) is there, after a read-write handle gave
    /// the commit-id table of a store made before the rename its name. Refuses a schema that
    /// holds a damaged store or other tables.
    fn survey(&self) -> Result<(usize, bool)> {
        let mut names = self.server.table_names()?;
        // A store made before the rename keeps its commit ids under the old table name.
        if !self.read_only && self.server.adopt_legacy_commits(&names)? {
            names = self.server.table_names()?;
        }
        let ours = TABLE_NAMES
            .iter()
            .filter(|n| names.iter().any(|m| m == *n))
            .count();
        if !names.iter().any(|n| n == "meta") {
            if ours > 0 {
                return Err(crate::error::damaged_file(format!(
                    "schema {} has {ours} somna tables but not meta",
                    self.server.schema()
                )));
            }
            if !names.is_empty() {
                return Err(Error::Unsupported(format!(
                    "schema {} at {} holds tables that are not a somna store; name another with ?schema=NAME",
                    self.server.schema(),
                    self.server.shown()
                )));
            }
        }
        let complete = ours == TABLE_NAMES.len() && names.iter().any(|n| n == COMMITS);
        Ok((ours, complete))
    }
}

impl PgEngine {
    /// Opens (with `create`: creates if missing) the store in a server's schema.
    pub(crate) fn open(location: &Path, opts: &Options, create: bool) -> Result<Opened<Self>> {
        let url = location.to_str().unwrap_or_default();
        let mut server = Server::connect(url, opts.busy_timeout)?;
        // A store made before the rename, in the schema a URL without `?schema=` meant then.
        if server.legacy_default()? {
            server = Server::connect(&with_schema(url, LEGACY_SCHEMA), opts.busy_timeout)?;
        }
        let engine = PgEngine {
            server,
            read_only: opts.read_only,
        };
        let (ours, complete) = engine.survey()?;
        // A read-only handle creates nothing: a table a newer somna added is made by the next
        // read-write open, and until then a verb that needs it says so.
        if !complete && (create || ours > 0) && !opts.read_only {
            engine.server.create_tables()?;
        }
        let format = match ours {
            0 => None,
            _ => read(&engine, opts.principal.as_deref(), |r| {
                META.get(r.tx, "format")
            })?,
        };
        let shown = PathBuf::from(engine.server.shown());
        let insecure = engine.server.insecure().map(str::to_string);
        let (created, format) = match format {
            Some(v) => (false, upgrade(&engine, opts, check_format_value(&v)?)?),
            None if create => {
                initialize(&engine, opts.principal.as_deref())?;
                (true, STORE_FORMAT)
            }
            None => return Err(Error::NotFound { path: shown }),
        };
        Ok(Opened {
            engine,
            shown,
            created,
            repaired: None,
            insecure,
            format,
        })
    }
}

impl Engine for PgEngine {
    /// Runs again, whole, when a statement met a serialization failure (CockroachDB aborts
    /// reads too) or a lost connection (a restart, a failover), up to the busy timeout, as a
    /// write does.
    fn read_with(&self, principal: Option<&str>, f: &mut ReadFn<'_>) -> Result<()> {
        let mut clean = false;
        self.server.retrying(|| {
            let tx = match self.begin_read(!clean) {
                Ok(t) => t,
                Err(e) => return Attempt::Done(Err(e)),
            };
            let out = f(&read_txn(&tx, principal));
            let a = tx.end_read(out);
            clean = matches!(a, Attempt::Again(Fault::Injected));
            a
        })
    }

    /// Attempts until one commits, up to the busy timeout.
    fn write_with(&self, principal: Option<&str>, f: &mut WriteFn<'_>) -> Result<()> {
        if self.read_only {
            return Err(read_only_handle());
        }
        let mut clean = false;
        self.server.retrying(|| {
            let mut tx = match self.begin_write(!clean) {
                Ok(t) => t,
                Err(a) => return a,
            };
            let mut w = write_txn(&mut tx, principal);
            let now = w.now;
            let r = f(&mut w);
            let a = tx.finish(r, now);
            clean = matches!(a, Attempt::Again(Fault::Injected));
            a
        })
    }

    /// The connections close when the last handle goes.
    fn close(&mut self) -> Result<()> {
        Ok(())
    }

    /// A server store has no pages of ours to check (the server checksums its own).
    fn check_integrity(&mut self) -> Result<bool> {
        Ok(true)
    }

    /// The server reclaims space itself (autovacuum).
    fn compact(&mut self) -> Result<()> {
        Ok(())
    }

    /// Nothing to do from any handle: the checks and the space are the server's.
    fn not_alone(&self, _what: &str) -> Result<()> {
        Ok(())
    }

    fn is_server(&self) -> bool {
        true
    }

    /// `VACUUM` of the store's tables, so the dead row versions an update or delete left are
    /// pruned now rather than when autovacuum comes (docs/security.md says what stays: the
    /// server's WAL and the bytes of pruned tuples until their page is rewritten). Best effort:
    /// a role that does not own the tables may not vacuum them, and the redaction stands.
    fn scrub(&self) -> Result<u64> {
        if !self.read_only {
            self.server.vacuum();
        }
        Ok(0)
    }
}
