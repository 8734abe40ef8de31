//! LangGraph's persistence: a checkpoint to write ([`NewCheckpoint`]) and as read
//! ([`CheckpointEntry`]), its channel values and pending writes, the long-term store's items
//! ([`StoreItem`], [`FoundItem`]), listing and pruning. The calls are [`crate::Store`]'s
//! (`checkpoint_put`, ...); the Python adapter `somna.langgraph` is built on them.
//!
//! **Layer 3, checkpoints**: a sibling of [`crate::memory`] and [`crate::session`], which it
//! never uses; it may use [`crate::domain`], [`crate::storage`] and [`crate::trust`].
//!
//! The storage of LangGraph's persistence, for the Python adapter `somna.langgraph`: the
//! checkpoints of a graph's threads (`SomnaSaver`, a `BaseCheckpointSaver`) and the items of
//! its long-term store (`SomnaStore`, a `BaseStore`, in [`items`]). Every value a host hands in
//! is opaque: LangGraph's serializer turns an object into a type string and bytes ([`Typed`]),
//! and somna stores them as they are, never interpreting (nor pickling) them.
//!
//! What is stored is what changed (docs/design.md, "Checkpoints"):
//! - per `(thread, namespace, checkpoint id)`, one record: the checkpoint without its channel
//!   values, its metadata, its parent, and the version of every channel it holds;
//! - per `(thread, namespace, channel, version)`, one channel value, written only when the
//!   channel changed (its version is new), as PostgreSQL's saver does;
//! - a list value (a message history) is stored as items, one row each, and a version that only
//!   appended to the list of the channel's previous version refers to that version's items and
//!   writes only the new ones: a history that grows by one message per step costs one message
//!   per step, not the whole history again;
//! - per `(thread, namespace, checkpoint id, task id, index)`, one pending write.
//!
//! Access: a thread's checkpoints are governed by the scope `thread:ID`, the store's items by
//! `store:` and the first label of their namespace (docs/trust.md).

mod check;
pub(crate) mod items;
mod manage;
mod read;
mod write;

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

pub(crate) use check::check_checkpoints;
pub use items::{FoundItem, StoreItem};
pub use manage::Prune;
pub use read::{CheckpointStats, DeltaHistory, ListQuery};

/// A value as LangGraph's serializer gives it (`serde.dumps_typed`): a type string and bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Typed {
    /// The serializer's type tag (`"msgpack"`, `"json"`, `"bytes"`, `"null"`, ...).
    pub kind: String,
    /// The serialized bytes, stored as they are.
    #[serde(with = "raw_bytes")]
    pub bytes: Vec<u8>,
}

/// `Vec<u8>` as serde bytes: the same postcard bytes as a sequence of `u8` (varint length, then
/// the bytes), read and written in one piece instead of byte by byte.
mod raw_bytes {
    use serde::{Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(v: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_bytes(v)
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Vec<u8>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("bytes")
            }
            fn visit_bytes<E: serde::de::Error>(self, v: &[u8]) -> Result<Vec<u8>, E> {
                Ok(v.to_vec())
            }
            fn visit_byte_buf<E: serde::de::Error>(self, v: Vec<u8>) -> Result<Vec<u8>, E> {
                Ok(v)
            }
        }
        d.deserialize_byte_buf(V)
    }
}

impl Typed {
    /// A typed value.
    pub fn new(kind: impl Into<String>, bytes: impl Into<Vec<u8>>) -> Self {
        Typed {
            kind: kind.into(),
            bytes: bytes.into(),
        }
    }
}

/// One channel's value in a checkpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChannelValue {
    /// The channel exists but holds no value (LangGraph's empty channel).
    Empty,
    /// One serialized value.
    Whole(Typed),
    /// A list, each item serialized on its own: stored item by item, so that a list that only
    /// grew since the channel's previous version stores only its new items.
    List(Vec<Typed>),
}

/// A checkpoint to store ([`crate::WriteTxn::checkpoint_put`]).
#[derive(Debug, Clone)]
pub struct NewCheckpoint {
    /// The thread id.
    pub thread: String,
    /// The checkpoint namespace (`""` for the root graph).
    pub ns: String,
    /// The checkpoint id (LangGraph's are time-ordered, so newer ids sort later).
    pub id: String,
    /// The parent checkpoint's id, if any.
    pub parent: Option<String>,
    /// The checkpoint without its channel values, serialized.
    pub checkpoint: Typed,
    /// The metadata, serialized.
    pub metadata: Typed,
    /// The metadata as a JSON object, for `list`'s filters.
    pub metadata_json: String,
    /// The run that made the checkpoint (`metadata.run_id`), for `delete_for_runs`.
    pub run_id: Option<String>,
    /// Every channel that has a value in the checkpoint, with its version.
    pub versions: Vec<(String, String)>,
    /// The channels whose version is new in this checkpoint, with their values: only these are
    /// written (a value already stored at that version is kept).
    pub changed: Vec<(String, String, ChannelValue)>,
}

/// A pending write of a task ([`crate::WriteTxn::checkpoint_put_writes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PendingWrite {
    /// The task that wrote it.
    pub task_id: String,
    /// The write's index in the task (negative for LangGraph's special writes).
    pub idx: i64,
    /// The channel written.
    pub channel: String,
    /// The value, serialized.
    pub value: Typed,
    /// The task's path (`""` when not given), which orders writes within a step.
    pub task_path: String,
}

