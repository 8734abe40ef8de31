//! Tokenizing text for ranked search: the terms a memory is indexed under and a query asks for.
//!
//! One function, [`tokens`], used on both sides so a query term matches an indexed one exactly:
//!
//! 1. **Words** by Unicode word segmentation (UAX #29, `unicode-segmentation`'s
//!    `unicode_words`): punctuation and spaces separate words; `don't`, `3.5` and `U.S.A` stay
//!    one word each; a word needs at least one letter or digit.
//! 2. **Case folding**: full Unicode lowercase (`str::to_lowercase`), and the typographic
//!    apostrophe U+2019 read as `'` so `Caroline’s` and `Caroline's` are one term. Accents are
//!    **kept**: `café` and `cafe` are different terms. Stripping them would conflate words that
//!    differ only by an accent in the languages that have them (Spanish `año`/`ano`, French
//!    `pêche`/`péché`) and needs a normalization table; English, the language this index stems,
//!    rarely carries one.
//! 3. **Stemming** of English by the Snowball English algorithm (`rust-stemmers`), only for
//!    words of letters (and apostrophes): `running` and `runs` are `run`, `Caroline's` is
//!    `carolin`; numbers and mixed words (`2023`, `mp3`) are kept as they are.
//! 4. **CJK** text is tokenized, not dropped: UAX #29 makes each Han ideograph and each Hiragana
//!    character its own word (Chinese and Japanese put no spaces between words), so a query
//!    finds them character by character; a Katakana run stays one word; Hangul words are
//!    separated by spaces like English. These are never stemmed.
//! 5. **Bounds**, so hostile text cannot blow up an index: a term is cut to at most
//!    [`MAX_TERM_BYTES`] bytes (at a character boundary, the same cut on both sides, so a long
//!    identifier still matches itself) and a text yields at most [`MAX_TOKENS`] terms (every
//!    valid entry, at most 4,096 bytes, stays under it).
//!
//! An index keeps every term; [`query_terms`] is what a query asks for: its terms without generic
//! English stop words, each once (see `domain::rank` for the measurement). [`query_term_forms`]
//! adds to each the terms that count as it: an English irregular verb asked in its base form
//! (`go`) also matches its other forms (`went`, `gone`), which no stemmer reaches
//! ([`crate::domain::verbs`]). That expansion is on the query side only: the index keeps the
//! words as written, so it needs no format change and a store indexed before it ranks with it.

use std::cell::RefCell;

use rust_stemmers::{Algorithm, Stemmer};
use unicode_segmentation::UnicodeSegmentation;

use crate::domain::text::prefix_within;

/// The longest term in bytes; longer words are cut to this at a character boundary.
pub const MAX_TERM_BYTES: usize = 64;

/// The most terms one text yields; the rest of a longer text is not indexed.
pub const MAX_TOKENS: usize = 2048;

/// The most distinct terms a query asks for; the rest are ignored.
pub const MAX_QUERY_TERMS: usize = 64;

/// Generic English stop words a query leaves out (NLTK's English list, lowercase, before
/// stemming). Queries only: an index keeps every term, so this list can change without a reindex.
/// Measured on LoCoMo held out: recall_any@10 of the recipe 0.729 without it, 0.794 with
/// it (same grid); Lucene's 33-word list did not help (BM25 0.648 against 0.656 without).
pub const STOP_WORDS: &[&str] = &[
    "i",
    "me",
    "my",
    "myself",
    "we",
    "our",
    "ours",
    "ourselves",
    "you",
    "you're",
    "you've",
    "you'll",
    "you'd",
    "your",
    "yours",
    "yourself",
    "yourselves",
    "he",
    "him",
    "his",
    "himself",
    "she",
    "she's",
    "her",
    "hers",
    "herself",
    "it",
    "it's",
    "its",
    "itself",
    "they",
    "them",
    "their",
    "theirs",
    "themselves",
    "what",
    "which",
    "who",
    "whom",
    "this",
    "that",
    "that'll",
    "these",
    "those",
    "am",
    "is",
    "are",
    "was",
    "were",
    "be",
    "been",
    "being",
    "have",
    "has",
    "had",
    "having",
    "do",
    "does",
    "did",
    "doing",
    "a",
    "an",
    "the",
    "and",
    "but",
    "if",
    "or",
    "because",
    "as",
    "until",
    "while",
    "of",
    "at",
    "by",
    "for",
    "with",
    "about",
    "against",
    "between",
    "into",
    "through",
    "during",
    "before",
    "after",
    "above",
    "below",
    "to",
    "from",
    "up",
    "down",
    "in",
    "out",
    "on",
    "off",
    "over",
    "under",
    "again",
    "further",
    "then",
    "once",
    "here",
    "there",
    "when",
    "where",
    "why",
    "how",
    "all",
    "any",
    "both",
    "each",
    "few",
    "more",
    "most",
    "other",
    "some",
    "such",
    "no",
    "nor",
    "not",
    "only",
    "own",
    "same",
    "so",
    "than",
    "too",
    "very",
    "s",
    "t",
    "can",
    "will",
    "just",
    "don",
    "don't",
    "should",
    "should've",
    "now",
    "d",
    "ll",
    "m",
    "o",
    "re",
    "ve",
    "y",
    "ain",
    "aren",
    "aren't",
    "couldn",
    "couldn't",
    "didn",
    "didn't",
    "doesn",
    "doesn't",
    "hadn",
    "hadn't",
    "hasn",
    "hasn't",
    "haven",
    "haven't",
    "isn",
    "isn't",
    "ma",
    "mightn",
    "mightn't",
    "mustn",
    "mustn't",
    "needn",
    "needn't",
    "shan",
    "shan't",
    "shouldn",
    "shouldn't",
    "wasn",
    "wasn't",
    "weren",
    "weren't",
    "won",
    "won't",
    "wouldn",
    "wouldn't",
];

