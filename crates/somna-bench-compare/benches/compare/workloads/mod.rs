//! The workloads, each written once over the engines it is given, and what keeps the
//! comparison honest:
//!
//! - [`interleave`]: write workloads run in rounds, and in each round the engines take turns in
//!   a rotating order, so that a slow moment of the shared disk falls on every engine alike;
//! - [`medians`]: read workloads alternate the engines (and the history sizes) in the same
//!   rotating rounds, and report medians;
//! - [`same_answers`] and [`check_counts`]: every engine's answers are checked equal before
//!   anything is timed (and its counts after).

pub mod diagnostics;
pub mod history;
pub mod notes;
pub mod profile;
pub mod sessions;

use std::fmt::Debug;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use crate::engines::MemoryEngine;

/// Memories every write workload notes before timing starts.
pub const WARM: u64 = 20;
/// The write workloads run in rounds, the engines taking turns within each round (in a rotating
/// order), so that a slow moment of the shared disk is spread over every engine.
pub const ROUNDS: usize = 5;

/// The sizes of a run: full, or `--quick`; and the `--only` filter.
pub struct Plan {
    pub quick: bool,
    pub only: Option<Vec<String>>,
    pub durable_notes: usize,
    pub batch_total: usize,
    pub batch_size: usize,
    pub threads: usize,
    pub per_thread: usize,
    pub wake_sizes: [u64; 3],
    pub wake_iters: usize,
    pub recall_iters: usize,
    pub growth_sessions: usize,
    pub turns: usize,
    /// `session_long`: messages of 2 KB stored, then saves of one more each.
    pub long_messages: usize,
    pub long_saves: usize,
    pub stored_sessions: usize,
    pub stored_messages: usize,
    pub load_iters: usize,
    pub list_iters: usize,
}

impl Plan {
    pub fn new(quick: bool, only: Option<Vec<String>>) -> Plan {
        Plan {
            quick,
            only,
            durable_notes: if quick { 300 } else { 2000 },
            batch_total: if quick { 20_000 } else { 100_000 },
            batch_size: 1000,
            threads: 8,
            per_thread: if quick { 40 } else { 250 },
            wake_sizes: [1_000, 100_000, 1_000_000],
            wake_iters: if quick { 300 } else { 2000 },
            recall_iters: if quick { 3 } else { 7 },
            growth_sessions: if quick { 5 } else { 100 },
            turns: 200,
            long_messages: 2000,
            long_saves: if quick { 40 } else { 100 },
            stored_sessions: 10_000,
            stored_messages: 20,
            load_iters: if quick { 500 } else { 3000 },
            list_iters: if quick { 10 } else { 40 },
        }
    }

    /// Whether `--only` selects the workload `name` or its `group`.
    pub fn runs(&self, group: &str, name: &str) -> bool {
        match &self.only {
            None => true,
            Some(list) => list.iter().any(|o| o == group || o == name),
        }
    }
}

/// Runs `rounds` rounds; in round r every engine runs its chunk r (`run(engine, r)` returns its
/// time), the engines in rotating order. Returns the total time of each engine.
pub fn interleave<E: ?Sized>(
    rounds: usize,
    engines: &mut [Box<E>],
    mut run: impl FnMut(&mut E, usize) -> Duration,
) -> Vec<Duration> {
    let mut total = vec![Duration::ZERO; engines.len()];
    for r in 0..rounds {
        for k in 0..engines.len() {
            let e = (k + r) % engines.len();
            total[e] += run(&mut engines[e], r);
        }
    }
    total
}

/// Median nanoseconds of each function, measured in alternating rounds (rotating order) so that a
/// busy moment of the machine is spread over all of them.
pub fn medians(iters: usize, fs: &mut [&mut dyn FnMut()]) -> Vec<f64> {
    for f in fs.iter_mut() {
        for _ in 0..(iters / 10).clamp(2, 50) {
            f();
        }
    }
    let rounds = ROUNDS.min(iters);
    let per = iters.div_ceil(rounds);
    let mut samples: Vec<Vec<u64>> = vec![Vec::with_capacity(per * rounds); fs.len()];
    for r in 0..rounds {
        for k in 0..fs.len() {
            let e = (k + r) % fs.len();
            for _ in 0..per {
                let s = Instant::now();
                fs[e]();
                samples[e].push(s.elapsed().as_nanos() as u64);
            }
        }
    }
    samples
        .into_iter()
        .map(|mut v| {
            v.sort_unstable();
            v[v.len() / 2] as f64
        })
        .collect()
}

