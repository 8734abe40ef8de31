//! The session layer's part of `verify` ([`crate::Store::verify`]): every value decodes, every
//! live message has the hash of its text, every chunk holds the session's hash chain, every row
//! belongs to a session, and each session's counters match its rows. A format-2 store (read by
//! a read-only handle before its upgrade) is checked as format 2 lays it out.

use std::collections::BTreeMap;

use super::record::{decode_message, hash, Archived, IdemRecord, SKey, SessionRecord};
use crate::error::Result;
use crate::storage::chunk::{
    chain_next, decode_chunk, decode_hash, CHAIN_START, CHUNK_MAX_ENTRIES,
};
use crate::storage::codec::decode;
use crate::storage::keys::{Elem, Table};
use crate::storage::kv::KvRead;
use crate::storage::tables::{
    stored_format, CHUNK_FORMAT, SESSIONS, SESSION_ARCHIVE, SESSION_CHUNKS, SESSION_HASHES,
    SESSION_IDEMPOTENCY, SESSION_MESSAGES,
};
use crate::storage::txn::ReadTxn;

/// What a session's rows add up to.
#[derive(Default)]
struct Seen {
    count: u64,
    bytes: u64,
    archived: u64,
    max_seq: Option<u64>,
    max_archive: Option<u64>,
    /// The hash chain so far (format 3), unknown after a damaged chunk.
    chain: Option<[u8; 16]>,
}

type Records = BTreeMap<String, SessionRecord>;
type Tally = BTreeMap<String, Seen>;

/// What the checks of the session tables share: the session records (read first), what each
/// session's rows add up to so far, and where problems go.
struct Check<'a> {
    records: Records,
    seen: Tally,
    problem: &'a mut dyn FnMut(String),
}

impl Check<'_> {
    /// Visits the rows of `t` (keyed by session id first) whose session has a record; of every
    /// other row, tells that it (`what`, then its key) belongs to no session.
    fn each_owned<X: Elem>(
        &mut self,
        kv: &(impl KvRead + ?Sized),
        t: Table<(&'static str, X)>,
        what: &str,
        mut f: impl FnMut(&mut Self, &str, X::Last<'_>, &[u8]) -> Result<()>,
    ) -> Result<()>
    where
        for<'k> X::Last<'k>: std::fmt::Debug,
    {
        t.each(kv, .., |(id, k), v| {
            let id = id.as_ref();
            if !self.records.contains_key(id) {
                (self.problem)(format!("{what} ({id:?}, {k:?}) belongs to no session"));
                return Ok(());
            }
            f(self, id, k, v)
        })
    }
}

/// Checks the session tables for `verify`: every value decodes, every live message has the
/// hash of its text, every row belongs to a session, and each session's counters match its rows.
pub(crate) fn verify_sessions(
    r: &ReadTxn,
    problem: &mut dyn FnMut(String),
    checked: &mut u64,
) -> Result<()> {
    let mut records: Records = BTreeMap::new();
    let kv = r.tx;
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
    let mut c = Check {
        records,
        seen: BTreeMap::new(),
        problem,
    };
    // A damaged format value is the store's checks' to report; the chunks are then checked.
    if stored_format(kv).ok().flatten().unwrap_or(CHUNK_FORMAT) < CHUNK_FORMAT {
        verify_rows(kv, &mut c)?;
    } else {
        verify_chunks(kv, &mut c)?;
    }
    c.each_owned(kv, SESSION_ARCHIVE, "archived message", |c, id, seq, v| {
        let s = c.seen.entry(id.to_string()).or_default();
        s.archived += 1;
        s.max_archive = Some(seq);
        if let Err(e) = decode::<Archived>("session_archive", &SKey(id, seq), v) {
            (c.problem)(e.to_string());
        }
        Ok(())
    })?;
    let what = "session idempotency key";
    c.each_owned(kv, SESSION_IDEMPOTENCY, what, |c, _, key, v| {
        if let Err(e) = decode::<IdemRecord>("session_idempotency", &key, v) {
            (c.problem)(e.to_string());
        }
        Ok(())
    })?;
    let Check {
        records,
        mut seen,
        problem,
    } = c;
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

/// The live messages of format 2: one row per message in `session_messages`, its hash beside it
/// in `session_hashes`.
fn verify_rows(kv: &(impl KvRead + ?Sized), c: &mut Check<'_>) -> Result<()> {
    c.each_owned(kv, SESSION_MESSAGES, "session message", |c, id, seq, v| {
        let Check { seen, problem, .. } = c;
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
            (c.problem)(format!("session hash ({id:?}, {seq}) has no message"));
        }
        Ok(())
    })?;
    Ok(())
}

/// The live messages of format 3: every chunk decodes, holds 1 to 64 messages whose hashes
/// match their texts and whose sequence numbers increase across the session, and carries the
/// chain recomputed from the session's first message; no format-2 row is left.
fn verify_chunks(kv: &(impl KvRead + ?Sized), c: &mut Check<'_>) -> Result<()> {
    c.each_owned(kv, SESSION_CHUNKS, "session chunk", |c, id, key, v| {
        let Check { seen, problem, .. } = c;
        let s = seen.entry(id.to_string()).or_insert_with(|| Seen {
            chain: Some(CHAIN_START),
            ..Seen::default()
        });
        let c = match decode_chunk(id, key, v) {
            Ok(c) => c,
            Err(e) => {
                s.chain = None;
                problem(e.to_string());
                return Ok(());
            }
        };
        if c.entries.is_empty() || c.entries.len() > CHUNK_MAX_ENTRIES {
            problem(format!(
                "session chunk ({id:?}, {key}) holds {} messages (1 to {CHUNK_MAX_ENTRIES})",
                c.entries.len()
            ));
        }
        if s.max_seq.is_some_and(|m| key <= m) {
            problem(format!(
                "session chunk ({id:?}, {key}) starts at or before the previous chunk's end"
            ));
        }
        let stored_chain = c.chain;
        for l in c.into_live(key) {
            if l.hash != hash(&l.text) {
                problem(format!(
                    "session message ({id:?}, {}) does not match its hash",
                    l.seq
                ));
            }
            s.chain = s.chain.map(|ch| chain_next(&ch, &l.hash));
            s.count += 1;
            s.bytes += l.text.len() as u64;
            s.max_seq = Some(l.seq);
        }
        if s.chain.is_some_and(|ch| ch != stored_chain) {
            problem(format!(
                "session chunk ({id:?}, {key}) does not hold the session's hash chain"
            ));
            s.chain = None;
        }
        Ok(())
    })?;
    for (name, t) in [
        ("session_messages", SESSION_MESSAGES),
        ("session_hashes", SESSION_HASHES),
    ] {
        let mut left = 0u64;
        t.each(kv, .., |_, _| {
            left += 1;
            Ok(())
        })?;
        if left > 0 {
            (c.problem)(format!(
                "{name} holds {left} rows in a format-3 store (they move to session_chunks)"
            ));
        }
    }
    Ok(())
}
