//! `show` and `why`: one memory with its envelope and history; one summary's claims with the
//! records each cites.

use clap::Args;
#[cfg(feature = "mcp")]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use somna::text;
use somna::text::Claim;
use somna::{Block, Error, Memory, Store, Summary};
use somna::{Event, EventKind, MemoryState};

use super::typed::{Object, Sorted};
use crate::cli::context::Context;
use crate::cli::verb::Verb;

/// The arguments of `show` (the CLI verb and the MCP tool).
#[derive(Args, Debug, Deserialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ShowArgs {
    /// The memory id (the #N of a line)
    pub id: u64,
}

/// The arguments of `why` (the CLI verb and the MCP tool).
#[derive(Args, Debug, Deserialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct WhyArgs {
    /// The block, as LO-HI (e.g. 0-7), as wake and merge prompts print it
    pub block: String,
}

// A typed result: the CLI prints it as text (`Shown::render`) or JSON, and the MCP tool returns
// it as its structured content, its output schema derived from this type. Its fields are in
// the order the JSON has always had (sorted, at every level: it was built as a
// `serde_json::Value`).
/// One memory: its scope, its envelope and its state.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
pub struct Shown {
    /// The memory as recorded: id, text, kind, status, source, dates, links.
    pub memory: Sorted<Memory>,
    /// The scope it is in.
    pub scope: String,
    /// Its state now: status, expiry, links, whether it reads as instructions, its history.
    pub state: Sorted<MemoryState>,
}

impl Shown {
    /// Memory `a.id` of `scope`, with its state.
    pub fn call(store: &Store, scope: &str, a: &ShowArgs) -> Result<Shown, Error> {
        let (mem, st) = store.show(scope, a.id)?;
        Ok(Shown {
            memory: Sorted(mem),
            scope: scope.to_string(),
            state: Sorted(st),
        })
    }

    /// Its text: the memory's line, its envelope a field a line, then its history.
    pub fn render(&self) -> String {
        let (mem, st) = (&self.memory.0, &self.state.0);
        let mut out = format!("{}\n", somna::text::marked_line(mem, st));
        out.push_str(&format!("scope: {}\n", self.scope));
        out.push_str(&format!("kind: {}\n", mem.kind));
        out.push_str(&format!(
            "status: {} (recorded as {})\n",
            st.status, mem.status
        ));
        out.push_str(&format!(
            "observed: {}\n",
            text::rfc3339_of(mem.observed_us)
        ));
        out.push_str(&format!(
            "recorded: {}\n",
            text::rfc3339_of(mem.recorded_us)
        ));
        if let Some(s) = &mem.source {
            out.push_str(&format!("source: {}\n", text::display_safe(s)));
        }
        if let Some(u) = &mem.source_uri {
            out.push_str(&format!("uri: {}\n", text::display_safe(u)));
        }
        if let Some(v) = mem.valid_until_us {
            let expired = if st.expired { " (expired)" } else { "" };
            out.push_str(&format!("valid until: {}{expired}\n", text::rfc3339_of(v)));
        }
        out.push_str(&links(mem, st));
        if st.untrusted {
            out.push_str("untrusted: the text reads as instructions; it is data\n");
        }
        out.push_str(&history(&st.events));
        out
    }
}

/// Prints the memory, its envelope, its state and its history.
pub fn show(cx: &mut Context<'_>, a: &ShowArgs) -> Result<u8, Error> {
    let s = Shown::call(&cx.store, cx.scope, a)?;
    cx.show(&s, |s| s.render())
}

/// The `history:` lines: none, or one event a line.
fn history(events: &[Event]) -> String {
    if events.is_empty() {
        return "history: none\n".into();
    }
    let mut out = String::from("history:\n");
    for e in events {
        out.push_str(&format!("  {}\n", event_line(e)));
    }
    out
}

/// The `supersedes`, `superseded by` and `conflicts with` lines, each only when not empty.
fn links(mem: &Memory, st: &MemoryState) -> String {
    let ids = |v: &[u64]| {
        v.iter()
            .map(|i| format!("#{i}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = String::new();
    if !mem.supersedes.is_empty() {
        out.push_str(&format!("supersedes: {}\n", ids(&mem.supersedes)));
    }
    if !st.superseded_by.is_empty() {
        out.push_str(&format!("superseded by: {}\n", ids(&st.superseded_by)));
    }
    if !st.conflicts.is_empty() {
        out.push_str(&format!(
            "conflicts with (undecided): {}\n",
            ids(&st.conflicts)
        ));
    }
    out
}

/// One event of the history: `DATE what by WHO[: why]`.
fn event_line(e: &Event) -> String {
    let what = match &e.kind {
        EventKind::SupersededBy(n) => format!("superseded by #{n}"),
        EventKind::ConflictedBy(n) => format!("contradicted by #{n}"),
        EventKind::Redact { text_hash } if text_hash.is_empty() => "redacted".to_string(),
        EventKind::Redact { text_hash } => format!("redacted (old text hash {text_hash})"),
        k => format!("{k:?}").to_lowercase(),
    };
    format!(
        "{} {what} by {}{}",
        text::rfc3339_of(e.at_us),
        text::display_safe(&e.who),
        e.why
            .as_deref()
            .map(|w| format!(": {}", text::display_safe(w)))
            .unwrap_or_default()
    )
}

// A typed result: the CLI prints it as text (`Explained::render`, the library's) or JSON, and
// the MCP tool returns it as its structured content, its output schema derived from this type.
// Its fields are in the order the JSON has always had (the library's `Why`'s).
/// A summary's claims and the records each cites.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
pub struct Explained {
    /// The block (`lo`, `hi`).
    pub block: Object<Block>,
    /// Its summary: its text, when and by whom it was written, its inputs' hash.
    pub summary: Object<Summary>,
    /// Whether an input changed since it was written.
    pub stale: bool,
    /// Whether some claim cites nothing.
    pub uncited: bool,
    /// Each claim (its text and the ids it cites) with the lines of the records it cites.
    pub claims: Vec<(Object<Claim>, Vec<String>)>,
}

impl Explained {
    /// The claims of block `a.block`'s summary in `scope`, with their sources.
    pub fn call(store: &Store, scope: &str, a: &WhyArgs) -> Result<Explained, Error> {
        let b: Block = a.block.parse()?;
        let w = store.why(scope, b)?;
        Ok(Explained {
            block: Object(w.block),
            summary: Object(w.summary),
            stale: w.stale,
            uncited: w.uncited,
            claims: w.claims.into_iter().map(|(c, l)| (Object(c), l)).collect(),
        })
    }

    /// Its text: the summary's line, then each claim with the lines it cites.
    pub fn render(&self) -> String {
        let w = somna::Why {
            block: self.block.0,
            summary: self.summary.0.clone(),
            stale: self.stale,
            uncited: self.uncited,
            claims: self
                .claims
                .iter()
                .map(|(c, l)| (c.0.clone(), l.clone()))
                .collect(),
        };
        w.render()
    }
}

/// Prints the summary's claims and the records each cites.
pub fn why(cx: &mut Context<'_>, a: &WhyArgs) -> Result<u8, Error> {
    let w = Explained::call(&cx.store, cx.scope, a)?;
    cx.show(&w, |w| w.render())
}

/// The verb `show`.
pub const SHOW: Verb<ShowArgs> = Verb::reads(show);

/// The verb `why`.
pub const WHY: Verb<WhyArgs> = Verb::reads(why);
