//! The wake cover: which aligned blocks of `[0, T)` wake shows within a budget of lines, recent
//! memories raw and old ones as coarse summaries. Pure: it asks a closure whether a block has a
//! summary and reads nothing itself (`memory::wake` gives it the tree's answers).
//!
//! The algorithm is the reference one (docs/design.md, "Wake") with two fixes: a block whose
//! summary is missing is split (down to raw memories) instead of refusing to wake, and when even
//! the coarsest cover is larger than the budget the oldest blocks are left out (`Cover::omitted`).
//! The walk visits O(B + log T) blocks per bisection step and asks about each candidate block
//! once, so a cover costs O(B log T) questions whatever the length of the history.

use crate::domain::block::Block;
use crate::error::{Error, Result};

/// A cover of `[0, T)`: aligned blocks, oldest first, with `[0, omitted)` left out when the
/// budget could not hold even the coarsest cover.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cover {
    /// The blocks, oldest first; they tile `[omitted, T)`.
    pub blocks: Vec<Block>,
    /// Memories `[0, omitted)` are left out (0 when nothing is).
    pub omitted: u64,
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
/// use somna::cover::cover;
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
