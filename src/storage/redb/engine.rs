//! The redb engine: the open database, its panic guard, and the [`Engine`] operations on it
//! (a read, a write that waits for the one writer slot, close, redb's integrity check,
//! compaction), and opening or creating the file: a new file is built under a temporary name
//! and linked into place whole; a read-write open first recovers a torn tail ([`super::tail`]);
//! a read-only open gets one read-write open first when the file needs a writer; the format is
//! checked and missing tables are added.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use redb::{Database, Durability, TableError, TransactionError, WriteTransaction};

use crate::domain::text::now_us;
use crate::error::{Error, Result};
use crate::storage::any_kv::{ReadKv, WriteKv};
use crate::storage::codec::{decode, encode};
use crate::storage::engine::{
    check_format_value, initialize, read_txn, upgrade, write_txn, Engine, Opened,
};
use crate::storage::kv::{KvRead, KvWrite};
use crate::storage::options::Options;
use crate::storage::redb::file::{
    builder, claim_empty, engine_panic, exists, make_parent, may_not_write, open_bounded, Db,
};
use crate::storage::redb::journal::{self, Journal};
use crate::storage::redb::kv::{RedbRead, RedbWrite};
use crate::storage::redb::schema::{self, META, STORE_FORMAT};
use crate::storage::redb::tail::{self, TailRepair};
use crate::storage::tables::{
    stored_format, CHECKPOINT_TABLES, CHUNK_FORMAT, EMBED_FORMAT, INDEX_FORMAT,
    JOURNAL_STORE_FORMAT, META as META_T, SEARCH_TABLES,
};
use crate::storage::txn::{ReadTxn, WriteTxn};

/// The open database, and the first failure of the storage engine on it.
///
/// redb trusts a file that was closed cleanly and may panic on a page damaged since (an
/// out-of-range slice index in its B-tree code). Every transaction runs under [`RedbEngine::guard`],
/// which catches such a panic, records it here and returns [`Error::Corrupt`]. From then on every
/// operation on this database fails with the same error without touching the file, and the
/// database is not closed when the last handle goes (closing commits redb's allocator state,
/// which would write into the damaged file): it is leaked, file descriptor and cache included,
/// and the next open of the file repairs or refuses it.
pub(crate) struct RedbEngine {
    db: Option<Db>,
    failed: std::sync::OnceLock<String>,
    /// How long a writer waits for the writer slot ([`Options::busy_timeout`]).
    busy: Duration,
    /// The commit journal of an exclusive handle ([`Options::journal`]). Its lock is taken
    /// only by a thread that holds redb's writer slot, so it never waits on it.
    journal: Option<Mutex<Journal>>,
    /// The journal is the shared one (the multi-writer mode, [`Options::shared_journal`]): each
    /// write continues it from the marker and tail of the commit it starts from, and commits
    /// through redb's journaled commit.
    shared: bool,
    /// Why a commit failed to write the journal: every later write refuses (the redb
    /// transaction was aborted, but the journal's tail is unknown until the next open).
    journal_failed: std::sync::OnceLock<String>,
}

impl RedbEngine {
    pub(super) fn new(db: Db, opts: &Options) -> RedbEngine {
        RedbEngine {
            db: Some(db),
            failed: std::sync::OnceLock::new(),
            busy: opts.busy_timeout,
            journal: None,
            shared: !opts.exclusive,
            journal_failed: std::sync::OnceLock::new(),
        }
    }

    fn db(&self) -> Result<&Db> {
        if let Some(reason) = self.failed.get() {
            return Err(crate::error::damaged_file(reason.clone()));
        }
        self.db
            .as_ref()
            .ok_or_else(|| crate::error::damaged_file("the store is closed".into()))
    }

