//! A session's stored form and its codec: the ids and messages a session accepts
//! ([`validate_session_id`], [`compact_message`]), the values it keeps (its bookkeeping
//! `SessionRecord`, messages with their 128-bit hashes, the archive, idempotency records) and
//! how each decodes, with the types the session calls return.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::storage::codec::{decode_str, payload, wire_error, Wire};
use crate::storage::kv::KvRead;
use crate::storage::tables::SESSIONS;

/// The largest message, in bytes of compact JSON.
pub const MAX_MESSAGE_BYTES: usize = 16 << 20;
/// The longest session id, in bytes.
pub const MAX_SESSION_ID_BYTES: usize = 256;

/// The scope that governs access to a session (see docs/trust.md).
pub fn session_scope(id: &str) -> String {
    format!("session:{id}")
}

/// Checks a session id: 1 to 256 bytes of UTF-8 without control characters.
pub fn validate_session_id(id: &str) -> Result<()> {
    if id.is_empty() || id.len() > MAX_SESSION_ID_BYTES {
        let reason = format!(
            "must be 1 to {MAX_SESSION_ID_BYTES} bytes (got {})",
            id.len()
        );
        return Err(Error::invalid("session id", reason));
    }
    if let Some(c) = id.chars().find(|c| c.is_control()) {
        return Err(Error::invalid(
            "session id",
            format!("contains the control character U+{:04X}", c as u32),
        ));
    }
    Ok(())
}

/// Checks the id of a session about to be made (by a save or an append): [`validate_session_id`],
/// and a relative path that `session export-dir` can write as `<id>.json` inside its folder: a
/// `/` separates folders (`team/alice`, as grants on `session:team/*` expect), and no part is
/// empty, `.` or `..`, nor holds `\` (a separator on Windows). A session made before this rule
/// keeps its id and works as before.
pub fn validate_new_session_id(id: &str) -> Result<()> {
    validate_session_id(id)?;
    if !is_relative_file_path(id) {
        let reason = format!("{:?} is not a relative file path (a part between slashes is empty, . or .., or holds \\): session export-dir could not write it inside its folder", crate::domain::text::display_safe(id));
        return Err(Error::invalid("session id", reason));
    }
    Ok(())
}

/// Whether `id` is a relative path inside a folder: parts separated by `/`, none empty, `.` or
/// `..`, none holding `\` or NUL. (A part longer than a file name may be, 255 bytes on most
/// file systems, is allowed: `session export-dir` skips such a session and says so.)
pub fn is_relative_file_path(id: &str) -> bool {
    id.split('/')
        .all(|part| !part.is_empty() && part != "." && part != ".." && !part.contains(['\\', '\0']))
}

/// Checks that `json` is one JSON object and returns it in compact form: whitespace outside
/// strings removed, everything else (key order, number spelling, escapes) kept byte for byte.
/// Compact input is returned unchanged.
///
/// ```
/// use somna::session::compact_message;
/// assert_eq!(compact_message(r#"{ "a" : [1, 2.50, 1e400] }"#).unwrap(), r#"{"a":[1,2.50,1e400]}"#);
/// assert!(compact_message("[1]").is_err());
/// assert!(compact_message("{").is_err());
/// ```
pub fn compact_message(json: &str) -> Result<String> {
    let trimmed = json.trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r'));
    if !trimmed.starts_with('{') {
        return Err(Error::invalid("message", "must be a JSON object"));
    }
    // Bounded before parsing, so that whatever is stored can be served back (issue 27, point 9).
    crate::domain::json::check_depth(trimmed, crate::domain::json::MAX_JSON_DEPTH, "message")?;
    // Checked, not parsed into a value: a message is stored byte for byte, numbers beyond
    // `f64` included (a reader that parses into `serde_json::Value` cannot hold those; the MCP
    // server then serves the message as text).
    serde_json::from_str::<serde::de::IgnoredAny>(trimmed)
        .map_err(|e| Error::invalid("message", format!("not valid JSON: {e}")))?;
    let mut out = String::with_capacity(trimmed.len());
    let (mut in_str, mut escaped) = (false, false);
    for c in trimmed.chars() {
        if in_str {
            out.push(c);
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
            }
        } else if !matches!(c, ' ' | '\t' | '\n' | '\r') {
            if c == '"' {
                in_str = true;
            }
            out.push(c);
        }
    }
    if out.len() > MAX_MESSAGE_BYTES {
        let reason = format!(
            "it is {} bytes; the limit is {MAX_MESSAGE_BYTES}",
            out.len()
        );
        return Err(Error::invalid("message", reason));
    }
    Ok(out)
}

/// Item `i` of a batch ([`compact_message`], its error naming it as `what` `i`), with its hash.
pub(super) fn compact_nth(m: &str, what: &str, i: usize) -> Result<(String, [u8; 16])> {
    let c = compact_message(m).map_err(|e| match e {
        Error::Invalid {
            what: field,
            reason,
        } => Error::invalid(field, format!("{what} {i}: {reason}")),
        e => e,
    })?;
    let h = hash(&c);
    Ok((c, h))
}

pub(super) use crate::storage::chunk::{msg_hash as hash, SKey};

/// Strings packed into one buffer, with their ends.
pub(super) struct Packed {
    buf: String,
    ends: Vec<usize>,
}

impl Packed {
    pub(super) fn of(items: &[&str]) -> Packed {
        let mut buf = String::with_capacity(items.iter().map(|m| m.len()).sum());
        let mut ends = Vec::with_capacity(items.len());
        for m in items {
            buf.push_str(m);
            ends.push(buf.len());
        }
        Packed { buf, ends }
    }

    pub(super) fn refs(&self) -> Vec<&str> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&end| {
                let s = self.buf.get(start..end).unwrap_or_default();
                start = end;
                s
            })
            .collect()
    }
}

