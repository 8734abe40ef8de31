//! `search`: memories and summaries ranked by what they are about (BM25, with a vector when
//! given); `reindex`: the search index rebuilt from the log and the tree.

use crate::cli::names::{kinds, modes, Names};
use clap::Args;
#[cfg(feature = "mcp")]
use schemars::JsonSchema;
use serde::Deserialize;
use somna::text;
use somna::{Error, Kind, SearchMode, SearchQuery};

use crate::cli::context::Context;
use crate::cli::output::plural;
use crate::cli::progress::Progress;
use crate::cli::verb::{NoArgs, Verb};

/// The arguments of `search` (the CLI verb and the MCP tool).
#[derive(Args, Debug, Deserialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct SearchArgs {
    /// The words to look for (any of them; memories holding more, and rarer, rank higher)
    pub query: String,
    /// Show at most N hits [default: 10]
    #[arg(long)]
    pub limit: Option<usize>,
    /// Skip the first N hits: the cursor a cut search names
    #[arg(long, value_name = "N")]
    pub offset: Option<usize>,
    /// Only memories observed on or after this date
    #[arg(long)]
    pub since: Option<String>,
    /// Only memories observed before this date
    #[arg(long)]
    pub until: Option<String>,
    /// Only memories of this kind (no summaries)
    #[arg(long, value_parser = Names(kinds))]
    pub kind: Option<String>,
    /// Budget in bytes of the hit lines shown [default: 20000]
    #[arg(long, value_name = "BYTES")]
    // Not a tool argument: the server passes its own result budget.
    #[serde(skip)]
    pub bytes: Option<usize>,
    /// Search every scope you may read (each hit names its scope); `--scope a,b` names several
    #[arg(long)]
    #[serde(default)]
    pub all: bool,
    /// Also rank retracted, superseded and deprecated memories (shown marked)
    #[arg(long)]
    #[serde(default)]
    pub include_inactive: bool,
    /// The query's embedding: a file (or - for stdin) of numbers, as a JSON array or separated
    /// by spaces or commas; fused with the words (or alone with --mode vector)
    #[arg(long, value_name = "FILE")]
    // Command line only: a tool call names no file; it passes the numbers (`vector` below).
    #[serde(skip)]
    pub vector: Option<String>,
    /// The query's embedding as numbers (tool calls), fused with the words
    #[arg(skip)]
    #[serde(rename = "vector", default)]
    pub vector_values: Option<Vec<f32>>,
    /// lexical, hybrid or vector [default: lexical, hybrid with --vector]
    #[arg(long, value_parser = Names(modes))]
    pub mode: Option<String>,
    /// BM25 k1 (advanced, for benchmarks)
    #[arg(long, hide = true)]
    #[serde(skip)]
    pub k1: Option<f64>,
    /// BM25 b (advanced, for benchmarks)
    #[arg(long, hide = true)]
    #[serde(skip)]
    pub b: Option<f64>,
    /// Weight of a neighbour's score (advanced, for benchmarks)
    #[arg(long, hide = true)]
    #[serde(skip)]
    pub neighbour_weight: Option<f64>,
    /// Neighbours on each side (advanced, for benchmarks)
    #[arg(long, hide = true)]
    #[serde(skip)]
    pub neighbours: Option<u32>,
    /// Query-term coverage boost (advanced, for benchmarks)
    #[arg(long, hide = true)]
    #[serde(skip)]
    pub coverage: Option<f64>,
}

/// Parses an embedding: a JSON array of numbers, or numbers separated by spaces or commas.
pub fn parse_vector(s: &str) -> Result<Vec<f32>, Error> {
    let bad = |what: String| Error::Invalid {
        what: "vector",
        reason: what,
    };
    if s.trim_start().starts_with('[') {
        return serde_json::from_str(s)
            .map_err(|e| bad(format!("not a JSON array of numbers ({e})")));
    }
    s.split(|c: char| c.is_whitespace() || c == ',')
        .filter(|w| !w.is_empty())
        .map(|w| {
            w.parse::<f32>()
                .map_err(|_| bad(format!("{w:?} is not a number")))
        })
        .collect()
}

fn query(cx: &Context<'_>, a: &SearchArgs) -> Result<SearchQuery, Error> {
    let mut q = SearchQuery::new(a.query.clone());
    q.limit = a.limit.unwrap_or(q.limit);
    q.offset = a.offset.unwrap_or(0);
    q.since_us = a.since.as_deref().map(text::parse_time).transpose()?;
    q.until_us = a.until.as_deref().map(text::parse_time).transpose()?;
    q.kind = a.kind.as_deref().map(str::parse::<Kind>).transpose()?;
    q.max_bytes = a.bytes.unwrap_or(q.max_bytes);
    q.include_inactive = a.include_inactive;
    q.vector = match (&a.vector_values, a.vector.as_deref()) {
        (Some(v), _) => Some(v.clone()),
        (None, Some(f)) => Some(parse_vector(&cx.read_input(f)?)?),
        (None, None) => None,
    };
    // Parsed again here for MCP, whose JSON skips clap's value list.
    q.mode = a
        .mode
        .as_deref()
        .map(str::parse::<SearchMode>)
        .transpose()?;
    let p = &mut q.params;
    p.k1 = a.k1.unwrap_or(p.k1);
    p.b = a.b.unwrap_or(p.b);
    p.neighbour_weight = a.neighbour_weight.unwrap_or(p.neighbour_weight);
    p.neighbours = a.neighbours.unwrap_or(p.neighbours);
    p.coverage = a.coverage.unwrap_or(p.coverage);
    Ok(q)
}

/// Prints the hits, best first (each prefixed by its scope when several are searched), then
/// `N hits.`, `Best N hits; more with --offset K.` or `No hit.`; `--json`: the result with each
/// hit's score and matched terms.
pub fn run(cx: &mut Context<'_>, a: &SearchArgs) -> Result<u8, Error> {
    let q = query(cx, a)?;
    let several = a.all || cx.scope.contains(',');
    let r = if a.all {
        cx.store.search_all(&q)?
    } else {
        let scopes: Vec<String> = cx.scope.split(',').map(str::to_string).collect();
        cx.store.search_scopes(&scopes, &q)?
    };
    cx.show(&r, |r| r.render(several))
}

/// Rebuilds the search index of every scope (admin only), with a bar on a terminal.
pub fn reindex(cx: &mut Context<'_>) -> Result<u8, Error> {
    let bar = Progress::start(cx.json, None, "indexing: scopes");
    let mut scopes = 0;
    let docs = cx.store.reindex(&mut |done, _| {
        bar.inc(1);
        scopes = done;
    })?;
    drop(bar);
    cx.emit(&serde_json::json!({"scopes": scopes, "documents": docs}))?;
    if cx.text_wanted() {
        let (d, s) = (
            plural(docs, "document", "documents"),
            plural(scopes, "scope", "scopes"),
        );
        writeln!(cx.out, "Indexed {d} in {s}.")?;
    }
    Ok(0)
}

/// The verb `search`.
pub const SEARCH: Verb<SearchArgs> = Verb::reads(run).several_scopes();

/// The verb `reindex`.
pub const REINDEX: Verb<NoArgs> = Verb::writes(|cx, _| reindex(cx));
