//! `engram`: the command line over the engram library. Every verb is one library call; this file
//! only parses arguments, reads stdin and files, and prints. See docs/cli.md.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};
use engram::{
    text, Block, Error, Kind, NapOutcome, NewMemory, Options, RecallQuery, Status, Store,
    WakeOptions,
};

/// engram: durable memory for coding agents.
#[derive(Parser, Debug)]
#[command(
    name = "engram",
    version,
    about = "engram: durable, transactional memory for coding agents",
    long_about = None,
    max_term_width = 100
)]
struct Cli {
    /// The store file [env: ENGRAM_DB] [default: ~/.engram/memory.redb]
    #[arg(long, global = true, value_name = "PATH")]
    db: Option<PathBuf>,
    /// The memory stream to use [env: ENGRAM_SCOPE]
    #[arg(long, global = true, default_value = "default", value_name = "NAME")]
    scope: String,
    /// Print JSON (wake, zoom, recall, pending, stats, verify, config)
    #[arg(long, global = true)]
    json: bool,
    /// Act as this principal (grants decide what it may read and write) [env: ENGRAM_PRINCIPAL]
    /// [default: the admin]
    #[arg(long = "as", global = true, value_name = "ID")]
    principal: Option<String>,
    /// Milliseconds a writer waits for another before failing as busy [env:
    /// ENGRAM_BUSY_TIMEOUT_MS]
    #[arg(long, global = true, default_value_t = 10_000, value_name = "MS")]
    busy_timeout_ms: u64,
    #[command(subcommand)]
    cmd: Cmd,
}

impl Cli {
    /// Takes the global options that the command line left unset from the environment
    /// (`ENGRAM_DB`, `ENGRAM_SCOPE`, `ENGRAM_PRINCIPAL`, `ENGRAM_BUSY_TIMEOUT_MS`; empty counts
    /// as unset). Read here rather than by clap, whose usage lines would otherwise show an
    /// option set from the environment as if it had to be given.
    fn apply_env(&mut self, m: &clap::ArgMatches) -> Result<(), Error> {
        let given = |id: &str| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        if !given("db") {
            if let Some(v) = var("ENGRAM_DB") {
                self.db = Some(PathBuf::from(v));
            }
        }
        let text_var = |name: &'static str| -> Result<Option<String>, Error> {
            var(name)
                .map(|v| {
                    v.into_string().map_err(|_| Error::Invalid {
                        what: "environment",
                        reason: format!("{name} is not valid UTF-8"),
                    })
                })
                .transpose()
        };
        if !given("scope") {
            if let Some(v) = text_var("ENGRAM_SCOPE")? {
                self.scope = v;
            }
        }
        if !given("principal") {
            if let Some(v) = text_var("ENGRAM_PRINCIPAL")? {
                self.principal = Some(v);
            }
        }
        if !given("busy_timeout_ms") {
            if let Some(v) = text_var("ENGRAM_BUSY_TIMEOUT_MS")? {
                self.busy_timeout_ms = v.trim().parse().map_err(|_| Error::Invalid {
                    what: "environment",
                    reason: format!(
                        "ENGRAM_BUSY_TIMEOUT_MS={v:?}: not a whole number of milliseconds"
                    ),
                })?;
            }
        }
        Ok(())
    }
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Create the store (idempotent) and print the instructions to paste into AGENTS.md
    Init,
    /// Record one memory: `engram note "text"`, or `engram note -` to read it from stdin
    Note {
        /// The memory (one line), or - to read it from stdin
        text: String,
        /// Idempotency key: a retry with the same key returns the same id
        #[arg(long)]
        key: Option<String>,
        /// statement | observation | inference | decision | task
        #[arg(long, default_value = "observation")]
        kind: String,
        /// proposed | accepted | superseded | deprecated | retracted
        #[arg(long)]
        status: Option<String>,
        /// Who or what this came from
        #[arg(long)]
        source: Option<String>,
        /// Where it came from (URL, path)
        #[arg(long)]
        uri: Option<String>,
        /// When it was observed (YYYY-MM-DD or RFC 3339; default now)
        #[arg(long)]
        observed: Option<String>,
        /// When it stops being valid (YYYY-MM-DD or RFC 3339)
        #[arg(long)]
        valid_until: Option<String>,
        /// Id of an earlier memory this one replaces (repeatable)
        #[arg(long)]
        supersedes: Vec<u64>,
        /// Id of an earlier memory this one contradicts (repeatable)
        #[arg(long)]
        conflicts_with: Vec<u64>,
        /// Store it even if it looks like a secret
        #[arg(long)]
        force: bool,
    },
    /// Accept a memory as true (appends an event; the log is not rewritten)
    Accept {
        /// The memory id
        id: u64,
        /// Why
        #[arg(long)]
        why: Option<String>,
    },
    /// Mark a memory deprecated (appends an event)
    Deprecate {
        /// The memory id
        id: u64,
        /// Why
        #[arg(long)]
        why: Option<String>,
    },
    /// Retract a memory as wrong (appends an event)
    Retract {
        /// The memory id
        id: u64,
        /// Why
        #[arg(long)]
        why: Option<String>,
    },
    /// Replace a memory's text with a tombstone and drop the summaries built on it (admin only)
    Redact {
        /// The memory id
        id: u64,
        /// Why (recorded in the event)
        #[arg(long)]
        reason: String,
    },
    /// Print a memory with its full envelope and history
    Show {
        /// The memory id
        id: u64,
    },
    /// Print a summary's claims and the records each cites
    Why {
        /// The block, e.g. 0-7
        block: String,
    },
    /// Give a principal read or write access to a scope (SCOPE ending in / or : is a prefix)
    Grant {
        /// The principal, e.g. user:alice
        #[arg(value_name = "PRINCIPAL")]
        who: String,
        /// read | write
        access: String,
        /// The scope or prefix
        #[arg(value_name = "SCOPE")]
        target: String,
    },
    /// Take a grant back
    Revoke {
        /// The principal
        #[arg(value_name = "PRINCIPAL")]
        who: String,
        /// read | write
        access: String,
        /// The scope or prefix
        #[arg(value_name = "SCOPE")]
        target: String,
    },
    /// List every grant (admin only)
    Grants,
    /// Show the scope's write policy, or change it: inference=proposed|accepted,
    /// require-source=KIND,...|none, secrets=refuse|allow, citations=required|optional
    Policy {
        /// KEY=VALUE settings
        settings: Vec<String>,
    },
    /// List the read audit (admin only; turn it on with `config AUDIT=1`)
    Audit {
        /// The newest N records
        #[arg(long, default_value_t = 100)]
        limit: usize,
    },
    /// List the blocks waiting for a summary, one `lo-hi` per line, in the order they are offered
    Pending {
        /// Show at most N
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Print the next merge prompt, or answer one: `engram nap LO-HI "summary"` (- reads stdin)
    Nap {
        /// The block answered (as printed in the prompt)
        block: Option<String>,
        /// The one-line summary, or - to read it from stdin
        text: Option<String>,
        /// Print up to N independent merge prompts to answer together with --apply
        #[arg(long, value_name = "N", conflicts_with_all = ["block", "apply"])]
        batch: Option<usize>,
        /// Store a file of `LO-HI<TAB>summary` lines in one transaction (- for stdin)
        #[arg(long, value_name = "FILE", conflicts_with = "block")]
        apply: Option<String>,
    },
    /// Print your memory: recent memories raw, older ones summarized, within a budget
    Wake {
        /// Which part to print (from 1)
        part: Option<usize>,
        /// The number of memories the first part reported (pins the snapshot)
        total: Option<u64>,
        /// Budget in lines of memory [default: WAKE_LINES, 96]
        #[arg(long)]
        lines: Option<usize>,
        /// Budget in bytes for the whole output [default: WAKE_BYTES, none]
        #[arg(long)]
        bytes: Option<usize>,
        /// Every scope you may read, one section each, sharing the budget
        #[arg(long)]
        all: bool,
    },
    /// Open a block: print its two halves
    Zoom {
        /// The block, e.g. 16-31
        block: String,
    },
    /// Find memories whose line `#id date text` matches a regex (case-insensitive)
    Recall {
        /// The regex
        pattern: String,
        /// Show at most N matches (the newest)
        #[arg(long)]
        limit: Option<usize>,
        /// Only memories observed on or after this date
        #[arg(long)]
        since: Option<String>,
        /// Only memories observed before this date
        #[arg(long)]
        until: Option<String>,
        /// Only memories of this kind
        #[arg(long)]
        kind: Option<String>,
        /// Search every scope you may read (each match names its scope); `--scope a,b` names
        /// several
        #[arg(long)]
        all: bool,
    },
    /// Drop the summary of a block and of every block built on it, so they can be rebuilt
    Forget {
        /// The block, e.g. 2-3
        block: String,
    },
    /// Import `YYYY-MM-DD text` lines (FILE or -), an OptMem store (--optmem DIR), or an export (--jsonl FILE)
    Import {
        /// A file of `YYYY-MM-DD text` lines, or - for stdin
        #[arg(required_unless_present_any = ["optmem", "jsonl"])]
        file: Option<String>,
        /// Migrate an OptMem directory (LOG.txt and TREE/) into the (empty) scope
        #[arg(long, value_name = "DIR", conflicts_with_all = ["file", "jsonl"])]
        optmem: Option<PathBuf>,
        /// Import a JSON Lines export (- for stdin)
        #[arg(long, value_name = "FILE", conflicts_with = "file")]
        jsonl: Option<String>,
    },
    /// Write every scope, memory and summary as JSON Lines to stdout
    Export,
    /// Show the settings, or set one: `engram config RAW_MAX=32`
    Config {
        /// NAME=VALUE to set
        setting: Option<String>,
    },
    /// Counts per scope, file size, bytes per memory
    Stats,
    /// Check the file and every invariant; exits non-zero with a report if anything is wrong
    Verify,
    /// Conversation histories: JSON arrays of message objects on stdin and stdout
    Session {
        #[command(subcommand)]
        cmd: SessionCmd,
    },
}

