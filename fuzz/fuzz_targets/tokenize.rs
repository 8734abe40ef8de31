//! Arbitrary text into `engram::tokenize`: terms are non-empty, bounded in size and
//! count, the same on a second run, and a query's terms are distinct; never a panic.
#![no_main]

use engram::tokenize::{query_terms, tokens, MAX_QUERY_TERMS, MAX_TERM_BYTES, MAX_TOKENS};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let terms = tokens(&text);
    assert!(terms.len() <= MAX_TOKENS);
    for t in &terms {
        assert!(!t.is_empty() && t.len() <= MAX_TERM_BYTES, "{t:?}");
    }
    assert_eq!(terms, tokens(&text));
    let query = query_terms(&text);
    assert!(query.len() <= MAX_QUERY_TERMS);
    for (i, t) in query.iter().enumerate() {
        assert!(!t.is_empty() && t.len() <= MAX_TERM_BYTES, "{t:?}");
        assert!(!query[..i].contains(t), "{t:?} twice");
    }
});
