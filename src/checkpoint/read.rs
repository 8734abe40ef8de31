//! Reading checkpoints: one by id or the latest of a thread's namespace, and `list`, which
//! reads the matching checkpoint records in one range scan, then their pending writes in one
//! range scan per namespace and their channel values by key (prefetched at once on a server):
//! never a query per listed checkpoint for its writes.

use std::collections::HashMap;
use std::ops::ControlFlow;

use crate::checkpoint::write::each_item;
use crate::checkpoint::{
    after, idx_of, thread_scope, CKey, ChannelValue, CheckpointEntry, CheckpointRecord,
    PendingWrite, StoredChannel, Typed, VKey, WriteRecord,
};
use crate::error::{Error, Result};
use crate::storage::access::Access;
use crate::storage::codec::decode;
use crate::storage::kv::{Dir, KvRead};
use crate::storage::tables::{CHECKPOINTS, CHECKPOINT_CHANNELS, CHECKPOINT_WRITES};
use crate::storage::txn::ReadTxn;

/// What `list` returns: LangGraph's `list(config, filter=, before=, limit=)`.
#[derive(Debug, Clone, Default)]
pub struct ListQuery {
    /// Only this thread (`None`: every thread the principal may read).
    pub thread: Option<String>,
    /// Only this namespace (`None`: every namespace).
    pub ns: Option<String>,
    /// Only this checkpoint id.
    pub id: Option<String>,
    /// Only checkpoints with a smaller id.
    pub before: Option<String>,
    /// Only checkpoints whose metadata has each of these keys (or dotted paths into nested
    /// objects) with exactly this JSON value.
    pub filter: Vec<(String, serde_json::Value)>,
    /// At most this many, newest first.
    pub limit: Option<usize>,
}

/// One channel's history as [`ReadTxn::checkpoint_delta_history`] gives it (LangGraph's
/// `DeltaChannelHistory`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeltaHistory {
    /// The channel.
    pub channel: String,
    /// The pending writes to it on the ancestors' path, oldest first.
    pub writes: Vec<PendingWrite>,
    /// Its value at the nearest ancestor that holds one (`None`: none does; start empty).
    pub seed: Option<ChannelValue>,
}

impl DeltaHistory {
    fn new(channel: &str) -> Self {
        DeltaHistory {
            channel: channel.to_string(),
            writes: Vec::new(),
            seed: None,
        }
    }
}

/// A record found by a scan, with its key.
struct Found {
    thread: String,
    ns: String,
    id: String,
    rec: CheckpointRecord,
}

fn decode_record(t: &str, ns: &str, id: &str, v: &[u8]) -> Result<CheckpointRecord> {
    decode("checkpoints", &CKey(t, ns, id), v)
}

/// The value at a filter's key: the key itself, else its dotted path into nested objects
/// (`"user.level"`: `{"user": {"level": ..}}`), as SqliteSaver's `json_extract` reads it.
fn at<'a>(
    meta: &'a serde_json::Map<String, serde_json::Value>,
    key: &str,
) -> Option<&'a serde_json::Value> {
    if let Some(v) = meta.get(key) {
        return Some(v);
    }
    let (head, rest) = key.split_once('.')?;
    at(meta.get(head)?.as_object()?, rest)
}

/// Whether the metadata (a JSON object) has every `(key, value)` of the filter.
fn matches(t: &str, ns: &str, id: &str, rec: &CheckpointRecord, q: &ListQuery) -> Result<bool> {
    if q.filter.is_empty() {
        return Ok(true);
    }
    let meta: serde_json::Map<String, serde_json::Value> = serde_json::from_str(&rec.metadata_json)
        .map_err(|e| {
            Error::corrupt(
                "checkpoints",
                CKey(t, ns, id),
                format!("metadata is not a JSON object: {e}"),
            )
        })?;
    Ok(q.filter.iter().all(|(k, v)| at(&meta, k) == Some(v)))
}