/// The terms of `text`, in order, repeated as often as they occur (term frequency is the count).
///
/// ```
/// use somna::search::tokenize::tokens;
/// assert_eq!(tokens("Caroline: I’m running to the Support-Group!"),
///            ["carolin", "i'm", "run", "to", "the", "support", "group"]);
/// assert_eq!(tokens("東京 café 2023"), ["東", "京", "café", "2023"]);
/// ```
pub fn tokens(text: &str) -> Vec<String> {
    let stemmer = Stemmer::create(Algorithm::English);
    folded_words(text).map(|w| stem(&stemmer, w)).collect()
}

/// A term a query asks for, with every term that counts as it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueryTerm {
    /// The term (the one a hit's matched terms name).
    pub term: String,
    /// Every term that counts as [`QueryTerm::term`], it first: the stems of an English irregular
    /// verb's other forms when the query word is its base form ([`crate::domain::verbs`]), else
    /// the term alone. A memory holding several of them holds the term once, with their
    /// frequencies summed.
    pub forms: Vec<String>,
}

/// The terms a query asks for: its [`tokens`] without generic English stop words
/// ([`STOP_WORDS`], matched before stemming), each once, in first-seen order, at most
/// [`MAX_QUERY_TERMS`]. A query made only of stop words keeps them all.
///
/// ```
/// use somna::search::tokenize::query_terms;
/// assert_eq!(query_terms("When did Caroline go to the support group?"),
///            ["carolin", "go", "support", "group"]);
/// assert_eq!(query_terms("what is it"), ["what", "is", "it"]);
/// ```
pub fn query_terms(query: &str) -> Vec<String> {
    query_term_forms(query)
        .into_iter()
        .map(|t| t.term)
        .collect()
}

/// [`query_terms`], each with the forms that count as it ([`QueryTerm::forms`]).
///
/// ```
/// use somna::search::tokenize::query_term_forms;
/// let q = query_term_forms("When did Caroline go to the support group?");
/// assert_eq!(q[1].term, "go");
/// assert_eq!(q[1].forms, ["go", "went", "gone", "goe"]);
/// assert_eq!(q[2].forms, ["support"]);
/// ```
pub fn query_term_forms(query: &str) -> Vec<QueryTerm> {
    let stemmer = Stemmer::create(Algorithm::English);
    let words: Vec<String> = folded_words(query).collect();
    let content: Vec<&String> = words
        .iter()
        .filter(|w| !STOP_WORDS.contains(&w.as_str()))
        .collect();
    let chosen = if content.is_empty() {
        words.iter().collect()
    } else {
        content
    };
    let mut terms: Vec<QueryTerm> = Vec::new();
    for w in chosen {
        let term = stem(&stemmer, w.clone());
        if terms.iter().any(|t| t.term == term) {
            continue;
        }
        let mut forms = vec![term.clone()];
        for f in crate::domain::verbs::forms(w).unwrap_or(&[]) {
            let s = stem(&stemmer, (*f).to_owned());
            if !forms.contains(&s) {
                forms.push(s);
            }
        }
        terms.push(QueryTerm { term, forms });
        if terms.len() == MAX_QUERY_TERMS {
            break;
        }
    }
    terms
}

