//! Deleting, copying and pruning threads: `delete_thread`, `delete_for_runs`, `copy_thread` and
//! `prune`. Whatever removes checkpoints also removes the channel values and list items that no
//! remaining checkpoint of the namespace refers to.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::ops::ControlFlow;

use crate::checkpoint::{
    after, thread_scope, validate_thread, CKey, CheckpointRecord, StoredChannel, VKey,
};
use crate::error::{Error, Result};
use crate::storage::access::Access;
use crate::storage::codec::decode;
use crate::storage::kv::Dir;
use crate::storage::tables::{
    CHECKPOINTS, CHECKPOINT_CHANNELS, CHECKPOINT_ITEMS, CHECKPOINT_WRITES,
};
use crate::storage::txn::WriteTxn;

/// How [`WriteTxn::checkpoint_prune`] prunes a thread.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prune {
    /// Keep the latest checkpoint of each namespace (with its writes), delete the others.
    KeepLatest,
    /// Delete every checkpoint.
    DeleteAll,
}

impl std::str::FromStr for Prune {
    type Err = Error;
    fn from_str(s: &str) -> Result<Prune> {
        match s {
            "keep_latest" => Ok(Prune::KeepLatest),
            "delete" | "delete_all" => Ok(Prune::DeleteAll),
            _ => Err(Error::invalid(
                "prune strategy",
                format!("must be keep_latest or delete (got {s:?})"),
            )),
        }
    }
}