impl ReadTxn<'_> {
    /// The checkpoint `id` of a thread's namespace, or (`None`) its latest; with its channel
    /// values and pending writes.
    pub fn checkpoint_get(
        &self,
        thread: &str,
        ns: &str,
        id: Option<&str>,
    ) -> Result<Option<CheckpointEntry>> {
        self.require(Access::Read, &thread_scope(thread))?;
        let Some(f) = self.record(thread, ns, id)? else {
            return Ok(None);
        };
        let mut out = self.entries(vec![f])?;
        Ok(out.pop())
    }

    /// The record of checkpoint `id` (or, `None`, the latest) of a thread's namespace.
    fn record(&self, thread: &str, ns: &str, id: Option<&str>) -> Result<Option<Found>> {
        let found = match id {
            Some(id) => CHECKPOINTS
                .get(self.tx, (thread, ns, id))?
                .map(|v| decode_record(thread, ns, id, &v).map(|r| (id.to_string(), r)))
                .transpose()?,
            None => {
                let next = after(ns);
                CHECKPOINTS.edge(
                    self.tx,
                    (thread, ns, "")..(thread, next.as_str(), ""),
                    Dir::Reverse,
                    |(_, _, id), v| Ok((id.to_string(), decode_record(thread, ns, id, v)?)),
                )?
            }
        };
        Ok(found.map(|(id, rec)| Found {
            thread: thread.to_string(),
            ns: ns.to_string(),
            id,
            rec,
        }))
    }

    /// LangGraph's `get_delta_channel_history` for checkpoint `id` (or the latest): for each of
    /// `channels`, walking its ancestors (the parent chain, not the checkpoint itself), the
    /// pending writes to the channel, oldest first, back to the nearest ancestor that holds a
    /// value of the channel, which is the seed. Reads one record, its writes and at most the
    /// sought channels' values per ancestor: never a whole checkpoint.
    pub fn checkpoint_delta_history(
        &self,
        thread: &str,
        ns: &str,
        id: Option<&str>,
        channels: &[String],
    ) -> Result<Vec<DeltaHistory>> {
        self.require(Access::Read, &thread_scope(thread))?;
        let mut acc: Vec<(DeltaHistory, bool)> = channels
            .iter()
            .map(|c| (DeltaHistory::new(c), false))
            .collect();
        let mut cursor = self.record(thread, ns, id)?.and_then(|f| f.rec.parent);
        // A host names each parent, so a chain can loop: each ancestor is visited once.
        let mut visited = std::collections::HashSet::new();
        while let Some(cid) = cursor.take() {
            if acc.iter().all(|(_, done)| *done) {
                break;
            }
            if !visited.insert(cid.clone()) {
                return Err(Error::invalid(
                    "checkpoint",
                    format!("the parent chain of thread {thread:?} loops at checkpoint {cid:?}"),
                ));
            }
            let Some(f) = self.record(thread, ns, Some(&cid))? else {
                break;
            };
            let writes = self
                .writes_of(std::slice::from_ref(&f))?
                .remove(&(f.thread.clone(), f.ns.clone(), f.id.clone()))
                .unwrap_or_default();
            for w in writes.iter().rev() {
                for (h, _) in acc
                    .iter_mut()
                    .filter(|(h, done)| !done && h.channel == w.channel)
                {
                    h.writes.push(w.clone());
                }
            }
            for (h, done) in acc.iter_mut().filter(|(_, done)| !*done) {
                let Some((ch, ver)) = f.rec.versions.iter().find(|(c, _)| *c == h.channel) else {
                    continue;
                };
                // An empty channel is not a value (LangGraph leaves it out of channel_values).
                match channel_value(self.tx, (thread, ns, ch, ver))? {
                    None | Some(ChannelValue::Empty) => {}
                    Some(v) => {
                        h.seed = Some(v);
                        *done = true;
                    }
                }
            }
            cursor = f.rec.parent;
        }
        Ok(acc
            .into_iter()
            .map(|(mut h, _)| {
                h.writes.reverse();
                h
            })
            .collect())
    }

    /// The checkpoints `q` selects, newest (greatest id) first, with their values and writes.
    pub fn checkpoint_list(&self, q: &ListQuery) -> Result<Vec<CheckpointEntry>> {
        if let Some(t) = &q.thread {
            self.require(Access::Read, &thread_scope(t))?;
        }
        let found = match (&q.thread, &q.ns) {
            (Some(t), Some(ns)) => self.scan_namespace(t, ns, q)?,
            _ => self.scan_wide(q)?,
        };
        self.entries(found)
    }

    /// One namespace of one thread: a reverse scan, stopped at the limit.
    fn scan_namespace(&self, t: &str, ns: &str, q: &ListQuery) -> Result<Vec<Found>> {
        let next = after(ns);
        let hi = q.before.as_deref().unwrap_or("");
        let hi_key = if q.before.is_some() {
            (t, ns, hi)
        } else {
            (t, next.as_str(), "")
        };
        let mut out = Vec::new();
        let limit = q.limit.unwrap_or(usize::MAX);
        CHECKPOINTS.scan(
            self.tx,
            (t, ns, "")..hi_key,
            Dir::Reverse,
            |(_, _, id), v| {
                if out.len() >= limit {
                    return Ok(ControlFlow::Break(()));
                }
                if q.id.as_deref().is_some_and(|want| want != id) {
                    return Ok(ControlFlow::Continue(()));
                }
                let rec = decode_record(t, ns, id, v)?;
                if matches(t, ns, id, &rec, q)? {
                    out.push(Found {
                        thread: t.to_string(),
                        ns: ns.to_string(),
                        id: id.to_string(),
                        rec,
                    });
                }
                Ok(ControlFlow::Continue(()))
            },
        )?;
        Ok(out)
    }

    /// Several namespaces or threads: one scan, then sorted by id, newest first.
    fn scan_wide(&self, q: &ListQuery) -> Result<Vec<Found>> {
        let mut out = Vec::new();
        let mut allowed: HashMap<String, bool> = HashMap::new();
        let mut visit =
            |(t, ns, id): (std::borrow::Cow<'_, str>, std::borrow::Cow<'_, str>, &str),
             v: &[u8]|
             -> Result<()> {
                if q.ns.as_deref().is_some_and(|want| want != ns)
                    || q.id.as_deref().is_some_and(|want| want != id)
                    || q.before.as_deref().is_some_and(|b| id >= b)
                {
                    return Ok(());
                }
                if !allowed.contains_key(t.as_ref()) {
                    let ok = self.may(Access::Read, &thread_scope(&t))?;
                    allowed.insert(t.to_string(), ok);
                }
                if allowed.get(t.as_ref()) != Some(&true) {
                    return Ok(());
                }
                let rec = decode_record(&t, &ns, id, v)?;
                if matches(&t, &ns, id, &rec, q)? {
                    out.push(Found {
                        thread: t.to_string(),
                        ns: ns.to_string(),
                        id: id.to_string(),
                        rec,
                    });
                }
                Ok(())
            };
        match &q.thread {
            Some(t) => {
                let next = after(t);
                CHECKPOINTS.each(
                    self.tx,
                    (t.as_str(), "", "")..(next.as_str(), "", ""),
                    |k, v| visit(k, v),
                )?
            }
            None => CHECKPOINTS.each(self.tx, .., |k, v| visit(k, v))?,
        }
        out.sort_by(|a, b| b.id.cmp(&a.id));
        out.truncate(q.limit.unwrap_or(usize::MAX));
        Ok(out)
    }

    /// The entries of `found`: channel values by key, pending writes by one range scan per
    /// namespace.
    fn entries(&self, found: Vec<Found>) -> Result<Vec<CheckpointEntry>> {
        let keys: Vec<(&str, &str, &str, &str)> = found
            .iter()
            .flat_map(|f| {
                f.rec
                    .versions
                    .iter()
                    .map(move |(c, v)| (f.thread.as_str(), f.ns.as_str(), c.as_str(), v.as_str()))
            })
            .collect();
        CHECKPOINT_CHANNELS.prefetch(self.tx, keys)?;
        let mut writes = self.writes_of(&found)?;
        let mut out = Vec::with_capacity(found.len());
        for f in found {
            let values = channel_values(self.tx, &f)?;
            let w = writes
                .remove(&(f.thread.clone(), f.ns.clone(), f.id.clone()))
                .unwrap_or_default();
            out.push(CheckpointEntry {
                thread: f.thread,
                ns: f.ns,
                id: f.id,
                parent: f.rec.parent,
                checkpoint: f.rec.checkpoint,
                metadata: f.rec.metadata,
                values,
                writes: w,
            });
        }
        Ok(out)
    }

    /// The pending writes of `found`, by checkpoint, in LangGraph's order.
    fn writes_of(&self, found: &[Found]) -> Result<WritesByCheckpoint> {
        let mut spans: HashMap<(&str, &str), (&str, &str)> = HashMap::new();
        for f in found {
            let e = spans
                .entry((f.thread.as_str(), f.ns.as_str()))
                .or_insert((f.id.as_str(), f.id.as_str()));
            e.0 = e.0.min(f.id.as_str());
            e.1 = e.1.max(f.id.as_str());
        }
        let mut out: WritesByCheckpoint = HashMap::new();
        for ((t, ns), (lo, hi)) in spans {
            let next = after(hi);
            CHECKPOINT_WRITES.each(
                self.tx,
                (t, ns, lo, "", 0)..(t, ns, next.as_str(), "", 0),
                |(_, _, id, task, idx), v| {
                    let rec: WriteRecord = decode("checkpoint_writes", &CKey(t, ns, &id), v)?;
                    out.entry((t.to_string(), ns.to_string(), id.to_string()))
                        .or_default()
                        .push(PendingWrite {
                            task_id: task.to_string(),
                            idx: idx_of(idx),
                            channel: rec.channel,
                            value: rec.value,
                            task_path: rec.task_path,
                        });
                    Ok(())
                },
            )?;
        }
        for w in out.values_mut() {
            w.sort_by(|a, b| {
                (&a.task_path, &a.task_id, a.idx).cmp(&(&b.task_path, &b.task_id, b.idx))
            });
        }
        Ok(out)
    }
}

