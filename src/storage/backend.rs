//! The transaction of whichever storage engine holds the store, as one type: [`ReadKv`] and
//! [`WriteKv`] dispatch the seam's operations ([`crate::storage::kv`]) to the redb backend (a
//! file, [`crate::storage::redb_kv`]) or the server backend (PostgreSQL,
//! [`crate::storage::pg_kv`], with the `postgres` feature). Everything above the storage layer
//! sees only [`KvRead`] and [`KvWrite`].

use std::ops::Bound;

use crate::error::Result;
use crate::storage::kv::{Dir, KvRead, KvWrite, TableId, Visit};
#[cfg(feature = "postgres")]
use crate::storage::pg_kv::PgTx;
use crate::storage::redb_kv::{RedbRead, RedbWrite};

/// A read transaction of either backend.
// The redb variant is the larger and the common one: boxing it would cost an allocation per
// transaction on the embedded path.
#[allow(clippy::large_enum_variant)]
pub enum ReadKv {
    /// A redb read transaction (a file).
    Redb(RedbRead),
    /// A server transaction (`REPEATABLE READ READ ONLY`).
    #[cfg(feature = "postgres")]
    Pg(PgTx),
}

/// A write transaction of either backend.
#[allow(clippy::large_enum_variant)]
pub enum WriteKv<'t> {
    /// A redb write transaction (a file).
    Redb(RedbWrite<'t>),
    /// A server transaction (`SERIALIZABLE`).
    #[cfg(feature = "postgres")]
    Pg(PgTx),
}

/// Runs `$e` on the backend's transaction, whichever it is.
macro_rules! each {
    ($v:expr, $t:ident => $e:expr) => {
        match $v {
            Self::Redb($t) => $e,
            #[cfg(feature = "postgres")]
            Self::Pg($t) => $e,
        }
    };
}

macro_rules! read_impl {
    ($ty:ty) => {
        impl KvRead for $ty {
            fn get(&self, t: TableId, key: &[u8]) -> Result<Option<Vec<u8>>> {
                each!(self, x => x.get(t, key))
            }

            fn get_with(
                &self,
                t: TableId,
                key: &[u8],
                f: &mut dyn FnMut(&[u8]) -> Result<()>,
            ) -> Result<bool> {
                each!(self, x => x.get_with(t, key, f))
            }

            fn scan(
                &self,
                t: TableId,
                lo: Bound<&[u8]>,
                hi: Bound<&[u8]>,
                dir: Dir,
                f: &mut Visit<'_>,
            ) -> Result<()> {
                each!(self, x => x.scan(t, lo, hi, dir, f))
            }

            fn prefetch(&self, t: TableId, keys: &[Vec<u8>]) -> Result<()> {
                each!(self, x => x.prefetch(t, keys))
            }

            fn prefetch_range(
                &self,
                t: TableId,
                lo: Bound<&[u8]>,
                hi: Bound<&[u8]>,
            ) -> Result<()> {
                each!(self, x => x.prefetch_range(t, lo, hi))
            }
        }
    };
}

read_impl!(ReadKv);
read_impl!(WriteKv<'_>);

impl KvWrite for WriteKv<'_> {
    fn get_for_update(&mut self, t: TableId, key: &[u8]) -> Result<Option<Vec<u8>>> {
        each!(self, x => x.get_for_update(t, key))
    }

    fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) -> Result<()> {
        each!(self, x => x.put(t, key, value))
    }

    fn put_many(&mut self, t: TableId, rows: &[(Vec<u8>, Vec<u8>)]) -> Result<()> {
        each!(self, x => x.put_many(t, rows))
    }

    fn delete(&mut self, t: TableId, key: &[u8]) -> Result<bool> {
        each!(self, x => x.delete(t, key))
    }

    fn delete_range(&mut self, t: TableId, lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> Result<u64> {
        each!(self, x => x.delete_range(t, lo, hi))
    }
}

impl WriteKv<'_> {
    /// Creates every table the store lacks (redb: in this transaction; a server store's tables
    /// are made when it is opened).
    pub(crate) fn ensure_tables(&self) -> Result<()> {
        match self {
            WriteKv::Redb(t) => t.ensure_tables(),
            #[cfg(feature = "postgres")]
            WriteKv::Pg(_) => Ok(()),
        }
    }
}

impl ReadKv {
    /// The redb transaction, for what only a file has (its table list, its page checksums).
    pub(crate) fn redb(&self) -> Result<&RedbRead> {
        match self {
            ReadKv::Redb(t) => Ok(t),
            #[cfg(feature = "postgres")]
            ReadKv::Pg(_) => Err(crate::error::Error::Unsupported(
                "this operation needs a store file, not a server store".into(),
            )),
        }
    }
}
