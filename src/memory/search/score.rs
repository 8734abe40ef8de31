//! One scope's lexical ranking: BM25 over its postings (blocks and tail) with the scope's own
//! statistics, boosted by query-term coverage, then neighbour propagation (a memory gains a share of the best score among the
//! memories noted just before and after it): the recipe of [`crate::domain::rank`]. Reads the query terms' blocks and the scope's tail, nothing
//! else: no record.

use std::collections::BTreeMap;

use crate::domain::rank::{covered, idf, neighbours_sorted, term_score_with};
use crate::domain::tokenize::QueryTerm;
use crate::error::Result;
use crate::memory::search::RankParams;
use crate::storage::index::read::{each_posting, each_tail_posting};
use crate::storage::index::{read_stats, Posting};
use crate::storage::kv::KvRead;

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
    for (t, v) in terms.iter().zip(out.iter_mut()) {
        each_posting(kv, sid, t, |p| v.push(p))?;
    }
    each_tail_posting(kv, sid, terms, |i, p| {
        if let Some(v) = out.get_mut(i) {
            v.push(p);
        }
    })?;
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
/// propagation; documents are memory ids (below 2^56) or summary documents. Each document once
/// ([`by_hash`], in no order, or [`by_position`], by id: the same scores bit for bit).
pub fn lexical(
    kv: &(impl KvRead + ?Sized),
    sid: u32,
    count: u64,
    terms: &[QueryTerm],
    k: &RankParams,
) -> Result<Vec<(u64, Scored)>> {
    let st = read_stats(kv, sid)?;
    if st.docs == 0 || terms.is_empty() {
        return Ok(Vec::new());
    }
    let avglen = st.total_len as f64 / st.docs as f64;
    let forms: Vec<String> = terms.iter().flat_map(|t| t.forms.iter().cloned()).collect();
    let mut lists = postings(kv, sid, &forms)?.into_iter();
    let mut weighted = Vec::with_capacity(terms.len());
    for t in terms {
        let list = merged(lists.by_ref().take(t.forms.len()).collect());
        let w = idf(st.docs, list.len() as u64);
        weighted.push((list, w));
    }
    let read: usize = weighted.iter().map(|(l, _)| l.len()).sum();
    let term = |p: &Posting, w: f64| term_score_with(p.tf, p.len, avglen, w, k.k1, k.b);
    if dense_pays(read, count, terms.len()) {
        Ok(by_position(&weighted, count, k, term))
    } else {
        Ok(by_hash(&weighted, count, k, term).into_iter().collect())
    }
}

/// Whether [`by_position`] pays: a query reading at least one posting per four memories of the
/// scope (its arrays, 16 bytes a memory, are then about the size of the hash map they replace),
/// with at most 64 terms (so a document holds a term exactly when its mask is not 0).
fn dense_pays(read: usize, count: u64, terms: usize) -> bool {
    terms <= 64 && count > 0 && count <= DENSE_MAX && (read as u64).saturating_mul(4) >= count
}

/// The most memories a scope may hold for [`by_position`] (its arrays then take 1 GiB).
const DENSE_MAX: u64 = 1 << 26;

/// The ranking as a map from document to score: the terms added in query order, the coverage
/// boost, then [`propagate`].
fn by_hash(
    weighted: &[(Vec<Posting>, f64)],
    count: u64,
    k: &RankParams,
    term: impl Fn(&Posting, f64) -> f64,
) -> Scores {
    let mut out = Scores::default();
    for (i, (list, w)) in weighted.iter().enumerate() {
        let bit = 1u64.checked_shl(i as u32).unwrap_or(0);
        for p in list {
            add(&mut out, p.doc, term(p, *w), bit);
        }
    }
    let asked = weighted.len().min(64) as u32;
    for s in out.values_mut() {
        s.score = covered(s.score, s.mask.count_ones(), asked, k.coverage);
    }
    propagate(out, count, k)
}

/// Adds one term's `score` to document `doc` of `map` (from 0.0 when it has none yet) and
/// sets the term's `bit` in its mask.
fn add(map: &mut Scores, doc: u64, score: f64, bit: u64) {
    let e = map.entry(doc).or_insert(Scored {
        score: 0.0,
        mask: 0,
    });
    e.score += score;
    e.mask |= bit;
}