/// A session's bookkeeping as stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SessionRecord {
    pub created_us: i64,
    pub updated_us: i64,
    pub revision: u64,
    /// Next sequence number for a live message (sequence numbers only grow).
    pub next_seq: u64,
    pub count: u64,
    pub bytes: u64,
    /// Next archive sequence number.
    pub archive_next: u64,
    pub archived: u64,
    pub archived_bytes: u64,
}

/// A session's messages read past damage: the valid ones, and the sequence numbers of those
/// that could not be decoded. A damaged message never hides the valid history, and is never
/// dropped silently.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionItems {
    /// The messages that decoded, oldest first.
    pub items: Vec<String>,
    /// Sequence numbers (the message keys) of the damaged messages that were skipped. Empty in a
    /// sound store.
    pub unreadable: Vec<u64>,
}

impl SessionItems {
    /// One line for stderr or a log about the skipped messages, or `None` when there are none.
    pub fn damage_note(&self, id: &str) -> Option<String> {
        if self.unreadable.is_empty() {
            return None;
        }
        let seqs: Vec<String> = self.unreadable.iter().map(|s| format!("seq {s}")).collect();
        Some(crate::domain::text::skipped_damage(
            "message",
            &format!(" of session {id:?}"),
            &seqs,
        ))
    }
}

// Also a line of `session list` in the CLI and over MCP, its output schema derived from this
// type (the `schemars` feature).
/// What a session is, without its messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct SessionInfo {
    /// The session id.
    pub id: String,
    /// When it was created (microseconds since the epoch, UTC).
    pub created_us: i64,
    /// When it last changed (microseconds since the epoch, UTC).
    pub updated_us: i64,
    /// Its revision: a store-wide number that grows with every change.
    pub revision: u64,
    /// Live messages.
    pub count: u64,
    /// Bytes of live messages.
    pub bytes: u64,
    /// Archived messages.
    pub archived: u64,
}

impl SessionInfo {
    pub(super) fn from(id: &str, r: &SessionRecord) -> Self {
        SessionInfo {
            id: id.to_string(),
            created_us: r.created_us,
            updated_us: r.updated_us,
            revision: r.revision,
            count: r.count,
            bytes: r.bytes,
            archived: r.archived,
        }
    }
}

/// A message that a save dropped, kept in the archive.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Archived {
    /// When it was archived (microseconds).
    pub archived_us: i64,
    /// The message, as it was stored.
    pub message: String,
}

// Also what `session save` prints as JSON and returns over MCP (the `schemars` feature).
/// What a save did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct SaveOutcome {
    /// The session's revision after the save (unchanged when nothing changed).
    pub revision: u64,
    /// Stored messages kept in place.
    pub kept: u64,
    /// Messages written.
    pub written: u64,
    /// Stored messages moved to the archive.
    pub archived: u64,
}

// Also what `session append` prints as JSON and returns over MCP (the `schemars` feature).
/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct SessionAppended {
    /// The session's revision after the append.
    pub revision: u64,
    /// How many items the session held before the append (the index of the first).
    pub first_index: u64,
    /// How many items were appended.
    pub count: u64,
    /// True when the idempotency key was used already: nothing was written.
    pub replayed: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct IdemRecord {
    pub(super) outcome: SessionAppended,
    pub(super) hash: [u8; 16],
}

pub(super) fn read_record(kv: &(impl KvRead + ?Sized), id: &str) -> Result<Option<SessionRecord>> {
    SESSIONS.read(kv, id, |v| decode_record(id, v))
}

/// [`decode`](crate::storage::codec::decode) of a [`SessionRecord`], written out over postcard's wire format (nine varints)
/// because a listing decodes one per session.
pub(super) fn decode_record(id: &str, bytes: &[u8]) -> Result<SessionRecord> {
    let mut w = Wire::new(payload("sessions", &id, bytes)?);
    let rec = (|| {
        Some(SessionRecord {
            created_us: w.i64()?,
            updated_us: w.i64()?,
            revision: w.u64()?,
            next_seq: w.u64()?,
            count: w.u64()?,
            bytes: w.u64()?,
            archive_next: w.u64()?,
            archived: w.u64()?,
            archived_bytes: w.u64()?,
        })
    })()
    .ok_or_else(|| wire_error("sessions", &id, None))?;
    if w.left() != 0 {
        return Err(wire_error("sessions", &id, Some(&w)));
    }
    Ok(rec)
}

pub(super) fn decode_message(id: &str, seq: u64, bytes: &[u8]) -> Result<String> {
    decode_str("session_messages", &SKey(id, seq), bytes).map(str::to_owned)
}

pub(super) fn range(id: &str) -> std::ops::RangeInclusive<(&str, u64)> {
    (id, 0)..=(id, u64::MAX)
}

pub(super) fn check_revision(rec: Option<&SessionRecord>, expected: Option<u64>) -> Result<()> {
    let current = rec.map(|r| r.revision).unwrap_or(0);
    match expected {
        Some(e) if e != current => Err(Error::Conflict(format!(
            "the session is at revision {current}, not {e}: it changed since you read it"
        ))),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `session_json` fuzz target: a number beyond `f64` is valid JSON and kept as
    /// written (the session contract is byte for byte), though a `Value` cannot hold it.
    #[test]
    fn a_number_beyond_f64_is_kept_as_written() {
        let m = r#"{"": 1.1E11110101}"#;
        assert_eq!(compact_message(m).unwrap(), r#"{"":1.1E11110101}"#);
        assert!(serde_json::from_str::<serde_json::Value>(m).is_err());
        assert!(compact_message(r#"{"a": 1e5"#).is_err());
    }
}
