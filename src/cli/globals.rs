//! The global options ([`Cli`]) and the [`Context`] built from them once per run and passed to
//! every command: the open store, the scope, `--json`, the `Run:` command prefix and stdout.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::Parser;
use somna::text;
use somna::{Error, Hints, Options, Store};

use crate::cli::commands::{self, Command};
use crate::cli::output::shell_quote;

/// What `somna --version` prints after the name: the version, the store format this build
/// writes, and which optional parts are built in.
pub fn long_version() -> String {
    format!(
        "{}
store format {} (one redb file, or one schema on a PostgreSQL server)
server backend (PostgreSQL): {}
MCP server: {}",
        env!("CARGO_PKG_VERSION"),
        somna::format::STORE_FORMAT,
        if cfg!(feature = "postgres") {
            "built in"
        } else {
            "not built in"
        },
        if cfg!(feature = "mcp") {
            "built in (stdio and Streamable HTTP)"
        } else {
            "not built in"
        }
    )
}

/// The names an option takes, offered to shell completions and listed in `--help`, but checked
/// by somna itself (so a wrong one gets somna's message, which names them all).
#[derive(Clone, Copy, Debug)]
pub struct Names(pub fn() -> Vec<&'static str>);

impl clap::builder::TypedValueParser for Names {
    type Value = String;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<String, clap::Error> {
        clap::builder::StringValueParser::new().parse_ref(cmd, arg, value)
    }

    fn possible_values(
        &self,
    ) -> Option<Box<dyn Iterator<Item = clap::builder::PossibleValue> + '_>> {
        Some(Box::new(
            (self.0)()
                .into_iter()
                .map(clap::builder::PossibleValue::new),
        ))
    }
}

/// The kinds a memory may have.
pub fn kinds() -> Vec<&'static str> {
    somna::Kind::ALL.iter().map(|k| k.as_str()).collect()
}

/// The statuses a memory may have.
pub fn statuses() -> Vec<&'static str> {
    somna::Status::ALL.iter().map(|s| s.as_str()).collect()
}

/// The access levels of a grant.
pub fn accesses() -> Vec<&'static str> {
    vec!["read", "write"]
}

/// somna: durable memory for coding agents.
#[derive(Parser, Debug)]
#[command(
    name = "somna",
    version,
    about = "somna: durable, transactional memory for coding agents",
    long_about = None,
    max_term_width = 100
)]
pub struct Cli {
    /// The store: a file, or a server URL (postgresql://USER@HOST/DB?schema=NAME; the password
    /// from PGPASSWORD) [env: SOMNA_DB] [default: ~/.somna/memory.redb]
    #[arg(long, global = true, value_name = "PATH|URL")]
    pub db: Option<PathBuf>,
    /// The memory stream to use [env: SOMNA_SCOPE]
    #[arg(long, global = true, default_value = "default", value_name = "NAME")]
    pub scope: String,
    /// Print JSON (the reads, and note, nap, forget, accept, deprecate, retract, redact, grant,
    /// revoke, token, sessions)
    #[arg(long, global = true)]
    pub json: bool,
    /// Act as this principal (grants decide what it may read and write) [env: SOMNA_PRINCIPAL]
    /// [default: the admin]
    #[arg(long = "as", global = true, value_name = "ID")]
    pub principal: Option<String>,
    /// Milliseconds a writer waits for another before failing as busy [env:
    /// SOMNA_BUSY_TIMEOUT_MS]
    #[arg(long, global = true, default_value_t = 10_000, value_name = "MS")]
    pub busy_timeout_ms: u64,
    #[command(subcommand)]
    pub command: Command,
}

impl Cli {
    /// Takes the global options that the command line left unset from the environment
    /// (`SOMNA_DB`, `SOMNA_SCOPE`, `SOMNA_PRINCIPAL`, `SOMNA_BUSY_TIMEOUT_MS`; empty counts
    /// as unset). Read here rather than by clap, whose usage lines would otherwise show an
    /// option set from the environment as if it had to be given.
    pub fn apply_env(&mut self, m: &clap::ArgMatches) -> Result<(), Error> {
        let given = |id: &str| m.value_source(id) == Some(clap::parser::ValueSource::CommandLine);
        let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty());
        if !given("db") {
            if let Some(v) = var("SOMNA_DB") {
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
            if let Some(v) = text_var("SOMNA_SCOPE")? {
                self.scope = v;
            }
        }
        if !given("principal") {
            if let Some(v) = text_var("SOMNA_PRINCIPAL")? {
                self.principal = Some(v);
            }
        }
        if !given("busy_timeout_ms") {
            if let Some(v) = text_var("SOMNA_BUSY_TIMEOUT_MS")? {
                self.busy_timeout_ms = v.trim().parse().map_err(|_| Error::Invalid {
                    what: "environment",
                    reason: format!(
                        "SOMNA_BUSY_TIMEOUT_MS={v:?}: not a whole number of milliseconds"
                    ),
                })?;
            }
        }
        Ok(())
    }

