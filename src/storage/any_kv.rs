//! A transaction of whichever engine holds the store, as one type: [`ReadKv`] and [`WriteKv`]
//! hand every table operation of the seam ([`crate::storage::kv`]) to the engine's own
//! transaction through [`Forward`], so the seam's signatures are written once. Everything above
//! the storage layer sees only [`KvRead`] and [`KvWrite`].

use crate::error::{Error, Result};
use crate::storage::kv::{Forward, ForwardWrite, KvRead, KvWrite};
use crate::storage::pg::PgTx;
use crate::storage::redb::kv::{RedbRead, RedbWrite};

/// A read transaction of either engine.
// The redb variant is the larger and the common one: boxing it would cost an allocation per
// transaction on the embedded path.
#[allow(clippy::large_enum_variant)]
pub enum ReadKv {
    /// A redb read transaction (a file).
    Redb(RedbRead),
    /// A server transaction (`REPEATABLE READ READ ONLY`).
    // A build without the `postgres` feature never builds one (`PgTx` has no values there).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Pg(PgTx),
}

/// A write transaction of either engine.
#[allow(clippy::large_enum_variant)]
pub enum WriteKv<'t> {
    /// A redb write transaction (a file).
    Redb(RedbWrite<'t>),
    /// A server transaction (`SERIALIZABLE`).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    Pg(PgTx),
}

impl Forward for ReadKv {
    fn reads(&self) -> &dyn KvRead {
        match self {
            ReadKv::Redb(t) => t,
            ReadKv::Pg(t) => t,
        }
    }
}

impl Forward for WriteKv<'_> {
    fn reads(&self) -> &dyn KvRead {
        match self {
            WriteKv::Redb(t) => t,
            WriteKv::Pg(t) => t,
        }
    }
}

impl ForwardWrite for WriteKv<'_> {
    fn writes(&mut self) -> &mut dyn KvWrite {
        match self {
            WriteKv::Redb(t) => t,
            WriteKv::Pg(t) => t,
        }
    }
}

impl WriteKv<'_> {
    /// Creates every table the store lacks (redb: in this transaction; a server store's tables
    /// are made when it is opened).
    pub(crate) fn ensure_tables(&self) -> Result<()> {
        match self {
            WriteKv::Redb(t) => t.ensure_tables(),
            WriteKv::Pg(_) => Ok(()),
        }
    }
}

impl ReadKv {
    /// The redb transaction, for what only a file has (its table list, its page checksums).
    pub(crate) fn redb(&self) -> Result<&RedbRead> {
        match self {
            ReadKv::Redb(t) => Ok(t),
            ReadKv::Pg(_) => Err(Error::Unsupported(
                "this operation needs a store file, not a server store".into(),
            )),
        }
    }
}
