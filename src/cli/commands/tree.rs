//! `pending`, `nap`, `forget` and `zoom`: the summary tree (the blocks waiting for a summary,
//! answering merge prompts, dropping summaries, opening a block).

use clap::Args;
#[cfg(feature = "mcp")]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use somna::text;
use somna::{Block, Error, MergePrompt, NapOutcome, PromptInput, Store, ZoomEntry};

use super::typed::Object;
use crate::cli::context::Context;
use crate::cli::output::{block_list, plural};
use crate::cli::progress::Progress;
use crate::cli::verb::Verb;

/// The arguments of `pending` (the CLI verb and the MCP tool).
#[derive(Args, Debug, Deserialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PendingArgs {
    /// At most this many blocks
    #[arg(long)]
    pub limit: Option<usize>,
}

/// The arguments of `nap` (the CLI verb and the MCP tool). The command line answers with
/// `LO-HI TEXT` or a file of lines (`--apply`); a tool call with `block` and `text` (as the
/// merge prompt says) or `answers`, a JSON list.
#[derive(Args, Debug, Default, Deserialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NapArgs {
    /// The block answered (as printed in the prompt)
    #[serde(default)]
    pub block: Option<String>,
    /// The one-line summary (on the command line, - reads it from stdin)
    #[serde(default)]
    pub text: Option<String>,
    /// Instead: up to this many independent merge prompts, to answer together
    #[arg(long, value_name = "N", conflicts_with_all = ["block", "apply"])]
    pub batch: Option<usize>,
    /// Store a file of `LO-HI<TAB>summary` lines in one transaction (- for stdin)
    #[arg(long, value_name = "FILE", conflicts_with = "block")]
    #[serde(skip)]
    pub apply: Option<String>,
    /// The answers to store, in one transaction. Without any, the next merge prompt is
    /// returned
    #[arg(skip)]
    #[serde(default)]
    pub answers: Vec<Answer>,
}

/// One answer to a merge prompt, in a tool call.
#[derive(Debug, Deserialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct Answer {
    /// The block answered, as the prompt names it (`LO-HI`).
    pub block: String,
    /// The one-line summary; cite the memories each claim rests on: `claim [#3, #7]`.
    pub summary: String,
}

/// The arguments of `zoom` (the CLI verb and the MCP tool).
#[derive(Args, Debug, Deserialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ZoomArgs {
    /// The block, as LO-HI (e.g. 16-31), as wake and merge prompts print it
    pub block: String,
}

/// The arguments of `forget` (the CLI verb and the MCP tool).
#[derive(Args, Debug, Deserialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct ForgetArgs {
    /// The block, as LO-HI (e.g. 2-3), as wake and merge prompts print it
    pub block: String,
}

// A typed result: the CLI prints it as text (`Pending::render`) or JSON, and the MCP tool
// returns it as its structured content, its output schema derived from this type (whose doc
// comment is the schema's description).
/// The blocks waiting for a summary (`LO-HI`), in the order `nap` offers them.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(transparent)]
pub struct Pending(pub Vec<String>);

impl Pending {
    /// The blocks waiting for a summary in `scope`, at most `a.limit`.
    pub fn call(store: &Store, scope: &str, a: &PendingArgs) -> Result<Pending, Error> {
        let p = store.pending(scope, a.limit)?;
        Ok(Pending(p.iter().map(ToString::to_string).collect()))
    }

    /// Its text: one block a line.
    pub fn render(&self) -> String {
        self.0.iter().map(|b| format!("{b}\n")).collect()
    }
}

/// Lists the blocks waiting for a summary, in the order they are offered.
pub fn pending(cx: &mut Context<'_>, a: &PendingArgs) -> Result<u8, Error> {
    let p = Pending::call(&cx.store, cx.scope, a)?;
    cx.show(&p, |p| p.render())
}

