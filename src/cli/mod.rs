//! `somna`: the command line over the somna library (the `cli` feature). Every verb is one
//! library call; the CLI only parses arguments, reads stdin and files, and prints. See
//! docs/cli.md. It lives in the library, not only in `src/bin/somna/main.rs` (which calls
//! [`main`]), so that the Python package runs the same command line in process: `pip install
//! somna` gives the `somna` command (python/src/cli.rs, docs/python.md).
//!
//! It uses the library through its public API only, as `somna::...` (the crate names itself so
//! in `lib.rs`), as an outside program would. This file holds the process: the panic hook,
//! parsing, [`run`] and the exit-code policy. [`globals`] holds the global options and builds the
//! [`context::Context`] every command receives, [`commands`] holds one file per verb group;
//! [`context`], [`input`], [`names`], [`open`], [`output`] and [`progress`] are leaves the
//! commands share (no module of the command line names one above it: tests/api/layers.rs).
//!
//! The command line is the one part of the crate that prints.
#![warn(clippy::too_many_lines)]
#![allow(clippy::print_stdout, clippy::print_stderr)]

mod commands;
mod context;
mod globals;
mod input;
mod names;
mod open;
mod output;
mod progress;
mod verb;

use std::ffi::OsString;
use std::io::Write;
use std::path::PathBuf;

use clap::{CommandFactory, FromArgMatches};
use somna::text;
use somna::Error;

use crate::cli::commands::Command;
use crate::cli::globals::Cli;

/// The message of the last panic, for the one-line report of an internal error.
static LAST_PANIC: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

/// Runs the `somna` command line, as the `somna` binary does, and returns its exit code
/// (docs/cli.md, "Exit codes"). `args` are the arguments with the program's name first (as
/// [`std::env::args_os`] gives them); `program` is the file that `Run:` lines name as `somna` when
/// PATH finds it there (the Python package's `somna` script, whose process is the interpreter),
/// `None` for this process's executable. Like the binary, it installs a panic hook, and
/// `--help`, `--version` or an argument clap refuses end the process with clap's exit code.
pub fn main<I, T>(args: I, program: Option<PathBuf>) -> u8
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    if let Some(p) = program {
        globals::set_program(p);
    }
    // A panic (which only the storage engine may raise, on a damaged file) is kept quiet here:
    // the library turns the ones it can catch into typed errors, and `main` reports the rest.
    // SOMNA_DEBUG_PANIC=1 prints each one with a backtrace, for a report to redb.
    std::panic::set_hook(Box::new(|info| {
        if std::env::var_os("SOMNA_DEBUG_PANIC").is_some() {
            eprintln!(
                "somna: debug: {info}\n{}",
                std::backtrace::Backtrace::force_capture()
            );
        }
        if let Ok(mut last) = LAST_PANIC.lock() {
            *last = Some(info.to_string());
        }
    }));
    let matches = Cli::command()
        .long_version(globals::long_version())
        .get_matches_from(args);
    let mut cli = match Cli::from_arg_matches(&matches) {
        Ok(c) => c,
        Err(e) => e.exit(),
    };
    if let Err(e) = cli.apply_env(&matches) {
        return report(&e);
    }
    #[cfg(feature = "mcp")]
    if let Command::Mcp(a) = &cli.command {
        // The server writes stdout from its own threads: it must not be locked here.
        return match mcp(&cli, a) {
            Ok(code) => code,
            Err(e) => report(&e),
        };
    }
    let mut out = std::io::stdout().lock();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&cli, &mut out))) {
        Ok(Ok(code)) => {
            let _ = out.flush();
            code
        }
        Ok(Err(Error::Io(e))) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            // The reader went away (`somna ... | head`); what was committed stays committed.
            0
        }
        Ok(Err(Error::NotFound { path })) => {
            let _ = out.flush();
            no_store(&cli, &path)
        }
        Ok(Err(e)) => {
            let _ = out.flush();
            report(&e)
        }
        Err(_) => {
            let _ = out.flush();
            let what = LAST_PANIC
                .lock()
                .ok()
                .and_then(|mut l| l.take())
                .unwrap_or_default();
            eprintln!(
                "somna: internal error ({}). Nothing unacknowledged was written; run `somna verify`, and please report this.",
                text::display_safe(&what)
            );
            70
        }
    }
}

#[cfg(feature = "mcp")]
/// Runs `somna mcp` until its client goes away (stdio) or it is interrupted (HTTP).
fn mcp(cli: &Cli, a: &commands::mcp::McpArgs) -> Result<u8, Error> {
    let (path, opts) = cli.store_options()?;
    let ui: commands::mcp::Ui = commands::web::router;
    commands::mcp::serve(path, opts, &cli.scope, cli.principal.clone(), a, ui)
}

/// Prints the error as one line on stderr and returns its exit code (docs/cli.md, "Exit codes").
fn report(e: &Error) -> u8 {
    eprintln!("somna: {}", text::display_safe(&e.to_string()));
    u8::try_from(e.exit_code()).unwrap_or(1)
}

/// Reports that there is no store at `path`, with the command that creates it on a `Run:` line
/// (the binary as invoked, `--db PATH` for that store, `--as` and `--scope` when not the
/// defaults); exits 3.
fn no_store(cli: &Cli, path: &std::path::Path) -> u8 {
    let shown = path.display().to_string();
    eprintln!("somna: no somna store at {}", text::display_safe(&shown));
    eprintln!("Run: {} init", cli.command_prefix_at(path));
    3
}

/// Opens the store as the command needs it, runs the command and closes the store; returns the
/// exit code.
fn run(cli: &Cli, out: &mut dyn Write) -> Result<u8, Error> {
    if let Some(code) = run_without_store(cli, out) {
        return code;
    }
    let mut cx = cli.context(out)?;
    let code = commands::run(&mut cx, &cli.command)?;
    if !matches!(cli.command, Command::Init(_)) {
        // Closing writes redb's allocator state: a failure there (a damaged file) is reported
        // too. `init` only drops its handle, as it always has.
        cx.close()?;
    }
    Ok(code)
}

/// Runs a command that opens no store through `--db` (`completions`, `man`, and `copy`, which
/// names its own two); `None` for every other.
fn run_without_store(cli: &Cli, out: &mut dyn Write) -> Option<Result<u8, Error>> {
    match &cli.command {
        Command::Completions(a) => Some(commands::completions(out, a, Cli::command())),
        Command::Man(_) => Some(commands::man(
            out,
            Cli::command().long_version(globals::long_version()),
        )),
        // It names its own two stores.
        Command::Copy(a) => Some(
            cli.options()
                .and_then(|opts| commands::copy(opts, cli.json, a, out)),
        ),
        _ => None,
    }
}
