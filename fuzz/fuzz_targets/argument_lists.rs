//! Arbitrary argument lists (issue 27, point 4): the first line as a `recall --words` word list
//! and as a `--scope a,b` list, the rest as a line to match. Never a panic; an accepted word list
//! has at most `MAX_WORDS` distinct words and, for ASCII text, matches exactly the lines that
//! hold every word (case-insensitively); an accepted scope list has at most `MAX_SCOPES` scopes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use somna::recall::compile_query;
use somna::recall::MAX_WORDS;
use somna::text::MAX_SCOPES;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (list, line) = text.split_once('\n').unwrap_or((text, ""));
    if somna::text::validate_scopes(list).is_ok() {
        assert!(list.split(',').count() <= MAX_SCOPES);
    }
    let _ = compile_query(list, false);
    let Ok(q) = compile_query(list, true) else {
        return;
    };
    let words: std::collections::BTreeSet<String> =
        list.split_whitespace().map(str::to_lowercase).collect();
    assert!(!words.is_empty() && words.len() <= MAX_WORDS);
    if list.is_ascii() && line.is_ascii() {
        let lower = line.to_ascii_lowercase();
        let expected = words.iter().all(|w| lower.contains(w.as_str()));
        assert_eq!(q.is_match(line), expected, "{list:?} against {line:?}");
    }
});
