//! What the commands print with: JSON, counts and block lists, shell quoting, paths and a
//! session's items. A leaf: it names no other module of the command line.

use std::io::Write;

use somna::text;
use somna::Error;

/// Prints `v` as pretty JSON on a line of its own (control characters escaped).
pub fn json(out: &mut dyn Write, v: &impl serde::Serialize) -> Result<(), Error> {
    let s = serde_json::to_string_pretty(v).map_err(|e| Error::Io(e.into()))?;
    writeln!(out, "{}", text::json_safe(&s))?;
    Ok(())
}

/// A JSON array of elements that are JSON text already (session messages), kept byte for byte.
pub fn json_array<'a>(items: impl IntoIterator<Item = &'a String>) -> String {
    let mut s = String::from("[");
    for (i, m) in items.into_iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(m);
    }
    s.push(']');
    s
}

/// `1 memory`, `2 memories`.
pub fn plural(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// The blocks after a count: all of them up to ten (`: 0-1, 2-3`), else the first and the last
/// (`, from 0-1 to 8-9`), so that a batch of 10^5 answers prints one short line.
pub fn block_list(blocks: &[String]) -> String {
    match blocks {
        [] => String::new(),
        [first, .., last] if blocks.len() > 10 => format!(", from {first} to {last}"),
        all => format!(": {}", all.join(", ")),
    }
}

/// `s` as a shell word: as it is when it needs no quoting, in single quotes when it holds no
/// control character, else (a newline in a path could forge a `Run:` line) as `$'...'` with
/// every control or line-breaking character escaped, so that the word stays on one line.
pub fn shell_quote(s: &str) -> String {
    if !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_./:@-+=,".contains(c))
    {
        s.to_string()
    } else if printable(s) {
        format!("'{}'", s.replace('\'', "'\\''"))
    } else {
        let mut q = String::from("$'");
        for c in s.chars() {
            let mut one = [0u8; 4];
            match c {
                '\\' | '\'' => {
                    q.push('\\');
                    q.push(c);
                }
                c if printable(c.encode_utf8(&mut one)) => q.push(c),
                c if c.is_ascii() => q.push_str(&format!("\\x{:02x}", u32::from(c))),
                c => q.push_str(&format!("\\u{:04x}", u32::from(c))),
            }
        }
        q.push('\'');
        q
    }
}

/// Whether `s` holds no control or line-breaking character.
fn printable(s: &str) -> bool {
    matches!(text::display_safe(s), std::borrow::Cow::Borrowed(_))
}

/// A path as printed on a line of its own: control and line-breaking characters shown as U+FFFD,
/// so that a file name cannot forge an output line.
pub fn path_shown(p: &std::path::Path) -> String {
    text::display_safe(&p.to_string_lossy()).into_owned()
}