// A typed result: the CLI prints it as text or JSON, and the MCP tool returns it as its
// structured content (a batch under `result`), its output schema derived from this type.
/// What `nap` returns, by what it was given.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(untagged)]
pub enum NapResult {
    /// Given nothing: the merge due next (null when none is), and how many are pending.
    Next {
        /// The merge prompt due next, or null.
        next_merge: Option<Object<MergePrompt>>,
        /// Merges pending.
        pending: u64,
    },
    /// Given a batch size: up to that many independent merge prompts.
    Batch(Vec<Object<MergePrompt>>),
    /// Given answers (a tool's `answers`, the command line's `--apply`): what they stored, in
    /// one transaction.
    Answers {
        /// The blocks whose summary was stored (`LO-HI`).
        saved: Vec<String>,
        /// The blocks already settled (another answer came first), left as they were.
        settled: Vec<String>,
        /// The merge prompt due next, or null.
        next_merge: Option<Object<MergePrompt>>,
    },
    /// Given a block and its summary.
    Answer {
        /// The block (`LO-HI`).
        block: String,
        /// Whether the summary was stored (false: the block was already settled).
        saved: bool,
        /// Whether a claim of the stored summary cites no memory.
        uncited: bool,
        /// The merge prompt due next, or null.
        next_merge: Option<Object<MergePrompt>>,
    },
}

/// Prints merge prompts (`--batch N`), stores a file of answers (`--apply FILE`) or a tool's
/// `answers`, stores one answer (`LO-HI TEXT`), or prints the next merge prompt.
pub fn nap(cx: &mut Context<'_>, a: &NapArgs) -> Result<u8, Error> {
    if !a.answers.is_empty() {
        if a.batch.is_some() || a.block.is_some() || a.text.is_some() {
            return Err(Error::Invalid {
                what: "arguments",
                reason: "give answers, block and text, or batch: one of them".into(),
            });
        }
        return save_answers(cx, tool_answers(&a.answers)?);
    }
    if let Some(n) = a.batch {
        if a.block.is_some() || a.text.is_some() {
            return Err(Error::Invalid {
                what: "arguments",
                reason: "give block and text, or batch, not both".into(),
            });
        }
        return nap_batch(cx, n);
    }
    if let Some(file) = &a.apply {
        return save_answers(cx, parse_answers(&cx.read_input(file)?)?);
    }
    match (&a.block, &a.text) {
        (None, _) => next_merge(cx)?,
        (Some(_), None) => {
            return Err(Error::Invalid {
                what: "nap",
                reason: format!(
                    "give the summary: {} nap LO-HI \"<your line>\" (or - to read it from stdin)",
                    cx.prefix
                ),
            })
        }
        (Some(b), Some(t)) => nap_answer(cx, b, t)?,
    }
    Ok(0)
}

/// Prints the next merge prompt; with `--json`, `{next_merge, pending}` (the prompt or null, and
/// how many merges are due).
fn next_merge(cx: &mut Context<'_>) -> Result<(), Error> {
    let scope = cx.scope;
    let (prompt, pending) = cx
        .store
        .read(|r| Ok((r.next_prompt(scope)?, r.pending_count(scope)?)))?;
    if cx.json_wanted() {
        let next_merge = prompt.clone().map(Object);
        cx.emit(&NapResult::Next {
            next_merge,
            pending,
        })?;
    }
    if cx.text_wanted() {
        cx.print_prompt(prompt.as_ref(), pending, true)?;
    }
    Ok(())
}

/// The next merge prompt as `--json` shows it after a write (null when none is due; not read
/// when no JSON is wanted).
fn next_merge_json(cx: &Context<'_>) -> Result<Option<Object<MergePrompt>>, Error> {
    if !cx.json_wanted() {
        return Ok(None);
    }
    Ok(cx.store.next_prompt(cx.scope)?.map(Object))
}

/// Prints up to `n` independent merge prompts, to answer together with `--apply`.
fn nap_batch(cx: &mut Context<'_>, n: usize) -> Result<u8, Error> {
    let prompts = cx.store.read(|r| r.prompts(cx.scope, n.max(1)))?;
    if cx.json_wanted() {
        cx.emit(&NapResult::Batch(
            prompts.iter().cloned().map(Object).collect(),
        ))?;
    }
    if !cx.text_wanted() {
        return Ok(0);
    }
    let out = &mut *cx.out;
    if prompts.is_empty() {
        writeln!(out, "Nothing left to compress.")?;
        return Ok(0);
    }
    let limit = prompts.first().map(|p| p.entry_bytes).unwrap_or(280);
    writeln!(out, "{} independent merges. Summarize each block in ONE line of at most {limit} bytes that keeps what will still matter later and invents nothing.", prompts.len())?;
    for p in &prompts {
        writeln!(out, "== {}", p.block)?;
        for i in &p.inputs {
            let line = match i {
                PromptInput::Memory(mm) => somna::text::memory_line(mm),
                PromptInput::Summary { block, summary } => {
                    somna::text::summary_line(*block, summary)
                }
            };
            writeln!(out, "{line}")?;
        }
    }
    writeln!(
        out,
        "Write the answers to a file, one line per merge: LO-HI, a tab, the summary."
    )?;
    writeln!(out, "Run: {} nap --apply FILE", cx.prefix)?;
    Ok(0)
}

