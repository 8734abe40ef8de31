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

// Every module is private but the four whose own `mod.rs` is a `pub use` list (session,
// checkpoint, trust, import): the public surface is the list below and the facade modules after
// it, as in redb. A path inside the crate names the module that defines an item, never this list
// (`tests/api/layers.rs` refuses `crate::Name` for a re-exported name).
pub mod checkpoint;
mod domain;
pub mod import;
mod memory;
pub mod session;
mod storage;
pub mod trust;
mod verify;

// The core, one screen: a store, how it opens, its errors and records, and each verb's query and
// answer. The rest is grouped by concept in the modules that follow.
pub use domain::block::{Block, InvalidBlock};
pub use domain::record::{BuiltFrom, Kind, Memory, Node, Status, Summary};
pub use error::{Error, Result};
pub use memory::hints::Hints;
pub use memory::lifecycle::{Decision, Event, EventKind, MemoryState};
pub use memory::note::{Appended, NewMemory, Noted, NotedSeen, MAX_LINKS};
pub use memory::recall::{Recall, RecallQuery};
pub use memory::search::{Hit, SearchMode, SearchQuery, SearchResult};
pub use memory::tree::{MergePrompt, NapOutcome, Napped, PromptInput, Why, ZoomEntry};
pub use memory::wake::{WakeItem, WakeOptions, WakeView};
pub use storage::options::Options;
pub use storage::store::{Store, DEFAULT_SCOPE};
pub use storage::txn::{ReadTxn, ScopeStats, WriteTxn};
pub use verify::Report;

/// Opening a store: what an open reports (a migration, a torn tail it repaired), the page
/// cache's sizes, the store's settings, where a store may live, and the disk under a file.
pub mod store {
    pub use crate::storage::config::{validate_config, Config, CONFIG_NAMES};
    pub use crate::storage::options::{
        cache_bytes_from_env, UpgradeProgress, CACHE_ENV, CLI_CACHE_BYTES, SERVER_CACHE_BYTES,
    };
    pub use crate::storage::pg::url::{check_location, url_of, without_password};
    pub use crate::storage::redb::tail::TailRepair;
    pub use crate::storage::store::Migration;
    /// What a disk under a store's file implements, for [`crate::Store::with_backend`] (an
    /// in-memory disk, the fault-injecting disk of the crash tests): the engine's trait and its
    /// error, so that a custom backend matches the engine's version (the engine itself is not
    /// part of somna's API).
    pub use redb::{BackendError, StorageBackend};
}

/// Ranked search beyond [`crate::SearchQuery`]: its parameters and formulas, the tokenizer, the
/// embedder and its backfill, vectors, and ranking texts that are not in a store.
pub mod search {
    /// Ranked search's formulas (BM25 and neighbour propagation) with the measured defaults.
    pub use crate::domain::rank;
    /// Ranked search's tokenizer: the terms a text or a query yields.
    pub use crate::domain::tokenize;
    pub use crate::memory::search::embed::{BackfillProgress, BackfillReport, Embedder, Purpose};
    pub use crate::memory::search::texts::{best_cosine, rank_texts};
    pub use crate::memory::search::vector::{Embedding, MAX_DIMENSION};
    pub use crate::memory::search::{RankParams, MAX_NEIGHBOURS};
}

/// Exact recall beyond [`crate::RecallQuery`]: its compiled query and patterns, and their limits.
pub mod recall {
    pub use crate::memory::recall::{
        compile_pattern, compile_query, Query, MAX_PATTERN_BYTES, MAX_WORDS,
    };
}

/// Wake's cover of a history (docs/design.md, "Wake"), pure: which blocks a wake shows.
pub mod cover {
    pub use crate::domain::cover::{cover, cover_all, reference_cover, Cover};
}

/// The text rules somna applies (what a memory may hold, display-safe output, dates, JSON
/// nesting), and the lines a memory, summary or reviewed memory prints as.
pub mod text {
    pub use crate::domain::claims::{parse_claims, uncited, Claim};
    pub use crate::domain::json::{check_depth, nesting_depth, MAX_JSON_DEPTH};
    pub use crate::domain::text::{
        check_scope_count, date_of, display_safe, json_safe, now_us, parse_time, prefix_within,
        push_date, rfc3339_of, validate_field, validate_key, validate_line, validate_scope,
        validate_scopes, DEFAULT_ENTRY_BYTES, MAX_ENTRY_BYTES, MAX_SCOPES,
    };
    pub use crate::memory::lifecycle::{marked_line, TOMBSTONE};
    pub use crate::memory::log::memory_line;
    pub use crate::memory::summary::summary_line;
}

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
