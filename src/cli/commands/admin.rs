//! `config`, `stats` and `verify`: the store's settings, its counts, and its integrity.

use clap::Args;
#[cfg(feature = "mcp")]
use schemars::JsonSchema;
use serde::Serialize;
use somna::text;
use somna::{Error, Report, ScopeStats, Store};

use crate::cli::context::Context;
use crate::cli::output::{json, plural};
use crate::cli::progress::Progress;
use crate::cli::verb::{NoArgs, Verb};

#[derive(Args, Debug)]
pub struct ConfigArgs {
    /// NAME=VALUE to set
    pub setting: Option<String>,
}

/// Sets one setting (`NAME=VALUE`), or prints them all.
pub fn config(cx: &mut Context<'_>, a: &ConfigArgs) -> Result<u8, Error> {
    if let Some(s) = &a.setting {
        let (name, value) = s.split_once('=').ok_or_else(|| Error::Invalid {
            what: "config",
            reason: format!(
                "expected NAME=VALUE, e.g. RAW_MAX=32; names: {}",
                somna::store::CONFIG_NAMES.join(", ")
            ),
        })?;
        let v = cx.store.set_config(name.trim(), value)?;
        writeln!(cx.out, "{}={v}", name.trim())?;
        return Ok(0);
    }
    let c = cx.store.config()?;
    if cx.json {
        json(cx.out, &c)?;
    } else {
        writeln!(
            cx.out,
            "ENTRY_BYTES={}\nRAW_MAX={}\nWAKE_LINES={}\nWAKE_BYTES={}\nSESSION_ARCHIVE_MAX={}",
            c.entry_bytes, c.raw_max, c.wake_lines, c.wake_bytes, c.session_archive_max
        )?;
    }
    Ok(0)
}

// A typed result: the CLI prints it as text (`Stats::render`) or JSON, and the MCP tool returns
// it as its structured content, its output schema derived from this type. The fields are in
// the order the JSON has always had (sorted: it was built as a `serde_json::Value`).
/// The store's counts: per scope, and in all.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
pub struct Stats {
    /// The file's bytes per memory (null for a server store).
    pub bytes_per_memory: Option<f64>,
    /// The file's size in bytes (null for a server store: the server's own tools tell it).
    pub file_bytes: Option<u64>,
    /// Memories in every scope.
    pub memories: u64,
    /// The counts of each scope.
    pub scopes: Vec<ScopeStats>,
    /// Where the store is, as the text names it (not in the JSON).
    #[serde(skip)]
    #[cfg_attr(feature = "mcp", schemars(skip))]
    pub at: String,
}

impl Stats {
    /// The counts per scope, the file size and the bytes per memory of `store`.
    pub fn call(store: &Store) -> Result<Stats, Error> {
        let stats = store.read(|r| r.stats())?;
        let file_bytes = match store.is_server() {
            true => None,
            false => Some(std::fs::metadata(store.path())?.len()),
        };
        let memories: u64 = stats.iter().map(|s| s.memories).sum();
        let per = file_bytes.map(|b| match memories {
            0 => 0.0,
            m => b as f64 / m as f64,
        });
        Ok(Stats {
            bytes_per_memory: per,
            file_bytes,
            memories,
            scopes: stats,
            at: crate::cli::output::path_shown(store.path()),
        })
    }

    /// Its text: a line per scope, then the file's (or the server store's) line.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for s in &self.scopes {
            out.push_str(&format!(
                "scope {}: {} memories, {} summaries, {} pending\n",
                s.scope, s.memories, s.summaries, s.pending
            ));
        }
        let (at, memories) = (&self.at, self.memories);
        out.push_str(&match (self.file_bytes, self.bytes_per_memory) {
            (Some(b), Some(per)) => {
                format!("file {at}: {b} bytes, {memories} memories, {per:.1} bytes per memory\n")
            }
            _ => format!("server store {at}: {memories} memories\n"),
        });
        out
    }
}

/// Prints the counts per scope, the file size and the bytes per memory (a server store has no
/// file: the server's own tools tell its sizes).
pub fn stats(cx: &mut Context<'_>) -> Result<u8, Error> {
    let stats = Stats::call(&cx.store)?;
    cx.show(&stats, |stats| stats.render())
}

/// `somna migrate`: the store's format before and after. Opening an older store read-write (as
/// this command does, `open::for_migrate`) already upgraded it; the command says what that did.
/// A store at this format is opened read-only: nothing is written.
pub fn migrate(cx: &mut Context<'_>) -> Result<u8, Error> {
    let m = cx.store.migrate()?;
    cx.emit(&m)?;
    if cx.text_wanted() {
        if m.from < m.to {
            writeln!(
                cx.out,
                "Upgraded the store from format {} to {}.",
                m.from, m.to
            )?;
        } else {
            writeln!(
                cx.out,
                "The store is at format {}: nothing to migrate.",
                m.to
            )?;
        }
    }
    Ok(0)
}

// A typed result: the library's `Report`, which the CLI prints as text (`render_report`) or
// JSON, and which the MCP tool returns as its structured content, its output schema derived from
// the same type.
/// Checks the file and every invariant of `store` (which needs the only handle to it), with a
/// spinner on a terminal unless `json` (the caller prints JSON only).
pub fn verified(store: &mut Store, json: bool) -> Result<Report, Error> {
    let busy = Progress::start(json, None, "verifying every page and record");
    let r = store.verify()?;
    drop(busy);
    Ok(r)
}

/// A report's text: a line per problem, then the count of problems or what was verified.
pub fn render_report(r: &Report) -> String {
    let mut out = String::new();
    for p in &r.problems {
        out.push_str(&format!("PROBLEM: {}\n", text::display_safe(p)));
    }
    if !r.problems.is_empty() {
        let n = r.problems.len() as u64;
        let found = plural(n, "problem found", "problems found");
        return format!("{out}{found}.\n");
    }
    let repaired = match r.engine_intact {
        true => "",
        false => " (redb repaired its allocator state)",
    };
    format!(
        "{out}OK: {}, {}, {}, {} verified{repaired}.\n",
        plural(r.scopes as u64, "scope", "scopes"),
        plural(r.memories, "memory", "memories"),
        plural(r.summaries, "summary", "summaries"),
        plural(r.sessions, "session", "sessions"),
    )
}

/// Checks the file and every invariant; prints the report, and exits 5 if anything is wrong.
pub fn verify(cx: &mut Context<'_>) -> Result<u8, Error> {
    let r = verified(&mut cx.store, cx.json)?;
    cx.emit(&r)?;
    if cx.text_wanted() {
        write!(cx.out, "{}", render_report(&r))?;
    }
    Ok(if r.problems.is_empty() { 0 } else { 5 })
}

/// The verb `config` (it reads when it sets nothing).
pub const CONFIG: Verb<ConfigArgs> = Verb::reads_when(config, |a| a.setting.is_none());

/// The verb `stats`.
pub const STATS: Verb<NoArgs> = Verb::reads(|cx, _| stats(cx));

/// The verb `verify`.
pub const VERIFY: Verb<NoArgs> = Verb::reads(|cx, _| verify(cx));

/// The verb `migrate`.
pub const MIGRATE: Verb<NoArgs> = Verb::writes(|cx, _| migrate(cx));
