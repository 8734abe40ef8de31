//! The global options ([`Cli`]), the program that `Run:` lines name, and how the [`Context`]
//! of a run is built from them (once per run, then passed to every command).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use clap::Parser;
use somna::{Error, Options};

use crate::cli::commands::{self, Command};
use crate::cli::context::Context;
use crate::cli::output::shell_quote;

/// The file `Run:` lines name when PATH finds it there, if the caller of `somna::cli::main`
/// said; else this process's executable.
static PROGRAM: OnceLock<PathBuf> = OnceLock::new();

/// Sets the file `Run:` lines name as `somna` when PATH finds it there (once per process).
pub fn set_program(p: PathBuf) {
    let _ = PROGRAM.set(p);
}

/// The program `Run:` lines should name ([`PROGRAM`], else the running executable).
fn program_file() -> Option<PathBuf> {
    PROGRAM
        .get()
        .cloned()
        .or_else(|| std::env::current_exe().ok())
}
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
    /// Milliseconds a writer waits for another before failing as busy; 0 tries once [env:
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
            somna::trust::validate_principal(p)?;
        }
        // A one-shot command reads little: a small page cache. `somna mcp` stays open and
        // keeps the library's default, sized for a server. `SOMNA_CACHE_MIB` sets either.
        let cache = match somna::store::cache_bytes_from_env()? {
            Some(n) => n,
            None if self.stays_open() => somna::store::SERVER_CACHE_BYTES,
            None => somna::store::CLI_CACHE_BYTES,
        };
        // The shared commit journal pays off over many writes; a one-shot command commits
        // durably in redb (one sync) instead of a record's sync plus a checkpoint at exit.
        Ok(Options::default()
            .busy_timeout(Duration::from_millis(self.busy_timeout_ms))
            .principal(self.principal.as_deref())
            .cache_bytes(cache)
            .shared_journal(self.stays_open()))
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
            somna::store::check_location(p)?;
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
        self.with_scope(self.command_prefix_without_scope())
    }

    /// [`Cli::command_prefix`] for the store at `db` rather than `--db`'s: the `Run: ... init`
    /// line for a store that is missing (`copy`'s source names its own).
    pub fn command_prefix_at(&self, db: &Path) -> String {
        self.with_scope(self.prefix_for(Some(db.to_path_buf())))
    }

    /// `prefix`, then `--scope` when it is not the default.
    fn with_scope(&self, mut prefix: String) -> String {
        if self.scope != somna::DEFAULT_SCOPE {
            prefix.push_str(&format!(" --scope {}", shell_quote(&self.scope)));
        }
        prefix
    }

    /// The command prefix without `--scope` (multi-scope wake adds each section's scope): the
    /// program, then `--db` and `--as` when they are not the defaults, so that a `Run:` line
    /// works pasted anywhere (another shell, another folder, another environment).
    fn command_prefix_without_scope(&self) -> String {
        self.prefix_for(self.db_path().ok())
    }

    /// The program, then `--db` for `db` (when it is not the default store) and `--as`.
    fn prefix_for(&self, db: Option<PathBuf>) -> String {
        let mut cmd = program();
        if let Some(db) = db {
            if let Some(url) = somna::store::url_of(&db) {
                // Never the password: a printed command finds it where this one did
                // (PGPASSWORD, or the URL the user keeps in SOMNA_DB).
                let shown = somna::store::without_password(url);
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

    /// Checks the global options, then opens the store as the command needs it
    /// (`open::for_command`) and builds the run's [`Context`] around it.
    pub fn context<'a>(&'a self, out: &'a mut dyn Write) -> Result<Context<'a>, Error> {
        let path = self.db_path()?;
        let opts = crate::cli::progress::on_upgrade(self.options()?, self.json);
        let prefix_without_scope = self.command_prefix_without_scope();
        let prefix = self.command_prefix();
        somna::text::validate_scopes(&self.scope)?;
        if self.scope.contains(',') && !commands::several_scopes(&self.command) {
            return Err(Error::Invalid {
                what: "scope",
                reason: "several scopes (a,b) are only for wake, recall and search".into(),
            });
        }
        let init = matches!(self.command, Command::Init(_));
        let reads = commands::reads_only(&self.command);
        let store = if matches!(self.command, Command::Migrate(_)) {
            crate::cli::open::for_migrate(&path, opts)?
        } else {
            crate::cli::open::for_command(&path, opts, init, reads)?
        };
        let created = store.was_created();
        Ok(Context {
            store,
            scope: &self.scope,
            json: self.json,
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
}

/// The program as `Run:` lines name it: `somna` when that is what PATH finds, otherwise this
/// binary's full path (a `cargo run` build, a copy outside PATH, another version earlier on it).
fn program() -> String {
    let Some(me) = program_file() else {
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
