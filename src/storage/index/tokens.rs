//! A stand-in tokenizer until `crate::domain::tokenize` lands: lowercase alphanumeric runs, one
//! token per CJK character, bounded in length and count. The one place the index asks for
//! terms, so switching tokenizers is one edit.

/// Longest token kept, in bytes.
const MAX_TOKEN_BYTES: usize = 64;
/// Most tokens taken from one text.
const MAX_TOKENS: usize = 4096;

fn is_cjk(c: char) -> bool {
    matches!(c as u32, 0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xAC00..=0xD7AF | 0xF900..=0xFAFF)
}

/// The terms of `text`, in order, repeated as often as they occur.
pub(crate) fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let flush = |cur: &mut String, out: &mut Vec<String>| {
        if !cur.is_empty() && cur.len() <= MAX_TOKEN_BYTES && out.len() < MAX_TOKENS {
            out.push(std::mem::take(cur));
        }
        cur.clear();
    };
    for c in text.chars() {
        if is_cjk(c) {
            flush(&mut cur, &mut out);
            cur.push(c);
            flush(&mut cur, &mut out);
        } else if c.is_alphanumeric() {
            cur.extend(c.to_lowercase());
        } else {
            flush(&mut cur, &mut out);
        }
    }
    flush(&mut cur, &mut out);
    out
}
