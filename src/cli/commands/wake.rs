//! `wake`: print the memory of one scope, or of several sharing the budget.

use clap::Args;
#[cfg(feature = "mcp")]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use somna::{Error, WakeOptions, WakeView};

use super::typed::OneOrMany;
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

// A typed result: the CLI prints it as text (`Woken::render`) or JSON, and the MCP tool returns
// it as its structured content (several scopes' under `result`), its output schema derived from
// this type.
/// What `wake` shows: one scope's view, or one per scope.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(transparent)]
pub struct Woken {
    /// The view, or the views.
    pub views: OneOrMany<WakeView>,
    /// The text, as printed (not in the JSON).
    #[serde(skip)]
    #[cfg_attr(feature = "mcp", schemars(skip))]
    pub text: String,
}

impl Woken {
    /// The memory of `scope` (several, comma-separated, or every readable one with `a.all`)
    /// within the budget; the text only when `text` (a part past the last is an error there).
    pub fn call(
        store: &somna::Store,
        scope: &str,
        a: &WakeArgs,
        w: &WakeOptions,
        text: bool,
    ) -> Result<Woken, Error> {
        if w.part == 0 {
            return Err(Error::Invalid {
                what: "part",
                reason: "parts are numbered from 1".into(),
            });
        }
        if a.all || scope.contains(',') {
            let (views, text) = if a.all {
                store.wake_all(w)?
            } else {
                let scopes: Vec<String> = scope.split(',').map(str::to_string).collect();
                store.wake_scopes(&scopes, w)?
            };
            let views = OneOrMany::Many(views);
            return Ok(Woken { views, text });
        }
        // One read for `--json`, text, or both: the view, then its text.
        let view = store.wake(scope, w)?;
        let text = if text { view.part(w)? } else { String::new() };
        Ok(Woken {
            views: OneOrMany::One(view),
            text,
        })
    }

    /// Its text.
    pub fn render(&self) -> &str {
        &self.text
    }
}

/// Prints the scope's memory (recent memories raw, older ones summarized) within the budget;
/// with `--all` or `--scope a,b`, one section per scope, each naming its scope in its commands.
pub fn run(cx: &mut Context<'_>, a: &WakeArgs) -> Result<u8, Error> {
    let several = a.all || cx.scope.contains(',');
    let w = WakeOptions {
        lines: a.lines,
        bytes: a.bytes,
        part: a.part.unwrap_or(1),
        snapshot: a.total,
        hints: if several {
            cx.hints_without_scope()
        } else {
            cx.hints()
        },
    };
    let woken = Woken::call(&cx.store, cx.scope, a, &w, cx.text_wanted())?;
    cx.show(&woken, |w| w.render().to_owned())
}

/// The verb `wake`.
pub const WAKE: Verb<WakeArgs> = Verb::reads(run).several_scopes();
