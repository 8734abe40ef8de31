//! `completions` and `man`: the shell integration, generated from the same clap definitions as
//! `--help` (so neither can drift from it): the caller passes the whole command line's
//! `clap::Command`, which holds every verb's. Neither opens a store.

use std::io::Write;

use crate::cli::verb::{outside_store, NoArgs, Verb};
use clap::Args;
use somna::Error;

/// The arguments of `completions`.
#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete for
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Prints the completion script of `cmd` (the whole command line) for the shell: verbs,
/// options, and the values options take.
pub fn completions(
    out: &mut dyn Write,
    a: &CompletionsArgs,
    mut cmd: clap::Command,
) -> Result<u8, Error> {
    // Generated into memory first: clap_complete panics when its writer fails (a closed pipe),
    // and a write error here must be an error like any other.
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "somna", &mut script);
    out.write_all(&script)?;
    Ok(0)
}

/// Prints the manual as roff (`somna man | man -l -`): the page of `somna`, then one page per
/// verb (`somna-note`, ..., and `somna-session-save`, ... for the session verbs), all in one
/// document. `cmd` is the whole command line, with its long version.
pub fn man(out: &mut dyn Write, mut cmd: clap::Command) -> Result<u8, Error> {
    cmd.build();
    let mut roff = Vec::new();
    page(&cmd, "somna", &mut roff)?;
    out.write_all(&roff)?;
    Ok(0)
}

/// Renders `cmd`'s page as `name`, then its subcommands' pages as `name-SUB`.
fn page(cmd: &clap::Command, name: &str, roff: &mut Vec<u8>) -> Result<(), Error> {
    let named = cmd
        .clone()
        .name(name.to_string())
        .bin_name(name.replace('-', " "));
    clap_mangen::Man::new(named).render(roff)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        if sub.get_name() != "help" {
            page(sub, &format!("{name}-{}", sub.get_name()), roff)?;
        }
    }
    Ok(())
}

/// The verb `completions` (it opens no store: `somna::cli` runs it).
pub const COMPLETIONS: Verb<CompletionsArgs> = Verb::reads(outside_store);

/// The verb `man` (it opens no store: `somna::cli` runs it).
pub const MAN: Verb<NoArgs> = Verb::reads(outside_store);
