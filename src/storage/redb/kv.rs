//! The redb engine's side of the storage seam ([`crate::storage::kv`]), keeping store format 1
//! byte for byte: the tables stay the typed redb tables of [`crate::storage::redb::schema`],
//! reached through the generic operations of `typed.rs` (the seam's bytes
//! as typed keys and back), one enum variant per table.
//!
//! Each transaction opens a table once, on its first use, and keeps it open until the transaction
//! ends (redb allows one open instance of a table per write transaction, so [`RedbWrite`] hands
//! out shared borrows for reads and scans, and an exclusive one for each change).

use std::cell::{OnceCell, RefCell};
use std::ops::Bound;

use redb::{ReadOnlyTable, ReadTransaction, WriteTransaction};

use crate::error::{Error, Result};
use crate::storage::kv::{KvRead, KvWrite, Seen, Span, TableId, Visit};
use crate::storage::redb::journal::Ops;
use crate::storage::redb::schema;
use crate::storage::redb::typed::{delete_in, delete_range_in, get_in, put_in, scan_in};
/// The reads of an open table, written once for both kinds ([`ReadT`] and [`WriteT`]): redb's
/// read-only and writable tables implement the same `ReadableTable`.
macro_rules! readable {
    ($t:ident $(<$lt:lifetime>)?; $($id:ident: $k:ty, $v:ty;)*) => {
        impl $t $(<$lt>)? {
            fn get(&self, id: TableId, key: &[u8], f: &mut Seen<'_>) -> Result<bool> {
                match self {
                    $($t::$id(t) => get_in::<$k, $v, _>(t, id, key, f),)*
                }
            }

            fn scan(&self, id: TableId, span: Span<'_>, f: &mut Visit<'_>) -> Result<()> {
                match self {
                    $($t::$id(t) => scan_in::<$k, $v, _>(t, id, span, f),)*
                }
            }
        }
    };
}

/// The tables of format 1: the seam's id, the redb definition, its key and value types.
macro_rules! redb_tables {
    ($($id:ident => $def:ident: $k:ty, $v:ty;)*) => {
        /// A table open in a read transaction.
        enum ReadT {
            $($id(ReadOnlyTable<$k, $v>),)*
        }

        /// A table open in a write transaction.
        enum WriteT<'t> {
            $($id(redb::Table<'t, $k, $v>),)*
        }

        fn open_read(tx: &ReadTransaction, id: TableId) -> Result<ReadT> {
            Ok(match id {
                $(TableId::$id => ReadT::$id(tx.open_table(schema::$def)?),)*
            })
        }

        fn open_write<'t>(tx: &'t WriteTransaction, id: TableId) -> Result<WriteT<'t>> {
            Ok(match id {
                $(TableId::$id => WriteT::$id(tx.open_table(schema::$def)?),)*
            })
        }

        readable!(ReadT; $($id: $k, $v;)*);
        readable!(WriteT<'_>; $($id: $k, $v;)*);

        impl WriteT<'_> {
            fn put(&mut self, id: TableId, key: &[u8], value: &[u8]) -> Result<()> {
                match self {
                    $(WriteT::$id(t) => put_in::<$k, $v>(t, id, key, value),)*
                }
            }

            fn delete(&mut self, id: TableId, key: &[u8]) -> Result<bool> {
                match self {
                    $(WriteT::$id(t) => delete_in::<$k, $v>(t, id, key),)*
                }
            }

            fn delete_range(
                &mut self,
                id: TableId,
                lo: Bound<&[u8]>,
                hi: Bound<&[u8]>,
            ) -> Result<u64> {
                match self {
                    $(WriteT::$id(t) => delete_range_in::<$k, $v>(t, id, lo, hi),)*
                }
            }
        }
    };
}

