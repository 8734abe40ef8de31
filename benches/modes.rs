//! What redb's concurrency modes cost somna: durable single-note commits with
//! `ConcurrencyMode::ExclusiveWriter` (one fsync per commit, one process) against `MultiWriter`
//! (one fsync per commit too since the vendored redb's one-phase multi-writer commit, two before
//! it; any number of processes), plus a flat-file append+fdatasync as
//! the floor of one durable append on this disk, and a `MultiWriter` commit against the size of
//! the store. docs/design.md and docs/performance.md cite these figures.
//!
//! `cargo bench --bench modes` (`-- --quick` for fewer commits).

use std::io::Write;
use std::time::Instant;

use somna::{NewMemory, Options, Store};

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let n = if quick { 300 } else { 2000 };
    let dir = tempfile::tempdir().expect("tempdir");
    println!("{:<28} {:>12} {:>12}", "mode", "us/commit", "commits/s");
    for (name, exclusive) in [("ExclusiveWriter", true), ("MultiWriter (default)", false)] {
        let path = dir.path().join(format!("{exclusive}.redb"));
        let store =
            Store::create_with(&path, Options::default().exclusive(exclusive)).expect("create");
        for i in 0..20 {
            store
                .note("default", NewMemory::new(format!("warm {i}")))
                .expect("note");
        }
        let us = durable_notes(&store, n);
        println!("{name:<28} {us:>12.1} {:>12.0}", 1e6 / us);
    }
    // Eight threads sharing one Store: group commit lets one fsync carry many notes.
    for (name, exclusive) in [
        ("8 threads, ExclusiveWriter", true),
        ("8 threads, MultiWriter", false),
    ] {
        let path = dir.path().join(format!("conc-{exclusive}.redb"));
        let store = std::sync::Arc::new(
            Store::create_with(&path, Options::default().exclusive(exclusive)).expect("create"),
        );
        let per = n / 8;
        let s = Instant::now();
        let hs: Vec<_> = (0..8)
            .map(|t| {
                let st = std::sync::Arc::clone(&store);
                std::thread::spawn(move || {
                    for i in 0..per {
                        st.note("default", NewMemory::new(format!("thread {t} note {i}")))
                            .expect("note");
                    }
                })
            })
            .collect();
        for h in hs {
            h.join().expect("join");
        }
        let us = s.elapsed().as_secs_f64() * 1e6 / (per * 8) as f64;
        println!("{name:<28} {us:>12.1} {:>12.0}", 1e6 / us);
    }
    let path = dir.path().join("flat.log");
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .expect("open");
    let rec = [b' '; 319];
    let s = Instant::now();
    for _ in 0..n {
        f.write_all(&rec).expect("write");
        f.write_all(b"\n").expect("write");
        f.sync_data().expect("fdatasync");
    }
    let us = s.elapsed().as_secs_f64() * 1e6 / n as f64;
    println!(
        "{:<28} {us:>12.1} {:>12.0}",
        "flat file append+fdatasync",
        1e6 / us
    );
    by_size(dir.path(), quick);
}

/// A `MultiWriter` commit against the size of the store it commits to: every such commit saves
/// redb's allocator state for the next writer in any process, and that state grows with the
/// file (docs/performance.md, "The allocator state: a commit's cost grows with the file").
fn by_size(dir: &std::path::Path, quick: bool) {
    let sizes: &[u64] = if quick {
        &[1_000, 100_000]
    } else {
        &[1_000, 100_000, 500_000]
    };
    let n = if quick { 200 } else { 1000 };
    println!(
        "\n{:<28} {:>12} {:>12}",
        "MultiWriter, store of", "us/commit", "file MB"
    );
    for &size in sizes {
        let path = dir.join(format!("size-{size}.redb"));
        let store = Store::create(&path).expect("create");
        let mut next = 0u64;
        while next < size {
            let batch: Vec<NewMemory> = (next..size.min(next + 10_000))
                .map(|i| NewMemory::new(format!("memory {i} of the history, about the build")))
                .collect();
            next += batch.len() as u64;
            store.append("default", batch, None).expect("append");
        }
        let us = durable_notes(&store, n);
        let mb = std::fs::metadata(&path).map(|m| m.len()).unwrap_or(0) as f64 / 1e6;
        println!("{:<28} {us:>12.1} {mb:>12.1}", format!("{size} memories"));
    }
}

/// Microseconds per durable note over `n` single-note commits to `store`.
fn durable_notes(store: &Store, n: usize) -> f64 {
    let s = Instant::now();
    for i in 0..n {
        store
            .note(
                "default",
                NewMemory::new(format!("durable note {i} about the build")),
            )
            .expect("note");
    }
    s.elapsed().as_secs_f64() * 1e6 / n as f64
}
