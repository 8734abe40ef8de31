//! Exact cosine at scale: query p50/p95 of a vector-only and of a fused (words and vector)
//! search over 10^4 and 10^5 stored vectors of dimension 384 (random unit vectors, generated:
//! nothing downloads a model), and what the vectors cost to write: the bulk build with and
//! without them, one durable `note` with and without one, and the bytes of the `vectors` table.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use redb::{self, ReadableDatabase};
use somna::{NewMemory, Options, SearchMode, SearchQuery, Store};

use crate::speed::{percentile, table_bytes, Text, BATCH};

const SCOPE: &str = "default";
/// The dimension of the usual small sentence-embedding models (all-MiniLM-L6-v2, bge-small).
pub const DIM: usize = 384;

/// xorshift64*: a fixed, seeded sequence for the vectors.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// A random unit vector (uniform coordinates in [-1, 1], normalized).
    fn unit_vector(&mut self) -> Vec<f32> {
        let v: Vec<f32> = (0..DIM)
            .map(|_| ((self.next() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0)
            .collect();
        let n = v
            .iter()
            .map(|x| x * x)
            .sum::<f32>()
            .sqrt()
            .max(f32::MIN_POSITIVE);
        v.into_iter().map(|x| x / n).collect()
    }
}

/// Builds a store of `n` generated turns, each with a vector when `vectors`; the seconds taken.
fn build(path: &Path, n: u64, vectors: bool) -> f64 {
    let store = Store::create_with(path, Options::default().exclusive(true)).expect("store");
    let (mut text, mut rng) = (Text::new(1), Rng(0x5eed));
    let t = Instant::now();
    let mut done = 0;
    while done < n {
        let k = BATCH.min(n - done);
        let items = (0..k)
            .map(|_| {
                let m = NewMemory::new(text.turn());
                if vectors {
                    m.vector(rng.unit_vector())
                } else {
                    m
                }
            })
            .collect();
        store.append(SCOPE, items, None).expect("append");
        done += k;
    }
    t.elapsed().as_secs_f64()
}

/// The median of `k` durable notes into `store`, with a vector each or without, in ms.
fn note_ms(store: &Store, k: usize, vectors: bool) -> f64 {
    let (mut text, mut rng) = (Text::new(5), Rng(0xfeed));
    let mut t: Vec<f64> = (0..k)
        .map(|_| {
            let mut m = NewMemory::new(text.turn());
            if vectors {
                m = m.vector(rng.unit_vector());
            }
            let s = Instant::now();
            store.note(SCOPE, m).expect("note");
            s.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    percentile(&mut t, 0.5)
}

/// Queries timed per size.
fn timed(n: u64) -> usize {
    if n <= 10_000 {
        200
    } else {
        60
    }
}

/// p50 and p95 in ms of `mode` searches (words from `Text`, a random query vector).
fn latency(store: &Store, n: u64, mode: SearchMode) -> (f64, f64) {
    let (mut text, mut rng) = (Text::new(99), Rng(0xabc));
    let mut t = Vec::new();
    for i in 0..timed(n) + 5 {
        let mut q = SearchQuery::new(if mode == SearchMode::Vector {
            String::new()
        } else {
            text.query()
        });
        q.vector = Some(rng.unit_vector());
        q.mode = Some(mode);
        let s = Instant::now();
        std::hint::black_box(store.search(SCOPE, &q).expect("search"));
        if i >= 5 {
            t.push(s.elapsed().as_secs_f64() * 1e3);
        }
    }
    (percentile(&mut t, 0.5), percentile(&mut t, 0.95))
}

/// One size: both stores built, the queries timed on the one with vectors, then the notes.
fn size(dir: &Path, n: u64, md: &mut String) {
    let with = dir.join(format!("vectors-{n}.redb"));
    let without = dir.join(format!("vectors-none-{n}.redb"));
    let (bw, bo) = (build(&with, n, true), build(&without, n, false));
    let vbytes = {
        let db = redb::Database::open(&with).expect("redb open");
        let rx = db.begin_read().expect("read");
        table_bytes(&rx, somna::format::VECTORS)
    };
    let store = Store::open(&with).expect("open");
    let (v50, v95) = latency(&store, n, SearchMode::Vector);
    let (h50, h95) = latency(&store, n, SearchMode::Hybrid);
    let (l50, l95) = latency(&store, n, SearchMode::Lexical);
    let note_v = note_ms(&store, 30, true);
    drop(store);
    let plain = Store::open(&without).expect("open");
    let note_0 = note_ms(&plain, 30, false);
    let _ = writeln!(
        md,
        "| {n} | {v50:.1} | {v95:.1} | {h50:.1} | {h95:.1} | {l50:.1} | {l95:.1} | {:.2} | {:.2} | {:.0} | {note_v:.2} | {note_0:.2} |",
        bw / n as f64 * 1e3,
        bo / n as f64 * 1e3,
        vbytes as f64 / n as f64,
    );
    println!("  {n} vectors done");
    let _ = std::fs::remove_file(&with);
    let _ = std::fs::remove_file(&without);
}

/// The vector table for `sizes`.
pub fn vectors(dir: &Path, sizes: &[u64]) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "Dimension {DIM}, random unit vectors, one per memory (the speed part's generated turns); queries: a random unit vector, alone (vector) or with a generated question (hybrid: the words' top 50 rescored with the smoothed cosine, `vector::fuse`), top 10, {} at 10^4 and fewer, 60 above, after 5 untimed; lexical = the same questions without the vector, on the same store. Build = appending in commits of {BATCH} (an exclusive store); a note = one durable `Store::note` on the built store (median of 30; the store opened shared, as the CLI opens it).\n", timed(10_000));
    let _ = writeln!(md, "| vectors | vector p50 ms | vector p95 ms | hybrid p50 ms | hybrid p95 ms | lexical p50 ms | lexical p95 ms | build ms / memory, with vectors | build ms / memory, without | vectors table bytes / memory | note with a vector ms | note without ms |\n|---|---|---|---|---|---|---|---|---|---|---|---|");
    for &n in sizes {
        size(dir, n, &mut md);
    }
    md
}
