//! Storing checkpoints and pending writes: only the channels whose version is new, and of a list
//! channel only the items appended since its previous version.
//!
//! A list value is recognised as "the previous version plus new items" by a chained hash: for
//! items `x1..xm`, `c0 = 0` and `ck = XXH3-128(c(k-1) || len(kind) || kind || bytes(xk))`. The
//! stored list of the channel's previous version (the greatest version below the new one) keeps
//! its count `n` and `cn`; when `n <= m` and the new list's `cn` is the same, the first `n` items
//! are that version's, its runs of item numbers are reused and only `x(n+1)..xm` are written.
//! Any other change (an item removed or edited) stores the list again, as new items.

use std::ops::ControlFlow;

use serde::Serialize;
use xxhash_rust::xxh3::Xxh3;

use crate::checkpoint::{
    idx_key, thread_scope, validate_part, validate_thread, ChannelValue, CheckpointRecord,
    NewCheckpoint, PendingWrite, StoredChannel, Typed, VKey, WriteRecord,
};
use crate::error::Result;
use crate::storage::access::Access;
use crate::storage::codec::{decode, encode};
use crate::storage::kv::Dir;
use crate::storage::tables::{
    CHECKPOINTS, CHECKPOINT_CHANNELS, CHECKPOINT_ITEMS, CHECKPOINT_WRITES,
};
use crate::storage::txn::WriteTxn;

/// [`StoredChannel`] borrowing its value: the same bytes, without copying a large value.
#[derive(Serialize)]
enum StoredRef<'a> {
    Empty,
    Whole(&'a Typed),
}

/// The chained hash after `prev` of one more item.
fn chain(prev: &[u8; 16], item: &Typed) -> [u8; 16] {
    let mut h = Xxh3::new();
    h.update(prev);
    h.update(&(item.kind.len() as u64).to_le_bytes());
    h.update(item.kind.as_bytes());
    h.update(&item.bytes);
    h.digest128().to_le_bytes()
}

/// `chains[k]`: the chained hash of the first `k` items, for `k` in `0..=items.len()`.
fn chains(items: &[Typed]) -> Vec<[u8; 16]> {
    let mut out = Vec::with_capacity(items.len() + 1);
    let mut c = [0u8; 16];
    out.push(c);
    for it in items {
        c = chain(&c, it);
        out.push(c);
    }
    out
}

fn validate_key(thread: &str, ns: &str, id: &str) -> Result<()> {
    validate_thread(thread)?;
    validate_part("checkpoint namespace", ns)?;
    validate_part("checkpoint id", id)
}

