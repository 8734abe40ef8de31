//! The verbs: [`Command`] (the subcommand enum clap parses), [`run`] (one line per verb, to one
//! function in the file of its group), and which verbs only read ([`reads_only`]) or take several
//! scopes ([`several_scopes`]). Each file holds its verbs' arguments and one function per verb.

mod admin;
mod import;
mod init;
mod inspect;
mod lifecycle;
#[cfg(feature = "mcp")]
pub mod mcp;
mod note;
mod recall;
mod search;
mod session;
mod shell;
#[cfg(feature = "mcp")]
pub mod token;
mod tree;
mod trust;
mod wake;
#[cfg(feature = "mcp")]
pub mod web;

use clap::Subcommand;
use somna::Error;

use crate::cli::context::Context;

// The order of the variants is the order of `somna --help`.
#[derive(Subcommand, Debug)]
pub enum Command {
    /// Create the store (idempotent) and print the instructions to paste into AGENTS.md
    Init,
    /// Record one memory: `somna note "text"`, or `somna note -` to read it from stdin
    Note(note::NoteArgs),
    /// Accept a memory as true (appends an event; the log is not rewritten)
    Accept(lifecycle::DecideArgs),
    /// Mark a memory deprecated (appends an event)
    Deprecate(lifecycle::DecideArgs),
    /// Retract a memory as wrong (appends an event)
    Retract(lifecycle::DecideArgs),
    /// Replace a memory's text with a tombstone and drop the summaries built on it (admin only)
    Redact(lifecycle::RedactArgs),
    /// Print a memory with its full envelope and history
    Show(inspect::ShowArgs),
    /// Print a summary's claims and the records each cites
    Why(inspect::WhyArgs),
    /// Give a principal read or write access to a scope (SCOPE ending in / or : is a prefix)
    Grant(trust::GrantArgs),
    /// Take a grant back
    Revoke(trust::GrantArgs),
    /// List every grant (admin only)
    Grants,
    /// Show the scope's write policy, or change it: inference=proposed|accepted,
    /// require-source=KIND,...|none, secrets=refuse|allow, citations=required|optional
    Policy(trust::PolicyArgs),
    /// List the read audit (admin only; turn it on with `config AUDIT=1`)
    Audit(trust::AuditArgs),
    /// List the blocks waiting for a summary, one `lo-hi` per line, in the order they are offered
    Pending(tree::PendingArgs),
    /// Print the next merge prompt, or answer one: `somna nap LO-HI "summary"` (- reads stdin)
    Nap(tree::NapArgs),
    /// Print your memory: recent memories raw, older ones summarized, within a budget
    Wake(wake::WakeArgs),
    /// Open a block: print its two halves
    Zoom(tree::ZoomArgs),
    /// Find memories whose line `#id date text` matches a regex (case-insensitive): exact wording
    Recall(recall::RecallArgs),
    /// Find memories and summaries by what they are about, best first: when you lack the exact words
    Search(search::SearchArgs),
    /// Drop the summary of a block and of every block built on it, so they can be rebuilt
    Forget(tree::ForgetArgs),
    /// Import `YYYY-MM-DD text` lines (FILE or -), an OptMem store (--optmem DIR), or an export (--jsonl FILE)
    Import(import::ImportArgs),
    /// Write every scope, memory and summary as JSON Lines to stdout
    Export,
    /// Copy a whole store to another, across backends: `somna copy memory.redb postgresql://...`
    Copy(import::CopyArgs),
    /// Show the settings, or set one: `somna config RAW_MAX=32`
    Config(admin::ConfigArgs),
    /// Counts per scope, file size, bytes per memory
    Stats,
    /// Check the file and every invariant; exits non-zero with a report if anything is wrong
    Verify,
    /// Rebuild the search index from the log and the summaries (admin only)
    Reindex,
    /// Upgrade the store to this somna's format now (any read-write open does it) and say what it did
    Migrate,
    /// Conversation histories: JSON arrays of message objects on stdin and stdout
    Session(session::SessionArgs),
    /// Serve the store to MCP clients (coding agents): stdio, or Streamable HTTP with --http
    #[cfg(feature = "mcp")]
    Mcp(mcp::McpArgs),
    /// Bearer tokens for `somna mcp --http`: add (printed once), list, revoke (admin only)
    #[cfg(feature = "mcp")]
    Token(token::TokenArgs),
    /// Print the shell completion script: `somna completions bash > ~/.local/share/bash-completion/completions/somna`
    Completions(shell::CompletionsArgs),
    /// Print the manual page (roff): `somna man | man -l -`
    Man,
}

