//! One scope's lexical ranking, pruned: the scores of [`crate::memory::search::score::lexical`]
//! for the documents that can reach the top `need`, bit for bit, without decoding every posting
//! of every query term (docs/design.md, section 12.6.1). MaxScore over the terms: each term's
//! contribution is bounded by `idf * (k1 + 1)`; the terms whose bounds, with the coverage boost
//! and neighbour propagation, cannot lift a document to the `need`-th score are read only in the
//! blocks that hold a candidate. The caller gets the scores and the bound every document left
//! out stays at or below, and ranks exhaustively when the walk passes that bound.

use crate::domain::rank::{covered, idf, term_score_with};
use crate::domain::tokenize::QueryTerm;
use crate::error::Result;
use crate::memory::search::score::{merged, propagate, Scored, Scores};
use crate::memory::search::RankParams;
use crate::storage::index::read::{each_tail_posting, raw_blocks, RawBlocks};
use crate::storage::index::{decode_block, read_stats, Posting};
use crate::storage::kv::KvRead;

/// At most this many rounds (each makes one more term essential) before giving up for the
/// exhaustive ranking.
const MAX_ROUNDS: usize = 3;

/// A pruned ranking: the scores, and the bound no document left out exceeds.
#[derive(Debug)]
pub struct Pruned {
    /// Every score above [`Pruned::bound`] is the exhaustive ranking's, and every document the
    /// exhaustive ranking scores above the bound is here; scores at or below it may be low.
    pub scores: Scores,
    /// Documents left out score at most this.
    pub bound: f64,
}

/// One query term's postings: decoded (sorted by document), or the raw blocks of its single
/// form and its tail postings.
struct TermList {
    /// The form whose blocks these are (for decoding errors).
    form: String,
    /// `(first document, value)` of each block, in document order.
    blocks: Vec<(u64, Vec<u8>)>,
    /// The tail's postings of the term, sorted by document.
    tail: Vec<Posting>,
    /// Every posting, sorted by document, once decoded.
    decoded: Option<Vec<Posting>>,
    /// Documents holding the term.
    df: u64,
}

impl TermList {
    /// Decodes every posting (once).
    fn decode(&mut self, sid: u32) -> Result<&[Posting]> {
        if self.decoded.is_none() {
            let mut all = Vec::new();
            for (first, v) in &self.blocks {
                all.extend(decode_block(sid, &self.form, *first, v)?);
            }
            all.extend(self.tail.iter().copied());
            all.sort_unstable_by_key(|p| p.doc);
            self.decoded = Some(all);
        }
        Ok(self.decoded.as_deref().unwrap_or_default())
    }
}

/// Finds the postings of sorted documents in a term's list, decoding only the blocks asked.
struct Cursor<'a> {
    list: &'a TermList,
    sid: u32,
    block: usize,
    current: Option<Vec<Posting>>,
}

impl<'a> Cursor<'a> {
    fn new(list: &'a TermList, sid: u32) -> Self {
        Cursor {
            list,
            sid,
            block: 0,
            current: None,
        }
    }

    /// The term's posting in `doc`, if any; `doc` never below the previous call's.
    fn posting(&mut self, doc: u64) -> Result<Option<Posting>> {
        let find = |ps: &[Posting]| {
            ps.binary_search_by_key(&doc, |p| p.doc)
                .ok()
                .and_then(|i| ps.get(i))
                .copied()
        };
        if let Some(all) = &self.list.decoded {
            return Ok(find(all));
        }
        if let Some(p) = find(&self.list.tail) {
            return Ok(Some(p));
        }
        let blocks = &self.list.blocks;
        // The last block starting at or before `doc`.
        let mut b = self.block;
        while blocks.get(b + 1).is_some_and(|(f, _)| *f <= doc) {
            b += 1;
        }
        let Some((first, v)) = blocks.get(b) else {
            return Ok(None);
        };
        if *first > doc {
            return Ok(None);
        }
        if b != self.block || self.current.is_none() {
            self.current = Some(decode_block(self.sid, &self.list.form, *first, v)?);
            self.block = b;
        }
        Ok(self.current.as_deref().and_then(find))
    }
}

