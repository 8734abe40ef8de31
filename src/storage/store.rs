//! The store: the handle the layers above add their operations to. It opens a store with the
//! engine its location names ([`crate::storage::any_engine::AnyEngine`]: a file or a server URL),
//! runs reads and writes on it as the handle's principal, group commit, and the settings. It
//! knows no engine: what differs between them is behind [`crate::storage::engine::Engine`]. The
//! log, the tree, wake and the importers add their operations to [`WriteTxn`] and [`ReadTxn`] in
//! their own files.

use std::any::Any;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::storage::any_engine::{self, AnyEngine};
use crate::storage::codec::encode;
use crate::storage::config::{validate_config, Config};
use crate::storage::engine;
use crate::storage::engine::Opened;
use crate::storage::group::{copy_error, Group, Job, Op};
use crate::storage::redb::tail::TailRepair;
use crate::storage::tables;
use crate::storage::txn::{ReadTxn, WriteTxn};
use crate::storage::vector_cache::VectorCache;

pub use crate::storage::options::Options;

/// The scope used when none is named.
pub const DEFAULT_SCOPE: &str = "default";

/// A somna store: every scope's log and tree, in one redb file or in one schema on a
/// PostgreSQL-protocol server (see [`crate::storage::engine`]).
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("memory.redb");
/// assert!(somna::Store::open(&path).is_err()); // only create() makes a store
/// let store = somna::Store::create(&path).unwrap();
/// let id = store.note("default", somna::NewMemory::new("the user prefers tabs")).unwrap();
/// assert_eq!(id, 0);
/// assert_eq!(store.count("default").unwrap(), 1);
/// ```
pub struct Store {
    engine: AnyEngine,
    group: Arc<Group>,
    path: PathBuf,
    opts: Options,
    repaired: Option<TailRepair>,
    insecure: Option<String>,
    created: bool,
    /// The store format when this handle opened it, before any upgrade.
    format: u32,
    /// Quantised vectors read by earlier searches, shared with this handle's clones.
    vectors: Arc<VectorCache>,
}

/// What [`Store::migrate`] did: the store format the store had when the handle opened it, and
/// the one it has now.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct Migration {
    /// The format the store had when this handle opened it.
    pub from: u32,
    /// The format it has now: this build's.
    pub to: u32,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

impl Store {
    fn opened(o: Opened<AnyEngine>, opts: Options) -> Store {
        Store {
            engine: o.engine,
            group: Arc::default(),
            path: o.shown,
            opts,
            repaired: o.repaired,
            insecure: o.insecure,
            created: o.created,
            format: o.format,
            vectors: Arc::default(),
        }
    }

    /// Creates the store at `path` (file mode 0600, parent directories 0700), or opens it if it
    /// already exists. This is `somna init`: idempotent.
    pub fn create(path: impl AsRef<Path>) -> Result<Store> {
        Self::create_with(path, Options::default())
    }

    /// [`Store::create`] with options.
    ///
    /// `path` may be a server URL (`postgresql://user@host/db?schema=name`): the schema and its
    /// tables are then created on the server (see docs/scale-out.md).
    pub fn create_with(path: impl AsRef<Path>, opts: Options) -> Result<Store> {
        let o = any_engine::open(path.as_ref(), &opts, true)?;
        Ok(Self::opened(o, opts))
    }

    /// Opens (creating it if empty) a store on a custom redb storage backend: an in-memory
    /// disk, or the fault-injecting disk of the crash tests. `name` only labels the store in
    /// messages. On a non-empty backend this is an open: the format is checked as usual.
    pub fn with_backend(
        backend: impl redb::StorageBackend,
        name: &str,
        opts: Options,
    ) -> Result<Store> {
        let o = crate::storage::redb::with_backend(backend, None, name, &opts)?;
        Ok(Self::opened(o.map(|e| Arc::new(e) as AnyEngine), opts))
    }

    /// [`Store::with_backend`] with the commit journal (docs/design.md, section 14) on a
    /// backend of its own, for the crash tests: with [`Options::exclusive`] and
    /// [`Options::journal`], commits go through it; a journal a crash left there is replayed
    /// first.
    #[doc(hidden)]
    pub fn with_backends(
        backend: impl redb::StorageBackend,
        journal: impl redb::StorageBackend,
        name: &str,
        opts: Options,
    ) -> Result<Store> {
        let o = crate::storage::redb::with_backend(backend, Some(Box::new(journal)), name, &opts)?;
        Ok(Self::opened(o.map(|e| Arc::new(e) as AnyEngine), opts))
    }

