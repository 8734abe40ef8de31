//! One scope's lexical ranking: BM25 over its postings (blocks and tail) with the scope's own
//! statistics, boosted by query-term coverage, then neighbour propagation (a memory gains a share of the best score among the
//! memories noted just before and after it): the recipe of [`crate::domain::rank`]. Reads the query terms' blocks and the scope's tail, nothing
//! else: no record.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use crate::domain::rank::{covered, idf, neighbours_sorted, term_score_with};
use crate::domain::tokenize::QueryTerm;
use crate::error::Result;
use crate::memory::search::RankParams;
use crate::storage::index::{decode_forward, read_stats, write::each_posting, Posting, STATS_DOC};
use crate::storage::kv::{Dir, KvRead};
use crate::storage::tables::SEARCH_TAIL;

/// Documents' scores by document id. Hashed with foldhash (seeded per process), not std's
/// SipHash: a search looks up and inserts once per posting it reads, and SipHash was 17% of a
/// search's instructions over 10^4 memories (`--bench search -- --only speed`, callgrind).
pub type Scores = foldhash::HashMap<u64, Scored>;

/// A document's score and which query terms it contains (bit i: term i).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scored {
    /// The score.
    pub score: f64,
    /// Bit `i` set when the document contains query term `i`.
    pub mask: u64,
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

/// One query term's postings from those of its forms ([`QueryTerm::forms`]): a document holding
/// several forms appears once, with their frequencies summed.
pub(crate) fn merged(mut lists: Vec<Vec<Posting>>) -> Vec<Posting> {
    if lists.len() <= 1 {
        return lists.pop().unwrap_or_default();
    }
    let mut by_doc: BTreeMap<u64, Posting> = BTreeMap::new();
    for p in lists.into_iter().flatten() {
        by_doc
            .entry(p.doc)
            .and_modify(|e| e.tf = e.tf.saturating_add(p.tf))
            .or_insert(p);
    }
    by_doc.into_values().collect()
}

/// Scores every document of scope `sid` (which holds `count` memories) that contains a query
/// term (any of its forms), boosted by how many of the query's terms it contains, with neighbour
/// propagation; documents are memory ids (below 2^56) or summary documents.
pub fn lexical(
    kv: &(impl KvRead + ?Sized),
    sid: u32,
    count: u64,
    terms: &[QueryTerm],
    k: &RankParams,
) -> Result<Scores> {
    let st = read_stats(kv, sid)?;
    let mut out = Scores::default();
    if st.docs == 0 || terms.is_empty() {
        return Ok(out);
    }
    let avglen = st.total_len as f64 / st.docs as f64;
    let forms: Vec<String> = terms.iter().flat_map(|t| t.forms.iter().cloned()).collect();
    let mut lists = postings(kv, sid, &forms)?.into_iter();
    for (i, t) in terms.iter().enumerate() {
        let list = merged(lists.by_ref().take(t.forms.len()).collect());
        let w = idf(st.docs, list.len() as u64);
        for p in list {
            let e = out.entry(p.doc).or_insert(Scored {
                score: 0.0,
                mask: 0,
            });
            e.score += term_score_with(p.tf, p.len, avglen, w, k.k1, k.b);
            e.mask |= 1u64.checked_shl(i as u32).unwrap_or(0);
        }
    }
    let asked = terms.len().min(64) as u32;
    for s in out.values_mut() {
        s.score = covered(s.score, s.mask.count_ones(), asked, k.coverage);
    }
    Ok(propagate(out, count, k))
}

/// Adds to each memory `neighbour_weight` times the best direct score among the memories up to
/// `neighbours` ids before and after it, among the `count` memories
/// ([`crate::domain::rank::neighbours_sorted`]); summaries take no part.
pub fn propagate(mut base: Scores, count: u64, k: &RankParams) -> Scores {
    if k.neighbour_weight == 0.0 || k.neighbours == 0 {
        return base;
    }
    let mut direct: Vec<(u64, f64)> = base
        .iter()
        .filter(|(d, _)| **d < count)
        .map(|(d, s)| (*d, s.score))
        .collect();
    direct.sort_unstable_by_key(|&(d, _)| d);
    for (doc, score) in neighbours_sorted(&direct, u64::from(k.neighbours), k.neighbour_weight) {
        if doc < count {
            base.entry(doc)
                .or_insert(Scored {
                    score: 0.0,
                    mask: 0,
                })
                .score = score;
        }
    }
    base
}