#[derive(Subcommand, Debug)]
enum SessionCmd {
    /// List session ids, sorted (with --json: their metadata)
    List {
        /// Only ids starting with this
        #[arg(long, default_value = "")]
        prefix: String,
        /// At most N
        #[arg(long)]
        limit: Option<usize>,
        /// Only ids after this one (the last id of the previous page)
        #[arg(long)]
        after: Option<String>,
    },
    /// Print the session's messages as a JSON array (exit 1 if it does not exist)
    Load {
        /// Session id
        id: String,
    },
    /// Replace the session's messages with the JSON array on stdin (writes only what changed)
    Save {
        /// Session id
        id: String,
        /// Fail unless the session is at this revision (0: does not exist)
        #[arg(long)]
        expect_revision: Option<u64>,
    },
    /// Append the JSON array of items on stdin, as one atomic batch
    Append {
        /// Session id
        id: String,
        /// Idempotency key: a retry with the same key writes nothing
        #[arg(long)]
        key: Option<String>,
        /// Fail unless the session is at this revision (0: does not exist)
        #[arg(long)]
        expect_revision: Option<u64>,
    },
    /// Print the latest items as a JSON array, oldest first
    Items {
        /// Session id
        id: String,
        /// At most N (the newest)
        #[arg(long)]
        limit: Option<usize>,
    },
    /// Remove and print the newest item (exit 1 if there is none)
    Pop {
        /// Session id
        id: String,
    },
    /// Remove every item (the archive stays)
    Clear {
        /// Session id
        id: String,
    },
    /// Delete the session, its archive included (no error if it does not exist)
    Delete {
        /// Session id
        id: String,
    },
    /// Print the messages saves have dropped (the archive), oldest first, as JSON
    History {
        /// Session id
        id: String,
    },
    /// Delete the session's archive
    Prune {
        /// Session id
        id: String,
    },
    /// Print the session's metadata as JSON (created, updated, revision, count, bytes)
    Info {
        /// Session id
        id: String,
    },
    /// Import a directory of <id>.json files (JSON arrays); all are checked before any is written
    ImportDir {
        /// The directory
        dir: PathBuf,
    },
    /// Write every session as DIR/<id>.json
    ExportDir {
        /// The directory (created if missing)
        dir: PathBuf,
    },
}

const INSTRUCTIONS: &str = "\
## Memory (engram)

You have a durable memory that outlives this session. Use it like this:

1. At the start of every session, before anything else, run `engram wake` and read all of it.
   If it ends with `Not awake yet. Run: ...`, run that command, until it says `You are awake.`
2. Whenever you learn something new that will still matter later (a decision, a preference of
   the user, a fact about the project, a fix that worked, a mistake to avoid), record it at once
   as one short line: `engram note - <<'EOF'` then the line then `EOF`. Reading the note from
   stdin keeps the shell from interpreting it.
3. When engram prints a merge prompt, do the merge before your next action: write one line that
   keeps what will last and invents nothing, and run the command the prompt ends with.
4. To dig into the past: `engram recall REGEX` finds exact wording; `engram zoom LO-HI` opens a
   summarized block.
