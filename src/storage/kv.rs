//! The storage seam: a byte-level, object-safe key-value interface under every table access.
//! Each storage engine implements it once for its transactions: redb
//! ([`crate::storage::redb`], a file) and a PostgreSQL-protocol server ([`crate::storage::pg`]).
//! Keys are the order-preserving encoding of [`crate::storage::keys`] (an engine may compare them
//! with `memcmp`); values are the envelope bytes of [`crate::storage::codec`], the same on every
//! engine. Call sites use the typed descriptors of [`crate::storage::tables`], never raw bytes.
//! A transaction reaches the layers above as `&dyn KvRead` or `&mut dyn KvWrite` (inside
//! [`crate::ReadTxn`] and [`crate::WriteTxn`]): the engine owns its own transaction, lends it
//! for the caller's closure, then commits it. A third engine is a folder beside those two: its
//! transactions implement [`KvRead`] and [`KvWrite`], its handle
//! [`crate::storage::engine::Engine`], and [`crate::storage::any_engine`] opens it for the
//! locations it names.

use std::ops::{Bound, ControlFlow};

use crate::error::Result;

/// The 29 tables of [`crate::storage::tables`]; each engine maps an id to its own table.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(missing_docs)]
pub enum TableId {
    Meta,
    Config,
    Scopes,
    Log,
    Tree,
    Pending,
    Idempotency,
    Sessions,
    SessionMessages,
    SessionHashes,
    SessionArchive,
    SessionIdempotency,
    Grants,
    Policies,
    Events,
    Stale,
    Claims,
    Audit,
    Tokens,
    SearchTail,
    SearchPostings,
    Vectors,
    Checkpoints,
    CheckpointChannels,
    CheckpointItems,
    CheckpointWrites,
    StoreItems,
    SessionChunks,
    Embeddings,
}

impl TableId {
    /// Every table, in the order of [`crate::storage::tables::TABLE_NAMES`].
    pub const ALL: [TableId; 29] = [
        TableId::Meta,
        TableId::Config,
        TableId::Scopes,
        TableId::Log,
        TableId::Tree,
        TableId::Pending,
        TableId::Idempotency,
        TableId::Sessions,
        TableId::SessionMessages,
        TableId::SessionHashes,
        TableId::SessionArchive,
        TableId::SessionIdempotency,
        TableId::Grants,
        TableId::Policies,
        TableId::Events,
        TableId::Stale,
        TableId::Claims,
        TableId::Audit,
        TableId::Tokens,
        TableId::SearchTail,
        TableId::SearchPostings,
        TableId::Vectors,
        TableId::Checkpoints,
        TableId::CheckpointChannels,
        TableId::CheckpointItems,
        TableId::CheckpointWrites,
        TableId::StoreItems,
        TableId::SessionChunks,
        TableId::Embeddings,
    ];

    /// The table's name in the file (and in errors).
    pub const fn name(self) -> &'static str {
        match self {
            TableId::Meta => "meta",
            TableId::Config => "config",
            TableId::Scopes => "scopes",
            TableId::Log => "log",
            TableId::Tree => "tree",
            TableId::Pending => "pending",
            TableId::Idempotency => "idempotency",
            TableId::Sessions => "sessions",
            TableId::SessionMessages => "session_messages",
            TableId::SessionHashes => "session_hashes",
            TableId::SessionArchive => "session_archive",
            TableId::SessionIdempotency => "session_idempotency",
            TableId::Grants => "grants",
            TableId::Policies => "policies",
            TableId::Events => "events",
            TableId::Stale => "stale",
            TableId::Claims => "claims",
            TableId::Audit => "audit",
            TableId::Tokens => "tokens",
            TableId::SearchTail => "search_tail",
            TableId::SearchPostings => "search_postings",
            TableId::Vectors => "vectors",
            TableId::Checkpoints => "checkpoints",
            TableId::CheckpointChannels => "checkpoint_channels",
            TableId::CheckpointItems => "checkpoint_items",
            TableId::CheckpointWrites => "checkpoint_writes",
            TableId::StoreItems => "store_items",
            TableId::SessionChunks => "session_chunks",
            TableId::Embeddings => "embeddings",
        }
    }

    /// The table's position in [`TableId::ALL`].
    pub const fn index(self) -> usize {
        self as usize
    }
}

/// The order of a scan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dir {
    /// Ascending key order.
    Forward,
    /// Descending key order.
    Reverse,
}

/// The visitor of a scan: key bytes, value bytes; `Break` stops the scan.
pub type Visit<'f> = dyn FnMut(&[u8], &[u8]) -> Result<ControlFlow<()>> + 'f;

/// The visitor of a get: the value's bytes, borrowed where the engine can lend them.
pub type Seen<'f> = dyn FnMut(&[u8]) -> Result<()> + 'f;

/// The entries a scan visits: bounds on complete encoded keys of the table's shape, and the
/// order they are visited in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span<'k> {
    /// The low bound.
    pub lo: Bound<&'k [u8]>,
    /// The high bound.
    pub hi: Bound<&'k [u8]>,
    /// The order of the visit.
    pub dir: Dir,
}

