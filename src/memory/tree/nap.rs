//! Storing and dropping summaries: `nap` (one answer, or many in one transaction), checked
//! against the block's inputs and the claims' citations, and `forget`.

use serde::Serialize;

use super::prompt::{built_from, inputs_crc, merge_inputs, prompts_of, MergePrompt};
use super::{check_block, scope_or_empty, summary_text};
use crate::domain::block::Block;
use crate::domain::claims::{parse_claims, uncited, validate_claims, Claim};
use crate::domain::record::{ScopeMeta, Summary};
use crate::domain::text::validate_line;
use crate::error::{Error, Result};
use crate::memory::summary::{first_pending, TreeKey};
use crate::storage::codec::{decode, encode};
use crate::storage::config::Config;
use crate::storage::kv::KvRead;
use crate::storage::store::Store;
use crate::storage::tables::{CLAIMS, PENDING, STALE, TREE};
use crate::storage::txn::WriteTxn;

/// The outcome of answering a merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum NapOutcome {
    /// The summary was stored.
    Saved,
    /// The block already had a summary; nothing was written.
    AlreadySettled,
}

/// What `somna nap LO-HI TEXT` reports ([`WriteTxn::nap_report`]): the outcome, and the merge
/// due next as of the same transaction.
#[derive(Debug, Clone, Serialize)]
pub struct Napped {
    /// Whether the summary was stored.
    pub outcome: NapOutcome,
    /// The merge due next (`None`: none can be built now, or the principal may not read it).
    pub next_prompt: Option<MergePrompt>,
    /// Merges still pending in the scope (0 when the principal may not read it).
    pub pending: u64,
}

fn half_cites(kv: &(impl KvRead + ?Sized), sid: u32, h: Block) -> Result<Option<Vec<u64>>> {
    let claims: Option<Vec<Claim>> = match CLAIMS.get(kv, (sid, h.level(), h.lo()))? {
        Some(v) => Some(decode("claims", &TreeKey(sid, h), &v)?),
        None => None,
    };
    Ok(claims.and_then(|c| {
        let ids: Vec<u64> = c.into_iter().flat_map(|c| c.cites).collect();
        (!ids.is_empty()).then_some(ids)
    }))
}

