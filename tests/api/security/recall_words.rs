//! Guards recall's `words` mode against a request that would burn minutes of CPU (issue 27,
//! point 4): a word list longer than `MAX_WORDS` distinct words is refused before anything is
//! compiled, repeats count once, and a long list of repeated words over a store of thousands of
//! memories is matched in one pass per line.

use somna::recall::MAX_WORDS;
use somna::{Error, NewMemory, RecallQuery, Store};

fn store_with(n: usize) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::create(crate::backend::location(dir.path(), "t.redb")).unwrap();
    let notes: Vec<NewMemory> = (0..n)
        .map(|i| NewMemory::new(format!("memory {i} about alpha beta gamma")))
        .collect();
    s.append("u", notes, None).unwrap();
    (dir, s)
}

fn words(pattern: String) -> RecallQuery {
    let mut q = RecallQuery::new(pattern);
    q.words = true;
    q
}

#[test]
fn two_hundred_thousand_distinct_words_are_refused_before_matching() {
    let (_d, s) = store_with(2_000);
    let many: Vec<String> = (0..200_000).map(|i| format!("w{i}")).collect();
    let err = s.recall("u", &words(many.join(" "))).unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err:?}");
    assert!(err.to_string().contains(&MAX_WORDS.to_string()), "{err}");
}

#[test]
fn repeated_words_count_once_and_are_matched_in_one_pass() {
    let (_d, s) = store_with(2_000);
    // 200,000 words, but only three distinct ones (in mixed case): accepted.
    let pattern = ["alpha", "BETA", "Gamma"].repeat(66_667).join(" ");
    // One pattern per distinct word, all matched by one set in one pass over a line.
    match somna::recall::compile_query(&pattern, true).unwrap() {
        somna::recall::Query::Words(set) => assert_eq!(set.len(), 3),
        somna::recall::Query::Regex(_) => panic!("words mode compiled a regex"),
    }
    let r = s.recall("u", &words(pattern)).unwrap();
    assert_eq!(r.total, 2_000);
}

#[test]
fn the_most_distinct_words_allowed_still_work() {
    let (_d, s) = store_with(10);
    let mut list: Vec<String> = (0..MAX_WORDS - 1).map(|i| format!("absent{i}")).collect();
    list.push("alpha".into());
    assert_eq!(s.recall("u", &words(list.join(" "))).unwrap().total, 0);
    let r = s.recall("u", &words("alpha memory".into())).unwrap();
    assert_eq!(r.total, 10);
}
