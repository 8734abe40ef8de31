//! Ranked search over one scope or several: the query ([`SearchQuery`]), its result
//! ([`SearchResult`]), and [`crate::Store::search`]. Each scope is ranked with its own
//! statistics ([`score`]), fused with the vector ranking when the query carries a vector
//! ([`vector`]), and the scopes are merged by score; filters and the lifecycle are applied while
//! taking the top hits, so only the records shown are read. The index itself is
//! [`crate::storage::index`]. docs/design.md, section 12.

use serde::Serialize;

use crate::domain::block::Block;
use crate::domain::record::Kind;
use crate::error::{Error, Result};
use crate::storage::store::Store;

pub mod embed;
pub mod prune;
pub mod score;
pub mod take;
pub mod texts;
pub mod vector;

/// How a query ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SearchMode {
    /// BM25 over the words (the default without a vector).
    Lexical,
    /// The lexical ranking rescored with the vectors' (the default with a vector, or with the
    /// store's embedder): [`vector::fuse()`].
    Hybrid,
    /// Cosine similarity to the query's vector only.
    Vector,
}

crate::domain::record::names!(SearchMode, "mode", Lexical => "lexical", Hybrid => "hybrid",
    Vector => "vector");

/// Ranking parameters. The defaults are the recipe measured on LoCoMo
/// ([`crate::domain::rank`]); setting them is for benchmarks that choose them by
/// cross-validation.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RankParams {
    /// BM25's term-frequency saturation.
    pub k1: f64,
    /// BM25's length normalization.
    pub b: f64,
    /// Share of the best neighbouring memory's direct score added to a memory's (0: none).
    pub neighbour_weight: f64,
    /// How many neighbours on each side contribute.
    pub neighbours: u32,
    /// Query-term coverage boost: a memory's direct score is multiplied by `1 + coverage *
    /// (query terms it contains / query terms)` (0: none).
    pub coverage: f64,
    /// The words' share of a hybrid score (the vectors' is the rest): 0 to 1
    /// ([`vector::fuse()`]).
    pub words_weight: f64,
    /// Rank a lexical query pruned to its top hits (docs/design.md, section 12.6.1): the same
    /// hits and scores, `SearchResult::candidates` then counting the documents scored. Off by
    /// default: until the index stores its term bounds it measured slower (issue 50).
    pub prune: bool,
}

/// The most neighbours on each side a search may propagate from (each costs a map probe per
/// scored memory).
pub const MAX_NEIGHBOURS: u32 = 16;

impl RankParams {
    /// Refuses parameters no ranking could use: a non-finite or negative number, or more than
    /// [`MAX_NEIGHBOURS`] neighbours.
    pub fn validate(&self) -> Result<()> {
        let numbers = [
            ("k1", self.k1),
            ("b", self.b),
            ("neighbour weight", self.neighbour_weight),
            ("coverage", self.coverage),
            ("words weight", self.words_weight),
        ];
        if let Some((name, v)) = numbers.iter().find(|(_, v)| !v.is_finite() || *v < 0.0) {
            return Err(Error::invalid(
                "rank parameters",
                format!("{name} is {v}; it must be a finite number of at least 0"),
            ));
        }
        if self.words_weight > 1.0 {
            return Err(Error::invalid(
                "rank parameters",
                format!("words weight is {}; at most 1", self.words_weight),
            ));
        }
        if self.neighbours > MAX_NEIGHBOURS {
            let reason = format!(
                "{} neighbours on each side; at most {MAX_NEIGHBOURS}",
                self.neighbours
            );
            return Err(Error::invalid("rank parameters", reason));
        }
        Ok(())
    }
}

impl Default for RankParams {
    fn default() -> Self {
        use crate::domain::rank;
        RankParams {
            k1: rank::K1,
            b: rank::B,
            neighbour_weight: rank::NEIGHBOUR_WEIGHT,
            neighbours: u32::try_from(rank::NEIGHBOUR_RADIUS).unwrap_or(u32::MAX),
            coverage: rank::COVERAGE,
            words_weight: vector::WORDS_WEIGHT,
            prune: false,
        }
    }
}

/// A search query. Only the text is required (or a vector, in vector mode).
#[derive(Debug, Clone)]
pub struct SearchQuery {
    /// The words to look for (any of them; more matches rank higher).
    pub text: String,
    /// Show at most this many hits (default 10); 0 is refused.
    pub limit: usize,
    /// Skip this many hits first: the cursor of the next page ([`SearchResult::next_offset`]).
    pub offset: usize,
    /// Only memories observed at or after this time (microseconds); summaries whose block ends
    /// before it are left out.
    pub since_us: Option<i64>,
    /// Only memories observed before this time (microseconds).
    pub until_us: Option<i64>,
    /// Only memories of this kind (summaries are left out).
    pub kind: Option<Kind>,
    /// Byte budget of the shown lines (default 20,000), as recall's; one that cannot hold the
    /// first hit's line is refused, never answered with an empty page that names its own offset.
    pub max_bytes: usize,
    /// Also rank retracted, superseded and deprecated memories (marked).
    pub include_inactive: bool,
    /// The query's embedding, for hybrid or vector ranking.
    pub vector: Option<Vec<f32>>,
    /// Which vectors [`SearchQuery::vector`] is compared with: `None`, those the callers stored
    /// with their memories; a model's name, those the store's embedder made with it (the store
    /// sets it when its embedder embeds a query that came without a vector).
    pub vector_model: Option<String>,
    /// The ranking; default lexical, or hybrid when a vector is given.
    pub mode: Option<SearchMode>,
    /// Ranking parameters (advanced: benchmarks).
    pub params: RankParams,
}

