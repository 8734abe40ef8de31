//! The hybrid ranking: the words' top rescored with the smoothed cosine ([`fuse`]), and the
//! vector ranking alone as scores ([`as_scored`]).

use crate::memory::search::score::Scored;

/// The words' top [`WORDS_DEPTH`] (by score, then id), in no order: what a hybrid search
/// rescores exactly ([`super::nearest_cached`]) and [`fuse`] ranks first. Selected, not
/// sorted: their order is all that is read of them.
pub fn words_top(lex: &[(u64, Scored)]) -> Vec<(u64, Scored)> {
    let by =
        |a: &(u64, Scored), b: &(u64, Scored)| b.1.score.total_cmp(&a.1.score).then(a.0.cmp(&b.0));
    let mut order = lex.to_vec();
    if order.len() > WORDS_DEPTH {
        order.select_nth_unstable_by(WORDS_DEPTH, by);
        order.truncate(WORDS_DEPTH);
    }
    order
}

/// The vector ranking as scores (the cosine).
pub fn as_scored(near: &[(u64, f64)]) -> Ranking {
    near.iter()
        .map(|&(d, c)| (d, Scored { score: c, mask: 0 }))
        .collect()
}

/// A scope's candidates with their scores, each memory once, in no order.
pub type Ranking = Vec<(u64, Scored)>;

/// The words' share of a hybrid score by default ([`fuse`]).
pub const WORDS_WEIGHT: f64 = 0.6;
/// How much of its best neighbour's cosine a memory takes ([`smoothed`]).
const NEIGHBOUR_SHARE: f64 = 0.85;
/// The neighbours on each side a memory takes from.
pub(super) const NEIGHBOUR_REACH: u64 = 2;
/// The lexical ranking's top that the vectors rescore.
const WORDS_DEPTH: usize = 50;
/// Both rankings are normalised between their best and their 20th best score.
const NORM_DEPTH: usize = 20;

/// The cosines as the fusion reads them: each minus the scope's median (a query's cosines sit
/// high and close together with small models), then raised to `0.85` times the best of the
/// two neighbours on each side when that is more (memories noted together share context, as
/// the words' ranking already uses). By memory id, ascending: ids are unique, so a memory's
/// neighbours within [`NEIGHBOUR_REACH`] ids are within as many places of it (no hashing: at
/// 10^5 vectors the map's lookups were a visible part of a hybrid query).
fn smoothed(near: &[(u64, f64)]) -> Vec<(u64, f64)> {
    let mut c: Vec<f64> = near.iter().map(|&(_, x)| x).collect();
    let median = match c.len() {
        0 => 0.0,
        n => *c.select_nth_unstable_by(n / 2, f64::total_cmp).1,
    };
    let mut z: Vec<(u64, f64)> = near.iter().map(|&(d, x)| (d, x - median)).collect();
    z.sort_unstable_by_key(|&(d, _)| d);
    let reach = NEIGHBOUR_REACH as usize;
    z.iter()
        .enumerate()
        .map(|(i, &(d, own))| {
            let around = z
                .get(i.saturating_sub(reach)..(i + reach + 1).min(z.len()))
                .unwrap_or_default();
            let best = around
                .iter()
                .filter(|&&(n, _)| n != d && n.abs_diff(d) <= NEIGHBOUR_REACH)
                .fold(f64::NEG_INFINITY, |a, &(_, b)| a.max(b));
            (d, own.max(NEIGHBOUR_SHARE * best))
        })
        .collect()
}

/// The smoothed cosine of memory `doc` in `v` (by id, ascending), if it has a vector.
fn smoothed_of(v: &[(u64, f64)], doc: u64) -> Option<f64> {
    let i = v.binary_search_by_key(&doc, |&(d, _)| d).ok()?;
    v.get(i).map(|&(_, s)| s)
}

/// `x` on a 0-to-1 scale between `lo` (the 20th best, or the last) and `hi` (the best).
fn normalised(x: f64, lo: f64, hi: f64) -> f64 {
    ((x - lo) / (hi - lo).max(1e-9)).clamp(0.0, 1.0)
}