type WritesByCheckpoint = HashMap<(String, String, String), Vec<PendingWrite>>;

/// The values of the channels a checkpoint names (a channel whose value is not stored is left
/// out, as LangGraph's savers do).
fn channel_values(kv: &(impl KvRead + ?Sized), f: &Found) -> Result<Vec<(String, ChannelValue)>> {
    let (t, ns) = (f.thread.as_str(), f.ns.as_str());
    let mut out = Vec::with_capacity(f.rec.versions.len());
    for (ch, ver) in &f.rec.versions {
        if let Some(value) = channel_value(kv, (t, ns, ch, ver))? {
            out.push((ch.clone(), value));
        }
    }
    Ok(out)
}

/// The value of channel `ch` at version `ver` (`None`: not stored).
fn channel_value(
    kv: &(impl KvRead + ?Sized),
    (t, ns, ch, ver): (&str, &str, &str, &str),
) -> Result<Option<ChannelValue>> {
    let Some(bytes) = CHECKPOINT_CHANNELS.get(kv, (t, ns, ch, ver))? else {
        return Ok(None);
    };
    let stored: StoredChannel = decode("checkpoint_channels", &VKey(t, ns, ch, &ver), &bytes)?;
    Ok(Some(match stored {
        StoredChannel::Empty => ChannelValue::Empty,
        StoredChannel::Whole(v) => ChannelValue::Whole(v),
        StoredChannel::List { runs, count, .. } => {
            ChannelValue::List(list_items(kv, (t, ns, ch), &runs, count)?)
        }
    }))
}

