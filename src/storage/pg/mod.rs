//! The server engine: a store kept in one schema of a PostgreSQL-protocol database (PostgreSQL;
//! by the same SQL CockroachDB and YugabyteDB), reached by a `postgresql://` URL. [`url`] reads
//! the URL and shows it without its password; `client.rs` is one connection with its waits
//! bounded; `tls.rs` TLS with libpq's parameters; `settings.rs` reads a URL's hosts, schema and
//! timeouts; `conn.rs` holds the connections and the transaction loop, `fault.rs` what a failed
//! statement means to it; `kv.rs` is the storage seam as SQL statements; `engine.rs` opens the store
//! and implements [`crate::storage::engine::Engine`]. It may use the core files of `storage/`,
//! never `store.rs` nor the redb engine.
//!
//! This file is where the `postgres` feature is decided, for the whole library: without it,
//! `off.rs` stands in for the engine, with an engine type that cannot be built and an open that
//! refuses every URL.

pub mod url;

#[cfg(feature = "postgres")]
mod client;
#[cfg(feature = "postgres")]
mod conn;
#[cfg(feature = "postgres")]
mod engine;
#[cfg(feature = "postgres")]
mod fault;
#[cfg(feature = "postgres")]
mod kv;
#[cfg(not(feature = "postgres"))]
mod off;
#[cfg(feature = "postgres")]
mod settings;
#[cfg(feature = "postgres")]
mod tls;

#[cfg(feature = "postgres")]
pub(crate) use engine::PgEngine;
#[cfg(not(feature = "postgres"))]
pub(crate) use off::PgEngine;
