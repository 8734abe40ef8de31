//! Wake: a bounded cover of the whole history, recent memories raw and old ones as coarse
//! summaries, chosen by point reads of the tree, rendered in pages.
//!
//! The cover is the reference algorithm (see docs/design.md) with two fixes: a block whose
//! summary is missing is split (down to raw memories) instead of refusing to wake, and when even
//! the coarsest cover is larger than the budget the oldest blocks are left out and named in one
//! line. The walk visits O(B + log T) blocks per bisection step and reads each candidate summary
//! once, so wake costs O(B log T) reads whatever the length of the history.

use std::collections::HashMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::domain::block::Block;
use crate::domain::record::{Memory, Summary};
use crate::error::{Error, Result};
use crate::memory::hints::Hints;
use crate::memory::log::{each_memory, get_memory, memory_line};
use crate::memory::tree::{each_summary, get_summary, summary_line};
use crate::storage::kv::{Dir, KvRead};
use crate::storage::store::Store;
use crate::storage::tables::{EVENTS, LOG, STALE, TREE};
use crate::storage::txn::ReadTxn;

/// A part of wake output holds at most this many lines...
pub const PART_LINES: usize = 500;
/// ...and at most this many bytes.
pub const PART_BYTES: usize = 20_000;
/// A byte budget is met by trying at most this many distinct covers below the line budget,
/// largest first (then bisection below them).
pub const WAKE_SCAN: usize = 64;

/// A cover of `[0, T)`: aligned blocks, oldest first, with `[0, omitted)` left out when the
/// budget could not hold even the coarsest cover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cover {
    /// The blocks, oldest first; they tile `[omitted, T)`.
    pub blocks: Vec<Block>,
    /// Memories `[0, omitted)` are left out (0 when nothing is).
    pub omitted: u64,
}

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

/// The alphas around a walk's own for which the walk makes the same choices, so takes the same
/// path and finds the same count: the open interval (`above`, `below`). Each choice that
/// depends on alpha (`size > alpha * (t - lo)`) narrows it to the side of that block's threshold
/// `size / (t - lo)` the walk's alpha was on, with a relative margin far wider than the
/// rounding of either side of the comparison (2^-53 each), so an alpha inside is on the same
/// side of every comparison the walk made, exactly.
#[derive(Debug, Clone, Copy)]
struct Span {
    above: f64,
    below: f64,
}

impl Span {
    /// The margin: 1e-14 relative, against a rounding error of about 2.2e-16.
    const MARGIN: f64 = 1e-14;

    fn any() -> Self {
        Span {
            above: f64::NEG_INFINITY,
            below: f64::INFINITY,
        }
    }

    /// Narrows to the alphas that split (`split`) or keep, as this walk's did, a block whose
    /// threshold is `c`.
    fn note(&mut self, split: bool, c: f64) {
        if split {
            self.below = self.below.min(c * (1.0 - Self::MARGIN));
        } else {
            self.above = self.above.max(c * (1.0 + Self::MARGIN));
        }
    }

    fn holds(&self, alpha: f64) -> bool {
        self.above < alpha && alpha < self.below
    }
}

/// Walks the cover for `alpha` newest first, counting blocks (and collecting them into `out`),
/// and stops as soon as more than `limit` are found; narrows `span` to the alphas that would
/// walk the same way.
/// `stack` is scratch space, reused across the walks of one cover (a walk allocates nothing).
fn walk(
    t: u64,
    alpha: f64,
    has: &mut dyn FnMut(Block) -> Result<bool>,
    limit: usize,
    mut out: Option<&mut Vec<Block>>,
    stack: &mut Vec<Block>,
    span: &mut Span,
) -> Result<usize> {
    let r = t.checked_next_power_of_two().unwrap_or(1 << 63);
    stack.clear();
    stack.push(Block::raw(r.trailing_zeros() as u8, 0));
    let mut count = 0usize;
    while let Some(b) = stack.pop() {
        if b.lo() >= t {
            continue;
        }
        let size = b.size();
        let split = size > 1
            && (b.hi() > t
                || {
                    let (size, left) = (size as f64, (t - b.lo()) as f64);
                    let by_alpha = size > alpha * left;
                    span.note(by_alpha, size / left);
                    by_alpha
                }
                || !has(b)?);
        if split {
            if let Some((l, r)) = b.halves() {
                stack.push(l);
                stack.push(r);
            }
        } else {
            count += 1;
            if let Some(o) = out.as_deref_mut() {
                o.push(b);
            }
            if count > limit {
                return Ok(count);
            }
        }
    }
    Ok(count)
}

