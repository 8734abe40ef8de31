//! `config`, `stats` and `verify`: the store's settings, its counts, and its integrity.

use clap::Args;
use somna::text;
use somna::Error;

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
                somna::CONFIG_NAMES.join(", ")
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

/// Prints the counts per scope, the file size and the bytes per memory (a server store has no
/// file: the server's own tools tell its sizes).
pub fn stats(cx: &mut Context<'_>) -> Result<u8, Error> {
    let stats = cx.store.read(|r| r.stats())?;
    let file_bytes = match cx.store.is_server() {
        true => None,
        false => Some(std::fs::metadata(cx.store.path())?.len()),
    };
    let memories: u64 = stats.iter().map(|s| s.memories).sum();
    let per = file_bytes.map(|b| match memories {
        0 => 0.0,
        m => b as f64 / m as f64,
    });
    cx.emit(&serde_json::json!({
        "scopes": stats, "file_bytes": file_bytes, "memories": memories,
        "bytes_per_memory": per,
    }))?;
    if !cx.text_wanted() {
        return Ok(0);
    }
    for s in &stats {
        writeln!(
            cx.out,
            "scope {}: {} memories, {} summaries, {} pending",
            s.scope, s.memories, s.summaries, s.pending
        )?;
    }
    let at = crate::cli::output::path_shown(cx.store.path());
    match (file_bytes, per) {
        (Some(b), Some(per)) => writeln!(
            cx.out,
            "file {at}: {b} bytes, {memories} memories, {per:.1} bytes per memory"
        )?,
        _ => writeln!(cx.out, "server store {at}: {memories} memories")?,
    }
    Ok(0)
}

/// `somna migrate`: the store's format before and after. Opening the store read-write (as this
/// command does) already upgraded it; the command says what that did.
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

/// Checks the file and every invariant; prints the report, and exits 5 if anything is wrong.
pub fn verify(cx: &mut Context<'_>) -> Result<u8, Error> {
    let busy = Progress::start(cx.json, None, "verifying every page and record");
    let r = cx.store.verify()?;
    drop(busy);
    cx.emit(&r)?;
    if cx.text_wanted() {
        for p in &r.problems {
            writeln!(cx.out, "PROBLEM: {}", text::display_safe(p))?;
        }
        if r.ok() {
            writeln!(
                cx.out,
                "OK: {}, {}, {}, {} verified{}.",
                plural(r.scopes as u64, "scope", "scopes"),
                plural(r.memories, "memory", "memories"),
                plural(r.summaries, "summary", "summaries"),
                plural(r.sessions, "session", "sessions"),
                if r.engine_intact {
                    ""
                } else {
                    " (redb repaired its allocator state)"
                }
            )?;
        } else {
            writeln!(
                cx.out,
                "{}.",
                plural(r.problems.len() as u64, "problem found", "problems found")
            )?;
        }
    }
    Ok(if r.ok() { 0 } else { 5 })
}

/// The verb `config` (it reads when it sets nothing).
pub const CONFIG: Verb<ConfigArgs> = Verb::reads_when(config, |a| a.setting.is_none());

/// The verb `stats`.
pub const STATS: Verb<NoArgs> = Verb::reads(|cx, _| stats(cx));

/// The verb `verify`.
pub const VERIFY: Verb<NoArgs> = Verb::reads(|cx, _| verify(cx));

/// The verb `migrate`.
pub const MIGRATE: Verb<NoArgs> = Verb::writes(|cx, _| migrate(cx));
