//! The redb engine: the open database, its panic guard, and the [`Engine`] operations on it
//! (a read, a write that waits for the one writer slot, close, redb's integrity check,
//! compaction); opening or creating the file is in `opening.rs`.

mod opening;
pub(crate) use opening::with_backend;

use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redb::{Database, Durability, TransactionError, WriteTransaction};

use crate::domain::text::now_us;
use crate::error::{Error, Result};
use crate::storage::codec::{decode, encode};
use crate::storage::engine::{only_handle, read_txn, write_txn, Engine, Opened, ReadFn, WriteFn};
use crate::storage::kv::{KvRead, KvWrite};
use crate::storage::options::Options;
use crate::storage::redb::file::{engine_panic, Db};
use crate::storage::redb::journal;
use crate::storage::redb::journal_file::Journal;
use crate::storage::redb::kv::{RedbRead, RedbWrite};
use crate::storage::tables::{stored_format, JOURNAL_STORE_FORMAT, META as META_T};

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
                .read_file(|r| Ok((stored_format(r)?, marker(r)?, tail(r)?)))
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
        let (m, tail) = self.read_file(|r| Ok((marker(r)?, tail(r)?)))?;
        let m = match m {
            Some(m) => m,
            None => {
                let fresh = (u64::try_from(now_us()).unwrap_or(1), 0);
                let shared = self.shared;
                // No journal yet, so a plain durable write
                crate::storage::engine::write(&*self, None, |tx| {
                    put_marker(&mut *tx.tx, fresh)?;
                    if shared {
                        put_tail(&mut *tx.tx, journal::HEADER)?;
                    }
                    Ok(())
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
    /// [`Engine::write_with`] on a journaled handle.
    fn write_journaled(
        &self,
        journal: &Mutex<Journal>,
        principal: Option<&str>,
        f: &mut WriteFn<'_>,
    ) -> Result<()> {
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
            let plan = {
                let mut kv = RedbWrite::recording(&tx);
                f(&mut write_txn(&mut kv, principal))?;
                let plan = plan(&mut kv, &j, self.shared)?;
                kv.close()?;
                plan
            };
            self.finish(tx, plan, &mut j)?;
            Ok(j.wants_checkpoint(self.shared))
        })?;
        if due {
            // The write is acknowledged (its record is synced): a failed checkpoint leaves it
            // in the journal, and redb refuses the next write.
            let _ = self.checkpoint();
        }
        Ok(())
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
fn put_marker(w: &mut (impl KvWrite + ?Sized), m: (u64, u64)) -> Result<()> {
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
fn put_tail(w: &mut (impl KvWrite + ?Sized), at: u64) -> Result<()> {
    META_T.put(w, journal::TAIL_KEY, &encode(&at)?)
}

impl RedbEngine {
    /// Opens the file at `location` (see `opening.rs`).
    pub(crate) fn open(location: &Path, opts: &Options, create: bool) -> Result<Opened<Self>> {
        opening::open(location, opts, create)
    }

    /// Runs `f` over a snapshot of the file with redb's own transaction at hand, for the
    /// engine's bookkeeping (the journal's marker, the page checksums, the table list).
    pub(super) fn read_file<R>(&self, f: impl FnOnce(&RedbRead) -> Result<R>) -> Result<R> {
        self.guard("reading", |db| f(&RedbRead::new(db.begin_read()?)))
    }
}

impl Engine for RedbEngine {
    fn read_with(&self, principal: Option<&str>, f: &mut ReadFn<'_>) -> Result<()> {
        self.read_file(|kv| f(&read_txn(kv, principal)))
    }

    fn write_with(&self, principal: Option<&str>, f: &mut WriteFn<'_>) -> Result<()> {
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
            {
                let mut kv = RedbWrite::new(&tx);
                f(&mut write_txn(&mut kv, principal))?;
                kv.close()?;
            }
            tx.commit()?;
            Ok(())
        })
    }

    fn close(&mut self) -> Result<()> {
        self.shut()
    }

    /// redb's own check (every page checksum, the allocator state). A read-only handle checks
    /// every page checksum of the snapshot and repairs nothing (damage is [`Error::Corrupt`]).
    fn check_integrity(&mut self) -> Result<bool> {
        self.checkpoint()?;
        if matches!(self.db()?, Db::ReadOnly(_)) {
            let intact = self.read_file(|r| Ok(r.raw().verify_checksums()?))?;
            if !intact {
                return Err(crate::error::damaged_file(
                    "a page does not match its checksum".into(),
                ));
            }
            return Ok(true);
        }
        self.guard_mut("checking the file", |db| Ok(db.check_integrity()?))
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

    fn compact(&mut self) -> Result<()> {
        self.checkpoint()?;
        self.guard_mut("compacting the file", |db| {
            while db.compact()? {}
            Ok(())
        })
    }

    /// The check and compaction need the file alone.
    fn not_alone(&self, what: &str) -> Result<()> {
        Err(only_handle(what))
    }

    fn is_server(&self) -> bool {
        false
    }
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
