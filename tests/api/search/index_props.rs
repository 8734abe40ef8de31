//! Property test of the search index's one invariant: after any sequence of note (one or a
//! batch that crosses the tail's fold), nap, forget, retract, supersede, redact, a vector and an
//! import, the index a store holds equals the one rebuilt from its log and tree (`verify`
//! compares them, postings and statistics), a reindex rebuilds exactly what was kept, and no
//! posting refers to a redacted memory. An export of the store imported into a fresh one holds
//! the same index.
//!
//! Case count: `SOMNA_PROPTEST_CASES` (default 16).

use proptest::prelude::*;
use somna::Decision;
use somna::{Block, NewMemory, Store};

fn cases() -> u32 {
    std::env::var("SOMNA_PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(16)
}

const WORDS: &[&str] = &[
    "deploy", "staging", "Café", "noël", "東京", "key", "rotates", "weekly", "support", "group",
    "the", "a", "budget", "alpha", "straße", "42",
];

#[derive(Debug, Clone)]
enum Op {
    Note(Vec<usize>),
    Batch(usize, usize),
    Nap(usize),
    Forget(u64),
    Retract(u64),
    Supersede(u64, Vec<usize>),
    Redact(u64),
    Vector(u64),
    Import(usize),
}

fn text(words: &[usize]) -> String {
    let t: Vec<&str> = words.iter().map(|&i| WORDS[i % WORDS.len()]).collect();
    if t.is_empty() {
        "-".to_string()
    } else {
        t.join(" ")
    }
}

fn op() -> impl Strategy<Value = Op> {
    let words = || prop::collection::vec(0..WORDS.len(), 0..6);
    prop_oneof![
        4 => words().prop_map(Op::Note),
        1 => (1usize..300, 0usize..7).prop_map(|(n, s)| Op::Batch(n, s)),
        2 => (0usize..4).prop_map(Op::Nap),
        1 => (0u64..400).prop_map(Op::Forget),
        1 => (0u64..400).prop_map(Op::Retract),
        1 => ((0u64..400), words()).prop_map(|(i, w)| Op::Supersede(i, w)),
        2 => (0u64..400).prop_map(Op::Redact),
        1 => (0u64..400).prop_map(Op::Vector),
        1 => (1usize..5).prop_map(Op::Import),
    ]
}

/// Applies one operation; refusals (an id past the end, a block not pending) are fine.
fn apply(s: &Store, op: &Op, redacted: &mut Vec<u64>) {
    let count = s.count("u").unwrap();
    let pick = |i: u64| (count > 0).then(|| i % count);
    match op {
        Op::Note(w) => drop(s.note("u", NewMemory::new(text(w)))),
        Op::Batch(n, seed) => {
            let items = (0..*n)
                .map(|i| NewMemory::new(text(&[i, i / 3 + seed, 7])))
                .collect();
            s.append("u", items, None).unwrap();
        }
        Op::Nap(n) => {
            for k in 0..*n {
                if let Some(p) = s.next_prompt("u").unwrap() {
                    s.nap("u", p.block, &text(&[k, 8, 9])).unwrap();
                }
            }
        }
        Op::Forget(i) => {
            if let Some(b) = pick(*i).and_then(|i| Block::single(i).parent()) {
                let _ = s.forget("u", b);
            }
        }
        Op::Retract(i) => {
            if let Some(i) = pick(*i) {
                s.decide("u", i, Decision::Retract, None).unwrap();
            }
        }
        Op::Supersede(i, w) => {
            let m = NewMemory::new(text(w)).supersedes(pick(*i).into_iter().collect());
            s.note("u", m).unwrap();
        }
        Op::Redact(i) => {
            if let Some(i) = pick(*i) {
                s.redact("u", i, "test").unwrap();
                redacted.push(i);
            }
        }
        Op::Vector(i) => {
            if let Some(i) = pick(*i) {
                s.set_vector("u", i, &[1.0, i as f32]).unwrap();
            }
        }
        Op::Import(n) => {
            let lines: String = (0..*n)
                .map(|i| format!("2099-01-0{} {}\n", i + 1, text(&[i, 4])))
                .collect();
            let _ = s.import_lines("u", &lines);
        }
    }
}

fn check(s: &mut Store, redacted: &[u64]) -> Result<(), TestCaseError> {
    let r = s.verify().unwrap();
    prop_assert!(r.problems.is_empty(), "{:?}", r.problems);
    let content = s.read(|r| r.search_index("u")).unwrap();
    for id in redacted {
        prop_assert!(
            !content.docs.contains_key(id),
            "#{} is redacted but indexed",
            id
        );
    }
    // A rebuild (reindex) holds the same postings and statistics as the index kept note by note.
    s.reindex(&mut |_, _| {}).unwrap();
    prop_assert_eq!(s.read(|r| r.search_index("u")).unwrap(), content);
    let r = s.verify().unwrap();
    prop_assert!(r.problems.is_empty(), "after reindex: {:?}", r.problems);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn the_index_always_equals_the_rebuilt_one(ops in prop::collection::vec(op(), 1..24)) {
        let dir = tempfile::tempdir().unwrap();
        let mut s = Store::create(crate::backend::location(dir.path(), "p.redb")).unwrap();
        let mut redacted = Vec::new();
        for op in &ops {
            apply(&s, op, &mut redacted);
        }
        check(&mut s, &redacted)?;
        let mut out = Vec::new();
        s.export(&mut out).unwrap();
        let mut copy = Store::create(crate::backend::location(dir.path(), "q.redb")).unwrap();
        copy.import_jsonl(&mut out.as_slice()).unwrap();
        check(&mut copy, &redacted)?;
        prop_assert_eq!(
            s.read(|r| r.search_index("u")).unwrap(),
            copy.read(|r| r.search_index("u")).unwrap()
        );
    }
}
