//! A search's hits: the scopes ranked (each with its own statistics), merged by score, then
//! walked best first, reading only the records it shows: filters, the lifecycle, the offset,
//! the limit and the byte budget are applied on the way.

use crate::domain::block::Block;
use crate::domain::record::{ScopeMeta, Status};
use crate::domain::tokenize::{query_term_forms, QueryTerm};
use crate::error::{Error, Result};
use crate::memory::lifecycle::{marked_line, state_of};
use crate::memory::log::get_memory;
use crate::memory::search::prune::lexical_pruned;
use crate::memory::search::score::lexical;
use crate::memory::search::{vector, Hit, SearchMode, SearchQuery, SearchResult};
use crate::memory::summary::{get_summary, marked_summary_line};

use crate::storage::index::doc_block;
use crate::storage::tables::{stored_format, INDEX_FORMAT, STALE};
use crate::storage::txn::ReadTxn;
use crate::storage::vector_cache::VectorCache;

/// A ranked document: score, the scope's position in the query, document, matched terms.
type Ranked = (f64, usize, u64, u64);

/// Fails unless the store has its search index (format 2).
fn require_index(r: &ReadTxn) -> Result<()> {
    if stored_format(r.tx)?.unwrap_or(0) < INDEX_FORMAT {
        return Err(Error::Unsupported(
            "this store was written by an older somna and has no search index yet: run `somna reindex` (or open it once read-write)".into(),
        ));
    }
    Ok(())
}

/// One scope's ranking in the query's mode, and the bound of a pruned one: with `need`, a
/// lexical ranking may leave out documents scoring at most the bound
/// ([`crate::memory::search::prune`]).
fn rank_scope(
    r: &ReadTxn,
    cache: &VectorCache,
    meta: &ScopeMeta,
    terms: &[QueryTerm],
    q: &SearchQuery,
    need: Option<usize>,
) -> Result<(vector::Ranking, Option<f64>)> {
    let mode = q.effective_mode();
    if let (SearchMode::Lexical, Some(need)) = (mode, need) {
        if let Some(p) = lexical_pruned(r.tx, meta.id, meta.count, terms, &q.params, need)? {
            return Ok((p.scores.into_iter().collect(), Some(p.bound)));
        }
    }
    let lex = match mode {
        SearchMode::Vector => Vec::new(),
        _ => lexical(r.tx, meta.id, meta.count, terms, &q.params)?,
    };
    let Some(v) = q.vector.as_deref().filter(|_| mode != SearchMode::Lexical) else {
        return Ok((lex, None));
    };
    let space = match &q.vector_model {
        Some(m) => vector::Space::Model(m),
        None => vector::Space::Caller,
    };
    let top = match mode {
        SearchMode::Vector => Vec::new(),
        _ => vector::words_top(&lex),
    };
    let exact: Vec<u64> = top.iter().map(|&(d, _)| d).collect();
    let near = vector::nearest_cached(r.tx, cache, meta.id, space, v, &exact)?;
    if near.is_empty() && mode == SearchMode::Hybrid {
        // Nothing to fuse with (a scope the backfill has not reached): the words' own scores.
        return Ok((lex, None));
    }
    Ok((
        match mode {
            SearchMode::Vector => vector::as_scored(&near),
            _ => vector::fuse(&lex, &top, &near, q.params.words_weight),
        },
        None,
    ))
}

/// Runs the query over `scopes` in one snapshot (each must be readable). With
/// [`crate::search::RankParams::prune`], a lexical query is ranked pruned first and exhaustively when
/// the walk passes the pruned rankings' bound (docs/design.md, section 12.6.1).
pub(crate) fn search(
    r: &ReadTxn,
    cache: &VectorCache,
    scopes: &[String],
    q: &SearchQuery,
) -> Result<SearchResult> {
    check(q)?;
    require_index(r)?;
    if q.mode == Some(SearchMode::Vector) && q.vector.is_none() {
        // Ranked by nothing, it would answer "No hit." as if nothing matched.
        return Err(Error::invalid(
            "vector",
            "the vector mode ranks by a query vector, and none was given",
        ));
    }
    let terms = query_term_forms(&q.text);
    if terms.is_empty() && (q.vector.is_none() || q.effective_mode() == SearchMode::Lexical) {
        return Err(Error::invalid("query", "there is no word to look for"));
    }
    let need = q.offset.saturating_add(q.limit).saturating_add(1);
    // Filters skip candidates below the top: those queries rank exhaustively at once.
    let filtered = q.kind.is_some() || q.since_us.is_some() || q.until_us.is_some();
    if q.params.prune && q.effective_mode() == SearchMode::Lexical && !filtered {
        let (found, complete) = ranked(r, cache, scopes, q, &terms, Some(need))?;
        if complete {
            return Ok(found);
        }
    }
    Ok(ranked(r, cache, scopes, q, &terms, None)?.0)
}