    /// How stores open: the busy timeout and the principal (checked).
    pub fn options(&self) -> Result<Options, Error> {
        if let Some(p) = &self.principal {
            somna::validate_principal(p)?;
        }
        // A one-shot command reads little: a small page cache. `somna mcp` stays open and
        // keeps the library's default, sized for a server. `SOMNA_CACHE_MIB` sets either.
        let cache = match somna::cache_bytes_from_env()? {
            Some(n) => n,
            None if self.stays_open() => somna::SERVER_CACHE_BYTES,
            None => somna::CLI_CACHE_BYTES,
        };
        Ok(Options::default()
            .busy_timeout(Duration::from_millis(self.busy_timeout_ms))
            .principal(self.principal.as_deref())
            .cache_bytes(cache))
    }

    /// True for a command whose process keeps its store open (`somna mcp`).
    fn stays_open(&self) -> bool {
        #[cfg(feature = "mcp")]
        if matches!(self.command, Command::Mcp(_)) {
            return true;
        }
        false
    }

    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    /// The store (`--db`) and the options to open it with (`--busy-timeout-ms`, `--as`, checked).
    pub fn store_options(&self) -> Result<(PathBuf, Options), Error> {
        Ok((self.db_path()?, self.options()?))
    }

    /// The store file: `--db` (or `SOMNA_DB`), else `~/.somna/memory.redb`.
    fn db_path(&self) -> Result<PathBuf, Error> {
        if let Some(p) = &self.db {
            somna::check_location(p)?;
            return Ok(p.clone());
        }
        default_db_path().ok_or_else(|| Error::Invalid {
            what: "store path",
            reason: "HOME is not set; pass --db PATH or set SOMNA_DB".into(),
        })
    }

    /// How `Run:` lines invoke somna: the command prefix without `--scope`, plus `--scope`
    /// when it is not the default.
    pub fn command_prefix(&self) -> String {
        let mut prefix = self.command_prefix_without_scope();
        if self.scope != somna::DEFAULT_SCOPE {
            prefix.push_str(&format!(" --scope {}", shell_quote(&self.scope)));
        }
        prefix
    }

    /// The command prefix without `--scope` (multi-scope wake adds each section's scope): the
    /// program, then `--db` and `--as` when they are not the defaults, so that a `Run:` line
    /// works pasted anywhere (another shell, another folder, another environment).
    fn command_prefix_without_scope(&self) -> String {
        let mut cmd = program();
        if let Ok(db) = self.db_path() {
            if let Some(url) = somna::url_of(&db) {
                // Never the password: a printed command finds it where this one did
                // (PGPASSWORD, or the URL the user keeps in SOMNA_DB).
                let shown = somna::without_password(url);
                cmd.push_str(&format!(" --db {}", shell_quote(&shown)));
            } else if default_db_path().as_ref() != Some(&db) {
                let db = std::path::absolute(&db).unwrap_or(db);
                cmd.push_str(&format!(" --db {}", shell_quote(&db.to_string_lossy())));
            }
        }
        if let Some(p) = &self.principal {
            cmd.push_str(&format!(" --as {}", shell_quote(p)));
        }
        cmd
    }
}

/// What every command receives (as jj's `CommandHelper`): built once in `run`, from global
/// options that were checked there.
pub struct Context<'a> {
    /// The open store: read-only when the command only reads ([`commands::reads_only`]).
    pub store: Store,
    /// `--scope`: one scope, or several (`a,b`) for the verbs that take them
    /// ([`commands::several_scopes`]).
    pub scope: &'a str,
    /// `--json`: print JSON instead of text.
    pub json: bool,
    /// How `Run:` lines invoke somna: [`Context::prefix_without_scope`], plus `--scope` when it
    /// is not the default.
    pub prefix: String,
    /// The program, then `--db` and `--as` when they are not the defaults.
    pub prefix_without_scope: String,
    /// Whether this run created the store (only `init` creates one).
    pub created: bool,
    /// Standard output.
    pub out: &'a mut dyn Write,
    /// Set by the MCP server: render the text to `out` *and* keep the `--json` value in
    /// [`Context::captured`], from one run of the command (one transaction for a write).
    pub both: bool,
    /// The `--json` value of a command run with [`Context::both`].
    pub captured: Option<serde_json::Value>,
    /// Set by the MCP server: the command runs a tool call, whose JSON arguments carry all it
    /// takes (the text of `note`, the messages of `session save`, the answers of `nap`). So `-`
    /// is the text `-`, not a request to read stdin, and no file or stdin is read: on stdio,
    /// stdin is the protocol. This is where the two front ends differ; the arguments are the
    /// same structs.
    pub tool_call: bool,
    /// Set by the MCP server: next-step hints in wake and merge prompts name tool calls, with
    /// this scope when it is not the server's default. The CLI's are `Run:` lines.
    pub tool_scope: Option<String>,
}

