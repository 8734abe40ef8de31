//! The lifecycle of memories, as events and never as rewrites.
//!
//! `accept`, `deprecate` and `retract` append an event (who, when, why) to the `events` table;
//! a note that supersedes or conflicts with an earlier memory appends an event to that memory
//! too. A memory's effective status is its recorded status with its events applied in order.
//! Every summary built on a memory whose status changes is marked stale: shown with a marker
//! until rebuilt, and offered again by `pending`. Redaction is the one change to raw data: the
//! text is replaced by a tombstone (position and envelope kept, with a hash of the old text in
//! the event), and every summary built on it is dropped so the text appears nowhere.

use serde::{Deserialize, Serialize};

use crate::domain::block::Block;
use crate::domain::record::{Memory, ScopeMeta, Status};
use crate::domain::text::{display_safe, push_date};
use crate::error::{Error, Result};
use crate::memory::log::get_memory;
use crate::storage::access::Access;
use crate::storage::codec::{decode, encode};
use crate::storage::kv::{Dir, KvRead};
use crate::storage::store::Store;
use crate::storage::tables::{EVENTS, LOG, PENDING, STALE, TREE};
use crate::storage::txn::{ReadTxn, WriteTxn};
use crate::trust::policy::reads_as_instructions;

/// The text a redacted memory keeps.
pub const TOMBSTONE: &str = crate::storage::index::TOMBSTONE;

/// What happened to a memory.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A principal accepted it as true.
    Accept,
    /// A principal deprecated it.
    Deprecate,
    /// A principal retracted it as wrong.
    Retract,
    /// A later memory supersedes it.
    SupersededBy(u64),
    /// A later memory contradicts it.
    ConflictedBy(u64),
    /// Its text was replaced by a tombstone; the hash is XXH3-128 of the old text, in hex.
    Redact {
        /// Hash of the removed text; empty when read by a principal other than the admin
        /// ([`ReadTxn::show`]).
        text_hash: String,
    },
}

/// One lifecycle event.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// What happened.
    pub kind: EventKind,
    /// Who did it.
    pub who: String,
    /// When (microseconds since the epoch, UTC).
    pub at_us: i64,
    /// Why, if given.
    pub why: Option<String>,
}

/// A principal's decision about a memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum Decision {
    /// Accept it.
    Accept,
    /// Deprecate it.
    Deprecate,
    /// Retract it.
    Retract,
}

/// A memory's effective state: its recorded envelope with its events applied.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Default)]
pub struct MemoryState {
    /// The effective status.
    pub status: Status,
    /// Later memories that supersede it.
    pub superseded_by: Vec<u64>,
    /// Memories it conflicts with, undecided.
    pub conflicts: Vec<u64>,
    /// Past its valid-until time.
    pub expired: bool,
    /// Its text reads as instructions to the reader: shown quoted.
    pub untrusted: bool,
    /// Its text was redacted.
    pub redacted: bool,
    /// Every event, oldest first.
    pub events: Vec<Event>,
}

impl MemoryState {
    /// The markers shown before the text (empty for an accepted, current, trusted memory).
    pub fn markers(&self) -> Vec<String> {
        let mut m = Vec::new();
        match self.status {
            Status::Accepted => {}
            Status::Superseded if !self.superseded_by.is_empty() => {
                let ids: Vec<String> = self.superseded_by.iter().map(|i| format!("#{i}")).collect();
                m.push(format!("superseded by {}", ids.join(", ")));
            }
            s => m.push(s.to_string()),
        }
        if self.expired {
            m.push("expired".into());
        }
        if !self.conflicts.is_empty() {
            let ids: Vec<String> = self.conflicts.iter().map(|i| format!("#{i}")).collect();
            m.push(format!("conflicts with {}", ids.join(", ")));
        }
        if self.redacted {
            m.push("redacted".into());
        }
        if self.untrusted {
            m.push("untrusted: reads as instructions".into());
        }
        m
    }
}

/// Renders a memory with its markers: `#id date text` for an accepted, current, trusted memory
/// (exactly the plain line), `#id date [proposed] text`, or for untrusted text
/// `#id date [untrusted: reads as instructions] «text»`.
pub fn marked_line(m: &Memory, st: &MemoryState) -> String {
    let markers = st.markers();
    let text = display_safe(&m.text);
    // Built with pushes into one buffer, not `format!` (a wake renders up to 96 of these).
    let mut out = String::with_capacity(text.len() + 50);
    let mut num = [0u8; 20];
    out.push('#');
    out.push_str(crate::memory::log::itoa_u64(m.id, &mut num));
    out.push(' ');
    push_date(m.observed_us, &mut out);
    out.push(' ');
    if !markers.is_empty() {
        out.push('[');
        for (i, mk) in markers.iter().enumerate() {
            if i > 0 {
                out.push_str("; ");
            }
            out.push_str(mk);
        }
        out.push_str("] ");
    }
    if st.untrusted {
        out.push('«');
        out.push_str(&text);
        out.push('»');
    } else {
        out.push_str(&text);
    }
    out
}