/// The count of [`walk`] at `alpha` (with no output), from `known` when a walk already made
/// there has a [`Span`] holding `alpha` (the bisection's later steps mostly fall between the
/// same two thresholds: a third to a half of its 60 walks are not walked again).
fn count_at(
    t: u64,
    alpha: f64,
    has: &mut dyn FnMut(Block) -> Result<bool>,
    limit: usize,
    stack: &mut Vec<Block>,
    known: Option<&mut Vec<(Span, usize)>>,
) -> Result<usize> {
    let mut span = Span::any();
    match known {
        Some(known) => {
            if let Some((_, n)) = known.iter().find(|(s, _)| s.holds(alpha)) {
                return Ok(*n);
            }
            let n = walk(t, alpha, has, limit, None, stack, &mut span)?;
            known.push((span, n));
            Ok(n)
        }
        None => walk(t, alpha, has, limit, None, stack, &mut span),
    }
}

fn expand(
    b: Block,
    has: &mut dyn FnMut(Block) -> Result<bool>,
    out: &mut Vec<Block>,
) -> Result<()> {
    if b.size() == 1 || has(b)? {
        out.push(b);
        return Ok(());
    }
    if let Some((l, r)) = b.halves() {
        expand(l, has, out)?;
        expand(r, has, out)?;
    }
    Ok(())
}

/// The cover (see [`cover`]); `reference` as [`reference_cover`]; `reuse` takes a bisection
/// step's count from an earlier walk whose [`Span`] holds it (always, but in the test that
/// checks it changes nothing); `all` says every summary is present (`has` always true), so
/// [`plateau`] may replace the bisection.
fn cover_impl(
    t: u64,
    budget: usize,
    has: &mut dyn FnMut(Block) -> Result<bool>,
    reference: bool,
    reuse: bool,
    all: bool,
) -> Result<Cover> {
    if t == 0 {
        return Ok(Cover {
            blocks: Vec::new(),
            omitted: 0,
        });
    }
    if t <= budget as u64 {
        return Ok(Cover {
            blocks: (0..t).map(Block::single).collect(),
            omitted: 0,
        });
    }
    // The stack holds at most one pending half per level, plus the block being split.
    let mut stack = Vec::with_capacity(2 * 65);
    let mut span = Span::any();
    let coarsest = walk(t, 1.0, has, budget, None, &mut stack, &mut span)?;
    if coarsest > budget && !reference {
        let keep = budget.saturating_sub(1);
        let mut blocks = Vec::new();
        if keep > 0 {
            walk(t, 1.0, has, keep, Some(&mut blocks), &mut stack, &mut span)?;
            blocks.truncate(keep);
        }
        blocks.reverse();
        let omitted = blocks.first().map(|b| b.lo()).unwrap_or(t);
        return Ok(Cover { blocks, omitted });
    }
    let mut blocks = match all.then(|| plateau(t, budget)).flatten() {
        Some(blocks) => blocks,
        None => {
            let (mut lo, mut hi) = (0.0f64, 1.0f64);
            let mut known = Vec::new();
            for _ in 0..60 {
                let mid = (lo + hi) / 2.0;
                let known = reuse.then_some(&mut known);
                if count_at(t, mid, has, budget, &mut stack, known)? <= budget {
                    hi = mid;
                } else {
                    lo = mid;
                }
            }
            let mut blocks = Vec::with_capacity(budget.min(1024));
            walk(
                t,
                hi,
                has,
                usize::MAX,
                Some(&mut blocks),
                &mut stack,
                &mut span,
            )?;
            blocks.reverse();
            blocks
        }
    };
    while blocks.len() < budget {
        let Some(idx) = blocks.iter().rposition(|b| b.size() > 1) else {
            break;
        };
        let Some((l, r)) = blocks.get(idx).and_then(|b| b.halves()) else {
            break;
        };
        let mut parts = Vec::new();
        expand(l, has, &mut parts)?;
        expand(r, has, &mut parts)?;
        if blocks.len() - 1 + parts.len() > budget {
            break;
        }
        blocks.splice(idx..=idx, parts);
    }
    Ok(Cover { blocks, omitted: 0 })
}

/// A block's split threshold `size / (t - lo)` as an exact fraction (numerator, denominator),
/// ordered by cross-multiplication: the walk splits a whole block when alpha is below it.
#[derive(Debug, Clone, Copy)]
struct Threshold(u64, u64);

