//! The backfill: the memories of a scope that lack a vector of the embedder's current model are
//! sent to it in batches, and their vectors written with the scope's cursor (the first memory id
//! not looked at yet, `(scope id, model, u64::MAX - 1)` in table `embeddings`), one write
//! transaction per batch. Stopped anywhere (the embedder down, the process killed), it resumes
//! at the cursor; nothing it writes is needed for a note to be acknowledged.

use serde::Serialize;

use super::{read_embedder, Embedder, Purpose};
use crate::error::{Error, Result};
use crate::memory::log::{each_memory, get_memory};
use crate::storage::embeddings;
use crate::storage::index::TOMBSTONE;
use crate::storage::store::Store;
use crate::storage::txn::{list_scopes, read_scope, WriteTxn};

/// The longest the backfill waits for one batch's answer, in milliseconds.
const BATCH_WAIT_MS: u32 = 120_000;

/// Where a backfill is, after each batch.
#[derive(Debug, Clone, Serialize)]
pub struct BackfillProgress {
    /// The scope of the batch.
    pub scope: String,
    /// Memories embedded so far, in every scope.
    pub embedded: u64,
    /// The scope's memories still without a vector of the model.
    pub left_in_scope: u64,
}

/// What a backfill did.
#[derive(Debug, Clone, Default, Serialize)]
pub struct BackfillReport {
    /// The model the vectors were made with.
    pub model: String,
    /// Memories embedded.
    pub embedded: u64,
    /// Memories passed over: redacted (their text is gone).
    pub skipped: u64,
    /// Memories still without a vector of the model, in the scopes looked at (the next run's
    /// work: the call stopped at its limit).
    pub remaining: u64,
    /// Scopes looked at.
    pub scopes: u64,
}

impl Store {
    /// Embeds up to `max` memories lacking a vector of the embedder's current model, in `scope`
    /// or (with `None`) every scope, oldest first; admin only (it sends memories' text to the
    /// embedder). `progress` hears after each batch. An embedder that fails stops the call with
    /// [`Error::Embedder`]; what was written before stays, and the next call resumes there.
    pub fn backfill(
        &self,
        scope: Option<&str>,
        max: u64,
        progress: &mut dyn FnMut(&BackfillProgress),
    ) -> Result<BackfillReport> {
        let (e, scopes) = self.read(|r| {
            r.require_admin("backfill embeddings")?;
            let e = read_embedder(r.tx)?.ok_or_else(|| {
                Error::invalid(
                    "embedder",
                    "this store has none: set one first (`somna embedder set`)",
                )
            })?;
            let scopes = match scope {
                Some(s) => vec![s.to_string()],
                None => list_scopes(r.tx)?.into_iter().map(|(n, _)| n).collect(),
            };
            Ok((e, scopes))
        })?;
        let mut report = BackfillReport {
            model: e.model.clone(),
            ..BackfillReport::default()
        };
        for s in &scopes {
            report.scopes += 1;
            report.remaining += self.backfill_scope(&e, s, max, &mut report, progress)?;
        }
        Ok(report)
    }

    /// One scope's backfill until `max` memories are embedded in all; the scope's memories left.
    fn backfill_scope(
        &self,
        e: &Embedder,
        scope: &str,
        max: u64,
        report: &mut BackfillReport,
        progress: &mut dyn FnMut(&BackfillProgress),
    ) -> Result<u64> {
        let model = e.model.as_str();
        loop {
            let room = max.saturating_sub(report.embedded);
            let (count, cursor, batch) = self.read(|r| {
                let Some(meta) = read_scope(r.tx, scope)? else {
                    return Ok((0, 0, Vec::new()));
                };
                let cursor = embeddings::cursor(r.tx, meta.id, model)?;
                let hi = meta
                    .count
                    .min(cursor.saturating_add(u64::from(e.batch).min(room)));
                let mut batch = Vec::new();
                each_memory(r.tx, meta.id, cursor, hi, |m| {
                    batch.push((m.id, m.text));
                    Ok(())
                })?;
                Ok((meta.count, cursor, batch))
            })?;
            if batch.is_empty() {
                return Ok(count.saturating_sub(cursor));
            }
            let hi = batch.last().map_or(cursor, |(id, _)| id + 1);
            let texts: Vec<&str> = batch
                .iter()
                .filter(|(_, t)| t != TOMBSTONE)
                .map(|(_, t)| t.as_str())
                .collect();
            let vectors = e.embed(&texts, Purpose::Passage, BATCH_WAIT_MS.max(e.query_wait_ms))?;
            let ids: Vec<u64> = batch
                .iter()
                .filter(|(_, t)| t != TOMBSTONE)
                .map(|(id, _)| *id)
                .collect();
            let done = self.write(|tx| {
                tx.require_admin("backfill embeddings")?;
                write_batch(tx, scope, model, &ids, &vectors, hi)
            })?;
            report.embedded += done;
            report.skipped += batch.len() as u64 - done;
            progress(&BackfillProgress {
                scope: scope.to_string(),
                embedded: report.embedded,
                left_in_scope: count.saturating_sub(hi),
            });
        }
    }
}

/// Writes one batch's vectors (of memories still holding their text: one redacted meanwhile is
/// passed over) and moves the cursor to `hi`; how many were written.
fn write_batch(
    tx: &mut WriteTxn<'_>,
    scope: &str,
    model: &str,
    ids: &[u64],
    vectors: &[Vec<f32>],
    hi: u64,
) -> Result<u64> {
    let Some(meta) = read_scope(&*tx.tx, scope)? else {
        return Ok(0);
    };
    let sid = meta.id;
    embeddings::register(&mut *tx.tx, model)?;
    let mut done = 0;
    for (id, v) in ids.iter().zip(vectors) {
        if get_memory(&*tx.tx, sid, *id)?.text == TOMBSTONE {
            continue;
        }
        crate::domain::vector::validate(v)?;
        embeddings::put(&mut *tx.tx, sid, model, *id, v)?;
        done += 1;
    }
    embeddings::advance(&mut *tx.tx, sid, model, hi)?;
    Ok(done)
}

/// Deletes every vector of `model` in every scope; how many there were.
pub(crate) fn drop_model(tx: &mut WriteTxn<'_>, model: &str) -> Result<u64> {
    let sids: Vec<u32> = list_scopes(&*tx.tx)?
        .into_iter()
        .map(|(_, m)| m.id)
        .collect();
    embeddings::drop_model(&mut *tx.tx, &sids, model)
}