/// The words of `text`, case-folded and cut to [`MAX_TERM_BYTES`], at most [`MAX_TOKENS`].
fn folded_words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.unicode_words().take(MAX_TOKENS).map(|word| {
        let word = truncate_ascii(word);
        if word.is_ascii() {
            // The common case in one allocation (what the general case gives for ASCII).
            return word.to_ascii_lowercase();
        }
        let folded = word.to_lowercase().replace('\u{2019}', "'");
        prefix_within(&folded, MAX_TERM_BYTES).to_owned()
    })
}

/// An ASCII word cut to [`MAX_TERM_BYTES`] (folding ASCII keeps its length, so cutting first
/// gives what cutting the folded word gives); any other word as it is.
fn truncate_ascii(word: &str) -> &str {
    if word.is_ascii() {
        word.get(..MAX_TERM_BYTES).unwrap_or(word)
    } else {
        word
    }
}

/// One folded word as a term: stemmed when it is an English-like word, and bounded. A word the
/// stemmer leaves as it is, is returned without a copy.
fn stem(stemmer: &Stemmer, mut word: String) -> String {
    if !is_stemmable(&word) {
        return word;
    }
    // A known word: its stem (never longer) copied over it, so a hit allocates nothing.
    let known = STEMS.with(|c| {
        let c = c.try_borrow().ok()?;
        if let Some(stemmed) = c.get(word.as_str())?.as_deref() {
            word.clear();
            word.push_str(stemmed);
        }
        Some(())
    });
    if known.is_some() {
        return word;
    }
    let stemmed = stemmer.stem(&word);
    let cut = prefix_within(&stemmed, MAX_TERM_BYTES);
    let changed = (!cut.is_empty() && *cut != *word).then(|| cut.to_owned());
    STEMS.with(|c| {
        if let Ok(mut c) = c.try_borrow_mut() {
            if c.len() >= STEM_CACHE {
                c.clear();
            }
            c.insert(word.clone(), changed.clone());
        }
    });
    changed.unwrap_or(word)
}

/// How many words [`STEMS`] remembers before it starts over.
const STEM_CACHE: usize = 4096;

thread_local! {
    /// The stems of the words this thread stemmed last (`None`: the word is its own stem), so
    /// that a common word is stemmed once, not at every note: Snowball English costs about
    /// 2,000 instructions a word, a lookup a tenth of that, and natural text repeats its common
    /// words. Bounded by [`STEM_CACHE`] entries of at most [`MAX_TERM_BYTES`] each; a pure
    /// function's memo, so it changes no result.
    static STEMS: RefCell<foldhash::HashMap<String, Option<String>>> =
        RefCell::new(foldhash::HashMap::default());
}

/// Whether Snowball English applies: letters (and apostrophes) only, none of them CJK.
fn is_stemmable(word: &str) -> bool {
    word.chars()
        .all(|c| (c.is_alphabetic() && !is_cjk(c)) || c == '\'')
}

