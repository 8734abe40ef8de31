//! Ranking for search: BM25 term weights, a query-term coverage boost and query-time neighbour
//! propagation, pure functions.
//!
//! The recipe, chosen on LoCoMo (Maharana et al., ACL 2024; five conversations, 2,760 turns,
//! 760 questions, one memory per turn) by leave-one-conversation-out cross-validation:
//!
//! 1. Text and query are tokenized by [`crate::domain::tokenize`]; the query drops generic English
//!    stop words ([`crate::domain::tokenize::query_terms`]) and counts each term once. An English
//!    irregular verb asked in its base form counts its other forms as the same term
//!    ([`crate::domain::tokenize::query_term_forms`]: `go` matches `went` and `gone`; a memory's
//!    frequencies of the forms are summed and its document frequency is that of any form), what
//!    indexing lemmas would give, without changing the index.
//! 2. Each memory's direct score is BM25 over its own text, with statistics of its scope only:
//!    `s(i) = sum over query terms t of idf(t) * tf * (K1 + 1) / (tf + K1 * (1 - B + B * len / avglen))`
//!    with `idf(t) = ln(1 + (N - n_t + 0.5) / (n_t + 0.5))` ([`idf`], [`term_score`]), times the
//!    coverage boost `1 + COVERAGE * m / q` for a memory holding `m` of the query's `q` terms
//!    ([`covered`]): BM25 adds the terms independently, so a memory with one rare query word
//!    could outrank one holding most of the question's words.
//! 3. Memories noted next to each other share context, so each memory also takes the best of
//!    its neighbours' direct scores: `score(i) = s(i) + NEIGHBOUR_WEIGHT * max over 1 <= |d| <=
//!    NEIGHBOUR_RADIUS of s(i + d)`, where `i + d` is the memory `d` places away in the same
//!    scope ([`with_neighbours`]). This runs at query time over the hits, so a note writes only
//!    its own postings: no memory's index entry changes when a later one is noted.
//! 4. Order by score, ties by position (older first): a recency boost (`s * (1 + beta * age
//!    rank)`) or a newest-first tie-break did not help held out beyond noise (recall_any@10
//!    0.687 with either against 0.687 without for BM25; 0.794 with the boost, 0.789 with the
//!    tie-break, against 0.790 without for an earlier form of this recipe), so neither is used.
//!
//! Held out (each conversation scored with the parameters best on the other four over a grid
//! of 243 points: k1 0.2/0.3/0.4, b 0.5/0.6/0.75, coverage 0.2-0.4, neighbour weight 0.5-0.9 and
//! radius 1-3): recall_any@10 **0.803**, NDCG@10 **0.571** with the verb forms (four folds chose k1
//! 0.2 and b 0.75, three coverage 0.4, one fold k1 0.3, b 0.5 and coverage 0.3; all five radius 2
//! and weight 0.7; offered the choice, every fold chose the verb forms on). These constants,
//! chosen the same way before the verb forms (four folds), score 0.804 / 0.572 on all 760
//! questions against 0.805 / 0.572 for the folds' new majority: a difference of one question,
//! below the spread between grids (0.006), so they are kept. Without the verb forms: 0.797 /
//! 0.560; over the previous grid (k1 0.3/0.6, b 0.5/0.75, coverage 0-0.4,
//! weight 0-0.9, radius 1-3: 200 points, where four folds chose b 0.5) 0.793 / 0.557, and 0.784
//! / 0.551 over that grid without the boost.
//! Measured the same way and not kept (each with its own grid around these constants):
//! separate weights for the neighbours before and after (0.3-1.1 each) 0.793 / 0.557, every fold
//! chose them equal; the best neighbour's share decayed by distance (0.7-0.9 per step) 0.793 /
//! 0.557, every fold chose no decay; a query term asked twice weighing twice 0.792 / 0.556;
//! coverage as `(m / q)^p` (p 0.5-3) 0.793 / 0.557, or as the matched share of the query's idf
//! mass 0.789 / 0.555, or not counting terms in more than 27-45% of the memories 0.793 / 0.557
//! (every fold chose to count them); a larger generic query stop list (scikit-learn's 318
//! words) 0.789 / 0.553 forced, never chosen; idf raised to a power (1.25-2) 0.791 / 0.558; a
//! finer grid (k1 0.2-0.4, b 0.5-0.75 by 0.05, weight 0.6-0.8, 486 points) 0.791 / 0.556 (it
//! overfits the four folds); feedback re-ranking only the first pass's top 20 or 50 by the 5 or
//! 10 best terms of its 3 or 5 best hits, weighted 0.05-0.3, 0.792 / 0.558. Earlier (with b
//! 0.5): the coverage boost won among BM25+ (a lower bound delta 0.25-1 per matched term) 0.784
//! / 0.551 (every fold chose delta 0); an IDF floor (terms below 10-30% of the
//! highest idf ignored) 0.784 / 0.551 (every fold chose none); the neighbours' scores summed,
//! decayed by distance (0.5, 0.7, 1), instead of their best: 0.775-0.783 / 0.522-0.534; the best
//! of each side summed: 0.775 / 0.535; a neighbour's share scaled by the query terms it adds to
//! the memory's own: 0.782 / 0.531; a boost by the terms covered by the memory and its
//! neighbours together: 0.787 / 0.554 (0.793 / 0.553 on top of this boost). Pseudo-relevance
//! feedback (RM3-like: the 5 or 10 best terms of the 3 or 5 best hits, weighted 0.1-0.5, then a
//! second scoring pass) reached 0.800 held out but lowered NDCG@10 to 0.536, below the 0.55
//! target, and needs the top hits' terms (the posting blocks keep no forward entries: a record
//! read and a tokenization per feedback document, then one more postings pass), so it is not
//! used. Earlier: plain BM25 0.592, SQLite FTS5 unicode61 0.584 and porter 0.630 (0.622 and 0.670
//! with the same query stop words), FTS5 porter with the neighbours (one or two on each side) as
//! a second column weighted 0.3: 0.749 and 0.767 (0.768 and 0.784 with the stop words). Storing
//! the neighbours' terms (BM25F with a context field) ranks no better held out (0.790) and makes
//! each note rewrite the postings of the memories before it. Later, over a 36-point grid around
//! these constants (0.797 / 0.560 without the idea): a proximity boost for the query's
//! consecutive term pairs found within 1-3 terms of each other 0.792 / 0.557, for any two query
//! terms within 1-10 terms 0.792-0.797 / 0.557-0.560; exact (unstemmed) word matches favoured,
//! what lemma+stem dual matching adds, 0.795 / 0.559; the S-stemmer in place of Snowball 0.751 /
//! 0.520; number words read as digits 0.796 / 0.559 (docs/performance.md, "Ranked search").

