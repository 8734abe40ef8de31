//! The append-style contract (OpenAI Agents SDK, LangChain): [`WriteTxn::session_append`] with
//! an idempotency key, [`WriteTxn::session_pop`], [`WriteTxn::session_clear`], and
//! [`WriteTxn::session_delete`] and [`WriteTxn::session_prune`].

use std::ops::ControlFlow;

use super::record::{
    check_revision, compact_nth, range, validate_new_session_id, IdemRecord, SessionAppended,
};
use crate::error::{Error, Result};
use crate::storage::chunk::{decode_chunk, put_chunks, Live, Packer, CHAIN_START};
use crate::storage::codec::{decode, encode};
use crate::storage::kv::Dir;
use crate::storage::tables::{SESSIONS, SESSION_ARCHIVE, SESSION_CHUNKS, SESSION_IDEMPOTENCY};
use crate::storage::txn::WriteTxn;

impl WriteTxn<'_> {
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
        self.may_write_session(id)?;
        if let Some(k) = key {
            crate::domain::text::validate_key(k)?;
        }
        let new: Vec<(String, [u8; 16])> = items
            .iter()
            .enumerate()
            .map(|(i, m)| compact_nth(m, "item", i))
            .collect::<Result<_>>()?;
        let mut batch = xxhash_rust::xxh3::Xxh3::new();
        for (_, h) in &new {
            batch.update(h);
        }
        let batch_hash = batch.digest128().to_le_bytes();
        if let Some(k) = key {
            let found = {
                match SESSION_IDEMPOTENCY.get(&*self.tx, (id, k))? {
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
        if existing.is_none() {
            validate_new_session_id(id)?;
        }
        check_revision(existing.as_ref(), expected_revision)?;
        let mut rec = existing.unwrap_or_else(|| self.new_record());
        let first_index = rec.count;
        if !new.is_empty() {
            let tail = if rec.count > 0 {
                self.last_chunk(id)?
            } else {
                None
            };
            self.push_messages(id, &mut rec, tail, &new)?;
        }
        self.put_changed(id, &mut rec)?;
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
            SESSION_IDEMPOTENCY.put(&mut *self.tx, (id, k), &encode(&r)?)?;
        }
        Ok(outcome)
    }

    /// Removes and returns the newest item, or `None` when the session is empty or absent.
    pub fn session_pop(
        &mut self,
        id: &str,
        expected_revision: Option<u64>,
    ) -> Result<Option<String>> {
        self.may_write_session(id)?;
        let existing = self.session_record(id)?;
        check_revision(existing.as_ref(), expected_revision)?;
        let Some(mut rec) = existing else {
            return Ok(None);
        };
        // The last chunk, and the chain before it (the previous chunk's), to rewrite it without
        // its last message.
        let mut last = Vec::with_capacity(2);
        SESSION_CHUNKS.scan(&*self.tx, range(id), Dir::Reverse, |(_, key), v| {
            last.push((key, decode_chunk(id, key, v)?));
            Ok(if last.len() >= 2 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        })?;
        let mut last = last.into_iter();
        let Some((key, chunk)) = last.next() else {
            return Ok(None);
        };
        let before = last.next().map_or(CHAIN_START, |(_, c)| c.chain);
        let mut lives: Vec<Live> = chunk.into_live(key).collect();
        let Some(popped) = lives.pop() else {
            return Ok(None);
        };
        SESSION_CHUNKS.delete(&mut *self.tx, (id, key))?;
        let mut packer = Packer::after(before);
        for l in lives {
            packer.push(l.seq, l.hash, l.text);
        }
        put_chunks(&mut *self.tx, id, &packer.finish())?;
        rec.count = rec.count.saturating_sub(1);
        rec.bytes = rec.bytes.saturating_sub(popped.text.len() as u64);
        self.put_changed(id, &mut rec)?;
        Ok(Some(popped.text))
    }

    /// Removes every live item of the session (the archive stays; see
    /// [`WriteTxn::session_prune`]). Returns how many were removed.
    pub fn session_clear(&mut self, id: &str) -> Result<u64> {
        self.may_write_session(id)?;
        let Some(mut rec) = self.session_record(id)? else {
            return Ok(0);
        };
        let n = rec.count;
        SESSION_CHUNKS.delete_range(&mut *self.tx, range(id))?;
        rec.count = 0;
        rec.bytes = 0;
        self.put_changed(id, &mut rec)?;
        Ok(n)
    }

    /// Deletes the session wholly: its messages, archive and idempotency keys. Deleting a
    /// session that does not exist is not an error. Returns whether it existed.
    pub fn session_delete(&mut self, id: &str) -> Result<bool> {
        self.may_write_session(id)?;
        if !SESSIONS.delete(&mut *self.tx, id)? {
            return Ok(false);
        }
        SESSION_CHUNKS.delete_range(&mut *self.tx, range(id))?;
        SESSION_ARCHIVE.delete_range(&mut *self.tx, range(id))?;
        let mut keys = Vec::new();
        SESSION_IDEMPOTENCY.scan(&*self.tx, (id, "").., Dir::Forward, |(sid, key), _| {
            if sid != id {
                return Ok(ControlFlow::Break(()));
            }
            keys.push(key.to_string());
            Ok(ControlFlow::Continue(()))
        })?;
        for k in keys {
            SESSION_IDEMPOTENCY.delete(&mut *self.tx, (id, k.as_str()))?;
        }
        Ok(true)
    }

    /// Removes the session's archive. Returns how many archived messages were removed.
    pub fn session_prune(&mut self, id: &str) -> Result<u64> {
        self.may_write_session(id)?;
        let Some(mut rec) = self.session_record(id)? else {
            return Ok(0);
        };
        let n = rec.archived;
        if n == 0 {
            return Ok(0);
        }
        SESSION_ARCHIVE.delete_range(&mut *self.tx, range(id))?;
        rec.archived = 0;
        rec.archived_bytes = 0;
        self.put_changed(id, &mut rec)?;
        Ok(n)
    }
}
