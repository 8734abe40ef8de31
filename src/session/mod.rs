//! **Layer 3, sessions**: a sibling of [`crate::memory`], which it never uses; it may use
//! [`crate::domain`], [`crate::storage`] and [`crate::trust`].
//!
//! Sessions: conversation histories kept in the same transactional file as the memory log.
//!
//! A session is an ordered list of JSON objects (messages, or Responses-API items), stored
//! byte-for-byte as given in compact form. Two contracts are served:
//! - the pure_agents `Memory` contract: [`WriteTxn::session_save`] replaces the list atomically,
//!   [`ReadTxn::session_load`] returns it (or `None`), delete is idempotent, list is sorted;
//! - the append-style contract (OpenAI Agents SDK, LangChain): [`WriteTxn::session_append`]
//!   with an idempotency key, [`ReadTxn::session_items`], [`WriteTxn::session_pop`],
//!   [`WriteTxn::session_clear`].
//!
//! `save` writes only what changed: it compares the 128-bit hashes of the stored messages with
//! those of the new list, keeps the longest common prefix, keeps the longest run of stored
//! messages that the new list continues with (so a framework that trims old history keeps its
//! recent messages in place), and writes only the rest. Messages a save drops are moved to the
//! session's archive, never lost silently. Every change gets a store-wide revision number, so
//! `expected_revision` gives optimistic concurrency without ABA.

use std::fmt;

use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::storage::access::Access;
use crate::storage::codec::{decode, decode_str, encode, payload, wire_error, Wire};
use crate::storage::kv::{Dir, KvRead};
use crate::storage::store::Store;
use crate::storage::tables::{
    SESSIONS, SESSION_ARCHIVE, SESSION_HASHES, SESSION_IDEMPOTENCY, SESSION_MESSAGES,
};
use crate::storage::txn::{ReadTxn, WriteTxn};

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
        return Err(Error::invalid(
            "session id",
            format!(
                "must be 1 to {MAX_SESSION_ID_BYTES} bytes (got {})",
                id.len()
            ),
        ));
    }
    if let Some(c) = id.chars().find(|c| c.is_control()) {
        return Err(Error::invalid(
            "session id",
            format!("contains the control character U+{:04X}", c as u32),
        ));
    }
    Ok(())
}

/// Checks that `json` is one JSON object and returns it in compact form: whitespace outside
/// strings removed, everything else (key order, number spelling, escapes) kept byte for byte.
/// Compact input is returned unchanged.
///
/// ```
/// use engram::session::compact_message;
/// assert_eq!(compact_message(r#"{ "a" : [1, 2.50, 1e400] }"#).unwrap(), r#"{"a":[1,2.50,1e400]}"#);
/// assert!(compact_message("[1]").is_err());
/// assert!(compact_message("{").is_err());
/// ```
pub fn compact_message(json: &str) -> Result<String> {
    let trimmed = json.trim_matches(|c| matches!(c, ' ' | '\t' | '\n' | '\r'));
    if !trimmed.starts_with('{') {
        return Err(Error::invalid("message", "must be a JSON object"));
    }
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
        return Err(Error::invalid(
            "message",
            format!(
                "it is {} bytes; the limit is {MAX_MESSAGE_BYTES}",
                out.len()
            ),
        ));
    }
    Ok(out)
}

fn hash(msg: &str) -> [u8; 16] {
    xxhash_rust::xxh3::xxh3_128(msg.as_bytes()).to_le_bytes()
}

/// Strings packed into one buffer, with their ends.
struct Packed {
    buf: String,
    ends: Vec<usize>,
}

impl Packed {
    fn of(items: &[&str]) -> Packed {
        let mut buf = String::with_capacity(items.iter().map(|m| m.len()).sum());
        let mut ends = Vec::with_capacity(items.len());
        for m in items {
            buf.push_str(m);
            ends.push(buf.len());
        }
        Packed { buf, ends }
    }

    fn refs(&self) -> Vec<&str> {
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

/// What a session is, without its messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SessionInfo {
    /// The session id.
    pub id: String,
    /// When it was created (microseconds since the epoch, UTC).
    pub created_us: i64,
    /// When it last changed.
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
    fn from(id: &str, r: &SessionRecord) -> Self {
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

/// What a save did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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

/// What an append did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
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
struct IdemRecord {
    outcome: SessionAppended,
    hash: [u8; 16],
}

struct SKey<'a>(&'a str, u64);
impl fmt::Display for SKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({:?}, {})", self.0, self.1)
    }
}

