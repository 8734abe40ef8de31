//! The arguments of the `session` verbs (clap parses them from the command line; the MCP tools
//! deserialize the same structs from a call's JSON, their schemas derived from them), apart from
//! the verbs (`session.rs`) and their typed results (`session_results.rs`), which both use them.

use std::path::PathBuf;

use clap::{Args, Subcommand};
#[cfg(feature = "mcp")]
use schemars::JsonSchema;
use serde::Deserialize;

#[derive(Args, Debug)]
pub struct SessionArgs {
    #[command(subcommand)]
    pub cmd: SessionCmd,
}

// The order of the variants is the order of `somna session --help`.
#[derive(Subcommand, Debug)]
// `<id>` is the help text clap prints, not HTML.
#[allow(rustdoc::invalid_html_tags)]
pub enum SessionCmd {
    /// List session ids, sorted (with --json: their metadata)
    List(ListArgs),
    /// Print the session's messages as a JSON array (exit 1 if it does not exist)
    Load(IdArgs),
    /// Replace the session's messages with the JSON array on stdin (writes only what changed)
    Save(SaveArgs),
    /// Append the JSON array of items on stdin, as one atomic batch
    Append(AppendArgs),
    /// Print the latest items as a JSON array, oldest first
    Items(ItemsArgs),
    /// Remove and print the newest item (exit 1 if there is none)
    Pop(IdArgs),
    /// Remove every item (the archive stays)
    Clear(IdArgs),
    /// Delete the session, its archive included (no error if it does not exist)
    Delete(IdArgs),
    /// Print the messages saves have dropped (the archive), oldest first, as JSON
    History(IdArgs),
    /// Delete the session's archive
    Prune(IdArgs),
    /// Print the session's metadata as JSON (created, updated, revision, count, bytes)
    Info(IdArgs),
    /// Import a directory of <id>.json files (JSON arrays); all are checked before any is written
    ImportDir(ImportDirArgs),
    /// Write every session as DIR/<id>.json (an id with / in folders)
    ExportDir(ExportDirArgs),
}

/// The arguments of `session list` (and of the MCP tool `session_list`).
#[derive(Args, Debug, Deserialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Only ids starting with this
    #[arg(long, default_value = "")]
    #[serde(default)]
    pub prefix: String,
    /// At most this many
    #[arg(long)]
    pub limit: Option<usize>,
    /// Only ids after this one (the cursor: the last id of the previous page)
    #[arg(long)]
    pub after: Option<String>,
}

/// The arguments of the session verbs that name only a session (and of the MCP tool
/// `session_history`).
#[derive(Args, Debug, Deserialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct IdArgs {
    /// The session id
    pub id: String,
}

/// The arguments of `session save` (and of the MCP tool `session_save`).
#[derive(Args, Debug, Deserialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SaveArgs {
    /// The session id
    pub id: String,
    /// Fail (conflict) unless the session is at this revision (0: does not exist)
    #[arg(long)]
    pub expect_revision: Option<u64>,
    /// The whole list of messages (JSON objects); what it drops goes to the archive
    #[arg(skip)]
    pub messages: Vec<serde_json::Value>,
}

/// The arguments of `session append` (and of the MCP tool `session_append`).
#[derive(Args, Debug, Deserialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct AppendArgs {
    /// The session id (created if new)
    pub id: String,
    /// Idempotency key: a retry with the same key appends nothing
    #[arg(long)]
    pub key: Option<String>,
    /// Fail (conflict) unless the session is at this revision (0: does not exist)
    #[arg(long)]
    pub expect_revision: Option<u64>,
    /// The messages to add at the end (JSON objects)
    #[arg(skip)]
    pub items: Vec<serde_json::Value>,
}

/// The arguments of `session items` (and of the MCP tool `session_load`).
#[derive(Args, Debug, Deserialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ItemsArgs {
    /// The session id
    pub id: String,
    /// At most this many, the newest
    #[arg(long)]
    pub limit: Option<usize>,
}

#[derive(Args, Debug)]
pub struct ImportDirArgs {
    /// The directory
    pub dir: PathBuf,
}

#[derive(Args, Debug)]
pub struct ExportDirArgs {
    /// The directory (created if missing)
    pub dir: PathBuf,
}
