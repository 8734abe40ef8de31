//! The storage engines behind a [`crate::Store`], as one seam: the [`Engine`] trait (open or
//! create, run a read, run a write with the engine's retry rule, close, check integrity,
//! compact), and what every engine shares (writing a new store's header, checking its format,
//! making a transaction). The open engine of a store, whichever it is, is `AnyEngine` (in
//! `any_engine.rs`, above the engines, which name this file); a transaction of whichever engine
//! is a [`ReadKv`] or [`WriteKv`] (in [`crate::storage::any_kv`]). Two engines implement it: redb, a file
//! ([`crate::storage::redb`]), and a PostgreSQL-protocol server ([`crate::storage::pg`], a stub
//! that refuses every URL without the `postgres` feature).
//!
//! Words: an *engine* is one of those two; a *backend* is only what redb calls the disk under its
//! file (`redb::StorageBackend`, see [`crate::Store::with_backend`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::domain::text::now_us;
use crate::error::{Error, Result};
use crate::storage::access::{Asker, DEFAULT_ADMIN};
use crate::storage::any_kv::{ReadKv, WriteKv};
use crate::storage::codec::{decode, encode};
use crate::storage::options::Options;
use crate::storage::redb::tail::TailRepair;
use crate::storage::tables::{CHUNK_FORMAT, INDEX_FORMAT, META, STORE_FORMAT};
use crate::storage::txn::{ReadTxn, WriteTxn};

/// What every storage engine does for a store.
pub(crate) trait Engine: Sized {
    /// Opens the store at `location` (a path, or a URL for a server); with `create`, makes it
    /// first if there is none. The format is checked; a store made now is initialized.
    fn open(location: &Path, opts: &Options, create: bool) -> Result<Opened<Self>>;

    /// Runs `f` over one consistent snapshot, acting as `principal` (`None`: the admin).
    fn read<R>(&self, principal: Option<&str>, f: impl FnMut(&ReadTxn) -> Result<R>) -> Result<R>;