/// [`medians`] of boxed functions.
pub fn medians_of(iters: usize, fs: &mut [Box<dyn FnMut() + '_>]) -> Vec<f64> {
    let mut refs: Vec<&mut dyn FnMut()> = fs
        .iter_mut()
        .map(|f| f.as_mut() as &mut dyn FnMut())
        .collect();
    medians(iters, &mut refs)
}

/// Median nanoseconds of `f`, after a warm-up.
pub fn median_ns(iters: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..(iters / 10).clamp(2, 50) {
        f();
    }
    let mut v: Vec<u64> = (0..iters)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_nanos() as u64
        })
        .collect();
    v.sort_unstable();
    v[v.len() / 2] as f64
}

pub fn timed(f: impl FnOnce()) -> Duration {
    let s = Instant::now();
    f();
    s.elapsed()
}

/// Runs `per` operations on each of `threads` threads (`op(state, thread, k)`), all started
/// together; returns the wall time from the start to the last finish. `setup` runs before the
/// start.
pub fn concurrently<S: Send + 'static>(
    threads: usize,
    per: usize,
    setup: impl Fn(usize) -> S,
    op: impl Fn(&mut S, usize, usize) + Send + Sync + 'static,
) -> Duration {
    let barrier = Arc::new(Barrier::new(threads + 1));
    let op = Arc::new(op);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let mut state = setup(t);
            let barrier = Arc::clone(&barrier);
            let op = Arc::clone(&op);
            std::thread::spawn(move || {
                barrier.wait();
                for k in 0..per {
                    op(&mut state, t, k);
                }
            })
        })
        .collect();
    barrier.wait();
    let s = Instant::now();
    for h in handles {
        h.join().expect("thread");
    }
    s.elapsed()
}

/// The equal-answer check: every engine's answer equals the first engine's (somna's).
pub fn same_answers<T: PartialEq + Debug>(what: &str, answers: &[(&str, T)]) {
    let Some((first, expected)) = answers.first() else {
        return;
    };
    for (name, answer) in &answers[1..] {
        assert_eq!(expected, answer, "{first} and {name} differ: {what}");
    }
}

/// Every engine holds `expected` memories.
pub fn check_counts(engines: &[Box<dyn MemoryEngine>], expected: u64) {
    for e in engines {
        assert_eq!(e.count(), expected, "{} holds a wrong count", e.name());
    }
}

/// Bytes written by this process so far (`write_bytes` in `/proc/self/io`).
pub fn io_written() -> u64 {
    fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("write_bytes: ")
                    .and_then(|v| v.trim().parse().ok())
            })
        })
        .unwrap_or(0)
}

/// Bytes allocated on disk (st_blocks) by files or, recursively, directories.
pub fn disk_bytes(paths: &[impl AsRef<Path>]) -> u64 {
    paths.iter().map(|p| disk_bytes_of(p.as_ref())).sum()
}

fn disk_bytes_of(p: &Path) -> u64 {
    let Ok(m) = fs::symlink_metadata(p) else {
        return 0;
    };
    if m.is_dir() {
        fs::read_dir(p)
            .map(|rd| rd.flatten().map(|e| disk_bytes_of(&e.path())).sum())
            .unwrap_or(0)
    } else {
        m.blocks() * 512
    }
}

/// Apparent size (st_size) of files or, recursively, directories.
pub fn file_bytes(paths: &[impl AsRef<Path>]) -> u64 {
    paths.iter().map(|p| file_bytes_of(p.as_ref())).sum()
}

fn file_bytes_of(p: &Path) -> u64 {
    let Ok(m) = fs::symlink_metadata(p) else {
        return 0;
    };
    if m.is_dir() {
        fs::read_dir(p)
            .map(|rd| rd.flatten().map(|e| file_bytes_of(&e.path())).sum())
            .unwrap_or(0)
    } else {
        m.len()
    }
}

/// Removes the files and directories of a store.
pub fn remove(paths: &[impl AsRef<Path>]) {
    for p in paths {
        let p = p.as_ref();
        if p.is_dir() {
            let _ = fs::remove_dir_all(p);
        } else {
            let _ = fs::remove_file(p);
        }
    }
}
