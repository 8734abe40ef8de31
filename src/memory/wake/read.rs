//! Wake's queries: the cover of one scope read from one snapshot (every summary it shows and
//! every memory it shows raw fetched in ordered runs, with their events and staleness), the
//! largest cover within a byte budget, several scopes sharing one budget, and the
//! [`Store`] calls over them.

use std::collections::HashMap;

use super::{WakeItem, WakeOptions, WakeView, WAKE_SCAN};
use crate::domain::block::Block;
use crate::domain::cover::{cover, cover_all};
use crate::domain::record::{Memory, Summary};
use crate::error::{Error, Result};
use crate::memory::log::{each_memory, get_memory};
use crate::memory::summary::{each_summary, get_summary};
use crate::storage::kv::Dir;
use crate::storage::store::Store;
use crate::storage::tables::{EVENTS, LOG, STALE, TREE};
use crate::storage::txn::ReadTxn;

/// A hasher for [`Block`] keys (two `u64`s, never chosen by a remote party): one multiply per
/// word instead of SipHash, which was a third of a wake with merges pending (the cover's
/// bisection asks `has(block)` about 5,000 times).
#[derive(Default)]
struct BlockHasher(u64);

impl std::hash::Hasher for BlockHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

type BlockMap<V> = HashMap<Block, V, std::hash::BuildHasherDefault<BlockHasher>>;

/// A value a wake line shows, read ahead by [`ReadTxn::read_runs`].
enum Value {
    Memory(Memory),
    Summary(Summary),
}

