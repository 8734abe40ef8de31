//! **Layer 1, storage**: where a store lives and everything somna keeps in it. It may use
//! [`crate::domain`] and `crate::error` ([`crate::Error`]), never a layer above.
//!
//! Two storage engines hold a store, each in its own folder: redb, one file ([`redb`]: the
//! engine, its side of the seam, the redb tables, the recovery of a torn tail), and a schema on
//! a PostgreSQL-protocol server ([`pg`]: the URL, the connections, the engine, its side of the
//! seam; with the `postgres` feature, decided in `pg/mod.rs` alone). Between them and the
//! layers above sit the core files:
//! - [`engine`]: the [`engine::Engine`] trait both implement (read, write with the engine's
//!   retry rule, close, integrity check, compaction; object-safe, so a store holds
//!   `Arc<dyn Engine>`) and what they share; `any_engine.rs` opens the engine a location names
//!   (the one file that names both engines);
//! - [`kv`], the byte-level seam every table access goes through (an engine's transaction
//!   reaches the layers above as `&dyn KvRead` or `&mut dyn KvWrite`), with its key encoding in
//!   [`keys`] and the typed tables in [`tables`]; the value envelope ([`codec`]); the session
//!   chunks of store format 3 and the migration to them ([`chunk`]), beside the search index
//!   ([`index`]), both of which the upgrade in [`engine`] builds;
//! - [`txn`] (read and write transactions), [`access`] (who is asking and what their grants
//!   allow), [`config`] (the settings), [`options`] (how a store is opened), group commit;
//! - [`store`], the [`crate::Store`] handle, which names no engine, and its cache of quantised
//!   vectors ([`vector_cache`]).
//!
//! The engine folders use the core files, never each other nor `store.rs` and `any_engine.rs`
//! (`tests/api/layers.rs` checks it). *Engine* means redb or the server; *backend* means only
//! what redb calls the disk under its file (`redb::StorageBackend`, see
//! [`crate::Store::with_backend`]).

pub mod access;
pub(crate) mod any_engine;
pub mod chunk;
pub mod codec;
pub mod config;
pub mod embeddings;
pub mod engine;
pub(crate) mod group;
pub mod index;
pub mod keys;
pub mod kv;
pub mod options;
pub mod pg;
pub mod redb;
pub mod store;
pub mod tables;
pub mod txn;
pub mod vector_cache;
pub(crate) mod verify;

/// The tables as redb stores them: [`redb::schema`], at the path it had before the engines got
/// their folders.
pub use self::redb::schema;