redb_tables! {
    Meta => META: &'static str, &'static [u8];
    Config => CONFIG: &'static str, &'static [u8];
    Scopes => SCOPES: &'static str, &'static [u8];
    Log => LOG: (u32, u64), &'static [u8];
    Tree => TREE: (u32, u8, u64), &'static [u8];
    Pending => PENDING: (u32, u8, u64), ();
    Idempotency => IDEMPOTENCY: (u32, &'static str), &'static [u8];
    Sessions => SESSIONS: &'static str, &'static [u8];
    SessionMessages => SESSION_MESSAGES: (&'static str, u64), &'static [u8];
    SessionHashes => SESSION_HASHES: (&'static str, u64), &'static [u8];
    SessionArchive => SESSION_ARCHIVE: (&'static str, u64), &'static [u8];
    SessionIdempotency => SESSION_IDEMPOTENCY: (&'static str, &'static str), &'static [u8];
    Grants => GRANTS: (&'static str, u8, &'static str), &'static [u8];
    Policies => POLICIES: &'static str, &'static [u8];
    Events => EVENTS: (u32, u64, u32), &'static [u8];
    Stale => STALE: (u32, u8, u64), ();
    Claims => CLAIMS: (u32, u8, u64), &'static [u8];
    Audit => AUDIT: u64, &'static [u8];
    Tokens => TOKENS: &'static str, &'static [u8];
    SearchTail => SEARCH_TAIL: (u32, u64), &'static [u8];
    SearchPostings => SEARCH_POSTINGS: (u32, &'static str, u64), &'static [u8];
    Vectors => VECTORS: (u32, u64), &'static [u8];
    Checkpoints => CHECKPOINTS: (&'static str, &'static str, &'static str), &'static [u8];
    CheckpointChannels => CHECKPOINT_CHANNELS: (&'static str, &'static str, &'static str, &'static str), &'static [u8];
    CheckpointItems => CHECKPOINT_ITEMS: (&'static str, &'static str, &'static str, u64), &'static [u8];
    CheckpointWrites => CHECKPOINT_WRITES: (&'static str, &'static str, &'static str, &'static str, u64), &'static [u8];
    StoreItems => STORE_ITEMS: (&'static str, &'static str), &'static [u8];
    SessionChunks => SESSION_CHUNKS: (&'static str, u64), &'static [u8];
    Embeddings => EMBEDDINGS: (u32, &'static str, u64), &'static [u8];
}

/// A read transaction of redb as a [`KvRead`], each table opened once.
pub struct RedbRead {
    tx: ReadTransaction,
    tables: [OnceCell<ReadT>; TableId::ALL.len()],
}

impl RedbRead {
    pub(crate) fn new(tx: ReadTransaction) -> Self {
        RedbRead {
            tx,
            tables: std::array::from_fn(|_| OnceCell::new()),
        }
    }

    /// The redb transaction, for what only redb has (its table list, its checksums).
    pub(crate) fn raw(&self) -> &ReadTransaction {
        &self.tx
    }

    fn table(&self, id: TableId) -> Result<&ReadT> {
        let cell = self
            .tables
            .get(id.index())
            .ok_or_else(|| Error::Storage(format!("no table slot for {}", id.name())))?;
        if let Some(t) = cell.get() {
            return Ok(t);
        }
        let _ = cell.set(open_read(&self.tx, id)?);
        cell.get()
            .ok_or_else(|| Error::Storage(format!("table {} did not open", id.name())))
    }
}

impl KvRead for RedbRead {
    fn get_with(&self, t: TableId, key: &[u8], f: &mut Seen<'_>) -> Result<bool> {
        self.table(t)?.get(t, key, f)
    }

    fn scan(&self, t: TableId, span: Span<'_>, f: &mut Visit<'_>) -> Result<()> {
        self.table(t)?.scan(t, span, f)
    }
}

/// A write transaction of redb as a [`KvWrite`], each table opened once and kept open until
/// `RedbWrite::close` (or the end of the transaction).
pub struct RedbWrite<'t> {
    tx: &'t WriteTransaction,
    tables: [RefCell<Option<WriteT<'t>>>; TableId::ALL.len()],
    /// The changes made so far, when the commit journal records them.
    ops: Option<Ops>,
}

fn in_use(id: TableId) -> Error {
    Error::Storage(format!(
        "table {} is in use by a scan of this transaction",
        id.name()
    ))
}

impl<'t> RedbWrite<'t> {
    pub(crate) fn new(tx: &'t WriteTransaction) -> Self {
        RedbWrite {
            tx,
            tables: std::array::from_fn(|_| RefCell::new(None)),
            ops: None,
        }
    }

    /// A write transaction that also records every change it makes, for the commit journal
    /// ([`crate::storage::redb::journal`]).
    pub(crate) fn recording(tx: &'t WriteTransaction) -> Self {
        let mut w = RedbWrite::new(tx);
        w.ops = Some(Ops::default());
        w
    }

    /// The changes recorded so far (empty when not recording); recording stops.
    pub(crate) fn take_ops(&mut self) -> Ops {
        self.ops.take().unwrap_or_default()
    }

    /// Closes every open table (redb then records their new roots in the transaction).
    pub(crate) fn close(&self) -> Result<()> {
        for (cell, id) in self.tables.iter().zip(TableId::ALL) {
            cell.try_borrow_mut().map_err(|_| in_use(id))?.take();
        }
        Ok(())
    }

    fn slot(&self, id: TableId) -> Result<&RefCell<Option<WriteT<'t>>>> {
        let cell = self
            .tables
            .get(id.index())
            .ok_or_else(|| Error::Storage(format!("no table slot for {}", id.name())))?;
        if cell.try_borrow().map_err(|_| in_use(id))?.is_none() {
            let t = open_write(self.tx, id)?;
            *cell.try_borrow_mut().map_err(|_| in_use(id))? = Some(t);
        }
        Ok(cell)
    }

    fn with<R>(&self, id: TableId, f: impl FnOnce(&WriteT<'t>) -> Result<R>) -> Result<R> {
        let g = self.slot(id)?.try_borrow().map_err(|_| in_use(id))?;
        match &*g {
            Some(t) => f(t),
            None => Err(in_use(id)),
        }
    }

    fn with_mut<R>(&self, id: TableId, f: impl FnOnce(&mut WriteT<'t>) -> Result<R>) -> Result<R> {
        let mut g = self.slot(id)?.try_borrow_mut().map_err(|_| in_use(id))?;
        match &mut *g {
            Some(t) => f(t),
            None => Err(in_use(id)),
        }
    }
}

impl KvRead for RedbWrite<'_> {
    fn get_with(&self, t: TableId, key: &[u8], f: &mut Seen<'_>) -> Result<bool> {
        self.with(t, |w| w.get(t, key, f))
    }

    fn scan(&self, t: TableId, span: Span<'_>, f: &mut Visit<'_>) -> Result<()> {
        self.with(t, |w| w.scan(t, span, f))
    }
}

impl KvWrite for RedbWrite<'_> {
    fn get_for_update(&mut self, t: TableId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.get(t, key)
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        self.with_mut(t, |w| w.put(t, key, value))?;
        if let Some(o) = &mut self.ops {
            o.put(t, key, value);
        }
        Ok(())
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> Result<bool> {
        let found = self.with_mut(t, |w| w.delete(t, key))?;
        if let Some(o) = self.ops.as_mut().filter(|_| found) {
            o.delete(t, key);
        }
        Ok(found)
    }

    fn delete_range(&mut self, t: TableId, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<u64> {
        let n = self.with_mut(t, |w| w.delete_range(t, lo, hi))?;
        if let Some(o) = self.ops.as_mut().filter(|_| n > 0) {
            o.delete_range(t, lo, hi);
        }
        Ok(n)
    }

    /// Opens every table of format 1, creating those the file lacks.
    fn ensure_tables(&self) -> Result<()> {
        for id in TableId::ALL {
            self.slot(id)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    //! The seam's contract on the redb backend: typed round trips, scan order and bounds, breaks,
    //! deletes, and errors (never panics) for malformed keys and for a change to a table inside
    //! a scan of that same table.
    use std::ops::ControlFlow;

    use redb::{backends::InMemoryBackend, Database, ReadableDatabase};

    use super::*;
    use crate::storage::kv::Dir;
    use crate::storage::tables::{LOG, PENDING, SESSION_MESSAGES};

    fn db() -> Database {
        Database::builder()
            .create_with_backend(InMemoryBackend::new())
            .unwrap()
    }

    fn seqs(kv: &dyn KvRead, id: &str, dir: Dir, lo: u64, hi: u64) -> Vec<u64> {
        let mut out = Vec::new();
        SESSION_MESSAGES
            .scan(kv, (id, lo)..(id, hi), dir, |(_, s), _| {
                out.push(s);
                Ok(ControlFlow::Continue(()))
            })
            .unwrap();
        out
    }

    /// A scan checks its far bound on the encoded key (`Far`), not through redb: for every kind
    /// of bound, both directions, and ids that are prefixes of one another or hold a NUL, it
    /// visits exactly the keys the typed tuples' order puts in the range, in order.
    #[test]
    fn the_far_bound_keeps_what_the_typed_order_keeps() {
        use std::ops::Bound::{Excluded, Included, Unbounded};
        let db = db();
        let tx = db.begin_write().unwrap();
        let ids = ["", "a", "a\0", "a\0b", "ab", "b"];
        let mut all: Vec<(String, u64)> = Vec::new();
        {
            let mut w = RedbWrite::new(&tx);
            for id in ids {
                for s in [0u64, 1, 2, 255, 256, u64::MAX] {
                    SESSION_MESSAGES.put(&mut w, (id, s), b"v").unwrap();
                    all.push((id.to_string(), s));
                }
            }
        }
        all.sort();
        let w = RedbWrite::new(&tx);
        let points: Vec<(&str, u64)> = vec![
            ("", 0),
            ("a", 2),
            ("a\0", 256),
            ("ab", 0),
            ("a", u64::MAX),
            ("c", 0),
        ];
        let bound = |p: (&'static str, u64), kind: u8| match kind {
            0 => Included(p),
            1 => Excluded(p),
            _ => Unbounded,
        };
        let inside = |k: &(String, u64), b: &Bound<(&str, u64)>, low: bool| {
            let k = (k.0.as_str(), k.1);
            match (b, low) {
                (Included(p), true) => k >= *p,
                (Excluded(p), true) => k > *p,
                (Included(p), false) => k <= *p,
                (Excluded(p), false) => k < *p,
                (Unbounded, _) => true,
            }
        };
        let mut checked = 0;
        for &lo in &points {
            for &hi in &points {
                for (lk, hk) in (0..3u8).flat_map(|l| (0..3u8).map(move |h| (l, h))) {
                    let (lo_b, hi_b) = (bound(lo, lk), bound(hi, hk));
                    let want: Vec<(String, u64)> = all
                        .iter()
                        .filter(|k| inside(k, &lo_b, true) && inside(k, &hi_b, false))
                        .cloned()
                        .collect();
                    for dir in [Dir::Forward, Dir::Reverse] {
                        let mut got = Vec::new();
                        SESSION_MESSAGES
                            .scan(&w, (lo_b, hi_b), dir, |(id, s), _| {
                                got.push((id.into_owned(), s));
                                Ok(ControlFlow::Continue(()))
                            })
                            .unwrap();
                        if dir == Dir::Reverse {
                            got.reverse();
                        }
                        assert_eq!(got, want, "{lo_b:?}..{hi_b:?} {dir:?}");
                        checked += got.len();
                    }
                }
            }
        }
        assert!(checked > 1000, "{checked}");
    }

    #[test]
    fn round_trips_scans_and_deletes() {
        let db = db();
        let tx = db.begin_write().unwrap();
        {
            let mut w = RedbWrite::new(&tx);
            for id in ["a", "a\0", "ab", ""] {
                for s in 0..5u64 {
                    SESSION_MESSAGES
                        .put(&mut w, (id, s), format!("{id}/{s}").as_bytes())
                        .unwrap();
                }
            }
            LOG.put(&mut w, (1, 2), b"x").unwrap();
            assert!(!PENDING.insert(&mut w, (1, 1, 0), &[]).unwrap());
            assert!(PENDING.insert(&mut w, (1, 1, 0), &[]).unwrap());
            assert_eq!(
                SESSION_MESSAGES.get(&w, ("a\0", 3)).unwrap().as_deref(),
                Some(&b"a\0/3"[..])
            );
            assert_eq!(seqs(&w, "a", Dir::Forward, 1, 4), [1, 2, 3]);
            assert_eq!(seqs(&w, "a\0", Dir::Reverse, 0, 5), [4, 3, 2, 1, 0]);
            assert_eq!(seqs(&w, "a", Dir::Forward, 4, 1), Vec::<u64>::new());
            // Break stops the scan; edge reads the last entry.
            let mut n = 0;
            SESSION_MESSAGES
                .scan(&w, ("", 0).., Dir::Forward, |_, _| {
                    n += 1;
                    Ok(if n == 7 {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    })
                })
                .unwrap();
            assert_eq!(n, 7);
            let last = SESSION_MESSAGES
                .edge(&w, .., Dir::Reverse, |(id, s), _| Ok((id.into_owned(), s)))
                .unwrap();
            assert_eq!(last, Some(("ab".to_string(), 4)));
            // Reads nest inside a scan (same table or another); closing the tables inside a
            // scan is an error, not a panic (a change inside a scan cannot compile: `put`
            // needs `&mut`).
            let r = SESSION_MESSAGES.scan(&w, .., Dir::Forward, |_, _| {
                SESSION_MESSAGES.get(&w, ("a", 0))?;
                LOG.get(&w, (1, 2))?;
                Ok(ControlFlow::Break(()))
            });
            assert!(r.is_ok());
            let r = SESSION_MESSAGES.each(&w, .., |_, _| w.close());
            assert!(matches!(r, Err(Error::Storage(_))));
            assert_eq!(
                SESSION_MESSAGES
                    .delete_range(&mut w, ("a", 1)..=("a", 3))
                    .unwrap(),
                3
            );
            assert!(SESSION_MESSAGES.delete(&mut w, ("a", 0)).unwrap());
            assert!(!SESSION_MESSAGES.delete(&mut w, ("a", 0)).unwrap());
            assert_eq!(
                SESSION_MESSAGES.take(&mut w, ("a", 4)).unwrap().as_deref(),
                Some(&b"a/4"[..])
            );
            assert_eq!(seqs(&w, "a", Dir::Forward, 0, 9), Vec::<u64>::new());
            // Malformed keys and bounds are Corrupt.
            assert!(matches!(
                w.get(TableId::Log, &[1, 2, 3]),
                Err(Error::Corrupt { .. })
            ));
            let r = w.scan(
                TableId::Log,
                Span::new(Bound::Included(&[0xFF][..]), Bound::Unbounded, Dir::Forward),
                &mut |_, _| Ok(ControlFlow::Continue(())),
            );
            assert!(matches!(r, Err(Error::Corrupt { .. })));
            w.close().unwrap();
        }
        tx.commit().unwrap();
        let r = RedbRead::new(db.begin_read().unwrap());
        assert_eq!(seqs(&r, "a\0", Dir::Forward, 0, 9), [0, 1, 2, 3, 4]);
        assert_eq!(LOG.get(&r, (1, 2)).unwrap().as_deref(), Some(&b"x"[..]));
        assert_eq!(
            PENDING.get(&r, (1, 1, 0)).unwrap().as_deref(),
            Some(&b""[..])
        );
    }
}