impl ReadTxn<'_> {
    /// The cover of `scope` for `budget` lines over the first `t` memories.
    pub fn wake_view(&self, scope: &str, budget: usize, snapshot: Option<u64>) -> Result<WakeView> {
        let meta = self.scope_meta(scope)?;
        let count = meta.as_ref().map(|m| m.count).unwrap_or(0);
        let t = snapshot.unwrap_or(count);
        if t > count {
            return Err(Error::OutOfRange {
                asked: format!("snapshot of {t} memories"),
                count,
            });
        }
        let mut view = WakeView {
            scope: scope.to_string(),
            total: t,
            omitted: 0,
            items: Vec::new(),
            pending: meta.as_ref().map(|m| m.pending).unwrap_or(0),
            item_lines: Vec::new(),
        };
        let Some(meta) = meta else { return Ok(view) };
        let sid = meta.id;
        let tree = self.tx;
        let log = self.tx;
        let events = self.tx;
        let mut cache: BlockMap<Option<Summary>> = HashMap::default();
        let fetch = |b: Block, cache: &mut BlockMap<Option<Summary>>| -> Result<bool> {
            if let Some(s) = cache.get(&b) {
                return Ok(s.is_some());
            }
            let s = get_summary(tree, sid, b)?;
            let present = s.is_some();
            cache.insert(b, s);
            Ok(present)
        };
        // With nothing pending, every complete block has a current summary: the cover is the
        // reference cover and its search needs no reads; only the blocks shown are read below.
        let c = if meta.pending == 0 {
            cover_all(t, budget)?
        } else {
            cover(t, budget, &mut |b| fetch(b, &mut cache))?
        };
        view.omitted = c.omitted;
        // One probe each instead of a lookup per line: most scopes have no lifecycle events
        // and no stale summaries at all.
        let any_events = crate::memory::lifecycle::scope_has_events(events, sid)?;
        let any_stale = STALE
            .edge(
                self.tx,
                (sid, 0, 0)..=(sid, u8::MAX, u64::MAX),
                Dir::Forward,
                |_, _| Ok(()),
            )?
            .is_some();
        let now = crate::domain::text::now_us();
        view.item_lines.reserve(c.blocks.len());
        view.items.reserve(c.blocks.len());
        // The values the lines show, by the block's place in the cover (no map, no hashing).
        let mut read: Vec<Option<Value>> = if self.tx.prefetches() {
            self.prefetch_cover(sid, &c.blocks, &cache, any_events, any_stale)?;
            Vec::new()
        } else {
            self.read_runs(sid, &c.blocks, &cache)?
        };
        for (i, b) in c.blocks.into_iter().enumerate() {
            let got = read.get_mut(i).and_then(Option::take);
            if b.size() == 1 {
                let m = match got {
                    Some(Value::Memory(m)) => m,
                    _ => get_memory(log, sid, b.lo())?,
                };
                let evs = if any_events {
                    crate::memory::lifecycle::events_of(events, sid, m.id)?
                } else {
                    Vec::new()
                };
                let st = crate::memory::lifecycle::derive_state(&m, evs, now);
                view.item_lines
                    .push(crate::memory::lifecycle::marked_line(&m, &st));
                view.items.push(WakeItem::Memory(m));
            } else {
                let s = match (got, cache.remove(&b)) {
                    (Some(Value::Summary(s)), _) | (_, Some(Some(s))) => s,
                    _ => get_summary(tree, sid, b)?
                        .ok_or_else(|| Error::corrupt("tree", b, "summary vanished during wake"))?,
                };
                let is_stale = any_stale && STALE.contains(self.tx, (sid, b.level(), b.lo()))?;
                view.item_lines
                    .push(crate::memory::summary::marked_summary_line(b, &s, is_stale));
                view.items.push(WakeItem::Summary {
                    block: b,
                    summary: s,
                });
            }
        }
        Ok(view)
    }

    /// Reads the values of `blocks` (a cover, in position order) by range scans, one per run of
    /// consecutive blocks of one level, where a read costs no round trip (a file): the next entry
    /// of a scan costs a fraction of a B-tree descent per line. Returns each block's value at its
    /// place in `blocks` (summaries already in `cache` are not read again); the lines' point
    /// reads find whatever a scan did not.
    fn read_runs(
        &self,
        sid: u32,
        blocks: &[Block],
        cache: &BlockMap<Option<Summary>>,
    ) -> Result<Vec<Option<Value>>> {
        let mut out: Vec<Option<Value>> = Vec::with_capacity(blocks.len());
        out.resize_with(blocks.len(), || None);
        let wanted = |b: &Block| b.size() == 1 || !cache.contains_key(b);
        let mut start = 0;
        while let Some(&first) = blocks.get(start) {
            let mut end = start + 1;
            if wanted(&first) {
                let mut last = first;
                while let Some(&next) = blocks.get(end) {
                    if next.level() != last.level() || next.lo() != last.hi() || !wanted(&next) {
                        break;
                    }
                    last = next;
                    end += 1;
                }
                let run = out.get_mut(start..end).unwrap_or_default();
                // A value's place in the run: its distance from the run's start in blocks.
                let place = |lo: u64| {
                    lo.checked_sub(first.lo())
                        .filter(|d| d % first.size() == 0)
                        .and_then(|d| usize::try_from(d / first.size()).ok())
                };
                if first.size() == 1 {
                    each_memory(self.tx, sid, first.lo(), last.hi(), |m| {
                        if let Some(slot) = place(m.id).and_then(|i| run.get_mut(i)) {
                            *slot = Some(Value::Memory(m));
                        }
                        Ok(())
                    })?;
                } else {
                    each_summary(
                        self.tx,
                        sid,
                        first.level(),
                        first.lo(),
                        last.lo(),
                        |b, s| {
                            if let Some(slot) = place(b.lo()).and_then(|i| run.get_mut(i)) {
                                *slot = Some(Value::Summary(s));
                            }
                            Ok(())
                        },
                    )?;
                }
            }
            start = end;
        }
        Ok(out)
    }

    /// Tells the backend every read the lines of `blocks` will make, so that a server answers
    /// them in at most four round trips instead of one or two per line (called only where the
    /// engine `prefetches`; a file reads by [`ReadTxn::read_runs`] instead); stale marks and
    /// events only when the scope has any.
    fn prefetch_cover(
        &self,
        sid: u32,
        blocks: &[Block],
        cache: &BlockMap<Option<Summary>>,
        any_events: bool,
        any_stale: bool,
    ) -> Result<()> {
        let raw: Vec<u64> = blocks
            .iter()
            .filter(|b| b.size() == 1)
            .map(|b| b.lo())
            .collect();
        let sums = || blocks.iter().filter(|b| b.size() > 1);
        LOG.prefetch(self.tx, raw.iter().map(|&id| (sid, id)))?;
        TREE.prefetch(
            self.tx,
            sums()
                .filter(|b| !cache.contains_key(b))
                .map(|b| (sid, b.level(), b.lo())),
        )?;
        if any_stale {
            STALE.prefetch(self.tx, sums().map(|b| (sid, b.level(), b.lo())))?;
        }
        if let (true, Some(&lo), Some(&hi)) = (any_events, raw.iter().min(), raw.iter().max()) {
            EVENTS.prefetch_range(self.tx, (sid, lo, 0)..=(sid, hi, u32::MAX))?;
        }
        Ok(())
    }

    /// The wake view within both budgets: lines from `opts.lines` (default `WAKE_LINES`) and
    /// bytes of the whole rendered output from `opts.bytes` (default `WAKE_BYTES`).
    pub fn wake(&self, scope: &str, opts: &WakeOptions) -> Result<WakeView> {
        let cfg = self.config()?;
        let lines = opts.lines.unwrap_or(cfg.wake_lines);
        if lines == 0 {
            return Err(Error::invalid("--lines", "must be at least 1"));
        }
        let bytes = opts.bytes.unwrap_or(cfg.wake_bytes);
        let view = self.wake_view(scope, lines, opts.snapshot)?;
        if bytes == 0 {
            return Ok(view);
        }
        if view.size(opts) <= bytes {
            return Ok(view);
        }
        self.wake_within(scope, opts, view, bytes)
    }

    /// The view of the largest line budget below `view`'s whose whole output fits in `bytes`.
    ///
    /// The output does not grow monotonically with the line budget: below the coarsest cover the
    /// line naming left-out memories can be long, and above it a long summary can take more
    /// bytes than the finer lines that replace it. So the search goes down from the top, and the
    /// first budget that fits is the largest. A budget's cover uses `used <= budget` lines and
    /// every budget from `used` up gives the same cover (`tests/api/store/cover_props.rs` checks
    /// it), so each step goes to the next smaller cover: one view per distinct cover, at most
    /// [`WAKE_SCAN`] of them, then [`Self::wake_bisect`] below the last one tried.
    fn wake_within(
        &self,
        scope: &str,
        opts: &WakeOptions,
        view: WakeView,
        bytes: usize,
    ) -> Result<WakeView> {
        let mut next = view.used();
        for _ in 0..WAKE_SCAN {
            if next <= 1 {
                return Err(no_line_fits(bytes));
            }
            let v = self.wake_view(scope, next - 1, opts.snapshot)?;
            if v.size(opts) <= bytes {
                return Ok(v);
            }
            next = v.used().min(next - 1);
        }
        if next <= 1 {
            return Err(no_line_fits(bytes));
        }
        self.wake_bisect(scope, opts, next - 1, bytes)
    }

    /// A budget of at most `top` lines whose output fits in `bytes`, found by bisection, for
    /// when the scan of [`Self::wake_within`] ends without one: the smallest budget that leaves
    /// nothing out is a monotone question; above it, bisect for a budget that fits (the largest
    /// when the output grows with the budget there, as it does unless summaries are longer than
    /// what they cover); if even that smallest one does not fit, try the budgets below it one by
    /// one (there are few: at most popcount(T) or the blocks the missing summaries force).
    fn wake_bisect(
        &self,
        scope: &str,
        opts: &WakeOptions,
        top: usize,
        bytes: usize,
    ) -> Result<WakeView> {
        let view_of = |b: usize| self.wake_view(scope, b, opts.snapshot);
        let view = view_of(top)?;
        if view.size(opts) <= bytes {
            return Ok(view);
        }
        let (mut lo, mut hi) = (1usize, top);
        if view.omitted == 0 {
            while lo < hi {
                let mid = lo + (hi - lo) / 2;
                if view_of(mid)?.omitted == 0 {
                    hi = mid;
                } else {
                    lo = mid + 1;
                }
            }
            let full = lo;
            let v = view_of(full)?;
            if v.size(opts) <= bytes {
                let (mut ok, mut bad) = (full, top);
                let mut best = v;
                while bad - ok > 1 {
                    let mid = ok + (bad - ok) / 2;
                    let v = view_of(mid)?;
                    if v.size(opts) <= bytes {
                        ok = mid;
                        best = v;
                    } else {
                        bad = mid;
                    }
                }
                return Ok(best);
            }
            hi = full;
        }
        for b in (1..hi.min(top)).rev().take(256) {
            let v = view_of(b)?;
            if v.size(opts) <= bytes {
                return Ok(v);
            }
        }
        Err(no_line_fits(bytes))
    }

    /// Renders wake part `opts.part` as text.
    pub fn wake_text(&self, scope: &str, opts: &WakeOptions) -> Result<String> {
        self.wake(scope, opts)?.part(opts)
    }
}

