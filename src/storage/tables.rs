//! The typed descriptors of the 24 tables, for call sites: `LOG.get(kv, (scope, id))`. Each
//! names its [`TableId`] and its key shape (see [`crate::storage::keys`]); the redb definitions
//! of the same tables, with the same key types, are in [`crate::storage::schema`]. Values are
//! envelope bytes ([`crate::storage::codec`]); `pending` and `stale` store empty values.

use crate::storage::keys::Table;
use crate::storage::kv::TableId;

/// Store-wide facts: `format`, `created_us`, `next_scope_id`, `admin`.
pub const META: Table<&str> = Table::new(TableId::Meta);
/// Settings: name -> u64.
pub const CONFIG: Table<&str> = Table::new(TableId::Config);
/// Scope name -> its id and counters.
pub const SCOPES: Table<&str> = Table::new(TableId::Scopes);
/// The raw log: (scope id, position) -> memory record.
pub const LOG: Table<(u32, u64)> = Table::new(TableId::Log);
/// The summary tree: (scope id, level, aligned start) -> summary node.
pub const TREE: Table<(u32, u8, u64)> = Table::new(TableId::Tree);
/// Complete blocks with no summary yet: (scope id, level, aligned start) -> empty.
pub const PENDING: Table<(u32, u8, u64)> = Table::new(TableId::Pending);
/// Idempotency keys of appends: (scope id, key) -> outcome.
pub const IDEMPOTENCY: Table<(u32, &str)> = Table::new(TableId::Idempotency);
/// Sessions: id -> counters, times and revision.
pub const SESSIONS: Table<&str> = Table::new(TableId::Sessions);
/// Live session messages: (session id, sequence number) -> JSON text.
pub const SESSION_MESSAGES: Table<(&str, u64)> = Table::new(TableId::SessionMessages);
/// The hash of each live message: (session id, sequence number) -> hash.
pub const SESSION_HASHES: Table<(&str, u64)> = Table::new(TableId::SessionHashes);
/// Dropped messages: (session id, archive sequence number) -> time and JSON text.
pub const SESSION_ARCHIVE: Table<(&str, u64)> = Table::new(TableId::SessionArchive);
/// Idempotency keys of session appends: (session id, key) -> outcome.
pub const SESSION_IDEMPOTENCY: Table<(&str, &str)> = Table::new(TableId::SessionIdempotency);
/// Grants: (principal, access, scope or prefix) -> who granted it, when.
pub const GRANTS: Table<(&str, u8, &str)> = Table::new(TableId::Grants);
/// Per-scope write policy: scope name -> policy.
pub const POLICIES: Table<&str> = Table::new(TableId::Policies);
/// Lifecycle events: (scope id, memory id, event number) -> event.
pub const EVENTS: Table<(u32, u64, u32)> = Table::new(TableId::Events);
/// Stale summaries: (scope id, level, start) -> empty.
pub const STALE: Table<(u32, u8, u64)> = Table::new(TableId::Stale);
/// Claims of each summary: (scope id, level, start) -> claims.
pub const CLAIMS: Table<(u32, u8, u64)> = Table::new(TableId::Claims);
/// The read audit: sequence number -> who read what, when.
pub const AUDIT: Table<u64> = Table::new(TableId::Audit);
/// HTTP bearer tokens: SHA-256 of the token, in hex -> principal, who added it, when.
pub const TOKENS: Table<&str> = Table::new(TableId::Tokens);
/// LangGraph checkpoints: (thread id, namespace, checkpoint id) -> the checkpoint record.
pub const CHECKPOINTS: Table<(&str, &str, &str)> = Table::new(TableId::Checkpoints);
/// Channel values: (thread id, namespace, channel, version) -> the value or its item runs.
pub const CHECKPOINT_CHANNELS: Table<(&str, &str, &str, &str)> =
    Table::new(TableId::CheckpointChannels);
/// Items of list channel values: (thread id, namespace, channel, item number) -> one item.
pub const CHECKPOINT_ITEMS: Table<(&str, &str, &str, u64)> = Table::new(TableId::CheckpointItems);
/// Pending writes: (thread id, namespace, checkpoint id, task id, index) -> the write.
pub const CHECKPOINT_WRITES: Table<(&str, &str, &str, &str, u64)> =
    Table::new(TableId::CheckpointWrites);
/// LangGraph's long-term store: (namespace, key) -> the item.
pub const STORE_ITEMS: Table<(&str, &str)> = Table::new(TableId::StoreItems);
