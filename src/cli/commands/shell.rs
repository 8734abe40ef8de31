//! `completions` and `man`: the shell integration, generated from the same clap definitions as
//! `--help` (so neither can drift from it). Neither opens a store.

use std::io::Write;

use clap::{Args, CommandFactory};
use somna::Error;

use crate::cli::globals::Cli;

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete for
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// Prints the completion script for the shell: verbs, options, and the values options take.
pub fn completions(out: &mut dyn Write, a: &CompletionsArgs) -> Result<u8, Error> {
    let mut cmd = Cli::command();
    // Generated into memory first: clap_complete panics when its writer fails (a closed pipe),
    // and a write error here must be an error like any other.
    let mut script = Vec::new();
    clap_complete::generate(a.shell, &mut cmd, "somna", &mut script);
    out.write_all(&script)?;
    Ok(0)
}

/// Prints the manual as roff (`somna man | man -l -`): the page of `somna`, then one page per
/// verb (`somna-note`, ..., and `somna-session-save`, ... for the session verbs), all in one
/// document.
pub fn man(out: &mut dyn Write) -> Result<u8, Error> {
    let mut cmd = Cli::command().long_version(crate::cli::globals::long_version());
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