5. Never edit the store file by hand; only these commands change it.
6. Subagents must not write memory: only the main agent runs `note` and `nap`.
";

fn main() -> ExitCode {
    // A panic (which only the storage engine may raise, on a damaged file) is kept quiet here:
    // the library turns the ones it can catch into typed errors, and `main` reports the rest.
    // ENGRAM_DEBUG_PANIC=1 prints each one with a backtrace, for a report to redb.
    std::panic::set_hook(Box::new(|info| {
        if std::env::var_os("ENGRAM_DEBUG_PANIC").is_some() {
            eprintln!(
                "engram: debug: {info}\n{}",
                std::backtrace::Backtrace::force_capture()
            );
        }
        if let Ok(mut last) = LAST_PANIC.lock() {
            *last = Some(info.to_string());
        }
    }));
    let matches = Cli::command().get_matches();
    let mut cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    if let Err(e) = cli.apply_env(&matches) {
        eprintln!("engram: {}", text::display_safe(&e.to_string()));
        return ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(1));
    }
    let mut out = std::io::stdout().lock();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&cli, &mut out))) {
        Ok(Ok(code)) => {
            let _ = out.flush();
            ExitCode::from(code)
        }
        Ok(Err(Error::Io(e))) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            // The reader went away (`engram ... | head`); what was committed stays committed.
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => {
            let _ = out.flush();
            eprintln!("engram: {}", text::display_safe(&e.to_string()));
            ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(1))
        }
        Err(_) => {
            let _ = out.flush();
            let what = LAST_PANIC
                .lock()
                .ok()
                .and_then(|mut l| l.take())
                .unwrap_or_default();
            eprintln!(
                "engram: internal error ({}). Nothing unacknowledged was written; run `engram verify`, and please report this.",
                text::display_safe(&what)
            );
            ExitCode::from(70)
        }
    }
}

/// Prints a session's valid messages as one JSON array; damaged ones are named on stderr and
/// make the exit status 5 (as recall does), never hiding the others.
fn print_session_items(
    out: &mut dyn Write,
    id: &str,
    r: &engram::SessionItems,
) -> Result<u8, Error> {
    writeln!(out, "{}", json_array(&r.items))?;
    match r.damage_note(id) {
        Some(note) => {
            eprintln!("engram: {}", text::display_safe(&note));
            Ok(5)
        }
        None => Ok(0),
    }
}

static LAST_PANIC: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:@-+=,".contains(c))
    {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The command prefix without `--scope` (multi-scope wake adds each section's scope): the
/// program, then `--db` and `--as` when they are not the defaults, so that a `Run:` line works
/// pasted anywhere (another shell, another folder, another environment).
fn command_prefix_without_scope(cli: &Cli) -> String {
    let mut cmd = program();
    if let Ok(db) = db_path(cli) {
        if default_db_path().as_ref() != Some(&db) {
            let db = std::path::absolute(&db).unwrap_or(db);
            cmd.push_str(&format!(" --db {}", shell_quote(&db.to_string_lossy())));
        }
    }
    if let Some(p) = &cli.principal {
        cmd.push_str(&format!(" --as {}", shell_quote(p)));
    }
    cmd
}

/// How the agent should invoke engram in `Run:` lines: [`command_prefix_without_scope`], plus
/// `--scope` when it is not the default.
fn command_prefix(cli: &Cli) -> String {
    let mut cmd = command_prefix_without_scope(cli);
    if cli.scope != engram::DEFAULT_SCOPE {
        cmd.push_str(&format!(" --scope {}", shell_quote(&cli.scope)));
    }
    cmd
}

/// The program as `Run:` lines name it: `engram` when that is what PATH finds, otherwise this
/// binary's full path (a `cargo run` build, a copy outside PATH, another version earlier on it).
fn program() -> String {
    let Ok(me) = std::env::current_exe() else {
        return "engram".into();
    };
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("engram"))
            .find(|c| c.is_file())
    });
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    match found {
        Some(f) if same(&f, &me) => "engram".into(),
        _ => shell_quote(&me.to_string_lossy()),
    }
}

/// `~/.engram/memory.redb`, when HOME is set.
fn default_db_path() -> Option<PathBuf> {
    match std::env::var_os("HOME") {
        Some(h) if !h.is_empty() => Some(Path::new(&h).join(".engram").join("memory.redb")),
        _ => None,
    }
}

fn db_path(cli: &Cli) -> Result<PathBuf, Error> {
    if let Some(p) = &cli.db {
        return Ok(p.clone());
    }
    default_db_path().ok_or_else(|| Error::Invalid {
        what: "store path",
        reason: "HOME is not set; pass --db PATH or set ENGRAM_DB".into(),
    })
}

/// Reads stdin as one line of text: valid UTF-8, at most 1 MiB, one trailing newline dropped.
fn read_stdin_line() -> Result<String, Error> {
    let mut buf = Vec::new();
    std::io::stdin()
        .lock()
        .take(1 << 20 | 1)
        .read_to_end(&mut buf)?;
    if buf.len() > 1 << 20 {
        return Err(Error::Invalid {
            what: "text",
            reason: "stdin holds more than 1 MiB".into(),
        });
    }
    let mut s = String::from_utf8(buf).map_err(|e| Error::Invalid {
        what: "text",
        reason: format!(
            "stdin is not valid UTF-8 (at byte {})",
            e.utf8_error().valid_up_to()
        ),
    })?;
    if s.ends_with('\n') {
        s.pop();
        if s.ends_with('\r') {
            s.pop();
        }
    }
    Ok(s)
}

fn read_input(file: &str) -> Result<String, Error> {
    let bytes = if file == "-" {
        let mut b = Vec::new();
        std::io::stdin().lock().read_to_end(&mut b)?;
        b
    } else {
        std::fs::read(file).map_err(|e| Error::Invalid {
            what: "file",
            reason: format!("cannot read {file}: {e}"),
        })?
    };
    String::from_utf8(bytes).map_err(|e| Error::Invalid {
        what: "file",
        reason: format!(
            "{file} is not valid UTF-8 (at byte {})",
            e.utf8_error().valid_up_to()
        ),
    })
}

fn json(out: &mut dyn Write, v: &impl serde::Serialize) -> Result<(), Error> {
    let s = serde_json::to_string_pretty(v).map_err(|e| Error::Io(e.into()))?;
    writeln!(out, "{}", text::json_safe(&s))?;
    Ok(())
}

