//! The server engine's side of the storage seam ([`crate::storage::kv`]): one transaction on one
//! connection, as a [`KvRead`] and [`KvWrite`]. Each somna table is a table `(k bytea, v bytea)`
//! keyed by the seam's order-preserving key bytes (PostgreSQL compares `bytea` with `memcmp`,
//! then length: the seam's order), values are the envelope bytes, the same as in a file. Scans
//! are keyset-paginated (pages of 64 rows, doubling to 1,024), so a scan that stops early reads
//! little and a long one needs no server-side cursor; nothing else is held between pages.
//!
//! A transaction keeps a cache of what it fetched ahead: the settings, the admin, the grants and
//! the policies with its `BEGIN`, and what callers hint at ([`KvRead::prefetch`]); a change to a
//! table drops what the cache holds of it, so a write reads its own changes.
//!
//! A statement that fails in a way another attempt may fix records a fault; the transaction
//! loop ([`Server::retrying`] in [`super::conn`]) sees it after the closure
//! returns, whatever the closure made of the error, and runs the closure again.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::{Bound, ControlFlow};
use std::sync::Arc;

use tokio_postgres::types::Type;

use crate::error::{Error, Result};
use crate::storage::kv::{empty_range, Dir, KvRead, KvWrite, Span, TableId, Visit};
use crate::storage::pg::client::{Param, SqlError};
use crate::storage::pg::conn::{Attempt, Conn, ContextRows, Server};
use crate::storage::pg::fault::{classify, server_error, Fault};

/// One transaction of the server engine (see the module doc).
pub(crate) struct PgTx {
    server: Arc<Server>,
    conn: RefCell<Option<Conn>>,
    fault: RefCell<Option<Fault>>,
    write: bool,
    /// Whether statements count towards `SOMNA_PG_FAULT_EVERY` (not in the attempt after an
    /// injected failure).
    inject: bool,
    /// What a read transaction prefetched (a snapshot never changes under it).
    cache: RefCell<Cache>,
}

/// Rows a read transaction fetched ahead ([`KvRead::prefetch`], [`KvRead::prefetch_range`]).
#[derive(Default)]
struct Cache {
    /// Point reads: the value, or `None` for a key that is absent.
    points: HashMap<TableId, HashMap<Vec<u8>, Option<Vec<u8>>>>,
    /// Whole ranges: the bounds and every row within them, in key order.
    ranges: Vec<CachedRange>,
}

/// A prefetched range: its table, its bounds, and every row within them in key order.
type CachedRange = (TableId, Bound<Vec<u8>>, Bound<Vec<u8>>, Rows);

fn owned(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    b.map(<[u8]>::to_vec)
}

fn borrowed(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    b.as_ref().map(Vec::as_slice)
}

/// Whether `k` lies within the bounds.
fn in_bounds(k: &[u8], lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> bool {
    let above = match lo {
        Bound::Included(a) => k >= a,
        Bound::Excluded(a) => k > a,
        Bound::Unbounded => true,
    };
    let below = match hi {
        Bound::Included(b) => k <= b,
        Bound::Excluded(b) => k < b,
        Bound::Unbounded => true,
    };
    above && below
}

/// Whether the range `(lo, hi)` lies within the range `(outer_lo, outer_hi)`.
fn within(
    outer_lo: Bound<&[u8]>,
    outer_hi: Bound<&[u8]>,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
) -> bool {
    let lo_ok = match (outer_lo, lo) {
        (Bound::Unbounded, _) => true,
        (_, Bound::Unbounded) => false,
        (Bound::Included(a), Bound::Included(x) | Bound::Excluded(x)) => x >= a,
        (Bound::Excluded(a), Bound::Included(x)) => x > a,
        (Bound::Excluded(a), Bound::Excluded(x)) => x >= a,
    };
    let hi_ok = match (outer_hi, hi) {
        (Bound::Unbounded, _) => true,
        (_, Bound::Unbounded) => false,
        (Bound::Included(b), Bound::Included(x) | Bound::Excluded(x)) => x <= b,
        (Bound::Excluded(b), Bound::Included(x)) => x < b,
        (Bound::Excluded(b), Bound::Excluded(x)) => x <= b,
    };
    lo_ok && hi_ok
}

impl Cache {
    /// Forgets what was fetched of table `t` (this transaction is changing it).
    fn forget(&mut self, t: TableId) {
        self.points.remove(&t);
        self.ranges.retain(|(id, _, _, _)| *id != t);
    }

    /// The cached answer for `key`, if the cache knows it.
    fn get(&self, t: TableId, key: &[u8]) -> Option<Option<Vec<u8>>> {
        if let Some(v) = self.points.get(&t).and_then(|p| p.get(key)) {
            return Some(v.clone());
        }
        self.ranges
            .iter()
            .find(|(id, lo, hi, _)| *id == t && in_bounds(key, borrowed(lo), borrowed(hi)))
            .map(|(_, _, _, rows)| {
                rows.binary_search_by(|(k, _)| k.as_slice().cmp(key))
                    .ok()
                    .and_then(|i| rows.get(i))
                    .map(|(_, v)| v.clone())
            })
    }

    /// The cached rows of a range that holds `(lo, hi)`, if there is one.
    fn range(&self, t: TableId, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Option<&Rows> {
        self.ranges
            .iter()
            .find(|(id, a, b, _)| *id == t && within(borrowed(a), borrowed(b), lo, hi))
            .map(|(_, _, _, rows)| rows)
    }
}

impl std::fmt::Debug for PgTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgTx").field("write", &self.write).finish()
    }
}

