//! What the commands read: one line of text from stdin, a whole file (or stdin), JSON arrays
//! of messages, and the check that a session id is safe as a file name.

use std::io::Read;

use somna::Error;

/// The text argument as given, or one line read from stdin when it is `-`.
pub fn text_arg(t: &str) -> Result<String, Error> {
    if t == "-" {
        read_stdin_line()
    } else {
        Ok(t.to_string())
    }
}

/// Reads stdin as one line of text: valid UTF-8, at most 1 MiB, one trailing newline dropped.
pub fn read_stdin_line() -> Result<String, Error> {
    let mut buf = Vec::new();
    std::io::stdin()
        .lock()
        .take(1 << 20 | 1)
        .read_to_end(&mut buf)?;
    if buf.len() > 1 << 20 {
        return Err(Error::Invalid {
            what: "text",
            reason: "stdin holds more than 1 MiB".into(),
        });
    }
    let mut s = String::from_utf8(buf).map_err(|e| Error::Invalid {
        what: "text",
        reason: format!(
            "stdin is not valid UTF-8 (at byte {})",
            e.utf8_error().valid_up_to()
        ),
    })?;
    if s.ends_with('\n') {
        s.pop();
        if s.ends_with('\r') {
            s.pop();
        }
    }
    Ok(s)
}

/// Reads a whole file, or stdin when `file` is `-`, as UTF-8 text: at most
/// [`somna::import::MAX_INPUT_BYTES`], and a file only when it is a regular one.
pub fn read_input(file: &str) -> Result<String, Error> {
    let bytes = if file == "-" {
        somna::import::read_bounded(std::io::stdin().lock(), "input", "stdin")?
    } else {
        somna::import::read_file(std::path::Path::new(file), "file")?
    };
    String::from_utf8(bytes).map_err(|e| Error::Invalid {
        what: "file",
        reason: format!(
            "{file} is not valid UTF-8 (at byte {})",
            e.utf8_error().valid_up_to()
        ),
    })
}

/// Parses a JSON array of objects, keeping each element's text exactly. Each element may nest at
/// most [`somna::text::MAX_JSON_DEPTH`] levels (checked before parsing).
pub fn parse_array(
    input: &str,
    what: &str,
) -> Result<Vec<Box<serde_json::value::RawValue>>, Error> {
    use somna::text::{nesting_depth, MAX_JSON_DEPTH};
    let depth = nesting_depth(input);
    if depth > MAX_JSON_DEPTH + 1 {
        return Err(Error::Invalid {
            what: "JSON",
            reason: format!(
                "{what}: a message nests {} levels deep; at most {MAX_JSON_DEPTH} are accepted",
                depth - 1
            ),
        });
    }
    serde_json::from_str::<Vec<Box<serde_json::value::RawValue>>>(input).map_err(|e| {
        Error::Invalid {
            what: "JSON",
            reason: format!("{what}: expected a JSON array of objects: {e}"),
        }
    })
}

/// Whether a session id is safe as a file path inside a directory (`team/alice` is the file
/// `alice.json` in its folder `team`; [`somna::session::is_relative_file_path`]), each part short enough
/// for a file name with `.json` (250 bytes).
pub fn safe_file_id(id: &str) -> bool {
    somna::session::is_relative_file_path(id) && id.split('/').all(|part| part.len() <= 250)
}