fn print_next_prompt(
    store: &Store,
    scope: &str,
    cmd: &str,
    out: &mut dyn Write,
    nothing: bool,
) -> Result<(), Error> {
    match store.next_prompt(scope)? {
        Some(p) => write!(out, "{}", p.render(cmd))?,
        None => {
            if store.read(|r| r.pending_count(scope))? > 0 {
                writeln!(
                    out,
                    "The next pending merge cannot be built: run `{cmd} verify`."
                )?;
            } else if nothing {
                writeln!(out, "Nothing left to compress.")?;
            }
        }
    }
    Ok(())
}

fn run(cli: &Cli, out: &mut dyn Write) -> Result<u8, Error> {
    let path = db_path(cli)?;
    let opts = Options::default()
        .busy_timeout(Duration::from_millis(cli.busy_timeout_ms))
        .principal(cli.principal.as_deref());
    if let Some(p) = &cli.principal {
        engram::auth::validate_principal(p)?;
    }
    let cmd = command_prefix(cli);
    let scope = cli.scope.as_str();
    for s in scope.split(',') {
        engram::validate_scope(s)?;
    }
    if scope.contains(',') && !matches!(cli.cmd, Cmd::Wake { .. } | Cmd::Recall { .. }) {
        return Err(Error::Invalid {
            what: "scope",
            reason: "several scopes (a,b) are only for wake and recall".into(),
        });
    }
    if let Cmd::Init = cli.cmd {
        let existed = Store::exists(&path);
        // On an existing store `init` only checks it: a read-only open writes nothing.
        let store = if existed {
            open_store(&path, opts, true)?
        } else {
            Store::create_with(&path, opts)?
        };
        if existed {
            writeln!(
                out,
                "engram store already exists at {}.",
                store.path().display()
            )?;
        } else {
            writeln!(out, "Created engram store at {}.", store.path().display())?;
        }
        writeln!(out, "Paste this into AGENTS.md or CLAUDE.md:\n")?;
        write!(
            out,
            "{}",
            INSTRUCTIONS.replace("`engram ", &format!("`{cmd} "))
        )?;
        return Ok(0);
    }
    let mut store = open_store(&path, opts, reads_only(&cli.cmd))?;
    let code = command(cli, out, &mut store, &cmd)?;
    // Closing writes redb's allocator state: a failure there (a damaged file) is reported too.
    store.close()?;
    Ok(code)
}

/// Whether the command only reads: it then opens the store read-only and leaves the file as it
/// was, byte for byte (docs/cli.md, "Reads never write").
fn reads_only(cmd: &Cmd) -> bool {
    match cmd {
        Cmd::Show { .. }
        | Cmd::Why { .. }
        | Cmd::Grants
        | Cmd::Audit { .. }
        | Cmd::Pending { .. }
        | Cmd::Wake { .. }
        | Cmd::Zoom { .. }
        | Cmd::Recall { .. }
        | Cmd::Export
        | Cmd::Stats
        | Cmd::Verify => true,
        Cmd::Policy { settings } => settings.is_empty(),
        Cmd::Config { setting } => setting.is_none(),
        Cmd::Nap { block, apply, .. } => block.is_none() && apply.is_none(),
        Cmd::Session { cmd } => matches!(
            cmd,
            SessionCmd::List { .. }
                | SessionCmd::Load { .. }
                | SessionCmd::Items { .. }
                | SessionCmd::History { .. }
                | SessionCmd::Info { .. }
                | SessionCmd::ExportDir { .. }
        ),
        Cmd::Init
        | Cmd::Note { .. }
        | Cmd::Accept { .. }
        | Cmd::Deprecate { .. }
        | Cmd::Retract { .. }
        | Cmd::Redact { .. }
        | Cmd::Grant { .. }
        | Cmd::Revoke { .. }
        | Cmd::Forget { .. }
        | Cmd::Import { .. } => false,
    }
}

/// Opens the store: read-only for a command that only reads, unless the read audit is on (then
/// the read must record itself, so it needs a read-write handle, and says so when the user may
/// only read the file).
fn open_store(path: &Path, opts: Options, read: bool) -> Result<Store, Error> {
    let store = Store::open_with(path, opts.clone().read_only(read))?;
    // The open recovered a torn tail: say so once (the next open finds a sound file).
    if let Some(r) = store.repaired_tail() {
        eprintln!("engram: note: {}", text::display_safe(&r.to_string()));
    }
    if !read || !store.config()?.audit {
        return Ok(store);
    }
    store.close()?;
    Store::open_with(path, opts).map_err(|e| match e {
        Error::ReadOnly(_) => Error::ReadOnly(format!(
            "the read audit is on (AUDIT=1), so every read records who read what, but this user may only read {}; read it as a user who may write it, or have one run `engram config AUDIT=0`",
            path.display(),
        )),
        e => e,
    })
}

