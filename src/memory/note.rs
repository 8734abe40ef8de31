//! Appending to the raw log: [`NewMemory`], its checks and the trust policy, idempotency keys,
//! the pending blocks an append completes, and the lifecycle events its links record. An
//! append costs O(new memories).

use serde::Serialize;

use crate::domain::record::{IdemEntry, Kind, Memory, ScopeMeta, Status};
use crate::domain::text::{validate_key, validate_line, validate_optional_field};
use crate::error::{Error, Result};
use crate::memory::lifecycle::{state_of, MemoryState};
use crate::memory::log::get_memory;
use crate::memory::tree::{prompts_of, MergePrompt};
use crate::storage::access::Access;
use crate::storage::codec::{decode, encode};
use crate::storage::store::Store;
use crate::storage::tables::{IDEMPOTENCY, LOG, PENDING};
use crate::storage::txn::{holding, read_scope, WriteTxn};
use crate::trust::policy::Policy;

/// The most memories one note may supersede or conflict with, together (docs/security.md).
pub const MAX_LINKS: usize = 64;
/// A memory to append. Only the text is required; the rest of the envelope has defaults.
///
/// ```
/// use somna::{Kind, NewMemory};
/// let m = NewMemory::new("deploys go through the staging branch")
///     .kind(Kind::Decision)
///     .source("user:alice");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewMemory {
    /// The text: one line, at most `ENTRY_BYTES` bytes.
    pub text: String,
    /// Kind of claim (default observation).
    pub kind: Kind,
    /// Status (default accepted).
    pub status: Option<Status>,
    /// When it was observed (microseconds, UTC); default: the commit time.
    pub observed_us: Option<i64>,
    /// Source identity.
    pub source: Option<String>,
    /// Source URI.
    pub source_uri: Option<String>,
    /// Ids it supersedes (must be earlier memories of the same scope; with
    /// [`NewMemory::conflicts_with`], at most [`MAX_LINKS`]).
    pub supersedes: Vec<u64>,
    /// Ids it conflicts with (earlier memories of the same scope).
    pub conflicts_with: Vec<u64>,
    /// Expiry time (microseconds, UTC).
    pub valid_until_us: Option<i64>,
    /// Store it even if it looks like a secret and the scope's policy refuses secrets.
    pub force: bool,
    /// Its embedding, stored with it for vector and hybrid search (one dimension per scope).
    pub vector: Option<crate::memory::search::vector::Embedding>,
}

impl NewMemory {
    /// A memory with this text and default envelope.
    pub fn new(text: impl Into<String>) -> Self {
        NewMemory {
            text: text.into(),
            ..Default::default()
        }
    }
    /// Sets the kind.
    pub fn kind(mut self, k: Kind) -> Self {
        self.kind = k;
        self
    }
    /// Sets the status.
    pub fn status(mut self, s: Status) -> Self {
        self.status = Some(s);
        self
    }
    /// Sets the observed time (microseconds since the epoch, UTC).
    pub fn observed_us(mut self, t: i64) -> Self {
        self.observed_us = Some(t);
        self
    }
    /// Sets the source identity.
    pub fn source(mut self, s: impl Into<String>) -> Self {
        self.source = Some(s.into());
        self
    }
    /// Sets the source URI.
    pub fn source_uri(mut self, s: impl Into<String>) -> Self {
        self.source_uri = Some(s.into());
        self
    }
    /// Sets the ids this memory supersedes.
    pub fn supersedes(mut self, ids: Vec<u64>) -> Self {
        self.supersedes = ids;
        self
    }
    /// Sets the ids this memory conflicts with.
    pub fn conflicts_with(mut self, ids: Vec<u64>) -> Self {
        self.conflicts_with = ids;
        self
    }
    /// Stores it even if it looks like a secret (see [`crate::trust::policy::Policy`]).
    pub fn force(mut self, yes: bool) -> Self {
        self.force = yes;
        self
    }
    /// Sets the expiry time (microseconds since the epoch, UTC).
    pub fn valid_until_us(mut self, t: i64) -> Self {
        self.valid_until_us = Some(t);
        self
    }
    /// Sets the embedding (see [`crate::Store::search`]).
    pub fn vector(mut self, v: Vec<f32>) -> Self {
        self.vector = Some(crate::memory::search::vector::Embedding(v));
        self
    }
}

/// The outcome of an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Appended {
    /// Id of the first memory appended.
    pub first: u64,
    /// How many were appended.
    pub count: u64,
    /// True when the idempotency key had been used already: nothing new was written and these
    /// are the ids of the earlier append.
    pub replayed: bool,
}

/// What `somna note` reports, read in the transaction that appended: the append and, when the
/// principal may read the scope, how the memory is shown and what merge is due next.
#[derive(Debug, Clone, Serialize)]
pub struct Noted {
    /// The append.
    pub appended: Appended,
    /// How it reads; `None` when the principal may write the scope but not read it.
    pub seen: Option<NotedSeen>,
}

