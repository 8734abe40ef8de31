//! `init`: create the store (or check the one that exists) and print the instructions to paste
//! into AGENTS.md.

use somna::Error;

use crate::cli::context::Context;
use crate::cli::verb::{NoArgs, Verb};

/// The text for AGENTS.md or CLAUDE.md; each `` `somna `` in it becomes the command prefix.
const INSTRUCTIONS: &str = include_str!("../instructions.md");

/// Says whether the store was created or already existed, then prints the instructions.
pub fn run(cx: &mut Context<'_>) -> Result<u8, Error> {
    let path = crate::cli::output::path_shown(cx.store.path());
    if cx.created {
        writeln!(cx.out, "Created somna store at {path}.")?;
    } else {
        writeln!(cx.out, "somna store already exists at {path}.")?;
    }
    writeln!(cx.out, "Paste this into AGENTS.md or CLAUDE.md:\n")?;
    write!(
        cx.out,
        "{}",
        INSTRUCTIONS.replace("`somna ", &format!("`{} ", cx.prefix))
    )?;
    Ok(0)
}

/// The verb `init`.
pub const INIT: Verb<NoArgs> = Verb::writes(|cx, _| run(cx));
