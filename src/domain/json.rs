//! How deeply JSON text nests, found without parsing it (so without recursion): session
//! messages are stored as JSON text and served back through parsers that stop at a depth (the
//! MCP server's structured content, the official clients), so nesting is bounded on input, where
//! the CLI and MCP read session messages (docs/security.md, "Limits").

use crate::error::{Error, Result};

/// The deepest nesting accepted in one input, counting each `[` and `{` (a message object is
/// depth 1; the array around a list of messages another): well under the 128 levels at which
/// serde_json, and so the MCP server's structured content, stops.
pub const MAX_JSON_DEPTH: usize = 64;

/// The deepest nesting of arrays and objects in `text` (brackets inside strings do not count).
/// Linear in the text, constant in space; meant for text that is valid JSON or about to be
/// checked as such.
pub fn nesting_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for b in text.bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Refuses `text` when it nests deeper than `max` (`what` names it in the error).
pub fn check_depth(text: &str, max: usize, what: &'static str) -> Result<()> {
    let depth = nesting_depth(text);
    if depth > max {
        return Err(Error::invalid(
            what,
            format!("it nests {depth} levels deep; at most {max} are accepted"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_brackets_outside_strings() {
        assert_eq!(nesting_depth("1"), 0);
        assert_eq!(nesting_depth(r#"[{"a":[1,{"b":"[[[{{"}]}]"#), 4);
        assert_eq!(nesting_depth(r#"["\"[", {}]"#), 2);
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        assert_eq!(nesting_depth(&deep), 100_000);
        assert!(check_depth(&deep, MAX_JSON_DEPTH, "JSON").is_err());
        assert!(check_depth("[[]]", 2, "JSON").is_ok());
    }
}