impl PartialEq for Threshold {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o).is_eq()
    }
}

impl Eq for Threshold {}

impl PartialOrd for Threshold {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl Ord for Threshold {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (u128::from(self.0) * u128::from(o.1)).cmp(&(u128::from(o.0) * u128::from(self.1)))
    }
}

/// The histories [`plateau`] answers: below 2^28 memories two distinct thresholds differ by more
/// than 2^-56, far more than the bisection's final step (2^-60), so the bisection lands between
/// the same two thresholds as the exact order does.
const PLATEAU_MAX_T: u64 = 1 << 28;

/// The bisection's pre-fill cover when every summary is present, without bisecting: whole blocks
/// split in decreasing order of their thresholds (ties together), as alpha falls from 1, until
/// the next group of splits would take more than `budget` blocks. The bisection's alpha ends
/// just above that group's threshold, where exactly the splits before it are made, so the
/// blocks are the same (`tests/api/store/cover_props.rs` checks it against the bisection).
/// O(budget log budget) instead of 60 walks. `None` past [`PLATEAU_MAX_T`].
fn plateau(t: u64, budget: usize) -> Option<Vec<Block>> {
    if t > PLATEAU_MAX_T || t == 0 {
        return None;
    }
    let r = t.checked_next_power_of_two()?;
    let mut done: Vec<Block> = Vec::with_capacity(budget.min(1024) + 2);
    let mut heap: std::collections::BinaryHeap<(Threshold, std::cmp::Reverse<u64>, Block)> =
        std::collections::BinaryHeap::with_capacity(budget.min(1024) + 64);
    let mut count = 0usize;
    let place = |b: Block, done: &mut Vec<Block>, heap: &mut std::collections::BinaryHeap<_>| {
        if b.size() == 1 {
            done.push(b);
        } else {
            heap.push((
                Threshold(b.size(), t - b.lo()),
                std::cmp::Reverse(b.lo()),
                b,
            ));
        }
    };
    // The splits every alpha makes: blocks that reach past t.
    let mut stack = vec![Block::raw(r.trailing_zeros() as u8, 0)];
    while let Some(b) = stack.pop() {
        if b.lo() >= t {
            continue;
        }
        if b.hi() > t && b.size() > 1 {
            let (l, h) = b.halves()?;
            stack.push(l);
            stack.push(h);
        } else {
            count += 1;
            place(b, &mut done, &mut heap);
        }
    }
    // Then group by group, highest threshold first; a child may share its parent's threshold
    // (a block ending at t and its newer half), and then splits with it.
    let (mut roots, mut frontier, mut kids) = (Vec::new(), Vec::new(), Vec::new());
    while let Some(&(top, _, _)) = heap.peek() {
        roots.clear();
        while heap.peek().is_some_and(|e| e.0 == top) {
            roots.push(heap.pop()?.2);
        }
        let mut splits = 0usize;
        frontier.clear();
        frontier.extend_from_slice(&roots);
        kids.clear();
        while let Some(b) = frontier.pop() {
            splits += 1;
            let (l, h) = b.halves()?;
            for c in [l, h] {
                if c.size() > 1 && Threshold(c.size(), t - c.lo()) == top {
                    frontier.push(c);
                } else {
                    kids.push(c);
                }
            }
        }
        if count + splits > budget {
            // Not made: the blocks as they are now.
            done.extend(roots);
            done.extend(heap.into_iter().map(|e| e.2));
            done.sort_unstable_by_key(|b| b.lo());
            return Some(done);
        }
        count += splits;
        for c in kids.drain(..) {
            place(c, &mut done, &mut heap);
        }
    }
    done.sort_unstable_by_key(|b| b.lo());
    Some(done)
}

/// [`cover`] when every summary is present: [`plateau`] instead of the bisection where it
/// applies, the same blocks.
pub fn cover_all(t: u64, budget: usize) -> Result<Cover> {
    if budget == 0 {
        return Err(Error::invalid("budget", "wake needs at least one line"));
    }
    cover_impl(t, budget, &mut |_| Ok(true), false, true, true)
}