use std::collections::BTreeMap;

/// BM25 term-frequency saturation (the usual 1.2; short memories rarely repeat a word, and a
/// repeat says little, so a low value won held out: every fold chose 0.3 from a grid of 0.3-2.0,
/// and four of five from 0.2/0.3/0.4 before the verb forms; with them four chose 0.2, a
/// difference of one question of 760, see the module docs).
pub const K1: f64 = 0.3;

/// BM25 length normalisation (the usual 0.75; memories vary less in length than documents):
/// four folds of five chose 0.6 from 0.5/0.6/0.75, the fifth 0.75 (before the verb forms; with
/// them four chose 0.75, a difference of one question of 760, see the module docs).
pub const B: f64 = 0.6;

/// How many memories on each side of a hit share its score.
pub const NEIGHBOUR_RADIUS: u64 = 2;

/// The share of the best neighbour's direct score a memory adds to its own.
pub const NEIGHBOUR_WEIGHT: f64 = 0.7;

/// Query-term coverage boost: a memory containing every query term scores `1 + COVERAGE` times
/// its BM25 sum, one containing half of them `1 + COVERAGE / 2` times ([`covered`]).
pub const COVERAGE: f64 = 0.3;

/// A direct score boosted by query-term coverage: `score * (1 + coverage * matched / asked)`,
/// where the memory contains `matched` of the query's `asked` distinct terms. BM25 sums the
/// terms independently, so one rare word can outrank a memory holding several of the query's
/// words; the boost favours the latter without a threshold (a query of one term scales every
/// score alike, which changes no order).
///
/// ```
/// use somna::search::rank::covered;
/// assert_eq!(covered(2.0, 2, 2, 0.5), 3.0); // every query term
/// assert_eq!(covered(2.0, 1, 2, 0.5), 2.5); // half of them
/// assert_eq!(covered(2.0, 1, 0, 0.5), 2.0); // an empty query: unchanged
/// ```
pub fn covered(score: f64, matched: u32, asked: u32, coverage: f64) -> f64 {
    if asked == 0 {
        return score;
    }
    score * (1.0 + coverage * f64::from(matched.min(asked)) / f64::from(asked))
}

