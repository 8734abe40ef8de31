//! The session layer's part of `verify` ([`crate::Store::verify`]): every value decodes, every
//! live message has the hash of its text, every row belongs to a session, and each session's
//! counters match its rows.

use super::record::{decode_hash, decode_message, hash, Archived, IdemRecord, SKey, SessionRecord};
use crate::error::Result;
use crate::storage::codec::decode;
use crate::storage::tables::{
    SESSIONS, SESSION_ARCHIVE, SESSION_HASHES, SESSION_IDEMPOTENCY, SESSION_MESSAGES,
};
use crate::storage::txn::ReadTxn;

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
