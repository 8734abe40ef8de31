//! The verbs: the registry, one line per verb, from which [`Command`] (the subcommand enum clap
//! parses) and its dispatch are generated: [`run`], which verbs only read ([`reads_only`]) and
//! which take several scopes ([`several_scopes`]). Each file holds its verbs' arguments, one
//! function per verb, and one [`Verb`] per verb that says all of it. Adding a verb is a file (or
//! a function and a `Verb` in the file of its group) and one line in the registry below.

mod admin;
mod embed;
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
mod session_args;
mod session_results;
mod shell;
#[cfg(feature = "mcp")]
pub mod token;
mod tree;
mod trust;
mod typed;
mod wake;
#[cfg(feature = "mcp")]
pub mod web;

use clap::Subcommand;
use somna::Error;

use crate::cli::context::Context;
use crate::cli::verb::{NoArgs, Verb};

/// Declares the verbs: the [`Command`] enum (each variant's doc comment its `--help` line), and
/// its dispatch to each verb's [`Verb`].
macro_rules! verbs {
    ($(
        $(#[doc = $doc:literal])*
        $(#[cfg($cfg:meta)])?
        $name:ident($args:ty) => $verb:path,
    )*) => {
        /// A verb and its arguments, as clap parses them (the order is that of `somna --help`).
        #[derive(Subcommand, Debug)]
        pub enum Command {
            $(
                $(#[doc = $doc])*
                $(#[cfg($cfg)])?
                $name($args),
            )*
        }

        impl Command {
            /// Runs the verb on the context's store; returns the exit code.
            fn run(&self, cx: &mut Context<'_>) -> Result<u8, Error> {
                match self {
                    $(
                        $(#[cfg($cfg)])?
                        Command::$name(a) => {
                            let v: &Verb<$args> = &$verb;
                            (v.run)(cx, a)
                        }
                    )*
                }
            }

            /// Whether the verb only reads, with these arguments.
            fn reads_only(&self) -> bool {
                match self {
                    $(
                        $(#[cfg($cfg)])?
                        Command::$name(a) => ($verb.reads_only)(a),
                    )*
                }
            }

            /// Whether the verb takes several scopes.
            fn several_scopes(&self) -> bool {
                match self {
                    $(
                        $(#[cfg($cfg)])?
                        Command::$name(_) => $verb.several_scopes,
                    )*
                }
            }
        }
    };
}

// The registry: one line per verb (its doc comment is its line in `somna --help`, in this
// order), naming its arguments and its `Verb`, declared in the file of its group.
verbs! {
    /// Create the store (idempotent) and print the instructions to paste into AGENTS.md
    Init(NoArgs) => init::INIT,
    /// Record one memory: `somna note "text"`, or `somna note -` to read it from stdin
    Note(note::NoteArgs) => note::NOTE,
    /// Accept a memory as true (appends an event; the log is not rewritten)
    Accept(lifecycle::DecideArgs) => lifecycle::ACCEPT,
    /// Mark a memory deprecated (appends an event)
    Deprecate(lifecycle::DecideArgs) => lifecycle::DEPRECATE,
    /// Retract a memory as wrong (appends an event)
    Retract(lifecycle::DecideArgs) => lifecycle::RETRACT,
    /// Replace a memory's text with a tombstone and drop the summaries built on it (admin only)
    Redact(lifecycle::RedactArgs) => lifecycle::REDACT,
    /// Print a memory with its full envelope and history
    Show(inspect::ShowArgs) => inspect::SHOW,
    /// Print a summary's claims and the records each cites
    Why(inspect::WhyArgs) => inspect::WHY,
    /// Give a principal read or write access to a scope (SCOPE ending in / or : is a prefix)
    Grant(trust::GrantArgs) => trust::GRANT,
    /// Take a grant back
    Revoke(trust::GrantArgs) => trust::REVOKE,
    /// List every grant (admin only)
    Grants(NoArgs) => trust::GRANTS,
    /// Show the scope's write policy, or change it: inference=proposed|accepted,
    /// require-source=KIND,...|none, secrets=refuse|allow, citations=required|optional
    Policy(trust::PolicyArgs) => trust::POLICY,
    /// List the read audit (admin only; turn it on with `config AUDIT=1`)
    Audit(trust::AuditArgs) => trust::AUDIT,
    /// List the blocks waiting for a summary, one `lo-hi` per line, in the order they are offered
    Pending(tree::PendingArgs) => tree::PENDING,
    /// Print the next merge prompt, or answer one: `somna nap LO-HI "summary"` (- reads stdin)
    Nap(tree::NapArgs) => tree::NAP,
    /// Print your memory: recent memories raw, older ones summarized, within a budget
    Wake(wake::WakeArgs) => wake::WAKE,
    /// Open a block: print its two halves
    Zoom(tree::ZoomArgs) => tree::ZOOM,
    /// Find memories whose line `#id date text` matches a regex (case-insensitive): exact wording
    Recall(recall::RecallArgs) => recall::RECALL,
    /// Find memories and summaries by what they are about, best first: when you lack the exact words
    Search(search::SearchArgs) => search::SEARCH,
    /// Drop the summary of a block and of every block built on it, so they can be rebuilt
    Forget(tree::ForgetArgs) => tree::FORGET,
    /// Import `YYYY-MM-DD text` lines (FILE or -), an OptMem store (--optmem DIR), or an export (--jsonl FILE)
    Import(import::ImportArgs) => import::IMPORT,
    /// Write every scope, memory and summary as JSON Lines to stdout
    Export(NoArgs) => import::EXPORT,
    /// Copy a whole store to another, across backends: `somna copy memory.redb postgresql://...`
    Copy(import::CopyArgs) => import::COPY,
    /// Show the settings, or set one: `somna config RAW_MAX=32`
    Config(admin::ConfigArgs) => admin::CONFIG,
    /// Counts per scope, file size, bytes per memory
    Stats(NoArgs) => admin::STATS,
    /// Check the file and every invariant; exits non-zero with a report if anything is wrong
    Verify(NoArgs) => admin::VERIFY,
    /// Rebuild the search index from the log and the summaries (admin only)
    Reindex(NoArgs) => search::REINDEX,
    /// The store's embedder, which lets search rank by meaning: set, show, unset, drop-model
    Embedder(embed::EmbedderArgs) => embed::EMBEDDER,
    /// Embed the memories that lack a vector of the embedder's model (admin only; resumable)
    Embed(embed::EmbedArgs) => embed::EMBED,
    /// Upgrade the store to this somna's format now (any read-write open does it) and say what it did
    Migrate(NoArgs) => admin::MIGRATE,
    /// Conversation histories: JSON arrays of message objects on stdin and stdout
    Session(session::SessionArgs) => session::SESSION,
    /// Serve the store to MCP clients (coding agents): stdio, or Streamable HTTP with --http
    #[cfg(feature = "mcp")]
    Mcp(mcp::McpArgs) => mcp::MCP,
    /// Bearer tokens for `somna mcp --http`: add (printed once), list, revoke (admin only)
    #[cfg(feature = "mcp")]
    Token(token::TokenArgs) => token::TOKEN,
    /// Print the shell completion script: `somna completions bash > ~/.local/share/bash-completion/completions/somna`
    Completions(shell::CompletionsArgs) => shell::COMPLETIONS,
    /// Print the manual page (roff): `somna man | man -l -`
    Man(NoArgs) => shell::MAN,
}

pub use import::copy;
pub use shell::{completions, man};

/// Runs one command on the context's store; returns the exit code.
pub fn run(cx: &mut Context<'_>, command: &Command) -> Result<u8, Error> {
    command.run(cx)
}

/// Whether the command only reads: it then opens the store read-only and leaves the file as it
/// was, byte for byte (docs/cli.md, "Reads never write").
pub fn reads_only(command: &Command) -> bool {
    command.reads_only()
}

/// Whether the command takes several scopes (`--scope a,b`).
pub fn several_scopes(command: &Command) -> bool {
    command.several_scopes()
}
