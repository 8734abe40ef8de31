//! Property tests of pending merges on a real store (`somna::Store` in a temp dir). They guard
//! the bookkeeping that drives `nap`: after T notes from empty (one at a time or in batches) the
//! pending blocks are exactly the complete aligned blocks of size 2, 4, 8, ... without a summary,
//! T - popcount(T) of them; they are listed smallest size first, then by position; and the next
//! merge prompt is always the first pending block, with its inputs (raw memories up to RAW_MAX,
//! otherwise the two child summaries) present — also while merges are answered one by one and
//! more notes arrive in between.
//!
//! Case count: `SOMNA_PROPTEST_CASES` (default 32).

use std::collections::BTreeMap;

use proptest::prelude::*;
use somna::{Block, NapOutcome, NewMemory, PromptInput, Store};

fn cases() -> u32 {
    std::env::var("SOMNA_PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(32)
}

const SCOPE: &str = "default";

/// Every complete block of `t` memories (size >= 2) without a summary, smallest size first,
/// then by position.
fn expected_pending(t: u64, built: &BTreeMap<Block, String>) -> Vec<Block> {
    let mut out = Vec::new();
    let mut level = 1u8;
    while level < 63 && (1u64 << level) <= t {
        let size = 1u64 << level;
        for k in 0..t / size {
            let b = Block::new(level, k * size).expect("aligned");
            if !built.contains_key(&b) {
                out.push(b);
            }
        }
        level += 1;
    }
    out
}

fn pending_count(store: &Store) -> u64 {
    store.read(|r| r.pending_count(SCOPE)).unwrap()
}

fn text_of(i: u64) -> String {
    format!("memory number {i}")
}

/// Checks the pending list, its count and order, and the next prompt against the expectation.
fn check(
    store: &Store,
    t: u64,
    raw_max: u64,
    built: &BTreeMap<Block, String>,
) -> Result<(), TestCaseError> {
    prop_assert_eq!(store.count(SCOPE).unwrap(), t);
    let want = expected_pending(t, built);
    let got = store.pending(SCOPE, None).unwrap();
    // Order, checked on its own: strictly increasing by (size, position).
    for w in got.windows(2) {
        prop_assert!(
            (w[0].size(), w[0].lo()) < (w[1].size(), w[1].lo()),
            "pending order: {} before {}",
            w[0],
            w[1]
        );
    }
    prop_assert_eq!(&got, &want);
    prop_assert_eq!(pending_count(store), want.len() as u64);
    if built.is_empty() {
        prop_assert_eq!(want.len() as u64, t - u64::from(t.count_ones()));
    }
    for limit in [0usize, 1, 3] {
        let got = store.pending(SCOPE, Some(limit)).unwrap();
        prop_assert_eq!(&got[..], &want[..limit.min(want.len())]);
    }
    let prompt = store.next_prompt(SCOPE).unwrap();
    match want.first() {
        None => prop_assert!(prompt.is_none(), "a prompt with nothing pending"),
        Some(&first) => {
            let Some(p) = prompt else {
                return Err(TestCaseError::fail(format!(
                    "no prompt although {first} is pending"
                )));
            };
            prop_assert_eq!(p.block, first, "the prompt is not the first pending block");
            prop_assert_eq!(p.remaining, want.len() as u64 - 1);
            if first.size() <= raw_max {
                let ids: Vec<(u64, String)> = p
                    .inputs
                    .iter()
                    .map(|i| match i {
                        PromptInput::Memory(m) => (m.id, m.text.clone()),
                        PromptInput::Summary { block, .. } => (u64::MAX, block.to_string()),
                    })
                    .collect();
                let want: Vec<(u64, String)> =
                    (first.lo()..first.hi()).map(|i| (i, text_of(i))).collect();
                prop_assert_eq!(ids, want);
            } else {
                let (l, r) = first.halves().expect("size >= 2");
                let got: Vec<(String, String)> = p
                    .inputs
                    .iter()
                    .map(|i| match i {
                        PromptInput::Summary { block, summary } => {
                            (block.to_string(), summary.text.clone())
                        }
                        PromptInput::Memory(m) => (format!("#{}", m.id), m.text.clone()),
                    })
                    .collect();
                let want: Vec<(String, String)> = [l, r]
                    .iter()
                    .map(|h| (h.to_string(), built.get(h).cloned().unwrap_or_default()))
                    .collect();
                prop_assert_eq!(got, want);
            }
            let rendered = p.render("somna");
            let last = format!("Run: somna nap {first} \"<your line>\"\n");
            prop_assert!(
                rendered.ends_with(&last),
                "prompt does not end with the command"
            );
        }
    }
    Ok(())
}

/// How memories arrive: `note` one at a time or one `append` batch.
#[derive(Debug, Clone, Copy)]
enum Chunk {
    Notes(u64),
    Batch(u64),
}

fn chunks(max_chunks: usize, max_batch: u64) -> impl Strategy<Value = Vec<Chunk>> {
    proptest::collection::vec(
        prop_oneof![
            3 => (1u64..=12).prop_map(Chunk::Notes),
            1 => (1u64..=max_batch).prop_map(Chunk::Batch),
        ],
        0..=max_chunks,
    )
}

fn add(store: &Store, t: &mut u64, c: Chunk) {
    match c {
        Chunk::Notes(n) => {
            for _ in 0..n {
                let id = store.note(SCOPE, NewMemory::new(text_of(*t))).unwrap();
                assert_eq!(id, *t);
                *t += 1;
            }
        }
        Chunk::Batch(n) => {
            let items = (*t..*t + n).map(|i| NewMemory::new(text_of(i))).collect();
            let a = store.append(SCOPE, items, None).unwrap();
            assert_eq!((a.first, a.count, a.replayed), (*t, n, false));
            *t += n;
        }
    }
}

fn new_store(raw_max: u64) -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(crate::backend::location(dir.path(), "memory.redb")).unwrap();
    if raw_max != 16 {
        store.set_config("RAW_MAX", &raw_max.to_string()).unwrap();
    }
    (dir, store)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    /// From empty, after every arrival of memories: exactly T - popcount(T) pending blocks, in
    /// order, the first one offered.
    #[test]
    fn pending_after_notes_from_empty(arrivals in chunks(12, 40)) {
        let (_dir, store) = new_store(16);
        let built = BTreeMap::new();
        let mut t = 0u64;
        check(&store, t, 16, &built)?;
        for c in arrivals {
            add(&store, &mut t, c);
            check(&store, t, 16, &built)?;
        }
    }

    /// Answering the prompts in the order offered, with more notes arriving in between: the
    /// pending list is always the complete blocks without a summary, in order, and the prompt
    /// is always its first block with every input present.
    #[test]
    fn prompts_follow_the_pending_order(
        raw_max in prop_oneof![Just(2u64), Just(4), Just(16)],
        rounds in proptest::collection::vec((chunks(3, 24), 0usize..=30), 1..=4),
    ) {
        let (_dir, store) = new_store(raw_max);
        let mut built = BTreeMap::new();
        let mut t = 0u64;
        for (arrivals, naps) in rounds {
            for c in arrivals {
                add(&store, &mut t, c);
            }
            check(&store, t, raw_max, &built)?;
            for _ in 0..naps {
                let Some(p) = store.next_prompt(SCOPE).unwrap() else { break };
                let text = format!("summary of {}", p.block);
                prop_assert_eq!(store.nap(SCOPE, p.block, &text).unwrap(), NapOutcome::Saved);
                built.insert(p.block, text);
                check(&store, t, raw_max, &built)?;
            }
        }
        // Answering everything leaves nothing pending.
        while let Some(p) = store.next_prompt(SCOPE).unwrap() {
            let text = format!("summary of {}", p.block);
            prop_assert_eq!(store.nap(SCOPE, p.block, &text).unwrap(), NapOutcome::Saved);
            built.insert(p.block, text);
        }
        check(&store, t, raw_max, &built)?;
        prop_assert_eq!(pending_count(&store), 0);
        prop_assert_eq!(built.len() as u64, t - u64::from(t.count_ones()));
    }
}

/// The count formula at a few exact sizes, including the brief's example of four notes.
#[test]
fn pending_counts_at_fixed_sizes() {
    let (_dir, store) = new_store(16);
    let mut t = 0u64;
    for target in [1u64, 2, 3, 4, 7, 8, 31, 32, 33, 100] {
        let n = target - t;
        add(&store, &mut t, Chunk::Batch(n));
        assert_eq!(
            pending_count(&store),
            target - u64::from(target.count_ones()),
            "T = {target}"
        );
        let names: Vec<String> = store
            .pending(SCOPE, Some(3))
            .unwrap()
            .iter()
            .map(|b| b.to_string())
            .collect();
        if target == 4 {
            assert_eq!(names, ["0-1", "2-3", "0-3"]);
        }
    }
}
