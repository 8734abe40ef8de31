//! `somna`: the command line over the somna library. Every verb is one library call; the CLI
//! only parses arguments, reads stdin and files, and prints. See docs/cli.md.
//!
//! This file holds the process: the panic hook, parsing, [`run`] and the exit-code policy.
//! [`cli`] holds the global options and the [`Context`] every command receives, [`commands`]
//! one file per verb group, [`input`] and [`output`] what the commands share.
#![warn(clippy::too_many_lines)]

mod cli;
mod commands;
mod input;
mod output;
mod progress;

use std::io::Write;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches};
use somna::text;
use somna::Error;

use crate::cli::{Cli, Context};
use crate::commands::Command;

/// The message of the last panic, for the one-line report of an internal error.
static LAST_PANIC: std::sync::Mutex<Option<String>> = std::sync::Mutex::new(None);

fn main() -> ExitCode {
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
        .long_version(cli::long_version())
        .get_matches();
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
            Ok(code) => ExitCode::from(code),
            Err(e) => report(&e),
        };
    }
    let mut out = std::io::stdout().lock();
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&cli, &mut out))) {
        Ok(Ok(code)) => {
            let _ = out.flush();
            ExitCode::from(code)
        }
        Ok(Err(Error::Io(e))) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            // The reader went away (`somna ... | head`); what was committed stays committed.
            ExitCode::SUCCESS
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
            ExitCode::from(70)
        }
    }
}

#[cfg(feature = "mcp")]
/// Runs `somna mcp` until its client goes away (stdio) or it is interrupted (HTTP).
fn mcp(cli: &Cli, a: &commands::mcp::McpArgs) -> Result<u8, Error> {
    let (path, opts) = cli.store_options()?;
    commands::mcp::serve(path, opts, &cli.scope, cli.principal.clone(), a)
}

/// Prints the error as one line on stderr and returns its exit code (docs/cli.md, "Exit codes").
fn report(e: &Error) -> ExitCode {
    eprintln!("somna: {}", text::display_safe(&e.to_string()));
    ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(1))
}

/// Reports that there is no store at `path`, with the command that creates it on a `Run:` line
/// (the binary as invoked, `--db`, `--as` and `--scope` when not the defaults); exits 3.
fn no_store(cli: &Cli, path: &std::path::Path) -> ExitCode {
    let shown = path.display().to_string();
    eprintln!("somna: no somna store at {}", text::display_safe(&shown));
    eprintln!("Run: {} init", cli.command_prefix());
    ExitCode::from(3)
}

/// Opens the store as the command needs it, runs the command and closes the store; returns the
/// exit code.
fn run(cli: &Cli, out: &mut dyn Write) -> Result<u8, Error> {
    if let Some(code) = commands::run_without_store(cli, out) {
        return code;
    }
    let mut cx = Context::open(cli, out)?;
    let code = commands::run(&mut cx, &cli.command)?;
    if !matches!(cli.command, Command::Init) {
        // Closing writes redb's allocator state: a failure there (a damaged file) is reported
        // too. `init` only drops its handle, as it always has.
        cx.close()?;
    }
    Ok(code)
}