/// The checks of a query that need no store: its page and its parameters.
pub(crate) fn check(q: &SearchQuery) -> Result<()> {
    // A page that can hold no hit would name its own offset as the next one: a client
    // following the cursor would ask again forever.
    if q.limit == 0 {
        return Err(Error::invalid("limit", "it must be at least 1"));
    }
    if q.max_bytes == 0 {
        return Err(Error::invalid("byte budget", "it must be at least 1"));
    }
    q.params.validate()
}

/// The error for a byte budget that cannot hold the next hit's line: the page would be empty and
/// name its own offset as the next one.
fn too_small(line: usize, budget: usize) -> Error {
    Error::invalid(
        "byte budget",
        format!(
            "the next hit's line takes {line} bytes, more than the budget of {budget}; raise it"
        ),
    )
}

/// Ranks `scopes` (pruned to the top `need` when given) and walks the candidates best first;
/// `false` when the walk reached a score at or below a pruned scope's bound before it was done,
/// and the hits may then miss documents left out (never with `need` absent).
fn ranked(
    r: &ReadTxn,
    cache: &VectorCache,
    scopes: &[String],
    q: &SearchQuery,
    terms: &[QueryTerm],
    need: Option<usize>,
) -> Result<(SearchResult, bool)> {
    let mut metas = Vec::with_capacity(scopes.len());
    let mut ranked: Vec<Ranked> = Vec::new();
    let mut bound: Option<f64> = None;
    for (i, s) in scopes.iter().enumerate() {
        let meta = r.scope_meta(s)?;
        if let Some(m) = &meta {
            let (scored, b) = rank_scope(r, cache, m, terms, q, need)?;
            if let Some(b) = b {
                bound = Some(bound.map_or(b, |x: f64| x.max(b)));
            }
            ranked.extend(scored.into_iter().map(|(doc, s)| (s.score, i, doc, s.mask)));
        }
        metas.push(meta);
    }
    let mut out = SearchResult {
        hits: Vec::new(),
        candidates: ranked.len() as u64,
        next_offset: None,
        embedded_by: None,
        fallback: None,
    };
    let (mut skipped, mut bytes) = (0usize, 0usize);
    let first = q.offset.saturating_add(q.limit).saturating_add(1);
    let mut done = false;
    for (score, i, doc, mask) in BestFirst::new(ranked, first) {
        if bound.is_some_and(|b| score <= b) {
            return Ok((out, false));
        }
        let (Some(Some(meta)), Some(scope)) = (metas.get(i), scopes.get(i)) else {
            continue;
        };
        let Some((line, inactive)) = shown(r, meta, doc, q)? else {
            continue;
        };
        if skipped < q.offset {
            skipped += 1;
            continue;
        }
        if out.hits.len() >= q.limit || bytes + line.len() >= q.max_bytes {
            if out.hits.is_empty() {
                return Err(too_small(line.len() + 1, q.max_bytes));
            }
            out.next_offset = Some(q.offset + out.hits.len());
            done = true;
            break;
        }
        bytes += line.len() + 1;
        let terms = (0..terms.len())
            .filter(|b| mask & (1u64 << b) != 0)
            .filter_map(|b| terms.get(b).map(|t| t.term.clone()))
            .collect();
        let block = doc_block(doc)?;
        let id = (block.size() == 1).then_some(block.lo());
        out.hits.push(Hit {
            scope: scope.clone(),
            block,
            id,
            line,
            score,
            terms,
            inactive,
        });
    }
    Ok((out, done || bound.is_none()))
}

/// Best first; among equals, the older document (a recency tie-break did not help held out:
/// crate::domain::rank), then the scope named first. A total order: no two candidates are equal
/// (a document is ranked once per scope).
fn better(a: &Ranked, b: &Ranked) -> std::cmp::Ordering {
    b.0.total_cmp(&a.0).then(a.2.cmp(&b.2)).then(a.1.cmp(&b.1))
}