/// The cover of `[0, t)` within `budget` lines, where `has(b)` says whether block `b` (size at
/// least 2) has a summary. Never more than `budget` blocks (counting the line that names left-out
/// memories), never refuses; with every summary present it equals [`reference_cover`].
///
/// ```
/// use somna::cover;
/// let c = cover(10, 4, &mut |_| Ok(true)).unwrap();
/// let s: Vec<String> = c.blocks.iter().map(|b| b.to_string()).collect();
/// assert_eq!(s, ["0-3", "4-7", "#8", "#9"]);
/// // With no summaries at all, the newest memories are shown raw and the rest left out:
/// let c = cover(1000, 4, &mut |_| Ok(false)).unwrap();
/// assert_eq!((c.blocks.len(), c.omitted), (3, 997));
/// ```
pub fn cover(t: u64, budget: usize, has: &mut dyn FnMut(Block) -> Result<bool>) -> Result<Cover> {
    if budget == 0 {
        return Err(Error::invalid("budget", "wake needs at least one line"));
    }
    cover_impl(t, budget, has, false, true, false)
}

/// OptMem's cover, exactly as specified in the reference (every summary assumed present; it may
/// exceed the budget when `budget < popcount(t)`). Used by tests to check [`cover`].
pub fn reference_cover(t: u64, budget: usize) -> Vec<Block> {
    cover_impl(t, budget, &mut |_| Ok(true), true, true, false)
        .map(|c| c.blocks)
        .unwrap_or_default()
}

/// One line of wake.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum WakeItem {
    /// A raw memory.
    Memory(Memory),
    /// A summarized block.
    Summary {
        /// The block.
        block: Block,
        /// Its summary.
        summary: Summary,
    },
}

impl WakeItem {
    /// The rendered line (`#id date text` or `#lo-hi summary`).
    pub fn line(&self) -> String {
        match self {
            WakeItem::Memory(m) => memory_line(m),
            WakeItem::Summary { block, summary } => summary_line(*block, summary),
        }
    }
}

/// What wake shows: the cover's lines and what surrounds them.
#[derive(Debug, Clone, Serialize)]
pub struct WakeView {
    /// The scope.
    pub scope: String,
    /// Memories in the snapshot (T).
    pub total: u64,
    /// Memories `[0, omitted)` left out to fit the budget (0: none).
    pub omitted: u64,
    /// The cover's lines, oldest first.
    pub items: Vec<WakeItem>,
    /// Merges pending.
    pub pending: u64,
    /// The lines of `items` as shown, with markers (proposed, superseded, stale, untrusted...).
    pub item_lines: Vec<String>,
}

/// How to wake.
#[derive(Debug, Clone)]
pub struct WakeOptions {
    /// Budget in lines of memory (blocks plus the left-out line). Default: `WAKE_LINES`.
    pub lines: Option<usize>,
    /// Budget in bytes of the whole output, all parts. Default: `WAKE_BYTES` (0: none).
    pub bytes: Option<usize>,
    /// Which part to print, from 1.
    pub part: usize,
    /// Pin the snapshot to the first T memories (as printed by an earlier part).
    pub snapshot: Option<u64>,
    /// How the next-step hints name the action: shell lines (`Run: somna nap`, the default),
    /// MCP tool calls, or none ([`Hints`]).
    pub hints: Hints,
}

impl Default for WakeOptions {
    fn default() -> Self {
        WakeOptions {
            lines: None,
            bytes: None,
            part: 1,
            snapshot: None,
            hints: Hints::default(),
        }
    }
}

fn left_out_line(view: &WakeView, hints: &Hints) -> String {
    let mut blocks = Vec::new();
    let mut lo = 0u64;
    while lo < view.omitted && blocks.len() < 3 {
        // The largest aligned block starting at lo that fits in [lo, omitted).
        let mut size = if lo == 0 {
            1u64 << 62
        } else {
            1u64 << lo.trailing_zeros().min(62)
        };
        while size > view.omitted - lo {
            size /= 2;
        }
        blocks.push(Block::raw(size.trailing_zeros() as u8, lo));
        lo += size;
    }
    let opens: Vec<String> = blocks.iter().map(|b| hints.open(*b)).collect();
    format!(
        "({} older memories, #0 to #{}, are left out to fit the budget. Open them with: {}{})",
        view.omitted,
        view.omitted - 1,
        opens.join("; "),
        if lo < view.omitted { "; ..." } else { "" }
    )
}

impl WakeView {
    /// Every body line: the left-out line (if any, naming `cmd` to open the left-out blocks),
    /// then the cover.
    pub fn lines(&self, cmd: &str) -> Vec<String> {
        self.lines_with(&Hints::Cli(cmd.to_string()))
    }