/// The 20th best of `xs` (or its last, when it has fewer), and the best: selected, not sorted
/// (a hybrid query has a smoothed cosine for every vector of the scope).
fn span(mut xs: Vec<f64>) -> (f64, f64) {
    let hi = xs.iter().copied().max_by(f64::total_cmp).unwrap_or(0.0);
    let Some(k) = NORM_DEPTH.min(xs.len()).checked_sub(1) else {
        return (0.0, 0.0);
    };
    let lo = *xs.select_nth_unstable_by(k, |a, b| b.total_cmp(a)).1;
    (lo, hi)
}

/// The hybrid ranking: the lexical top 50 rescored by `words * l + (1 - words) * v`, where `l`
/// is the lexical score and `v` the [`smoothed`] cosine, each normalised between its 20th best
/// and its best; those 50 rank first (their score is one more than the blend), then every other
/// memory with words or a vector by the same blend. Measured on the five LoCoMo conversations
/// with multilingual-e5-small (docs/performance.md, "Hybrid search"): recall_any@10 0.826
/// held out against the words' 0.804, never below them on a conversation, where reciprocal
/// rank fusion lost (0.755); the parameters were chosen by leaving each conversation out.
/// As a list (each memory once), not a map: a hybrid query has a candidate for every vector of
/// the scope, and hashing 10^5 of them was a tenth of its time. `top` is [`words_top`] of
/// `lex`, selected once by the caller, which rescored it exactly.
pub fn fuse(
    lex: &[(u64, Scored)],
    top: &[(u64, Scored)],
    near: &[(u64, f64)],
    words: f64,
) -> Ranking {
    let (l_lo, l_hi) = span(top.iter().map(|(_, s)| s.score).collect());
    let v = smoothed(near);
    let (v_lo, v_hi) = span(v.iter().map(|&(_, s)| s).collect());
    let mix = |l: f64, vv: f64| words * l + (1.0 - words) * vv;
    let mut out = Vec::with_capacity(lex.len() + v.len());
    for &(doc, s) in top {
        let vv = smoothed_of(&v, doc).map_or(0.0, |c| normalised(c, v_lo, v_hi));
        out.push((
            doc,
            Scored {
                score: 1.0 + mix(normalised(s.score, l_lo, l_hi), vv),
                mask: s.mask,
            },
        ));
    }
    // Every other memory, by walking the words' and the vectors' id orders together: below
    // the top a memory's normalised word score is 0 (its score is at most the 50th best, at
    // most the 20th, where the normalisation starts), so it ranks by its vector alone, and
    // keeps the mask of the words it holds.
    let mut top_ids: Vec<u64> = top.iter().map(|&(d, _)| d).collect();
    top_ids.sort_unstable();
    let by_id = |a: &(u64, Scored), b: &(u64, Scored)| a.0.cmp(&b.0);
    let sorted: std::borrow::Cow<'_, [(u64, Scored)]> = if lex.is_sorted_by(|a, b| a.0 < b.0) {
        std::borrow::Cow::Borrowed(lex)
    } else {
        let mut l = lex.to_vec();
        l.sort_unstable_by(by_id);
        std::borrow::Cow::Owned(l)
    };
    let (mut w, mut c) = (sorted.iter().peekable(), v.iter().peekable());
    let mut tops = top_ids.iter().peekable();
    loop {
        let (doc, mask, cos) = match (w.peek(), c.peek()) {
            (Some(&&(a, s)), Some(&&(b, x))) if a == b => {
                w.next();
                c.next();
                (a, Some(s.mask), Some(x))
            }
            (Some(&&(a, s)), Some(&&(b, _))) if a < b => {
                w.next();
                (a, Some(s.mask), None)
            }
            (Some(&&(a, s)), None) => {
                w.next();
                (a, Some(s.mask), None)
            }
            (_, Some(&&(b, x))) => {
                c.next();
                (b, None, Some(x))
            }
            (None, None) => break,
        };
        while tops.next_if(|&&t| t < doc).is_some() {}
        if tops.peek().is_some_and(|&&t| t == doc) {
            continue;
        }
        let vv = cos.map_or(0.0, |x| normalised(x, v_lo, v_hi));
        let scored = match mask {
            // The sum as the words' ranking below the top has always made it.
            Some(mask) => Scored {
                score: 0.0 + mix(0.0, vv),
                mask,
            },
            None => Scored {
                score: mix(0.0, vv),
                mask: 0,
            },
        };
        out.push((doc, scored));
    }
    out
}