fn read_record(kv: &(impl KvRead + ?Sized), id: &str) -> Result<Option<SessionRecord>> {
    SESSIONS.read(kv, id, |v| decode_record(id, v))
}

/// [`decode`] of a [`SessionRecord`], written out over postcard's wire format (nine varints)
/// because a listing decodes one per session.
fn decode_record(id: &str, bytes: &[u8]) -> Result<SessionRecord> {
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

fn decode_message(id: &str, seq: u64, bytes: &[u8]) -> Result<String> {
    decode_str("session_messages", &SKey(id, seq), bytes).map(str::to_owned)
}

fn decode_hash(id: &str, seq: u64, bytes: &[u8]) -> Result<[u8; 16]> {
    let key = SKey(id, seq);
    let body = payload("session_hashes", &key, bytes)?;
    body.try_into().map_err(|_| {
        if body.len() > 16 {
            Error::corrupt(
                "session_hashes",
                key,
                format!("{} trailing bytes after the value", body.len() - 16),
            )
        } else {
            wire_error("session_hashes", &key, None)
        }
    })
}

fn range(id: &str) -> std::ops::RangeInclusive<(&str, u64)> {
    (id, 0)..=(id, u64::MAX)
}

fn check_revision(rec: Option<&SessionRecord>, expected: Option<u64>) -> Result<()> {
    let current = rec.map(|r| r.revision).unwrap_or(0);
    match expected {
        Some(e) if e != current => Err(Error::Conflict(format!(
            "the session is at revision {current}, not {e}: it changed since you read it"
        ))),
        _ => Ok(()),
    }
}

impl WriteTxn<'_> {
    /// The revision of a session's next change: past its current one and at least the commit
    /// time in microseconds. Per session, so that no row is shared by every session writer (on
    /// a server, a store-wide counter would serialize them all); never repeated for an id, even
    /// after a delete, as long as the clock does not go back (docs/design.md, sessions).
    fn next_revision(&self, current: u64) -> u64 {
        current
            .saturating_add(1)
            .max(u64::try_from(self.now).unwrap_or(0))
    }

    fn session_record(&self, id: &str) -> Result<Option<SessionRecord>> {
        read_record(&self.tx, id)
    }

    fn put_session(&mut self, id: &str, rec: &SessionRecord) -> Result<()> {
        SESSIONS.put(&mut self.tx, id, &encode(rec)?)
    }

    fn new_record(&self) -> SessionRecord {
        SessionRecord {
            created_us: self.now,
            updated_us: self.now,
            revision: 0,
            next_seq: 0,
            count: 0,
            bytes: 0,
            archive_next: 0,
            archived: 0,
            archived_bytes: 0,
        }
    }

    fn push_messages<S: AsRef<str>>(
        &mut self,
        id: &str,
        rec: &mut SessionRecord,
        msgs: &[(S, [u8; 16])],
    ) -> Result<()> {
        for (text, hsh) in msgs {
            let text = text.as_ref();
            let seq = rec.next_seq;
            SESSION_MESSAGES.put(&mut self.tx, (id, seq), &encode(&text)?)?;
            SESSION_HASHES.put(&mut self.tx, (id, seq), &encode(hsh)?)?;
            rec.next_seq += 1;
            rec.count += 1;
            rec.bytes += text.len() as u64;
        }
        Ok(())
    }

    /// Removes live messages `seqs` and, when `archive`, moves them to the archive.
    fn drop_messages(
        &mut self,
        id: &str,
        rec: &mut SessionRecord,
        seqs: &[u64],
        archive: bool,
    ) -> Result<Vec<String>> {
        let mut out = Vec::with_capacity(seqs.len());
        for &seq in seqs {
            let text = match SESSION_MESSAGES.take(&mut self.tx, (id, seq))? {
                Some(v) => decode_message(id, seq, &v)?,
                None => {
                    return Err(Error::corrupt(
                        "session_messages",
                        SKey(id, seq),
                        "a message listed in the hashes is missing",
                    ))
                }
            };
            SESSION_HASHES.delete(&mut self.tx, (id, seq))?;
            rec.count = rec.count.saturating_sub(1);
            rec.bytes = rec.bytes.saturating_sub(text.len() as u64);
            if archive {
                let entry = Archived {
                    archived_us: self.now,
                    message: text.clone(),
                };
                SESSION_ARCHIVE.put(&mut self.tx, (id, rec.archive_next), &encode(&entry)?)?;
                rec.archive_next += 1;
                rec.archived += 1;
                rec.archived_bytes += text.len() as u64;
            }
            out.push(text);
        }
        Ok(out)
    }

    fn enforce_retention(&mut self, id: &str, rec: &mut SessionRecord) -> Result<()> {
        let max = self.config()?.session_archive_max;
        if max == 0 || rec.archived <= max {
            return Ok(());
        }
        let excess = rec.archived - max;
        let mut victims = Vec::new();
        SESSION_ARCHIVE.scan(&self.tx, range(id), Dir::Forward, |(_, seq), v| {
            if victims.len() as u64 >= excess {
                return Ok(ControlFlow::Break(()));
            }
            let e: Archived = decode("session_archive", &SKey(id, seq), v)?;
            victims.push((seq, e.message.len() as u64));
            Ok(ControlFlow::Continue(()))
        })?;
        for (seq, len) in victims {
            SESSION_ARCHIVE.delete(&mut self.tx, (id, seq))?;
            rec.archived -= 1;
            rec.archived_bytes = rec.archived_bytes.saturating_sub(len);
        }
        Ok(())
    }

    /// Replaces the session's messages with `messages` (JSON objects), atomically, writing only
    /// what changed; dropped messages go to the archive. With `expected_revision`, fails with
    /// [`Error::Conflict`] (writing nothing) unless the session is at that revision (0: absent).
    pub fn session_save(
        &mut self,
        id: &str,
        messages: &[&str],
        expected_revision: Option<u64>,
    ) -> Result<SaveOutcome> {
        validate_session_id(id)?;
        self.require(Access::Write, &session_scope(id))?;
        let existing = self.session_record(id)?;
        let mut rec = existing.clone().unwrap_or_else(|| self.new_record());
        let stored: Vec<(u64, [u8; 16])> = {
            let mut v = Vec::with_capacity(rec.count as usize);
            if rec.count > 64 {
                // Every stored hash is read: a server sends them in one statement, not in pages.
                SESSION_HASHES.prefetch_range(&self.tx, range(id))?;
            }
            SESSION_HASHES.each(&self.tx, range(id), |(_, seq), val| {
                v.push((seq, decode_hash(id, seq, val)?));
                Ok(())
            })?;
            v
        };
        // A message whose bytes hash to a stored message is that message: already checked and
        // compact. Only the others are parsed, so a save costs what changed, not the history.
        // The common save appends to what is stored: its stored prefix is matched in order,
        // and only the messages after it are looked up among the stored hashes (one by one
        // when few, through a set when many).
        let hashes: Vec<[u8; 16]> = messages.iter().map(|m| hash(m)).collect();
        let prefix = stored
            .iter()
            .zip(&hashes)
            .take_while(|(a, b)| a.1 == **b)
            .count();
        let after = hashes.len() - prefix;
        let set: Option<std::collections::HashSet<[u8; 16]>> = (after.saturating_mul(stored.len())
            > 4096)
            .then(|| stored.iter().map(|x| x.1).collect());
        let known = |i: usize, h: &[u8; 16]| {
            i < prefix
                || match &set {
                    Some(set) => set.contains(h),
                    None => stored.iter().any(|x| x.1 == *h),
                }
        };
        let new: Vec<(std::borrow::Cow<'_, str>, [u8; 16])> = messages
            .iter()
            .zip(&hashes)
            .enumerate()
            .map(|(i, (m, h))| {
                let h = *h;
                if known(i, &h) {
                    return Ok((std::borrow::Cow::Borrowed(*m), h));
                }
                let c = compact_message(m).map_err(|e| match e {
                    Error::Invalid { what, reason } => {
                        Error::invalid(what, format!("message {i}: {reason}"))
                    }
                    e => e,
                })?;
                let h = hash(&c);
                Ok((std::borrow::Cow::Owned(c), h))
            })
            .collect::<Result<_>>()?;
        check_revision(existing.as_ref(), expected_revision)?;
        let (s, n) = (stored.len(), new.len());
        let p = stored
            .iter()
            .zip(&new)
            .take_while(|(a, b)| a.1 == b.1)
            .count();
        // The first j >= p such that stored[j..] continues as new[p..]: keep that run in place.
        let mut j = s;
        if p < n {
            let start = p.max(s.saturating_sub(n - p));
            for cand in start..s {
                let run = s - cand;
                let same = stored
                    .get(cand..s)
                    .zip(new.get(p..p + run))
                    .is_some_and(|(a, b)| a.iter().zip(b).all(|(x, y)| x.1 == y.1));
                if same {
                    j = cand;
                    break;
                }
            }
        }
        let kept = p + (s - j);
        let to_archive: Vec<u64> = stored
            .get(p..j)
            .unwrap_or_default()
            .iter()
            .map(|x| x.0)
            .collect();
        let to_write = new.get(kept.min(n)..).unwrap_or_default();
        if existing.is_some() && to_archive.is_empty() && to_write.is_empty() {
            return Ok(SaveOutcome {
                revision: rec.revision,
                kept: kept as u64,
                written: 0,
                archived: 0,
            });
        }
        self.drop_messages(id, &mut rec, &to_archive, true)?;
        self.push_messages(id, &mut rec, to_write)?;
        self.enforce_retention(id, &mut rec)?;
        rec.revision = self.next_revision(rec.revision);
        rec.updated_us = self.now;
        self.put_session(id, &rec)?;
        Ok(SaveOutcome {
            revision: rec.revision,
            kept: kept as u64,
            written: to_write.len() as u64,
            archived: to_archive.len() as u64,
        })
    }

    /// Appends items to the session (created if absent) as one atomic batch. A retry with the
    /// same idempotency key and the same items writes nothing and returns the earlier outcome
    /// (`replayed`); the same key with other items is a [`Error::Conflict`].
    pub fn session_append(
        &mut self,
        id: &str,
        items: &[&str],
        key: Option<&str>,
        expected_revision: Option<u64>,
    ) -> Result<SessionAppended> {
        validate_session_id(id)?;
        self.require(Access::Write, &session_scope(id))?;
        if let Some(k) = key {
            crate::domain::text::validate_key(k)?;
        }
        let new: Vec<(String, [u8; 16])> = items
            .iter()
            .enumerate()
            .map(|(i, m)| {
                let c = compact_message(m).map_err(|e| match e {
                    Error::Invalid { what, reason } => {
                        Error::invalid(what, format!("item {i}: {reason}"))
                    }
                    e => e,
                })?;
                let h = hash(&c);
                Ok((c, h))
            })
            .collect::<Result<_>>()?;
        let mut batch = xxhash_rust::xxh3::Xxh3::new();
        for (_, h) in &new {
            batch.update(h);
        }
        let batch_hash = batch.digest128().to_le_bytes();
        if let Some(k) = key {
            let found = {
                match SESSION_IDEMPOTENCY.get(&self.tx, (id, k))? {
                    Some(v) => Some(decode::<IdemRecord>("session_idempotency", &k, &v)?),
                    None => None,
                }
            };
            if let Some(r) = found {
                if r.hash == batch_hash {
                    return Ok(SessionAppended {
                        replayed: true,
                        ..r.outcome
                    });
                }
                return Err(Error::Conflict(format!(
                    "idempotency key {k:?} was used for a different batch"
                )));
            }
        }
        let existing = self.session_record(id)?;
        check_revision(existing.as_ref(), expected_revision)?;
        let mut rec = existing.unwrap_or_else(|| self.new_record());
        let first_index = rec.count;
        if !new.is_empty() {
            self.push_messages(id, &mut rec, &new)?;
        }
        rec.revision = self.next_revision(rec.revision);
        rec.updated_us = self.now;
        self.put_session(id, &rec)?;
        let outcome = SessionAppended {
            revision: rec.revision,
            first_index,
            count: new.len() as u64,
            replayed: false,
        };
        if let Some(k) = key {
            let r = IdemRecord {
                outcome,
                hash: batch_hash,
            };
            SESSION_IDEMPOTENCY.put(&mut self.tx, (id, k), &encode(&r)?)?;
        }
        Ok(outcome)
    }

    /// Removes and returns the newest item, or `None` when the session is empty or absent.
    pub fn session_pop(
        &mut self,
        id: &str,
        expected_revision: Option<u64>,
    ) -> Result<Option<String>> {
        validate_session_id(id)?;
        self.require(Access::Write, &session_scope(id))?;
        let existing = self.session_record(id)?;
        check_revision(existing.as_ref(), expected_revision)?;
        let Some(mut rec) = existing else {
            return Ok(None);
        };
        let last = SESSION_HASHES.edge(&self.tx, range(id), Dir::Reverse, |(_, seq), _| Ok(seq))?;
        let Some(seq) = last else { return Ok(None) };
        let mut out = self.drop_messages(id, &mut rec, &[seq], false)?;
        rec.revision = self.next_revision(rec.revision);
        rec.updated_us = self.now;
        self.put_session(id, &rec)?;
        Ok(out.pop())
    }

    /// Removes every live item of the session (the archive stays; see
    /// [`WriteTxn::session_prune`]). Returns how many were removed.
    pub fn session_clear(&mut self, id: &str) -> Result<u64> {
        validate_session_id(id)?;
        self.require(Access::Write, &session_scope(id))?;
        let Some(mut rec) = self.session_record(id)? else {
            return Ok(0);
        };
        let n = rec.count;
        SESSION_MESSAGES.delete_range(&mut self.tx, range(id))?;
        SESSION_HASHES.delete_range(&mut self.tx, range(id))?;
        rec.count = 0;
        rec.bytes = 0;
        rec.revision = self.next_revision(rec.revision);
        rec.updated_us = self.now;
        self.put_session(id, &rec)?;
        Ok(n)
    }

    /// Deletes the session wholly: its messages, archive and idempotency keys. Deleting a
    /// session that does not exist is not an error. Returns whether it existed.
    pub fn session_delete(&mut self, id: &str) -> Result<bool> {
        validate_session_id(id)?;
        self.require(Access::Write, &session_scope(id))?;
        if !SESSIONS.delete(&mut self.tx, id)? {
            return Ok(false);
        }
        SESSION_MESSAGES.delete_range(&mut self.tx, range(id))?;
        SESSION_HASHES.delete_range(&mut self.tx, range(id))?;
        SESSION_ARCHIVE.delete_range(&mut self.tx, range(id))?;
        let mut keys = Vec::new();
        SESSION_IDEMPOTENCY.scan(&self.tx, (id, "").., Dir::Forward, |(sid, key), _| {
            if sid != id {
                return Ok(ControlFlow::Break(()));
            }
            keys.push(key.to_string());
            Ok(ControlFlow::Continue(()))
        })?;
        for k in keys {
            SESSION_IDEMPOTENCY.delete(&mut self.tx, (id, k.as_str()))?;
        }
        Ok(true)
    }

    /// Removes the session's archive. Returns how many archived messages were removed.
    pub fn session_prune(&mut self, id: &str) -> Result<u64> {
        validate_session_id(id)?;
        self.require(Access::Write, &session_scope(id))?;
        let Some(mut rec) = self.session_record(id)? else {
            return Ok(0);
        };
        let n = rec.archived;
        if n == 0 {
            return Ok(0);
        }
        SESSION_ARCHIVE.delete_range(&mut self.tx, range(id))?;
        rec.archived = 0;
        rec.archived_bytes = 0;
        rec.revision = self.next_revision(rec.revision);
        rec.updated_us = self.now;
        self.put_session(id, &rec)?;
        Ok(n)
    }
}

impl ReadTxn {
    /// The session's messages, or `None` when it does not exist. A damaged message is an
    /// error ([`Error::Corrupt`] naming it); [`ReadTxn::session_load_lossy`] reads past it.
    pub fn session_load(&self, id: &str) -> Result<Option<Vec<String>>> {
        Ok(self.load(id, false)?.map(|r| r.items))
    }

    /// [`ReadTxn::session_load`] that skips damaged messages and names them.
    pub fn session_load_lossy(&self, id: &str) -> Result<Option<SessionItems>> {
        self.load(id, true)
    }

    /// The latest `limit` items (all when `None`), oldest first. Empty for a missing session.
    /// A damaged message is an error; [`ReadTxn::session_items_lossy`] reads past it.
    pub fn session_items(&self, id: &str, limit: Option<usize>) -> Result<Vec<String>> {
        Ok(self.messages(id, limit, false)?.items)
    }

    /// The latest `limit` messages (all when `None`), oldest first, skipping damaged ones: a
    /// damaged message counts toward `limit` (the window is the latest `limit` records) and is
    /// listed in [`SessionItems::unreadable`]. What the Agents SDK's contract asks: a corrupt
    /// record must not hide the valid history.
    pub fn session_items_lossy(&self, id: &str, limit: Option<usize>) -> Result<SessionItems> {
        self.messages(id, limit, true)
    }

    fn load(&self, id: &str, lossy: bool) -> Result<Option<SessionItems>> {
        validate_session_id(id)?;
        self.require(Access::Read, &session_scope(id))?;
        if read_record(&self.tx, id)?.is_none() {
            return Ok(None);
        }
        self.read_messages(id, None, lossy).map(Some)
    }

    fn messages(&self, id: &str, limit: Option<usize>, lossy: bool) -> Result<SessionItems> {
        validate_session_id(id)?;
        self.require(Access::Read, &session_scope(id))?;
        self.read_messages(id, limit, lossy)
    }

    /// The latest `limit` messages, oldest first, after the caller's checks; `lossy` skips and
    /// names damaged ones instead of failing.
    fn read_messages(&self, id: &str, limit: Option<usize>, lossy: bool) -> Result<SessionItems> {
        let mut out = SessionItems {
            items: Vec::new(),
            unreadable: Vec::new(),
        };
        if limit.is_none() {
            // The whole session is read: a server fetches it in one statement.
            SESSION_MESSAGES.prefetch_range(&self.tx, range(id))?;
        }
        // The whole session reads forward (no reversal); the latest `limit` read backward.
        let dir = if limit.is_some() {
            Dir::Reverse
        } else {
            Dir::Forward
        };
        let limit = limit.unwrap_or(usize::MAX);
        let mut seen = 0usize;
        SESSION_MESSAGES.scan(&self.tx, range(id), dir, |(_, seq), v| {
            if seen >= limit {
                return Ok(ControlFlow::Break(()));
            }
            seen += 1;
            match decode_message(id, seq, v) {
                Ok(m) => out.items.push(m),
                Err(Error::Corrupt { .. }) if lossy => out.unreadable.push(seq),
                Err(e) => return Err(e),
            }
            Ok(ControlFlow::Continue(()))
        })?;
        if dir == Dir::Reverse {
            out.items.reverse();
            out.unreadable.reverse();
        }
        Ok(out)
    }

    /// The session's counters and times, without reading its messages.
    pub fn session_info(&self, id: &str) -> Result<Option<SessionInfo>> {
        validate_session_id(id)?;
        self.require(Access::Read, &session_scope(id))?;
        Ok(read_record(&self.tx, id)?.map(|r| SessionInfo::from(id, &r)))
    }

    /// Sessions whose id starts with `prefix`, sorted, strictly after `after` (a cursor: the
    /// last id of the previous page), at most `limit`.
    pub fn session_list(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<SessionInfo>> {
        let unrestricted = self.asker.unrestricted(&self.tx)?;
        let mut out = Vec::new();
        let start = match after {
            Some(a) if a >= prefix => a,
            _ => prefix,
        };
        SESSIONS.scan(&self.tx, start.., Dir::Forward, |id, v| {
            if limit.is_some_and(|l| out.len() >= l) || !id.starts_with(prefix) {
                return Ok(ControlFlow::Break(()));
            }
            if after.is_some_and(|a| id <= a)
                || !(unrestricted || self.may(Access::Read, &session_scope(id))?)
            {
                return Ok(ControlFlow::Continue(()));
            }
            let r = decode_record(id, v)?;
            out.push(SessionInfo::from(id, &r));
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(out)
    }

    /// Every session id, sorted.
    pub fn session_ids(&self) -> Result<Vec<String>> {
        let unrestricted = self.asker.unrestricted(&self.tx)?;
        let mut out = Vec::new();
        SESSIONS.each(&self.tx, .., |id, _| {
            if unrestricted || self.may(Access::Read, &session_scope(id))? {
                out.push(id.to_string());
            }
            Ok(())
        })?;
        Ok(out)
    }

    /// The messages saves have dropped from the session, oldest first.
    pub fn session_archived(&self, id: &str) -> Result<Vec<Archived>> {
        validate_session_id(id)?;
        self.require(Access::Read, &session_scope(id))?;
        let mut out = Vec::new();
        SESSION_ARCHIVE.each(&self.tx, range(id), |(_, seq), v| {
            out.push(decode("session_archive", &SKey(id, seq), v)?);
            Ok(())
        })?;
        Ok(out)
    }
}

impl Store {
    /// Replaces a session's messages; see [`WriteTxn::session_save`].
    pub fn session_save(
        &self,
        id: &str,
        messages: &[&str],
        expected_revision: Option<u64>,
    ) -> Result<SaveOutcome> {
        let id = id.to_string();
        // The operation owns its input (group commit may run it on another thread): one copy
        // into one buffer, not one allocation per message (a long session holds thousands).
        let all = Packed::of(messages);
        self.write_grouped(move |tx| {
            let refs = all.refs();
            tx.session_save(&id, &refs, expected_revision)
        })
    }
    /// Appends items; see [`WriteTxn::session_append`].
    pub fn session_append(
        &self,
        id: &str,
        items: &[&str],
        key: Option<&str>,
        expected_revision: Option<u64>,
    ) -> Result<SessionAppended> {
        let id = id.to_string();
        let key = key.map(str::to_string);
        let items: Vec<String> = items.iter().map(|m| m.to_string()).collect();
        self.write_grouped(move |tx| {
            let refs: Vec<&str> = items.iter().map(String::as_str).collect();
            tx.session_append(&id, &refs, key.as_deref(), expected_revision)
        })
    }
    /// Removes and returns the newest item; see [`WriteTxn::session_pop`].
    pub fn session_pop(&self, id: &str, expected_revision: Option<u64>) -> Result<Option<String>> {
        self.write(|tx| tx.session_pop(id, expected_revision))
    }
    /// Removes every live item; see [`WriteTxn::session_clear`].
    pub fn session_clear(&self, id: &str) -> Result<u64> {
        self.write(|tx| tx.session_clear(id))
    }
    /// Deletes a session; see [`WriteTxn::session_delete`].
    pub fn session_delete(&self, id: &str) -> Result<bool> {
        self.write(|tx| tx.session_delete(id))
    }
    /// Removes a session's archive; see [`WriteTxn::session_prune`].
    pub fn session_prune(&self, id: &str) -> Result<u64> {
        self.write(|tx| tx.session_prune(id))
    }
    /// Loads a session; see [`ReadTxn::session_load`].
    pub fn session_load(&self, id: &str) -> Result<Option<Vec<String>>> {
        self.audited(
            "session load",
            &session_scope(id),
            |r| r.session_load(id),
            |m| {
                vec![format!(
                    "{} messages",
                    m.as_ref().map(|v| v.len()).unwrap_or(0)
                )]
            },
        )
    }
    /// The latest items; see [`ReadTxn::session_items`].
    pub fn session_items(&self, id: &str, limit: Option<usize>) -> Result<Vec<String>> {
        self.audited(
            "session items",
            &session_scope(id),
            |r| r.session_items(id, limit),
            |m| vec![format!("{} items", m.len())],
        )
    }
    /// The latest items, reading past damaged ones; see [`ReadTxn::session_items_lossy`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = engram::Store::create(dir.path().join("m.redb")).unwrap();
    /// store.session_append("chat", &[r#"{"role":"user","content":"hi"}"#], None, None).unwrap();
    /// let r = store.session_items_lossy("chat", None).unwrap();
    /// assert_eq!(r.items.len(), 1);
    /// assert!(r.unreadable.is_empty() && r.damage_note("chat").is_none());
    /// ```
    pub fn session_items_lossy(&self, id: &str, limit: Option<usize>) -> Result<SessionItems> {
        self.audited(
            "session items",
            &session_scope(id),
            |r| r.session_items_lossy(id, limit),
            |m| vec![format!("{} items", m.items.len())],
        )
    }
    /// Loads a session, reading past damaged messages; see [`ReadTxn::session_load_lossy`].
    pub fn session_load_lossy(&self, id: &str) -> Result<Option<SessionItems>> {
        self.audited(
            "session load",
            &session_scope(id),
            |r| r.session_load_lossy(id),
            |m| {
                vec![format!(
                    "{} messages",
                    m.as_ref().map(|v| v.items.len()).unwrap_or(0)
                )]
            },
        )
    }
    /// A session's metadata; see [`ReadTxn::session_info`].
    pub fn session_info(&self, id: &str) -> Result<Option<SessionInfo>> {
        self.read(|r| r.session_info(id))
    }
    /// Lists sessions; see [`ReadTxn::session_list`].
    pub fn session_list(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<SessionInfo>> {
        self.read(|r| r.session_list(prefix, after, limit))
    }
    /// Every session id, sorted.
    pub fn session_ids(&self) -> Result<Vec<String>> {
        self.read(|r| r.session_ids())
    }
    /// The archive of a session; see [`ReadTxn::session_archived`].
    pub fn session_archived(&self, id: &str) -> Result<Vec<Archived>> {
        self.read(|r| r.session_archived(id))
    }
}

/// Checks the session tables for `verify`: every value decodes, every live message has the
/// hash of its text, every row belongs to a session, and each session's counters match its rows.
pub(crate) fn verify_sessions(
    r: &ReadTxn,
    problem: &mut dyn FnMut(String),
    checked: &mut u64,
) -> Result<()> {
    use std::collections::BTreeMap;
    #[derive(Default)]
    struct Seen {
        count: u64,
        bytes: u64,
        archived: u64,
        max_seq: Option<u64>,
        max_archive: Option<u64>,
    }
    let mut records: BTreeMap<String, SessionRecord> = BTreeMap::new();
    let kv = &r.tx;
    SESSIONS.each(kv, .., |id, v| {
        match decode::<SessionRecord>("sessions", &id, v) {
            Ok(rec) => {
                records.insert(id.to_string(), rec);
            }
            Err(e) => problem(e.to_string()),
        }
        Ok(())
    })?;
    *checked = records.len() as u64;
    let mut seen: BTreeMap<String, Seen> = BTreeMap::new();
    SESSION_MESSAGES.each(kv, .., |(id, seq), v| {
        let id = id.as_ref();
        if !records.contains_key(id) {
            problem(format!(
                "session message ({id:?}, {seq}) belongs to no session"
            ));
            return Ok(());
        }
        let s = seen.entry(id.to_string()).or_default();
        s.count += 1;
        s.max_seq = Some(seq);
        match decode_message(id, seq, v) {
            Ok(text) => {
                s.bytes += text.len() as u64;
                match SESSION_HASHES.get(kv, (id, seq))? {
                    Some(h) => match decode_hash(id, seq, &h) {
                        Ok(h) if h == hash(&text) => {}
                        Ok(_) => problem(format!(
                            "session message ({id:?}, {seq}) does not match its hash"
                        )),
                        Err(e) => problem(e.to_string()),
                    },
                    None => problem(format!("session message ({id:?}, {seq}) has no hash")),
                }
            }
            Err(e) => problem(e.to_string()),
        }
        Ok(())
    })?;
    SESSION_HASHES.each(kv, .., |(id, seq), _| {
        if !SESSION_MESSAGES.contains(kv, (&id, seq))? {
            problem(format!("session hash ({id:?}, {seq}) has no message"));
        }
        Ok(())
    })?;
    SESSION_ARCHIVE.each(kv, .., |(id, seq), v| {
        let id = id.as_ref();
        if !records.contains_key(id) {
            problem(format!(
                "archived message ({id:?}, {seq}) belongs to no session"
            ));
            return Ok(());
        }
        let s = seen.entry(id.to_string()).or_default();
        s.archived += 1;
        s.max_archive = Some(seq);
        if let Err(e) = decode::<Archived>("session_archive", &SKey(id, seq), v) {
            problem(e.to_string());
        }
        Ok(())
    })?;
    SESSION_IDEMPOTENCY.each(kv, .., |(id, key), v| {
        let id = id.as_ref();
        if !records.contains_key(id) {
            problem(format!(
                "session idempotency key ({id:?}, {key:?}) belongs to no session"
            ));
        } else if let Err(e) = decode::<IdemRecord>("session_idempotency", &key, v) {
            problem(e.to_string());
        }
        Ok(())
    })?;
    for (id, rec) in &records {
        let s = seen.remove(id).unwrap_or_default();
        if s.count != rec.count || s.bytes != rec.bytes {
            problem(format!(
                "session {id:?} counts {} messages of {} bytes but holds {} of {}",
                rec.count, rec.bytes, s.count, s.bytes
            ));
        }
        if s.archived != rec.archived {
            problem(format!(
                "session {id:?} counts {} archived but holds {}",
                rec.archived, s.archived
            ));
        }
        if s.max_seq.is_some_and(|m| m >= rec.next_seq)
            || s.max_archive.is_some_and(|m| m >= rec.archive_next)
        {
            problem(format!(
                "session {id:?} holds rows past its sequence counters"
            ));
        }
    }
    Ok(())
}
