//! The server engine of a build without the `postgres` feature: types that cannot be built, and
//! an open that refuses every URL, so that the rest of the library names one server engine
//! whichever way it was built.

use std::path::Path;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::storage::engine::{Engine, Opened};
use crate::storage::kv::{Forward, ForwardWrite, KvRead, KvWrite};
use crate::storage::options::Options;
use crate::storage::txn::{ReadTxn, WriteTxn};

/// No server engine can be open in this build.
pub(crate) enum PgEngine {}

/// No server transaction can be open in this build.
pub enum PgTx {}

impl Engine for PgEngine {
    fn open(location: &Path, _opts: &Options, _create: bool) -> Result<Opened<Self>> {
        let url = location.to_string_lossy();
        Err(Error::Unsupported(format!(
            "{} names a PostgreSQL server, and this somna was built without the `postgres` feature",
            url.split('@').next_back().unwrap_or("the URL")
        )))
    }

    fn read<R>(&self, _: Option<&str>, _: impl FnMut(&ReadTxn) -> Result<R>) -> Result<R> {
        match *self {}
    }

    fn write<R>(
        &self,
        _: Option<&str>,
        _: impl FnMut(&mut WriteTxn<'_>) -> Result<R>,
    ) -> Result<R> {
        match *self {}
    }

    fn close(self) -> Result<()> {
        match self {}
    }

    fn check_integrity(this: &mut Arc<Self>) -> Result<bool> {
        match **this {}
    }

    fn compact(this: &mut Arc<Self>) -> Result<()> {
        match **this {}
    }

    fn scrub(&self) -> Result<u64> {
        match *self {}
    }
}

impl Forward for PgTx {
    fn reads(&self) -> &dyn KvRead {
        match *self {}
    }
}

impl ForwardWrite for PgTx {
    fn writes(&mut self) -> &mut dyn KvWrite {
        match *self {}
    }
}