/// Runs one command on the open store; returns the exit code.
fn command(cli: &Cli, out: &mut dyn Write, store: &mut Store, cmd: &str) -> Result<u8, Error> {
    let scope = cli.scope.as_str();
    match &cli.cmd {
        Cmd::Init => unreachable_init(),
        Cmd::Note {
            text: t,
            key,
            kind,
            status,
            source,
            uri,
            observed,
            valid_until,
            supersedes,
            conflicts_with,
            force,
        } => {
            let t = if t == "-" {
                read_stdin_line()?
            } else {
                t.clone()
            };
            let mut mem = NewMemory::new(t).kind(kind.parse::<Kind>()?);
            if let Some(s) = status {
                mem = mem.status(s.parse::<Status>()?);
            }
            if let Some(s) = source {
                mem = mem.source(s.clone());
            }
            if let Some(u) = uri {
                mem = mem.source_uri(u.clone());
            }
            if let Some(o) = observed {
                mem = mem.observed_us(text::parse_time(o)?);
            }
            if let Some(v) = valid_until {
                mem = mem.valid_until_us(text::parse_time(v)?);
            }
            mem = mem
                .supersedes(supersedes.clone())
                .conflicts_with(conflicts_with.clone())
                .force(*force);
            let untrusted = engram::policy::reads_as_instructions(&mem.text);
            let a = store.append(scope, vec![mem], key.as_deref())?;
            writeln!(out, "Saved as #{}.", a.first)?;
            if store.read(|r| r.may(engram::Access::Read, scope))? {
                let (m, st) = store.show(scope, a.first)?;
                if st.status == Status::Proposed {
                    writeln!(out, "Stored as proposed ({}): it is shown marked until a principal runs `{cmd} accept {}`.", m.kind, m.id)?;
                }
                if untrusted {
                    writeln!(out, "Flagged: it reads as instructions to the reader, so it will always be shown marked and quoted.")?;
                }
                print_next_prompt(store, scope, cmd, out, false)?;
            }
        }
        Cmd::Pending { limit } => {
            let p = store.pending(scope, *limit)?;
            if cli.json {
                json(out, &p.iter().map(|b| b.to_string()).collect::<Vec<_>>())?;
            } else {
                for b in p {
                    writeln!(out, "{b}")?;
                }
            }
        }
        Cmd::Nap {
            block,
            text: t,
            batch,
            apply,
        } => {
            if let Some(n) = batch {
                let prompts = store.read(|r| r.prompts(scope, (*n).max(1)))?;
                if cli.json {
                    json(out, &prompts)?;
                } else if prompts.is_empty() {
                    writeln!(out, "Nothing left to compress.")?;
                } else {
                    let limit = prompts.first().map(|p| p.entry_bytes).unwrap_or(280);
                    writeln!(out, "{} independent merges. Summarize each block in ONE line of at most {limit} bytes that keeps what will still matter later and invents nothing.", prompts.len())?;
                    for p in &prompts {
                        writeln!(out, "== {}", p.block)?;
                        for i in &p.inputs {
                            let line = match i {
                                engram::PromptInput::Memory(mm) => engram::memory_line(mm),
                                engram::PromptInput::Summary { block, summary } => {
                                    engram::summary_line(*block, summary)
                                }
                            };
                            writeln!(out, "{line}")?;
                        }
                    }
                    writeln!(out, "Write the answers to a file, one line per merge: LO-HI, a tab, the summary.")?;
                    writeln!(out, "Run: {cmd} nap --apply FILE")?;
                }
                return Ok(0);
            }
            if let Some(file) = apply {
                let input = read_input(file)?;
                let mut entries = Vec::new();
                for (i, line) in input.lines().enumerate() {
                    if line.trim().is_empty() {
                        continue;
                    }
                    let (b, s) = line.split_once('\t').ok_or_else(|| Error::Invalid {
                        what: "batch",
                        reason: format!("line {}: expected LO-HI, a tab, then the summary", i + 1),
                    })?;
                    let b: Block = b.parse().map_err(|e| Error::Invalid {
                        what: "batch",
                        reason: format!("line {}: {e}", i + 1),
                    })?;
                    entries.push((b, s.to_string()));
                }
                let done = store.nap_many(scope, entries)?;
                let saved: Vec<String> = done
                    .iter()
                    .filter(|d| d.1 == NapOutcome::Saved)
                    .map(|d| d.0.to_string())
                    .collect();
                let settled: Vec<String> = done
                    .iter()
                    .filter(|d| d.1 == NapOutcome::AlreadySettled)
                    .map(|d| d.0.to_string())
                    .collect();
                writeln!(
                    out,
                    "Saved {}{}.",
                    plural(saved.len() as u64, "summary", "summaries"),
                    block_list(&saved)
                )?;
                if !settled.is_empty() {
                    writeln!(
                        out,
                        "Already settled: {}{}.",
                        plural(settled.len() as u64, "block", "blocks"),
                        block_list(&settled)
                    )?;
                }
                print_next_prompt(store, scope, cmd, out, true)?;
                return Ok(0);
            }
            match (block, t) {
                (None, _) => print_next_prompt(store, scope, cmd, out, true)?,
                (Some(_), None) => {
                    return Err(Error::Invalid { what: "nap", reason: format!("give the summary: {cmd} nap LO-HI \"<your line>\" (or - to read it from stdin)") })
                }
                (Some(b), Some(t)) => {
                    let b: Block = b.parse()?;
                    let t = if t == "-" { read_stdin_line()? } else { t.clone() };
                    match store.nap(scope, b, &t)? {
                        NapOutcome::AlreadySettled => writeln!(out, "{b} is already settled.")?,
                        _ => {
                            writeln!(out, "Saved {b}.")?;
                            if engram::claims::uncited(&engram::claims::parse_claims(&t)) {
                                writeln!(out, "Flagged uncited: a claim cites no memory (write claims like: text [#3, #7]).")?;
                            }
                            print_next_prompt(store, scope, cmd, out, true)?;
                        }
                    }
                }
            }
        }
        Cmd::Wake {
            part,
            total,
            lines,
            bytes,
            all,
        } => {
            let w = WakeOptions {
                lines: *lines,
                bytes: *bytes,
                part: part.unwrap_or(1),
                snapshot: *total,
                cmd: cmd.to_string(),
            };
            if w.part == 0 {
                return Err(Error::Invalid {
                    what: "part",
                    reason: "parts are numbered from 1".into(),
                });
            }
            if *all || scope.contains(',') {
                let scopes: Vec<String> = if *all {
                    store.read(|r| r.scopes())?
                } else {
                    scope.split(',').map(str::to_string).collect()
                };
                let cmd_base = command_prefix_without_scope(cli);
                let w = WakeOptions { cmd: cmd_base, ..w };
                let (views, text) = store.wake_scopes(&scopes, &w)?;
                if cli.json {
                    json(out, &views)?;
                } else {
                    write!(out, "{text}")?;
                }
            } else if cli.json {
                json(out, &store.wake(scope, &w)?)?;
            } else {
                write!(out, "{}", store.wake_text(scope, &w)?)?;
            }
        }
        Cmd::Zoom { block } => {
            let b: Block = block.parse()?;
            let lines = match store.zoom_lines(scope, b) {
                Err(e @ Error::OutOfRange { .. }) => {
                    // Past the end: name the way back to what exists.
                    eprintln!(
                        "engram: {}\nRun: {cmd} wake",
                        text::display_safe(&e.to_string())
                    );
                    return Ok(u8::try_from(e.exit_code()).unwrap_or(2));
                }
                r => r?,
            };
            if cli.json {
                json(out, &store.zoom(scope, b)?)?;
            } else {
                for l in lines {
                    writeln!(out, "{l}")?;
                }
            }
        }
        Cmd::Recall {
            pattern,
            limit,
            since,
            until,
            kind,
            all,
        } => {
            let mut q = RecallQuery::new(pattern.clone());
            q.limit = *limit;
            q.since_us = since.as_deref().map(text::parse_time).transpose()?;
            q.until_us = until.as_deref().map(text::parse_time).transpose()?;
            q.kind = kind.as_deref().map(str::parse::<Kind>).transpose()?;
            if *all || scope.contains(',') {
                let scopes: Vec<String> = if *all {
                    store.read(|r| r.scopes())?
                } else {
                    scope.split(',').map(str::to_string).collect()
                };
                return recall_scopes(store, &scopes, &q, cli.json, out);
            }
            let r = store.recall(scope, &q)?;
            if cli.json {
                json(out, &r)?;
            } else {
                write!(out, "{}", r.render())?;
            }
            if !r.unreadable.is_empty() {
                // The valid matches are printed; the exit status still says the store is damaged.
                return Ok(5);
            }
        }
        Cmd::Forget { block } => {
            let b: Block = block.parse()?;
            let removed = store.forget(scope, b)?;
            if removed.is_empty() {
                writeln!(out, "No summary to forget in {b}.")?;
            } else {
                let names: Vec<String> = removed.iter().map(|b| b.to_string()).collect();
                writeln!(
                    out,
                    "Forgot {} summar{}: {}. The log is untouched; run `{cmd} nap` to rebuild.",
                    removed.len(),
                    if removed.len() == 1 { "y" } else { "ies" },
                    names.join(", ")
                )?;
            }
        }
        Cmd::Import {
            file,
            optmem,
            jsonl,
        } => {
            if let Some(dir) = optmem {
                let src = store.import_optmem(scope, dir)?;
                write!(
                    out,
                    "Imported {} memories and {} summaries from {}",
                    src.memories.len(),
                    src.summaries.len(),
                    dir.display()
                )?;
                if src.torn_bytes > 0 {
                    write!(
                        out,
                        " (ignored a torn last record of {} bytes)",
                        src.torn_bytes
                    )?;
                }
                writeln!(out, ".")?;
            } else if let Some(f) = jsonl {
                let input = read_input(f)?;
                let r = store.import_jsonl(&mut input.as_bytes())?;
                writeln!(
                    out,
                    "Imported {} and {} in {}.",
                    plural(r.memories, "memory", "memories"),
                    plural(r.summaries, "summary", "summaries"),
                    plural(r.scopes as u64, "scope", "scopes")
                )?;
            } else if let Some(f) = file {
                let input = read_input(f)?;
                let a = store.import_lines(scope, &input)?;
                writeln!(
                    out,
                    "Imported {} memories, #{} to #{}.",
                    a.count,
                    a.first,
                    a.first + a.count - 1
                )?;
            }
        }
        Cmd::Export => {
            store.export(out)?;
        }
        Cmd::Config { setting } => {
            if let Some(s) = setting {
                let (name, value) = s.split_once('=').ok_or_else(|| Error::Invalid {
                    what: "config",
                    reason: format!(
                        "expected NAME=VALUE, e.g. RAW_MAX=32; names: {}",
                        engram::CONFIG_NAMES.join(", ")
                    ),
                })?;
                let v = store.set_config(name.trim(), value)?;
                writeln!(out, "{}={v}", name.trim())?;
            } else {
                let c = store.config()?;
                if cli.json {
                    json(out, &c)?;
                } else {
                    writeln!(
                        out,
                        "ENTRY_BYTES={}\nRAW_MAX={}\nWAKE_LINES={}\nWAKE_BYTES={}\nSESSION_ARCHIVE_MAX={}",
                        c.entry_bytes, c.raw_max, c.wake_lines, c.wake_bytes, c.session_archive_max
                    )?;
                }
            }
        }
        Cmd::Stats => {
            let stats = store.read(|r| r.stats())?;
            let file_bytes = std::fs::metadata(store.path())?.len();
            let memories: u64 = stats.iter().map(|s| s.memories).sum();
            let per = if memories > 0 {
                file_bytes as f64 / memories as f64
            } else {
                0.0
            };
            if cli.json {
                json(
                    out,
                    &serde_json::json!({
                        "scopes": stats, "file_bytes": file_bytes, "memories": memories,
                        "bytes_per_memory": per,
                    }),
                )?;
            } else {
                for s in &stats {
                    writeln!(
                        out,
                        "scope {}: {} memories, {} summaries, {} pending",
                        s.scope, s.memories, s.summaries, s.pending
                    )?;
                }
                writeln!(
                    out,
                    "file {}: {file_bytes} bytes, {memories} memories, {per:.1} bytes per memory",
                    store.path().display()
                )?;
            }
        }
        Cmd::Session { cmd: sc } => return session_cmd(store, sc, cli.json, out),
        Cmd::Accept { id, why } | Cmd::Deprecate { id, why } | Cmd::Retract { id, why } => {
            let (d, word) = match &cli.cmd {
                Cmd::Accept { .. } => (engram::lifecycle::Decision::Accept, "accepted"),
                Cmd::Deprecate { .. } => (engram::lifecycle::Decision::Deprecate, "deprecated"),
                _ => (engram::lifecycle::Decision::Retract, "retracted"),
            };
            store.decide(scope, *id, d, why.as_deref())?;
            writeln!(
                out,
                "#{id} is {word}. Summaries built on it are stale until rebuilt: run `{cmd} nap`."
            )?;
        }
        Cmd::Redact { id, reason } => {
            store.redact(scope, *id, reason)?;
            writeln!(out, "#{id} is redacted; the summaries built on it were dropped. Run `{cmd} nap` to rebuild them.")?;
        }
        Cmd::Show { id } => {
            let (mem, st) = store.show(scope, *id)?;
            if cli.json {
                json(
                    out,
                    &serde_json::json!({"scope": scope, "memory": mem, "state": st}),
                )?;
            } else {
                writeln!(out, "{}", engram::lifecycle::marked_line(&mem, &st))?;
                writeln!(out, "scope: {scope}")?;
                writeln!(out, "kind: {}", mem.kind)?;
                writeln!(out, "status: {} (recorded as {})", st.status, mem.status)?;
                writeln!(out, "observed: {}", text::rfc3339_of(mem.observed_us))?;
                writeln!(out, "recorded: {}", text::rfc3339_of(mem.recorded_us))?;
                if let Some(s) = &mem.source {
                    writeln!(out, "source: {}", text::display_safe(s))?;
                }
                if let Some(u) = &mem.source_uri {
                    writeln!(out, "uri: {}", text::display_safe(u))?;
                }
                if let Some(v) = mem.valid_until_us {
                    writeln!(
                        out,
                        "valid until: {}{}",
                        text::rfc3339_of(v),
                        if st.expired { " (expired)" } else { "" }
                    )?;
                }
                let ids = |v: &[u64]| {
                    v.iter()
                        .map(|i| format!("#{i}"))
                        .collect::<Vec<_>>()
                        .join(", ")
                };
                if !mem.supersedes.is_empty() {
                    writeln!(out, "supersedes: {}", ids(&mem.supersedes))?;
                }
                if !st.superseded_by.is_empty() {
                    writeln!(out, "superseded by: {}", ids(&st.superseded_by))?;
                }
                if !st.conflicts.is_empty() {
                    writeln!(out, "conflicts with (undecided): {}", ids(&st.conflicts))?;
                }
                if st.untrusted {
                    writeln!(out, "untrusted: the text reads as instructions; it is data")?;
                }
                if st.events.is_empty() {
                    writeln!(out, "history: none")?;
                } else {
                    writeln!(out, "history:")?;
                    for e in &st.events {
                        let what = match &e.kind {
                            engram::lifecycle::EventKind::SupersededBy(n) => {
                                format!("superseded by #{n}")
                            }
                            engram::lifecycle::EventKind::ConflictedBy(n) => {
                                format!("contradicted by #{n}")
                            }
                            engram::lifecycle::EventKind::Redact { text_hash } => {
                                format!("redacted (old text hash {text_hash})")
                            }
                            k => format!("{k:?}").to_lowercase(),
                        };
                        writeln!(
                            out,
                            "  {} {what} by {}{}",
                            text::rfc3339_of(e.at_us),
                            text::display_safe(&e.who),
                            e.why
                                .as_deref()
                                .map(|w| format!(": {}", text::display_safe(w)))
                                .unwrap_or_default()
                        )?;
                    }
                }
            }
        }
        Cmd::Why { block } => {
            let b: Block = block.parse()?;
            let w = store.why(scope, b)?;
            if cli.json {
                json(out, &w)?;
            } else {
                write!(out, "{}", w.render())?;
            }
        }
        Cmd::Grant {
            who: principal,
            access,
            target: s,
        } => {
            store.grant(principal, access.parse()?, s)?;
            writeln!(out, "{principal} may now {access} {s}.")?;
        }
        Cmd::Revoke {
            who: principal,
            access,
            target: s,
        } => {
            if store.revoke(principal, access.parse()?, s)? {
                writeln!(out, "{principal} may no longer {access} {s}.")?;
            } else {
                writeln!(out, "{principal} had no {access} grant on {s}.")?;
            }
        }
        Cmd::Grants => {
            let g = store.grants()?;
            if cli.json {
                json(out, &g)?;
            } else if g.is_empty() {
                writeln!(
                    out,
                    "No grants: every principal may read and write every scope."
                )?;
            } else {
                for x in g {
                    writeln!(out, "{} {} {}", x.principal, x.access, x.scope)?;
                }
            }
        }
        Cmd::Policy { settings } => {
            let mut p = store.policy(scope)?;
            if !settings.is_empty() {
                for s in settings {
                    p.apply(s)?;
                }
                store.set_policy(scope, &p)?;
            }
            if cli.json {
                json(out, &p)?;
            } else {
                write!(out, "{}", p.describe())?;
            }
        }
        Cmd::Audit { limit } => {
            let a = store.audit(*limit)?;
            if cli.json {
                json(out, &a)?;
            } else {
                for e in a {
                    writeln!(
                        out,
                        "{} {} {} {} {}",
                        text::rfc3339_of(e.at_us),
                        text::display_safe(&e.who),
                        e.op,
                        e.scope,
                        e.items.join(",")
                    )?;
                }
            }
        }
        Cmd::Verify => {
            let r = store.verify()?;
            if cli.json {
                json(out, &r)?;
            } else {
                for p in &r.problems {
                    writeln!(out, "PROBLEM: {}", text::display_safe(p))?;
                }
                if r.ok() {
                    writeln!(
                        out,
                        "OK: {} scopes, {} memories, {} summaries, {} sessions verified{}.",
                        r.scopes,
                        r.memories,
                        r.summaries,
                        r.sessions,
                        if r.engine_intact {
                            ""
                        } else {
                            " (redb repaired its allocator state)"
                        }
                    )?;
                } else {
                    writeln!(
                        out,
                        "{}.",
                        plural(r.problems.len() as u64, "problem found", "problems found")
                    )?;
                }
            }
            if !r.ok() {
                return Ok(5);
            }
        }
    }
    Ok(0)
}