/// The candidates in [`better`]'s order, sorted only as far as the walk reads: a search shows
/// `offset + limit` hits of often thousands of candidates, and sorting them all was a third of
/// a query's instructions. Each step selects the next window (`select_nth_unstable_by`, linear)
/// and sorts only it, the window growing fourfold when a walk passes it (filters and the
/// lifecycle skip candidates). The order is total, so the sequence is the full sort's exactly.
struct BestFirst {
    ranked: Vec<Ranked>,
    next: usize,
    sorted: usize,
    window: usize,
}

impl BestFirst {
    fn new(ranked: Vec<Ranked>, first: usize) -> Self {
        BestFirst {
            ranked,
            next: 0,
            sorted: 0,
            window: first.max(16),
        }
    }
}

impl Iterator for BestFirst {
    type Item = Ranked;

    fn next(&mut self) -> Option<Ranked> {
        if self.next == self.sorted && self.sorted < self.ranked.len() {
            let rest = self.ranked.get_mut(self.sorted..)?;
            let n = self.window.min(rest.len());
            if n < rest.len() {
                rest.select_nth_unstable_by(n, better);
            }
            rest.get_mut(..n)?.sort_unstable_by(better);
            self.sorted += n;
            self.window = self.window.saturating_mul(4);
        }
        let item = self.ranked.get(self.next).copied();
        self.next += 1;
        item
    }
}

/// The line of document `doc` and whether it is inactive, or `None` when the query's filters
/// or the lifecycle leave it out.
fn shown(
    r: &ReadTxn,
    meta: &ScopeMeta,
    doc: u64,
    q: &SearchQuery,
) -> Result<Option<(String, bool)>> {
    let b = doc_block(doc)?;
    if b.hi() > meta.count {
        return Ok(None);
    }
    if b.size() > 1 {
        return summary_shown(r, meta, b, q);
    }
    let m = get_memory(r.tx, meta.id, b.lo())?;
    if q.kind.is_some_and(|k| k != m.kind)
        || q.since_us.is_some_and(|s| m.observed_us < s)
        || q.until_us.is_some_and(|u| m.observed_us >= u)
    {
        return Ok(None);
    }
    let st = state_of(r.tx, meta.id, &m)?;
    let inactive = matches!(
        st.status,
        Status::Retracted | Status::Superseded | Status::Deprecated
    );
    if (inactive && !q.include_inactive) || st.redacted {
        return Ok(None);
    }
    Ok(Some((marked_line(&m, &st), inactive)))
}

/// A summary's line, unless a kind is asked (summaries have none) or its block lies wholly
/// outside the dates asked.
fn summary_shown(
    r: &ReadTxn,
    meta: &ScopeMeta,
    b: Block,
    q: &SearchQuery,
) -> Result<Option<(String, bool)>> {
    if q.kind.is_some() {
        return Ok(None);
    }
    if let Some(s) = q.since_us {
        if get_memory(r.tx, meta.id, b.hi().saturating_sub(1))?.observed_us < s {
            return Ok(None);
        }
    }
    if let Some(u) = q.until_us {
        if get_memory(r.tx, meta.id, b.lo())?.observed_us >= u {
            return Ok(None);
        }
    }
    let Some(s) = get_summary(r.tx, meta.id, b)? else {
        return Ok(None);
    };
    let stale = STALE.contains(r.tx, (meta.id, b.level(), b.lo()))?;
    Ok(Some((marked_summary_line(b, &s, stale), false)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The walk's order is the full sort's, for every first window and candidate count, with
    /// tied, NaN and infinite scores.
    #[test]
    fn best_first_yields_the_full_sort() {
        let mut next = crate::domain::test_rng::xorshift(0x2545_F491_4F6C_DD1Du64);
        for n in [0usize, 1, 2, 15, 16, 17, 100, 1_000] {
            let ranked: Vec<Ranked> = (0..n)
                .map(|k| {
                    let score = match next() % 10 {
                        0 => f64::NAN,
                        1 => f64::INFINITY,
                        2 => -0.0,
                        _ => (next() % 7) as f64 / 3.0,
                    };
                    // A document once per scope, the same documents in three scopes.
                    (score, k % 3, k as u64 / 3, next())
                })
                .collect();
            let mut want = ranked.clone();
            want.sort_by(better);
            for first in [0usize, 1, 5, 16, 64, 5_000] {
                let got: Vec<Ranked> = BestFirst::new(ranked.clone(), first).collect();
                assert_eq!(got.len(), want.len());
                for (g, w) in got.iter().zip(&want) {
                    assert_eq!(g.0.to_bits(), w.0.to_bits(), "n {n} first {first}");
                    assert_eq!((g.1, g.2, g.3), (w.1, w.2, w.3), "n {n} first {first}");
                }
            }
        }
    }
}
