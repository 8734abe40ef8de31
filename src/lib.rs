//! # engram
//!
//! An embedded, transactional storage engine for agent memory, on [redb].
//!
//! One database file holds, per **scope** (one memory stream):
//! - the **raw log**: short memories appended forever, never rewritten; a memory's id is its
//!   position ([`Store::note`], [`Store::append`], [`Store::recall`]);
//! - the **summary tree**: summaries of aligned power-of-two blocks of the log, written by the
//!   agent in answer to merge prompts and disposable ([`Store::nap`], [`Store::forget`]);
//! - **wake**: a bounded cover of the whole history for start-up context ([`Store::wake_text`]),
//!   and [`Store::zoom`] to open a block.
//!
//! Every change is one redb write transaction, durable when the call returns. Every stored value
//! carries a format version and a CRC32, and decodes into a `Result`: corrupt bytes are
//! [`Error::Corrupt`], never a panic.
//!
//! ```
//! use engram::{NewMemory, Store, WakeOptions};
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::create(dir.path().join("memory.redb")).unwrap();
//! for i in 0..4 {
//!     store.note("default", NewMemory::new(format!("fact {i}"))).unwrap();
//! }
//! // Two merges are due first: 0-1 and 2-3, then 0-3.
//! let p = store.next_prompt("default").unwrap().unwrap();
//! assert_eq!(p.block.to_string(), "0-1");
//! store.nap("default", p.block, "facts 0 and 1").unwrap();
//! let text = store.wake_text("default", &WakeOptions::default()).unwrap();
//! assert!(text.ends_with("You are awake.\n2 merges are pending. Run: engram nap\n"));
//! ```
//!
//! [redb]: https://docs.rs/redb
#![deny(unsafe_code)]
#![warn(missing_docs)]
#![cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]

pub mod audit;
pub mod auth;
pub mod block;
pub mod claims;
pub mod codec;
mod db;
mod error;
mod group;
pub mod import;
pub mod lifecycle;
mod log;
pub mod policy;
mod record;
pub mod schema;
pub mod session;
mod tail;
pub mod text;
mod tree;
mod verify;
pub mod wake;

pub use auth::{Access, Grant};
pub use block::Block;
pub use db::{
    validate_config, validate_scope, Config, Options, ReadTxn, ScopeStats, Store, WriteTxn,
    CONFIG_NAMES, DEFAULT_SCOPE,
};
pub use error::{Error, Result};
pub use log::{
    compile_pattern, memory_line, validate_key, Appended, NewMemory, Recall, RecallQuery,
};
pub use record::{BuiltFrom, Kind, Memory, Node, Status, Summary};
/// The storage engine, re-exported so that custom backends (`redb::StorageBackend`) match its version.
pub use redb;
pub use session::{Archived, SaveOutcome, SessionAppended, SessionInfo, SessionItems};
pub use tail::TailRepair;
pub use tree::{summary_line, MergePrompt, NapOutcome, PromptInput, ZoomEntry};
pub use verify::Report;
pub use wake::{WakeItem, WakeOptions, WakeView};