impl<'a> Context<'a> {
    /// Checks the global options, then opens the store as `cli.command` needs it: `init` creates
    /// it, or only checks one that exists (a read-only open writes nothing); a command that only
    /// reads opens it read-only; any other opens it read-write.
    pub fn open(cli: &'a Cli, out: &'a mut dyn Write) -> Result<Self, Error> {
        let path = cli.db_path()?;
        let opts = crate::cli::progress::on_upgrade(cli.options()?, cli.json);
        let prefix_without_scope = cli.command_prefix_without_scope();
        let prefix = cli.command_prefix();
        somna::validate_scopes(&cli.scope)?;
        if cli.scope.contains(',') && !commands::several_scopes(&cli.command) {
            return Err(Error::Invalid {
                what: "scope",
                reason: "several scopes (a,b) are only for wake, recall and search".into(),
            });
        }
        let init = matches!(cli.command, Command::Init);
        let server = somna::url_of(&path).is_some();
        if !server {
            check_store_file(&path)?;
        }
        let store = if init && (server || !Store::exists(&path)) {
            Store::create_with(&path, opts)
        } else {
            open_store(&path, opts, init || commands::reads_only(&cli.command))
        }
        .map_err(|e| refused_by_file_system(&path, e))?;
        let created = store.was_created();
        Ok(Context {
            store,
            scope: &cli.scope,
            json: cli.json,
            prefix,
            prefix_without_scope,
            created,
            out,
            both: false,
            captured: None,
            tool_call: false,
            tool_scope: None,
        })
    }

    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    /// A context for one MCP tool call over an open store: text to `out` and the `--json` value
    /// captured, hints naming tool calls (with `tool_scope`, the call's scope when it is not the
    /// server's default) and other commands naming `prefix`, nothing read but the arguments
    /// ([`Context::tool_call`]).
    pub fn for_call(
        store: Store,
        scope: &'a str,
        (prefix, tool_scope): (String, Option<String>),
        out: &'a mut dyn Write,
    ) -> Self {
        Context {
            store,
            scope,
            json: false,
            prefix_without_scope: "somna".into(),
            prefix,
            created: false,
            out,
            both: true,
            captured: None,
            tool_call: true,
            tool_scope,
        }
    }

    /// How wake and merge prompts name the next step: tool calls over MCP, else `Run:` lines
    /// with [`Context::prefix`].
    pub fn hints(&self) -> Hints {
        if self.tool_call {
            Hints::Tools {
                scope: self.tool_scope.clone(),
            }
        } else {
            Hints::Cli(self.prefix.clone())
        }
    }

    /// [`Context::hints`] before a scope is named (a wake of several scopes names each).
    pub fn hints_without_scope(&self) -> Hints {
        if self.tool_call {
            Hints::Tools { scope: None }
        } else {
            Hints::Cli(self.prefix_without_scope.clone())
        }
    }

    /// Whether the command should print its text (not `--json`, or both).
    pub fn text_wanted(&self) -> bool {
        !self.json || self.both
    }

    /// Whether the command should build its `--json` value (`--json`, or both).
    pub fn json_wanted(&self) -> bool {
        self.json || self.both
    }

    /// Prints `v` as JSON (`--json`), or keeps it as the captured value (both).
    pub fn emit(&mut self, v: &impl serde::Serialize) -> Result<(), Error> {
        if self.both {
            self.captured = Some(serde_json::to_value(v).map_err(|e| Error::Io(e.into()))?);
        } else if self.json {
            crate::cli::output::json(self.out, v)?;
        }
        Ok(())
    }

