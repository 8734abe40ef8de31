//! Reading sessions: a session's messages whole or its latest items, strictly or past damage
//! ([`ReadTxn::session_load`], [`ReadTxn::session_items_lossy`], ...), its counters, the list of
//! sessions, and the archive.

use std::ops::ControlFlow;

use super::record::{
    decode_message, decode_record, range, read_record, session_scope, validate_session_id,
    Archived, SKey, SessionInfo, SessionItems,
};
use crate::error::{Error, Result};
use crate::storage::access::Access;
use crate::storage::chunk::{decode_chunk, salvage};
use crate::storage::codec::decode;
use crate::storage::keys::Table;
use crate::storage::kv::Dir;
use crate::storage::tables::{
    stored_format, CHUNK_FORMAT, SESSIONS, SESSION_ARCHIVE, SESSION_CHUNKS, SESSION_MESSAGES,
};
use crate::storage::txn::ReadTxn;

/// Which of a session's messages a read wants.
#[derive(Clone, Copy)]
enum Window {
    /// All of them, the session's record saying how many there are.
    All(u64),
    /// All of them, how many not known.
    Unknown,
    /// The latest `n`.
    Latest(usize),
}

impl ReadTxn<'_> {
    /// Fails with [`Error::Denied`] unless the principal may read session `id` (its scope's
    /// name built only when there is a principal to check: `Asker::require_with`).
    fn require_session(&self, id: &str) -> Result<()> {
        self.asker
            .require_with(self.tx, Access::Read, || session_scope(id).into())
    }

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
        self.require_session(id)?;
        let Some(rec) = read_record(self.tx, id)? else {
            return Ok(None);
        };
        self.read_messages(id, Window::All(rec.count), lossy)
            .map(Some)
    }

    fn messages(&self, id: &str, limit: Option<usize>, lossy: bool) -> Result<SessionItems> {
        validate_session_id(id)?;
        self.require_session(id)?;
        let window = match limit {
            Some(n) => Window::Latest(n),
            None => Window::Unknown,
        };
        self.read_messages(id, window, lossy)
    }

    /// The latest `limit` messages, oldest first, after the caller's checks; `lossy` skips and
    /// names damaged chunks instead of failing. A read-only handle of a format-2 store (which
    /// has no chunks until its first read-write open) reads the format-2 rows instead.
    fn read_messages(&self, id: &str, window: Window, lossy: bool) -> Result<SessionItems> {
        let r = self.read_chunks(id, window, lossy);
        // Found nothing, or failed: the store may be format 2, its chunks not yet made (the
        // table may even be missing). Only then is the format read.
        let found = matches!(&r, Ok(i) if !i.items.is_empty() || !i.unreadable.is_empty());
        if !found && matches!(stored_format(self.tx), Ok(Some(f)) if f < CHUNK_FORMAT) {
            return self.read_rows(id, window, lossy);
        }
        r
    }

    /// [`ReadTxn::read_messages`] over the chunks: one range scan (for `limit`, reverse until
    /// `limit` messages). From a chunk that fails to decode, the lossy reads take every message
    /// that still has its stored hash and name the others ([`salvage`]), each counting toward
    /// `limit`.
    fn read_chunks(&self, id: &str, window: Window, lossy: bool) -> Result<SessionItems> {
        self.read_window(
            &SESSION_CHUNKS,
            id,
            window,
            |key, v, dir, left, out| match decode_chunk(id, key, v) {
                Ok(c) if dir == Dir::Forward => {
                    let n = c.entries.len();
                    out.items.extend(c.entries.into_iter().map(|e| e.text));
                    Ok(n)
                }
                Ok(c) => {
                    let before = out.items.len();
                    out.items
                        .extend(c.entries.into_iter().rev().take(left).map(|e| e.text));
                    Ok(out.items.len() - before)
                }
                Err(Error::Corrupt { .. }) if lossy => {
                    let mut parts = salvage(key, v);
                    if dir == Dir::Reverse {
                        parts.reverse();
                    }
                    let n = parts.len().min(left);
                    for part in parts.into_iter().take(n) {
                        match part {
                            Ok(text) => out.items.push(text),
                            Err(seq) => out.unreadable.push(seq),
                        }
                    }
                    Ok(n)
                }
                Err(e) => Err(e),
            },
        )
    }

    /// [`ReadTxn::read_messages`] over the rows of store format 2, one per message.
    fn read_rows(&self, id: &str, window: Window, lossy: bool) -> Result<SessionItems> {
        self.read_window(&SESSION_MESSAGES, id, window, |seq, v, _, _, out| {
            match decode_message(id, seq, v) {
                Ok(m) => out.items.push(m),
                Err(Error::Corrupt { .. }) if lossy => out.unreadable.push(seq),
                Err(e) => return Err(e),
            }
            Ok(1)
        })
    }

    /// The scan both layouts share: the whole session forward (a server fetches it in one
    /// statement), or the latest `limit` records backward, then put back in order. `take` adds
    /// what one row holds to the items (newest first when reading backward, at most `left`),
    /// and returns how many records it counted. A whole read of a session whose record says how
    /// many messages it holds stops once it has them: without that, the scan would go on to the
    /// next key to see that the session ended there, and that key usually lies in another leaf
    /// (another session's), one more page to read (`verify` checks the count against the rows).
    fn read_window(
        &self,
        table: &Table<(&'static str, u64)>,
        id: &str,
        window: Window,
        mut take: impl FnMut(u64, &[u8], Dir, usize, &mut SessionItems) -> Result<usize>,
    ) -> Result<SessionItems> {
        let mut out = SessionItems {
            items: Vec::new(),
            unreadable: Vec::new(),
        };
        let (limit, known) = match window {
            Window::Latest(n) => (Some(n), None),
            Window::All(count) => (None, Some(count)),
            Window::Unknown => (None, None),
        };
        if known == Some(0) {
            return Ok(out);
        }
        if limit.is_none() {
            table.prefetch_range(self.tx, range(id))?;
        }
        let dir = if limit.is_some() {
            Dir::Reverse
        } else {
            Dir::Forward
        };
        let limit = limit.unwrap_or(usize::MAX);
        let mut seen = 0usize;
        table.scan(self.tx, range(id), dir, |(_, key), v| {
            if seen >= limit {
                return Ok(ControlFlow::Break(()));
            }
            seen += take(key, v, dir, limit - seen, &mut out)?;
            if known.is_some_and(|n| seen as u64 >= n) {
                return Ok(ControlFlow::Break(()));
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
        self.require_session(id)?;
        Ok(read_record(self.tx, id)?.map(|r| SessionInfo::from(id, &r)))
    }

    /// Sessions whose id starts with `prefix`, sorted, strictly after `after` (a cursor: the
    /// last id of the previous page), at most `limit`.
    pub fn session_list(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<SessionInfo>> {
        let unrestricted = self.asker.unrestricted(self.tx)?;
        let mut out = Vec::new();
        let start = match after {
            Some(a) if a >= prefix => a,
            _ => prefix,
        };
        SESSIONS.scan(self.tx, start.., Dir::Forward, |id, v| {
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
        let unrestricted = self.asker.unrestricted(self.tx)?;
        let mut out = Vec::new();
        SESSIONS.each(self.tx, .., |id, _| {
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
        self.require_session(id)?;
        let mut out = Vec::new();
        SESSION_ARCHIVE.each(self.tx, range(id), |(_, seq), v| {
            out.push(decode("session_archive", &SKey(id, seq), v)?);
            Ok(())
        })?;
        Ok(out)
    }

    /// The newest `limit` messages of the session's archive, oldest first: a reverse range scan
    /// that stops after `limit` (the web inspector's page; an archive grows without bound).
    pub fn session_archived_newest(&self, id: &str, limit: usize) -> Result<Vec<Archived>> {
        validate_session_id(id)?;
        self.require_session(id)?;
        let mut out = Vec::new();
        if limit == 0 {
            return Ok(out);
        }
        SESSION_ARCHIVE.scan(self.tx, range(id), Dir::Reverse, |(_, seq), v| {
            out.push(decode("session_archive", &SKey(id, seq), v)?);
            Ok(if out.len() >= limit {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            })
        })?;
        out.reverse();
        Ok(out)
    }
}