/// The inverse document frequency of a term found in `df` of a scope's `docs` memories
/// (never negative, 0 when the term is in none).
///
/// ```
/// use somna::search::rank::idf;
/// assert!(idf(1000, 1) > idf(1000, 100));
/// assert!(idf(10, 10) > 0.0);
/// assert_eq!(idf(10, 0), idf(10, 0)); // finite
/// ```
pub fn idf(docs: u64, df: u64) -> f64 {
    let n = docs as f64;
    let n_t = df.min(docs) as f64;
    (1.0 + (n - n_t + 0.5) / (n_t + 0.5)).ln()
}

/// One query term's BM25 contribution to a memory: `tf` occurrences in a memory of `len`
/// terms, in a scope whose memories average `avg_len` terms.
///
/// ```
/// use somna::search::rank::{idf, term_score};
/// let w = idf(100, 5);
/// assert!(term_score(2, 10, 10.0, w) > term_score(1, 10, 10.0, w));
/// assert!(term_score(1, 5, 10.0, w) > term_score(1, 20, 10.0, w));
/// assert_eq!(term_score(0, 10, 10.0, w), 0.0);
/// ```
pub fn term_score(tf: u32, len: u32, avg_len: f64, idf: f64) -> f64 {
    term_score_with(tf, len, avg_len, idf, K1, B)
}

/// [`term_score`] with other BM25 parameters than [`K1`] and [`B`] (for benchmarks that choose
/// them by cross-validation).
pub fn term_score_with(tf: u32, len: u32, avg_len: f64, idf: f64, k1: f64, b: f64) -> f64 {
    let tf = f64::from(tf);
    let ratio = if avg_len > 0.0 {
        f64::from(len) / avg_len
    } else {
        1.0
    };
    let norm = k1 * (1.0 - b + b * ratio);
    if tf + norm <= 0.0 {
        return 0.0;
    }
    idf * tf * (k1 + 1.0) / (tf + norm)
}

/// Final scores from direct ones: `direct` maps a memory's position in its scope to its BM25
/// score; the result holds every memory that has a direct score or lies within
/// [`NEIGHBOUR_RADIUS`] of one, scored `s(i) + NEIGHBOUR_WEIGHT * max s(i ± d)`.
///
/// ```
/// use std::collections::BTreeMap;
/// use somna::search::rank::with_neighbours;
/// let direct = BTreeMap::from([(10, 2.0), (11, 1.0)]);
/// let all = with_neighbours(&direct);
/// assert_eq!(all[&10], 2.0 + 0.7 * 1.0);
/// assert_eq!(all[&11], 1.0 + 0.7 * 2.0);
/// assert_eq!(all[&8], 0.7 * 2.0);
/// assert!(!all.contains_key(&14));
/// ```
pub fn with_neighbours(direct: &BTreeMap<u64, f64>) -> BTreeMap<u64, f64> {
    with_neighbours_by(direct, NEIGHBOUR_RADIUS, NEIGHBOUR_WEIGHT)
}

/// [`with_neighbours`] with another radius and weight than [`NEIGHBOUR_RADIUS`] and
/// [`NEIGHBOUR_WEIGHT`] (for benchmarks that choose them by cross-validation).
pub fn with_neighbours_by(
    direct: &BTreeMap<u64, f64>,
    radius: u64,
    weight: f64,
) -> BTreeMap<u64, f64> {
    let sorted: Vec<(u64, f64)> = direct.iter().map(|(&p, &s)| (p, s)).collect();
    neighbours_sorted(&sorted, radius, weight)
        .into_iter()
        .collect()
}