#[cfg(test)]
mod tests {
    //! The fusion's list; the smoothing by neighbouring ids against the map it replaced.
    use super::*;

    /// The smoothing as it was first written, over a map by id: the reference.
    fn smoothed_by_map(near: &[(u64, f64)]) -> std::collections::HashMap<u64, f64> {
        let mut c: Vec<f64> = near.iter().map(|&(_, x)| x).collect();
        let median = match c.len() {
            0 => 0.0,
            n => *c.select_nth_unstable_by(n / 2, f64::total_cmp).1,
        };
        let z: std::collections::HashMap<u64, f64> =
            near.iter().map(|&(d, x)| (d, x - median)).collect();
        z.iter()
            .map(|(&d, &own)| {
                let best = (1..=NEIGHBOUR_REACH)
                    .flat_map(|k| [d.checked_sub(k), d.checked_add(k)])
                    .flatten()
                    .filter_map(|n| z.get(&n))
                    .fold(f64::NEG_INFINITY, |a, &b| a.max(b));
                (d, own.max(NEIGHBOUR_SHARE * best))
            })
            .collect()
    }

    /// The fusion as it was before it selected the words' top instead of sorting them all:
    /// the reference.
    fn fuse_by_full_sort(lex: &[(u64, Scored)], near: &[(u64, f64)], words: f64) -> Ranking {
        let mut order: Vec<(&u64, &Scored)> = lex.iter().map(|(d, s)| (d, s)).collect();
        order.sort_by(|a, b| b.1.score.total_cmp(&a.1.score).then(a.0.cmp(b.0)));
        let (l_lo, l_hi) = span(
            order
                .iter()
                .take(WORDS_DEPTH)
                .map(|(_, s)| s.score)
                .collect(),
        );
        let v = smoothed(near);
        let (v_lo, v_hi) = span(v.iter().map(|&(_, s)| s).collect());
        let mix = |l: f64, vv: f64| words * l + (1.0 - words) * vv;
        let blend = |doc: u64, l: f64| {
            mix(
                l,
                smoothed_of(&v, doc).map_or(0.0, |s| normalised(s, v_lo, v_hi)),
            )
        };
        let mut out = Vec::with_capacity(order.len() + v.len());
        for (rank, (doc, s)) in order.iter().enumerate() {
            let l = normalised(s.score, l_lo, l_hi);
            let top = if rank < WORDS_DEPTH { 1.0 } else { 0.0 };
            out.push((
                **doc,
                Scored {
                    score: top + blend(**doc, l),
                    mask: s.mask,
                },
            ));
        }
        // The memories with a vector and no word, found by walking both id orders together.
        let mut worded: Vec<u64> = lex.iter().map(|&(d, _)| d).collect();
        worded.sort_unstable();
        let mut w = worded.iter().peekable();
        for &(doc, s) in &v {
            while w.next_if(|&&x| x < doc).is_some() {}
            if w.peek().is_some_and(|&&x| x == doc) {
                continue;
            }
            out.push((
                doc,
                Scored {
                    score: mix(0.0, normalised(s, v_lo, v_hi)),
                    mask: 0,
                },
            ));
        }
        out
    }

    /// A multiset of (doc, score bits, mask), for comparing rankings listed in any order.
    fn bits(mut r: Ranking) -> Vec<(u64, u64, u64)> {
        r.sort_by_key(|p| p.0);
        r.into_iter()
            .map(|(d, s)| (d, s.score.to_bits(), s.mask))
            .collect()
    }

