//! `accept`, `deprecate`, `retract` and `redact`: events on one memory (the log is not
//! rewritten).

use clap::Args;
#[cfg(feature = "mcp")]
use schemars::JsonSchema;
use serde::Deserialize;
use somna::Decision;
use somna::Error;

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

/// Records the decision; the summaries built on the memory are stale until rebuilt.
/// With `--json`: `{id, status}`.
fn decide(cx: &mut Context<'_>, a: &DecideArgs, d: Decision, word: &str) -> Result<u8, Error> {
    cx.store.decide(cx.scope, a.id, d, a.why.as_deref())?;
    cx.emit(&serde_json::json!({"id": a.id, "status": word}))?;
    if !cx.text_wanted() {
        return Ok(0);
    }
    writeln!(
        cx.out,
        "#{} is {word}. Summaries built on it are stale until rebuilt: run `{} nap`.",
        a.id, cx.prefix
    )?;
    Ok(0)
}

/// Replaces the memory's text with a tombstone and drops the summaries built on it.
/// With `--json`: `{id, status: "redacted"}`.
pub fn redact(cx: &mut Context<'_>, a: &RedactArgs) -> Result<u8, Error> {
    cx.store.redact(cx.scope, a.id, &a.reason)?;
    cx.emit(&serde_json::json!({"id": a.id, "status": "redacted"}))?;
    if !cx.text_wanted() {
        return Ok(0);
    }
    writeln!(
        cx.out,
        "#{} is redacted; the summaries built on it were dropped. Run `{} nap` to rebuild them.",
        a.id, cx.prefix
    )?;
    Ok(0)
}

/// The verb `accept`.
pub const ACCEPT: Verb<DecideArgs> = Verb::writes(accept);

/// The verb `deprecate`.
pub const DEPRECATE: Verb<DecideArgs> = Verb::writes(deprecate);

/// The verb `retract`.
pub const RETRACT: Verb<DecideArgs> = Verb::writes(retract);

/// The verb `redact`.
pub const REDACT: Verb<RedactArgs> = Verb::writes(redact);