type Rows = Vec<(Vec<u8>, Vec<u8>)>;

impl PgTx {
    pub(crate) fn new(server: Arc<Server>, conn: Conn, write: bool, inject: bool) -> PgTx {
        PgTx {
            server,
            conn: RefCell::new(Some(conn)),
            fault: RefCell::new(None),
            write,
            inject,
            cache: RefCell::new(Cache::default()),
        }
    }

    /// Fills the cache with what the transaction's first round trip fetched: whole tables, or
    /// one key of a table.
    pub(crate) fn seed(&self, context: Vec<ContextRows>) {
        let mut c = self.cache.borrow_mut();
        for (t, key, rows) in context {
            let (lo, hi) = match key {
                Some(k) => (
                    Bound::Included(k.as_bytes().to_vec()),
                    Bound::Included(k.as_bytes().to_vec()),
                ),
                None => (Bound::Unbounded, Bound::Unbounded),
            };
            c.ranges.push((t, lo, hi, rows));
        }
    }

    /// A change to table `t`: what the cache holds of it is stale from now on.
    fn changing(&self, t: TableId) {
        self.cache.borrow_mut().forget(t);
    }

    /// Runs one statement on the connection, recording a fault that calls for another attempt.
    fn run<R>(&self, f: impl FnOnce(&mut Conn) -> std::result::Result<R, SqlError>) -> Result<R> {
        if let Some(fault) = self.fault.borrow().as_ref() {
            return Err(fault_error(fault));
        }
        if self.inject && self.server.inject() {
            let fault = Fault::Injected;
            let e = fault_error(&fault);
            *self.fault.borrow_mut() = Some(fault);
            return Err(e);
        }
        let mut guard = self
            .conn
            .try_borrow_mut()
            .map_err(|_| Error::Storage("the connection is in use by this transaction".into()))?;
        let conn = guard
            .as_mut()
            .ok_or_else(|| Error::Storage("the transaction has ended".into()))?;
        match f(conn) {
            Ok(r) => Ok(r),
            Err(e) => match classify(&e) {
                Some(fault) => {
                    let err = fault_error(&fault);
                    *self.fault.borrow_mut() = Some(fault);
                    Err(err)
                }
                None => Err(server_error(&e)),
            },
        }
    }