impl WriteTxn<'_> {
    /// Stores a checkpoint: its record, and the value of each channel in `changed` unless that
    /// channel already has a value at that version. Replaces a record with the same id.
    pub fn checkpoint_put(&mut self, c: &NewCheckpoint) -> Result<()> {
        validate_key(&c.thread, &c.ns, &c.id)?;
        for (ch, ver) in &c.versions {
            validate_part("channel", ch)?;
            validate_part("channel version", ver)?;
        }
        self.require(Access::Write, &thread_scope(&c.thread))?;
        for (ch, ver, value) in &c.changed {
            validate_part("channel", ch)?;
            validate_part("channel version", ver)?;
            self.put_channel(&c.thread, &c.ns, ch, ver, value)?;
        }
        let rec = CheckpointRecord {
            parent: c.parent.clone(),
            checkpoint: c.checkpoint.clone(),
            metadata: c.metadata.clone(),
            metadata_json: c.metadata_json.clone(),
            run_id: c.run_id.clone(),
            versions: c.versions.clone(),
        };
        CHECKPOINTS.put(&mut *self.tx, (&c.thread, &c.ns, &c.id), &encode(&rec)?)
    }

    fn put_channel(
        &mut self,
        t: &str,
        ns: &str,
        ch: &str,
        ver: &str,
        value: &ChannelValue,
    ) -> Result<()> {
        if CHECKPOINT_CHANNELS.contains(&*self.tx, (t, ns, ch, ver))? {
            return Ok(());
        }
        let bytes = match value {
            ChannelValue::Empty => encode(&StoredRef::Empty)?,
            ChannelValue::Whole(v) => encode(&StoredRef::Whole(v))?,
            ChannelValue::List(items) => encode(&self.put_list(t, ns, ch, ver, items)?)?,
        };
        CHECKPOINT_CHANNELS.put(&mut *self.tx, (t, ns, ch, ver), &bytes)
    }

    /// Writes the items of a list value that its previous version does not hold; its runs.
    fn put_list(
        &mut self,
        t: &str,
        ns: &str,
        ch: &str,
        ver: &str,
        items: &[Typed],
    ) -> Result<StoredChannel> {
        let sums = chains(items);
        let base = CHECKPOINT_CHANNELS.edge(
            &*self.tx,
            (t, ns, ch, "")..(t, ns, ch, ver),
            Dir::Reverse,
            |(_, _, _, v), bytes| {
                decode::<StoredChannel>("checkpoint_channels", &VKey(t, ns, ch, &v), bytes)
            },
        )?;
        let (mut runs, kept) = match base {
            Some(StoredChannel::List { runs, count, chain })
                if usize::try_from(count).is_ok_and(|n| sums.get(n) == Some(&chain)) =>
            {
                (runs, count)
            }
            _ => (Vec::new(), 0),
        };
        let fresh = items
            .get(usize::try_from(kept).unwrap_or(usize::MAX)..)
            .unwrap_or(&[]);
        if !fresh.is_empty() {
            let first = self.next_item(t, ns, ch)?;
            for (i, it) in (first..).zip(fresh) {
                CHECKPOINT_ITEMS.put(&mut *self.tx, (t, ns, ch, i), &encode(it)?)?;
            }
            push_run(&mut runs, first, fresh.len() as u64);
        }
        Ok(StoredChannel::List {
            runs,
            count: items.len() as u64,
            chain: sums.last().copied().unwrap_or([0; 16]),
        })
    }

    /// The next free item number of a channel: one past its greatest.
    fn next_item(&self, t: &str, ns: &str, ch: &str) -> Result<u64> {
        let last = CHECKPOINT_ITEMS.edge(
            &*self.tx,
            (t, ns, ch, 0)..=(t, ns, ch, u64::MAX),
            Dir::Reverse,
            |(_, _, _, i), _| Ok(i),
        )?;
        Ok(last.map_or(0, |i| i.saturating_add(1)))
    }

    /// Stores the pending writes of task `writes[..].task_id` against a checkpoint. A write
    /// whose `(task id, index)` is already stored is kept, unless every write of the call is a
    /// special one (negative index: error, interrupt, ...), which replaces, as LangGraph's own
    /// savers do.
    pub fn checkpoint_put_writes(
        &mut self,
        thread: &str,
        ns: &str,
        id: &str,
        writes: &[PendingWrite],
    ) -> Result<()> {
        validate_key(thread, ns, id)?;
        self.require(Access::Write, &thread_scope(thread))?;
        let replace = writes.iter().all(|w| w.idx < 0);
        for w in writes {
            validate_part("task id", &w.task_id)?;
            let key = (thread, ns, id, w.task_id.as_str(), idx_key(w.idx));
            if !replace && CHECKPOINT_WRITES.contains(&*self.tx, key)? {
                continue;
            }
            let rec = WriteRecord {
                channel: w.channel.clone(),
                value: w.value.clone(),
                task_path: w.task_path.clone(),
            };
            CHECKPOINT_WRITES.put(&mut *self.tx, key, &encode(&rec)?)?;
        }
        Ok(())
    }
}

/// Appends the run `(first, n)`, merged with the last run when it continues it.
pub(crate) fn push_run(runs: &mut Vec<(u64, u64)>, first: u64, n: u64) {
    if let Some(last) = runs.last_mut() {
        if last.0.saturating_add(last.1) == first {
            last.1 += n;
            return;
        }
    }
    runs.push((first, n));
}

/// Visits the items of `runs` in order; `f` may stop the walk.
pub(crate) fn each_item(
    kv: &(impl crate::storage::kv::KvRead + ?Sized),
    key: (&str, &str, &str),
    runs: &[(u64, u64)],
    mut f: impl FnMut(u64, &[u8]) -> Result<()>,
) -> Result<()> {
    let (t, ns, ch) = key;
    for &(first, n) in runs {
        let end = first.saturating_add(n);
        CHECKPOINT_ITEMS.prefetch_range(kv, (t, ns, ch, first)..(t, ns, ch, end))?;
        CHECKPOINT_ITEMS.scan(
            kv,
            (t, ns, ch, first)..(t, ns, ch, end),
            Dir::Forward,
            |(_, _, _, i), v| {
                f(i, v)?;
                Ok(ControlFlow::Continue(()))
            },
        )?;
    }
    Ok(())
}
