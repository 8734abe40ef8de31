//! Model-based test of the store: random sequences of note / append / nap (answering the next
//! prompt, and sometimes a wrong, settled, incomplete or single block, or a malformed line) /
//! nap_many / forget / zoom / wake / recall / reopen over two scopes run against a real
//! `somna::Store` in a temp dir and against a plain in-memory model written here (the texts, a
//! map of summaries keyed by block, the set of pending blocks). It guards that every operation
//! does what the reference behaviour says (or fails with the right kind of error and changes
//! nothing), that scopes never leak into each other, and that after every step the memory count,
//! the pending list, the next prompt, the summaries and the statistics agree with the model; zoom,
//! recall and wake output (the cover computed with `somna::cover` over the model's
//! summaries, rendered line by line) are compared whenever they are asked for, and
//! `Store::verify` finds no problem at the end.
//!
//! Case count: `SOMNA_PROPTEST_CASES` (default 32).

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use proptest::prelude::*;
use somna::cover::cover;
use somna::{
    Block, BuiltFrom, Error, Kind, NapOutcome, NewMemory, PromptInput, RecallQuery, Store,
    WakeOptions, WakeView, ZoomEntry,
};

fn cases() -> u32 {
    std::env::var("SOMNA_PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(32)
}

const SCOPES: [&str; 2] = ["default", "project:x"];
const WORDS: [&str; 6] = ["Alpha", "beta", "GAMMA", "delta", "Epsilon", "zeta"];
const KINDS: [Kind; 3] = [Kind::Observation, Kind::Decision, Kind::Task];
/// Recall patterns: literal alternatives (the model matches them as case-insensitive
/// substrings), plus two that are not valid regexes.
const PATTERNS: [&str; 12] = [
    "alpha",
    "BETA",
    "Gamma",
    "delta|zeta",
    "s1",
    "#1",
    "2024-01-0",
    "2024-01-1",
    "zzz",
    "epsilon|GAMMA|s2",
    "(",
    "",
];
const DAY_US: i64 = 86_400_000_000;
/// 2024-01-01T00:00:00Z.
const JAN1_2024_US: i64 = 1_704_067_200_000_000;

// ---------------------------------------------------------------------------------------------
// The model.

#[derive(Debug, Clone)]
struct Mem {
    text: String,
    kind: Kind,
    observed_us: i64,
    day: u8,
}

#[derive(Debug, Clone, Default)]
struct ScopeModel {
    mems: Vec<Mem>,
    sums: BTreeMap<Block, String>,
    /// (level, lo): iterated in the order merges are offered.
    pending: BTreeSet<(u8, u64)>,
}

/// Errors the model predicts, by kind.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fail {
    Invalid,
    OutOfRange,
    WrongBlock { given: Block, next: Option<Block> },
}

fn fail_of(e: &Error) -> Result<Fail, String> {
    match e {
        Error::Invalid { .. } => Ok(Fail::Invalid),
        Error::OutOfRange { .. } => Ok(Fail::OutOfRange),
        Error::WrongBlock { given, next } => Ok(Fail::WrongBlock {
            given: *given,
            next: *next,
        }),
        other => Err(format!("unexpected error kind: {other:?} ({other})")),
    }
}

fn block(level: u8, lo: u64) -> Block {
    Block::new(level, lo).expect("aligned block")
}

fn text_ok(t: &str) -> bool {
    !t.trim().is_empty()
        && t.len() <= 280
        && !t
            .chars()
            .any(|c| c.is_control() || matches!(c, '\u{2028}' | '\u{2029}'))
}

fn date(day: u8) -> String {
    format!("2024-01-{:02}", day + 1)
}

impl ScopeModel {
    fn count(&self) -> u64 {
        self.mems.len() as u64
    }

    fn pending_list(&self) -> Vec<Block> {
        self.pending.iter().map(|&(l, lo)| block(l, lo)).collect()
    }

    fn first_pending(&self) -> Option<Block> {
        self.pending.iter().next().map(|&(l, lo)| block(l, lo))
    }

    fn add(&mut self, m: Mem) {
        self.mems.push(m);
        let t = self.count();
        let mut level = 1u8;
        while t.is_multiple_of(1u64 << level) {
            self.pending.insert((level, t - (1u64 << level)));
            level += 1;
        }
    }

    fn mem_line(&self, id: u64) -> String {
        let m = &self.mems[id as usize];
        format!("#{id} {} {}", date(m.day), m.text)
    }

    fn sum_line(&self, b: Block) -> String {
        format!("#{}-{} {}", b.lo(), b.hi() - 1, self.sums[&b])
    }