fn no_line_fits(bytes: usize) -> Error {
    Error::invalid(
        "--bytes",
        format!("{bytes} bytes cannot hold even one line of this memory"),
    )
}

fn item_name(i: &WakeItem) -> String {
    match i {
        WakeItem::Memory(m) => format!("#{}", m.id),
        WakeItem::Summary { block, .. } => block.to_string(),
    }
}

/// Splits `budget` lines among scopes holding `counts` memories: each gets what it needs (all
/// its memories raw) or an equal share of what is left, smallest needs first.
pub fn share_budget(budget: usize, counts: &[u64]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..counts.len()).collect();
    order.sort_by_key(|&i| counts.get(i).copied().unwrap_or(0));
    let mut out = vec![0usize; counts.len()];
    let mut left = budget;
    let mut waiting = counts.iter().filter(|c| **c > 0).count();
    for i in order {
        let need = counts.get(i).copied().unwrap_or(0);
        if need == 0 {
            continue;
        }
        let share = (left / waiting.max(1)).max(1);
        let give = (need.min(share as u64) as usize).min(left.max(1));
        if let Some(o) = out.get_mut(i) {
            *o = give;
        }
        left = left.saturating_sub(give);
        waiting -= 1;
    }
    out
}

impl ReadTxn<'_> {
    /// Wake over several scopes: one section per scope, naming it, sharing one budget of
    /// lines (and bytes). Every scope must be readable by the principal.
    pub fn wake_scopes(
        &self,
        scopes: &[String],
        opts: &WakeOptions,
    ) -> Result<(Vec<WakeView>, String)> {
        let cfg = self.config()?;
        let lines = opts.lines.unwrap_or(cfg.wake_lines);
        let bytes = opts.bytes.unwrap_or(cfg.wake_bytes);
        if lines == 0 {
            return Err(Error::invalid("--lines", "must be at least 1"));
        }
        let mut counts = Vec::with_capacity(scopes.len());
        for s in scopes {
            counts.push(self.count(s)?);
        }
        let nonempty = counts.iter().filter(|c| **c > 0).count();
        if lines < nonempty {
            return Err(Error::invalid(
                "--lines",
                format!("{lines} lines cannot give each of {nonempty} scopes a line"),
            ));
        }
        let render = |budget: usize| -> Result<(Vec<WakeView>, String)> {
            let shares = share_budget(budget, &counts);
            let mut views = Vec::new();
            let mut text = String::new();
            let mut pending = Vec::new();
            for (s, share) in scopes.iter().zip(shares) {
                let v = self.wake_view(s, share.max(1), None)?;
                let hints = opts.hints.for_scope(s);
                text.push_str(&format!(
                    "Your memory in scope {s}, oldest first ({} {}).\n",
                    v.total,
                    if v.total == 1 { "memory" } else { "memories" }
                ));
                if v.total == 0 {
                    text.push_str("(no memories yet)\n");
                }
                for l in v.lines_with(&hints) {
                    text.push_str(&l);
                    text.push('\n');
                }
                if v.pending > 0 {
                    pending.push(format!(
                        "{} merges are pending in scope {s}.{}\n",
                        v.pending,
                        hints.nap_pending()
                    ));
                }
                views.push(v);
            }
            text.push_str("You are awake.\n");
            for p in pending {
                text.push_str(&p);
            }
            Ok((views, text))
        };
        let first = render(lines)?;
        if bytes == 0 || first.1.len() <= bytes {
            return Ok(first);
        }
        // Bisected: a budget that fits, in O(log lines) renders of every scope. As for one
        // scope the output does not grow monotonically with the budget, so this is not always
        // the largest that fits (one scope's search, `wake_within`, is exact).
        let (mut ok, mut bad) = (0usize, lines);
        let mut best = None;
        while bad - ok > 1 {
            let mid = ok + (bad - ok) / 2;
            let r = render(mid)?;
            if r.1.len() <= bytes {
                ok = mid;
                best = Some(r);
            } else {
                bad = mid;
            }
        }
        best.ok_or_else(|| {
            Error::invalid("--bytes", format!("{bytes} bytes cannot hold these scopes"))
        })
    }
}

