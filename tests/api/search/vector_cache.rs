//! Guards the handle's cache of quantised vectors (docs/design.md 12.8): a handle that has
//! searched keeps its vectors in memory, and every write another handle makes afterwards (a
//! vector appended, a vector replaced, a memory redacted) shows in its next search exactly as
//! in a handle that never searched; the top hits' scores are the exact cosines, not the
//! quantised ones; and the count of rewrites the cache trusts rises only for a rewrite.

use somna::{NewMemory, SearchMode, SearchQuery, Store};

const SCOPE: &str = "v";
const DIM: usize = 16;
const N: u64 = 3000;

/// A fixed pseudo-random vector for `seed` (xorshift64), coordinates in [-1, 1].
fn vector(seed: u64) -> Vec<f32> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..DIM)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x % 2001) as f32 / 1000.0 - 1.0
        })
        .collect()
}

fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let dot: f64 = a
        .iter()
        .zip(b)
        .map(|(x, y)| f64::from(*x) * f64::from(*y))
        .sum();
    let n = |v: &[f32]| v.iter().map(|x| f64::from(*x).powi(2)).sum::<f64>().sqrt();
    dot / (n(a) * n(b))
}

/// Every hit of a vector-only search for `q`: (id, score), best first.
fn ranked(s: &Store, q: &[f32]) -> Vec<(u64, f64)> {
    let mut sq = SearchQuery::new("");
    sq.vector = Some(q.to_vec());
    sq.mode = Some(SearchMode::Vector);
    sq.limit = 10_000;
    sq.max_bytes = 1 << 24;
    s.search(SCOPE, &sq)
        .unwrap()
        .hits
        .iter()
        .map(|h| (h.id.unwrap(), h.score))
        .collect()
}

fn score_of(hits: &[(u64, f64)], id: u64) -> Option<f64> {
    hits.iter().find(|h| h.0 == id).map(|h| h.1)
}

#[test]
fn a_searching_handle_sees_every_later_write_of_another() {
    let dir = tempfile::tempdir().unwrap();
    let at = crate::backend::location(dir.path(), "c.redb");
    let a = Store::create(&at).unwrap();
    let items = (0..N)
        .map(|i| NewMemory::new(format!("memory {i}")).vector(vector(i)))
        .collect();
    a.append(SCOPE, items, None).unwrap();
    let first = ranked(&a, &vector(17));
    assert_eq!(first.first().map(|h| h.0), Some(17));
    // The top ten carry the exact cosine (rescored), not the quantised one.
    for &(id, score) in first.iter().take(10) {
        let want = cosine(&vector(id), &vector(17));
        assert!((score - want).abs() < 1e-5, "#{id}: {score} vs {want}");
    }

    let b = Store::open(&at).unwrap();
    // A rewrite: memory 17's vector replaced by its opposite.
    let flipped: Vec<f32> = vector(17).iter().map(|x| -x).collect();
    b.set_vector(SCOPE, 17, &flipped).unwrap();
    let after = ranked(&a, &vector(17));
    assert_ne!(after.first().map(|h| h.0), Some(17));
    assert!(
        score_of(&after, 17).unwrap() < -0.95,
        "{:?}",
        score_of(&after, 17)
    );
    // Ranked by the opposite, it comes first: a stale cache would place it last, where no
    // rescoring reaches.
    let opposite = ranked(&a, &flipped);
    assert_eq!(
        opposite.first().map(|h| h.0),
        Some(17),
        "{:?}",
        &opposite[..3]
    );

    // An append: a new memory whose vector is the query's.
    let new = b
        .note(
            SCOPE,
            NewMemory::new("memory new").vector(vector(1_000_000)),
        )
        .unwrap();
    let found = ranked(&a, &vector(1_000_000));
    assert_eq!(found.first().map(|h| h.0), Some(new));
    assert!((found[0].1 - 1.0).abs() < 1e-6, "{}", found[0].1);

    // A redaction deletes the vector: the memory is no longer a candidate.
    b.redact(SCOPE, 42, "test").unwrap();
    let gone = ranked(&a, &vector(42));
    assert_eq!(score_of(&gone, 42), None, "{:?}", &gone[..3]);

    // The handle that searched all along ranks as one that never did.
    let fresh = Store::open(&at).unwrap();
    for seed in [3, 42, 1_000_000, 17, 250] {
        let (x, y) = (ranked(&a, &vector(seed)), ranked(&fresh, &vector(seed)));
        let top = |h: &[(u64, f64)]| h.iter().take(10).map(|p| p.0).collect::<Vec<_>>();
        assert_eq!(top(&x), top(&y), "query {seed}");
        assert_eq!(x.len(), y.len());
    }
}

#[test]
fn an_insert_below_the_highest_id_is_seen_as_a_rewrite() {
    let dir = tempfile::tempdir().unwrap();
    let at = crate::backend::location(dir.path(), "c.redb");
    let a = Store::create(&at).unwrap();
    for i in 0..20 {
        a.note(SCOPE, NewMemory::new(format!("memory {i}")))
            .unwrap();
    }
    // Vectors for the even memories only, then a search caches them.
    for i in (0..20).step_by(2) {
        a.set_vector(SCOPE, i, &vector(i)).unwrap();
    }
    assert_eq!(ranked(&a, &vector(4)).first().map(|h| h.0), Some(4));
    // Another handle gives memory 7 (below the highest id with a vector, 18) one.
    let b = Store::open(&at).unwrap();
    b.set_vector(SCOPE, 7, &vector(77)).unwrap();
    let hits = ranked(&a, &vector(77));
    assert_eq!(hits.first().map(|h| h.0), Some(7), "{hits:?}");
    assert_eq!(hits.len(), 11);
}
