//! Guards authorization before retrieval as a property: for random grants over random scopes,
//! no read by a principal ever returns a record, a summary or a count from a scope it cannot
//! read (each such read is refused, naming only what was asked), listings name only readable
//! scopes and sessions, and multi-scope wake and export carry no text from other scopes.

use proptest::prelude::*;
use somna::trust::Access;
use somna::{Block, Error, NewMemory, RecallQuery, Store, WakeOptions};

const SCOPES: [&str; 4] = ["team/a", "team/b", "user:alice", "user:bob"];
const PATTERNS: [&str; 6] = [
    "team/",
    "team/a",
    "team/b",
    "user:",
    "user:alice",
    "user:bob",
];

fn cases() -> u32 {
    std::env::var("SOMNA_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24)
}

fn covered(p: &str, s: &str) -> bool {
    somna::trust::pattern_matches(p, s)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn no_read_leaks_an_unreadable_scope(
        grants in proptest::collection::vec((0usize..PATTERNS.len(), any::<bool>()), 1..5),
        notes in proptest::collection::vec(0usize..SCOPES.len(), 4..24),
    ) {
        let dir = tempfile::tempdir().unwrap();
        let admin = Store::create(crate::backend::location(dir.path(), "a.redb")).unwrap();
        for (i, &s) in notes.iter().enumerate() {
            admin.note(SCOPES[s], NewMemory::new(format!("text-of-{} number {i}", SCOPES[s]))).unwrap();
            admin.session_save(&format!("chat-{}", SCOPES[s]), &[&format!("{{\"n\":{i}}}")], None).unwrap();
        }
        for s in SCOPES {
            if admin.count(s).unwrap() >= 2 {
                admin.nap(s, "0-1".parse().unwrap(), &format!("summary-of-{s}")).unwrap();
            }
        }
        for &(p, read) in &grants {
            admin.grant("agent:x", if read { Access::Read } else { Access::Write }, PATTERNS[p]).unwrap();
        }
        let x = admin.as_principal(Some("agent:x"));
        let readable: Vec<&str> = SCOPES
            .iter()
            .copied()
            .filter(|s| grants.iter().any(|&(p, r)| r && covered(PATTERNS[p], s)))
            .collect();
        for s in SCOPES {
            let may = readable.contains(&s);
            let results = [
                x.count(s).map(|_| ()),
                x.wake_text(s, &WakeOptions::default()).map(|_| ()),
                x.recall(s, &RecallQuery::new(".")).map(|_| ()),
                x.zoom(s, Block::new(1, 0).unwrap()).map(|_| ()),
                x.pending(s, None).map(|_| ()),
                x.read(|r| r.nodes(s)).map(|_| ()),
                x.read(|r| r.memories(s, 0, 100)).map(|_| ()),
            ];
            for r in results {
                match r {
                    Err(Error::Denied(m)) => {
                        prop_assert!(!may, "{s} readable but denied");
                        prop_assert!(!m.contains("text-of") && !m.contains("summary-of"));
                    }
                    Err(Error::OutOfRange { .. }) | Ok(()) => prop_assert!(may, "{s} unreadable but read"),
                    Err(e) => prop_assert!(false, "unexpected {e}"),
                }
            }
            let session = x.session_load(&format!("chat-{s}"));
            prop_assert_eq!(session.is_err(), true, "sessions need their own grant");
        }
        let listed = x.read(|r| r.scopes()).unwrap();
        let stats: Vec<String> = x.read(|r| r.stats()).unwrap().into_iter().map(|s| s.scope).collect();
        for s in SCOPES {
            let exists = admin.count(s).unwrap() > 0;
            prop_assert_eq!(listed.contains(&s.to_string()), exists && readable.contains(&s));
            prop_assert_eq!(stats.contains(&s.to_string()), exists && readable.contains(&s));
        }
        prop_assert!(x.session_ids().unwrap().is_empty());
        let (_, text) = x.wake_scopes(&listed, &WakeOptions::default()).unwrap();
        let mut out = Vec::new();
        x.export(&mut out).unwrap();
        let out = String::from_utf8(out).unwrap();
        for s in SCOPES {
            if !readable.contains(&s) {
                for hay in [&text, &out] {
                    prop_assert!(!hay.contains(&format!("text-of-{s} ")), "{s} leaked");
                    prop_assert!(!hay.contains(&format!("summary-of-{s}")), "{s} summary leaked");
                }
            }
        }
    }
}
