//! Property tests of the wake cover, `somna::cover` and `somna::cover::reference_cover`.
//! They guard the invariants wake is built on: the cover tiles `[omitted, T)` exactly with
//! aligned power-of-two blocks, oldest first; it never takes more than `budget` lines (counting
//! the line that names left-out memories) whatever subset of summaries is missing; every block of
//! two or more memories it shows has a summary; it leaves memories out only when even the
//! coarsest cover the existing summaries allow is too large, and then it leaves out as few as
//! possible; and when every summary exists it is OptMem's cover (sizes never increasing from old
//! to new), checked against an independent implementation of the reference text in
//! /work/shared/brief/optmem-reference.md and against its worked examples.
//!
//! Case count: `SOMNA_PROPTEST_CASES` (default 64).

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use somna::cover::{cover, cover_all, reference_cover, Cover};
use somna::Block;

fn cases() -> u32 {
    std::env::var("SOMNA_PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(64)
}

// ---------------------------------------------------------------------------------------------
// An independent implementation of the reference algorithm, straight from the brief. Blocks are
// (lo, size) pairs so that nothing here depends on somna's own Block arithmetic.

/// Counts the blocks of `cover_alpha(t, alpha)`, stopping once there are more than `limit`.
fn spec_count_alpha(t: u64, alpha: f64, limit: usize) -> usize {
    let r = t.next_power_of_two();
    let mut stack = vec![(0u64, r)];
    let mut n = 0usize;
    while let Some((lo, size)) = stack.pop() {
        if lo >= t {
            continue;
        }
        let hi = lo + size;
        if size > 1 && (hi > t || size as f64 > alpha * (t - lo) as f64) {
            stack.push((lo, size / 2));
            stack.push((lo + size / 2, size / 2));
        } else {
            n += 1;
            if n > limit {
                return n;
            }
        }
    }
    n
}

/// `cover_alpha(t, alpha)`, sorted by lo.
fn spec_cover_alpha(t: u64, alpha: f64) -> Vec<(u64, u64)> {
    fn go(t: u64, alpha: f64, lo: u64, size: u64, out: &mut Vec<(u64, u64)>) {
        if lo >= t {
            return;
        }
        let hi = lo + size;
        if size > 1 && (hi > t || size as f64 > alpha * (t - lo) as f64) {
            go(t, alpha, lo, size / 2, out);
            go(t, alpha, lo + size / 2, size / 2, out);
        } else {
            out.push((lo, size));
        }
    }
    let mut out = Vec::new();
    go(t, alpha, 0, t.next_power_of_two(), &mut out);
    out.sort();
    out
}

/// `cover(T, B)` of the reference.
fn spec_cover(t: u64, b: usize) -> Vec<(u64, u64)> {
    if t == 0 {
        return Vec::new();
    }
    if t <= b as u64 {
        return (0..t).map(|i| (i, 1)).collect();
    }
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    for _ in 0..60 {
        let mid = (lo + hi) / 2.0;
        if spec_count_alpha(t, mid, b) <= b {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    let mut c = spec_cover_alpha(t, hi);
    while c.len() < b {
        let Some(i) = c.iter().rposition(|&(_, s)| s > 1) else {
            break;
        };
        let (l, s) = c[i];
        c.splice(i..=i, [(l, s / 2), (l + s / 2, s / 2)]);
    }
    c
}

fn pairs(blocks: &[Block]) -> Vec<(u64, u64)> {
    blocks.iter().map(|b| (b.lo(), b.size())).collect()
}

fn names(blocks: &[Block]) -> Vec<String> {
    blocks.iter().map(|b| b.to_string()).collect()
}

// ---------------------------------------------------------------------------------------------
// Which summaries exist.

fn mix(mut x: u64) -> u64 {
    // splitmix64
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A rule saying which complete blocks have no summary.
#[derive(Debug, Clone)]
enum Missing {
    /// Every summary exists.
    None,
    /// No summary exists.
    All,
    /// Each block is missing with probability `permille`/1000, decided by a hash of `seed`.
    Random { seed: u64, permille: u64 },
    /// Every block whose level is in the mask is missing.
    Levels(u32),
    /// Every block reaching past `from` is missing (a backlog of unanswered merges).
    Recent { from: u64 },
    /// Every block starting before `to` is missing (old summaries forgotten).
    Old { to: u64 },
    /// An explicit set of (level, index) pairs (small histories).
    Set(BTreeSet<(u8, u64)>),
    /// Missing when either rule says so.
    Either(Box<Missing>, Box<Missing>),
}

impl Missing {
    fn missing(&self, b: Block) -> bool {
        match self {
            Missing::None => false,
            Missing::All => true,
            Missing::Random { seed, permille } => {
                mix(seed ^ mix(b.lo() ^ (u64::from(b.level()) << 56))) % 1000 < *permille
            }
            Missing::Levels(mask) => mask & (1 << b.level().min(31)) != 0,
            Missing::Recent { from } => b.hi() > *from,
            Missing::Old { to } => b.lo() < *to,
            Missing::Set(s) => s.contains(&(b.level(), b.lo() / b.size())),
            Missing::Either(a, c) => a.missing(b) || c.missing(b),
        }
    }
}

fn t_strategy() -> impl Strategy<Value = u64> {
    prop_oneof![
        3 => 0u64..=300,
        3 => 300u64..=1_000_000,
        1 => (1u32..=20).prop_map(|k| 1u64 << k),
        1 => (1u32..=20).prop_map(|k| (1u64 << k) - 1),
        1 => (2u32..=20).prop_map(|k| (1u64 << k) + 1),
    ]
}

fn budget_strategy() -> impl Strategy<Value = usize> {
    prop_oneof![2 => 1usize..=8, 3 => 1usize..=200]
}

fn simple_missing(t: u64) -> BoxedStrategy<Missing> {
    let t1 = t + 1;
    prop_oneof![
        1 => Just(Missing::None),
        1 => Just(Missing::All),
        4 => (any::<u64>(), prop_oneof![0u64..=50, 0u64..=1000, 950u64..=1000])
            .prop_map(|(seed, permille)| Missing::Random { seed, permille }),
        2 => any::<u32>().prop_map(|m| Missing::Levels(m & 0x1f_fffe)),
        2 => (0..t1).prop_map(|from| Missing::Recent { from }),
        2 => (0..t1).prop_map(|to| Missing::Old { to }),
    ]
    .boxed()
}

fn missing_strategy(t: u64) -> BoxedStrategy<Missing> {
    let mut options = vec![
        (4, simple_missing(t)),
        (
            2,
            (simple_missing(t), simple_missing(t))
                .prop_map(|(a, b)| Missing::Either(Box::new(a), Box::new(b)))
                .boxed(),
        ),
    ];
    if t <= 600 {
        // Every complete block of a small history, by (level, index).
        let mut all = Vec::new();
        let mut level = 1u8;
        while (1u64 << level) <= t {
            for k in 0..t >> level {
                all.push((level, k));
            }
            level += 1;
        }
        if !all.is_empty() {
            let n = all.len();
            options.push((
                4,
                proptest::sample::subsequence(all, 0..=n)
                    .prop_map(|v| Missing::Set(v.into_iter().collect()))
                    .boxed(),
            ));
        }
    }
    proptest::strategy::Union::new_weighted(options).boxed()
}

/// The coarsest cover the existing summaries allow (each block of T's binary decomposition,
/// split while its summary is missing), newest first, cut after `cap` blocks. With a missing
/// summary the only way to show its memories is through smaller blocks, so this is the cover
/// with the fewest blocks, and its newest k blocks reach furthest back of any k blocks.
fn coarsest_newest(t: u64, m: &Missing, cap: usize) -> Vec<Block> {
    let mut stack = Vec::new();
    let mut lo = 0u64;
    for level in (0..64u8).rev() {
        if t & (1u64 << level) != 0 {
            stack.push(Block::new(level, lo).expect("aligned"));
            lo += 1u64 << level;
        }
    }
    // stack holds the decomposition oldest first; popping gives newest first.
    let mut out = Vec::new();
    if cap == 0 {
        return out;
    }
    while let Some(b) = stack.pop() {
        if b.size() > 1 && m.missing(b) {
            let (l, r) = b.halves().expect("size > 1");
            stack.push(l);
            stack.push(r);
        } else {
            out.push(b);
            if out.len() >= cap {
                break;
            }
        }
    }
    out
}

/// Checks that `c.blocks` tiles `[c.omitted, t)` with aligned power-of-two blocks, oldest first.
fn check_tiling(t: u64, c: &Cover) -> Result<(), TestCaseError> {
    let mut at = c.omitted;
    for b in &c.blocks {
        let s = b.size();
        prop_assert!(
            s >= 1 && s.is_power_of_two(),
            "{b}: size {s} is not a power of two"
        );
        prop_assert_eq!(b.lo() % s, 0, "{} is not aligned", b);
        prop_assert_eq!(
            b.lo(),
            at,
            "{} does not start where the previous block ends",
            b
        );
        at = b.hi();
    }
    prop_assert_eq!(at, t, "the cover does not end at T");
    prop_assert!(c.omitted <= t);
    if t > 0 {
        prop_assert!(
            !c.blocks.is_empty() || c.omitted == t,
            "an empty cover must leave everything out"
        );
    }
    Ok(())
}

fn lines(c: &Cover) -> usize {
    c.blocks.len() + usize::from(c.omitted > 0)
}

/// Runs `cover` with `has` derived from `m`, recording every block it asks about.
fn run_cover(t: u64, budget: usize, m: &Missing) -> (Cover, Vec<Block>) {
    let asked = RefCell::new(Vec::new());
    let c = cover(t, budget, &mut |b| {
        asked.borrow_mut().push(b);
        Ok(!m.missing(b))
    })
    .expect("cover with a positive budget");
    (c, asked.into_inner())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// Every summary present: a tiling with non-increasing sizes within the budget; equal to
    /// the reference whenever the reference fits (budget >= popcount(T)), and otherwise the
    /// newest `budget - 1` blocks of T's binary decomposition plus the left-out line.
    #[test]
    fn full_tree_cover_is_the_reference(t in t_strategy(), budget in budget_strategy()) {
        let (c, asked) = run_cover(t, budget, &Missing::None);
        check_tiling(t, &c)?;
        prop_assert!(lines(&c) <= budget, "{} lines for a budget of {budget}", lines(&c));
        for w in c.blocks.windows(2) {
            prop_assert!(w[0].size() >= w[1].size(), "sizes increase: {} then {}", w[0], w[1]);
        }
        for b in &asked {
            prop_assert!(b.size() >= 2 && b.hi() <= t, "has() asked about {b} (T = {t})");
        }
        let reference = reference_cover(t, budget);
        let spec = spec_cover(t, budget);
        prop_assert_eq!(pairs(&reference), spec.clone(), "reference_cover differs from the brief");
        if u64::from(t.count_ones()) <= budget as u64 || t <= budget as u64 {
            prop_assert_eq!(c.omitted, 0);
            prop_assert_eq!(&c.blocks, &reference);
            prop_assert_eq!(c.blocks.len() as u64, t.min(budget as u64), "the budget is not used");
        } else {
            // The reference overflows; somna cuts the oldest blocks instead.
            prop_assert!(c.omitted > 0);
            prop_assert_eq!(c.blocks.len(), budget - 1);
            let newest = coarsest_newest(t, &Missing::None, budget - 1);
            let want: Vec<Block> = newest.into_iter().rev().collect();
            prop_assert_eq!(&c.blocks, &want);
        }
    }

    /// Any subset of summaries missing: a tiling of [omitted, T) within the budget, showing no
    /// block without a summary, leaving memories out only when it must and then as few as
    /// possible.
    #[test]
    fn cover_with_missing_summaries(
        (t, budget, m) in (t_strategy(), budget_strategy())
            .prop_flat_map(|(t, b)| (Just(t), Just(b), missing_strategy(t)))
    ) {
        let (c, asked) = run_cover(t, budget, &m);
        check_tiling(t, &c)?;
        prop_assert!(
            lines(&c) <= budget,
            "{} blocks + {} left-out line for a budget of {budget}",
            c.blocks.len(),
            usize::from(c.omitted > 0)
        );
        for b in &c.blocks {
            prop_assert!(b.size() == 1 || !m.missing(*b), "{b} is shown but has no summary");
        }
        for b in &asked {
            prop_assert!(b.size() >= 2 && b.hi() <= t, "has() asked about {b} (T = {t})");
        }
        let newest = coarsest_newest(t, &m, budget + 1);
        if newest.len() <= budget {
            prop_assert_eq!(
                c.omitted, 0,
                "memories left out although the coarsest cover ({} blocks) fits",
                newest.len()
            );
        } else {
            prop_assert!(c.omitted > 0, "more than {budget} blocks are needed but none left out");
            prop_assert_eq!(c.blocks.len(), budget - 1, "the budget is not used");
            let want: Vec<Block> = newest.into_iter().take(budget - 1).rev().collect();
            prop_assert_eq!(c.omitted, want.first().map(|b| b.lo()).unwrap_or(t));
            prop_assert_eq!(&c.blocks, &want);
        }
        if t <= budget as u64 {
            prop_assert_eq!(pairs(&c.blocks), (0..t).map(|i| (i, 1)).collect::<Vec<_>>());
        }
        // Deterministic: the same question gets the same answer.
        let (again, _) = run_cover(t, budget, &m);
        prop_assert_eq!(again, c);
    }

    /// Every budget from the lines a cover takes up to its own budget gives that same cover:
    /// wake's byte budget relies on it to step from one distinct cover to the next smaller one.
    #[test]
    fn budgets_between_the_lines_taken_and_the_budget_give_the_same_cover(
        (t, budget, m) in (t_strategy(), budget_strategy())
            .prop_flat_map(|(t, b)| (Just(t), Just(b), missing_strategy(t)))
    ) {
        let (c, _) = run_cover(t, budget, &m);
        for b in lines(&c).max(1)..budget {
            let (d, _) = run_cover(t, b, &m);
            prop_assert_eq!(&d, &c, "budget {} against {} ({} lines taken)", b, budget, lines(&c));
        }
        if lines(&c) > 1 && t > 0 {
            let (d, _) = run_cover(t, lines(&c) - 1, &m);
            prop_assert!(d != c, "a budget below the lines taken gives the same cover");
        }
    }

    /// Every summary present: `cover_all`, which finds the bisection's plateau by ordering the
    /// split thresholds exactly, gives the bisection's cover.
    #[test]
    fn cover_all_is_the_bisection(t in t_strategy(), budget in budget_strategy()) {
        let (c, _) = run_cover(t, budget, &Missing::None);
        prop_assert_eq!(cover_all(t, budget).expect("a positive budget"), c);
    }

    /// No summary at all: the newest memories raw, the rest named in one line.
    #[test]
    fn no_summaries_shows_the_newest_raw(t in t_strategy(), budget in budget_strategy()) {
        let (c, _) = run_cover(t, budget, &Missing::All);
        let shown = if t <= budget as u64 { t } else { budget as u64 - 1 };
        prop_assert_eq!(c.omitted, t - shown);
        let want: Vec<(u64, u64)> = (t - shown..t).map(|i| (i, 1)).collect();
        prop_assert_eq!(pairs(&c.blocks), want);
    }
}

#[test]
fn zero_budget_is_an_error() {
    assert!(cover(10, 0, &mut |_| Ok(true)).is_err());
    assert!(cover(0, 0, &mut |_| Ok(true)).is_err());
}

#[test]
fn empty_history_is_an_empty_cover() {
    for budget in [1, 2, 96] {
        let c = cover(0, budget, &mut |_| Ok(true)).unwrap();
        assert!(c.blocks.is_empty());
        assert_eq!(c.omitted, 0);
        assert!(reference_cover(0, budget).is_empty());
    }
}

/// The worked examples of the brief, against somna and against the spec implementation above.
#[test]
fn brief_examples() {
    let all = |t: u64, b: usize| cover(t, b, &mut |_| Ok(true)).unwrap();

    let c = all(10, 4);
    assert_eq!(names(&c.blocks), ["0-3", "4-7", "#8", "#9"]);
    assert_eq!(c.omitted, 0);
    assert_eq!(spec_cover(10, 4), [(0, 4), (4, 4), (8, 1), (9, 1)]);

    let want100 = [
        "0-31", "32-63", "64-79", "80-87", "88-91", "92-95", "#96", "#97", "#98", "#99",
    ];
    let c = all(100, 10);
    assert_eq!(names(&c.blocks), want100);
    assert_eq!(c.omitted, 0);
    assert_eq!(names(&reference_cover(100, 10)), want100);
    assert_eq!(pairs(&c.blocks), spec_cover(100, 10));

    // The reference overflows at B < popcount(T); somna names the left-out memories instead.
    assert_eq!(names(&reference_cover(7, 2)), ["0-3", "4-5", "#6"]);
    assert_eq!(spec_cover(7, 2), [(0, 4), (4, 2), (6, 1)]);
    let c = all(7, 2);
    assert_eq!(names(&c.blocks), ["#6"]);
    assert_eq!(c.omitted, 6);

    let want: BTreeMap<u64, usize> = [
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
    let hist = |v: &[(u64, u64)]| {
        let mut h = BTreeMap::new();
        for &(_, s) in v {
            *h.entry(s).or_insert(0usize) += 1;
        }
        h
    };
    let c = all(1000, 96);
    assert_eq!(hist(&pairs(&c.blocks)), want);
    assert_eq!(hist(&spec_cover(1000, 96)), want);
    assert_eq!(c.blocks.len(), 96);
}

/// The doc example: no summaries at all at T = 1000, B = 4.
#[test]
fn doc_example_without_summaries() {
    let c = cover(1000, 4, &mut |_| Ok(false)).unwrap();
    assert_eq!((c.blocks.len(), c.omitted), (3, 997));
    assert_eq!(names(&c.blocks), ["#997", "#998", "#999"]);
}

/// `cover_all` against the bisection for every history up to 1,100 memories and every budget up
/// to 40, and around every power of two up to 2^28 (the largest history it answers itself) for
/// budgets around OptMem's 96.
#[test]
fn cover_all_is_the_bisection_everywhere_small_and_at_powers_of_two() {
    let bisect = |t: u64, b: usize| cover(t, b, &mut |_| Ok(true)).unwrap();
    for t in 0..=1_100u64 {
        for b in 1..=40 {
            assert_eq!(
                cover_all(t, b).unwrap(),
                bisect(t, b),
                "t = {t}, budget {b}"
            );
        }
    }
    for k in 4..=29u32 {
        for t in [
            (1u64 << k) - 1,
            1 << k,
            (1 << k) + 1,
            (1 << k) + (1 << (k - 1)) + 7,
        ] {
            for b in [1, 2, 5, 17, 64, 95, 96, 97, 200] {
                assert_eq!(
                    cover_all(t, b).unwrap(),
                    bisect(t, b),
                    "t = {t}, budget {b}"
                );
            }
        }
    }
    assert!(cover_all(10, 0).is_err());
}