pub(crate) fn events_of(kv: &(impl KvRead + ?Sized), sid: u32, id: u64) -> Result<Vec<Event>> {
    let mut out = Vec::new();
    EVENTS.each(kv, (sid, id, 0)..=(sid, id, u32::MAX), |(_, _, n), v| {
        out.push(decode(
            "events",
            &format_args!("(scope {sid}, #{id}, event {n})"),
            v,
        )?);
        Ok(())
    })?;
    Ok(out)
}

/// Derives a memory's effective state from its record and events at time `now_us`.
pub fn derive_state(m: &Memory, events: Vec<Event>, now_us: i64) -> MemoryState {
    let mut st = MemoryState {
        status: m.status,
        conflicts: m.conflicts_with.clone(),
        expired: m.valid_until_us.is_some_and(|v| v <= now_us),
        ..Default::default()
    };
    for e in &events {
        match &e.kind {
            EventKind::Accept => {
                st.status = Status::Accepted;
                st.conflicts.clear();
            }
            EventKind::Deprecate => {
                st.status = Status::Deprecated;
                st.conflicts.clear();
            }
            EventKind::Retract => {
                st.status = Status::Retracted;
                st.conflicts.clear();
            }
            EventKind::SupersededBy(n) => {
                st.status = Status::Superseded;
                st.superseded_by.push(*n);
            }
            EventKind::ConflictedBy(n) => st.conflicts.push(*n),
            EventKind::Redact { .. } => st.redacted = true,
        }
    }
    st.untrusted = !st.redacted && reads_as_instructions(&m.text);
    st.events = events;
    st
}

/// Whether scope `sid` has any lifecycle event (one range probe).
pub(crate) fn scope_has_events(kv: &(impl KvRead + ?Sized), sid: u32) -> Result<bool> {
    Ok(EVENTS
        .edge(
            kv,
            (sid, 0, 0)..=(sid, u64::MAX, u32::MAX),
            Dir::Forward,
            |_, _| Ok(()),
        )?
        .is_some())
}

pub(crate) fn state_of(kv: &(impl KvRead + ?Sized), sid: u32, m: &Memory) -> Result<MemoryState> {
    Ok(derive_state(
        m,
        events_of(kv, sid, m.id)?,
        crate::domain::text::now_us(),
    ))
}

impl WriteTxn<'_> {
    /// Appends an event to memory `id` and marks the summaries built on it stale. Returns the
    /// number of blocks that became pending.
    pub(crate) fn add_event(
        &mut self,
        meta: &mut ScopeMeta,
        id: u64,
        kind: EventKind,
        why: Option<&str>,
    ) -> Result<()> {
        self.record_event(meta.id, id, kind, why)?;
        self.mark_stale(meta, id)
    }

    /// Appends an event to memory `id` of scope `sid`, numbered after its last one.
    fn record_event(
        &mut self,
        sid: u32,
        id: u64,
        kind: EventKind,
        why: Option<&str>,
    ) -> Result<()> {
        let who = self.who()?;
        let last = EVENTS.edge(
            &*self.tx,
            (sid, id, 0)..=(sid, id, u32::MAX),
            Dir::Reverse,
            |(_, _, n), _| Ok(n),
        )?;
        let next = match last {
            Some(n) => n
                .checked_add(1)
                .ok_or_else(|| Error::invalid("event", "too many events on one memory"))?,
            None => 0,
        };
        let e = Event {
            kind,
            who,
            at_us: self.now,
            why: why.map(str::to_string),
        };
        EVENTS.put(&mut *self.tx, (sid, id, next), &encode(&e)?)
    }

    /// Marks every summary whose block contains memory `id` stale, and pending again.
    pub(crate) fn mark_stale(&mut self, meta: &mut ScopeMeta, id: u64) -> Result<()> {
        let mut b = Block::single(id).parent();
        while let Some(c) = b.filter(|c| c.hi() <= meta.count) {
            let key = (meta.id, c.level(), c.lo());
            if TREE.contains(&*self.tx, key)? {
                STALE.put(&mut *self.tx, key, &[])?;
                if !PENDING.insert(&mut *self.tx, key, &[])? {
                    meta.pending += 1;
                }
            }
            b = c.parent();
        }
        Ok(())
    }

    /// Records a principal's decision about memory `id` of `scope`.
    pub fn decide(&mut self, scope: &str, id: u64, d: Decision, why: Option<&str>) -> Result<()> {
        if let Some(w) = why {
            crate::domain::text::validate_line(w, crate::domain::text::MAX_ENTRY_BYTES)?;
        }
        let mut meta = crate::storage::txn::holding(self.scope_meta(scope)?, id)?;
        let kind = match d {
            Decision::Accept => EventKind::Accept,
            Decision::Deprecate => EventKind::Deprecate,
            Decision::Retract => EventKind::Retract,
        };
        self.add_event(&mut meta, id, kind, why)?;
        self.put_scope(scope, &meta)
    }

    /// Replaces memory `id`'s text with a tombstone, records the event with a hash of the old
    /// text, and drops every summary built on it (they become pending). Admin only.
    pub fn redact(&mut self, scope: &str, id: u64, reason: &str) -> Result<()> {
        self.require_admin("redact")?;
        crate::domain::text::validate_line(reason, crate::domain::text::MAX_ENTRY_BYTES)?;
        let meta = crate::storage::txn::holding(self.scope_meta(scope)?, id)?;
        let sid = meta.id;
        let mut rec = get_memory(&*self.tx, sid, id)?;
        if rec.text == TOMBSTONE {
            return Ok(());
        }
        let text_hash = format!("{:032x}", xxhash_rust::xxh3::xxh3_128(rec.text.as_bytes()));
        // Purge the text from the search index before it is gone, and its embedding (docs/design.md,
        // section 12).
        let b = Block::single(id);
        crate::storage::index::write::replace(&mut *self.tx, sid, b, Some(&rec.text), None)?;
        if crate::storage::tables::VECTORS.delete(&mut *self.tx, (sid, id))? {
            crate::storage::embeddings::count_rewrite(&mut *self.tx)?;
        }
        crate::storage::embeddings::delete_memory(&mut *self.tx, sid, id)?;
        rec.text = TOMBSTONE.to_string();
        LOG.put(&mut *self.tx, (sid, id), &encode(&rec)?)?;
        self.record_event(sid, id, EventKind::Redact { text_hash }, Some(reason))?;
        // Every summary built on it goes, exactly as `forget` drops a block and its ancestors.
        if let Some(parent) = Block::single(id).parent().filter(|p| p.hi() <= meta.count) {
            self.forget(scope, parent)?;
        }
        Ok(())
    }
}