impl WriteTxn<'_> {
    /// Whether `b` has a summary that is not stale.
    fn settled(&self, sid: u32, b: Block) -> Result<bool> {
        let key = (sid, b.level(), b.lo());
        Ok(TREE.contains(&*self.tx, key)? && !STALE.contains(&*self.tx, key)?)
    }

    fn settle(
        &mut self,
        scope: &str,
        meta: &mut ScopeMeta,
        b: Block,
        text: &str,
        cfg: &Config,
    ) -> Result<()> {
        let sid = meta.id;
        let inputs = merge_inputs(&*self.tx, sid, b, cfg)?;
        let Some(inputs) = inputs else {
            return Err(Error::invalid(
                "block",
                format!("{b} cannot be merged yet: its two halves need summaries first"),
            ));
        };
        let claims = parse_claims(text);
        let halves = match (b.size() > cfg.raw_max, b.halves()) {
            (true, Some((l, r))) => vec![
                (l, half_cites(&*self.tx, sid, l)?),
                (r, half_cites(&*self.tx, sid, r)?),
            ],
            _ => Vec::new(),
        };
        validate_claims(b, &claims, &halves)?;
        if uncited(&claims) && self.policy(scope)?.require_citations {
            return Err(Error::invalid(
                "summary",
                format!("the policy of scope {scope:?} requires every claim to cite the memories it rests on, like: claim [#3, #7]"),
            ));
        }
        let s = Summary {
            text: text.to_string(),
            written_us: self.now,
            built_from: built_from(&inputs),
            inputs_crc: inputs_crc(&inputs),
        };
        let key = (sid, b.level(), b.lo());
        let old = summary_text(&*self.tx, sid, b);
        crate::storage::index::write::replace(&mut *self.tx, sid, b, old.as_deref(), Some(text))?;
        let replaced = TREE.insert(&mut *self.tx, key, &encode(&s)?)?;
        CLAIMS.put(&mut *self.tx, key, &encode(&claims)?)?;
        STALE.delete(&mut *self.tx, key)?;
        if PENDING.delete(&mut *self.tx, (sid, b.level(), b.lo()))? {
            meta.pending = meta.pending.saturating_sub(1);
        }
        if !replaced {
            meta.summaries += 1;
        }
        Ok(())
    }

    /// Stores the summary of `b`, which must be the next pending block (as `nap LO-HI TEXT`).
    /// A block that already has a summary is left alone ([`NapOutcome::AlreadySettled`]).
    pub fn nap(&mut self, scope: &str, b: Block, text: &str) -> Result<NapOutcome> {
        check_block(b)?;
        let cfg = self.config()?;
        validate_line(text, cfg.entry_bytes)?;
        let mut meta = scope_or_empty(self.scope_meta(scope)?, b)?;
        if self.settled(meta.id, b)? {
            return Ok(NapOutcome::AlreadySettled);
        }
        let next = first_pending(&*self.tx, meta.id)?;
        if next != Some(b) {
            return Err(Error::WrongBlock { given: b, next });
        }
        self.settle(scope, &mut meta, b, text, &cfg)?;
        self.put_scope(scope, &meta)?;
        Ok(NapOutcome::Saved)
    }

    /// [`WriteTxn::nap`], then, in the same transaction, the next merge and the pending count
    /// (what `somna nap LO-HI TEXT` prints: one call, one commit).
    pub fn nap_report(&mut self, scope: &str, b: Block, text: &str) -> Result<Napped> {
        let outcome = self.nap(scope, b, text)?;
        let readable = self.may(crate::storage::access::Access::Read, scope)?;
        let (next_prompt, pending) = match self.scope_meta(scope)? {
            Some(meta) if readable => {
                let cfg = self.config()?;
                let next = prompts_of(&*self.tx, &meta, &cfg, 1)?.into_iter().next();
                (next, meta.pending)
            }
            _ => (None, 0),
        };
        Ok(Napped {
            outcome,
            next_prompt,
            pending,
        })
    }

    /// Stores many summaries at once, all or nothing (`nap --apply FILE`). Entries may come in
    /// any order; they are applied smallest block first, so a block's halves may be in the same
    /// batch. Blocks already summarized are reported as settled and left alone.
    pub fn nap_many(
        &mut self,
        scope: &str,
        mut entries: Vec<(Block, String)>,
    ) -> Result<Vec<(Block, NapOutcome)>> {
        let cfg = self.config()?;
        if entries.is_empty() {
            return Err(Error::invalid("batch", "no summaries given"));
        }
        for (b, text) in &entries {
            check_block(*b)?;
            validate_line(text, cfg.entry_bytes).map_err(|e| match e {
                Error::Invalid { reason, .. } => Error::invalid("text", format!("{b}: {reason}")),
                e => e,
            })?;
        }
        entries.sort_by_key(|(b, _)| (b.level(), b.lo()));
        for w in entries.windows(2) {
            if let [a, c] = w {
                if a.0 == c.0 {
                    return Err(Error::invalid(
                        "batch",
                        format!("{} is answered twice", a.0),
                    ));
                }
            }
        }
        let mut meta = self.scope_meta(scope)?.ok_or_else(|| Error::OutOfRange {
            asked: entries.first().map(|e| e.0.to_string()).unwrap_or_default(),
            count: 0,
        })?;
        let mut out = Vec::with_capacity(entries.len());
        for (b, text) in entries {
            if b.hi() > meta.count {
                return Err(Error::OutOfRange {
                    asked: b.to_string(),
                    count: meta.count,
                });
            }
            if self.settled(meta.id, b)? {
                out.push((b, NapOutcome::AlreadySettled));
                continue;
            }
            if !PENDING.contains(&*self.tx, (meta.id, b.level(), b.lo()))? {
                return Err(Error::invalid("batch", format!("{b} is not pending")));
            }
            self.settle(scope, &mut meta, b, &text, &cfg)?;
            out.push((b, NapOutcome::Saved));
        }
        self.put_scope(scope, &meta)?;
        Ok(out)
    }

    /// Drops the summary of `b` and of every block built on it (its ancestors), never its
    /// siblings or other branches; the log is untouched. The dropped blocks become pending.
    /// Returns them, smallest first.
    pub fn forget(&mut self, scope: &str, b: Block) -> Result<Vec<Block>> {
        check_block(b)?;
        let mut meta = scope_or_empty(self.scope_meta(scope)?, b)?;
        let mut removed = Vec::new();
        let mut cur = Some(b);
        let mut newly_pending = 0u64;
        while let Some(c) = cur.filter(|c| c.hi() <= meta.count) {
            let key = (meta.id, c.level(), c.lo());
            let old = summary_text(&*self.tx, meta.id, c);
            if TREE.delete(&mut *self.tx, key)? {
                crate::storage::index::write::replace(
                    &mut *self.tx,
                    meta.id,
                    c,
                    old.as_deref(),
                    None,
                )?;
                STALE.delete(&mut *self.tx, key)?;
                CLAIMS.delete(&mut *self.tx, key)?;
                if !PENDING.insert(&mut *self.tx, key, &[])? {
                    newly_pending += 1;
                }
                removed.push(c);
            }
            cur = c.parent();
        }
        meta.summaries -= (removed.len() as u64).min(meta.summaries);
        meta.pending += newly_pending;
        self.put_scope(scope, &meta)?;
        Ok(removed)
    }
}

impl Store {
    /// Applies a batch of merges atomically; see [`WriteTxn::nap_many`].
    pub fn nap_many(
        &self,
        scope: &str,
        entries: Vec<(Block, String)>,
    ) -> Result<Vec<(Block, NapOutcome)>> {
        self.write(|tx| tx.nap_many(scope, entries.clone()))
    }
}

crate::storage::store::store_calls! {
    /// Answers the next merge; see [`WriteTxn::nap`].
    write fn nap(scope: &str, b: Block, text: &str) -> NapOutcome;
    /// Stores a summary and reports the next merge, in one commit; see
    /// [`WriteTxn::nap_report`].
    write fn nap_report(scope: &str, b: Block, text: &str) -> Napped;
    /// Drops a summary and its ancestors; see [`WriteTxn::forget`].
    write fn forget(scope: &str, b: Block) -> Vec<Block>;
}