    /// Runs `f` on the database, turning a panic of the storage engine into `Error::Corrupt`
    /// and marking the engine failed.
    pub(super) fn guard<R>(&self, during: &str, f: impl FnOnce(&Db) -> Result<R>) -> Result<R> {
        let db = self.db()?;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(db)))
            .unwrap_or_else(|p| Err(self.fail(during, p)))
    }

    /// Records a panic of the engine: from now on every call fails with the returned error.
    fn fail(&self, during: &str, panic: Box<dyn std::any::Any + Send>) -> Error {
        let e = engine_panic(during, panic);
        if let Error::Corrupt { reason, .. } = &e {
            let _ = self.failed.set(reason.clone());
        }
        e
    }

    /// [`RedbEngine::guard`] for the operations that need the database to themselves.
    fn guard_mut<R>(
        &mut self,
        during: &str,
        f: impl FnOnce(&mut Database) -> Result<R>,
    ) -> Result<R> {
        if let Some(reason) = self.failed.get() {
            return Err(crate::error::damaged_file(reason.clone()));
        }
        let db = self
            .db
            .as_mut()
            .ok_or_else(|| crate::error::damaged_file("the store is closed".into()))?
            .writable_mut()?;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(db)))
            .unwrap_or_else(|p| Err(self.fail(during, p)))
    }

    /// Closes the database: redb commits its allocator state. A failed engine is not closed.
    /// A journaled engine checkpoints first, so the file alone holds every commit.
    fn shut(&mut self) -> Result<()> {
        // Not while a panic unwinds (a drop then): redb leaves the pages a panicking
        // transaction held checked out, and the journal's records keep every write anyway
        let checkpoint =
            if self.db.is_some() && self.failed.get().is_none() && !std::thread::panicking() {
                self.checkpoint()
            } else {
                Ok(())
            };
        let Some(db) = self.db.take() else {
            return Ok(());
        };
        if let Some(reason) = self.failed.get() {
            std::mem::forget(db);
            return Err(crate::error::damaged_file(reason.clone()));
        }
        let closed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| db.close()))
            .unwrap_or_else(|p| Err(engine_panic("closing the file", p)));
        checkpoint.and(closed)
    }

    /// A checkpoint of the commit journal (nothing without one): one durable redb commit that
    /// sets the applied marker to (epoch + 1, 0), which makes every earlier commit without a
    /// sync durable too; the journal then starts over from its top in the new epoch.
    fn checkpoint(&self) -> Result<()> {
        let Some(journal) = &self.journal else {
            return Ok(());
        };
        self.guard("checkpointing the journal", |db| {
            let tx = begin_write(db.writable()?, self.busy)?;
            let mut j = lock(journal)?;
            {
                let mut w = RedbWrite::new(&tx);
                // The shared journal's epoch is the published commit's, whoever wrote it
                let epoch = match (self.shared, marker(&w)?) {
                    (true, Some(m)) => m.0,
                    _ => j.epoch(),
                };
                let next = epoch + 1;
                put_marker(&mut w, (next, 0))?;
                if self.shared {
                    put_tail(&mut w, journal::HEADER)?;
                }
                w.close()?;
                j.reset(next);
            }
            tx.commit()?;
            Ok(())
        })
    }

    /// Replays the commit journal a crash left (docs/design.md, "Commit journal"): on a
    /// read-write handle, the records past redb's applied marker are applied in one durable
    /// transaction that also moves the marker to (epoch + 1, 0); a read-only handle refuses a
    /// store with such records ([`Error::ReadOnly`], which a read-only open answers with one
    /// read-write open first).
    fn replay(&self, io: Option<&dyn redb::StorageBackend>, jpath: &Path) -> Result<()> {
        let Some(io) = io else {
            return Ok(());
        };
        if matches!(self.db()?, Db::ReadOnly(_)) {
            let (format, m, tail) = self
                .read(None, |r| {
                    Ok((stored_format(&r.tx)?, marker(&r.tx)?, tail(&r.tx)?))
                })
                .unwrap_or((None, None, None));
            let n = match (format, m) {
                (Some(f), Some(m)) if f >= JOURNAL_STORE_FORMAT => {
                    journal::pending(io, jpath, m, tail)?.len()
                }
                _ => 0,
            };
            if n > 0 {
                return Err(Error::ReadOnly(format!(
                    "its journal {} holds {n} acknowledged commits that a read-write open applies",
                    jpath.display()
                )));
            }
            return Ok(());
        }
        self.guard("replaying the journal", |db| {
            let tx = begin_write(db.writable()?, self.busy)?;
            {
                let mut w = RedbWrite::new(&tx);
                match stored_format(&w)? {
                    Some(f) if f >= JOURNAL_STORE_FORMAT => {}
                    _ => return Ok(()),
                }
                // No marker: no journal was ever written for this store (the first journaled
                // open sets one before its first record), so this file is another store's.
                let Some(m) = marker(&w)? else {
                    return Ok(());
                };
                let tail = tail(&w)?;
                let todo = journal::pending(io, jpath, m, tail)?;
                // The shared journal (it keeps a tail) goes on from its marker in every
                // process: only records past it need a commit
                if todo.is_empty() && (m.1 == 0 || tail.is_some()) {
                    return Ok(());
                }
                for r in &todo {
                    apply(&mut w, r, jpath)?;
                }
                put_marker(&mut w, (m.0 + 1, 0))?;
                if tail.is_some() {
                    put_tail(&mut w, journal::HEADER)?;
                }
                w.close()?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    /// Starts the commit journal of an exclusive read-write handle, after [`RedbEngine::replay`]:
    /// new records continue redb's marker epoch from seq 1. A store without a marker gets one
    /// first, durably, at epoch = now in microseconds, so a stale journal left by another store
    /// at this path (whose epochs count from its own first open) never matches; a marker past
    /// seq 0 with no journal to match (one deleted by hand) gets a checkpoint first.
    fn start_journal(&mut self, open: impl FnOnce(u64) -> Result<Journal>) -> Result<()> {
        let (m, tail) = self.read(None, |r| Ok((marker(&r.tx)?, tail(&r.tx)?)))?;
        let m = match m {
            Some(m) => m,
            None => {
                let fresh = (u64::try_from(now_us()).unwrap_or(1), 0);
                let shared = self.shared;
                self.write(None, |tx| match &mut tx.tx {
                    WriteKv::Redb(w) => {
                        put_marker(w, fresh)?;
                        if shared {
                            put_tail(w, journal::HEADER)?;
                        }
                        Ok(())
                    }
                    WriteKv::Pg(_) => Ok(()),
                })?;
                fresh
            }
        };
        let j = open(m.0)?;
        self.journal = Some(Mutex::new(j));
        // An exclusive journal starts over; the shared one goes on where the published commit
        // left it (other processes may be writing it), once it keeps a tail
        if (m.1 > 0 && !self.shared) || (self.shared && tail.is_none()) {
            self.checkpoint()?;
        }
        Ok(())
    }

    /// Commits a journaled write transaction, as [`plan`] decided (see docs/design.md,
    /// "Commit journal"): nothing changed, a commit without a sync; a record, written and
    /// synced before redb commits without a sync (a failure of either refuses every later
    /// write); a record too large for the journal, a durable redb commit (a checkpoint of its
    /// own).
    fn finish(&self, mut tx: WriteTransaction, plan: Plan, j: &mut Journal) -> Result<()> {
        match plan {
            Plan::Nothing if self.shared => Ok(tx.commit_journaled()?),
            Plan::Nothing => {
                tx.set_durability(Durability::None)?;
                Ok(tx.commit()?)
            }
            Plan::Durable(epoch) => {
                tx.commit()?;
                j.reset(epoch);
                Ok(())
            }
            Plan::Record(rec) => {
                if let Err(e) = j.append(&rec) {
                    // Dropping `tx` aborts the redb transaction.
                    let _ = self.journal_failed.set(e.to_string());
                    return Err(e.into());
                }
                let committed = if self.shared {
                    tx.commit_journaled()
                } else {
                    tx.set_durability(Durability::None)?;
                    tx.commit()
                };
                committed.map_err(|e| {
                    let _ = self.journal_failed.set(e.to_string());
                    Error::from(e)
                })
            }
        }
    }
}

impl Drop for RedbEngine {
    fn drop(&mut self) {
        // Drop cannot report an error; `Store::close` does.
        let _ = self.shut();
    }
}

impl RedbEngine {
    /// [`Engine::write`] on a journaled handle.
    fn write_journaled<R>(
        &self,
        journal: &Mutex<Journal>,
        principal: Option<&str>,
        mut f: impl FnMut(&mut WriteTxn<'_>) -> Result<R>,
    ) -> Result<R> {
        let due = self.guard("writing", |db| {
            let tx = begin_write(db.writable()?, self.busy)?;
            let mut j = lock(journal)?;
            if self.shared {
                // Another process may have written records since this handle's last
                let r = RedbWrite::new(&tx);
                if let (Some(m), Some(at)) = (marker(&r)?, tail(&r)?) {
                    j.follow(m, at);
                }
                r.close()?;
            }
            // The seam's tables borrow `tx` until `w` goes; the commit takes it.
            let (r, plan) = {
                let mut w = write_txn(WriteKv::Redb(RedbWrite::recording(&tx)), principal);
                let r = f(&mut w)?;
                let WriteKv::Redb(t) = &mut w.tx else {
                    return Err(Error::Storage("a redb transaction changed engine".into()));
                };
                let plan = plan(t, &j, self.shared)?;
                t.close()?;
                (r, plan)
            };
            self.finish(tx, plan, &mut j)?;
            Ok((r, j.wants_checkpoint(self.shared)))
        })?;
        let (r, due) = due;
        if due {
            // The write is acknowledged (its record is synced): a failed checkpoint leaves it
            // in the journal, and redb refuses the next write.
            let _ = self.checkpoint();
        }
        Ok(r)
    }
}

/// Applies one record's changes through the seam; a payload that does not decode is
/// [`Error::Corrupt`] naming the journal and the record.
fn apply(w: &mut RedbWrite<'_>, r: &journal::Found, path: &Path) -> Result<()> {
    let ops = journal::decode(&r.payload).ok_or_else(|| {
        journal::corrupt(
            path,
            format_args!("record {}.{}", r.epoch, r.seq),
            "its checksum matches but its changes do not decode",
        )
    })?;
    for op in ops {
        match op {
            journal::Op::Put(t, k, v) => w.put(t, k, v)?,
            journal::Op::Delete(t, k) => {
                w.delete(t, k)?;
            }
            journal::Op::DeleteRange(t, lo, hi) => {
                w.delete_range(t, lo, hi)?;
            }
        }
    }
    Ok(())
}

/// How a journaled transaction commits.
enum Plan {
    /// It changed nothing: no record.
    Nothing,
    /// This record goes to the journal first.
    Record(Vec<u8>),
    /// Too large for the journal: a durable commit that starts this epoch.
    Durable(u64),
}

/// Takes the transaction's changes and puts the applied marker that goes with them.
/// With the `shared` journal the tail after the record goes with the marker.
fn plan(w: &mut RedbWrite<'_>, j: &Journal, shared: bool) -> Result<Plan> {
    let ops = w.take_ops();
    if ops.is_empty() {
        return Ok(Plan::Nothing);
    }
    let (epoch, seq) = j.next();
    let rec = journal::record(epoch, seq, &ops.payload())?;
    if j.fits(rec.len()) {
        put_marker(w, (epoch, seq))?;
        if shared {
            put_tail(w, j.tail() + rec.len() as u64)?;
        }
        Ok(Plan::Record(rec))
    } else {
        put_marker(w, (epoch + 1, 0))?;
        if shared {
            put_tail(w, journal::HEADER)?;
        }
        Ok(Plan::Durable(epoch + 1))
    }
}

/// The journal behind its lock.
fn lock(j: &Mutex<Journal>) -> Result<std::sync::MutexGuard<'_, Journal>> {
    j.lock()
        .map_err(|_| Error::Storage("the commit journal's lock is poisoned".into()))
}

/// The applied marker of the commit journal in `meta` (`None` when none was ever set).
fn marker(kv: &(impl KvRead + ?Sized)) -> Result<Option<(u64, u64)>> {
    META_T
        .get(kv, journal::MARKER_KEY)?
        .map(|v| decode::<(u64, u64)>("meta", &journal::MARKER_KEY, &v))
        .transpose()
}

/// Sets the applied marker.
fn put_marker(w: &mut RedbWrite<'_>, m: (u64, u64)) -> Result<()> {
    META_T.put(w, journal::MARKER_KEY, &encode(&m)?)
}

/// The shared journal's tail in `meta` (`None` when no shared journal was ever written).
fn tail(kv: &(impl KvRead + ?Sized)) -> Result<Option<u64>> {
    META_T
        .get(kv, journal::TAIL_KEY)?
        .map(|v| decode::<u64>("meta", &journal::TAIL_KEY, &v))
        .transpose()
}

/// Sets the shared journal's tail.
fn put_tail(w: &mut RedbWrite<'_>, at: u64) -> Result<()> {
    META_T.put(w, journal::TAIL_KEY, &encode(&at)?)
}

impl Engine for RedbEngine {
    fn open(location: &Path, opts: &Options, create: bool) -> Result<Opened<Self>> {
        open(location, opts, create)
    }

    fn read<R>(
        &self,
        principal: Option<&str>,
        mut f: impl FnMut(&ReadTxn) -> Result<R>,
    ) -> Result<R> {
        self.guard("reading", |db| {
            f(&read_txn(
                ReadKv::Redb(RedbRead::new(db.begin_read()?)),
                principal,
            ))
        })
    }

    fn write<R>(
        &self,
        principal: Option<&str>,
        mut f: impl FnMut(&mut WriteTxn<'_>) -> Result<R>,
    ) -> Result<R> {
        if let Some(why) = self.journal_failed.get() {
            return Err(Error::Storage(format!(
                "an earlier commit failed ({why}); reopen the store to write again"
            )));
        }
        if let Some(journal) = &self.journal {
            return self.write_journaled(journal, principal, f);
        }
        self.guard("writing", |db| {
            let tx = begin_write(db.writable()?, self.busy)?;
            let r = {
                let mut w = write_txn(WriteKv::Redb(RedbWrite::new(&tx)), principal);
                let r = f(&mut w)?;
                if let WriteKv::Redb(t) = &w.tx {
                    t.close()?;
                }
                r
            };
            tx.commit()?;
            Ok(r)
        })
    }

    fn close(mut self) -> Result<()> {
        self.shut()
    }

    /// redb's own check (every page checksum, the allocator state). A read-only handle checks
    /// every page checksum of the snapshot and repairs nothing (damage is [`Error::Corrupt`]).
    fn check_integrity(this: &mut Arc<Self>) -> Result<bool> {
        let engine = only(this, "the integrity check")?;
        engine.checkpoint()?;
        if matches!(engine.db()?, Db::ReadOnly(_)) {
            let intact = engine.read(None, |r| Ok(r.tx.redb()?.raw().verify_checksums()?))?;
            if !intact {
                return Err(crate::error::damaged_file(
                    "a page does not match its checksum".into(),
                ));
            }
            return Ok(true);
        }
        engine.guard_mut("checking the file", |db| Ok(db.check_integrity()?))
    }

    /// A checkpoint of the journal (its records then durable in redb), one durable commit that
    /// zeroes every free page of the file (redb's `commit_scrubbing_free_pages`), and, when no
    /// page stays held, the journal's records zeroed too.
    fn scrub(&self) -> Result<u64> {
        if matches!(self.db()?, Db::ReadOnly(_)) {
            return Ok(0);
        }
        self.checkpoint()?;
        let held = self.guard("scrubbing freed pages", |db| {
            let tx = begin_write(db.writable()?, self.busy)?;
            Ok(tx.commit_scrubbing_free_pages()?.held)
        })?;
        if held == 0 {
            if let Some(journal) = &self.journal {
                lock(journal)?
                    .scrub()
                    .map_err(|e| Error::Storage(format!("scrubbing the journal: {e}")))?;
            }
        }
        Ok(held)
    }

    fn compact(this: &mut Arc<Self>) -> Result<()> {
        let engine = only(this, "compaction")?;
        engine.checkpoint()?;
        engine.guard_mut("compacting the file", |db| {
            while db.compact()? {}
            Ok(())
        })
    }
}

/// The engine, when this is the only handle to it.
fn only<'a, E>(e: &'a mut Arc<E>, what: &str) -> Result<&'a mut E> {
    Arc::get_mut(e).ok_or_else(|| {
        Error::invalid(
            "store",
            format!("{what} needs the only handle to the store"),
        )
    })
}

/// Begins a write transaction, waiting up to `busy` for another writer (thread or process).
fn begin_write(db: &Database, busy: Duration) -> Result<WriteTransaction> {
    let start = Instant::now();
    let mut pause = Duration::from_micros(200);
    loop {
        match db.try_begin_write() {
            Ok(tx) => return Ok(tx),
            Err(TransactionError::WouldBlock) => {
                let waited = start.elapsed();
                if waited >= busy {
                    return Err(Error::Busy { waited });
                }
                std::thread::sleep(pause.min(busy - waited));
                pause = (pause * 2).min(Duration::from_millis(20));
            }
            Err(e) => return Err(e.into()),
        }
    }
}

/// Opens the file at `path`; with `create`, builds it first when there is none.
fn open(path: &Path, opts: &Options, create: bool) -> Result<Opened<RedbEngine>> {
    if create && !exists(path) {
        let made = make_file(path, opts)?;
        let mut opened = open(path, opts, false)?;
        opened.created = made;
        return Ok(opened);
    }
    if !exists(path) {
        return Err(Error::NotFound {
            path: path.to_path_buf(),
        });
    }
    if opts.read_only {
        open_reader(path, opts)
    } else {
        open_writer(path, opts)
    }
}

/// Opens (creating it if empty) a store on a custom redb storage backend, with its commit
/// journal on `journal` if given (see [`crate::Store::with_backend`] and
/// [`crate::Store::with_backends`]); `name` only labels it in messages.
pub(crate) fn with_backend(
    backend: impl redb::StorageBackend,
    journal: Option<Box<dyn redb::StorageBackend>>,
    name: &str,
    opts: &Options,
) -> Result<Opened<RedbEngine>> {
    let db = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        builder(opts).create_with_backend(backend)
    })) {
        Ok(r) => r?,
        Err(p) => return Err(engine_panic("opening the file", p)),
    };
    let mut engine = RedbEngine::new(Db::ReadWrite(db), opts);
    let jpath = journal::path_of(Path::new(name));
    let fresh = engine.read(None, |r| match r.tx.redb()?.raw().open_table(META) {
        Ok(_) => Ok(false),
        Err(TableError::TableDoesNotExist(_)) => Ok(true),
        Err(e) => Err(e.into()),
    })?;
    let format = if fresh {
        initialize(&engine, opts.principal.as_deref())?;
        STORE_FORMAT
    } else {
        if let Some(j) = &journal {
            engine.replay(Some(j.as_ref()), &jpath)?;
        }
        check_format(&engine, Path::new(name), opts)?
    };
    if let Some(j) = journal.filter(|_| opts.journal && (opts.exclusive || opts.shared_journal)) {
        engine.start_journal(|epoch| Journal::on(j, &jpath, opts.journal_bytes, epoch))?;
    }
    Ok(Opened {
        engine,
        shown: PathBuf::from(name),
        created: false,
        repaired: None,
        insecure: None,
        format,
    })
}