    #[test]
    fn the_fusion_by_selection_equals_the_fusion_by_full_sort_bit_for_bit() {
        let mut next = crate::domain::test_rng::xorshift(11);
        for round in 0..40u64 {
            let n = [0, 1, 49, 50, 51, 300][(round % 6) as usize];
            let mut lex = crate::memory::search::score::Scores::default();
            for _ in 0..n {
                let doc = next() % 400;
                // Few distinct scores, so that ties meet the 50th place.
                let score = (next() % 7) as f64 / 2.0;
                lex.insert(
                    doc,
                    Scored {
                        score,
                        mask: next() % 8,
                    },
                );
            }
            let mut near: Vec<(u64, f64)> = Vec::new();
            for d in 0..400 {
                if !next().is_multiple_of(3) {
                    near.push((d, (next() % 2001) as f64 / 1000.0 - 1.0));
                }
            }
            let lex: Vec<(u64, Scored)> = lex.into_iter().collect();
            // In no order (a map's), and by id (the words' ranking over arrays).
            let mut by_id = lex.clone();
            by_id.sort_unstable_by_key(|p| p.0);
            for w in [0.0, 0.6, 1.0] {
                for l in [&lex, &by_id] {
                    assert_eq!(
                        bits(fuse(l, &words_top(l), &near, w)),
                        bits(fuse_by_full_sort(l, &near, w)),
                        "round {round}, weight {w}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_fusion_lists_each_memory_once_the_worded_first() {
        let mut lex = crate::memory::search::score::Scores::default();
        lex.insert(
            1,
            Scored {
                score: 2.0,
                mask: 1,
            },
        );
        lex.insert(
            5,
            Scored {
                score: 1.0,
                mask: 2,
            },
        );
        lex.insert(
            9,
            Scored {
                score: 0.5,
                mask: 4,
            },
        );
        let near = [(0, 0.1), (1, 0.9), (3, 0.5), (5, 0.2), (7, 0.8)];
        let listed: Vec<(u64, Scored)> = lex.iter().map(|(d, s)| (*d, *s)).collect();
        let out = fuse(&listed, &words_top(&listed), &near, WORDS_WEIGHT);
        let mut ids: Vec<u64> = out.iter().map(|p| p.0).collect();
        ids.sort_unstable();
        assert_eq!(ids, [0, 1, 3, 5, 7, 9]);
        for (doc, s) in &out {
            let worded = lex.get(doc);
            assert_eq!(s.mask, worded.map_or(0, |w| w.mask), "#{doc}");
            // The words' top 50 rank above every memory found by its vector alone.
            assert_eq!(s.score >= 1.0, worded.is_some(), "#{doc}: {}", s.score);
        }
    }

    #[test]
    fn the_smoothing_by_places_equals_the_smoothing_by_map_bit_for_bit() {
        let mut rng = crate::domain::test_rng::xorshift(0x5eed);
        for case in 0..300 {
            // Ids with gaps of 1 to 4 (and some runs), from 0 or near u64::MAX, in the order a
            // scan by cosine gives them (not by id).
            let n = (rng() % 60) as usize;
            let start = if case % 7 == 0 {
                u64::MAX - 200
            } else {
                rng() % 5
            };
            let mut id = start;
            let mut near: Vec<(u64, f64)> = (0..n)
                .map(|_| {
                    let x = (rng() % 2001) as f64 / 1000.0 - 1.0;
                    let here = id;
                    id = id.saturating_add(1 + rng() % 4);
                    (here, x)
                })
                .collect();
            near.dedup_by_key(|p| p.0);
            near.sort_by(|a, b| b.1.total_cmp(&a.1));
            let want = smoothed_by_map(&near);
            let got = smoothed(&near);
            assert_eq!(got.len(), want.len());
            assert!(got.windows(2).all(|w| matches!(w, [a, b] if a.0 < b.0)));
            for (d, s) in got {
                assert_eq!(want.get(&d).map(|w| w.to_bits()), Some(s.to_bits()), "#{d}");
            }
        }
    }
}