/// The items of a stored list, checked against its count.
pub(crate) fn list_items(
    kv: &(impl KvRead + ?Sized),
    key: (&str, &str, &str),
    runs: &[(u64, u64)],
    count: u64,
) -> Result<Vec<Typed>> {
    let (t, ns, ch) = key;
    let mut items = Vec::with_capacity(usize::try_from(count).unwrap_or(0).min(1 << 16));
    each_item(kv, key, runs, |i, v| {
        items.push(decode::<Typed>(
            "checkpoint_items",
            &VKey(t, ns, ch, &i),
            v,
        )?);
        Ok(())
    })?;
    if items.len() as u64 != count {
        return Err(Error::corrupt(
            "checkpoint_channels",
            VKey(t, ns, ch, &"list"),
            format!(
                "the list holds {count} items but {} are stored",
                items.len()
            ),
        ));
    }
    Ok(items)
}

/// Rows and value bytes of the checkpoint tables ([`ReadTxn::checkpoint_stats`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct CheckpointStats {
    /// Checkpoint records.
    pub checkpoints: u64,
    /// Stored channel values (one per channel and version).
    pub channel_values: u64,
    /// Stored list items.
    pub items: u64,
    /// Pending writes.
    pub writes: u64,
    /// Bytes of all those values (envelopes included, keys not).
    pub value_bytes: u64,
}

impl ReadTxn<'_> {
    /// What the checkpoint tables hold, every thread's and namespace's together (admin only:
    /// the figures count what other principals stored).
    pub fn checkpoint_stats(&self) -> Result<CheckpointStats> {
        self.require_admin("read the checkpoint tables' statistics")?;
        let mut s = CheckpointStats::default();
        let tables = [
            (crate::storage::kv::TableId::Checkpoints, &mut s.checkpoints),
            (
                crate::storage::kv::TableId::CheckpointChannels,
                &mut s.channel_values,
            ),
            (crate::storage::kv::TableId::CheckpointItems, &mut s.items),
            (crate::storage::kv::TableId::CheckpointWrites, &mut s.writes),
        ];
        let mut bytes = 0u64;
        for (table, n) in tables {
            let all = crate::storage::kv::Span::all(Dir::Forward);
            self.tx.scan(table, all, &mut |_, v| {
                *n += 1;
                bytes += v.len() as u64;
                Ok(ControlFlow::Continue(()))
            })?;
        }
        s.value_bytes = bytes;
        Ok(s)
    }
}