    fn query(&self, sql: &str, params: &[Param<'_>]) -> Result<Rows> {
        self.run(|c| {
            let rows = c.client().query_typed(sql, params)?;
            rows.iter()
                .map(|r| Ok((r.try_get::<_, Vec<u8>>(0)?, r.try_get::<_, Vec<u8>>(1)?)))
                .collect()
        })
    }

    fn value(&self, sql: &str, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.run(
            |c| match c.client().query_typed_opt(sql, &[(&key, Type::BYTEA)])? {
                Some(r) => Ok(Some(r.try_get::<_, Vec<u8>>(0)?)),
                None => Ok(None),
            },
        )
    }

    fn execute(&self, sql: &str, params: &[Param<'_>]) -> Result<u64> {
        self.run(|c| c.client().execute_typed(sql, params))
    }

    /// Ends a read whose closure returned `out`: the snapshot is released and the connection
    /// goes back to the pool; another attempt when a statement faulted (whatever the closure
    /// made of the error).
    pub(crate) fn end_read<R>(self, out: Result<R>) -> Attempt<R> {
        let fault = self.fault.borrow_mut().take();
        let conn = self.conn.borrow_mut().take();
        if let Some(mut c) = conn {
            if c.client().batch_execute("ROLLBACK").is_ok() {
                self.server.give(c);
            }
        }
        match fault {
            Some(f) => Attempt::Again(f),
            None => Attempt::Done(out),
        }
    }

    /// Ends one attempt of a write whose closure returned `r`: commits it when `r` is `Ok` and
    /// no statement faulted; otherwise rolls back, and asks for another attempt when a
    /// statement faulted. A connection lost during `COMMIT` is resolved by its commit id.
    pub(crate) fn finish<R>(self, r: Result<R>, now_us: i64) -> Attempt<R> {
        let fault = self.fault.borrow_mut().take();
        let Some(mut conn) = self.conn.borrow_mut().take() else {
            return Attempt::Done(Err(Error::Storage("the transaction has ended".into())));
        };
        if fault.is_some() || r.is_err() {
            if conn.client().batch_execute("ROLLBACK").is_ok() {
                self.server.give(conn);
            }
            return match fault {
                Some(f) => Attempt::Again(f),
                None => Attempt::Done(r),
            };
        }
        if self.inject && self.server.inject() {
            if conn.client().batch_execute("ROLLBACK").is_ok() {
                self.server.give(conn);
            }
            return Attempt::Again(Fault::Injected);
        }
        let id = commit_id(now_us);
        let sql = format!(
            "INSERT INTO {} (k, v) VALUES ('\\x{}', '\\x'); COMMIT",
            self.server.commits_table(),
            hex(&id)
        );
        let lose = self.server.lose_commit();
        if lose == Some(false) {
            drop(conn);
            return self.resolved(&id, r, "lost before COMMIT (SOMNA_PG_LOSE_COMMIT)".into());
        }
        match conn.client().batch_execute(&sql) {
            Ok(()) if lose == Some(true) => {
                drop(conn);
                self.resolved(&id, r, "lost after COMMIT (SOMNA_PG_LOSE_COMMIT)".into())
            }
            Ok(()) => {
                self.server.give(conn);
                if id[15] == 0 && id[14] < 4 {
                    // About one write in 16,000 clears the ids older than a day.
                    self.server.prune_commits(now_us);
                }
                Attempt::Done(r)
            }
            Err(e) => match classify(&e) {
                Some(Fault::Lost(m)) => {
                    drop(conn);
                    self.resolved(&id, r, m)
                }
                Some(f) => {
                    // Refused at COMMIT (a serialization failure): nothing was written.
                    if conn.client().batch_execute("ROLLBACK").is_ok() {
                        self.server.give(conn);
                    }
                    Attempt::Again(f)
                }
                None => {
                    let _ = conn.client().batch_execute("ROLLBACK");
                    Attempt::Done(Err(server_error(&e)))
                }
            },
        }
    }

    /// The prefetched rows within `span`, in its order, if a prefetched range holds them.
    fn cached_rows(&self, t: TableId, span: Span<'_>) -> Option<Rows> {
        let Span { lo, hi, dir } = span;
        let c = self.cache.borrow();
        let rows = c.range(t, lo, hi)?;
        let mut out: Rows = rows
            .iter()
            .filter(|(k, _)| in_bounds(k, lo, hi))
            .cloned()
            .collect();
        if dir == Dir::Reverse {
            out.reverse();
        }
        Some(out)
    }

    /// The outcome of a write whose connection was lost during `COMMIT` (`m` says how): its
    /// result if it committed, another attempt if not, [`Error::Ambiguous`] if the server could
    /// not be asked in time.
    fn resolved<R>(&self, id: &[u8], r: Result<R>, m: String) -> Attempt<R> {
        match self.server.resolve(id) {
            Some(true) => Attempt::Done(r),
            Some(false) => Attempt::Again(Fault::Lost(m)),
            None => Attempt::Done(Err(Error::Ambiguous(format!(
                "the connection to {} was lost during COMMIT and the server could not be asked whether it committed ({m}); check before writing again, or write with an idempotency key",
                self.server.shown()
            )))),
        }
    }

    /// One page of a scan: at most `limit` entries within `span`, in its order.
    fn page(&self, t: TableId, span: Span<'_>, limit: i64) -> Result<Rows> {
        let Span { lo, hi, dir } = span;
        let name = &self.server.table(t)?.name;
        let mut params: Vec<Param<'_>> = Vec::with_capacity(3);
        let mut sql = format!(
            "SELECT k, v FROM {name}{}",
            where_sql(&lo, &hi, &mut params)
        );
        params.push((&limit, Type::INT8));
        let order = match dir {
            Dir::Forward => "ASC",
            Dir::Reverse => "DESC",
        };
        sql.push_str(&format!(" ORDER BY k {order} LIMIT ${}", params.len()));
        self.query(&sql, &params)
    }
}

/// The `WHERE` clause of key bounds (empty when both are unbounded), their keys pushed to
/// `params` as `$1`, `$2`.
fn where_sql<'a>(
    lo: &'a Bound<&'a [u8]>,
    hi: &'a Bound<&'a [u8]>,
    params: &mut Vec<Param<'a>>,
) -> String {
    let mut conds = Vec::new();
    for (b, incl, excl) in [(lo, ">=", ">"), (hi, "<=", "<")] {
        let (k, op) = match b {
            Bound::Included(k) => (k, incl),
            Bound::Excluded(k) => (k, excl),
            Bound::Unbounded => continue,
        };
        params.push((k, Type::BYTEA));
        conds.push(format!("k {op} ${}", params.len()));
    }
    if conds.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", conds.join(" AND "))
    }
}