fn unreachable_init() {}

/// `1 memory`, `2 memories`.
/// Recall over several scopes: each match line starts with its scope; JSON is one object per
/// scope (`scope` beside recall's fields). Exit 5 when a scope had damaged records.
fn recall_scopes(
    store: &Store,
    scopes: &[String],
    q: &RecallQuery,
    as_json: bool,
    out: &mut dyn Write,
) -> Result<u8, Error> {
    let found = store.recall_scopes(scopes, q)?;
    let damaged = found.iter().any(|(_, r)| !r.unreadable.is_empty());
    if as_json {
        let v: Vec<serde_json::Value> = found
            .iter()
            .map(|(s, r)| serde_json::json!({ "scope": s, "recall": r }))
            .collect();
        json(out, &v)?;
        return Ok(if damaged { 5 } else { 0 });
    }
    let mut total = 0;
    for (s, r) in &found {
        for l in r.shown_lines() {
            writeln!(out, "{s} {l}")?;
        }
        total += r.total;
        if r.total > r.matches.len() as u64 {
            writeln!(
                out,
                "Newest {} of {} matches in scope {s}. Narrow the regex.",
                r.matches.len(),
                r.total
            )?;
        }
        for id in &r.unreadable {
            writeln!(out, "Skipped damaged record #{id} in scope {s}.")?;
        }
    }
    match total {
        0 => writeln!(
            out,
            "No match in {}.",
            plural(found.len() as u64, "scope", "scopes")
        )?,
        n => writeln!(
            out,
            "{} in {}.",
            plural(n, "match", "matches"),
            plural(found.len() as u64, "scope", "scopes")
        )?,
    }
    Ok(if damaged { 5 } else { 0 })
}

