//! `wake`: print the memory of one scope, or of several sharing the budget.

use clap::Args;
#[cfg(feature = "mcp")]
use schemars::JsonSchema;
use serde::Deserialize;
use somna::{Error, WakeOptions};

use crate::cli::context::Context;
use crate::cli::verb::Verb;

/// The arguments of `wake` (the CLI verb and the MCP tool).
#[derive(Args, Debug, Default, Deserialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct WakeArgs {
    /// Which part to print (from 1), when the first part said there are several
    pub part: Option<usize>,
    /// The number of memories the first part reported (pins the snapshot across parts)
    pub total: Option<u64>,
    /// Budget in lines of memory [default: WAKE_LINES, 96]
    #[arg(long)]
    pub lines: Option<usize>,
    /// Budget in bytes for the whole output [default: WAKE_BYTES, none; over MCP, the server's
    /// result budget (--max-bytes), which is also the most]
    #[arg(long)]
    pub bytes: Option<usize>,
    /// Every scope you may read, one section each, sharing the budget
    #[arg(long)]
    #[serde(default)]
    pub all: bool,
}

/// Prints the scope's memory (recent memories raw, older ones summarized) within the budget;
/// with `--all` or `--scope a,b`, one section per scope, each naming its scope in its commands.
pub fn run(cx: &mut Context<'_>, a: &WakeArgs) -> Result<u8, Error> {
    let scope = cx.scope;
    let w = WakeOptions {
        lines: a.lines,
        bytes: a.bytes,
        part: a.part.unwrap_or(1),
        snapshot: a.total,
        hints: cx.hints(),
    };
    if w.part == 0 {
        return Err(Error::Invalid {
            what: "part",
            reason: "parts are numbered from 1".into(),
        });
    }
    if a.all || scope.contains(',') {
        let w = WakeOptions {
            hints: cx.hints_without_scope(),
            ..w
        };
        let (views, text) = if a.all {
            cx.store.wake_all(&w)?
        } else {
            let scopes: Vec<String> = scope.split(',').map(str::to_string).collect();
            cx.store.wake_scopes(&scopes, &w)?
        };
        cx.emit(&views)?;
        if cx.text_wanted() {
            write!(cx.out, "{text}")?;
        }
        return Ok(0);
    }
    // One read for `--json`, text, or both: the view, then its text.
    let view = cx.store.wake(scope, &w)?;
    if cx.json_wanted() {
        cx.emit(&view)?;
    }
    if cx.text_wanted() {
        write!(cx.out, "{}", view.part(&w)?)?;
    }
    Ok(0)
}

/// The verb `wake`.
pub const WAKE: Verb<WakeArgs> = Verb::reads(run).several_scopes();