impl WriteTxn<'_> {
    /// Deletes every checkpoint, value and write of a thread; how many checkpoints there were.
    pub fn checkpoint_delete_thread(&mut self, thread: &str) -> Result<u64> {
        validate_thread(thread)?;
        self.require(Access::Write, &thread_scope(thread))?;
        let next = after(thread);
        let (t, n) = (thread, next.as_str());
        let count = CHECKPOINTS.delete_range(&mut *self.tx, (t, "", "")..(n, "", ""))?;
        CHECKPOINT_CHANNELS.delete_range(&mut *self.tx, (t, "", "", "")..(n, "", "", ""))?;
        CHECKPOINT_ITEMS.delete_range(&mut *self.tx, (t, "", "", 0)..(n, "", "", 0))?;
        CHECKPOINT_WRITES.delete_range(&mut *self.tx, (t, "", "", "", 0)..(n, "", "", "", 0))?;
        Ok(count)
    }

    /// Deletes the checkpoints (and their writes) made by any of `run_ids`, in every thread;
    /// how many.
    pub fn checkpoint_delete_for_runs(&mut self, run_ids: &[&str]) -> Result<u64> {
        if run_ids.is_empty() {
            return Ok(0);
        }
        let runs: HashSet<&str> = run_ids.iter().copied().collect();
        let mut victims: Vec<(String, String, String)> = Vec::new();
        CHECKPOINTS.each(&*self.tx, .., |(t, ns, id), v| {
            let rec: CheckpointRecord = decode("checkpoints", &CKey(&t, &ns, id), v)?;
            if rec.run_id.as_deref().is_some_and(|r| runs.contains(r)) {
                victims.push((t.to_string(), ns.to_string(), id.to_string()));
            }
            Ok(())
        })?;
        self.delete_checkpoints(&victims)
    }

    /// Deletes the listed checkpoints and their writes, then what no checkpoint refers to.
    fn delete_checkpoints(&mut self, victims: &[(String, String, String)]) -> Result<u64> {
        let mut touched: BTreeSet<(&str, &str)> = BTreeSet::new();
        for (t, ns, id) in victims {
            self.require(Access::Write, &thread_scope(t))?;
            CHECKPOINTS.delete(&mut *self.tx, (t, ns, id))?;
            let next = after(id);
            CHECKPOINT_WRITES.delete_range(
                &mut *self.tx,
                (t.as_str(), ns.as_str(), id.as_str(), "", 0)..(t, ns, next.as_str(), "", 0),
            )?;
            touched.insert((t, ns));
        }
        for (t, ns) in touched {
            self.collect_garbage(t, ns)?;
        }
        Ok(victims.len() as u64)
    }

    /// Copies every checkpoint, value and write of `source` to `target`, replacing what `target`
    /// held (its own list values would otherwise share item numbers with the copied ones and
    /// read back the source's messages); how many checkpoints. Copying a thread onto itself
    /// changes nothing.
    pub fn checkpoint_copy_thread(&mut self, source: &str, target: &str) -> Result<u64> {
        validate_thread(source)?;
        validate_thread(target)?;
        self.require(Access::Read, &thread_scope(source))?;
        self.require(Access::Write, &thread_scope(target))?;
        let next = after(source);
        let (s, n) = (source, next.as_str());
        if source == target {
            let mut count = 0u64;
            CHECKPOINTS.each(&*self.tx, (s, "", "")..(n, "", ""), |_, _| {
                count += 1;
                Ok(())
            })?;
            return Ok(count);
        }
        self.checkpoint_delete_thread(target)?;
        let mut rows: Vec<(String, String, Vec<u8>)> = Vec::new();
        CHECKPOINTS.each(&*self.tx, (s, "", "")..(n, "", ""), |(_, ns, id), v| {
            rows.push((ns.to_string(), id.to_string(), v.to_vec()));
            Ok(())
        })?;
        for (ns, id, v) in &rows {
            CHECKPOINTS.put(&mut *self.tx, (target, ns, id), v)?;
        }
        let mut chans: Vec<(String, String, String, Vec<u8>)> = Vec::new();
        CHECKPOINT_CHANNELS.each(
            &*self.tx,
            (s, "", "", "")..(n, "", "", ""),
            |(_, ns, c, ver), v| {
                chans.push((ns.to_string(), c.to_string(), ver.to_string(), v.to_vec()));
                Ok(())
            },
        )?;
        for (ns, c, ver, v) in chans {
            CHECKPOINT_CHANNELS.put(&mut *self.tx, (target, &ns, &c, &ver), &v)?;
        }
        self.copy_items_and_writes(source, target)?;
        Ok(rows.len() as u64)
    }

    fn copy_items_and_writes(&mut self, source: &str, target: &str) -> Result<()> {
        let next = after(source);
        let (s, n) = (source, next.as_str());
        let mut items: Vec<(String, String, u64, Vec<u8>)> = Vec::new();
        CHECKPOINT_ITEMS.each(
            &*self.tx,
            (s, "", "", 0)..(n, "", "", 0),
            |(_, ns, c, i), v| {
                items.push((ns.to_string(), c.to_string(), i, v.to_vec()));
                Ok(())
            },
        )?;
        for (ns, c, i, v) in items {
            CHECKPOINT_ITEMS.put(&mut *self.tx, (target, &ns, &c, i), &v)?;
        }
        let mut writes: Vec<(String, String, String, u64, Vec<u8>)> = Vec::new();
        CHECKPOINT_WRITES.each(
            &*self.tx,
            (s, "", "", "", 0)..(n, "", "", "", 0),
            |(_, ns, id, task, idx), v| {
                writes.push((
                    ns.to_string(),
                    id.to_string(),
                    task.to_string(),
                    idx,
                    v.to_vec(),
                ));
                Ok(())
            },
        )?;
        for (ns, id, task, idx, v) in writes {
            CHECKPOINT_WRITES.put(&mut *self.tx, (target, &ns, &id, &task, idx), &v)?;
        }
        Ok(())
    }

    /// Prunes each thread: [`Prune::KeepLatest`] keeps the latest checkpoint of each namespace,
    /// [`Prune::DeleteAll`] deletes the thread. How many checkpoints were deleted.
    pub fn checkpoint_prune(&mut self, threads: &[&str], strategy: Prune) -> Result<u64> {
        let mut n = 0;
        for &t in threads {
            n += match strategy {
                Prune::DeleteAll => self.checkpoint_delete_thread(t)?,
                Prune::KeepLatest => self.keep_latest(t)?,
            };
        }
        Ok(n)
    }

    fn keep_latest(&mut self, thread: &str) -> Result<u64> {
        validate_thread(thread)?;
        self.require(Access::Write, &thread_scope(thread))?;
        let next = after(thread);
        let mut seen: HashSet<String> = HashSet::new();
        let mut victims = Vec::new();
        CHECKPOINTS.scan(
            &*self.tx,
            (thread, "", "")..(next.as_str(), "", ""),
            Dir::Reverse,
            |(_, ns, id), _| {
                if !seen.insert(ns.to_string()) {
                    victims.push((thread.to_string(), ns.to_string(), id.to_string()));
                }
                Ok(ControlFlow::Continue(()))
            },
        )?;
        self.delete_checkpoints(&victims)
    }

    /// Deletes the channel values of a namespace that no checkpoint names, and the list items
    /// that no remaining list value refers to.
    fn collect_garbage(&mut self, t: &str, ns: &str) -> Result<()> {
        let next = after(ns);
        let mut live: HashSet<(String, String)> = HashSet::new();
        CHECKPOINTS.each(
            &*self.tx,
            (t, ns, "")..(t, next.as_str(), ""),
            |(_, _, id), v| {
                let rec: CheckpointRecord = decode("checkpoints", &CKey(t, ns, id), v)?;
                live.extend(rec.versions);
                Ok(())
            },
        )?;
        let mut dead = Vec::new();
        let mut runs: HashMap<String, Vec<(u64, u64)>> = HashMap::new();
        CHECKPOINT_CHANNELS.each(
            &*self.tx,
            (t, ns, "", "")..(t, next.as_str(), "", ""),
            |(_, _, c, ver), v| {
                if !live.contains(&(c.to_string(), ver.to_string())) {
                    dead.push((c.to_string(), ver.to_string()));
                } else if let StoredChannel::List { runs: r, .. } =
                    decode("checkpoint_channels", &VKey(t, ns, &c, &ver), v)?
                {
                    runs.entry(c.to_string()).or_default().extend(r);
                }
                Ok(())
            },
        )?;
        for (c, ver) in &dead {
            CHECKPOINT_CHANNELS.delete(&mut *self.tx, (t, ns, c, ver))?;
        }
        self.drop_unused_items(t, ns, &runs)
    }

    fn drop_unused_items(
        &mut self,
        t: &str,
        ns: &str,
        runs: &HashMap<String, Vec<(u64, u64)>>,
    ) -> Result<()> {
        let next = after(ns);
        let spans: HashMap<&str, Vec<(u64, u64)>> = runs
            .iter()
            .map(|(c, r)| (c.as_str(), spans_of(r)))
            .collect();
        let mut unused = Vec::new();
        CHECKPOINT_ITEMS.each(
            &*self.tx,
            (t, ns, "", 0)..(t, next.as_str(), "", 0),
            |(_, _, c, i), _| {
                let used = spans.get(c.as_ref()).is_some_and(|s| covers(s, i));
                if !used {
                    unused.push((c.to_string(), i));
                }
                Ok(())
            },
        )?;
        for (c, i) in unused {
            CHECKPOINT_ITEMS.delete(&mut *self.tx, (t, ns, &c, i))?;
        }
        Ok(())
    }
}