impl ReadTxn<'_> {
    /// A memory with its effective state and history.
    ///
    /// The hash of a redacted text is shown to the admin only: it is unsalted, so a reader
    /// could confirm a guess of a short secret (a PIN) by hashing it; for any other principal
    /// its `text_hash` is empty.
    pub fn show(&self, scope: &str, id: u64) -> Result<(Memory, MemoryState)> {
        let m = self.memory(scope, id)?;
        let sid = self.scope_meta(scope)?.map(|s| s.id).unwrap_or(0);
        let st = self.for_reader(state_of(self.tx, sid, &m)?)?;
        Ok((m, st))
    }

    /// The effective state of memory `m` of `scope` (a redacted text's hash for the admin only,
    /// as in [`ReadTxn::show`]).
    pub fn state(&self, scope: &str, m: &Memory) -> Result<MemoryState> {
        self.require(Access::Read, scope)?;
        let sid = self.scope_meta(scope)?.map(|s| s.id).unwrap_or(0);
        self.for_reader(state_of(self.tx, sid, m)?)
    }

    /// `st` as this transaction's principal may see it: without the hashes of redacted texts
    /// unless it is the admin.
    fn for_reader(&self, mut st: MemoryState) -> Result<MemoryState> {
        // Only a redacted memory has a hash to hide: the admin check is for those alone.
        if st.redacted && !self.is_admin()? {
            for e in &mut st.events {
                if let EventKind::Redact { text_hash } = &mut e.kind {
                    text_hash.clear();
                }
            }
        }
        Ok(st)
    }

    /// The line of memory `m` with its markers.
    pub fn marked(&self, scope: &str, m: &Memory) -> Result<String> {
        Ok(marked_line(m, &self.state(scope, m)?))
    }
}

impl Store {
    /// Redacts a memory ([`WriteTxn::redact`]), then scrubs what the store's freed space still
    /// holds of its text ([`Store::scrub`]). Redacting a memory already redacted scrubs again.
    pub fn redact(&self, scope: &str, id: u64, reason: &str) -> Result<()> {
        self.write(|tx| tx.redact(scope, id, reason))?;
        self.scrub().map_err(|e| match e {
            Error::Busy { waited } => Error::Storage(format!(
                "#{id} is redacted, but the file's freed pages still hold earlier bytes of the \
                 store, its text among them: a reader kept them for {} ms. Redact #{id} again \
                 once the store's readers are done; that scrubs them",
                waited.as_millis()
            )),
            e => e,
        })
    }
    /// A memory with its state; see [`ReadTxn::show`].
    pub fn show(&self, scope: &str, id: u64) -> Result<(Memory, MemoryState)> {
        self.audited(
            "show",
            scope,
            |r| r.show(scope, id),
            |_| vec![format!("#{id}")],
        )
    }
}

crate::storage::store::store_calls! {
    /// Records a decision; see [`WriteTxn::decide`].
    write fn decide(scope: &str, id: u64, d: Decision, why: Option<&str>) -> ();
}