    /// The text argument as given, or (`-`) one line of stdin. In a tool call, the text as
    /// given, `-` included, less one trailing newline (as a line from stdin).
    pub fn text_arg(&self, t: &str) -> Result<String, Error> {
        if self.tool_call {
            return Ok(t.strip_suffix('\n').unwrap_or(t).to_string());
        }
        crate::cli::input::text_arg(t)
    }

    /// A whole file, or (`-`) stdin; in a tool call, neither.
    pub fn read_input(&self, file: &str) -> Result<String, Error> {
        if self.tool_call {
            return Err(Error::Invalid {
                what: "file",
                reason: "this server reads no file".into(),
            });
        }
        crate::cli::input::read_input(file)
    }

    /// Closes the store, reporting what dropping it cannot: redb writes its allocator state,
    /// which fails on a damaged file.
    pub fn close(self) -> Result<(), Error> {
        self.store.close()
    }
}

/// The program as `Run:` lines name it: `somna` when that is what PATH finds, otherwise this
/// binary's full path (a `cargo run` build, a copy outside PATH, another version earlier on it).
fn program() -> String {
    let Some(me) = super::program_file() else {
        return "somna".into();
    };
    let found = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(if cfg!(windows) { "somna.exe" } else { "somna" }))
            .find(|c| c.is_file())
    });
    let same = |a: &Path, b: &Path| match (a.canonicalize(), b.canonicalize()) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    match found {
        Some(f) if same(&f, &me) => "somna".into(),
        _ => shell_quote(&me.to_string_lossy()),
    }
}

/// `~/.somna/memory.redb`, when HOME is set.
/// On Windows, where `HOME` is seldom set, `%USERPROFILE%` (as Python's `Path.home()`).
fn default_db_path() -> Option<PathBuf> {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
    #[cfg(windows)]
    let home = home.or_else(|| std::env::var_os("USERPROFILE").filter(|h| !h.is_empty()));
    home.map(|h| Path::new(&h).join(".somna").join("memory.redb"))
}

/// Refuses a store path that is not a regular file (or nothing yet): a directory, a FIFO, a
/// device, a socket or a dangling symbolic link is named as such, never as a missing store.
fn check_store_file(path: &Path) -> Result<(), Error> {
    let shown = crate::cli::output::path_shown(path);
    let invalid = |reason: String| Error::Invalid {
        what: "store path",
        reason,
    };
    let link = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(refused_by_file_system(path, Error::Io(e))),
    };
    let target = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && link.is_symlink() => {
            return Err(invalid(format!(
                "{shown} is a symbolic link to a file that does not exist; point it at a store, or remove it"
            )))
        }
        Err(e) => return Err(refused_by_file_system(path, Error::Io(e))),
    };
    let kind = if target.is_file() {
        return Ok(());
    } else if target.is_dir() {
        "a directory"
    } else {
        "not a regular file (a FIFO, a device or a socket)"
    };
    Err(invalid(format!(
        "{shown} is {kind}; a store is one file: pass --db PATH/memory.redb"
    )))
}

/// An I/O error that is the file system refusing this user: [`Error::Denied`] naming the path
/// (exit 6), instead of a bare `Permission denied`.
fn refused_by_file_system(path: &Path, e: Error) -> Error {
    match e {
        Error::Io(io) if io.kind() == std::io::ErrorKind::PermissionDenied => Error::Denied(format!(
            "the file system does not let this user open {} ({io}); run as a user who may, or ask its owner",
            crate::cli::output::path_shown(path)
        )),
        e => e,
    }
}

/// Opens the store: read-only for a command that only reads, unless the read audit is on (then
/// the read must record itself, so it needs a read-write handle, and says so when the user may
/// only read the file).
pub fn open_store(path: &Path, opts: Options, read: bool) -> Result<Store, Error> {
    let store = Store::open_with(path, opts.clone().read_only(read))?;
    // The open recovered a torn tail: say so once (the next open finds a sound file).
    if let Some(r) = store.repaired_tail() {
        eprintln!("somna: note: {}", text::display_safe(&r.to_string()));
    }
    if let Some(w) = store.insecure_connection() {
        eprintln!("somna: warning: {}", text::display_safe(w));
    }
    if !read || !store.config()?.audit {
        return Ok(store);
    }
    store.close()?;
    Store::open_with(path, opts).map_err(|e| match e {
        Error::ReadOnly(_) => Error::ReadOnly(format!(
            "the read audit is on (AUDIT=1), so every read records who read what, but this user may only read {}; read it as a user who may write it, or have one run `somna config AUDIT=0`",
            path.display(),
        )),
        e => e,
    })
}
