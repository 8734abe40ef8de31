//! Ranking of texts held in memory, not in a scope's index: the items of a LangGraph store
//! (`crate::checkpoint::items`), which a search narrows by namespace and filter before it ranks.
//! The same recipe as a scope's ranking ([`crate::domain::rank`]: the same tokenizer and query
//! terms, BM25 with [`crate::search::rank::K1`] and [`crate::search::rank::B`], the coverage boost), with the
//! statistics of the texts given (as a scope's ranking uses the scope's own); no neighbours
//! (items are not a sequence). Cost: a tokenization of every text, so it suits the candidates of
//! one search (an item namespace), not a whole log (that is what the index is for).

use std::collections::HashMap;

use crate::domain::rank::{covered, idf, term_score_with, B, COVERAGE, K1};
use crate::domain::tokenize::{query_term_forms, tokens, QueryTerm};
use crate::memory::search::vector::norm;

/// The lexical score of each of `texts` for `query`, in their order: 0 for a text holding none
/// of the query's terms (or for every text, when the query has no term).
///
/// ```
/// use somna::search::rank_texts;
/// let s = rank_texts("support group", &["went to a support group", "a group photo", "hiking"]);
/// assert!(s[0] > s[1] && s[1] > 0.0 && s[2] == 0.0);
/// ```
pub fn rank_texts(query: &str, texts: &[&str]) -> Vec<f64> {
    let asked = query_term_forms(query);
    if asked.is_empty() || texts.is_empty() {
        return vec![0.0; texts.len()];
    }
    let docs: Vec<(HashMap<String, u32>, u32)> = texts.iter().map(|t| bag(t)).collect();
    let total: u64 = docs.iter().map(|d| u64::from(d.1)).sum();
    let avg = total as f64 / docs.len() as f64;
    // A term's frequency in a text: its forms' frequencies summed (QueryTerm::forms).
    let tf = |bag: &HashMap<String, u32>, t: &QueryTerm| -> u32 {
        t.forms
            .iter()
            .filter_map(|f| bag.get(f))
            .fold(0u32, |a, n| a.saturating_add(*n))
    };
    let weights: Vec<f64> = asked
        .iter()
        .map(|t| {
            let df = docs.iter().filter(|d| tf(&d.0, t) > 0).count();
            idf(docs.len() as u64, df as u64)
        })
        .collect();
    let n_asked = u32::try_from(asked.len()).unwrap_or(u32::MAX);
    docs.iter()
        .map(|(bag, len)| {
            let (mut score, mut matched) = (0.0, 0u32);
            for (t, w) in asked.iter().zip(&weights) {
                let n = tf(bag, t);
                if n > 0 {
                    score += term_score_with(n, *len, avg, *w, K1, B);
                    matched += 1;
                }
            }
            covered(score, matched, n_asked, COVERAGE)
        })
        .collect()
}

/// A text's term frequencies and length in terms.
fn bag(text: &str) -> (HashMap<String, u32>, u32) {
    let mut tf: HashMap<String, u32> = HashMap::new();
    let mut len = 0u32;
    for t in tokens(text) {
        *tf.entry(t).or_insert(0) += 1;
        len = len.saturating_add(1);
    }
    (tf, len)
}

/// The best cosine between `q` and the vectors packed one after the other in `packed` (each of
/// `q`'s dimension), or `None` when it holds none or `q` is empty or all zeros; a trailing
/// partial vector is ignored.
///
/// ```
/// use somna::search::best_cosine;
/// let packed = [[1.0f32, 0.0], [0.6, 0.8]].concat();
/// let best = best_cosine(&[0.0, 1.0], &packed).unwrap_or(0.0);
/// assert!((best - 0.8).abs() < 1e-6);
/// assert_eq!(best_cosine(&[1.0, 0.0], &[]), None);
/// ```
pub fn best_cosine(q: &[f32], packed: &[f32]) -> Option<f64> {
    let qn = norm(q);
    if q.is_empty() || qn == 0.0 {
        return None;
    }
    packed
        .chunks_exact(q.len())
        .map(|v| {
            let dot: f64 = q
                .iter()
                .zip(v)
                .map(|(a, b)| f64::from(*a) * f64::from(*b))
                .sum();
            let n = qn * norm(v);
            if n == 0.0 {
                0.0
            } else {
                dot / n
            }
        })
        .max_by(f64::total_cmp)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rarer_and_more_query_terms_rank_higher() {
        let texts = [
            "Caroline went to the LGBTQ support group yesterday",
            "the group met for lunch",
            "support is what friends give",
            "nothing to see here",
        ];
        let s = rank_texts("When did Caroline go to the support group?", &texts);
        assert!(s[0] > s[1] && s[0] > s[2], "{s:?}");
        assert_eq!(s[3], 0.0);
        // Stop words only: they are the terms, and texts without them score 0.
        assert_eq!(rank_texts("the", &["a b", "the c"])[0], 0.0);
        assert!(rank_texts("the", &["a b", "the c"])[1] > 0.0);
        assert_eq!(rank_texts("", &["x"]), [0.0]);
        assert!(rank_texts("x", &[]).is_empty());
    }

    #[test]
    fn cosine_takes_the_best_vector_and_refuses_nothing() {
        assert_eq!(best_cosine(&[1.0, 0.0], &[0.0, 1.0, 2.0, 0.0]), Some(1.0));
        assert_eq!(best_cosine(&[0.0, 0.0], &[1.0, 0.0]), None);
        assert_eq!(best_cosine(&[1.0, 0.0], &[0.0, 0.0]), Some(0.0));
        assert_eq!(best_cosine(&[1.0, 0.0], &[1.0]), None);
        assert_eq!(best_cosine(&[], &[1.0]), None);
    }
}
