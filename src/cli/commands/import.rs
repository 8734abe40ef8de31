//! `import` and `export`: dated lines, an OptMem store or a JSON Lines export in; JSON Lines out.
//! `copy`: a whole store to another backend (a file to a server and back), checked.

use std::path::PathBuf;

use clap::Args;
use somna::Error;

use crate::cli::context::Context;
use crate::cli::input::read_input;
use crate::cli::output::plural;
use crate::cli::progress::{CountLines, Progress};
use crate::cli::verb::{outside_store, NoArgs, Verb};

#[derive(Args, Debug)]
pub struct CopyArgs {
    /// The store to copy: a file or a postgresql:// URL
    pub src: PathBuf,
    /// The store to create and fill: a file or a postgresql:// URL (it must be new or empty)
    pub dst: PathBuf,
}

#[derive(Args, Debug)]
pub struct ImportArgs {
    /// A file of `YYYY-MM-DD text` lines, or - for stdin
    #[arg(required_unless_present_any = ["optmem", "jsonl"])]
    pub file: Option<String>,
    /// Migrate an OptMem directory (LOG.txt and TREE/) into the (empty) scope
    #[arg(long, value_name = "DIR", conflicts_with_all = ["file", "jsonl"])]
    pub optmem: Option<PathBuf>,
    /// Import a JSON Lines export (- for stdin)
    #[arg(long, value_name = "FILE", conflicts_with = "file")]
    pub jsonl: Option<String>,
}

/// Imports what the arguments name and says how much.
pub fn import(cx: &mut Context<'_>, a: &ImportArgs) -> Result<u8, Error> {
    if let Some(dir) = &a.optmem {
        let busy = Progress::start(
            cx.json,
            None,
            "importing the OptMem store (one transaction)",
        );
        let src = cx.store.import_optmem(cx.scope, dir)?;
        drop(busy);
        write!(
            cx.out,
            "Imported {} memories and {} summaries from {}",
            src.memories.len(),
            src.summaries.len(),
            crate::cli::output::path_shown(dir)
        )?;
        if src.torn_bytes > 0 {
            write!(
                cx.out,
                " (ignored a torn last record of {} bytes)",
                src.torn_bytes
            )?;
        }
        writeln!(cx.out, ".")?;
    } else if let Some(f) = &a.jsonl {
        let (input, busy) = importing(cx.json, f)?;
        let r = cx.store.import_jsonl(&mut input.as_bytes())?;
        drop(busy);
        writeln!(
            cx.out,
            "Imported {} and {} in {}.",
            plural(r.memories, "memory", "memories"),
            plural(r.summaries, "summary", "summaries"),
            plural(r.scopes as u64, "scope", "scopes")
        )?;
    } else if let Some(f) = &a.file {
        let (input, busy) = importing(cx.json, f)?;
        let n = cx.store.import_lines(cx.scope, &input)?;
        drop(busy);
        writeln!(
            cx.out,
            "Imported {} memories, #{} to #{}.",
            n.count,
            n.first,
            n.first + n.count - 1
        )?;
    }
    Ok(0)
}

/// The input `f` names (a file, or - for stdin), with a progress line for importing its lines.
fn importing(json: bool, f: &str) -> Result<(String, Progress), Error> {
    let input = read_input(f)?;
    let what = format!(
        "importing {} lines (one transaction)",
        input.lines().count()
    );
    let busy = Progress::start(json, None, &what);
    Ok((input, busy))
}

/// Writes every scope, memory and summary as JSON Lines.
pub fn export(cx: &mut Context<'_>) -> Result<u8, Error> {
    let progress = Progress::start(cx.json, None, "exporting: lines");
    let mut out = CountLines {
        inner: cx.out,
        progress: &progress,
    };
    cx.store.export(&mut out)?;
    Ok(0)
}

/// Copies the store SRC into DST (created if missing, refused unless empty), then checks that
/// both give the same export and the same rows. Runs without `--db`: it names both stores.
pub fn copy(
    opts: somna::Options,
    json: bool,
    a: &CopyArgs,
    out: &mut dyn std::io::Write,
) -> Result<u8, Error> {
    for p in [&a.src, &a.dst] {
        somna::store::check_location(p)?;
        if somna::store::url_of(p).is_none() {
            crate::cli::open::check_store_file(p)?;
        }
    }
    let shown = |p: &std::path::Path| match somna::store::url_of(p) {
        Some(u) => somna::text::display_safe(&somna::store::without_password(u)).into_owned(),
        None => crate::cli::output::path_shown(
            &std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()),
        ),
    };
    let (from, to) = (shown(&a.src), shown(&a.dst));
    if from == to {
        return Err(Error::Invalid {
            what: "copy",
            reason: format!("the source and the destination are the same store ({from})"),
        });
    }
    let src = crate::cli::open::open_store(&a.src, opts.clone(), true)?;
    let dst = somna::Store::create_with(&a.dst, opts)?;
    let bar = Progress::start(json, None, "copying: rows");
    let mut done = 0u64;
    let copied = src.copy_into(&dst, &mut |n| {
        bar.inc(n.saturating_sub(done));
        done = done.max(n);
    })?;
    drop(bar);
    if json {
        crate::cli::output::json(
            out,
            &serde_json::json!({"from": from, "to": to, "copied": copied}),
        )?;
    } else {
        writeln!(
            out,
            "Copied {} from {from} to {to}; both give the same export ({}, {} bytes) and the same rows.",
            plural(copied.rows, "row", "rows"),
            plural(copied.export_lines, "line", "lines"),
            copied.export_bytes
        )?;
    }
    dst.close()?;
    src.close()?;
    Ok(0)
}

/// The verb `import`.
pub const IMPORT: Verb<ImportArgs> = Verb::writes(import);

/// The verb `export`.
pub const EXPORT: Verb<NoArgs> = Verb::reads(|cx, _| export(cx));

/// The verb `copy` (it opens its own two stores: `somna::cli` runs it).
pub const COPY: Verb<CopyArgs> = Verb::writes(outside_store);
