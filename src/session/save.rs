//! Saving a whole session ([`WriteTxn::session_save`]): only what changed is written (the common
//! save, which extends the stored list, is recognized by the hash chain of the last chunk and
//! reads no stored hash), dropped messages go to the archive, which the retention setting
//! bounds. Also the write steps the append-style calls share: the last chunk, pushing messages
//! onto it, the next revision.

use std::borrow::Cow;
use std::collections::HashSet;
use std::ops::ControlFlow;

use super::record::{
    check_revision, compact_nth, hash, range, read_record, session_scope, validate_new_session_id,
    validate_session_id, Archived, SKey, SaveOutcome, SessionRecord,
};
use crate::error::Result;
use crate::storage::access::Access;
use crate::storage::chunk::{
    chain_next, decode_chunk, put_chunks, Chunk, Live, Packer, CHAIN_START,
};
use crate::storage::codec::{decode, encode};
use crate::storage::kv::Dir;
use crate::storage::tables::{SESSIONS, SESSION_ARCHIVE, SESSION_CHUNKS};
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

    /// Stores the session's record after a change: a new revision, updated now.
    pub(super) fn put_changed(&mut self, id: &str, rec: &mut SessionRecord) -> Result<()> {
        rec.revision = self.next_revision(rec.revision);
        rec.updated_us = self.now;
        self.put_session(id, rec)
    }

    /// Checks the session id, and that the caller may write the session.
    pub(super) fn may_write_session(&self, id: &str) -> Result<()> {
        validate_session_id(id)?;
        self.require(Access::Write, &session_scope(id))
    }

    pub(super) fn session_record(&self, id: &str) -> Result<Option<SessionRecord>> {
        read_record(&*self.tx, id)
    }

    pub(super) fn put_session(&mut self, id: &str, rec: &SessionRecord) -> Result<()> {
        SESSIONS.put(&mut *self.tx, id, &encode(rec)?)
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

    /// The session's last chunk with its key (one reverse probe), or `None` when it has none.
    pub(super) fn last_chunk(&self, id: &str) -> Result<Option<(u64, Chunk)>> {
        SESSION_CHUNKS.edge(&*self.tx, range(id), Dir::Reverse, |(_, key), v| {
            Ok((key, decode_chunk(id, key, v)?))
        })
    }

    /// Appends `msgs` (compact texts with their hashes) to the live list, after `tail` (the
    /// session's last chunk, which is filled first while they fit), numbering them from
    /// `rec.next_seq`.
    pub(super) fn push_messages<S: AsRef<str>>(
        &mut self,
        id: &str,
        rec: &mut SessionRecord,
        tail: Option<(u64, Chunk)>,
        msgs: &[(S, [u8; 16])],
    ) -> Result<()> {
        if msgs.is_empty() {
            return Ok(());
        }
        let mut packer = match tail {
            Some((key, chunk)) => Packer::resume(key, chunk),
            None => Packer::after(CHAIN_START),
        };
        for (text, hsh) in msgs {
            let text = text.as_ref();
            packer.push(rec.next_seq, *hsh, text.to_string());
            rec.next_seq += 1;
            rec.count += 1;
            rec.bytes += text.len() as u64;
        }
        put_chunks(&mut *self.tx, id, &packer.finish())
    }

    /// Moves `texts` (live messages just dropped) to the session's archive.
    fn archive(&mut self, id: &str, rec: &mut SessionRecord, texts: Vec<String>) -> Result<()> {
        for message in texts {
            let len = message.len() as u64;
            let entry = Archived {
                archived_us: self.now,
                message,
            };
            SESSION_ARCHIVE.put(&mut *self.tx, (id, rec.archive_next), &encode(&entry)?)?;
            rec.archive_next += 1;
            rec.archived += 1;
            rec.archived_bytes += len;
        }
        Ok(())
    }

    pub(super) fn enforce_retention(&mut self, id: &str, rec: &mut SessionRecord) -> Result<()> {
        let max = self.config()?.session_archive_max;
        if max == 0 || rec.archived <= max {
            return Ok(());
        }
        let excess = rec.archived - max;
        let mut victims = Vec::new();
        SESSION_ARCHIVE.scan(&*self.tx, range(id), Dir::Forward, |(_, seq), v| {
            if victims.len() as u64 >= excess {
                return Ok(ControlFlow::Break(()));
            }
            let e: Archived = decode("session_archive", &SKey(id, seq), v)?;
            victims.push((seq, e.message.len() as u64));
            Ok(ControlFlow::Continue(()))
        })?;
        for (seq, len) in victims {
            SESSION_ARCHIVE.delete(&mut *self.tx, (id, seq))?;
            rec.archived -= 1;
            rec.archived_bytes = rec.archived_bytes.saturating_sub(len);
        }
        Ok(())
    }

    /// Replaces the session's messages with `messages` (JSON objects), atomically, writing only
    /// what changed; dropped messages go to the archive. With `expected_revision`, fails with
    /// [`crate::Error::Conflict`] (writing nothing) unless the session is at that revision (0: absent).
    pub fn session_save(
        &mut self,
        id: &str,
        messages: &[&str],
        expected_revision: Option<u64>,
    ) -> Result<SaveOutcome> {
        self.may_write_session(id)?;
        let existing = self.session_record(id)?;
        if existing.is_none() {
            validate_new_session_id(id)?;
        }
        let mut rec = existing.clone().unwrap_or_else(|| self.new_record());
        let tail = if rec.count > 0 {
            self.last_chunk(id)?
        } else {
            None
        };
        let Some(added) = extends(messages, &rec, tail.as_ref()) else {
            return self.save_other(id, messages, expected_revision, existing, rec);
        };
        // The common save: the stored list plus new messages. No stored hash is read.
        let kept = messages.len() - added;
        let new: Vec<(String, [u8; 16])> = messages
            .iter()
            .enumerate()
            .skip(kept)
            .map(|(i, m)| compact_nth(m, "message", i))
            .collect::<Result<_>>()?;
        check_revision(existing.as_ref(), expected_revision)?;
        if existing.is_some() && new.is_empty() {
            return Ok(unchanged(&rec, kept));
        }
        self.push_messages(id, &mut rec, tail, &new)?;
        self.finish_save(id, &mut rec, kept, new.len(), 0)
    }

    /// Retention, the revision and the record after a save that wrote; its outcome.
    fn finish_save(
        &mut self,
        id: &str,
        rec: &mut SessionRecord,
        kept: usize,
        written: usize,
        archived: usize,
    ) -> Result<SaveOutcome> {
        self.enforce_retention(id, rec)?;
        self.put_changed(id, rec)?;
        Ok(SaveOutcome {
            revision: rec.revision,
            kept: kept as u64,
            written: written as u64,
            archived: archived as u64,
        })
    }

    /// A save that does not extend the stored list: the stored hashes are read (one range scan
    /// of the chunks), the list is aligned with them, what it drops is archived, and the chunks
    /// from the first changed one to the end are rewritten.
    fn save_other(
        &mut self,
        id: &str,
        messages: &[&str],
        expected_revision: Option<u64>,
        existing: Option<SessionRecord>,
        mut rec: SessionRecord,
    ) -> Result<SaveOutcome> {
        let chunks = self.all_chunks(id)?;
        let stored: Vec<(u64, [u8; 16])> = chunks
            .iter()
            .flat_map(|c| c.lives.iter().map(|l| (l.seq, l.hash)))
            .collect();
        let new = checked(messages, &stored)?;
        check_revision(existing.as_ref(), expected_revision)?;
        let (p, j) = kept_runs(&stored, &new);
        let s = stored.len();
        let kept = p + (s - j);
        let to_write = new.get(kept.min(new.len())..).unwrap_or_default();
        if existing.is_some() && p == j && to_write.is_empty() {
            return Ok(unchanged(&rec, kept));
        }
        // The first chunk that changes: the one holding message `p` (the last one when only
        // messages are added). It and every chunk after it are rewritten.
        let at = p.min(s.saturating_sub(1));
        let first = chunks.iter().rposition(|c| c.start <= at).unwrap_or(0);
        let before = first
            .checked_sub(1)
            .and_then(|i| chunks.get(i))
            .map_or(CHAIN_START, |c| c.chain);
        let mut packer = Packer::after(before);
        let mut dropped = Vec::with_capacity(j - p);
        for c in chunks.into_iter().skip(first) {
            SESSION_CHUNKS.delete(&mut *self.tx, (id, c.key))?;
            for (i, l) in (c.start..).zip(c.lives) {
                if (p..j).contains(&i) {
                    rec.count = rec.count.saturating_sub(1);
                    rec.bytes = rec.bytes.saturating_sub(l.text.len() as u64);
                    dropped.push(l.text);
                } else {
                    packer.push(l.seq, l.hash, l.text);
                }
            }
        }
        let archived = dropped.len();
        self.archive(id, &mut rec, dropped)?;
        for (text, hsh) in to_write {
            packer.push(rec.next_seq, *hsh, text.to_string());
            rec.next_seq += 1;
            rec.count += 1;
            rec.bytes += text.len() as u64;
        }
        put_chunks(&mut *self.tx, id, &packer.finish())?;
        self.finish_save(id, &mut rec, kept, to_write.len(), archived)
    }

    /// Every chunk of the session, decoded, oldest first.
    fn all_chunks(&self, id: &str) -> Result<Vec<Stored>> {
        // Every chunk is read: a server sends them in one statement, not in pages.
        SESSION_CHUNKS.prefetch_range(&*self.tx, range(id))?;
        let mut out: Vec<Stored> = Vec::new();
        let mut start = 0;
        SESSION_CHUNKS.each(&*self.tx, range(id), |(_, key), v| {
            let c = decode_chunk(id, key, v)?;
            let chain = c.chain;
            let lives: Vec<Live> = c.into_live(key).collect();
            let n = lives.len();
            out.push(Stored {
                key,
                chain,
                start,
                lives,
            });
            start += n;
            Ok(())
        })?;
        Ok(out)
    }
}

/// A stored chunk in a save that reads them all: its key, its chain, the index of its first
/// message in the live list, its messages.
struct Stored {
    key: u64,
    chain: [u8; 16],
    start: usize,
    lives: Vec<Live>,
}

/// The outcome of a save that changes nothing.
fn unchanged(rec: &SessionRecord, kept: usize) -> SaveOutcome {
    SaveOutcome {
        revision: rec.revision,
        kept: kept as u64,
        written: 0,
        archived: 0,
    }
}

/// How many messages a save adds to the stored list, when it is the stored list plus new
/// messages: the hash chain of its first `count` messages equals the last chunk's. `None`
/// otherwise.
fn extends(messages: &[&str], rec: &SessionRecord, tail: Option<&(u64, Chunk)>) -> Option<usize> {
    let count = usize::try_from(rec.count).ok()?;
    let stored = messages.get(..count)?;
    let want = match tail {
        Some((_, c)) => c.chain,
        None if count == 0 => CHAIN_START,
        None => return None,
    };
    let chain = stored
        .iter()
        .fold(CHAIN_START, |c, m| chain_next(&c, &hash(m)));
    (chain == want).then_some(messages.len() - count)
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