/// [`by_hash`] over arrays indexed by memory id (a query whose words are in most of a scope's
/// memories: a hash probe per posting and the sort of every neighbour candidate were most of
/// its time). The same floating-point operations in the same order per document, so the same
/// scores bit for bit: the terms added in query order from 0.0, the coverage boost, then each
/// memory's best neighbour within the radius (the maximum of 0.0 and their direct scores, as
/// [`crate::domain::rank::neighbours_sorted`] takes it) added times the weight. Summary
/// documents (and any document past the log) go to a map beside, as they take no part in the
/// propagation. By document id, ascending.
fn by_position(
    weighted: &[(Vec<Posting>, f64)],
    count: u64,
    k: &RankParams,
    term: impl Fn(&Posting, f64) -> f64,
) -> Vec<(u64, Scored)> {
    let n = usize::try_from(count).unwrap_or(0);
    let mut score = vec![0.0f64; n];
    let mut mask = vec![0u64; n];
    let mut rest = Scores::default();
    for (i, (list, w)) in weighted.iter().enumerate() {
        let bit = 1u64.checked_shl(i as u32).unwrap_or(0);
        for p in list {
            let at = usize::try_from(p.doc).ok().filter(|&d| d < n);
            match at.and_then(|d| score.get_mut(d).zip(mask.get_mut(d))) {
                Some((s, m)) => {
                    *s += term(p, *w);
                    *m |= bit;
                }
                None => add(&mut rest, p.doc, term(p, *w), bit),
            }
        }
    }
    let asked = weighted.len().min(64) as u32;
    for (s, m) in score.iter_mut().zip(&mask) {
        if *m != 0 {
            *s = covered(*s, m.count_ones(), asked, k.coverage);
        }
    }
    for s in rest.values_mut() {
        s.score = covered(s.score, s.mask.count_ones(), asked, k.coverage);
    }
    let mut out: Vec<(u64, Scored)> = Vec::new();
    let spreads = k.neighbour_weight != 0.0 && k.neighbours != 0;
    let r = usize::try_from(k.neighbours).unwrap_or(usize::MAX);
    for d in 0..n {
        let own = mask.get(d).copied().unwrap_or(0);
        let direct = score.get(d).copied().unwrap_or(0.0);
        let mut best: Option<f64> = None;
        if spreads {
            let lo = d.saturating_sub(r);
            let hi = d.saturating_add(r).min(n - 1);
            for q in (lo..=hi).filter(|&q| q != d) {
                if mask.get(q).is_some_and(|&m| m != 0) {
                    let s = score.get(q).copied().unwrap_or(0.0);
                    best = Some(best.unwrap_or(0.0).max(s));
                }
            }
        }
        let total = match (own != 0, best) {
            (true, Some(b)) => direct + k.neighbour_weight * b,
            (true, None) => direct,
            (false, Some(b)) => 0.0 + k.neighbour_weight * b,
            (false, None) => continue,
        };
        out.push((
            d as u64,
            Scored {
                score: total,
                mask: own,
            },
        ));
    }
    // After the memories, in id order too (summary documents are above every memory id).
    let mut rest: Vec<(u64, Scored)> = rest.into_iter().collect();
    rest.sort_unstable_by_key(|&(d, _)| d);
    out.extend(rest);
    out
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

#[cfg(test)]
mod tests {
    //! The ranking over arrays against the ranking over a map, bit for bit.
    use super::*;

    /// Sorted by document, each score as its bits.
    fn bits(r: impl IntoIterator<Item = (u64, Scored)>) -> Vec<(u64, u64, u64)> {
        let mut v: Vec<(u64, u64, u64)> = r
            .into_iter()
            .map(|(d, s)| (d, s.score.to_bits(), s.mask))
            .collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn the_ranking_by_position_is_the_ranking_by_hash_bit_for_bit() {
        let mut next = crate::domain::test_rng::xorshift(0xd15e);
        let summary = 1u64 << 56;
        for case in 0..400u64 {
            let count = 1 + next() % 300;
            let terms = 1 + (next() % 6) as usize;
            let mut weighted = Vec::new();
            for _ in 0..terms {
                let mut docs: Vec<u64> =
                    (0..next() % (count + 1)).map(|_| next() % count).collect();
                if case % 5 == 0 {
                    // Summary documents and a document past the log take no part in the spread.
                    docs.extend([summary + next() % 4, count + next() % 3]);
                }
                docs.sort_unstable();
                docs.dedup();
                let list: Vec<Posting> = docs
                    .into_iter()
                    .map(|doc| Posting {
                        doc,
                        tf: 1 + (next() % 3) as u32,
                        len: 1 + (next() % 20) as u32,
                    })
                    .collect();
                weighted.push((list, (next() % 1000) as f64 / 250.0));
            }
            let k = RankParams {
                neighbours: (next() % 4) as u32,
                neighbour_weight: [0.0, 0.3, 1.0][(case % 3) as usize],
                coverage: [0.0, 0.5][(case % 2) as usize],
                ..RankParams::default()
            };
            let term = |p: &Posting, w: f64| term_score_with(p.tf, p.len, 9.5, w, k.k1, k.b);
            let by_pos = by_position(&weighted, count, &k, term);
            assert!(by_pos.is_sorted_by(|a, b| a.0 < b.0), "case {case}: by id");
            assert_eq!(
                bits(by_pos),
                bits(by_hash(&weighted, count, &k, term)),
                "case {case}"
            );
        }
    }
}