    /// Runs `f` in one write transaction and commits it durably, acting as `principal`. The engine's
    /// retry rule: redb waits up to the busy timeout for the one writer slot and runs `f` once;
    /// a server runs `f` again, whole, while the server asks for it, up to the busy timeout.
    fn write<R>(
        &self,
        principal: Option<&str>,
        f: impl FnMut(&mut WriteTxn<'_>) -> Result<R>,
    ) -> Result<R>;

    /// Closes the engine (the last handle to it), reporting what dropping it cannot.
    fn close(self) -> Result<()>;

    /// The engine's own integrity check: `Ok(true)` intact, `Ok(false)` repaired. It gets the
    /// shared handle: an engine that needs to be alone (redb) checks that it is.
    fn check_integrity(this: &mut Arc<Self>) -> Result<bool>;

    /// Gives unused space back (redb: offline, it needs the only handle).
    fn compact(this: &mut Arc<Self>) -> Result<()>;

    /// Overwrites what freed storage still holds of data changed or deleted by earlier commits
    /// (after a redaction). Returns how much of it stays held, because a reader (in any
    /// process) may still read it: redb's pages; 0 when nothing is held.
    fn scrub(&self) -> Result<u64>;
}

/// An opened store: its engine, the location as it may be shown, and what the open did.
pub(crate) struct Opened<E> {
    /// The open engine.
    pub(crate) engine: E,
    /// The path, or the URL without its password.
    pub(crate) shown: PathBuf,
    /// Whether this open made the store.
    pub(crate) created: bool,
    /// What the open did to a torn tail of a file.
    pub(crate) repaired: Option<TailRepair>,
    /// What the open found unsafe in the connection to a server, to say once.
    pub(crate) insecure: Option<String>,
    /// The store format the store had when opened, before any upgrade (a new store: this
    /// build's).
    pub(crate) format: u32,
}

impl<E> Opened<E> {
    /// The same open, its engine wrapped (in `AnyEngine`).
    pub(crate) fn map<F>(self, f: impl FnOnce(E) -> F) -> Opened<F> {
        Opened {
            engine: f(self.engine),
            shown: self.shown,
            created: self.created,
            repaired: self.repaired,
            insecure: self.insecure,
            format: self.format,
        }
    }
}

/// Writes the header of a new store (format, creation time, scope counter, admin) unless it has
/// one, and creates every table it lacks. The admin is the principal who made it.
pub(crate) fn initialize(engine: &impl Engine, principal: Option<&str>) -> Result<()> {
    engine.write(principal, |tx| {
        let kv = &mut tx.tx;
        if META.get_for_update(kv, "format")?.is_none() {
            META.put(kv, "format", &encode(&STORE_FORMAT)?)?;
            META.put(kv, "created_us", &encode(&tx.now)?)?;
            META.put(kv, "next_scope_id", &encode(&0u32)?)?;
            let admin = tx
                .asker
                .principal()
                .map(str::to_string)
                .unwrap_or_else(|| DEFAULT_ADMIN.to_string());
            META.put(&mut tx.tx, "admin", &encode(&admin)?)?;
        }
        tx.ensure_tables()
    })
}

/// Checks a store's `meta.format` value: a newer format than this build's is refused; returns
/// the format.
pub(crate) fn check_format_value(v: &[u8]) -> Result<u32> {
    let format: u32 = decode("meta", &"format", v)?;
    if format > STORE_FORMAT {
        return Err(Error::Unsupported(format!(
            "store format {format} is newer than this somna (format {STORE_FORMAT}); upgrade somna"
        )));
    }
    Ok(format)
}

/// Upgrades a store of an older format to this build's, in one write transaction: format 1 to
/// 2 builds the search index from the log and tree (section 12.5 of docs/design.md), format 2
/// to 3 moves every session's messages into chunks (section 13.4), then `meta.format` is set. A
/// read-only handle leaves the store as it is. Returns the format the store had when the
/// transaction began (another process may have upgraded it since this one read it).
pub(crate) fn upgrade(engine: &impl Engine, opts: &Options, format: u32) -> Result<u32> {
    if format >= STORE_FORMAT || opts.read_only {
        return Ok(format);
    }
    engine.write(opts.principal.as_deref(), |tx| upgrade_in(&mut tx.tx, opts))
}

/// The upgrade inside a write transaction; returns the format found.
pub(crate) fn upgrade_in(kv: &mut WriteKv<'_>, opts: &Options) -> Result<u32> {
    let now = match META.get_for_update(kv, "format")? {
        Some(v) => decode::<u32>("meta", &"format", &v)?,
        None => return Ok(STORE_FORMAT),
    };
    if now < INDEX_FORMAT {
        let tell = opts.on_upgrade.clone();
        crate::storage::index::build::rebuild_all(kv, &mut |done, all| {
            if let Some(t) = &tell {
                (t.0)(done, all);
            }
        })?;
    }
    if now < CHUNK_FORMAT {
        crate::storage::chunk::migrate_sessions(kv)?;
    }
    if now < STORE_FORMAT {
        META.put(kv, "format", &encode(&STORE_FORMAT)?)?;
    }
    Ok(now)
}

/// The refusal of a write on a read-only handle.
pub(crate) fn read_only_handle() -> Error {
    Error::ReadOnly("this handle was opened read-only and cannot write".into())
}

/// A new read transaction over `kv`, acting as `principal`.
pub(crate) fn read_txn(kv: ReadKv, principal: Option<&str>) -> ReadTxn {
    ReadTxn {
        tx: kv,
        asker: Asker::new(principal.map(str::to_string)),
    }
}

/// A new write transaction over `kv`, acting as `principal`, stamped now.
pub(crate) fn write_txn<'t>(kv: WriteKv<'t>, principal: Option<&str>) -> WriteTxn<'t> {
    WriteTxn {
        tx: kv,
        now: now_us(),
        config: None,
        _s: std::marker::PhantomData,
        asker: Asker::new(principal.map(str::to_string)),
    }
}