/// Builds a new store file at `path`; false when another process made it first.
fn make_file(path: &Path, opts: &Options) -> Result<bool> {
    make_parent(path)?;
    // The store is built under a temporary name beside its path and linked into place only
    // once it is complete, so a crash during `init` never leaves a half-made store at the
    // path (which nothing could open).
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "store".into());
    let tmp = path.with_file_name(format!(".{name}.init-{}-{}", std::process::id(), now_us()));
    let built = build(&tmp, path, opts);
    let _ = std::fs::remove_file(&tmp);
    let made = built?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(made)
}

/// Builds and initializes a store at `tmp`, then links it to `path`; false when another
/// process made `path` first.
fn build(tmp: &Path, path: &Path, opts: &Options) -> Result<bool> {
    let mut o = OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o.open(tmp)?;
    let db = builder(opts).create(tmp)?;
    let engine = RedbEngine::new(Db::ReadWrite(db), opts);
    initialize(&engine, opts.principal.as_deref())?;
    drop(engine);
    // Through a writable handle: Windows' FlushFileBuffers refuses a read-only one.
    std::fs::OpenOptions::new()
        .write(true)
        .open(tmp)?
        .sync_all()?;
    match std::fs::hard_link(tmp, path) {
        Ok(()) => Ok(true),
        // An empty file at the path (`touch`, a failed copy) holds no store: take its place.
        // Another process created the store first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => claim_empty(tmp, path),
        Err(e) => Err(e.into()),
    }
}