pub use import::copy;
pub use shell::{completions, man};

/// Runs one command on the context's store; returns the exit code.
pub fn run(cx: &mut Context<'_>, command: &Command) -> Result<u8, Error> {
    match command {
        Command::Init => init::run(cx),
        Command::Note(a) => note::run(cx, a),
        Command::Accept(a) => lifecycle::accept(cx, a),
        Command::Deprecate(a) => lifecycle::deprecate(cx, a),
        Command::Retract(a) => lifecycle::retract(cx, a),
        Command::Redact(a) => lifecycle::redact(cx, a),
        Command::Show(a) => inspect::show(cx, a),
        Command::Why(a) => inspect::why(cx, a),
        Command::Grant(a) => trust::grant(cx, a),
        Command::Revoke(a) => trust::revoke(cx, a),
        Command::Grants => trust::grants(cx),
        Command::Policy(a) => trust::policy(cx, a),
        Command::Audit(a) => trust::audit(cx, a),
        Command::Pending(a) => tree::pending(cx, a),
        Command::Nap(a) => tree::nap(cx, a),
        Command::Wake(a) => wake::run(cx, a),
        Command::Zoom(a) => tree::zoom(cx, a),
        Command::Recall(a) => recall::run(cx, a),
        Command::Search(a) => search::run(cx, a),
        Command::Forget(a) => tree::forget(cx, a),
        Command::Import(a) => import::import(cx, a),
        Command::Export => import::export(cx),
        // Runs before any store opens (`cli::run_without_store`): it names its own two.
        Command::Copy(_) => Err(Error::Invalid {
            what: "copy",
            reason: "copy opens its own stores".into(),
        }),
        Command::Config(a) => admin::config(cx, a),
        Command::Stats => admin::stats(cx),
        Command::Verify => admin::verify(cx),
        Command::Reindex => search::reindex(cx),
        Command::Migrate => admin::migrate(cx),
        Command::Session(a) => session::run(cx, a),
        #[cfg(feature = "mcp")]
        Command::Mcp(_) => Err(Error::Invalid {
            what: "mcp",
            reason: "the server runs outside a command context".into(),
        }),
        #[cfg(feature = "mcp")]
        Command::Token(a) => token::run(cx, a),
        // Run before any store opens (`cli::run_without_store`), with the whole command line.
        Command::Completions(_) | Command::Man => Err(Error::Invalid {
            what: "command",
            reason: "completions and man open no store".into(),
        }),
    }
}

/// Whether the command only reads: it then opens the store read-only and leaves the file as it
/// was, byte for byte (docs/cli.md, "Reads never write").
pub fn reads_only(command: &Command) -> bool {
    match command {
        Command::Show(_)
        | Command::Why(_)
        | Command::Grants
        | Command::Audit(_)
        | Command::Pending(_)
        | Command::Wake(_)
        | Command::Zoom(_)
        | Command::Recall(_)
        | Command::Search(_)
        | Command::Export
        | Command::Stats
        | Command::Verify
        | Command::Completions(_)
        | Command::Man => true,
        Command::Policy(a) => a.settings.is_empty(),
        Command::Config(a) => a.setting.is_none(),
        Command::Nap(a) => a.block.is_none() && a.apply.is_none() && a.answers.is_empty(),
        Command::Session(a) => session::reads_only(a),
        #[cfg(feature = "mcp")]
        Command::Token(a) => token::reads_only(a),
        Command::Init
        | Command::Note(_)
        | Command::Accept(_)
        | Command::Deprecate(_)
        | Command::Retract(_)
        | Command::Redact(_)
        | Command::Grant(_)
        | Command::Revoke(_)
        | Command::Forget(_)
        | Command::Copy(_)
        | Command::Reindex
        | Command::Migrate
        | Command::Import(_) => false,
        #[cfg(feature = "mcp")]
        Command::Mcp(_) => false,
    }
}

/// Whether the command takes several scopes (`--scope a,b`).
pub fn several_scopes(command: &Command) -> bool {
    matches!(
        command,
        Command::Wake(_) | Command::Recall(_) | Command::Search(_)
    )
}
