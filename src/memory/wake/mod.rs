//! Wake: the bounded cover of the whole history ([`crate::domain::cover`]) read from one
//! snapshot of the log and the tree, and rendered in parts. This file holds what wake returns
//! and takes; `read.rs` the queries (a scope, several scopes, within a byte budget) and the
//! [`crate::Store`] calls; `render.rs` the text (the lines, the left-out line, the parts with
//! their frame and hints).

mod read;
mod render;

use serde::Serialize;

use crate::domain::block::Block;
use crate::domain::record::{Memory, Summary};
#[cfg(feature = "schemars")]
use crate::domain::schema::Objects;
use crate::memory::hints::Hints;

/// A part of wake output holds at most this many lines...
pub const PART_LINES: usize = 500;
/// ...and at most this many bytes.
pub const PART_BYTES: usize = 20_000;
/// A byte budget is met by trying at most this many distinct covers below the line budget,
/// largest first (then bisection below them).
pub const WAKE_SCAN: usize = 64;

/// One line of wake.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum WakeItem {
    /// A raw memory.
    Memory(Memory),
    /// A summarized block.
    Summary {
        /// The block.
        block: Block,
        /// Its summary.
        summary: Summary,
    },
}

/// What wake shows: the cover's lines and what surrounds them.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct WakeView {
    /// The scope.
    pub scope: String,
    /// Memories in the snapshot (T).
    pub total: u64,
    /// Memories `[0, omitted)` left out to fit the budget (0: none).
    pub omitted: u64,
    /// The cover's lines, oldest first.
    #[cfg_attr(feature = "schemars", schemars(with = "Objects"))]
    pub items: Vec<WakeItem>,
    /// Merges pending.
    pub pending: u64,
    /// The lines of `items` as shown, with markers (proposed, superseded, stale, untrusted...).
    pub item_lines: Vec<String>,
}

/// How to wake.
#[derive(Debug, Clone)]
pub struct WakeOptions {
    /// Budget in lines of memory (blocks plus the left-out line). Default: `WAKE_LINES`.
    pub lines: Option<usize>,
    /// Budget in bytes of the whole output, all parts. Default: `WAKE_BYTES` (0: none).
    pub bytes: Option<usize>,
    /// Which part to print, from 1.
    pub part: usize,
    /// Pin the snapshot to the first T memories (as printed by an earlier part).
    pub snapshot: Option<u64>,
    /// How the next-step hints name the action: shell lines (`Run: somna nap`, the default),
    /// MCP tool calls, or none ([`Hints`]).
    pub hints: Hints,
}

impl Default for WakeOptions {
    fn default() -> Self {
        WakeOptions {
            lines: None,
            bytes: None,
            part: 1,
            snapshot: None,
            hints: Hints::default(),
        }
    }
}
