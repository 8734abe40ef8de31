//! The values somna stores: memory records with their full envelope, summary nodes, and the
//! per-scope bookkeeping. Each is encoded by [`crate::storage::codec`]; the field order below is the wire
//! order (postcard encodes struct fields in declaration order), so never reorder fields.

use serde::{Deserialize, Serialize};

use crate::domain::block::Block;

/// What kind of claim a memory makes. In JSON: the lower-case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Something a principal stated.
    #[serde(alias = "Statement")]
    Statement,
    /// Something observed directly (the default).
    #[default]
    #[serde(alias = "Observation")]
    Observation,
    /// Something concluded, not observed.
    #[serde(alias = "Inference")]
    Inference,
    /// A decision that was taken.
    #[serde(alias = "Decision")]
    Decision,
    /// Work to be done.
    #[serde(alias = "Task")]
    Task,
}

/// Where a memory stands in its lifecycle. In JSON: the lower-case name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// Recorded but not yet accepted.
    #[serde(alias = "Proposed")]
    Proposed,
    /// Accepted as true (the default).
    #[default]
    #[serde(alias = "Accepted")]
    Accepted,
    /// Replaced by a newer memory.
    #[serde(alias = "Superseded")]
    Superseded,
    /// No longer recommended.
    #[serde(alias = "Deprecated")]
    Deprecated,
    /// Withdrawn as wrong.
    #[serde(alias = "Retracted")]
    Retracted,
}

/// The lower-case names of an enum's values, declared once: `as_str`, `ALL`, `FromStr` (an
/// unknown name is [`crate::Error::Invalid`] listing the known ones) and `Display`.
macro_rules! names {
    ($t:ty, $what:literal, $($v:ident => $s:literal),*) => {
        impl $t {
            /// The lower-case name used on the command line and in JSON.
            pub fn as_str(&self) -> &'static str {
                match self { $(<$t>::$v => $s),* }
            }
            /// Every value, in declaration order.
            pub const ALL: &'static [$t] = &[$(<$t>::$v),*];
        }
        impl std::str::FromStr for $t {
            type Err = $crate::error::Error;
            fn from_str(s: &str) -> Result<Self, $crate::error::Error> {
                match s {
                    $($s => Ok(<$t>::$v),)*
                    _ => Err($crate::error::Error::invalid($what, format!(
                        "{s:?} is not one of {}", [$($s),*].join(", ")))),
                }
            }
        }
        impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

pub(crate) use names;

names!(Kind, "kind", Statement => "statement", Observation => "observation",
    Inference => "inference", Decision => "decision", Task => "task");
names!(Status, "status", Proposed => "proposed", Accepted => "accepted",
    Superseded => "superseded", Deprecated => "deprecated", Retracted => "retracted");

/// One memory of the raw log, with its envelope. Times are microseconds since the Unix epoch, UTC.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Memory {
    /// Its position in the scope's log: its id.
    pub id: u64,
    /// When the remembered thing was observed (defaults to the time it was recorded).
    pub observed_us: i64,
    /// When the engine committed it.
    pub recorded_us: i64,
    /// The text: one line, validated.
    pub text: String,
    /// What kind of claim this is.
    pub kind: Kind,
    /// Lifecycle status.
    pub status: Status,
    /// Who or what it came from (a principal id, a tool name), if known.
    pub source: Option<String>,
    /// Where it came from (a URL, a file path), if known.
    pub source_uri: Option<String>,
    /// Ids of earlier memories this one replaces.
    pub supersedes: Vec<u64>,
    /// Ids of memories this one contradicts.
    pub conflicts_with: Vec<u64>,
    /// After this time the memory is expired.
    pub valid_until_us: Option<i64>,
}

/// What a summary was built from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum BuiltFrom {
    /// From the raw memories `[lo, hi)` of its block.
    Raw,
    /// From the two child summaries, as they were when it was written.
    Children {
        /// When the left child was written (microseconds).
        left_written_us: i64,
        /// When the right child was written (microseconds).
        right_written_us: i64,
    },
    /// Imported (from an OptMem store or a JSON Lines export) without provenance.
    Imported,
}

/// A summary node of the tree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// The summary text: one line, validated like a memory.
    pub text: String,
    /// When it was written (microseconds since the epoch, UTC).
    pub written_us: i64,
    /// What it was built from.
    pub built_from: BuiltFrom,
    /// CRC32 over the texts of its inputs in order, to detect that an input changed.
    pub inputs_crc: u32,
}

/// A summary together with the block it covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    /// The block.
    pub block: Block,
    /// The summary.
    pub summary: Summary,
}

/// Per-scope bookkeeping, kept in the `scopes` table beside the scope's name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct ScopeMeta {
    pub id: u32,
    pub created_us: i64,
    /// Number of memories (the log is dense: positions 0..count).
    pub count: u64,
    /// Number of summary nodes.
    pub summaries: u64,
    /// Number of pending blocks.
    pub pending: u64,
}

/// What an idempotency key remembers: the ids its append got and a checksum of its texts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct IdemEntry {
    pub first: u64,
    pub count: u64,
    pub texts_crc: u32,
}
