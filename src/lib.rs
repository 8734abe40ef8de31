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
// The library never prints: it returns what it has to say (errors, reports, notes such as
// `Store::repaired_tail`), and the CLI or the host decides where it goes.
#![deny(clippy::print_stdout, clippy::print_stderr)]

mod error;

pub mod checkpoint;
pub mod domain;
pub mod import;
pub mod memory;
pub mod session;
pub mod storage;
pub mod trust;
mod verify;

pub use domain::block::Block;
pub use domain::record::{BuiltFrom, Kind, Memory, Node, Status, Summary};
pub use domain::text::validate_key;
pub use domain::text::validate_scope;
pub use error::{Error, Result};
pub use memory::log::memory_line;
pub use memory::note::{Appended, NewMemory};
pub use memory::recall::{compile_pattern, Recall, RecallQuery};
pub use memory::tree::{summary_line, MergePrompt, NapOutcome, PromptInput, ZoomEntry};
pub use memory::wake::{WakeItem, WakeOptions, WakeView};
/// The storage engine, re-exported so that custom backends (`redb::StorageBackend`) match its version.
pub use redb;
pub use session::{Archived, SaveOutcome, SessionAppended, SessionInfo, SessionItems};
pub use storage::access::Access;
pub use storage::config::{validate_config, Config, CONFIG_NAMES};
pub use storage::store::{Options, Store, DEFAULT_SCOPE};
pub use storage::tail::TailRepair;
pub use storage::txn::{ReadTxn, ScopeStats, WriteTxn};
pub use trust::grants::Grant;
pub use verify::Report;