/// Runs `(first item, count)` as sorted, disjoint `[start, end)` spans (overlapping and adjacent
/// runs merged), so that an item's use is one binary search, not a pass over every run.
fn spans_of(runs: &[(u64, u64)]) -> Vec<(u64, u64)> {
    let mut v: Vec<(u64, u64)> = runs
        .iter()
        .map(|&(f, n)| (f, f.saturating_add(n)))
        .filter(|(s, e)| s < e)
        .collect();
    v.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(v.len());
    for (s, e) in v {
        match out.last_mut() {
            Some(last) if s <= last.1 => last.1 = last.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// Whether item `i` is inside one of `spans` (as [`spans_of`] makes them).
fn covers(spans: &[(u64, u64)], i: u64) -> bool {
    let k = spans.partition_point(|&(s, _)| s <= i);
    k.checked_sub(1)
        .and_then(|k| spans.get(k))
        .is_some_and(|&(_, e)| i < e)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_merge_runs_and_cover_exactly_their_items() {
        let runs = [(10, 5), (0, 3), (12, 10), (3, 1), (40, 0)];
        let s = spans_of(&runs);
        assert_eq!(s, [(0, 4), (10, 22)]);
        for i in 0..50 {
            let want = runs.iter().any(|&(f, n)| i >= f && i - f < n);
            assert_eq!(covers(&s, i), want, "item {i}");
        }
    }
}
