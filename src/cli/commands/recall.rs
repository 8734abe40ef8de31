//! `recall`: the memories whose line matches a regex, in one scope or several.

use crate::cli::names::{kinds, Names};
use clap::Args;
#[cfg(feature = "mcp")]
use schemars::JsonSchema;
use serde::Deserialize;
use somna::text;
use somna::{Error, Kind, RecallQuery};

use crate::cli::context::Context;
use crate::cli::output::plural;
use crate::cli::verb::Verb;

/// The arguments of `recall` (the CLI verb and the MCP tool).
#[derive(Args, Debug, Deserialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct RecallArgs {
    /// A regular expression (case-insensitive) matched against each line `#id YYYY-MM-DD
    /// text`; with words, plain words instead
    pub pattern: String,
    /// At most this many matches (the newest)
    #[arg(long)]
    pub limit: Option<usize>,
    /// Only memories observed on or after this date
    #[arg(long)]
    pub since: Option<String>,
    /// Only memories observed before this date
    #[arg(long)]
    pub until: Option<String>,
    /// Only memories of this kind
    #[arg(long, value_parser = Names(kinds))]
    pub kind: Option<String>,
    /// Take the pattern as plain words: all of them, in any order, as literals (for
    /// natural-language queries)
    #[arg(long)]
    #[serde(default)]
    pub words: bool,
    /// Budget in bytes of the match lines shown [default: 20000]
    #[arg(long, value_name = "BYTES")]
    // Not a tool argument: the server passes its own result budget.
    #[serde(skip)]
    pub bytes: Option<usize>,
    /// Only memories with an id below this one: the cursor a cut recall names (its
    /// next_before), for older matches
    #[arg(long, value_name = "ID")]
    pub before: Option<u64>,
    /// Search every scope you may read (each match names its scope); to search several, name
    /// them all as the scope: a,b
    #[arg(long)]
    #[serde(default)]
    pub all: bool,
}

/// Prints the matches (the valid ones, when some records are damaged: then the exit status is
/// 5); with `--all` or `--scope a,b`, over several scopes.
pub fn run(cx: &mut Context<'_>, a: &RecallArgs) -> Result<u8, Error> {
    let scope = cx.scope;
    let mut q = RecallQuery::new(a.pattern.clone());
    q.limit = a.limit;
    q.since_us = a.since.as_deref().map(text::parse_time).transpose()?;
    q.until_us = a.until.as_deref().map(text::parse_time).transpose()?;
    q.kind = a.kind.as_deref().map(str::parse::<Kind>).transpose()?;
    q.words = a.words;
    q.before = a.before;
    if let Some(b) = a.bytes {
        q.max_bytes = b;
    }
    if a.all || scope.contains(',') {
        let found = if a.all {
            cx.store.recall_all(&q)?
        } else {
            let scopes: Vec<String> = scope.split(',').map(str::to_string).collect();
            cx.store.recall_scopes(&scopes, &q)?
        };
        return recall_scopes(cx, &found);
    }
    let r = cx.store.recall(scope, &q)?;
    cx.emit(&r)?;
    if cx.text_wanted() {
        write!(cx.out, "{}", r.render())?;
    }
    // The valid matches are printed; the exit status still says the store is damaged.
    Ok(if r.unreadable.is_empty() { 0 } else { 5 })
}

/// Recall over several scopes: each match line starts with its scope; JSON is one object per
/// scope (`scope` beside recall's fields). Exit 5 when a scope had damaged records.
fn recall_scopes(cx: &mut Context<'_>, found: &[(String, somna::Recall)]) -> Result<u8, Error> {
    let damaged = found.iter().any(|(_, r)| !r.unreadable.is_empty());
    let code = if damaged { 5 } else { 0 };
    if cx.json_wanted() {
        let v: Vec<serde_json::Value> = found
            .iter()
            .map(|(s, r)| serde_json::json!({ "scope": s, "recall": r }))
            .collect();
        cx.emit(&v)?;
        if !cx.text_wanted() {
            return Ok(code);
        }
    }
    let out = &mut *cx.out;
    let mut total = 0;
    for (s, r) in found {
        for l in r.shown_lines() {
            writeln!(out, "{s} {l}")?;
        }
        total += r.total;
        if r.total > r.matches.len() as u64 {
            writeln!(
                out,
                "Newest {} of {} matches in scope {s}. Narrow the regex.",
                r.matches.len(),
                r.total
            )?;
        }
        for id in &r.unreadable {
            writeln!(out, "Skipped damaged record #{id} in scope {s}.")?;
        }
    }
    let scopes = plural(found.len() as u64, "scope", "scopes");
    match total {
        0 => writeln!(out, "No match in {scopes}.")?,
        n => writeln!(out, "{} in {scopes}.", plural(n, "match", "matches"))?,
    }
    Ok(code)
}

/// The verb `recall`.
pub const RECALL: Verb<RecallArgs> = Verb::reads(run).several_scopes();