fn fault_error(f: &Fault) -> Error {
    match f {
        Fault::Retry(m) => Error::Storage(format!("the server asked to run the transaction again ({m})")),
        Fault::Injected => Error::Storage(
            "the server asked to run the transaction again (40001, injected by SOMNA_PG_FAULT_EVERY)".into(),
        ),
        Fault::Lost(m) => Error::Server(format!("lost the connection to the server ({m})")),
    }
}

/// A commit id: the time (so that old ids can be cleared by a range) and 8 random bytes.
fn commit_id(now_us: i64) -> [u8; 16] {
    let mut rnd = [0u8; 8];
    if getrandom::fill(&mut rnd).is_err() {
        // No system randomness: the process id and a counter keep ids apart.
        static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        rnd = (u64::from(std::process::id()) << 32 | u64::from(n)).to_be_bytes();
    }
    let t = u128::from(now_us.max(0) as u64) << 64 | u128::from(u64::from_be_bytes(rnd));
    t.to_be_bytes()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

impl KvRead for PgTx {
    fn get(&self, t: TableId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(v) = self.cache.borrow().get(t, key) {
            return Ok(v);
        }
        self.value(&self.server.table(t)?.get, key)
    }

    fn prefetches(&self) -> bool {
        true
    }

    fn prefetch(&self, t: TableId, keys: &[Vec<u8>]) -> Result<()> {
        if keys.is_empty() {
            return Ok(());
        }
        let name = &self.server.table(t)?.name;
        let sql = format!("SELECT k, v FROM {name} WHERE k = ANY($1)");
        let list: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let rows = self.query(&sql, &[(&list, Type::BYTEA_ARRAY)])?;
        let mut c = self.cache.borrow_mut();
        let points = c.points.entry(t).or_default();
        for k in keys {
            points.insert(k.clone(), None);
        }
        for (k, v) in rows {
            points.insert(k, Some(v));
        }
        Ok(())
    }

    fn prefetch_range(&self, t: TableId, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<()> {
        if empty_range(lo, hi) || self.cache.borrow().range(t, lo, hi).is_some() {
            return Ok(());
        }
        // The whole range in one statement (that is the point of the hint).
        let name = &self.server.table(t)?.name;
        let mut params: Vec<Param<'_>> = Vec::with_capacity(2);
        let sql = format!(
            "SELECT k, v FROM {name}{} ORDER BY k",
            where_sql(&lo, &hi, &mut params)
        );
        let rows = self.query(&sql, &params)?;
        self.cache
            .borrow_mut()
            .ranges
            .push((t, owned(lo), owned(hi), rows));
        Ok(())
    }

    fn edge(&self, t: TableId, span: Span<'_>) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        if span.is_empty() {
            return Ok(None);
        }
        if let Some(rows) = self.cached_rows(t, span) {
            return Ok(rows.into_iter().next());
        }
        Ok(self.page(t, span, 1)?.into_iter().next())
    }

    fn scan(&self, t: TableId, span: Span<'_>, f: &mut Visit<'_>) -> Result<()> {
        if span.is_empty() {
            return Ok(());
        }
        if let Some(rows) = self.cached_rows(t, span) {
            for (k, v) in &rows {
                if f(k, v)? == ControlFlow::Break(()) {
                    break;
                }
            }
            return Ok(());
        }
        let mut limit: i64 = 64;
        let mut last: Option<Vec<u8>> = None;
        let Span { lo, hi, dir } = span;
        loop {
            let next = match (&last, dir) {
                (None, _) => span,
                (Some(k), Dir::Forward) => Span::new(Bound::Excluded(k.as_slice()), hi, dir),
                (Some(k), Dir::Reverse) => Span::new(lo, Bound::Excluded(k.as_slice()), dir),
            };
            if next.is_empty() {
                return Ok(());
            }
            let rows = self.page(t, next, limit)?;
            let full = rows.len() as i64 == limit;
            for (k, v) in &rows {
                if f(k, v)? == ControlFlow::Break(()) {
                    return Ok(());
                }
            }
            if !full {
                return Ok(());
            }
            last = rows.into_iter().last().map(|(k, _)| k);
            limit = (limit * 2).min(1024);
        }
    }
}

impl KvWrite for PgTx {
    fn get_for_update(&mut self, t: TableId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.value(&self.server.table(t)?.get_for_update, key)
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        self.changing(t);
        self.execute(
            &self.server.table(t)?.put,
            &[(&key, Type::BYTEA), (&value, Type::BYTEA)],
        )
        .map(|_| ())
    }

    fn put_many(&mut self, t: TableId, rows: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        self.changing(t);
        let name = &self.server.table(t)?.name;
        let sql = format!(
            "INSERT INTO {name} (k, v) SELECT * FROM unnest($1::bytea[], $2::bytea[]) ON CONFLICT (k) DO UPDATE SET v = excluded.v"
        );
        let keys: Vec<&[u8]> = rows.iter().map(|(k, _)| k.as_slice()).collect();
        let values: Vec<&[u8]> = rows.iter().map(|(_, v)| v.as_slice()).collect();
        self.execute(
            &sql,
            &[(&keys, Type::BYTEA_ARRAY), (&values, Type::BYTEA_ARRAY)],
        )
        .map(|_| ())
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> Result<bool> {
        self.changing(t);
        self.execute(&self.server.table(t)?.delete, &[(&key, Type::BYTEA)])
            .map(|n| n > 0)
    }

    fn delete_range(&mut self, t: TableId, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<u64> {
        if empty_range(lo, hi) {
            return Ok(0);
        }
        self.changing(t);
        let name = &self.server.table(t)?.name;
        let mut params: Vec<Param<'_>> = Vec::with_capacity(2);
        let sql = format!("DELETE FROM {name}{}", where_sql(&lo, &hi, &mut params));
        self.execute(&sql, &params)
    }
}

impl Drop for PgTx {
    fn drop(&mut self) {
        // A transaction dropped without `finish` or `end_read` (an error or a panic on the way)
        // is rolled back; its connection goes back to the pool only if that worked.
        if let Some(mut c) = self.conn.get_mut().take() {
            if c.client().batch_execute("ROLLBACK").is_ok() {
                self.server.give(c);
            }
        }
    }
}