/// A read-write open, which first recovers a torn tail (see [`crate::Store::repaired_tail`]).
fn open_writer(path: &Path, opts: &Options) -> Result<Opened<RedbEngine>> {
    let lengths = tail::repair_lengths(path)?;
    if lengths.is_empty() {
        return open_file(path, opts, None);
    }
    let mut first_error = None;
    for len in lengths {
        let repair = tail::cut(path, len).map_err(|e| may_not_write(path, e))?;
        // A repair is kept only if every page of the recovered store matches its checksum:
        // a cut that took live bytes must stay an error, never become wrong answers.
        match open_file(path, opts, Some(repair.clone())) {
            Ok(opened) => return Ok(opened),
            Err(e) => {
                tail::undo(path, &repair)?;
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => open_file(path, opts, None),
    }
}

/// A read-only open. What needs a writer first (a crash to recover, a torn tail, tables
/// to add) gets one read-write open, when the user may write the file.
fn open_reader(path: &Path, opts: &Options) -> Result<Opened<RedbEngine>> {
    let torn = !tail::repair_lengths(path)?.is_empty();
    let why = if torn {
        "it has a torn tail (stray bytes past its last page) to move aside".to_string()
    } else {
        match open_file(path, opts, None) {
            Err(Error::ReadOnly(why)) => why,
            other => return other,
        }
    };
    let writer = open_writer(path, &opts.clone().read_only(false)).map_err(|e| match e {
        Error::ReadOnly(_) => Error::ReadOnly(format!(
            "{} needs one open by a user who may write it, because {why}: run `somna verify` as such a user",
            path.display()
        )),
        e => e,
    })?;
    writer.engine.close()?;
    let mut opened = open_file(path, opts, None)?;
    opened.repaired = writer.repaired;
    Ok(opened)
}

/// One open of the file; `repaired` is what [`open_writer`] cut off first, if anything.
fn open_file(
    path: &Path,
    opts: &Options,
    mut repaired: Option<TailRepair>,
) -> Result<Opened<RedbEngine>> {
    let (db, fell_back) = open_bounded(opts, path).map_err(|e| may_not_write(path, e))?;
    if let Some(r) = &mut repaired {
        r.dropped_newest_commit = fell_back;
    }
    let mut engine = RedbEngine::new(db, opts);
    if let Some(r) = &repaired {
        // A repair is kept only if every page of the recovered store matches its checksum:
        // a cut that took live bytes must stay an error, never become wrong answers.
        let intact = engine.read(None, |t| Ok(t.tx.redb()?.raw().verify_checksums()?))?;
        if !intact {
            return Err(crate::error::damaged_file(format!(
                "its end was cut inside a page that holds data ({} bytes, {} expected)",
                r.old_len, r.new_len
            )));
        }
    }
    engine.replay(
        journal::open_existing(path)?.as_deref(),
        &journal::path_of(path),
    )?;
    let format = check_format(&engine, path, opts).map_err(|e| match &repaired {
        // What the repair dropped the newest commit for may not be a store at all (a commit
        // from before the store was made): damage, not a file of another kind
        Some(r) if r.dropped_newest_commit => crate::error::damaged_file(format!(
            "its end was cut, and its newest commit, whose checksums then failed, was dropped for one that is not a whole somna store ({e})"
        )),
        _ => e,
    })?;
    if opts.journal && (opts.exclusive || opts.shared_journal) && !opts.read_only {
        engine.start_journal(|epoch| Journal::open(path, opts.journal_bytes, epoch))?;
    }
    Ok(Opened {
        engine,
        shown: path.to_path_buf(),
        created: false,
        repaired,
        insecure: None,
        format,
    })
}

/// Checks the format of an open file, adds the tables of a newer somna it lacks, and upgrades
/// a store of an older format (sections 12.5 and 13.4 of docs/design.md); returns the format
/// it had.
fn check_format(engine: &RedbEngine, path: &Path, opts: &Options) -> Result<u32> {
    let (missing, format) = engine.guard("reading the store header", |db| read_format(db, path))?;
    // A read-only handle reads a store of an older format as it is (a format-1 store without
    // the search tables, which only search needs; a format-2 store without the session chunks,
    // its sessions read from the format-2 tables; neither with LangGraph's tables, which only
    // its verbs need); its next read-write open adds them and upgrades the store.
    let only_index = missing.iter().all(|t| {
        CHECKPOINT_TABLES.contains(t)
            || (format < INDEX_FORMAT && SEARCH_TABLES.contains(t))
            || (format < CHUNK_FORMAT && *t == "session_chunks")
            || (format < EMBED_FORMAT && *t == "embeddings")
    });
    let readable_as_is = missing.is_empty() || (opts.read_only && only_index);
    if !readable_as_is {
        if opts.read_only {
            return Err(Error::ReadOnly(
                "it lacks tables that this somna adds on its first read-write open".into(),
            ));
        }
        engine.write(opts.principal.as_deref(), |tx| tx.ensure_tables())?;
    }
    upgrade(engine, opts, format)
}

/// Checks the format number; returns the tables of this somna that the file lacks, and the
/// format.
fn read_format(db: &Db, path: &Path) -> Result<(Vec<&'static str>, u32)> {
    let rtx = db.begin_read()?;
    let meta = match rtx.open_table(META) {
        Ok(t) => t,
        Err(TableError::TableDoesNotExist(_)) => {
            // Other somna tables without `meta`: a damaged table directory, not a
            // foreign file.
            let ours = rtx
                .list_tables()?
                .filter(|t| schema::TABLE_NAMES.contains(&redb::TableHandle::name(t)))
                .count();
            if ours > 0 {
                return Err(crate::error::damaged_file(format!(
                    "the table directory is damaged (table meta is missing, {ours} other somna tables are present)"
                )));
            }
            return Err(Error::Unsupported(format!(
                "{} is a redb file but not a somna store",
                path.display()
            )));
        }
        Err(e) => return Err(e.into()),
    };
    let Some(v) = meta.get("format")? else {
        if redb::ReadableTableMetadata::len(&meta)? > 0 {
            return Err(crate::error::damaged_file(
                "the meta table is damaged (its format entry is missing)".into(),
            ));
        }
        return Err(Error::Unsupported(format!(
            "{} is a redb file but not a somna store",
            path.display()
        )));
    };
    let format = check_format_value(v.value())?;
    drop(v);
    drop(meta);
    let have: Vec<String> = rtx
        .list_tables()?
        .map(|t| redb::TableHandle::name(&t).to_string())
        .collect();
    // A table name this somna does not know means a damaged table directory (or a newer
    // somna's table): then nothing is created, and a read of a missing table reports it.
    let missing = if have
        .iter()
        .any(|h| !schema::TABLE_NAMES.contains(&h.as_str()))
    {
        Vec::new()
    } else {
        schema::TABLE_NAMES
            .iter()
            .copied()
            .filter(|n| !have.iter().any(|h| h == n))
            .collect()
    };
    Ok((missing, format))
}