/// One form's blocks as stored (`(first document, value)`), its postings in them, and its tail
/// postings sorted by document.
type RawList = (RawBlocks, u64, Vec<Posting>);

/// Each form's raw blocks and tail postings, for `forms`.
fn read_lists(kv: &(impl KvRead + ?Sized), sid: u32, forms: &[String]) -> Result<Vec<RawList>> {
    let mut out = Vec::with_capacity(forms.len());
    for f in forms {
        let (blocks, n) = raw_blocks(kv, sid, f)?;
        out.push((blocks, n, Vec::new()));
    }
    each_tail_posting(kv, sid, forms, |i, p| {
        if let Some(e) = out.get_mut(i) {
            e.2.push(p);
        }
    })?;
    // In document order already: the tail is scanned by key
    Ok(out)
}

/// The ranking of [`crate::memory::search::score::lexical`] restricted to what can reach the
/// top `need` (see the module), or `None` when pruning does not apply (a single term, `b` above
/// 1, where BM25 has no bound) or did not pay within a few rounds: then rank exhaustively.
pub fn lexical_pruned(
    kv: &(impl KvRead + ?Sized),
    sid: u32,
    count: u64,
    terms: &[QueryTerm],
    k: &RankParams,
    need: usize,
) -> Result<Option<Pruned>> {
    let q = terms.len();
    if !(2..=64).contains(&q) || need == 0 || k.b > 1.0 || k.b.is_nan() {
        return Ok(None);
    }
    let st = read_stats(kv, sid)?;
    if st.docs == 0 {
        return Ok(None);
    }
    let avglen = st.total_len as f64 / st.docs as f64;
    let forms: Vec<String> = terms.iter().flat_map(|t| t.forms.iter().cloned()).collect();
    let mut raw = read_lists(kv, sid, &forms)?.into_iter();
    let mut lists: Vec<TermList> = Vec::with_capacity(q);
    for t in terms {
        let mut mine: Vec<_> = raw.by_ref().take(t.forms.len()).collect();
        if mine.len() == 1 {
            let (blocks, n, tail) = mine.pop().unwrap_or_default();
            let df = n.saturating_add(tail.len() as u64);
            lists.push(TermList {
                form: t.forms.first().cloned().unwrap_or_default(),
                blocks,
                tail,
                decoded: None,
                df,
            });
        } else {
            // Several forms: decoded and merged as the exhaustive ranking does (the number of
            // documents holding any form is only known from the postings).
            let mut each = Vec::with_capacity(mine.len());
            for (form, (blocks, _, tail)) in t.forms.iter().zip(mine) {
                let mut l = TermList {
                    form: form.clone(),
                    blocks,
                    tail,
                    decoded: None,
                    df: 0,
                };
                l.decode(sid)?;
                each.push(l.decoded.unwrap_or_default());
            }
            let mut all = merged(each);
            all.sort_unstable_by_key(|p| p.doc);
            lists.push(TermList {
                form: t.term.clone(),
                blocks: Vec::new(),
                tail: Vec::new(),
                df: all.len() as u64,
                decoded: Some(all),
            });
        }
    }
    let weights: Vec<f64> = lists.iter().map(|l| idf(st.docs, l.df)).collect();
    let bounds: Vec<f64> = weights.iter().map(|w| w * (k.k1 + 1.0)).collect();
    // Terms by bound, highest first: the essential ones are a prefix of this order.
    let mut order: Vec<usize> = (0..q).collect();
    order.sort_by(|&a, &b| {
        let x = bounds.get(a).copied().unwrap_or(0.0);
        let y = bounds.get(b).copied().unwrap_or(0.0);
        y.total_cmp(&x).then(a.cmp(&b))
    });
    let spreads = k.neighbour_weight > 0.0 && k.neighbours > 0;
    let radius = if spreads {
        2 * u64::from(k.neighbours)
    } else {
        0
    };
    let asked = q as u32;
    for e in 1..q.min(MAX_ROUNDS + 1) {
        let (essential, rest) = order.split_at(e);
        let rest_sum: f64 = rest.iter().filter_map(|&i| bounds.get(i)).sum();
        let direct_max = covered(rest_sum, rest.len() as u32, asked, k.coverage);
        let spread = if spreads {
            1.0 + k.neighbour_weight
        } else {
            1.0
        };
        // A margin for the rounding of the sums (the bound is an inequality between reals).
        let bound = spread * direct_max * (1.0 + 1e-9) + 1e-12;
        // The candidates: documents holding an essential term, and the memories within twice
        // the radius of one (their direct scores decide the propagated ones within the radius).
        let mut cands: Vec<u64> = Vec::new();
        for &i in essential {
            if let Some(l) = lists.get_mut(i) {
                cands.extend(l.decode(sid)?.iter().map(|p| p.doc));
            }
        }
        let near: Vec<u64> = cands
            .iter()
            .filter(|&&d| d < count)
            .flat_map(|&d| (1..=radius).flat_map(move |o| [d.checked_sub(o), d.checked_add(o)]))
            .flatten()
            .filter(|&d| d < count)
            .collect();
        cands.extend(near);
        cands.sort_unstable();
        cands.dedup();
        // Each candidate's direct score, the terms added in query order as the exhaustive
        // ranking adds them (so the sums are the same bit for bit).
        // A document's length is in each of its postings.
        let mut tfs: Vec<Vec<u32>> = Vec::with_capacity(q);
        let mut lens: Vec<u32> = vec![0; cands.len()];
        for l in &lists {
            let mut c = Cursor::new(l, sid);
            let mut v = Vec::with_capacity(cands.len());
            for (&d, len) in cands.iter().zip(lens.iter_mut()) {
                let p = c.posting(d)?;
                if let Some(p) = p {
                    *len = p.len;
                }
                v.push(p.map_or(0, |p| p.tf));
            }
            tfs.push(v);
        }
        let mut base = Scores::default();
        for (j, &d) in cands.iter().enumerate() {
            let mut s = Scored {
                score: 0.0,
                mask: 0,
            };
            let len = lens.get(j).copied().unwrap_or(0);
            for i in 0..q {
                let tf = tfs.get(i).and_then(|v| v.get(j)).copied().unwrap_or(0);
                if tf == 0 {
                    continue;
                }
                let w = weights.get(i).copied().unwrap_or(0.0);
                s.score += term_score_with(tf, len, avglen, w, k.k1, k.b);
                s.mask |= 1u64.checked_shl(i as u32).unwrap_or(0);
            }
            if s.mask != 0 {
                s.score = covered(s.score, s.mask.count_ones(), asked, k.coverage);
                base.insert(d, s);
            }
        }
        let scores = propagate(base, count, k);
        let above = scores.values().filter(|s| s.score > bound).count();
        if above >= need {
            return Ok(Some(Pruned { scores, bound }));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::tokenize::query_term_forms;
    use crate::memory::note::NewMemory;
    use crate::memory::search::score::lexical;
    use crate::storage::store::Store;

    /// On a Zipf-like store (blocks and a tail, verb forms), every pruned score above the bound
    /// is the exhaustive score bit for bit, every document the exhaustive ranking scores above
    /// the bound is there, and the top `need` are above it.
    #[test]
    fn pruned_scores_are_the_exhaustive_ones_above_the_bound() {
        let mut next = crate::domain::test_rng::xorshift(0x9E37_79B9_7F4A_7C15u64);
        let words: Vec<String> = (0..300).map(|i| format!("w{i}x")).collect();
        let pick = |next: &mut dyn FnMut() -> u64| {
            // Roughly Zipf: the square of a uniform index favours the first words.
            let u = (next() % 1000) as f64 / 1000.0;
            let i = ((u * u * u) * words.len() as f64) as usize;
            words.get(i).cloned().unwrap_or_default()
        };
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path().join("m.redb")).unwrap();
        let mut texts = Vec::new();
        for n in 0..1_500u64 {
            let len = 3 + next() % 12;
            let mut t: Vec<String> = (0..len).map(|_| pick(&mut next)).collect();
            if n % 97 == 0 {
                t.push(["went", "go", "gone"][(n % 3) as usize].to_string());
            }
            texts.push(t.join(" "));
        }
        // A batch (blocks), then notes one by one (the tail).
        let batch: Vec<NewMemory> = texts[..1_400]
            .iter()
            .map(|t| NewMemory::new(t.as_str()))
            .collect();
        store.append("default", batch, None).unwrap();
        for t in &texts[1_400..] {
            store.note("default", NewMemory::new(t.as_str())).unwrap();
        }
        let mut pruned_some = 0;
        for qn in 0..60 {
            let qlen = 2 + next() % 6;
            let mut words_q: Vec<String> = (0..qlen).map(|_| pick(&mut next)).collect();
            if qn % 10 == 0 {
                words_q.push("go".into());
            }
            let terms = query_term_forms(&words_q.join(" "));
            for params in [
                RankParams::default(),
                RankParams {
                    neighbour_weight: 0.0,
                    ..RankParams::default()
                },
                RankParams {
                    coverage: 0.0,
                    neighbours: 1,
                    ..RankParams::default()
                },
            ] {
                for need in [1usize, 11, 50] {
                    store
                        .read(|r| {
                            let meta = r.scope_meta("default")?.unwrap();
                            let full: Scores = lexical(r.tx, meta.id, meta.count, &terms, &params)?
                                .into_iter()
                                .collect();
                            let Some(p) =
                                lexical_pruned(r.tx, meta.id, meta.count, &terms, &params, need)?
                            else {
                                return Ok(());
                            };
                            pruned_some += 1;
                            for (d, s) in &full {
                                if s.score > p.bound {
                                    let got = p.scores.get(d).expect("a document above the bound");
                                    assert_eq!(got.score.to_bits(), s.score.to_bits(), "doc {d}");
                                    assert_eq!(got.mask, s.mask, "doc {d}");
                                }
                            }
                            let mut above = 0;
                            for (d, s) in &p.scores {
                                if s.score > p.bound {
                                    above += 1;
                                    assert!(full.contains_key(d));
                                }
                            }
                            assert!(above >= need);
                            Ok(())
                        })
                        .unwrap();
                }
            }
        }
        assert!(pruned_some > 0, "no query was pruned");
        // Through the walk: the same hits, scores and pages with and without pruning.
        for qn in 0..40 {
            let qlen = 2 + next() % 6;
            let text: Vec<String> = (0..qlen).map(|_| pick(&mut next)).collect();
            for (limit, offset) in [(10usize, 0usize), (3, 4), (1, 0)] {
                let mut q = crate::memory::search::SearchQuery::new(text.join(" "));
                q.limit = limit;
                q.offset = offset;
                let full = store.search("default", &q).unwrap();
                q.params.prune = true;
                let pruned = store.search("default", &q).unwrap();
                let key = |r: &crate::memory::search::SearchResult| {
                    r.hits
                        .iter()
                        .map(|h| (h.id, h.score.to_bits(), h.terms.clone()))
                        .collect::<Vec<_>>()
                };
                assert_eq!(key(&full), key(&pruned), "query {qn}");
                assert_eq!(full.next_offset, pruned.next_offset, "query {qn}");
            }
        }
    }
}
