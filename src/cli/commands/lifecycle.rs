//! `accept`, `deprecate`, `retract` and `redact`: events on one memory (the log is not
//! rewritten).

use clap::Args;
#[cfg(feature = "mcp")]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use somna::Decision;
use somna::{Error, Store};

use crate::cli::context::Context;
use crate::cli::verb::Verb;

/// The arguments of `accept`, `deprecate` and `retract` (and of the MCP tool `decide`).
#[derive(Args, Debug, Deserialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct DecideArgs {
    /// The memory id
    pub id: u64,
    /// Why, recorded in the event
    #[arg(long)]
    pub why: Option<String>,
}

/// The arguments of `redact` (the CLI verb and the MCP tool).
#[derive(Args, Debug, Deserialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RedactArgs {
    /// The memory id
    pub id: u64,
    /// Why (recorded in the event)
    #[arg(long)]
    pub reason: String,
}

/// Accepts the memory as true.
pub fn accept(cx: &mut Context<'_>, a: &DecideArgs) -> Result<u8, Error> {
    decide(cx, a, Decision::Accept, "accepted")
}

/// Marks the memory deprecated.
pub fn deprecate(cx: &mut Context<'_>, a: &DecideArgs) -> Result<u8, Error> {
    decide(cx, a, Decision::Deprecate, "deprecated")
}

/// Retracts the memory as wrong.
pub fn retract(cx: &mut Context<'_>, a: &DecideArgs) -> Result<u8, Error> {
    decide(cx, a, Decision::Retract, "retracted")
}

// Typed results: the CLI prints each as text (`render`) or JSON, and the MCP tool returns it as
// its structured content, its output schema derived from the type. Their fields are in the
// order the JSON has always had (sorted: it was built as a `serde_json::Value`).
/// A decision recorded on a memory.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
pub struct Decided {
    /// The memory.
    pub id: u64,
    /// What it is now: accepted, deprecated or retracted.
    pub status: String,
}

impl Decided {
    /// Records decision `d` (whose status is the word `word`) on memory `a.id` of `scope`.
    pub fn call(
        store: &Store,
        scope: &str,
        a: &DecideArgs,
        (d, word): (Decision, &str),
    ) -> Result<Decided, Error> {
        store.decide(scope, a.id, d, a.why.as_deref())?;
        Ok(Decided {
            id: a.id,
            status: word.to_string(),
        })
    }

    /// Its text: the new status and how to rebuild the summaries (`prefix`: how to run somna).
    pub fn render(&self, prefix: &str) -> String {
        format!(
            "#{} is {}. Summaries built on it are stale until rebuilt: run `{prefix} nap`.\n",
            self.id, self.status
        )
    }
}

/// Records the decision; the summaries built on the memory are stale until rebuilt.
/// With `--json`: `{id, status}`.
fn decide(cx: &mut Context<'_>, a: &DecideArgs, d: Decision, word: &str) -> Result<u8, Error> {
    let o = Decided::call(&cx.store, cx.scope, a, (d, word))?;
    let prefix = cx.prefix.clone();
    cx.show(&o, |o| o.render(&prefix))
}

/// A memory redacted.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
pub struct Redacted {
    /// The memory.
    pub id: u64,
    /// Always `redacted`.
    pub status: String,
}

impl Redacted {
    /// Replaces memory `a.id`'s text in `scope` with a tombstone and drops the summaries built
    /// on it.
    pub fn call(store: &Store, scope: &str, a: &RedactArgs) -> Result<Redacted, Error> {
        store.redact(scope, a.id, &a.reason)?;
        Ok(Redacted {
            id: a.id,
            status: "redacted".into(),
        })
    }

    /// Its text: what was dropped and how to rebuild it (`prefix`: how to run somna).
    pub fn render(&self, prefix: &str) -> String {
        format!(
            "#{} is redacted; the summaries built on it were dropped. Run `{prefix} nap` to rebuild them.\n",
            self.id
        )
    }
}

/// Replaces the memory's text with a tombstone and drops the summaries built on it.
/// With `--json`: `{id, status: "redacted"}`.
pub fn redact(cx: &mut Context<'_>, a: &RedactArgs) -> Result<u8, Error> {
    let o = Redacted::call(&cx.store, cx.scope, a)?;
    let prefix = cx.prefix.clone();
    cx.show(&o, |o| o.render(&prefix))
}

/// The verb `accept`.
pub const ACCEPT: Verb<DecideArgs> = Verb::writes(accept);

/// The verb `deprecate`.
pub const DEPRECATE: Verb<DecideArgs> = Verb::writes(deprecate);

/// The verb `retract`.
pub const RETRACT: Verb<DecideArgs> = Verb::writes(retract);

/// The verb `redact`.
pub const REDACT: Verb<RedactArgs> = Verb::writes(redact);
