//! Conversation histories and their results: what a session is ([`SessionInfo`]), what a save or
//! an append did ([`SaveOutcome`], [`SessionAppended`]), its items and archive, and the limits
//! and checks of a message. The calls are [`crate::Store`]'s (`session_save`, `session_load`,
//! `session_append`, ...).
//!
//! **Layer 3, sessions**: a sibling of [`crate::memory`], which it never uses; it may use
//! [`crate::domain`], [`crate::storage`] and [`crate::trust`].
//!
//! Sessions: conversation histories kept in the same transactional file as the memory log.
//!
//! A session is an ordered list of JSON objects (messages, or Responses-API items), stored
//! byte-for-byte as given in compact form. Two contracts are served:
//! - the pure_agents `Memory` contract: `session_save` replaces the list atomically,
//!   `session_load` returns it (or `None`), delete is idempotent, list is sorted;
//! - the append-style contract (OpenAI Agents SDK, LangChain): `session_append` with an
//!   idempotency key, `session_items`, `session_pop`, `session_clear`.
//!
//! Each is a method of [`crate::WriteTxn`] or [`crate::ReadTxn`], and of [`crate::Store`] as one
//! transaction.
//!
//! Live messages are stored in chunks of up to 64 (store format 3: [`crate::storage::chunk`],
//! docs/design.md section 13), each message with its 128-bit hash and each chunk with the
//! session's hash chain. `save` writes only what changed: when the new list extends the stored
//! one (the chain of its first messages equals the last chunk's) it appends to the last chunk;
//! otherwise it compares the hashes of the stored messages with those of the new list, keeps the
//! longest common prefix, keeps the longest run of stored messages that the new list continues
//! with (so a framework that trims old history keeps its recent messages in place), and rewrites
//! the chunks from the first changed one. Messages a save drops are moved to the
//! session's archive, never lost silently. Every change gets a store-wide revision number, so
//! `expected_revision` gives optimistic concurrency without ABA.
//!
//! The files: [`record`] the stored form and its codec, `save` and `append` the two write
//! contracts, `read` the reads, `store` the [`crate::Store`] calls, `verify` the checks.

mod append;
mod read;
pub(crate) mod record;
mod save;
mod store;
mod verify;

pub use record::{
    compact_message, is_relative_file_path, validate_session_id, Archived, SaveOutcome,
    SessionAppended, SessionInfo, SessionItems, MAX_MESSAGE_BYTES, MAX_SESSION_ID_BYTES,
};
pub(crate) use verify::verify_sessions;
