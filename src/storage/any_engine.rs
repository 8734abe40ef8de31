//! The open engine of a store, whichever it is: [`AnyEngine`] picks the engine a location names
//! (a `postgresql://` URL: the server; anything else: a redb file) and hands each operation of
//! [`crate::storage::engine::Engine`] to it. This file names both engines; they name only the
//! trait's file below it.

use std::path::Path;
use std::sync::Arc;

use crate::error::Result;
use crate::storage::engine::{Engine, Opened};
use crate::storage::options::Options;
use crate::storage::pg::url::{check_location, url_of};
use crate::storage::pg::PgEngine;
use crate::storage::redb::RedbEngine;
use crate::storage::txn::{ReadTxn, WriteTxn};

/// The open engine of a store: a file (redb) or a schema on a PostgreSQL-protocol server.
/// Cloning shares it (every handle of [`crate::Store::as_principal`]).
#[derive(Clone)]
pub(crate) enum AnyEngine {
    /// A redb file.
    Redb(Arc<RedbEngine>),
    /// A schema on a server.
    Pg(Arc<PgEngine>),
}

impl AnyEngine {
    /// Opens the store at `location` with the engine it names (see [`url_of`]).
    pub(crate) fn open(location: &Path, opts: &Options, create: bool) -> Result<Opened<Self>> {
        check_location(location)?;
        Ok(match url_of(location) {
            Some(_) => PgEngine::open(location, opts, create)?.map(|e| AnyEngine::Pg(Arc::new(e))),
            None => RedbEngine::open(location, opts, create)?.map(|e| AnyEngine::Redb(Arc::new(e))),
        })
    }

    /// See [`Engine::read`].
    pub(crate) fn read<R>(
        &self,
        principal: Option<&str>,
        f: impl FnMut(&ReadTxn) -> Result<R>,
    ) -> Result<R> {
        match self {
            AnyEngine::Redb(e) => e.read(principal, f),
            AnyEngine::Pg(e) => e.read(principal, f),
        }
    }

    /// See [`Engine::write`].
    pub(crate) fn write<R>(
        &self,
        principal: Option<&str>,
        f: impl FnMut(&mut WriteTxn<'_>) -> Result<R>,
    ) -> Result<R> {
        match self {
            AnyEngine::Redb(e) => e.write(principal, f),
            AnyEngine::Pg(e) => e.write(principal, f),
        }
    }

    /// See [`Engine::close`]; closing a handle while others remain only drops it.
    pub(crate) fn close(self) -> Result<()> {
        match self {
            AnyEngine::Redb(e) => Arc::try_unwrap(e).map_or(Ok(()), Engine::close),
            AnyEngine::Pg(e) => Arc::try_unwrap(e).map_or(Ok(()), Engine::close),
        }
    }

    /// See [`Engine::check_integrity`].
    pub(crate) fn check_integrity(&mut self) -> Result<bool> {
        match self {
            AnyEngine::Redb(e) => RedbEngine::check_integrity(e),
            AnyEngine::Pg(e) => PgEngine::check_integrity(e),
        }
    }

    /// See [`Engine::compact`].
    pub(crate) fn compact(&mut self) -> Result<()> {
        match self {
            AnyEngine::Redb(e) => RedbEngine::compact(e),
            AnyEngine::Pg(e) => PgEngine::compact(e),
        }
    }

    /// See [`Engine::scrub`].
    pub(crate) fn scrub(&self) -> Result<u64> {
        match self {
            AnyEngine::Redb(e) => e.scrub(),
            AnyEngine::Pg(e) => e.scrub(),
        }
    }

    /// Whether the store lives on a server.
    pub(crate) fn is_server(&self) -> bool {
        matches!(self, AnyEngine::Pg(_))
    }
}
