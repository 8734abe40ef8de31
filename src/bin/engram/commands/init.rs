//! `init`: create the store (or check the one that exists) and print the instructions to paste
//! into AGENTS.md.

use engram::Error;

use crate::cli::Context;

/// The text for AGENTS.md or CLAUDE.md; each `` `engram `` in it becomes the command prefix.
const INSTRUCTIONS: &str = include_str!("../instructions.md");

/// Says whether the store was created or already existed, then prints the instructions.
pub fn run(cx: &mut Context<'_>) -> Result<u8, Error> {
    let path = crate::output::path_shown(cx.store.path());
    if cx.created {
        writeln!(cx.out, "Created engram store at {path}.")?;
    } else {
        writeln!(cx.out, "engram store already exists at {path}.")?;
    }
    writeln!(cx.out, "Paste this into AGENTS.md or CLAUDE.md:\n")?;
    write!(
        cx.out,
        "{}",
        INSTRUCTIONS.replace("`engram ", &format!("`{} ", cx.prefix))
    )?;
    Ok(0)
}