/// Stores answers in one transaction, then prints the next prompt.
fn save_answers(cx: &mut Context<'_>, entries: Vec<(Block, String)>) -> Result<u8, Error> {
    let what = format!("saving {} summaries (one transaction)", entries.len());
    let busy = Progress::start(cx.json, None, &what);
    let done = cx.store.nap_many(cx.scope, entries)?;
    drop(busy);
    let blocks = |outcome: NapOutcome| -> Vec<String> {
        done.iter()
            .filter(|d| d.1 == outcome)
            .map(|d| d.0.to_string())
            .collect()
    };
    let saved = blocks(NapOutcome::Saved);
    let settled = blocks(NapOutcome::AlreadySettled);
    let next_merge = next_merge_json(cx)?;
    cx.emit(&NapResult::Answers {
        saved: saved.clone(),
        settled: settled.clone(),
        next_merge,
    })?;
    if !cx.text_wanted() {
        return Ok(0);
    }
    writeln!(
        cx.out,
        "Saved {}{}.",
        plural(saved.len() as u64, "summary", "summaries"),
        block_list(&saved)
    )?;
    if !settled.is_empty() {
        writeln!(
            cx.out,
            "Already settled: {}{}.",
            plural(settled.len() as u64, "block", "blocks"),
            block_list(&settled)
        )?;
    }
    cx.print_next_prompt(true)?;
    Ok(0)
}

/// Parses `LO-HI<TAB>summary` lines (blank lines skipped).
fn parse_answers(input: &str) -> Result<Vec<(Block, String)>, Error> {
    let mut entries = Vec::new();
    for (i, line) in input.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let (b, s) = line.split_once('\t').ok_or_else(|| Error::Invalid {
            what: "batch",
            reason: format!("line {}: expected LO-HI, a tab, then the summary", i + 1),
        })?;
        // Through `Error`, so that the reason names what is invalid (`invalid block: ...`).
        let b: Block = b.parse().map_err(|e| Error::Invalid {
            what: "batch",
            reason: format!("line {}: {}", i + 1, Error::from(e)),
        })?;
        entries.push((b, s.to_string()));
    }
    Ok(entries)
}

/// A tool's answers as blocks and summaries.
fn tool_answers(answers: &[Answer]) -> Result<Vec<(Block, String)>, Error> {
    let mut entries = Vec::new();
    for (i, x) in answers.iter().enumerate() {
        // Through `Error`, so that the reason names what is invalid (`invalid block: ...`).
        let b: Block = x.block.parse().map_err(|e| Error::Invalid {
            what: "answers",
            reason: format!("answer {}: {}", i + 1, Error::from(e)),
        })?;
        entries.push((b, x.summary.clone()));
    }
    Ok(entries)
}

/// Stores one answer (`-` reads it from stdin); flags a summary whose claims cite nothing.
fn nap_answer(cx: &mut Context<'_>, block: &str, t: &str) -> Result<(), Error> {
    let b: Block = block.parse()?;
    let t = cx.text_arg(t)?;
    let napped = cx.store.nap_report(cx.scope, b, &t)?;
    let outcome = napped.outcome;
    let uncited = somna::text::uncited(&somna::text::parse_claims(&t));
    let saved = outcome != NapOutcome::AlreadySettled;
    cx.emit(&NapResult::Answer {
        block: b.to_string(),
        saved,
        uncited: saved && uncited,
        next_merge: napped.next_prompt.clone().map(Object),
    })?;
    if !cx.text_wanted() {
        return Ok(());
    }
    if outcome == NapOutcome::AlreadySettled {
        writeln!(cx.out, "{b} is already settled.")?;
    } else {
        writeln!(cx.out, "Saved {b}.")?;
        if uncited {
            writeln!(
                cx.out,
                "Flagged uncited: a claim cites no memory (write claims like: text [#3, #7])."
            )?;
        }
    }
    // Either way the note -> prompt -> nap loop goes on: the next prompt, or that none is left.
    cx.print_prompt(napped.next_prompt.as_ref(), napped.pending, true)
}