    /// Every body line, the left-out line's hints in the form `hints` says.
    pub fn lines_with(&self, hints: &Hints) -> Vec<String> {
        let mut out = Vec::with_capacity(self.items.len() + 1);
        if self.omitted > 0 {
            out.push(left_out_line(self, hints));
        }
        if self.item_lines.len() == self.items.len() {
            out.extend(self.item_lines.iter().cloned());
        } else {
            out.extend(self.items.iter().map(|i| i.line()));
        }
        out
    }

    /// Part `opts.part` (from 1) of [`WakeView::parts`]; an error names how many there are.
    pub fn part(&self, opts: &WakeOptions) -> Result<String> {
        let parts = self.parts(opts);
        let n = parts.len();
        parts
            .into_iter()
            .nth(opts.part.saturating_sub(1))
            .ok_or_else(|| {
                Error::invalid(
                    "part",
                    format!("part {} does not exist; there are {n}", opts.part),
                )
            })
    }

    /// The lines of the budget this view takes: its items plus the line naming left-out
    /// memories, if any.
    pub fn used(&self) -> usize {
        self.items.len() + usize::from(self.omitted > 0)
    }

    /// The bytes of the whole rendered output, all parts together.
    pub fn size(&self, opts: &WakeOptions) -> usize {
        self.parts(opts).iter().map(|p| p.len()).sum()
    }

    /// Renders every part (each a complete text ending in a newline).
    pub fn parts(&self, opts: &WakeOptions) -> Vec<String> {
        let hints = &opts.hints;
        let t = self.total;
        if t == 0 {
            return vec![format!(
                "No memories yet.{}\nYou are awake.\n",
                hints.first_note()
            )];
        }
        // The body lines, borrowed where they are already rendered (no copy per line).
        let mut lines: Vec<std::borrow::Cow<'_, str>> = Vec::with_capacity(self.items.len() + 1);
        if self.omitted > 0 {
            lines.push(left_out_line(self, hints).into());
        }
        if self.item_lines.len() == self.items.len() {
            lines.extend(self.item_lines.iter().map(|l| l.as_str().into()));
        } else {
            lines.extend(self.items.iter().map(|i| i.line().into()));
        }
        let mut extra = String::new();
        if let Some(l) = opts.lines {
            extra.push_str(&format!(" --lines {l}"));
        }
        if let Some(b) = opts.bytes {
            extra.push_str(&format!(" --bytes {b}"));
        }
        // Split into parts: each at most PART_LINES lines and PART_BYTES bytes with its frame.
        let frame = hints.frame_bytes(extra.len());
        let mut groups: Vec<Vec<&str>> = vec![Vec::new()];
        let mut bytes = frame;
        for l in &lines {
            let n = groups.len();
            let Some(g) = groups.last_mut() else { break };
            if !g.is_empty() && (g.len() + 3 > PART_LINES || bytes + l.len() + 1 > PART_BYTES) {
                groups.push(vec![l.as_ref()]);
                bytes = frame + l.len() + 1;
                let _ = n;
            } else {
                g.push(l.as_ref());
                bytes += l.len() + 1;
            }
        }
        let n = groups.len();
        groups
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let k = i + 1;
                let body: usize = g.iter().map(|l| l.len() + 1).sum();
                let mut s = String::with_capacity(frame + body);
                let _ = writeln!(
                    s,
                    "Your memory, part {k} of {n}, oldest first ({t} {}).",
                    if t == 1 { "memory" } else { "memories" }
                );
                for l in g {
                    s.push_str(l);
                    s.push('\n');
                }
                if k < n {
                    s.push_str(&hints.next_part((k + 1, n, t), opts.lines, opts.bytes));
                } else {
                    s.push_str("You are awake.\n");
                    let nap = hints.nap_pending();
                    match self.pending {
                        0 => {}
                        1 => s.push_str(&format!("1 merge is pending.{nap}\n")),
                        p => s.push_str(&format!("{p} merges are pending.{nap}\n")),
                    }
                }
                s
            })
            .collect()
    }
}

