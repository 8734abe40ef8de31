//! Every table of a somna store as redb defines it (store format 1), in one place. Keys are
//! redb-native tuples; every value is `&[u8]` in the envelope of [`crate::storage::codec`],
//! decoded in our layer so that bad bytes are errors, never panics. `docs/design.md` specifies
//! each of these byte by byte. Only the redb engine ([`crate::storage::redb`]) opens them;
//! the rest of somna uses the typed descriptors of [`crate::storage::tables`] through the
//! storage seam ([`crate::storage::kv`]). [`STORE_FORMAT`] and [`TABLE_NAMES`], which every
//! engine shares, are re-exported here from [`crate::storage::tables`] so that this path keeps
//! naming them.

use redb::TableDefinition;

/// Store-wide facts: `format` (the store format version), `created_us`, `next_scope_id`.
pub const META: TableDefinition<&str, &[u8]> = TableDefinition::new("meta");
/// Settings (`ENTRY_BYTES`, `RAW_MAX`, `WAKE_LINES`, `WAKE_BYTES`): name -> u64.
pub const CONFIG: TableDefinition<&str, &[u8]> = TableDefinition::new("config");
/// Scope name -> its id and counters.
pub const SCOPES: TableDefinition<&str, &[u8]> = TableDefinition::new("scopes");
/// The raw log: (scope id, position) -> memory record.
pub const LOG: TableDefinition<(u32, u64), &[u8]> = TableDefinition::new("log");
/// The summary tree: (scope id, level, aligned start) -> summary node. Level = log2(size) >= 1.
pub const TREE: TableDefinition<(u32, u8, u64), &[u8]> = TableDefinition::new("tree");
/// Complete blocks with no summary yet: (scope id, level, aligned start) -> ().
pub const PENDING: TableDefinition<(u32, u8, u64), ()> = TableDefinition::new("pending");
/// Idempotency keys of appends: (scope id, key) -> first id, count, checksum of the texts.
pub const IDEMPOTENCY: TableDefinition<(u32, &str), &[u8]> = TableDefinition::new("idempotency");

/// Sessions: id -> counters, times and revision.
pub const SESSIONS: TableDefinition<&str, &[u8]> = TableDefinition::new("sessions");
/// Live session messages: (session id, sequence number) -> compact JSON text.
pub const SESSION_MESSAGES: TableDefinition<(&str, u64), &[u8]> =
    TableDefinition::new("session_messages");
/// The 128-bit hash of each live message, beside it: (session id, sequence number) -> hash.
pub const SESSION_HASHES: TableDefinition<(&str, u64), &[u8]> =
    TableDefinition::new("session_hashes");
/// Messages that a save dropped: (session id, archive sequence number) -> time and JSON text.
pub const SESSION_ARCHIVE: TableDefinition<(&str, u64), &[u8]> =
    TableDefinition::new("session_archive");
/// Idempotency keys of session appends: (session id, key) -> the append's outcome.
pub const SESSION_IDEMPOTENCY: TableDefinition<(&str, &str), &[u8]> =
    TableDefinition::new("session_idempotency");

/// Grants: (principal, access 0 read / 1 write, scope or prefix) -> who granted it, when.
pub const GRANTS: TableDefinition<(&str, u8, &str), &[u8]> = TableDefinition::new("grants");
/// Per-scope write policy: scope name -> policy.
pub const POLICIES: TableDefinition<&str, &[u8]> = TableDefinition::new("policies");
/// Lifecycle events of memories: (scope id, memory id, event number) -> event.
pub const EVENTS: TableDefinition<(u32, u64, u32), &[u8]> = TableDefinition::new("events");
/// Summaries whose inputs changed since they were written: (scope id, level, start) -> ().
pub const STALE: TableDefinition<(u32, u8, u64), ()> = TableDefinition::new("stale");
/// The claims of each summary with the memories each cites: (scope id, level, start) -> claims.
pub const CLAIMS: TableDefinition<(u32, u8, u64), &[u8]> = TableDefinition::new("claims");
/// The read audit, when enabled: sequence number -> who read what, when.
pub const AUDIT: TableDefinition<u64, &[u8]> = TableDefinition::new("audit");
/// Bearer tokens of the MCP server's HTTP transport: SHA-256 of the token (64 lowercase hex
/// digits) -> the principal it authenticates, who added it, when. The token itself is never stored.
pub const TOKENS: TableDefinition<&str, &[u8]> = TableDefinition::new("tokens");

/// The ranked-search index, its recent documents: (scope id, document) -> the document's terms
/// and length; (scope id, `u64::MAX`) -> the scope's index statistics. See docs/design.md.
pub const SEARCH_TAIL: TableDefinition<(u32, u64), &[u8]> = TableDefinition::new("search_tail");
/// The ranked-search index, folded: (scope id, term, first document) -> a block of postings.
pub const SEARCH_POSTINGS: TableDefinition<(u32, &str, u64), &[u8]> =
    TableDefinition::new("search_postings");
/// Embeddings: (scope id, memory id) -> the vector; (scope id, `u64::MAX`) -> the dimension.
pub const VECTORS: TableDefinition<(u32, u64), &[u8]> = TableDefinition::new("vectors");

/// LangGraph checkpoints: (thread id, namespace, checkpoint id) -> the checkpoint record.
pub const CHECKPOINTS: TableDefinition<(&str, &str, &str), &[u8]> =
    TableDefinition::new("checkpoints");
/// Channel values of checkpoints: (thread id, namespace, channel, version) -> the value, or the
/// runs of list items that make it up.
pub const CHECKPOINT_CHANNELS: TableDefinition<(&str, &str, &str, &str), &[u8]> =
    TableDefinition::new("checkpoint_channels");
/// Items of list channel values: (thread id, namespace, channel, item number) -> one item.
pub const CHECKPOINT_ITEMS: TableDefinition<(&str, &str, &str, u64), &[u8]> =
    TableDefinition::new("checkpoint_items");
/// Pending writes: (thread id, namespace, checkpoint id, task id, index) -> the write.
pub const CHECKPOINT_WRITES: TableDefinition<(&str, &str, &str, &str, u64), &[u8]> =
    TableDefinition::new("checkpoint_writes");
/// LangGraph's long-term store: (namespace, key) -> the item.
pub const STORE_ITEMS: TableDefinition<(&str, &str), &[u8]> = TableDefinition::new("store_items");

/// Live session messages with their hashes, in runs of up to 64 (store format 3): (session id,
/// sequence number of the run's first message) -> a chunk.
pub const SESSION_CHUNKS: TableDefinition<(&str, u64), &[u8]> =
    TableDefinition::new("session_chunks");

/// Vectors an embedder made (store format 6): (scope id, model, memory id) -> the vector;
/// (scope id, model, `u64::MAX`) -> the dimension; (scope id, model, `u64::MAX - 1`) -> the
/// backfill's cursor, the first memory it has not looked at.
pub const EMBEDDINGS: TableDefinition<(u32, &str, u64), &[u8]> = TableDefinition::new("embeddings");

pub use crate::storage::tables::{STORE_FORMAT, TABLE_NAMES};