/// What a principal who may read the scope learns about the memory just noted.
#[derive(Debug, Clone, Serialize)]
pub struct NotedSeen {
    /// The memory as stored (for a replay, the earlier one).
    pub memory: Memory,
    /// Its effective state (proposed, reads as instructions, ...).
    pub state: MemoryState,
    /// The next merge prompt, if one can be built.
    pub next_prompt: Option<MergePrompt>,
    /// Pending merges in the scope.
    pub pending: u64,
}

impl WriteTxn<'_> {
    /// Appends one memory to `scope` (created if new) and returns its id.
    pub fn note(&mut self, scope: &str, m: NewMemory) -> Result<u64> {
        Ok(self.append(scope, vec![m], None)?.first)
    }

    /// Appends memories to `scope` in this transaction. With `key`, a second append with the same
    /// key and the same texts writes nothing and returns the first one's ids (`replayed`); the
    /// same key with other texts is a [`Error::Conflict`].
    pub fn append(
        &mut self,
        scope: &str,
        items: Vec<NewMemory>,
        key: Option<&str>,
    ) -> Result<Appended> {
        if items.is_empty() {
            return Err(Error::invalid("append", "nothing to append"));
        }
        let cfg = self.config()?;
        self.require(crate::storage::access::Access::Write, scope)?;
        let policy = self.policy(scope)?;
        let crcs = check_items(scope, &items, cfg.entry_bytes, &policy)?;
        if let Some(k) = key {
            validate_key(k)?;
        }
        let mut meta = self.scope_or_create(scope)?;
        if let Some(k) = key {
            if let Some(done) = self.replayed(&meta, k, crcs, items.len() as u64)? {
                return Ok(done);
            }
        }
        let first = meta.count;
        let mut added_pending = 0u64;
        for (id, m) in (first..).zip(&items) {
            added_pending += self.put_memory(meta.id, id, m, &policy)?;
        }
        for (id, m) in (first..).zip(&items) {
            if let Some(v) = &m.vector {
                crate::memory::search::vector::put(self, &meta, scope, id, &v.0)?;
            }
        }
        crate::storage::index::write::add_memories(
            &mut *self.tx,
            meta.id,
            first,
            items.iter().map(|m| m.text.as_str()),
        )?;
        let count = items.len() as u64;
        meta.count += count;
        meta.pending += added_pending;
        self.link_events(&mut meta, first, &items)?;
        self.put_scope(scope, &meta)?;
        if let Some(k) = key {
            let e = IdemEntry {
                first,
                count,
                texts_crc: crcs.0,
            };
            IDEMPOTENCY.put(&mut *self.tx, (meta.id, k), &encode(&e)?)?;
        }
        Ok(Appended {
            first,
            count,
            replayed: false,
        })
    }

    /// The first append made with idempotency key `k` in this scope, when it asked for the
    /// same memories (`crcs`: of the whole envelopes, and of the texts alone as keys written
    /// before kept); the same key with other memories is a [`Error::Conflict`].
    fn replayed(
        &self,
        meta: &ScopeMeta,
        k: &str,
        crcs: (u32, u32),
        count: u64,
    ) -> Result<Option<Appended>> {
        let Some(v) = IDEMPOTENCY.get(&*self.tx, (meta.id, k))? else {
            return Ok(None);
        };
        let e = decode::<IdemEntry>("idempotency", &k, &v)?;
        if (e.texts_crc == crcs.0 || e.texts_crc == crcs.1) && e.count == count {
            return Ok(Some(Appended {
                first: e.first,
                count: e.count,
                replayed: true,
            }));
        }
        Err(Error::Conflict(format!(
            "idempotency key {k:?} was used for a different append (#{} and {} more)",
            e.first,
            e.count.saturating_sub(1)
        )))
    }

    /// Writes memory `id` of scope `sid` and marks pending every block it completes; how many.
    fn put_memory(&mut self, sid: u32, id: u64, m: &NewMemory, policy: &Policy) -> Result<u64> {
        if m.supersedes.len() + m.conflicts_with.len() > MAX_LINKS {
            let reason = format!(
                "#{id} names more than {MAX_LINKS} memories it supersedes or conflicts with"
            );
            return Err(Error::invalid("link", reason));
        }
        if let Some(r) = m
            .supersedes
            .iter()
            .chain(&m.conflicts_with)
            .find(|r| **r >= id)
        {
            return Err(Error::invalid(
                "link",
                format!("#{id} can only refer to earlier memories, not #{r}"),
            ));
        }
        let rec = Memory {
            id,
            observed_us: m.observed_us.unwrap_or(self.now),
            recorded_us: self.now,
            text: m.text.clone(),
            kind: m.kind,
            status: m.status.unwrap_or(if m.kind == Kind::Inference {
                policy.inference_status
            } else {
                Status::Accepted
            }),
            source: m.source.clone(),
            source_uri: m.source_uri.clone(),
            supersedes: m.supersedes.clone(),
            conflicts_with: m.conflicts_with.clone(),
            valid_until_us: m.valid_until_us,
        };
        LOG.put(&mut *self.tx, (sid, id), &encode(&rec)?)?;
        // Every block that this memory completes becomes pending.
        let t = id + 1;
        let mut level = 1u8;
        let mut added = 0;
        while level < 63 && t.is_multiple_of(1u64 << level) {
            PENDING.put(&mut *self.tx, (sid, level, t - (1u64 << level)), &[])?;
            added += 1;
            level += 1;
        }
        Ok(added)
    }

    /// The supersede and conflict events the memories `first..` record on earlier ones.
    fn link_events(&mut self, meta: &mut ScopeMeta, first: u64, items: &[NewMemory]) -> Result<()> {
        use crate::memory::lifecycle::EventKind;
        for (id, m) in (first..).zip(items) {
            for &r in &m.supersedes {
                self.add_event(meta, r, EventKind::SupersededBy(id), None)?;
            }
            for &r in &m.conflicts_with {
                self.add_event(meta, r, EventKind::ConflictedBy(id), None)?;
            }
        }
        Ok(())
    }
}