/// [`with_neighbours_by`] over `direct` as `(position, score)` sorted by position, each position
/// once; the result sorted the same way. What a search runs: every memory's best neighbour found
/// by one sort of the `2 * radius` candidates each direct score spreads to, then one merge with
/// `direct`, instead of a tree probe per candidate (about a quarter of a search's instructions
/// over 10^4 memories). The same floating-point operations in the same order per position, so
/// the same scores bit for bit (a test checks it against the tree version it replaced).
/// Time and memory are O(`direct.len()` x `radius`): bound the radius (a search refuses more
/// than `MAX_NEIGHBOURS`).
pub fn neighbours_sorted(direct: &[(u64, f64)], radius: u64, weight: f64) -> Vec<(u64, f64)> {
    let per = usize::try_from(radius.saturating_mul(2)).unwrap_or(usize::MAX);
    let mut spread: Vec<(u64, f64)> =
        Vec::with_capacity(direct.len().saturating_mul(per).min(1 << 20));
    for &(pos, s) in direct {
        for d in 1..=radius {
            for near in [pos.checked_sub(d), pos.checked_add(d)]
                .into_iter()
                .flatten()
            {
                spread.push((near, s));
            }
        }
    }
    // The best neighbour of each position (`max` ignores a NaN whatever the order, and starts
    // from 0.0 as the tree version's slot did).
    spread.sort_unstable_by_key(|&(p, _)| p);
    let mut best: Vec<(u64, f64)> = Vec::with_capacity(spread.len());
    for (p, s) in spread {
        match best.last_mut() {
            Some((q, b)) if *q == p => *b = b.max(s),
            _ => best.push((p, 0.0f64.max(s))),
        }
    }
    let mut out = Vec::with_capacity(direct.len() + best.len());
    let (mut d, mut b) = (direct.iter().peekable(), best.into_iter().peekable());
    loop {
        match (d.peek(), b.peek()) {
            (Some(&&(dp, ds)), Some(&(bp, bs))) if dp == bp => {
                out.push((dp, ds + weight * bs));
                d.next();
                b.next();
            }
            (Some(&&(dp, ds)), Some(&(bp, _))) if dp < bp => {
                out.push((dp, ds));
                d.next();
            }
            (Some(&&(dp, ds)), None) => {
                out.push((dp, ds));
                d.next();
            }
            (_, Some(&(bp, bs))) => {
                out.push((bp, 0.0 + weight * bs));
                b.next();
            }
            (None, None) => break,
        }
    }
    out
}

