//! The typed descriptors of the 29 tables, for call sites: `LOG.get(kv, (scope, id))`. Each
//! names its [`TableId`] and its key shape (see [`crate::storage::keys`]); the redb definitions
//! of the same tables, with the same key types, are in [`crate::storage::redb::schema`]. Values are
//! envelope bytes ([`crate::storage::codec`]); `pending` and `stale` store empty values.

use crate::error::Result;
use crate::storage::codec::decode;
use crate::storage::keys::Table;
use crate::storage::kv::{KvRead, TableId};

/// Store-wide facts: `format`, `created_us`, `next_scope_id`, `admin`.
pub const META: Table<&str> = Table::new(TableId::Meta);

/// The `meta` keys that belong to one file's engine, not to the store's data: the commit
/// journal's applied marker and tail (docs/design.md 14.3 and 14.9), which count that file's
/// own journal. A copy to another store neither copies nor compares them.
pub const ENGINE_LOCAL_META: [&str; 2] = ["journal", "journal.tail"];

/// Whether `key` of table `t` is one of [`ENGINE_LOCAL_META`].
pub(crate) fn engine_local(t: TableId, key: &[u8]) -> bool {
    t == TableId::Meta
        && ENGINE_LOCAL_META
            .iter()
            .any(|k| crate::storage::keys::encode::<&str>(k) == key)
}
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
/// Live session messages of store format 2: (session id, sequence number) -> JSON text. Format
/// 3 keeps them in [`SESSION_CHUNKS`]; this table is only the migration's input (and a
/// read-only handle's view of a format-2 store).
pub const SESSION_MESSAGES: Table<(&str, u64)> = Table::new(TableId::SessionMessages);
/// The hash of each live message of store format 2: (session id, sequence number) -> hash.
/// Only the migration's input in format 3, as [`SESSION_MESSAGES`].
pub const SESSION_HASHES: Table<(&str, u64)> = Table::new(TableId::SessionHashes);
/// Live session messages with their hashes, in runs (store format 3): (session id, sequence
/// number of the run's first message) -> a chunk ([`crate::storage::chunk`]).
pub const SESSION_CHUNKS: Table<(&str, u64)> = Table::new(TableId::SessionChunks);
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
/// The search index's recent documents and statistics: (scope id, document) -> terms, length.
pub const SEARCH_TAIL: Table<(u32, u64)> = Table::new(TableId::SearchTail);
/// The search index's folded postings: (scope id, term, first document) -> a block of postings.
pub const SEARCH_POSTINGS: Table<(u32, &str, u64)> = Table::new(TableId::SearchPostings);
/// Embeddings: (scope id, memory id) -> vector; (scope id, `u64::MAX`) -> the dimension.
pub const VECTORS: Table<(u32, u64)> = Table::new(TableId::Vectors);

/// Vectors an embedder made (store format 6), kept per model: (scope id, model, memory id) ->
/// vector; (scope id, model, `u64::MAX`) -> the dimension; (scope id, model, `u64::MAX - 1`) ->
/// the backfill's cursor. See [`crate::storage::embeddings`] and docs/design.md 12.7.
pub const EMBEDDINGS: Table<(u32, &str, u64)> = Table::new(TableId::Embeddings);

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

/// The store format this build writes (the `format` entry of [`META`]), on every engine.
/// Format 2 adds the search index ([`SEARCH_TAIL`], [`SEARCH_POSTINGS`]) and [`VECTORS`], which
/// every write keeps: an older somna refuses the store rather than write past its index.
/// Format 3 keeps a session's live messages in chunks ([`SESSION_CHUNKS`]) instead of one row
/// per message and per hash. Format 4 means that an opener replays the commit journal
/// `<file>-journal` (docs/design.md, "Commit journal"); its tables are format 3's. Format 5
/// means that the file's redb header may hold commits published without a sync (the shared
/// journal of the default mode: a checkpoint slot and god-byte bit 16, docs/design.md 14.9),
/// which an older somna's redb would trust after a power loss instead of rolling back; its
/// tables are format 4's. Format 6 adds [`EMBEDDINGS`], the vectors of the store's embedder,
/// which a redaction or a forget must delete: an older somna would leave them behind. Format 7
/// counts the rewrites of vectors in `meta["vector_rewrites"]` (a write that replaces, inserts
/// below a scope's highest id, or deletes a vector raises it), which a handle's cache of
/// quantised vectors trusts: an older somna would rewrite vectors without raising it.
pub const STORE_FORMAT: u32 = 7;

/// The first store format that counts vector rewrites (a cache of vectors is used only there).
pub const REWRITES_FORMAT: u32 = 7;

/// The first store format with the embedder's vectors ([`EMBEDDINGS`]).
pub const EMBED_FORMAT: u32 = 6;

/// The first store format whose opener replays the commit journal.
pub const JOURNAL_STORE_FORMAT: u32 = 4;

/// The first store format with the search index (a format-1 store has none until upgraded).
pub const INDEX_FORMAT: u32 = 2;

/// The first store format with session chunks.
pub const CHUNK_FORMAT: u32 = 3;

/// The format `meta.format` records (`None`: not recorded; an error: a damaged value).
pub(crate) fn stored_format(kv: &(impl KvRead + ?Sized)) -> Result<Option<u32>> {
    META.get(kv, "format")?
        .map(|v| decode::<u32>("meta", &"format", &v))
        .transpose()
}

/// The tables format 2 added: the search index and the vectors (a read-only handle reads a
/// format-1 store without them).
pub const SEARCH_TABLES: [&str; 3] = ["search_tail", "search_postings", "vectors"];

/// LangGraph's tables (a read-only handle reads a store without them; a read-write open adds
/// them).
pub const CHECKPOINT_TABLES: [&str; 5] = [
    "checkpoints",
    "checkpoint_channels",
    "checkpoint_items",
    "checkpoint_writes",
    "store_items",
];

/// Names of all tables, for verify and docs.
pub const TABLE_NAMES: &[&str] = &[
    "meta",
    "config",
    "scopes",
    "log",
    "tree",
    "pending",
    "idempotency",
    "sessions",
    "session_messages",
    "session_hashes",
    "session_archive",
    "session_idempotency",
    "grants",
    "policies",
    "events",
    "stale",
    "claims",
    "audit",
    "tokens",
    "search_tail",
    "search_postings",
    "vectors",
    "checkpoints",
    "checkpoint_channels",
    "checkpoint_items",
    "checkpoint_writes",
    "store_items",
    "session_chunks",
    "embeddings",
];