    /// Whether a store file exists (and is not empty) at `path`.
    pub fn exists(path: impl AsRef<Path>) -> bool {
        crate::storage::redb::exists(path.as_ref())
    }

    /// Opens an existing store. A missing file is [`Error::NotFound`]; nothing is created.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        Self::open_with(path, Options::default())
    }

    /// [`Store::open`] with options. With [`Options::read_only`] the file is opened read-only
    /// (see there).
    pub fn open_with(path: impl AsRef<Path>, opts: Options) -> Result<Store> {
        let o = any_engine::open(path.as_ref(), &opts, false)?;
        Ok(Self::opened(o, opts))
    }

    /// What opening this handle did to a torn tail of the file (stray bytes past its last
    /// page, moved to a side file), if it found one. Say it to the user once: the next open
    /// finds a sound file. See docs/reliability.md.
    pub fn repaired_tail(&self) -> Option<&TailRepair> {
        self.repaired.as_ref()
    }

    /// What opening this handle found unsafe in its connection to a server, if anything: a
    /// password sent without TLS to a host other than loopback (`sslmode=disable`, or `prefer`
    /// with a server that declined TLS). Say it to the user once (docs/scale-out.md, "TLS").
    pub fn insecure_connection(&self) -> Option<&str> {
        self.insecure.as_deref()
    }

    /// Whether this handle's open made the store ([`Store::create`] on a path or schema that held
    /// none).
    pub fn was_created(&self) -> bool {
        self.created
    }

    /// Whether the store lives on a server (a `postgresql://` URL) rather than in a file.
    pub fn is_server(&self) -> bool {
        self.engine.is_server()
    }

    /// Upgrades the store to this build's format (docs/design.md, sections 11 to 13: format 1
    /// to 2 builds the search index, 2 to 3 moves sessions into chunks), in one write
    /// transaction. A read-write open has already done it: this runs it again (a no-op when
    /// done) and says what happened since the handle opened the store. `somna migrate`. A store
    /// already at this format is only read: nothing is written, and the file keeps its bytes.
    /// On a read-only handle, only a store at this format is migrated (a no-op).
    pub fn migrate(&self) -> Result<Migration> {
        if !self.needs_migration()? {
            return Ok(Migration {
                from: self.format.min(tables::STORE_FORMAT),
                to: tables::STORE_FORMAT,
            });
        }
        if self.opts.read_only {
            return Err(crate::storage::engine::read_only_handle());
        }
        let opts = self.opts.clone();
        let found = self.write(|tx| crate::storage::engine::upgrade_in(&mut *tx.tx, &opts))?;
        Ok(Migration {
            from: self.format.min(found),
            to: tables::STORE_FORMAT,
        })
    }

    /// Whether the store is at an older format than this build's, which [`Store::migrate`] (or a
    /// read-write open) upgrades. Only reads.
    pub fn needs_migration(&self) -> Result<bool> {
        let stored = self.read(|r| tables::stored_format(r.tx))?;
        Ok(stored.is_some_and(|f| f < tables::STORE_FORMAT))
    }

    /// Whether this handle was opened read-only ([`Options::read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.opts.read_only
    }

    /// Another handle to the same open store that acts as `principal` (`None`: the admin).
    /// Cheap: the database is shared.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = somna::Store::create(dir.path().join("m.redb")).unwrap();
    /// store.grant("user:bob", somna::trust::Access::Read, "team/").unwrap();
    /// let bob = store.as_principal(Some("user:bob"));
    /// assert!(bob.note("team/x", somna::NewMemory::new("hi")).is_err()); // no write grant
    /// ```
    pub fn as_principal(&self, principal: Option<&str>) -> Store {
        Store {
            engine: self.engine.clone(),
            group: Arc::clone(&self.group),
            path: self.path.clone(),
            opts: self.opts.clone().principal(principal),
            repaired: self.repaired.clone(),
            insecure: self.insecure.clone(),
            created: self.created,
            format: self.format,
            vectors: Arc::clone(&self.vectors),
        }
    }

    /// The handle's cache of quantised vectors (the search's first pass).
    pub(crate) fn vector_cache(&self) -> &VectorCache {
        &self.vectors
    }

    pub(crate) fn group(&self) -> &Arc<Group> {
        &self.group
    }

    /// The principal this handle acts as (`None`: the admin).
    pub fn principal(&self) -> Option<&str> {
        self.opts.principal.as_deref()
    }

    /// The path of the store file; for a server store, its URL without the password.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The options this handle was opened with.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// Runs `f` in one write transaction and commits it durably; if `f` fails, nothing is
    /// written. Waits up to [`Options::busy_timeout`] for another writer, then fails with
    /// [`Error::Busy`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = somna::Store::create(dir.path().join("m.redb")).unwrap();
    /// use somna::NewMemory;
    /// // Two notes in two scopes, one commit: a reader sees both or neither.
    /// store.write(|tx| {
    ///     tx.note("project:a", NewMemory::new("chose postgres"))?;
    ///     tx.note("user", NewMemory::new("prefers short answers"))?;
    ///     Ok(())
    /// }).unwrap();
    /// ```
    ///
    /// On a server store `f` may run more than once (when the server asks for the transaction
    /// to be run again): it must have no effects outside the transaction.
    pub fn write<R>(&self, f: impl FnMut(&mut WriteTxn<'_>) -> Result<R>) -> Result<R> {
        engine::write(&*self.engine, self.principal(), f)
    }

    /// Runs `f` over one consistent snapshot. Keep it short: a read transaction pins pages.
    ///
    /// On a server store `f` may run more than once (after a lost connection, or a
    /// serialization failure on engines that abort reads): it must have no effects outside the
    /// snapshot, as a write's closure.
    pub fn read<R>(&self, f: impl FnMut(&ReadTxn<'_>) -> Result<R>) -> Result<R> {
        engine::read(&*self.engine, self.principal(), f)
    }

    /// Closes the store, reporting what dropping it cannot: redb writes its allocator state
    /// when the last handle closes, which fails with [`Error::Corrupt`] on a damaged file (or an
    /// I/O error). Closing a handle while others to the same database remain open only drops it.
    pub fn close(mut self) -> Result<()> {
        match Arc::get_mut(&mut self.engine) {
            Some(e) => e.close(),
            None => Ok(()),
        }
    }

    /// Runs redb's own integrity check (every page checksum, the allocator state). Returns
    /// `Ok(true)` when the file was intact, `Ok(false)` when redb repaired it. On a read-only
    /// handle it checks every page checksum of the tables and repairs nothing (damage is
    /// [`Error::Corrupt`]).
    ///
    /// A server store has no pages of ours to check (the server checksums its own): `Ok(true)`.
    pub fn check_engine_integrity(&mut self) -> Result<bool> {
        match Arc::get_mut(&mut self.engine) {
            Some(e) => e.check_integrity(),
            None => self.engine.not_alone("the integrity check").map(|()| true),
        }
    }

    /// Compacts the file (offline: needs no other handle open in this process).
    /// On a server store this does nothing: the server reclaims space itself (autovacuum).
    pub fn compact(&mut self) -> Result<()> {
        match Arc::get_mut(&mut self.engine) {
            Some(e) => e.compact(),
            None => self.engine.not_alone("compaction"),
        }
    }

    /// Overwrites what the store's freed space still holds of data changed or deleted before
    /// (what a redaction must not leave behind): on a file, one durable commit that zeroes every
    /// free page, and the commit journal's records; on a server, `VACUUM` of the store's tables.
    /// Pages a reader (in any process) may still read keep their bytes until it ends: this
    /// scrubs again, waiting up to [`Options::busy_timeout`] for readers, then fails with
    /// [`Error::Busy`] (nothing is lost: what it scrubbed stays scrubbed).
    pub fn scrub(&self) -> Result<()> {
        let start = std::time::Instant::now();
        let mut pause = std::time::Duration::from_millis(5);
        loop {
            if self.engine.scrub()? == 0 {
                return Ok(());
            }
            let waited = start.elapsed();
            if waited >= self.opts.busy_timeout {
                return Err(Error::Busy { waited });
            }
            std::thread::sleep(pause.min(self.opts.busy_timeout - waited));
            pause = (pause * 2).min(std::time::Duration::from_millis(200));
        }
    }

    /// Stores a setting (see [`crate::store::CONFIG_NAMES`]).
    pub fn set_config(&self, name: &str, value: &str) -> Result<u64> {
        let v = validate_config(name, value)?;
        self.write(|tx| {
            tx.require_admin("change settings")?;
            tables::CONFIG.put(&mut *tx.tx, name, &encode(&v)?)?;
            Ok(v)
        })
    }

    /// The store's settings.
    pub fn config(&self) -> Result<Config> {
        self.read(|r| r.config())
    }
}

impl Store {
    /// Runs `op` in a write transaction shared with other threads writing at the same moment
    /// (group commit: the queue of `storage/group.rs`). The result is as if each operation ran in its
    /// own transaction, one after the other; each returns once its write is durable. `op` may
    /// run more than once (when another operation of its batch fails), so it must own its
    /// inputs and have no side effects outside the transaction.
    pub fn write_grouped<R: Send + 'static>(
        &self,
        op: impl Fn(&mut WriteTxn<'_>) -> Result<R> + Send + Sync + 'static,
    ) -> Result<R> {
        let op: Op = Arc::new(move |tx| op(tx).map(|r| Box::new(r) as Box<dyn Any + Send>));
        let r = self
            .group()
            .submit(self.opts.principal.clone(), op, |batch| {
                self.commit_batch(batch)
            })?;
        r.downcast::<R>()
            .map(|b| *b)
            .map_err(|_| Error::Storage("group commit returned the wrong type".into()))
    }

    /// Runs a batch in one transaction; on an operation's failure, rolls back and retries
    /// without it.
    fn commit_batch(&self, mut batch: Vec<Job>) -> Vec<(u64, Result<Box<dyn Any + Send>>)> {
        let mut out = Vec::with_capacity(batch.len());
        while !batch.is_empty() {
            let mut failed: Option<(usize, Error)> = None;
            let mut oks: Vec<Box<dyn Any + Send>> = Vec::with_capacity(batch.len());
            let r = self.write(|tx| {
                // A server may run this again: each attempt starts afresh.
                oks.clear();
                failed = None;
                for (i, job) in batch.iter().enumerate() {
                    tx.asker.set_principal(job.principal.clone());
                    match (job.op)(tx) {
                        Ok(v) => oks.push(v),
                        Err(e) => {
                            failed = Some((i, e));
                            return Err(Error::Conflict("batch rolled back".into()));
                        }
                    }
                }
                Ok(())
            });
            match (r, failed) {
                (Ok(()), _) => {
                    out.extend(batch.drain(..).map(|j| j.id).zip(oks.into_iter().map(Ok)));
                }
                (Err(_), Some((i, e))) => {
                    // Report the failing operation, then run the rest again without it.
                    if i < batch.len() {
                        let job = batch.remove(i);
                        out.push((job.id, Err(e)));
                    }
                }
                (Err(e), None) => {
                    // The transaction itself failed (busy, I/O): every operation gets the error,
                    // the last one the original.
                    let mut jobs: Vec<u64> = batch.drain(..).map(|j| j.id).collect();
                    let last = jobs.pop();
                    out.extend(jobs.into_iter().map(|id| (id, Err(copy_error(&e)))));
                    if let Some(id) = last {
                        out.push((id, Err(e)));
                    }
                }
            }
        }
        out
    }
}

/// [`Store`] methods that each run the [`ReadTxn`] method of the same name over one snapshot
/// (`read fn`) or the [`WriteTxn`] method of the same name in a transaction of its own
/// (`write fn`), each declared in one line beside the others of its concept.
macro_rules! store_calls {
    ($($(#[$m:meta])* $how:ident fn $name:ident($($a:ident: $t:ty),* $(,)?) -> $r:ty;)*) => {
        impl $crate::storage::store::Store {$(
            $(#[$m])*
            pub fn $name(&self, $($a: $t),*) -> $crate::error::Result<$r> {
                self.$how(|tx| tx.$name($($a),*))
            }
        )*}
    };
}
pub(crate) use store_calls;