/// The `k` best of `scores` as `(position, score)`, score descending, ties by position
/// ascending (older first); no ordering surprise from a NaN (it sorts by `f64::total_cmp`).
///
/// ```
/// use std::collections::BTreeMap;
/// use somna::search::rank::top;
/// let s = BTreeMap::from([(1, 0.5), (2, 3.0), (3, 3.0), (4, 1.0)]);
/// assert_eq!(top(&s, 3), [(2, 3.0), (3, 3.0), (4, 1.0)]);
/// ```
pub fn top(scores: &BTreeMap<u64, f64>, k: usize) -> Vec<(u64, f64)> {
    let mut all: Vec<(u64, f64)> = scores.iter().map(|(&p, &s)| (p, s)).collect();
    all.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    all.truncate(k);
    all
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tree version `neighbours_sorted` replaced, kept as the reference.
    fn with_neighbours_by_tree(
        direct: &BTreeMap<u64, f64>,
        radius: u64,
        weight: f64,
    ) -> BTreeMap<u64, f64> {
        let mut best: BTreeMap<u64, f64> = BTreeMap::new();
        for (&pos, &s) in direct {
            for d in 1..=radius {
                for near in [pos.checked_sub(d), pos.checked_add(d)]
                    .into_iter()
                    .flatten()
                {
                    let slot = best.entry(near).or_insert(0.0);
                    *slot = slot.max(s);
                }
            }
        }
        let mut out = direct.clone();
        for (pos, b) in best {
            *out.entry(pos).or_insert(0.0) += weight * b;
        }
        out
    }

    /// Bit for bit the tree version's scores, over clustered and sparse positions, the ends of
    /// `u64`, negative, zero, NaN and infinite scores, radii 0 to 4 and weights of either sign.
    #[test]
    fn the_sorted_spread_scores_as_the_tree_did() {
        let mut next = crate::domain::test_rng::xorshift(0x9E37_79B9_7F4A_7C15u64);
        let specials = [
            0.0,
            -0.0,
            -1.5,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e-300,
        ];
        for case in 0..400 {
            let mut direct = BTreeMap::new();
            let n = next() % 40;
            for _ in 0..n {
                let pos = match next() % 4 {
                    0 => next() % 30,
                    1 => u64::MAX - next() % 5,
                    2 => next() % 5,
                    _ => next() % 10_000,
                };
                let s = if next().is_multiple_of(8) {
                    specials[(next() % specials.len() as u64) as usize]
                } else {
                    (next() % 10_000) as f64 / 37.0
                };
                direct.insert(pos, s);
            }
            let radius = next() % 5;
            let weight = [0.7, 0.0, -0.3, 2.5][(case % 4) as usize];
            let want = with_neighbours_by_tree(&direct, radius, weight);
            let got = with_neighbours_by(&direct, radius, weight);
            assert_eq!(got.len(), want.len(), "case {case}");
            for ((gp, gs), (wp, ws)) in got.iter().zip(&want) {
                assert_eq!(gp, wp, "case {case}");
                assert_eq!(
                    gs.to_bits(),
                    ws.to_bits(),
                    "case {case} at {gp}: {gs} vs {ws}"
                );
            }
        }
    }

    #[test]
    fn rarer_terms_weigh_more_and_idf_is_never_negative() {
        assert!(idf(100, 1) > idf(100, 50));
        assert!(idf(100, 100) > 0.0);
        assert!(idf(0, 0) > 0.0);
        // A df above the count (a racing reader) is clamped, not a negative weight.
        assert_eq!(idf(10, 20), idf(10, 10));
    }

    #[test]
    fn term_score_saturates_and_normalises_length() {
        let w = idf(1000, 10);
        let one = term_score(1, 10, 10.0, w);
        let two = term_score(2, 10, 10.0, w);
        assert!(two > one && two < 2.0 * one);
        assert!(term_score(1, 5, 10.0, w) > term_score(1, 40, 10.0, w));
        // An empty scope's average (0) does not divide by zero.
        assert!(term_score(1, 3, 0.0, w).is_finite());
        // At the average length the weight is idf * tf * (K1 + 1) / (tf + K1).
        let expected = w * 2.0 * (K1 + 1.0) / (2.0 + K1);
        assert!((term_score(2, 10, 10.0, w) - expected).abs() < 1e-12);
    }

    #[test]
    fn neighbours_take_the_best_nearby_score_not_the_sum() {
        let direct = BTreeMap::from([(5, 1.0), (7, 3.0)]);
        let all = with_neighbours(&direct);
        // 6 sits between both hits: the better one counts, once.
        assert_eq!(all[&6], NEIGHBOUR_WEIGHT * 3.0);
        assert_eq!(all[&5], 1.0 + NEIGHBOUR_WEIGHT * 3.0);
        assert_eq!(all[&7], 3.0 + NEIGHBOUR_WEIGHT * 1.0);
        assert_eq!(all[&9], NEIGHBOUR_WEIGHT * 3.0);
        assert!(!all.contains_key(&10) && !all.contains_key(&2));
        assert_eq!(all.len(), 7); // 3..=9
    }

    #[test]
    fn positions_at_the_ends_of_the_range_do_not_overflow() {
        let direct = BTreeMap::from([(0, 1.0), (u64::MAX, 2.0)]);
        let all = with_neighbours(&direct);
        assert_eq!(all[&1], NEIGHBOUR_WEIGHT);
        assert_eq!(all[&(u64::MAX - 2)], NEIGHBOUR_WEIGHT * 2.0);
        assert_eq!(all.len(), 6);
    }

    #[test]
    fn coverage_lifts_a_memory_holding_more_query_terms() {
        // One rare term (idf 3) against two commoner ones (idf 1.4 each): BM25 alone prefers
        // the rare one, the boost the memory that covers the query.
        let (rare, both) = (3.0, 2.8);
        assert!(rare > both);
        assert!(covered(both, 2, 2, COVERAGE) > covered(rare, 1, 2, COVERAGE));
        // A one-term query scales every score alike; no term asked, no change.
        assert_eq!(covered(1.0, 1, 1, 0.5), 1.5);
        assert_eq!(covered(1.0, 0, 0, 0.5), 1.0);
        // A count above the terms asked is clamped.
        assert_eq!(covered(1.0, 3, 2, 0.5), 1.5);
    }

    #[test]
    fn top_orders_by_score_then_older_first() {
        let s = BTreeMap::from([(9, 1.0), (3, 1.0), (4, f64::NAN), (7, 2.0)]);
        let best = top(&s, 3);
        assert_eq!(best.first().map(|h| h.0), Some(4)); // NaN sorts first under total_cmp
        assert_eq!(best.get(1).copied(), Some((7, 2.0)));
        assert_eq!(best.get(2).copied(), Some((3, 1.0)));
        assert!(top(&s, 0).is_empty());
    }
}