impl<'k> Span<'k> {
    /// The entries between `lo` and `hi`, in `dir` order.
    pub fn new(lo: Bound<&'k [u8]>, hi: Bound<&'k [u8]>, dir: Dir) -> Self {
        Span { lo, hi, dir }
    }

    /// Every entry of the table, in `dir` order.
    pub fn all(dir: Dir) -> Self {
        Span::new(Bound::Unbounded, Bound::Unbounded, dir)
    }

    /// Whether no key can lie within the bounds.
    pub(crate) fn is_empty(&self) -> bool {
        empty_range(self.lo, self.hi)
    }
}

/// One consistent snapshot (redb: a read or write transaction).
pub trait KvRead {
    /// The value at `key` in table `t`. An engine implements this or [`KvRead::get_with`] (each
    /// defaults to the other).
    fn get(&self, t: TableId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        let mut out = None;
        self.get_with(t, key, &mut |v| {
            out = Some(v.to_vec());
            Ok(())
        })?;
        Ok(out)
    }

    /// Calls `f` with the value at `key`, if there is one, without copying it where the engine
    /// can (redb: from its page); whether there was one.
    fn get_with(&self, t: TableId, key: &[u8], f: &mut Seen<'_>) -> Result<bool> {
        match self.get(t, key)? {
            Some(v) => f(&v).map(|()| true),
            None => Ok(false),
        }
    }

    /// Visits the entries of `t` within `span`, in its order, until `f` breaks. Replaces
    /// `range(..)`, `.rev()`, `first()`, `last()`: nothing is collected. Bounds are complete
    /// keys of the table's shape (the redb engine decodes them).
    fn scan(&self, t: TableId, span: Span<'_>, f: &mut Visit<'_>) -> Result<()>;

    /// The first (`Dir::Forward`) or last (`Dir::Reverse`) entry of `t` within `span`,
    /// copied. The default stops a scan at its first entry; an engine that fetches scans in
    /// pages (a server) fetches one row.
    fn edge(&self, t: TableId, span: Span<'_>) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let mut out = None;
        self.scan(t, span, &mut |k, v| {
            out = Some((k.to_vec(), v.to_vec()));
            Ok(ControlFlow::Break(()))
        })?;
        Ok(out)
    }

    /// Hints that the caller is about to `get` these keys of `t`: an engine that pays a round
    /// trip per read (a server) fetches them all at once and serves the gets from what it
    /// fetched; a file does nothing. Only a hint: reads give the same answers either way.
    fn prefetch(&self, _t: TableId, _keys: &[Vec<u8>]) -> Result<()> {
        Ok(())
    }

    /// Whether [`KvRead::prefetch`] does anything here: a caller that would build a list of
    /// keys only to hint at them skips the work where the answer is no (a file).
    fn prefetches(&self) -> bool {
        false
    }

    /// Hints that the caller is about to scan within these bounds of `t` (see
    /// [`KvRead::prefetch`]): a server fetches the whole range at once, so keep it small.
    fn prefetch_range(&self, _t: TableId, _lo: Bound<&[u8]>, _hi: Bound<&[u8]>) -> Result<()> {
        Ok(())
    }
}

/// One write transaction. On a server the closure that receives it may run several times
/// (once per attempt), so it must have no effects outside the transaction.
pub trait KvWrite: KvRead {
    /// `get`, announcing that this row will be written: `SELECT ... FOR UPDATE` on SQL, a plain
    /// get on redb (one writer at a time already). Used for scope rows, session rows and the
    /// `meta` counters.
    fn get_for_update(&mut self, t: TableId, key: &[u8]) -> Result<Option<Vec<u8>>>;
    /// Stores `value` at `key`, replacing any value there.
    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<()>;
    /// Stores every `(key, value)` of `rows` (an engine may send them in one statement).
    fn put_many(&mut self, t: TableId, rows: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        for (k, v) in rows {
            self.put(t, k, v)?;
        }
        Ok(())
    }
    /// Removes `key`; whether it was present.
    fn delete(&mut self, t: TableId, key: &[u8]) -> Result<bool>;
    /// Removes every key within the bounds; how many there were.
    fn delete_range(&mut self, t: TableId, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<u64>;
    /// Creates every table the store lacks: redb in this transaction; a server store's tables
    /// are made when it is opened, so the default does nothing.
    fn ensure_tables(&self) -> Result<()> {
        Ok(())
    }
}

/// Whether the bounds `lo`, `hi` (encoded keys, compared bytewise) describe an empty range.
pub(crate) fn empty_range(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    match (lo, hi) {
        (Bound::Included(a), Bound::Included(b)) => a > b,
        (Bound::Included(a), Bound::Excluded(b))
        | (Bound::Excluded(a), Bound::Included(b))
        | (Bound::Excluded(a), Bound::Excluded(b)) => a >= b,
        _ => false,
    }
}
