//! Guards group commit: many threads writing through one `Store` at once each get exactly their
//! own outcome. Every acknowledged note is present once, ids stay dense and per-thread ordered,
//! an invalid write fails alone without taking its batch-mates down, and idempotency keys and
//! session appends behave as if every call had its own transaction.

use std::sync::Arc;

use somna::{Error, NewMemory, Store};

#[test]
fn concurrent_notes_are_all_kept_once_in_order() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::create(crate::backend::location(dir.path(), "g.redb")).unwrap());
    let threads = 8;
    let per = 60;
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let s = Arc::clone(&store);
            std::thread::spawn(move || {
                let mut ids = Vec::new();
                for i in 0..per {
                    ids.push(
                        s.note("g", NewMemory::new(format!("thread {t} note {i}")))
                            .unwrap(),
                    );
                    if i % 7 == 0 {
                        // An invalid note in the middle of other threads' batches fails alone.
                        let e = s
                            .note("g", NewMemory::new(format!("bad\nnote {t} {i}")))
                            .unwrap_err();
                        assert!(matches!(e, Error::Invalid { .. }), "{e}");
                    }
                }
                ids
            })
        })
        .collect();
    let mut all = Vec::new();
    for (t, h) in handles.into_iter().enumerate() {
        let ids = h.join().unwrap();
        assert!(
            ids.windows(2).all(|w| w[0] < w[1]),
            "thread {t} ids not increasing"
        );
        for (i, id) in ids.iter().enumerate() {
            assert_eq!(
                store.memory("g", *id).unwrap().text,
                format!("thread {t} note {i}")
            );
        }
        all.extend(ids);
    }
    all.sort_unstable();
    assert_eq!(all, (0..(threads * per) as u64).collect::<Vec<_>>());
    let mut store = Arc::try_unwrap(store).unwrap();
    assert!(store.verify().unwrap().ok());
}

#[test]
fn concurrent_retries_with_one_key_write_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(Store::create(crate::backend::location(dir.path(), "k.redb")).unwrap());
    let handles: Vec<_> = (0..8)
        .map(|_| {
            let s = Arc::clone(&store);
            std::thread::spawn(move || {
                let a = s
                    .append("k", vec![NewMemory::new("exactly once")], Some("retry-key"))
                    .unwrap();
                let b = s
                    .session_append(
                        "chat",
                        &[r#"{"role":"user","content":"hi"}"#],
                        Some("turn-1"),
                        None,
                    )
                    .unwrap();
                (a.first, b.first_index)
            })
        })
        .collect();
    let outs: Vec<(u64, u64)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert!(outs.iter().all(|o| *o == (0, 0)), "{outs:?}");
    assert_eq!(store.count("k").unwrap(), 1);
    assert_eq!(store.session_items("chat", None).unwrap().len(), 1);
}
