//! The redb engine: a store in one redb file. [`engine`] holds the open database with its panic
//! guard, opens and creates the file (atomically, recovering a torn tail, checking the format)
//! and implements [`crate::storage::engine::Engine`]; `file.rs` has the low-level steps (redb's
//! builder, an open bounded by the busy timeout, what a panic of redb becomes); [`kv`] is the
//! storage seam over redb's typed tables, which [`schema`] defines (store format 1), through
//! the generic operations of `typed.rs`; [`tail`]
//! recovers a torn tail; [`journal`] is the commit journal's bytes (format 4; shared by
//! the default mode's handles since format 5), [`journal_file`] its file.
//! It may use the core files of `storage/`, never `store.rs` nor the server
//! engine.

pub(crate) mod engine;
mod file;
pub mod journal;
pub mod journal_file;
pub mod kv;
pub mod schema;
pub mod tail;
mod typed;

pub(crate) use engine::with_backend;
pub(crate) use engine::RedbEngine;
pub(crate) use file::exists;