impl ReadTxn {
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
        let tree = &self.tx;
        let log = &self.tx;
        let events = &self.tx;
        let mut cache: BlockMap<Option<Summary>> = HashMap::default();
        let fetch = |b: Block, cache: &mut BlockMap<Option<Summary>>| -> Result<bool> {
            if let Some(s) = cache.get(&b) {
                return Ok(s.is_some());
            }
            let s = get_summary(&tree, sid, b)?;
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
        let any_events = crate::memory::lifecycle::scope_has_events(&events, sid)?;
        let any_stale = STALE
            .edge(
                &self.tx,
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
                    _ => get_memory(&log, sid, b.lo())?,
                };
                let evs = if any_events {
                    crate::memory::lifecycle::events_of(&events, sid, m.id)?
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
                    _ => get_summary(&tree, sid, b)?
                        .ok_or_else(|| Error::corrupt("tree", b, "summary vanished during wake"))?,
                };
                let is_stale = any_stale && STALE.contains(&self.tx, (sid, b.level(), b.lo()))?;
                view.item_lines
                    .push(crate::memory::tree::marked_summary_line(b, &s, is_stale));
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
                    each_memory(&self.tx, sid, first.lo(), last.hi(), |m| {
                        if let Some(slot) = place(m.id).and_then(|i| run.get_mut(i)) {
                            *slot = Some(Value::Memory(m));
                        }
                        Ok(())
                    })?;
                } else {
                    each_summary(
                        &self.tx,
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
        LOG.prefetch(&self.tx, raw.iter().map(|&id| (sid, id)))?;
        TREE.prefetch(
            &self.tx,
            sums()
                .filter(|b| !cache.contains_key(b))
                .map(|b| (sid, b.level(), b.lo())),
        )?;
        if any_stale {
            STALE.prefetch(&self.tx, sums().map(|b| (sid, b.level(), b.lo())))?;
        }
        if let (true, Some(&lo), Some(&hi)) = (any_events, raw.iter().min(), raw.iter().max()) {
            EVENTS.prefetch_range(&self.tx, (sid, lo, 0)..=(sid, hi, u32::MAX))?;
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

impl ReadTxn {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[Block]) -> Vec<String> {
        v.iter().map(|b| b.to_string()).collect()
    }

    /// Reusing a bisection step's count from an earlier walk's span never changes a cover:
    /// against the plain bisection (every step walked), over histories of every size class, every
    /// budget class and summaries missing in patterns of several densities.
    #[test]
    fn reusing_counts_between_thresholds_changes_no_cover() {
        let mut next = crate::domain::test_rng::xorshift(0x9e37_79b9_7f4a_7c15u64);
        for round in 0..3000u64 {
            let t = match round % 4 {
                0 => next() % 300 + 1,
                1 => next() % 100_000 + 1,
                2 => next() % (1 << 40) + 1,
                _ => next() >> (next() % 64),
            }
            .max(1);
            let budget = [1, 2, 3, 5, 8, 16, 40, 96, 200][(next() % 9) as usize];
            // A block lacks its summary when a hash of it falls under the density.
            let (density, salt) = (next() % 4, next());
            let mut has = |b: Block| {
                let h =
                    (b.lo() ^ salt).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95) ^ u64::from(b.level());
                Ok(h % 4 >= density)
            };
            let fast = cover_impl(t, budget, &mut has, false, true, false).unwrap();
            let plain = cover_impl(t, budget, &mut has, false, false, false).unwrap();
            assert_eq!(
                (names(&fast.blocks), fast.omitted),
                (names(&plain.blocks), plain.omitted),
                "t {t} budget {budget} density {density}"
            );
            let all = &mut |_| Ok(true);
            assert_eq!(
                names(
                    &cover_impl(t, budget, all, true, true, false)
                        .unwrap()
                        .blocks
                ),
                names(
                    &cover_impl(t, budget, all, true, false, false)
                        .unwrap()
                        .blocks
                )
            );
        }
    }

    #[test]
    fn reference_examples() {
        assert_eq!(names(&reference_cover(10, 4)), ["0-3", "4-7", "#8", "#9"]);
        assert_eq!(
            names(&reference_cover(100, 10)),
            ["0-31", "32-63", "64-79", "80-87", "88-91", "92-95", "#96", "#97", "#98", "#99"]
        );
        assert_eq!(names(&reference_cover(7, 2)), ["0-3", "4-5", "#6"]);
        let c = reference_cover(1000, 96);
        let mut hist = std::collections::BTreeMap::new();
        for b in &c {
            *hist.entry(b.size()).or_insert(0) += 1;
        }
        let want: std::collections::BTreeMap<u64, i32> = [
            (64, 2),
            (32, 14),
            (16, 13),
            (8, 14),
            (4, 13),
            (2, 12),
            (1, 28),
        ]
        .into_iter()
        .collect();
        assert_eq!(hist, want);
    }

    #[test]
    fn overflow_is_cut_not_exceeded() {
        let c = cover(7, 2, &mut |_| Ok(true)).unwrap();
        assert_eq!(names(&c.blocks), ["#6"]);
        assert_eq!(c.omitted, 6);
    }
}