impl SearchQuery {
    /// A query for `text` with the defaults.
    pub fn new(text: impl Into<String>) -> Self {
        SearchQuery {
            text: text.into(),
            limit: 10,
            offset: 0,
            since_us: None,
            until_us: None,
            kind: None,
            max_bytes: 20_000,
            include_inactive: false,
            vector: None,
            vector_model: None,
            mode: None,
            params: RankParams::default(),
        }
    }

    /// The mode in force.
    pub fn effective_mode(&self) -> SearchMode {
        self.mode.unwrap_or(if self.vector.is_some() {
            SearchMode::Hybrid
        } else {
            SearchMode::Lexical
        })
    }
}

/// One hit: a memory, or a summary, which names its block.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct Hit {
    /// The scope it is in.
    pub scope: String,
    /// The memory (a block of size 1) or the summarized block.
    #[serde(serialize_with = "block_str")]
    #[cfg_attr(feature = "schemars", schemars(with = "String"))]
    pub block: Block,
    /// Its id, for a memory.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub id: Option<u64>,
    /// The line as shown: `#id date [markers] text`, or `#lo-hi text` for a summary.
    pub line: String,
    /// The score it ranked by (higher first).
    pub score: f64,
    /// The query's terms it contains.
    pub terms: Vec<String>,
    /// Retracted, superseded or deprecated (only with [`SearchQuery::include_inactive`]).
    pub inactive: bool,
}

fn block_str<S: serde::Serializer>(b: &Block, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.collect_str(b)
}

/// What a search found.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct SearchResult {
    /// The hits, best first.
    pub hits: Vec<Hit>,
    /// Documents that matched the query, before filters (all scopes searched).
    pub candidates: u64,
    /// When more hits follow: the offset of the next page, for [`SearchQuery::offset`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
    /// The model of the store's embedder that embedded the query, when it did (the ranking
    /// then fused the words with its vectors).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embedded_by: Option<String>,
    /// Why the ranking fell back to the words alone: the store has an embedder and it did not
    /// answer in time (or answered wrong).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fallback: Option<String>,
}

impl SearchResult {
    /// Renders the text output: each hit's line (prefixed by its scope with `with_scope`), then
    /// `N hits.`, `Best N hits; more with --offset K.` or `No hit.`
    pub fn render(&self, with_scope: bool) -> String {
        let mut out = String::new();
        for h in &self.hits {
            if with_scope {
                out.push_str(&h.scope);
                out.push(' ');
            }
            out.push_str(&h.line);
            out.push('\n');
        }
        let n = self.hits.len();
        let s = if n == 1 { "" } else { "s" };
        match (n, self.next_offset) {
            (0, None) => out.push_str("No hit.\n"),
            (_, None) => out.push_str(&format!("{n} hit{s}.\n")),
            (_, Some(k)) => out.push_str(&format!("Best {n} hit{s}; more with --offset {k}.\n")),
        }
        if let Some(why) = &self.fallback {
            out.push_str(&format!("Ranked by the words alone: {why}.\n"));
        }
        out
    }
}

impl Store {
    /// Ranks the memories and summaries of `scope` against the query; see [`SearchQuery`].
    /// A store of format 1 (not upgraded yet, open read-only) answers [`Error::Unsupported`]
    /// asking for `somna reindex`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = somna::Store::create(dir.path().join("m.redb")).unwrap();
    /// store.note("default", somna::NewMemory::new("Caroline went to the support group")).unwrap();
    /// store.note("default", somna::NewMemory::new("the build uses cargo")).unwrap();
    /// let r = store.search("default", &somna::SearchQuery::new("support group")).unwrap();
    /// assert_eq!(r.hits[0].id, Some(0));
    /// ```
    pub fn search(&self, scope: &str, q: &SearchQuery) -> Result<SearchResult> {
        self.search_scopes(&[scope.to_string()], q)
    }

