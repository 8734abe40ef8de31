//! One scope's lexical ranking: BM25 over its postings (blocks and tail) with the scope's own
//! statistics, then neighbour propagation (a memory gains a share of the scores of the memories
//! noted just before and after it). Reads the query terms' blocks and the scope's tail, nothing
//! else: no record.

use std::collections::HashMap;
use std::ops::ControlFlow;

use crate::error::Result;
use crate::memory::search::RankParams;
use crate::storage::index::{decode_forward, read_stats, write::each_posting, Posting, STATS_DOC};
use crate::storage::kv::{Dir, KvRead};
use crate::storage::tables::SEARCH_TAIL;

/// Most distinct terms a query ranks by (the rest are ignored).
pub const MAX_QUERY_TERMS: usize = 64;

/// A document's score and which query terms it contains (bit i: term i).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    /// The score.
    pub score: f64,
    /// Bit `i` set when the document contains query term `i`.
    pub mask: u64,
}

/// The distinct terms of a query, in order of first occurrence, at most [`MAX_QUERY_TERMS`].
pub fn query_terms(text: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for t in crate::storage::index::terms(text) {
        if out.len() < MAX_QUERY_TERMS && !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// BM25's inverse document frequency of a term in `df` of `n` documents.
pub fn idf(n: f64, df: f64) -> f64 {
    (1.0 + (n - df + 0.5) / (df + 0.5)).ln()
}

/// BM25's weight of one posting.
pub fn weight(idf: f64, p: Posting, avglen: f64, k: &RankParams) -> f64 {
    let tf = f64::from(p.tf);
    let norm = 1.0 - k.b + k.b * f64::from(p.len) / avglen.max(1e-9);
    idf * tf * (k.k1 + 1.0) / (tf + k.k1 * norm)
}

/// Each query term's postings in scope `sid`: its blocks, then the tail's entries.
fn postings(kv: &(impl KvRead + ?Sized), sid: u32, terms: &[String]) -> Result<Vec<Vec<Posting>>> {
    let mut out: Vec<Vec<Posting>> = vec![Vec::new(); terms.len()];
    for (i, t) in terms.iter().enumerate() {
        if let Some(v) = out.get_mut(i) {
            each_posting(kv, sid, t, |p| v.push(p))?;
        }
    }
    SEARCH_TAIL.scan(
        kv,
        (sid, 0)..(sid, STATS_DOC),
        Dir::Forward,
        |(_, doc), v| {
            let f = decode_forward(sid, doc, v)?;
            for (i, t) in terms.iter().enumerate() {
                if let Ok(j) = f.terms.binary_search_by(|(x, _)| x.as_str().cmp(t)) {
                    let tf = f.terms.get(j).map_or(0, |e| e.1);
                    if let Some(v) = out.get_mut(i) {
                        v.push(Posting {
                            doc,
                            tf,
                            len: f.len,
                        });
                    }
                }
            }
            Ok(ControlFlow::Continue(()))
        },
    )?;
    Ok(out)
}

/// Scores every document of scope `sid` (which holds `count` memories) that contains a query
/// term, with neighbour propagation; documents are memory ids (below 2^56) or summary documents.
pub fn lexical(
    kv: &(impl KvRead + ?Sized),
    sid: u32,
    count: u64,
    terms: &[String],
    k: &RankParams,
) -> Result<HashMap<u64, Scored>> {
    let st = read_stats(kv, sid)?;
    let mut out: HashMap<u64, Scored> = HashMap::new();
    if st.docs == 0 || terms.is_empty() {
        return Ok(out);
    }
    let n = st.docs as f64;
    let avglen = st.total_len as f64 / n;
    for (i, list) in postings(kv, sid, terms)?.into_iter().enumerate() {
        let w = idf(n, list.len() as f64);
        for p in list {
            let e = out.entry(p.doc).or_insert(Scored {
                score: 0.0,
                mask: 0,
            });
            e.score += weight(w, p, avglen, k);
            e.mask |= 1u64.checked_shl(i as u32).unwrap_or(0);
        }
    }
    Ok(propagate(out, count, k))
}

/// Adds to each memory `neighbour_weight` times the scores of the memories up to `neighbours`
/// ids before and after it, among the `count` memories (summaries take no part).
pub fn propagate(base: HashMap<u64, Scored>, count: u64, k: &RankParams) -> HashMap<u64, Scored> {
    if k.neighbour_weight == 0.0 || k.neighbours == 0 {
        return base;
    }
    let mut out = base.clone();
    for (&doc, s) in &base {
        if doc >= count {
            continue;
        }
        for d in 1..=u64::from(k.neighbours) {
            let near = [
                doc.checked_sub(d),
                doc.checked_add(d).filter(|n| *n < count),
            ];
            for nb in near.into_iter().flatten() {
                let e = out.entry(nb).or_insert(Scored {
                    score: 0.0,
                    mask: 0,
                });
                e.score += k.neighbour_weight * s.score;
            }
        }
    }
    out
}