    /// The model's own invariant: pending = complete blocks without a summary, and a summary of
    /// a block above RAW_MAX only exists with both of its halves summarized.
    fn self_check(&self, raw_max: u64) {
        let t = self.count();
        let mut want = BTreeSet::new();
        let mut level = 1u8;
        while (1u64 << level) <= t {
            for k in 0..t >> level {
                let lo = k << level;
                if !self.sums.contains_key(&block(level, lo)) {
                    want.insert((level, lo));
                }
            }
            level += 1;
        }
        assert_eq!(self.pending, want, "model bug: pending set");
        for b in self.sums.keys() {
            assert!(b.hi() <= t, "model bug: {b} past the end");
            if b.size() > raw_max {
                let (l, r) = b.halves().expect("size >= 2");
                assert!(
                    self.sums.contains_key(&l) && self.sums.contains_key(&r),
                    "model bug: {b} without its halves"
                );
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Operations.

/// How an operation picks its block, resolved against the model's state when it runs.
#[derive(Debug, Clone)]
enum Pick {
    FirstPending,
    Pending(usize),
    Built(usize),
    /// Any aligned block of this level, possibly past the end.
    Any {
        level: u8,
        k: u64,
    },
    /// A single memory (not a block).
    Single(u64),
    /// The block of this level that holds the end of the log (incomplete, or past it).
    Tail {
        level: u8,
    },
}

#[derive(Debug, Clone, Copy)]
enum TextPick {
    Good,
    MaxLen,
    Empty,
    Blank,
    TwoLines,
    TooLong,
    Separator,
}

#[derive(Debug, Clone)]
enum Op {
    Note {
        scope: usize,
        words: (usize, usize),
        day: u8,
        kind: usize,
    },
    BadNote {
        scope: usize,
        text: TextPick,
    },
    Append {
        scope: usize,
        n: u8,
        day: u8,
    },
    Nap {
        scope: usize,
        pick: Pick,
        text: TextPick,
    },
    NapMany {
        scope: usize,
        entries: Vec<(Pick, TextPick)>,
    },
    Forget {
        scope: usize,
        pick: Pick,
    },
    Zoom {
        scope: usize,
        pick: Pick,
    },
    Wake {
        scope: usize,
        lines: Option<usize>,
        snapshot: Option<u64>,
        bytes: Option<usize>,
    },
    Recall {
        scope: usize,
        pattern: usize,
        limit: Option<usize>,
        max_bytes: Option<usize>,
        kind: Option<usize>,
        since: Option<u8>,
        until: Option<u8>,
    },
    Reopen,
}

/// Picks a block; the weights are (first pending, any pending, settled, any aligned).
fn pick(w: [u32; 4]) -> impl Strategy<Value = Pick> {
    prop_oneof![
        w[0] => Just(Pick::FirstPending),
        w[1] => any::<usize>().prop_map(Pick::Pending),
        w[2] => any::<usize>().prop_map(Pick::Built),
        w[3] => (1u8..=7, any::<u64>()).prop_map(|(level, k)| Pick::Any { level, k }),
        1 => any::<u64>().prop_map(Pick::Single),
        1 => (1u8..=7).prop_map(|level| Pick::Tail { level }),
    ]
}

/// Mostly good lines, sometimes a malformed one (`bad` in 40 + bad).
fn text_pick(bad: u32) -> impl Strategy<Value = TextPick> {
    prop_oneof![
        40 => Just(TextPick::Good),
        bad => prop_oneof![
            Just(TextPick::MaxLen),
            Just(TextPick::Empty),
            Just(TextPick::Blank),
            Just(TextPick::TwoLines),
            Just(TextPick::TooLong),
            Just(TextPick::Separator),
        ],
    ]
}

fn scope() -> impl Strategy<Value = usize> {
    prop_oneof![3 => Just(0usize), 1 => Just(1usize)]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        30 => (scope(), (0..6usize, 0..6usize), 0u8..20, 0..3usize)
            .prop_map(|(scope, words, day, kind)| Op::Note { scope, words, day, kind }),
        2 => (scope(), text_pick(40)).prop_map(|(scope, text)| Op::BadNote { scope, text }),
        4 => (scope(), 1u8..=20, 0u8..20).prop_map(|(scope, n, day)| Op::Append { scope, n, day }),
        22 => (scope(), pick([12, 3, 3, 2]), text_pick(5))
            .prop_map(|(scope, pick, text)| Op::Nap { scope, pick, text }),
        5 => (scope(), proptest::collection::vec((pick([2, 12, 3, 1]), text_pick(1)), 0..=5))
            .prop_map(|(scope, entries)| Op::NapMany { scope, entries }),
        6 => (scope(), pick([1, 2, 12, 2])).prop_map(|(scope, pick)| Op::Forget { scope, pick }),
        6 => (scope(), pick([3, 3, 3, 6])).prop_map(|(scope, pick)| Op::Zoom { scope, pick }),
        8 => (
            scope(),
            proptest::option::weighted(0.8, 1usize..=12),
            proptest::option::weighted(0.2, any::<u64>()),
            proptest::option::weighted(0.3, 100usize..=1500),
        )
            .prop_map(|(scope, lines, snapshot, bytes)| Op::Wake {
                scope,
                lines,
                snapshot,
                bytes: lines.and(bytes),
            }),
        5 => (
            scope(),
            0..PATTERNS.len(),
            proptest::option::weighted(0.3, 1usize..=5),
            proptest::option::weighted(0.3, 20usize..=300),
            proptest::option::weighted(0.2, 0..3usize),
            proptest::option::weighted(0.2, 0u8..20),
            proptest::option::weighted(0.2, 0u8..20),
        )
            .prop_map(|(scope, pattern, limit, max_bytes, kind, since, until)| Op::Recall {
                scope,
                pattern,
                limit,
                max_bytes,
                kind,
                since,
                until,
            }),
        1 => Just(Op::Reopen),
    ]
}

impl ScopeModel {
    fn resolve(&self, p: &Pick) -> Block {
        let t = self.count();
        let pending = self.pending_list();
        match p {
            Pick::FirstPending => self.first_pending().unwrap_or(block(1, 0)),
            Pick::Pending(i) if !pending.is_empty() => pending[i % pending.len()],
            Pick::Built(i) if !self.sums.is_empty() => *self
                .sums
                .keys()
                .nth(i % self.sums.len())
                .expect("non-empty"),
            Pick::Pending(i) | Pick::Built(i) => block(1, 2 * (*i as u64 % (t / 2 + 2))),
            Pick::Any { level, k } => {
                let size = 1u64 << level;
                block(*level, size * (k % (t / size + 2)))
            }
            Pick::Single(k) => Block::single(k % (t + 1)),
            Pick::Tail { level } => {
                let size = 1u64 << level;
                block(*level, t / size * size)
            }
        }
    }
}

fn text_of(p: TextPick, step: usize, b: Block) -> String {
    match p {
        TextPick::Good => format!("sum{step} of {b}: {}", WORDS[step % WORDS.len()]),
        TextPick::MaxLen => "\u{e9}".repeat(140),
        TextPick::Empty => String::new(),
        TextPick::Blank => "   ".into(),
        TextPick::TwoLines => format!("two\nlines {step}"),
        TextPick::TooLong => "x".repeat(281),
        TextPick::Separator => format!("line\u{2028}separator {step}"),
    }
}

// ---------------------------------------------------------------------------------------------
// The harness.

struct Harness {
    store: Option<Store>,
    models: [ScopeModel; 2],
    raw_max: u64,
}

fn same<T: PartialEq + std::fmt::Debug>(
    what: &str,
    got: somna::Result<T>,
    want: Result<T, Fail>,
) -> Result<(), TestCaseError> {
    match (got, want) {
        (Ok(g), Ok(w)) => prop_assert_eq!(g, w, "{}", what),
        (Err(e), Err(w)) => match fail_of(&e) {
            Ok(f) => prop_assert_eq!(f, w, "{}: error {}", what, e),
            Err(s) => return Err(TestCaseError::fail(format!("{what}: {s}"))),
        },
        (Ok(g), Err(w)) => {
            return Err(TestCaseError::fail(format!(
                "{what}: expected {w:?}, got Ok({g:?})"
            )))
        }
        (Err(e), Ok(w)) => {
            return Err(TestCaseError::fail(format!(
                "{what}: expected Ok({w:?}), got error {e:?} ({e})"
            )))
        }
    }
    Ok(())
}

fn new_memory(m: &Mem) -> NewMemory {
    NewMemory::new(m.text.clone())
        .kind(m.kind)
        .observed_us(m.observed_us)
}

fn mem(text: String, day: u8, kind: Kind) -> Mem {
    Mem {
        text,
        kind,
        // 01:00 UTC on the day, so the date is the same in every rendering.
        observed_us: JAN1_2024_US + i64::from(day) * DAY_US + 3_600_000_000,
        day,
    }
}

/// Renders a view's part 1 the way the brief describes it (one part: the budgets here are small).
fn expected_text(view: &WakeView, pending: u64) -> String {
    if view.total == 0 {
        return "No memories yet. Record the first with: somna note \"<something worth keeping>\"\nYou are awake.\n".into();
    }
    let mut s = format!(
        "Your memory, part 1 of 1, oldest first ({} {}).\n",
        view.total,
        if view.total == 1 {
            "memory"
        } else {
            "memories"
        }
    );
    for l in view.lines("somna") {
        s.push_str(&l);
        s.push('\n');
    }
    s.push_str("You are awake.\n");
    match pending {
        0 => {}
        1 => s.push_str("1 merge is pending. Run: somna nap\n"),
        p => s.push_str(&format!("{p} merges are pending. Run: somna nap\n")),
    }
    s
}

fn open(s: &Option<Store>) -> &Store {
    s.as_ref().expect("the store is open")
}

impl Harness {
    fn st(&self) -> &Store {
        open(&self.store)
    }

    fn step(&mut self, dir: &Path, step: usize, op: &Op) -> Result<(), TestCaseError> {
        match op {
            Op::Note {
                scope,
                words,
                day,
                kind,
            } => {
                let m = mem(
                    format!("{} {} s{step}", WORDS[words.0], WORDS[words.1]),
                    *day,
                    KINDS[*kind],
                );
                let want = self.models[*scope].count();
                let got = self.st().note(SCOPES[*scope], new_memory(&m));
                same("note", got, Ok(want))?;
                self.models[*scope].add(m);
            }
            Op::BadNote { scope, text } => {
                let t = text_of(*text, step, block(1, 0));
                let m = mem(t.clone(), 0, Kind::Observation);
                let want = if text_ok(&t) {
                    Ok(self.models[*scope].count())
                } else {
                    Err(Fail::Invalid)
                };
                let ok = want.is_ok();
                same(
                    "note (odd text)",
                    self.st().note(SCOPES[*scope], new_memory(&m)),
                    want,
                )?;
                if ok {
                    self.models[*scope].add(m);
                }
            }
            Op::Append { scope, n, day } => {
                let items: Vec<Mem> = (0..*n)
                    .map(|j| {
                        mem(
                            format!("{} batch s{step} i{j}", WORDS[j as usize % WORDS.len()]),
                            *day,
                            KINDS[j as usize % KINDS.len()],
                        )
                    })
                    .collect();
                let first = self.models[*scope].count();
                let got = self
                    .st()
                    .append(SCOPES[*scope], items.iter().map(new_memory).collect(), None)
                    .map(|a| (a.first, a.count, a.replayed));
                same("append", got, Ok((first, u64::from(*n), false)))?;
                for m in items {
                    self.models[*scope].add(m);
                }
            }
            Op::Nap { scope, pick, text } => {
                let model = &mut self.models[*scope];
                let b = model.resolve(pick);
                let t = text_of(*text, step, b);
                let want = if b.size() < 2 || !text_ok(&t) {
                    Err(Fail::Invalid)
                } else if b.hi() > model.count() {
                    Err(Fail::OutOfRange)
                } else if model.sums.contains_key(&b) {
                    Ok(NapOutcome::AlreadySettled)
                } else if model.first_pending() != Some(b) {
                    Err(Fail::WrongBlock {
                        given: b,
                        next: model.first_pending(),
                    })
                } else {
                    Ok(NapOutcome::Saved)
                };
                let got = open(&self.store).nap(SCOPES[*scope], b, &t);
                let saved = want == Ok(NapOutcome::Saved);
                same(&format!("nap {b}"), got, want)?;
                if saved {
                    model.sums.insert(b, t);
                    model.pending.remove(&(b.level(), b.lo()));
                }
            }
            Op::NapMany { scope, entries } => {
                let model = &mut self.models[*scope];
                let batch: Vec<(Block, String)> = entries
                    .iter()
                    .map(|(p, tp)| {
                        let b = model.resolve(p);
                        (b, text_of(*tp, step, b))
                    })
                    .collect();
                let (want, after) = nap_many_model(model, &batch, self.raw_max);
                let got = open(&self.store).nap_many(SCOPES[*scope], batch.clone());
                same(&format!("nap_many {batch:?}"), got, want)?;
                if let Some(m) = after {
                    *model = m;
                }
            }
            Op::Forget { scope, pick } => {
                let model = &mut self.models[*scope];
                let b = model.resolve(pick);
                let t = model.count();
                let want = if b.size() < 2 {
                    Err(Fail::Invalid)
                } else if b.hi() > t {
                    Err(Fail::OutOfRange)
                } else {
                    let mut removed = Vec::new();
                    let (mut level, mut lo) = (b.level(), b.lo());
                    while level < 63 && lo + (1u64 << level) <= t {
                        let c = block(level, lo);
                        if model.sums.remove(&c).is_some() {
                            model.pending.insert((level, lo));
                            removed.push(c);
                        }
                        level += 1;
                        lo -= lo % (1u64 << level);
                    }
                    Ok(removed)
                };
                same(
                    &format!("forget {b}"),
                    open(&self.store).forget(SCOPES[*scope], b),
                    want,
                )?;
            }
            Op::Zoom { scope, pick } => {
                let model = &self.models[*scope];
                let b = model.resolve(pick);
                let t = model.count();
                let want = if b.size() < 2 {
                    Err(Fail::Invalid)
                } else if b.lo() >= t {
                    Err(Fail::OutOfRange)
                } else {
                    let half = b.size() / 2;
                    let mut lines = Vec::new();
                    for lo in [b.lo(), b.lo() + half] {
                        if lo >= t {
                            continue;
                        }
                        if half == 1 {
                            lines.push(model.mem_line(lo));
                        } else {
                            let h = block(b.level() - 1, lo);
                            if model.sums.contains_key(&h) {
                                lines.push(model.sum_line(h));
                            } else {
                                lines.push(format!("#{}-{} not compressed yet", lo, lo + half - 1));
                            }
                        }
                    }
                    Ok(lines)
                };
                let got = self
                    .st()
                    .zoom(SCOPES[*scope], b)
                    .map(|v| v.iter().map(ZoomEntry::line).collect::<Vec<_>>());
                same(&format!("zoom {b}"), got, want)?;
            }
            Op::Wake {
                scope,
                lines,
                snapshot,
                bytes,
            } => self.wake(*scope, *lines, *snapshot, *bytes)?,
            Op::Recall {
                scope,
                pattern,
                limit,
                max_bytes,
                kind,
                since,
                until,
            } => {
                let model = &self.models[*scope];
                let mut q = RecallQuery::new(PATTERNS[*pattern]);
                q.limit = *limit;
                if let Some(mb) = max_bytes {
                    q.max_bytes = *mb;
                }
                q.kind = kind.map(|k| KINDS[k]);
                q.since_us = since.map(|d| JAN1_2024_US + i64::from(d) * DAY_US);
                q.until_us = until.map(|d| JAN1_2024_US + i64::from(d) * DAY_US);
                let want = recall_model(model, &q);
                let got = self.st().recall(SCOPES[*scope], &q).map(|r| {
                    let lines: Vec<String> =
                        r.matches.iter().map(somna::text::memory_line).collect();
                    (lines, r.total, r.render())
                });
                same(&format!("recall {q:?}"), got, want)?;
            }
            Op::Reopen => {
                let path = crate::backend::location(dir, "memory.redb");
                // Close the handle first: redb allows one per file per process.
                self.store = None;
                self.store = Some(Store::open(&path).unwrap());
            }
        }
        for m in &self.models {
            m.self_check(self.raw_max);
        }
        self.check_all()
    }

    fn wake(
        &self,
        scope: usize,
        lines: Option<usize>,
        snapshot: Option<u64>,
        bytes: Option<usize>,
    ) -> Result<(), TestCaseError> {
        let model = &self.models[scope];
        let count = model.count();
        let snapshot = snapshot.map(|s| s % (count + 2));
        let name = SCOPES[scope];
        let opts = WakeOptions {
            lines,
            bytes,
            snapshot,
            ..WakeOptions::default()
        };
        let t = snapshot.unwrap_or(count);
        let got = self.st().wake(name, &opts);
        if t > count {
            let e = got.err().map(|e| fail_of(&e));
            prop_assert_eq!(e, Some(Ok(Fail::OutOfRange)), "wake past the end");
            return Ok(());
        }
        let pending = model.pending.len() as u64;
        // The view the model expects for a line budget (no byte budget).
        let expect = |budget: usize| -> (u64, Vec<String>) {
            let c = cover(t, budget, &mut |b| Ok(model.sums.contains_key(&b))).unwrap();
            let items = c
                .blocks
                .iter()
                .map(|b| {
                    if b.size() == 1 {
                        model.mem_line(b.lo())
                    } else {
                        model.sum_line(*b)
                    }
                })
                .collect();
            (c.omitted, items)
        };
        let check_view = |v: &WakeView, budget: usize| -> Result<(), TestCaseError> {
            let (omitted, items) = expect(budget);
            prop_assert_eq!(v.total, t);
            prop_assert_eq!(v.pending, pending);
            prop_assert_eq!(v.omitted, omitted, "left out, budget {}", budget);
            let got: Vec<String> = v.items.iter().map(|i| i.line()).collect();
            prop_assert_eq!(&got, &items, "wake lines, budget {}", budget);
            let all = v.lines("somna");
            prop_assert!(
                all.len() <= budget,
                "{} lines for a budget of {}",
                all.len(),
                budget
            );
            if omitted > 0 {
                let head = format!(
                    "({omitted} older memories, #0 to #{}, are left out",
                    omitted - 1
                );
                prop_assert!(all[0].starts_with(&head), "left-out line: {}", all[0]);
                prop_assert_eq!(&all[1..], &items[..]);
            } else {
                prop_assert_eq!(&all, &items);
            }
            Ok(())
        };
        let budget = lines.unwrap_or(96);
        let Some(bytes) = bytes else {
            let v = match got {
                Ok(v) => v,
                Err(e) => return Err(TestCaseError::fail(format!("wake failed: {e}"))),
            };
            check_view(&v, budget)?;
            let text = self.st().wake_text(name, &opts);
            prop_assert_eq!(text.ok(), Some(expected_text(&v, pending)));
            let next = WakeOptions { part: 2, ..opts };
            prop_assert!(self.st().wake_text(name, &next).is_err(), "a second part");
            return Ok(());
        };
        // With a byte budget: the largest line budget whose whole output fits, or an error when
        // not even one line fits.
        let size = |v: &WakeView| v.parts(&opts).iter().map(|p| p.len()).sum::<usize>();
        let mut best = None;
        for l in 1..=budget {
            let o = WakeOptions {
                lines: Some(l),
                bytes: None,
                snapshot,
                ..WakeOptions::default()
            };
            let v = self.st().wake(name, &o).unwrap();
            check_view(&v, l)?;
            if size(&v) <= bytes {
                best = Some((l, v));
            }
        }
        match (got, best) {
            (Ok(v), Some((l, want))) => {
                prop_assert!(
                    size(&v) <= bytes,
                    "{} bytes for a budget of {}",
                    size(&v),
                    bytes
                );
                let lines = |v: &WakeView| v.lines("somna");
                prop_assert_eq!(
                    lines(&v),
                    lines(&want),
                    "byte budget {}: not the largest line budget that fits ({})",
                    bytes,
                    l
                );
            }
            (Err(e), None) => prop_assert_eq!(fail_of(&e), Ok(Fail::Invalid)),
            (Ok(v), None) => {
                return Err(TestCaseError::fail(format!(
                    "wake within {bytes} bytes gave {} bytes although no line budget fits",
                    size(&v)
                )))
            }
            (Err(e), Some((l, _))) => {
                return Err(TestCaseError::fail(format!(
                    "wake within {bytes} bytes failed ({e}) although {l} lines fit"
                )))
            }
        }
        Ok(())
    }

    /// Compares everything the store says about both scopes with the model.
    fn check_all(&self) -> Result<(), TestCaseError> {
        let mut stats = Vec::new();
        for (i, model) in self.models.iter().enumerate() {
            let name = SCOPES[i];
            prop_assert_eq!(
                self.st().count(name).unwrap(),
                model.count(),
                "count of {}",
                name
            );
            let want = model.pending_list();
            prop_assert_eq!(
                self.st().pending(name, None).unwrap(),
                want.clone(),
                "pending of {}",
                name
            );
            let pc = self.st().read(|r| r.pending_count(name)).unwrap();
            prop_assert_eq!(pc, want.len() as u64);
            // Summaries, by level then start, with their provenance.
            let nodes = self.st().read(|r| r.nodes(name)).unwrap();
            let got: Vec<(Block, String, bool)> = nodes
                .iter()
                .map(|n| {
                    (
                        n.block,
                        n.summary.text.clone(),
                        matches!(n.summary.built_from, BuiltFrom::Children { .. }),
                    )
                })
                .collect();
            let mut want_nodes: Vec<(Block, String, bool)> = model
                .sums
                .iter()
                .map(|(b, s)| (*b, s.clone(), b.size() > self.raw_max))
                .collect();
            want_nodes.sort_by_key(|(b, _, _)| (b.level(), b.lo()));
            prop_assert_eq!(got, want_nodes, "summaries of {}", name);
            for (b, s) in &model.sums {
                let got = self.st().read(|r| r.summary(name, *b)).unwrap();
                prop_assert_eq!(got.map(|s| s.text), Some(s.clone()));
            }
            // The next prompt is the first pending block, with its inputs.
            let p = self.st().next_prompt(name).unwrap();
            prop_assert_eq!(p.as_ref().map(|p| p.block), want.first().copied());
            if let Some(p) = p {
                let b = p.block;
                prop_assert_eq!(p.remaining, want.len() as u64 - 1);
                let got: Vec<String> = p
                    .inputs
                    .iter()
                    .map(|i| match i {
                        PromptInput::Memory(m) => somna::text::memory_line(m),
                        PromptInput::Summary { block, summary } => {
                            somna::text::summary_line(*block, summary)
                        }
                    })
                    .collect();
                let inputs: Vec<String> = if b.size() <= self.raw_max {
                    (b.lo()..b.hi()).map(|id| model.mem_line(id)).collect()
                } else {
                    let (l, r) = b.halves().expect("size >= 2");
                    vec![model.sum_line(l), model.sum_line(r)]
                };
                prop_assert_eq!(got, inputs, "inputs of the prompt for {}", b);
            }
            if model.count() > 0 {
                stats.push((
                    name.to_string(),
                    model.count(),
                    model.sums.len() as u64,
                    want.len() as u64,
                ));
            }
        }
        stats.sort();
        let got: Vec<(String, u64, u64, u64)> = self
            .st()
            .read(|r| r.stats())
            .unwrap()
            .into_iter()
            .map(|s| (s.scope, s.memories, s.summaries, s.pending))
            .collect();
        prop_assert_eq!(got, stats, "stats");
        Ok(())
    }
}

/// What `nap_many` should return, and the model after it (None: nothing changes).
type NapManyResult = Result<Vec<(Block, NapOutcome)>, Fail>;

fn nap_many_model(
    model: &ScopeModel,
    batch: &[(Block, String)],
    raw_max: u64,
) -> (NapManyResult, Option<ScopeModel>) {
    if batch.is_empty() || batch.iter().any(|(b, t)| b.size() < 2 || !text_ok(t)) {
        return (Err(Fail::Invalid), None);
    }
    let mut sorted = batch.to_vec();
    sorted.sort_by_key(|(b, _)| (b.level(), b.lo()));
    if sorted.windows(2).any(|w| w[0].0 == w[1].0) {
        return (Err(Fail::Invalid), None);
    }
    if model.count() == 0 {
        return (Err(Fail::OutOfRange), None);
    }
    let mut m = model.clone();
    let mut out = Vec::new();
    for (b, t) in sorted {
        if b.hi() > m.count() {
            return (Err(Fail::OutOfRange), None);
        }
        if m.sums.contains_key(&b) {
            out.push((b, NapOutcome::AlreadySettled));
            continue;
        }
        if b.size() > raw_max {
            let (l, r) = b.halves().expect("size >= 2");
            if !(m.sums.contains_key(&l) && m.sums.contains_key(&r)) {
                return (Err(Fail::Invalid), None);
            }
        }
        m.sums.insert(b, t);
        m.pending.remove(&(b.level(), b.lo()));
        out.push((b, NapOutcome::Saved));
    }
    (Ok(out), Some(m))
}

/// Recall over the model: the newest matches that fit `limit` and `max_bytes` (each line with
/// its newline), oldest first; the total; and the rendered text.
fn recall_model(model: &ScopeModel, q: &RecallQuery) -> Result<(Vec<String>, u64, String), Fail> {
    if q.pattern.is_empty() || q.pattern.contains('(') {
        return Err(Fail::Invalid);
    }
    let alts: Vec<String> = q.pattern.split('|').map(|a| a.to_lowercase()).collect();
    let mut matching = Vec::new();
    for id in (0..model.count()).rev() {
        let m = &model.mems[id as usize];
        if q.kind.is_some_and(|k| k != m.kind)
            || q.since_us.is_some_and(|s| m.observed_us < s)
            || q.until_us.is_some_and(|u| m.observed_us >= u)
        {
            continue;
        }
        let line = model.mem_line(id);
        let low = line.to_lowercase();
        if alts.iter().any(|a| low.contains(a.as_str())) {
            matching.push(line);
        }
    }
    let total = matching.len() as u64;
    let mut shown = Vec::new();
    let mut bytes = 0usize;
    for line in matching {
        if shown.len() >= q.limit.unwrap_or(usize::MAX) || bytes + line.len() + 1 > q.max_bytes {
            break;
        }
        bytes += line.len() + 1;
        shown.push(line);
    }
    shown.reverse();
    let mut text: String = shown.iter().map(|l| format!("{l}\n")).collect();
    let n = shown.len() as u64;
    if total == 0 {
        text.push_str("No match.\n");
    } else if n == total {
        text.push_str(&format!(
            "{total} match{}.\n",
            if total == 1 { "" } else { "es" }
        ));
    } else {
        // The cursor to older matches is the id of the oldest line shown (`#id date text`).
        let cursor = match shown.first().and_then(|l| l.strip_prefix('#')) {
            Some(rest) => format!(
                ", or see older ones with --before {}",
                rest.split(' ').next().unwrap_or_default()
            ),
            None => String::new(),
        };
        text.push_str(&format!(
            "Newest {n} of {total} matches. Narrow the regex{cursor}.\n"
        ));
    }
    Ok((shown, total, text))
}

fn run(raw_max: u64, ops: &[Op]) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(crate::backend::location(dir.path(), "memory.redb")).unwrap();
    if raw_max != 16 {
        store.set_config("RAW_MAX", &raw_max.to_string()).unwrap();
    }
    let mut h = Harness {
        store: Some(store),
        models: Default::default(),
        raw_max,
    };
    h.check_all()?;
    for (i, op) in ops.iter().enumerate() {
        h.step(dir.path(), i, op)
            .map_err(|e| TestCaseError::fail(format!("step {i} ({op:?}): {e}")))?;
    }
    // Answering every prompt of both scopes settles them.
    for (i, name) in SCOPES.iter().enumerate() {
        while let Some(p) = h.st().next_prompt(name).unwrap() {
            let t = format!("final {}", p.block);
            prop_assert_eq!(h.st().nap(name, p.block, &t).unwrap(), NapOutcome::Saved);
            h.models[i].sums.insert(p.block, t);
            h.models[i].pending.remove(&(p.block.level(), p.block.lo()));
        }
        h.models[i].self_check(raw_max);
    }
    h.check_all()?;
    let report = h.store.as_mut().unwrap().verify().unwrap();
    prop_assert!(report.ok(), "verify: {:?}", report.problems);
    prop_assert!(report.engine_intact);
    let scopes = h.models.iter().filter(|m| m.count() > 0).count();
    prop_assert_eq!(report.scopes, scopes);
    prop_assert_eq!(
        report.memories,
        h.models.iter().map(|m| m.count()).sum::<u64>()
    );
    prop_assert_eq!(
        report.summaries,
        h.models.iter().map(|m| m.sums.len() as u64).sum::<u64>()
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn store_matches_model(
        raw_max in prop_oneof![Just(2u64), Just(4), Just(16)],
        ops in proptest::collection::vec(op(), 1..=150),
    ) {
        run(raw_max, &ops)?;
    }
}

/// A fixed sequence through the brief's story, so that a regression shows up without luck.
#[test]
fn a_fixed_story() {
    let mut ops = Vec::new();
    for i in 0..40 {
        ops.push(Op::Note {
            scope: i % 2,
            words: (i % 6, (i + 1) % 6),
            day: (i % 20) as u8,
            kind: i % 3,
        });
        if i % 3 == 0 {
            ops.push(Op::Nap {
                scope: i % 2,
                pick: Pick::FirstPending,
                text: TextPick::Good,
            });
        }
    }
    ops.push(Op::Nap {
        scope: 0,
        pick: Pick::Pending(1),
        text: TextPick::Good,
    });
    ops.push(Op::Forget {
        scope: 0,
        pick: Pick::Built(0),
    });
    for lines in [1, 2, 3, 5, 8] {
        ops.push(Op::Wake {
            scope: 0,
            lines: Some(lines),
            snapshot: None,
            bytes: None,
        });
    }
    ops.push(Op::Zoom {
        scope: 0,
        pick: Pick::Any { level: 3, k: 0 },
    });
    ops.push(Op::Recall {
        scope: 1,
        pattern: 0,
        limit: None,
        max_bytes: None,
        kind: None,
        since: None,
        until: None,
    });
    ops.push(Op::Reopen);
    for raw_max in [2, 16] {
        run(raw_max, &ops).unwrap();
    }
}

/// The byte budget of wake is met with the largest line budget whose output fits. The size of
/// the output is not monotone in the line budget (the line naming left-out memories is long), so
/// a bisection over line budgets can miss every budget that fits. Seven memories, every merge
/// answered with a short line: three lines (`#0-3 s`, `#4-5 s`, `#6 ...`) are the smallest
/// output, while one or two lines need the long left-out line.
#[test]
fn wake_byte_budget_uses_a_line_budget_that_fits() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(crate::backend::location(dir.path(), "memory.redb")).unwrap();
    for i in 0..7 {
        store
            .note("default", NewMemory::new(format!("m{i}")))
            .unwrap();
    }
    while let Some(p) = store.next_prompt("default").unwrap() {
        store.nap("default", p.block, "s").unwrap();
    }
    for lines in [4usize, 8, 96] {
        let with_bytes = |bytes: usize| WakeOptions {
            lines: Some(lines),
            bytes: Some(bytes),
            ..WakeOptions::default()
        };
        // The size of the whole output at each line budget, rendered as the byte budget does.
        let views: Vec<(usize, WakeView)> = (1..=lines)
            .map(|l| {
                let o = WakeOptions {
                    lines: Some(l),
                    ..WakeOptions::default()
                };
                (l, store.wake("default", &o).unwrap())
            })
            .collect();
        let size = |v: &WakeView, bytes: usize| -> usize {
            v.parts(&with_bytes(bytes)).iter().map(|p| p.len()).sum()
        };
        let smallest = views.iter().map(|(_, v)| size(v, 999)).min().unwrap();
        for bytes in [smallest, smallest + 10] {
            let best = views
                .iter()
                .rfind(|(_, v)| size(v, bytes) <= bytes)
                .map(|(l, v)| (*l, v.lines("somna")))
                .expect("some line budget fits");
            let got = store
                .wake("default", &with_bytes(bytes))
                .map(|v| v.lines("somna"));
            match got {
                Ok(got) => assert_eq!(
                    got, best.1,
                    "--lines {lines} --bytes {bytes}: the largest budget that fits is {}",
                    best.0
                ),
                Err(e) => panic!(
                    "--lines {lines} --bytes {bytes}: {e}, although {} lines fit: {:?}",
                    best.0, best.1
                ),
            }
        }
    }
}

/// Above the smallest line budget that leaves nothing out, a summary can take more bytes than
/// the finer lines that replace it at a larger budget, so the output is not monotone there
/// either; the byte budget still takes the largest line budget that fits (found by
/// `store_matches_model` with a summary of the longest text allowed). Sixteen memories, every
/// merge answered with a short line but 0-7's and 0-15's with long ones; every byte budget that
/// is the size of some line budget's output, under line budgets from 2 to 16.
#[test]
fn wake_byte_budget_passes_over_a_long_summary() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(crate::backend::location(dir.path(), "memory.redb")).unwrap();
    for i in 0..16 {
        store
            .note("default", NewMemory::new(format!("m{i}")))
            .unwrap();
    }
    while let Some(p) = store.next_prompt("default").unwrap() {
        let long = p.block.lo() == 0 && p.block.size() >= 8;
        let text = if long {
            "\u{e9}".repeat(140)
        } else {
            "s".into()
        };
        store.nap("default", p.block, &text).unwrap();
    }
    let opts = |lines: usize, bytes: Option<usize>| WakeOptions {
        lines: Some(lines),
        bytes,
        ..WakeOptions::default()
    };
    let views: Vec<WakeView> = (1..=16)
        .map(|l| store.wake("default", &opts(l, None)).unwrap())
        .collect();
    let size = |v: &WakeView, bytes: usize| -> usize {
        v.parts(&opts(16, Some(bytes)))
            .iter()
            .map(|p| p.len())
            .sum()
    };
    let long_line = |v: &WakeView| v.lines("somna").iter().any(|l| l.starts_with("#0-"));
    assert!(long_line(&views[0]) && !long_line(&views[15]));
    let mut missed = Vec::new();
    for lines in [2usize, 4, 6, 8, 12, 16] {
        for bytes in views.iter().map(|v| size(v, 999)) {
            let best = (1..=lines)
                .rev()
                .find(|&l| size(&views[l - 1], bytes) <= bytes)
                .map(|l| views[l - 1].lines("somna"));
            let got = store.wake("default", &opts(lines, Some(bytes)));
            if got.ok().map(|v| v.lines("somna")) != best {
                missed.push((lines, bytes));
            }
        }
    }
    assert!(
        missed.is_empty(),
        "(--lines, --bytes) not at the largest line budget that fits: {missed:?}"
    );
}