/// The blocks after a count: all of them up to ten (`: 0-1, 2-3`), else the first and the last
/// (`, from 0-1 to 8-9`), so that a batch of 10^5 answers prints one short line.
fn block_list(blocks: &[String]) -> String {
    match blocks {
        [] => String::new(),
        [first, .., last] if blocks.len() > 10 => format!(", from {first} to {last}"),
        all => format!(": {}", all.join(", ")),
    }
}

fn plural(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Parses a JSON array of objects, keeping each element's text exactly.
fn parse_array(input: &str, what: &str) -> Result<Vec<Box<serde_json::value::RawValue>>, Error> {
    serde_json::from_str::<Vec<Box<serde_json::value::RawValue>>>(input).map_err(|e| {
        Error::Invalid {
            what: "JSON",
            reason: format!("{what}: expected a JSON array of objects: {e}"),
        }
    })
}

fn json_array<'a>(items: impl IntoIterator<Item = &'a String>) -> String {
    let mut s = String::from("[");
    for (i, m) in items.into_iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(m);
    }
    s.push(']');
    s
}

/// Whether a session id is safe as a file name inside a directory.
fn safe_file_id(id: &str) -> bool {
    !id.is_empty() && id != "." && id != ".." && !id.contains(['/', '\\', '\0']) && id.len() <= 250
}