/// Han, Hiragana, Katakana and Hangul: scripts the English stemmer must not touch.
fn is_cjk(c: char) -> bool {
    matches!(c,
        '\u{1100}'..='\u{11FF}'   // Hangul Jamo
        | '\u{2E80}'..='\u{2FDF}' // CJK radicals
        | '\u{3040}'..='\u{30FF}' // Hiragana, Katakana
        | '\u{3100}'..='\u{31FF}' // Bopomofo, Hangul compatibility Jamo, Katakana extensions
        | '\u{3400}'..='\u{4DBF}' // CJK extension A
        | '\u{4E00}'..='\u{9FFF}' // CJK unified ideographs
        | '\u{AC00}'..='\u{D7AF}' // Hangul syllables
        | '\u{F900}'..='\u{FAFF}' // CJK compatibility ideographs
        | '\u{FF66}'..='\u{FF9F}' // half-width Katakana
        | '\u{20000}'..='\u{3FFFF}' // CJK extensions B and later
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stem_memo_changes_no_result() {
        let text = "Running runners ran; the cats' caresses, generously: Caroline's café";
        let first = tokens(text);
        let again = tokens(text); // every stemmable word now a hit, its stem copied over it
        assert_eq!(first, again);
        let stemmer = Stemmer::create(Algorithm::English);
        let direct: Vec<String> = folded_words(text)
            .map(|w| stemmer.stem(&w).into_owned())
            .collect();
        assert_eq!(again, direct);
        assert!(again.iter().any(|t| t == "run") && again.contains(&"café".to_string()));
    }

    #[test]
    fn words_are_folded_and_stemmed() {
        assert_eq!(
            tokens("Running, RUNS and ran: the runner's cafés"),
            ["run", "run", "and", "ran", "the", "runner", "café"]
        );
    }

    #[test]
    fn apostrophes_and_numbers_keep_words_whole() {
        assert_eq!(tokens("don't"), tokens("don’t"));
        assert_eq!(
            tokens("v3.5 at 10:30, 2023-05-07"),
            ["v3.5", "at", "10", "30", "2023", "05", "07"]
        );
        assert_eq!(tokens("U.S.A e.g"), ["u.s.a", "e.g"]);
    }

    #[test]
    fn query_and_text_meet_on_the_same_terms() {
        let text = tokens("Caroline went to the LGBTQ support group yesterday");
        for term in tokens("When did Caroline go to the support groups?") {
            if ["when", "did", "go"].contains(&term.as_str()) {
                continue;
            }
            assert!(text.contains(&term), "{term} missing from {text:?}");
        }
    }

    #[test]
    fn accents_are_kept_and_non_latin_scripts_are_not_stemmed() {
        assert_eq!(tokens("Café CAFÉ cafe"), ["café", "café", "cafe"]);
        assert_eq!(tokens("Straße ΣΟΦΊΑ"), ["straße", "σοφία"]);
        assert_eq!(tokens("Москва"), ["москва"]);
    }

    #[test]
    fn cjk_is_tokenized_not_dropped() {
        assert_eq!(
            tokens("東京タワーに行きました"),
            ["東", "京", "タワー", "に", "行", "き", "ま", "し", "た"]
        );
        assert_eq!(tokens("서울 여행"), ["서울", "여행"]);
        assert!(tokens("中文分词").len() == 4);
    }

    #[test]
    fn punctuation_and_emoji_alone_yield_nothing() {
        assert!(tokens("").is_empty());
        assert!(tokens(" ... !!! -- 🎉🎉 \u{200B}").is_empty());
    }

    #[test]
    fn a_long_word_is_cut_at_a_character_boundary() {
        let long = "é".repeat(100);
        let t = tokens(&long);
        assert_eq!(t.len(), 1);
        assert!(t[0].len() <= MAX_TERM_BYTES);
        assert_eq!(t[0], "é".repeat(MAX_TERM_BYTES / 2));
        // The same cut on both sides: the long word still finds itself.
        assert_eq!(tokens(&format!("see {long}!"))[1], t[0]);
    }

    #[test]
    fn a_long_text_yields_at_most_max_tokens() {
        let text = "a ".repeat(MAX_TOKENS * 3);
        assert_eq!(tokens(&text).len(), MAX_TOKENS);
    }

    #[test]
    fn every_valid_entry_is_indexed_whole() {
        // The densest valid entry (MAX_ENTRY_BYTES of one-letter words) fits under MAX_TOKENS.
        let entry = "a ".repeat(crate::domain::text::MAX_ENTRY_BYTES / 2);
        assert_eq!(
            tokens(&entry).len(),
            crate::domain::text::MAX_ENTRY_BYTES / 2
        );
    }

    #[test]
    fn the_ascii_fast_path_folds_as_the_general_one() {
        let long = "AbC".repeat(MAX_TERM_BYTES);
        for w in ["Hello", "I'm", "X2", "MIXED", long.as_str(), "a", "Zz'zZ"] {
            let general = w.to_lowercase().replace('\u{2019}', "'");
            let mut fast = folded_words(w);
            assert_eq!(
                fast.next().as_deref(),
                Some(prefix_within(&general, MAX_TERM_BYTES)),
                "{w}"
            );
            assert!(fast.next().is_none());
        }
        // A word the stemmer keeps comes back as it is; one it changes, changed.
        let st = Stemmer::create(Algorithm::English);
        for _ in 0..2 {
            // Twice: the second time from the cache.
            assert_eq!(stem(&st, "sky".to_owned()), "sky");
            assert_eq!(stem(&st, "running".to_owned()), "run");
        }
        // Past the cache's bound (it starts over), every stem is still Snowball's.
        for i in 0..STEM_CACHE + 10 {
            let word: String = format!("{i:x}ings")
                .chars()
                .map(|c| (b'a' + (c as u8 % 26)) as char)
                .collect();
            assert_eq!(stem(&st, word.clone()), st.stem(&word), "{word}");
        }
        assert_eq!(stem(&st, "東京".to_owned()), "東京");
    }
}
