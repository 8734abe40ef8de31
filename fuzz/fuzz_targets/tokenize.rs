//! Arbitrary text into `somna::search::tokenize`: terms are non-empty, bounded in size and
//! count, the same on a second run, and a query's terms are distinct, each its own first form
//! with distinct forms (at most an irregular verb's); never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use somna::search::tokenize::{
    query_term_forms, query_terms, tokens, MAX_QUERY_TERMS, MAX_TERM_BYTES, MAX_TOKENS,
};

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
    let forms = query_term_forms(&text);
    assert_eq!(
        forms.iter().map(|f| &f.term).collect::<Vec<_>>(),
        query.iter().collect::<Vec<_>>()
    );
    for f in &forms {
        assert_eq!(f.forms.first(), Some(&f.term));
        assert!(f.forms.len() <= 5, "{f:?}");
        for (i, x) in f.forms.iter().enumerate() {
            assert!(!f.forms[..i].contains(x), "{x:?} twice in {f:?}");
        }
    }
});
