//! The storage engines behind a [`crate::Store`], as one seam: the [`Engine`] trait (open or
//! create, run a read, run a write with the engine's retry rule, close, check integrity,
//! compact), and what every engine shares (writing a new store's header, checking its format,
//! making a transaction). A store holds its engine as `Arc<dyn Engine>`, opened by
//! `any_engine.rs` (above the engines, which name this file); a transaction of whichever engine
//! reaches the layers above as `&dyn KvRead` or `&mut dyn KvWrite`
//! ([`crate::storage::kv`]). Two engines implement it: redb, a file
//! ([`crate::storage::redb`]), and a PostgreSQL-protocol server ([`crate::storage::pg`], a stub
//! that refuses every URL without the `postgres` feature).
//!
//! Words: an *engine* is one of those two; a *backend* is only what redb calls the disk under its
//! file (`redb::StorageBackend`, see [`crate::Store::with_backend`]).

use std::path::PathBuf;

use crate::domain::text::now_us;
use crate::error::{Error, Result};
use crate::storage::access::{Asker, DEFAULT_ADMIN};
use crate::storage::codec::{decode, encode};
use crate::storage::kv::{KvRead, KvWrite};
use crate::storage::options::Options;
use crate::storage::redb::tail::TailRepair;
use crate::storage::tables::{CHUNK_FORMAT, INDEX_FORMAT, META, STORE_FORMAT};
use crate::storage::txn::{ReadTxn, WriteTxn};

/// A read's closure, as an engine takes it (see [`read()`] for one with a result).
pub(crate) type ReadFn<'f> = dyn FnMut(&ReadTxn<'_>) -> Result<()> + 'f;

/// A write's closure, as an engine takes it; a server may run it once per attempt.
pub(crate) type WriteFn<'f> = dyn FnMut(&mut WriteTxn<'_>) -> Result<()> + 'f;

/// What every storage engine does for a store: the one seam between [`crate::Store`] and the
/// engines, object-safe, so a store holds `Arc<dyn Engine>` and nothing above names an engine.
/// Reads and writes take a closure with no result of its own; [`read()`] and [`write()`] below
/// give it one.
pub(crate) trait Engine: Send + Sync {
    /// Runs `f` over one consistent snapshot, acting as `principal` (`None`: the admin).
    fn read_with(&self, principal: Option<&str>, f: &mut ReadFn<'_>) -> Result<()>;

    /// Runs `f` in one write transaction and commits it durably, acting as `principal`. The engine's
    /// retry rule: redb waits up to the busy timeout for the one writer slot and runs `f` once;
    /// a server runs `f` again, whole, while the server asks for it, up to the busy timeout.
    fn write_with(&self, principal: Option<&str>, f: &mut WriteFn<'_>) -> Result<()>;

    /// Closes the engine (the last handle to it), reporting what dropping it cannot.
    fn close(&mut self) -> Result<()>;

    /// The engine's own integrity check, on the only handle: `Ok(true)` intact, `Ok(false)`
    /// repaired.
    fn check_integrity(&mut self) -> Result<bool>;

    /// Gives unused space back (redb: offline, on the only handle).
    fn compact(&mut self) -> Result<()>;

    /// What [`Engine::check_integrity`] and [`Engine::compact`] do when asked of a handle that
    /// is not the only one: a file refuses (they need it alone); a server, whose checks and
    /// space are its own, has nothing to do.
    fn not_alone(&self, what: &str) -> Result<()>;

    /// Overwrites what freed storage still holds of data changed or deleted by earlier commits
    /// (after a redaction). Returns how much of it stays held, because a reader (in any
    /// process) may still read it: redb's pages; 0 when nothing is held.
    fn scrub(&self) -> Result<u64>;

    /// Whether the store lives on a server.
    fn is_server(&self) -> bool;
}

/// [`Engine::read_with`] with the closure's result.
pub(crate) fn read<R>(
    engine: &(impl Engine + ?Sized),
    principal: Option<&str>,
    mut f: impl FnMut(&ReadTxn<'_>) -> Result<R>,
) -> Result<R> {
    kept(|out| engine.read_with(principal, &mut |r| keep(out, f(r))))
}

/// [`Engine::write_with`] with the closure's result (that of the attempt that committed).
pub(crate) fn write<R>(
    engine: &(impl Engine + ?Sized),
    principal: Option<&str>,
    mut f: impl FnMut(&mut WriteTxn<'_>) -> Result<R>,
) -> Result<R> {
    kept(|out| engine.write_with(principal, &mut |w| keep(out, f(w))))
}

/// The result `run` kept in its slot (the last one it kept), or an error if it kept none.
fn kept<R>(run: impl FnOnce(&mut Option<R>) -> Result<()>) -> Result<R> {
    let mut out = None;
    run(&mut out)?;
    out.ok_or_else(no_result)
}

/// Keeps `r` in `out` if it is a result; an error is the attempt's.
fn keep<R>(out: &mut Option<R>, r: Result<R>) -> Result<()> {
    *out = Some(r?);
    Ok(())
}

/// An engine that returned success without running the closure: a defect, reported.
fn no_result() -> Error {
    Error::Storage("the storage engine finished a transaction without running it".into())
}

/// The refusal of an operation that needs the only handle to a file.
pub(crate) fn only_handle(what: &str) -> Error {
    Error::invalid(
        "store",
        format!("{what} needs the only handle to the store"),
    )
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
    /// The same open, its engine wrapped (as `Arc<dyn Engine>`).
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
pub(crate) fn initialize(engine: &(impl Engine + ?Sized), principal: Option<&str>) -> Result<()> {
    write(engine, principal, |tx| {
        let kv = &mut *tx.tx;
        if META.get_for_update(kv, "format")?.is_none() {
            META.put(kv, "format", &encode(&STORE_FORMAT)?)?;
            META.put(kv, "created_us", &encode(&tx.now)?)?;
            META.put(kv, "next_scope_id", &encode(&0u32)?)?;
            let admin = tx
                .asker
                .principal()
                .map(str::to_string)
                .unwrap_or_else(|| DEFAULT_ADMIN.to_string());
            META.put(&mut *tx.tx, "admin", &encode(&admin)?)?;
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
pub(crate) fn upgrade(engine: &(impl Engine + ?Sized), opts: &Options, format: u32) -> Result<u32> {
    if format >= STORE_FORMAT || opts.read_only {
        return Ok(format);
    }
    write(engine, opts.principal.as_deref(), |tx| {
        upgrade_in(&mut *tx.tx, opts)
    })
}

/// The upgrade inside a write transaction; returns the format found.
pub(crate) fn upgrade_in(kv: &mut dyn KvWrite, opts: &Options) -> Result<u32> {
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
pub(crate) fn read_txn<'s>(kv: &'s dyn KvRead, principal: Option<&str>) -> ReadTxn<'s> {
    ReadTxn {
        tx: kv,
        asker: Asker::new(principal.map(str::to_string)),
    }
}

/// A new write transaction over `kv`, acting as `principal`, stamped now.
pub(crate) fn write_txn<'s>(kv: &'s mut dyn KvWrite, principal: Option<&str>) -> WriteTxn<'s> {
    WriteTxn {
        tx: kv,
        now: now_us(),
        config: None,
        asker: Asker::new(principal.map(str::to_string)),
    }
}
