//! `recall`: the memories whose line matches a regex, in one scope or several.

use crate::cli::names::{kinds, Names};
use clap::Args;
#[cfg(feature = "mcp")]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use somna::text;
use somna::{Error, Kind, Recall, RecallQuery};

use super::typed::OneOrMany;
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

/// One scope's matches, in a recall over several.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
pub struct ScopeRecall {
    /// The scope.
    pub scope: String,
    /// What recall found in it.
    pub recall: Recall,
}

// A typed result: the CLI prints it as text (`Recalled::render`) or JSON, and the MCP tool
// returns it as its structured content (several scopes' under `result`), its output schema
// derived from this type.
/// What `recall` found: in one scope, or in each of several.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(transparent)]
pub struct Recalled {
    /// One scope's matches, or each scope's.
    pub found: OneOrMany<Recall, ScopeRecall>,
}

impl Recalled {
    /// The matches of `a.pattern` in `scope` (several, comma-separated, or every readable one
    /// with `a.all`).
    pub fn call(store: &somna::Store, scope: &str, a: &RecallArgs) -> Result<Recalled, Error> {
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
        if !a.all && !scope.contains(',') {
            let found = OneOrMany::One(store.recall(scope, &q)?);
            return Ok(Recalled { found });
        }
        let found = if a.all {
            store.recall_all(&q)?
        } else {
            let scopes: Vec<String> = scope.split(',').map(str::to_string).collect();
            store.recall_scopes(&scopes, &q)?
        };
        let found = found
            .into_iter()
            .map(|(scope, recall)| ScopeRecall { scope, recall })
            .collect();
        Ok(Recalled {
            found: OneOrMany::Many(found),
        })
    }

    /// The exit status: 5 when records were damaged (the valid matches are still shown), else 0.
    pub fn exit_code(&self) -> u8 {
        let damaged = match &self.found {
            OneOrMany::One(r) => !r.unreadable.is_empty(),
            OneOrMany::Many(all) => all.iter().any(|s| !s.recall.unreadable.is_empty()),
        };
        if damaged {
            5
        } else {
            0
        }
    }

    /// Its text: the match lines (each after its scope, over several), then a count.
    pub fn render(&self) -> String {
        match &self.found {
            OneOrMany::One(r) => r.render(),
            OneOrMany::Many(all) => render_scopes(all),
        }
    }
}

/// Prints the matches (the valid ones, when some records are damaged: then the exit status is
/// 5); with `--all` or `--scope a,b`, over several scopes.
pub fn run(cx: &mut Context<'_>, a: &RecallArgs) -> Result<u8, Error> {
    let r = Recalled::call(&cx.store, cx.scope, a)?;
    cx.show(&r, |r| r.render())?;
    Ok(r.exit_code())
}

/// Recall over several scopes as text: each match line starts with its scope.
fn render_scopes(found: &[ScopeRecall]) -> String {
    let mut out = String::new();
    let mut total = 0;
    for ScopeRecall {
        scope: s,
        recall: r,
    } in found
    {
        for l in r.shown_lines() {
            out.push_str(&format!("{s} {l}\n"));
        }
        total += r.total;
        if r.total > r.matches.len() as u64 {
            out.push_str(&format!(
                "Newest {} of {} matches in scope {s}. Narrow the regex.\n",
                r.matches.len(),
                r.total
            ));
        }
        for id in &r.unreadable {
            out.push_str(&format!("Skipped damaged record #{id} in scope {s}.\n"));
        }
    }
    let scopes = plural(found.len() as u64, "scope", "scopes");
    match total {
        0 => out.push_str(&format!("No match in {scopes}.\n")),
        n => out.push_str(&format!("{} in {scopes}.\n", plural(n, "match", "matches"))),
    }
    out
}

/// The verb `recall`.
pub const RECALL: Verb<RecallArgs> = Verb::reads(run).several_scopes();