    /// [`Store::search_scopes`] over every scope the principal may read (`search --all`),
    /// resolved in the same read.
    pub fn search_all(&self, q: &SearchQuery) -> Result<SearchResult> {
        let (q, fallback) = self.embedded(None, q)?;
        let q = q.as_ref();
        let (_, mut found) = self.audited_as(
            "search",
            |r| {
                let scopes = r.scopes()?;
                let found = take::search(r, self.vector_cache(), &scopes, q)?;
                Ok((scopes, found))
            },
            |(scopes, found)| (scopes.join(","), search_audit(found)),
        )?;
        noted(&mut found, q, fallback);
        Ok(found)
    }

    /// The query as ranked: when the store has an embedder and the query came without a vector
    /// (and does not ask for the words alone), with the embedder's vector of its text, and
    /// otherwise as it came; beside it why the embedder gave none (the ranking is then the
    /// words', or in vector mode [`Error::Embedder`]). Nothing leaves the process before a
    /// read has found the query valid and every scope searched (`scopes`; `None`: those the
    /// principal may read) readable: a principal refused a scope, or a query refused, costs no
    /// call to the embedder and shows it nothing. The read ends before the call, so that no
    /// snapshot is held while the embedder answers.
    fn embedded<'q>(
        &self,
        scopes: Option<&[String]>,
        q: &'q SearchQuery,
    ) -> Result<(std::borrow::Cow<'q, SearchQuery>, Option<String>)> {
        use std::borrow::Cow;
        if q.vector.is_some() || q.mode == Some(SearchMode::Lexical) || q.text.trim().is_empty() {
            return Ok((Cow::Borrowed(q), None));
        }
        let embedder = self.read(|r| {
            take::check(q)?;
            for s in scopes.unwrap_or_default() {
                r.scope_meta(s)?;
            }
            embed::read_embedder(r.tx)
        })?;
        let Some(e) = embedder else {
            return Ok((Cow::Borrowed(q), None));
        };
        match embed::query_vector(&e, &q.text) {
            Ok(v) => {
                let mut with = q.clone();
                with.vector = Some(v);
                with.vector_model = Some(e.model);
                with.mode = Some(q.mode.unwrap_or(SearchMode::Hybrid));
                Ok((Cow::Owned(with), None))
            }
            Err(why) if q.mode == Some(SearchMode::Vector) => Err(Error::Embedder(why)),
            Err(why) => Ok((Cow::Borrowed(q), Some(why))),
        }
    }

    /// [`Store::search`] over several scopes in one snapshot: each ranked with its own
    /// statistics, merged by score. Every scope must be readable by the principal (else
    /// [`Error::Denied`]); pass the readable ones (`ReadTxn::scopes`) to search them all.
    pub fn search_scopes(&self, scopes: &[String], q: &SearchQuery) -> Result<SearchResult> {
        if scopes.is_empty() {
            return Err(Error::invalid("scope", "no scope to search"));
        }
        crate::domain::text::check_scope_count(scopes.len())?;
        // A scope named twice is ranked once.
        let mut seen = std::collections::HashSet::new();
        let scopes: Vec<String> = scopes.iter().filter(|s| seen.insert(*s)).cloned().collect();
        let scopes = scopes.as_slice();
        let (q, fallback) = self.embedded(Some(scopes), q)?;
        let q = q.as_ref();
        let mut found = self.audited(
            "search",
            &scopes.join(","),
            |r| take::search(r, self.vector_cache(), scopes, q),
            search_audit,
        )?;
        noted(&mut found, q, fallback);
        Ok(found)
    }
}

/// Names in `found` the model that embedded the query, or why the ranking fell back to words.
fn noted(found: &mut SearchResult, q: &SearchQuery, fallback: Option<String>) {
    found.embedded_by = q.vector_model.clone().filter(|_| q.vector.is_some());
    found.fallback = fallback;
}

/// The items an audit record of a search names: `scope #block` per hit.
fn search_audit(r: &SearchResult) -> Vec<String> {
    r.hits
        .iter()
        .map(|h| format!("{} #{}", h.scope, h.block))
        .collect()
}

impl Store {
    /// Rebuilds the search index of every scope from the log and the tree, in one write
    /// transaction, and marks the store format 2 (`somna reindex`; the first read-write open of
    /// a format-1 store does the same). Admin only. `progress(done, total)` counts scopes.
    /// Returns the number of documents indexed.
    pub fn reindex(&self, progress: &mut dyn FnMut(u64, u64)) -> Result<u64> {
        self.write(|tx| {
            tx.require_admin("reindex")?;
            crate::storage::index::build::rebuild_all(&mut *tx.tx, progress)
        })
    }
}

impl crate::storage::txn::ReadTxn<'_> {
    /// What the search index holds for `scope`, logically (every posting, every document's
    /// length), tail and blocks together: for tests and diagnostics.
    pub fn search_index(&self, scope: &str) -> Result<crate::storage::index::build::Content> {
        match self.scope_meta(scope)? {
            Some(m) => Ok(crate::storage::index::build::stored(self.tx, m.id)?.0),
            None => Ok(Default::default()),
        }
    }
}
