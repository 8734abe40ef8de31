//! # somna
//!
//! An embedded, transactional storage engine for agent memory, on [redb].
//!
//! A store holds, per **scope** (one memory stream):
//! - the **raw log**: short memories appended forever, never rewritten; a memory's id is its
//!   position ([`Store::note`], [`Store::append`], [`Store::recall`]);
//! - the **summary tree**: summaries of aligned power-of-two blocks of the log, written by the
//!   agent in answer to merge prompts and disposable ([`Store::nap`], [`Store::forget`]);
//! - **wake**: a bounded cover of the whole history for start-up context ([`Store::wake_text`]),
//!   and [`Store::zoom`] to open a block.
//!
//! A store lives in one redb file, or (with the `postgres` feature) in one schema of a
//! PostgreSQL-protocol server named by a `postgresql://` URL: two storage engines behind one
//! seam (`storage::engine`), the same tables and the same value bytes on both. Every change is
//! one write transaction, durable when the call returns. Every stored value carries a format
//! version and a CRC32, and decodes into a `Result`: corrupt bytes are [`Error::Corrupt`], never
//! a panic.
//!
//! ```
//! use somna::{NewMemory, Store, WakeOptions};
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
//! assert!(text.ends_with("You are awake.\n2 merges are pending. Run: somna nap\n"));
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
// The modules are private, and their docs name one another for contributors (`cargo doc
// --document-private-items` renders those links); in the public docs they show as plain names.
#![allow(rustdoc::private_intra_doc_links)]

mod error;

// The command line (src/cli/) uses the library as an outside program would, through
// `somna::...` paths: this name makes them resolve inside the crate too.
#[cfg(feature = "cli")]
extern crate self as somna;

// The `somna` command line (the `cli` feature; its docs are its own `//!` lines).
#[cfg(feature = "cli")]
pub mod cli;

// Every module is private: the public surface is the list below (and `format`), as in redb. A
// path inside the crate names the module that defines an item, never this list
// (`tests/api/layers.rs` refuses `crate::Name` for a re-exported name).
mod checkpoint;
mod domain;
mod import;
mod memory;
mod session;
mod storage;
mod trust;
mod verify;

/// LangGraph's persistence: the storage of `somna.langgraph`'s checkpointer and store.
pub use checkpoint::items::{FoundItem, StoreItem};
pub use checkpoint::{
    ChannelValue, CheckpointEntry, CheckpointStats, DeltaHistory, ListQuery, NewCheckpoint,
    PendingWrite, Prune, Typed,
};
pub use domain::block::{Block, InvalidBlock};
pub use domain::claims::{parse_claims, uncited, Claim};
pub use domain::cover::{cover, cover_all, reference_cover, Cover};
pub use domain::json::{check_depth, nesting_depth, MAX_JSON_DEPTH};
/// Ranked search's formulas (BM25 and neighbour propagation) with the measured defaults.
pub use domain::rank;
pub use domain::record::{BuiltFrom, Kind, Memory, Node, Status, Summary};
/// The text rules somna applies: what a memory may hold, display-safe output, dates.
pub use domain::text;
pub use domain::text::{validate_key, validate_scope, validate_scopes};
/// Ranked search's tokenizer: the terms a text or a query yields.
pub use domain::tokenize;
pub use error::{Error, Result};
pub use import::copy::Copied;
pub use import::{
    parse_dated_lines, read_bounded, read_file, read_optmem, ExportLine, ImportSummary,
    OptMemStore, MAX_INPUT_BYTES,
};
pub use memory::hints::Hints;
pub use memory::lifecycle::{marked_line, Decision, Event, EventKind, MemoryState, TOMBSTONE};
pub use memory::log::memory_line;
pub use memory::note::{Appended, NewMemory, Noted, NotedSeen, MAX_LINKS};
pub use memory::recall::{
    compile_pattern, compile_query, Query, Recall, RecallQuery, MAX_PATTERN_BYTES, MAX_WORDS,
};
pub use memory::search::embed::{BackfillProgress, BackfillReport, Embedder, Purpose};
pub use memory::search::texts::{best_cosine, rank_texts};
pub use memory::search::vector::{Embedding, MAX_DIMENSION};
pub use memory::search::{Hit, RankParams, SearchMode, SearchQuery, SearchResult, MAX_NEIGHBOURS};
pub use memory::summary::summary_line;
pub use memory::tree::{MergePrompt, NapOutcome, Napped, PromptInput, Why, ZoomEntry};
pub use memory::wake::{WakeItem, WakeOptions, WakeView};
/// What a disk under a store's file implements, for [`Store::with_backend`] (an in-memory disk,
/// the fault-injecting disk of the crash tests): redb's trait and its error, re-exported so that
/// a custom backend matches the engine's version (redb itself is not part of somna's API).
pub use redb::{BackendError, StorageBackend};
pub use session::{
    compact_message, is_relative_file_path, validate_session_id, Archived, SaveOutcome,
    SessionAppended, SessionInfo, SessionItems, MAX_MESSAGE_BYTES, MAX_SESSION_ID_BYTES,
};
pub use storage::access::{pattern_matches, validate_principal, Access, DEFAULT_ADMIN};
pub use storage::config::{validate_config, Config, CONFIG_NAMES};
pub use storage::options::{
    cache_bytes_from_env, Options, UpgradeProgress, CACHE_ENV, CLI_CACHE_BYTES, SERVER_CACHE_BYTES,
};
pub use storage::pg::url::{check_location, url_of, without_password};
pub use storage::redb::tail::TailRepair;
pub use storage::store::{Migration, Store, DEFAULT_SCOPE};
pub use storage::txn::{ReadTxn, ScopeStats, WriteTxn};
pub use trust::audit::AuditEntry;
pub use trust::grants::Grant;
pub use trust::policy::{
    looks_like_secret, reads_as_instructions, Policy, INSTRUCTION_PATTERNS, SECRET_PATTERNS,
};
pub use trust::tokens::TokenInfo;
pub use verify::Report;

/// The on-disk format, for tools and tests that read a store's bytes below the API: the tables
/// as redb defines them, the format number, the order-preserving key encoding and the value
/// envelope (docs/design.md, sections 2 to 5). Writing through these bypasses every check of
/// [`Store`]; the fuzz targets and the format tests use them to build damaged stores.
pub mod format {
    pub use crate::storage::chunk::{
        chain_next, decode_chunk, Chunk, Entry, CHAIN_START, CHUNK_MAX_BYTES, CHUNK_MAX_ENTRIES,
    };
    pub use crate::storage::codec::{decode, decode_str, encode, payload, VALUE_VERSION};
    pub use crate::storage::keys::{self, Key};
    pub use crate::storage::kv::TableId;
    pub use crate::storage::redb::schema::*;
}