// A typed result: the CLI prints it as text (`Forgot::render`) or JSON, and the MCP tool returns
// it as its structured content, its output schema derived from this type.
/// The summaries `forget` dropped.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
pub struct Forgot {
    /// The blocks whose summary was dropped (`LO-HI`): the one named and every block built on
    /// it that had a summary.
    pub forgot: Vec<String>,
    /// The block named (not in the JSON).
    #[serde(skip)]
    #[cfg_attr(feature = "mcp", schemars(skip))]
    pub block: String,
}

impl Forgot {
    /// Drops the summary of block `a.block` in `scope` and of every block built on it.
    pub fn call(store: &Store, scope: &str, a: &ForgetArgs) -> Result<Forgot, Error> {
        let b: Block = a.block.parse()?;
        let removed = store.forget(scope, b)?;
        Ok(Forgot {
            forgot: removed.iter().map(ToString::to_string).collect(),
            block: b.to_string(),
        })
    }

    /// Its text: what was dropped and how to rebuild it (`prefix`: how to run somna).
    pub fn render(&self, prefix: &str) -> String {
        let n = self.forgot.len();
        if n == 0 {
            return format!("No summary to forget in {}.\n", self.block);
        }
        format!(
            "Forgot {n} summar{}: {}. The log is untouched; run `{prefix} nap` to rebuild.\n",
            if n == 1 { "y" } else { "ies" },
            self.forgot.join(", "),
        )
    }
}

/// Drops the summary of the block and of every block built on it.
pub fn forget(cx: &mut Context<'_>, a: &ForgetArgs) -> Result<u8, Error> {
    let f = Forgot::call(&cx.store, cx.scope, a)?;
    let prefix = cx.prefix.clone();
    cx.show(&f, |f| f.render(&prefix))
}

// A typed result: the CLI prints it as text (`Zoomed::render`) or JSON, and the MCP tool returns
// it (under `result`) as its structured content, its output schema derived from this type.
/// A block's two halves, each a memory, a summary (with its block) or missing (`type` says
/// which).
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(transparent)]
pub struct Zoomed {
    /// The halves, in order.
    pub entries: Vec<Object<ZoomEntry>>,
    /// Their lines, as the text prints them (not in the JSON).
    #[serde(skip)]
    #[cfg_attr(feature = "mcp", schemars(skip))]
    pub lines: Vec<String>,
}

impl Zoomed {
    /// The two halves of block `a.block` in `scope`.
    pub fn call(store: &Store, scope: &str, a: &ZoomArgs) -> Result<Zoomed, Error> {
        let b: Block = a.block.parse()?;
        let (entries, lines) = store.zoom_with_lines(scope, b)?;
        Ok(Zoomed {
            entries: entries.into_iter().map(Object).collect(),
            lines,
        })
    }

    /// Its text: one line a half.
    pub fn render(&self) -> String {
        self.lines.iter().map(|l| format!("{l}\n")).collect()
    }
}

/// Prints the block's two halves; past the end of the log, the way back to what exists.
pub fn zoom(cx: &mut Context<'_>, a: &ZoomArgs) -> Result<u8, Error> {
    let z = match Zoomed::call(&cx.store, cx.scope, a) {
        Err(e @ Error::OutOfRange { .. }) if !cx.both => {
            eprintln!(
                "somna: {}\nRun: {} wake",
                text::display_safe(&e.to_string()),
                cx.prefix
            );
            return Ok(u8::try_from(e.exit_code()).unwrap_or(2));
        }
        r => r?,
    };
    cx.show(&z, |z| z.render())
}

/// The verb `pending`.
pub const PENDING: Verb<PendingArgs> = Verb::reads(pending);

/// The verb `nap` (it reads when it stores no answer).
pub const NAP: Verb<NapArgs> = Verb::reads_when(nap, |a| {
    a.block.is_none() && a.apply.is_none() && a.answers.is_empty()
});

/// The verb `zoom`.
pub const ZOOM: Verb<ZoomArgs> = Verb::reads(zoom);

/// The verb `forget`.
pub const FORGET: Verb<ForgetArgs> = Verb::writes(forget);