fn session_cmd(
    store: &Store,
    sc: &SessionCmd,
    as_json: bool,
    out: &mut dyn Write,
) -> Result<u8, Error> {
    match sc {
        SessionCmd::List {
            prefix,
            limit,
            after,
        } => {
            let l = store.session_list(prefix, after.as_deref(), *limit)?;
            if as_json {
                json(out, &l)?;
            } else {
                for s in l {
                    writeln!(out, "{}", text::display_safe(&s.id))?;
                }
            }
        }
        SessionCmd::Load { id } => match store.session_load_lossy(id)? {
            Some(r) => return print_session_items(out, id, &r),
            None => {
                eprintln!("engram: no session {:?}", text::display_safe(id));
                return Ok(1);
            }
        },
        SessionCmd::Save {
            id,
            expect_revision,
        } => {
            let input = read_input("-")?;
            let items = parse_array(&input, "stdin")?;
            let refs: Vec<&str> = items.iter().map(|r| r.get()).collect();
            let o = store.session_save(id, &refs, *expect_revision)?;
            if as_json {
                json(out, &o)?;
            } else {
                writeln!(
                    out,
                    "Saved session at revision {}: {} kept, {} written, {} archived.",
                    o.revision, o.kept, o.written, o.archived
                )?;
            }
        }
        SessionCmd::Append {
            id,
            key,
            expect_revision,
        } => {
            let input = read_input("-")?;
            let items = parse_array(&input, "stdin")?;
            let refs: Vec<&str> = items.iter().map(|r| r.get()).collect();
            let o = store.session_append(id, &refs, key.as_deref(), *expect_revision)?;
            if as_json {
                json(out, &o)?;
            } else if o.replayed {
                writeln!(
                    out,
                    "Already appended (key seen before): {} at revision {}.",
                    plural(o.count, "item", "items"),
                    o.revision
                )?;
            } else {
                writeln!(
                    out,
                    "Appended {} at revision {}.",
                    plural(o.count, "item", "items"),
                    o.revision
                )?;
            }
        }
        SessionCmd::Items { id, limit } => {
            return print_session_items(out, id, &store.session_items_lossy(id, *limit)?);
        }
        SessionCmd::Pop { id } => match store.session_pop(id, None)? {
            Some(m) => writeln!(out, "{m}")?,
            None => {
                eprintln!(
                    "engram: session {:?} has no item to pop",
                    text::display_safe(id)
                );
                return Ok(1);
            }
        },
        SessionCmd::Clear { id } => {
            let n = store.session_clear(id)?;
            writeln!(out, "Cleared {n} items.")?;
        }
        SessionCmd::Delete { id } => {
            if store.session_delete(id)? {
                writeln!(out, "Deleted session.")?;
            } else {
                writeln!(out, "No such session; nothing to delete.")?;
            }
        }
        SessionCmd::History { id } => {
            let a = store.session_archived(id)?;
            let mut s = String::from("[");
            for (i, e) in a.iter().enumerate() {
                if i > 0 {
                    s.push(',');
                }
                s.push_str(&format!(
                    "{{\"archived_at\":{},\"message\":{}}}",
                    serde_json::to_string(&text::rfc3339_of(e.archived_us)).unwrap_or_default(),
                    e.message
                ));
            }
            s.push(']');
            writeln!(out, "{s}")?;
        }
        SessionCmd::Prune { id } => {
            let n = store.session_prune(id)?;
            writeln!(out, "Pruned {n} archived messages.")?;
        }
        SessionCmd::Info { id } => match store.session_info(id)? {
            Some(i) => json(out, &i)?,
            None => {
                eprintln!("engram: no session {:?}", text::display_safe(id));
                return Ok(1);
            }
        },
        SessionCmd::ImportDir { dir } => {
            let mut files = Vec::new();
            for entry in std::fs::read_dir(dir).map_err(|e| Error::Invalid {
                what: "directory",
                reason: format!("cannot read {}: {e}", dir.display()),
            })? {
                let path = entry?.path();
                if path.extension().and_then(|e| e.to_str()) != Some("json") {
                    continue;
                }
                let Some(id) = path
                    .file_stem()
                    .and_then(|s| s.to_str())
                    .map(str::to_string)
                else {
                    return Err(Error::Invalid {
                        what: "session file",
                        reason: format!("{}: the name is not UTF-8", path.display()),
                    });
                };
                engram::session::validate_session_id(&id)?;
                let text = read_input(&path.to_string_lossy())?;
                let items = parse_array(&text, &path.display().to_string())?;
                let msgs = items
                    .iter()
                    .enumerate()
                    .map(|(i, r)| {
                        engram::session::compact_message(r.get()).map_err(|e| Error::Invalid {
                            what: "session file",
                            reason: format!("{} message {i}: {e}", path.display()),
                        })
                    })
                    .collect::<Result<Vec<String>, Error>>()?;
                files.push((id, msgs));
            }
            files.sort();
            let n = files.len();
            store.write(|tx| {
                for (id, msgs) in &files {
                    let refs: Vec<&str> = msgs.iter().map(String::as_str).collect();
                    tx.session_save(id, &refs, None)?;
                }
                Ok(())
            })?;
            writeln!(out, "Imported {n} sessions from {}.", dir.display())?;
        }
        SessionCmd::ExportDir { dir } => {
            let ids = store.session_ids()?;
            let unsafe_ids: Vec<String> = ids
                .iter()
                .filter(|i| !safe_file_id(i))
                .map(|i| format!("{:?}", text::display_safe(i)))
                .collect();
            if !unsafe_ids.is_empty() {
                return Err(Error::Invalid {
                    what: "session id",
                    reason: format!("these ids cannot be file names inside {} (they could escape it): {}; nothing was written", dir.display(), unsafe_ids.join(", ")),
                });
            }
            std::fs::create_dir_all(dir)?;
            for id in &ids {
                let msgs = store.session_load(id)?.unwrap_or_default();
                let path = dir.join(format!("{id}.json"));
                let tmp = dir.join(format!(".{id}.json.tmp"));
                {
                    let mut o = std::fs::OpenOptions::new();
                    o.write(true).create(true).truncate(true);
                    #[cfg(unix)]
                    {
                        use std::os::unix::fs::OpenOptionsExt;
                        o.mode(0o600);
                    }
                    let mut f = o.open(&tmp)?;
                    f.write_all(json_array(&msgs).as_bytes())?;
                    f.sync_all()?;
                }
                std::fs::rename(&tmp, &path)?;
            }
            writeln!(out, "Exported {} sessions to {}.", ids.len(), dir.display())?;
        }
    }
    Ok(0)
}
