//! The engine a location names: a `postgresql://` URL opens the server engine, anything else a
//! redb file. This file names both engines; they name only the trait's file below it
//! ([`crate::storage::engine`]), and the store above holds whichever as `Arc<dyn Engine>`.

use std::path::Path;
use std::sync::Arc;

use crate::error::Result;
use crate::storage::engine::{Engine, Opened};
use crate::storage::options::Options;
use crate::storage::pg::url::{check_location, url_of};
use crate::storage::pg::PgEngine;
use crate::storage::redb::RedbEngine;

/// The open engine of a store: a file (redb) or a schema on a PostgreSQL-protocol server.
/// Cloning shares it (every handle of [`crate::Store::as_principal`]).
pub(crate) type AnyEngine = Arc<dyn Engine>;

/// Opens the store at `location` with the engine it names (see [`url_of`]).
pub(crate) fn open(location: &Path, opts: &Options, create: bool) -> Result<Opened<AnyEngine>> {
    check_location(location)?;
    Ok(match url_of(location) {
        Some(_) => PgEngine::open(location, opts, create)?.map(|e| Arc::new(e) as AnyEngine),
        None => RedbEngine::open(location, opts, create)?.map(|e| Arc::new(e) as AnyEngine),
    })
}
