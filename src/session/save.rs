//! Saving a whole session ([`WriteTxn::session_save`]): only what changed is written, dropped
//! messages go to the archive, which the retention setting bounds. Also the write steps the
//! append-style calls share: pushing and dropping messages, the next revision.

use std::borrow::Cow;
use std::collections::HashSet;
use std::ops::ControlFlow;

use super::record::{
    check_revision, compact_nth, decode_hash, decode_message, hash, range, read_record,
    session_scope, validate_session_id, Archived, SKey, SaveOutcome, SessionRecord,
};
use crate::error::{Error, Result};
use crate::storage::access::Access;
use crate::storage::codec::{decode, encode};
use crate::storage::kv::Dir;
use crate::storage::tables::{SESSIONS, SESSION_ARCHIVE, SESSION_HASHES, SESSION_MESSAGES};
use crate::storage::txn::WriteTxn;

impl WriteTxn<'_> {
    /// The revision of a session's next change: past its current one and at least the commit
    /// time in microseconds. Per session, so that no row is shared by every session writer (on
    /// a server, a store-wide counter would serialize them all); never repeated for an id, even
    /// after a delete, as long as the clock does not go back (docs/design.md, sessions).
    pub(super) fn next_revision(&self, current: u64) -> u64 {
        current
            .saturating_add(1)
            .max(u64::try_from(self.now).unwrap_or(0))
    }

    pub(super) fn session_record(&self, id: &str) -> Result<Option<SessionRecord>> {
        read_record(&self.tx, id)
    }

    pub(super) fn put_session(&mut self, id: &str, rec: &SessionRecord) -> Result<()> {
        SESSIONS.put(&mut self.tx, id, &encode(rec)?)
    }

    pub(super) fn new_record(&self) -> SessionRecord {
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

    pub(super) fn push_messages<S: AsRef<str>>(
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
    pub(super) fn drop_messages(
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

    pub(super) fn enforce_retention(&mut self, id: &str, rec: &mut SessionRecord) -> Result<()> {
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
        let stored = self.stored_hashes(id, &rec)?;
        let new = checked(messages, &stored)?;
        check_revision(existing.as_ref(), expected_revision)?;
        let (p, j) = kept_runs(&stored, &new);
        let kept = p + (stored.len() - j);
        let to_archive: Vec<u64> = stored
            .get(p..j)
            .unwrap_or_default()
            .iter()
            .map(|x| x.0)
            .collect();
        let to_write = new.get(kept.min(new.len())..).unwrap_or_default();
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

    /// The sequence numbers and hashes of the session's live messages, oldest first.
    fn stored_hashes(&self, id: &str, rec: &SessionRecord) -> Result<Vec<(u64, [u8; 16])>> {
        // `count` is stored bytes: a capacity from it is capped, the vector grows past the cap.
        let mut v = Vec::with_capacity(usize::try_from(rec.count).unwrap_or(0).min(1 << 16));
        if rec.count > 64 {
            // Every stored hash is read: a server sends them in one statement, not in pages.
            SESSION_HASHES.prefetch_range(&self.tx, range(id))?;
        }
        SESSION_HASHES.each(&self.tx, range(id), |(_, seq), val| {
            v.push((seq, decode_hash(id, seq, val)?));
            Ok(())
        })?;
        Ok(v)
    }
}

/// The messages of a save, each compact and checked, with its hash.
///
/// A message whose bytes hash to a stored message is that message: already checked and
/// compact. Only the others are parsed, so a save costs what changed, not the history. The
/// common save appends to what is stored: its stored prefix is matched in order, and only the
/// messages after it are looked up among the stored hashes (one by one when few, through a set
/// when many).
fn checked<'m>(
    messages: &[&'m str],
    stored: &[(u64, [u8; 16])],
) -> Result<Vec<(Cow<'m, str>, [u8; 16])>> {
    let hashes: Vec<[u8; 16]> = messages.iter().map(|m| hash(m)).collect();
    let prefix = stored
        .iter()
        .zip(&hashes)
        .take_while(|(a, b)| a.1 == **b)
        .count();
    let after = hashes.len() - prefix;
    let set: Option<HashSet<[u8; 16]>> =
        (after.saturating_mul(stored.len()) > 4096).then(|| stored.iter().map(|x| x.1).collect());
    let known = |i: usize, h: &[u8; 16]| {
        i < prefix
            || match &set {
                Some(set) => set.contains(h),
                None => stored.iter().any(|x| x.1 == *h),
            }
    };
    messages
        .iter()
        .zip(&hashes)
        .enumerate()
        .map(|(i, (m, h))| {
            if known(i, h) {
                return Ok((Cow::Borrowed(*m), *h));
            }
            let (c, h) = compact_nth(m, "message", i)?;
            Ok((Cow::Owned(c), h))
        })
        .collect()
}

/// How a save lines up with what is stored: the common prefix `p`, and the first `j >= p` such
/// that `stored[j..]` continues as `new[p..]` (that run is kept in place; `stored[p..j]` goes to
/// the archive).
fn kept_runs(stored: &[(u64, [u8; 16])], new: &[(Cow<'_, str>, [u8; 16])]) -> (usize, usize) {
    let (s, n) = (stored.len(), new.len());
    let p = stored
        .iter()
        .zip(new)
        .take_while(|(a, b)| a.1 == b.1)
        .count();
    if p < n {
        let start = p.max(s.saturating_sub(n - p));
        for cand in start..s {
            let run = s - cand;
            let same = stored
                .get(cand..s)
                .zip(new.get(p..p + run))
                .is_some_and(|(a, b)| a.iter().zip(b).all(|(x, y)| x.1 == y.1));
            if same {
                return (p, cand);
            }
        }
    }
    (p, s)
}