impl Store {
    /// Wake over several scopes; see [`ReadTxn::wake_scopes`].
    pub fn wake_scopes(
        &self,
        scopes: &[String],
        opts: &WakeOptions,
    ) -> Result<(Vec<WakeView>, String)> {
        crate::domain::text::check_scope_count(scopes.len())?;
        self.audited(
            "wake",
            &scopes.join(","),
            |r| r.wake_scopes(scopes, opts),
            |(views, _)| {
                views
                    .iter()
                    .flat_map(|v| v.items.iter().map(item_name))
                    .collect()
            },
        )
    }

    /// Wake over every scope the principal may read, in one snapshot (`wake --all`); see
    /// [`ReadTxn::wake_scopes`].
    pub fn wake_all(&self, opts: &WakeOptions) -> Result<(Vec<WakeView>, String)> {
        self.audited_as(
            "wake",
            |r| r.wake_scopes(&r.scopes()?, opts),
            |(views, _)| {
                let scopes: Vec<&str> = views.iter().map(|v| v.scope.as_str()).collect();
                let items = views
                    .iter()
                    .flat_map(|v| v.items.iter().map(item_name))
                    .collect();
                (scopes.join(","), items)
            },
        )
    }

    /// The wake view; see [`ReadTxn::wake`].
    pub fn wake(&self, scope: &str, opts: &WakeOptions) -> Result<WakeView> {
        self.audited(
            "wake",
            scope,
            |r| r.wake(scope, opts),
            |v| v.items.iter().map(item_name).collect(),
        )
    }

    /// Wake's text for one part; see [`ReadTxn::wake_text`].
    pub fn wake_text(&self, scope: &str, opts: &WakeOptions) -> Result<String> {
        self.wake(scope, opts)?.part(opts)
    }
}