/// Checks each memory of an append (its text, fields, and the scope's policy) and returns the
/// CRCs that recognise a retry: of the whole envelopes the caller gave, and of the texts alone
/// (as idempotency keys written before held).
fn check_items(
    scope: &str,
    items: &[NewMemory],
    entry_bytes: usize,
    policy: &Policy,
) -> Result<(u32, u32)> {
    let mut crc = crc32fast::Hasher::new();
    let mut legacy = crc32fast::Hasher::new();
    for m in items {
        validate_line(&m.text, entry_bytes)?;
        validate_optional_field("source", &m.source)?;
        validate_optional_field("source URI", &m.source_uri)?;
        if m.source.is_none() && policy.require_source.contains(&m.kind) {
            let reason = format!(
                "the policy of scope {scope:?} requires a source for {} memories (--source ID)",
                m.kind
            );
            return Err(Error::invalid("source", reason));
        }
        if policy.refuse_secrets && !m.force {
            if let Some(what) = crate::trust::policy::looks_like_secret(&m.text) {
                return Err(Error::invalid(
                    "text",
                    format!("it looks like it contains {what}; secrets are not stored (pass --force if it is not a secret)"),
                ));
            }
        }
        legacy.update(m.text.as_bytes());
        legacy.update(b"\n");
        // The whole envelope the caller gave, so that a retry is recognised only when it asks
        // for exactly the same memories. (The postcard bytes, not the enveloped value: the CRC
        // of bytes followed by their own CRC is a constant.)
        crc.update(
            &postcard::to_allocvec(&(
                &m.text,
                m.kind,
                m.status,
                m.observed_us,
                &m.source,
                &m.source_uri,
                &m.supersedes,
                &m.conflicts_with,
                m.valid_until_us,
            ))
            .map_err(|e| Error::Storage(format!("could not encode a value: {e}")))?,
        );
    }
    Ok((crc.finalize(), legacy.finalize()))
}

impl WriteTxn<'_> {
    /// Appends one memory like [`WriteTxn::append`] and reads back, in the same transaction,
    /// what `somna note` reports ([`Noted`]). The read of the memory is audited as a `show`.
    pub fn note_report(&mut self, scope: &str, m: NewMemory, key: Option<&str>) -> Result<Noted> {
        let appended = self.append(scope, vec![m], key)?;
        if !self.may(Access::Read, scope)? {
            return Ok(Noted {
                appended,
                seen: None,
            });
        }
        let meta = holding(read_scope(&*self.tx, scope)?, appended.first)?;
        let memory = get_memory(&*self.tx, meta.id, appended.first)?;
        let state = state_of(&*self.tx, meta.id, &memory)?;
        let cfg = self.config()?;
        let next_prompt = prompts_of(&*self.tx, &meta, &cfg, 1)?.into_iter().next();
        if cfg.audit {
            self.record_read("show", scope, vec![format!("#{}", appended.first)])?;
        }
        Ok(Noted {
            appended,
            seen: Some(NotedSeen {
                memory,
                state,
                next_prompt,
                pending: meta.pending,
            }),
        })
    }
}

impl Store {
    /// Appends one memory and reports it, in one commit; see [`WriteTxn::note_report`].
    pub fn note_report(&self, scope: &str, m: NewMemory, key: Option<&str>) -> Result<Noted> {
        let scope = scope.to_string();
        let key = key.map(str::to_string);
        self.write_grouped(move |tx| tx.note_report(&scope, m.clone(), key.as_deref()))
    }

    /// Appends one memory; see [`WriteTxn::note`].
    ///
    /// Concurrent calls from several threads share one commit (group commit; see
    /// [`Store::write_grouped`]).
    pub fn note(&self, scope: &str, m: NewMemory) -> Result<u64> {
        let scope = scope.to_string();
        self.write_grouped(move |tx| tx.note(&scope, m.clone()))
    }

    /// Appends many memories in one commit; see [`WriteTxn::append`].
    pub fn append(
        &self,
        scope: &str,
        items: Vec<NewMemory>,
        key: Option<&str>,
    ) -> Result<Appended> {
        let scope = scope.to_string();
        let key = key.map(str::to_string);
        self.write_grouped(move |tx| tx.append(&scope, items.clone(), key.as_deref()))
    }
}