/// A stored checkpoint with its channel values and pending writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointEntry {
    /// The thread id.
    pub thread: String,
    /// The namespace.
    pub ns: String,
    /// The checkpoint id.
    pub id: String,
    /// The parent checkpoint's id.
    pub parent: Option<String>,
    /// The checkpoint without its channel values.
    pub checkpoint: Typed,
    /// The metadata.
    pub metadata: Typed,
    /// The channel values, in channel order.
    pub values: Vec<(String, ChannelValue)>,
    /// The pending writes, in LangGraph's order: task path, task id, index.
    pub writes: Vec<PendingWrite>,
}

/// The record of one checkpoint (table `checkpoints`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct CheckpointRecord {
    pub parent: Option<String>,
    pub checkpoint: Typed,
    pub metadata: Typed,
    pub metadata_json: String,
    pub run_id: Option<String>,
    pub versions: Vec<(String, String)>,
}

/// One stored channel value (table `checkpoint_channels`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) enum StoredChannel {
    Empty,
    Whole(Typed),
    /// A list: runs `(first item number, count)` of table `checkpoint_items`, in order, the
    /// number of items and the chained hash of the items (see [`write`](mod@write)).
    List {
        runs: Vec<(u64, u64)>,
        count: u64,
        chain: [u8; 16],
    },
}

/// One stored pending write (table `checkpoint_writes`; task id and index are in the key).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct WriteRecord {
    pub channel: String,
    pub value: Typed,
    pub task_path: String,
}

/// The longest thread id, namespace, checkpoint id, channel, version or task id, in bytes.
pub const MAX_ID_BYTES: usize = 1024;

/// The scope that governs a thread's checkpoints (docs/trust.md).
pub fn thread_scope(thread: &str) -> String {
    format!("thread:{thread}")
}

/// Checks an identifier of a checkpoint key: at most 1 KiB, no NUL; `what` names it in errors.
/// (The empty string is allowed: the root namespace is `""`.)
pub(crate) fn validate_part(what: &'static str, s: &str) -> Result<()> {
    if s.len() > MAX_ID_BYTES {
        return Err(Error::invalid(
            what,
            format!("must be at most {MAX_ID_BYTES} bytes (got {})", s.len()),
        ));
    }
    if s.contains('\0') {
        return Err(Error::invalid(what, "contains a NUL character"));
    }
    Ok(())
}

/// Checks a thread id: 1 byte to 1 KiB, no NUL.
pub(crate) fn validate_thread(thread: &str) -> Result<()> {
    if thread.is_empty() {
        return Err(Error::invalid("thread id", "must not be empty"));
    }
    validate_part("thread id", thread)
}

/// The order-preserving `u64` of a write index: the sign bit flipped, so that -4 < -1 < 0 < 1.
pub(crate) fn idx_key(idx: i64) -> u64 {
    (idx as u64) ^ (1 << 63)
}

/// The inverse of [`idx_key`].
pub(crate) fn idx_of(key: u64) -> i64 {
    (key ^ (1 << 63)) as i64
}

/// The string right after `s` in byte order, `s` + NUL: every key `(s, ..)` sorts before every
/// key `(after(s), ..)`, so "every key whose first elements are these" is a range between two
/// complete keys (which is what the storage seam accepts as bounds).
pub(crate) fn after(s: &str) -> String {
    let mut n = String::with_capacity(s.len() + 1);
    n.push_str(s);
    n.push('\0');
    n
}

/// A checkpoint key as errors show it: `thread/ns/id`.
pub(crate) struct CKey<'a>(pub &'a str, pub &'a str, pub &'a str);

impl fmt::Display for CKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}", self.0, self.1, self.2)
    }
}

/// A channel or item key as errors show it: `thread/ns/channel@version`.
pub(crate) struct VKey<'a>(
    pub &'a str,
    pub &'a str,
    pub &'a str,
    pub &'a dyn fmt::Display,
);

impl fmt::Display for VKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}/{}@{}", self.0, self.1, self.2, self.3)
    }
}

crate::storage::store::store_calls! {
    /// [`crate::WriteTxn::checkpoint_put`] in its own transaction.
    write fn checkpoint_put(c: &NewCheckpoint) -> ();
    /// [`crate::WriteTxn::checkpoint_put_writes`] in its own transaction.
    write fn checkpoint_put_writes(thread: &str, ns: &str, id: &str, writes: &[PendingWrite]) -> ();
    /// [`crate::ReadTxn::checkpoint_get`] over one snapshot.
    read fn checkpoint_get(thread: &str, ns: &str, id: Option<&str>) -> Option<CheckpointEntry>;
    /// [`crate::ReadTxn::checkpoint_delta_history`] over one snapshot.
    read fn checkpoint_delta_history(thread: &str, ns: &str, id: Option<&str>, channels: &[String])
        -> Vec<DeltaHistory>;
    /// [`crate::ReadTxn::checkpoint_list`] over one snapshot.
    read fn checkpoint_list(q: &ListQuery) -> Vec<CheckpointEntry>;
}
