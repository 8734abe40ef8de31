//! The write side of a memory store: durable single notes, durable batches, and 8 threads making
//! durable single notes at once.

use std::path::Path;
use std::time::Duration;

use super::{check_counts, concurrently, disk_bytes, interleave, timed, Plan, ROUNDS, WARM};
use crate::engines::sqlite::SQLITE_FTS;
use crate::engines::{self, redb_floor, MemoryEngine};
use crate::report::Report;

/// Memories `0..WARM`, each engine in turn, memory by memory.
fn warm(engines: &mut [Box<dyn MemoryEngine>]) {
    for i in 0..WARM {
        for e in engines.iter_mut() {
            e.note(i);
        }
    }
}

/// Reports each engine's rate; a variant goes to the diagnostics, as `{w}: {label}{how}: ...`.
fn rates(
    rep: &mut Report,
    w: &str,
    names: &[&'static str],
    totals: &[Duration],
    n: usize,
    how: &str,
) {
    for (&e, &t) in names.iter().zip(totals) {
        match engines::variant_label(e) {
            None => rep.rate(w, e, n, t),
            Some(label) => {
                // Not a row of the table, but in compare.json and the targets.
                rep.put(w, e, crate::report::NS, t.as_secs_f64() * 1e9 / n as f64);
                rep.diag(format!(
                    "{w}: {label}{how}: {:.0} ops/s, {:.1} us/op",
                    n as f64 / t.as_secs_f64(),
                    t.as_secs_f64() * 1e6 / n as f64
                ))
            }
        }
    }
}

fn names(engines: &[Box<dyn MemoryEngine>]) -> Vec<&'static str> {
    engines.iter().map(|e| e.name()).collect()
}

/// Each memory its own durable commit, `WARM` first.
pub fn note_durable(plan: &Plan, dir: &Path, rep: &mut Report) {
    let w = "note_durable";
    let n = plan.durable_notes as u64;
    let chunk = n / ROUNDS as u64;
    println!("{w}: {n} memories, each its own durable commit");
    if plan.quick {
        rep.note(format!(
            "{w}: quick mode, {n} commits per engine (full: 2000)"
        ));
    }
    // somna-x, the diagnostic variant: Options::exclusive(true) (one process owns the file).
    let mut engines = engines::open_memory(&engines::list(true), &dir.join("nd"));
    warm(&mut engines);
    let ids = |r: usize| WARM + r as u64 * chunk..WARM + (r as u64 + 1) * chunk;
    let totals = interleave(ROUNDS, &mut engines, |e, r| {
        timed(|| {
            for i in ids(r) {
                e.note(i);
            }
        })
    });
    check_counts(&engines, WARM + chunk * ROUNDS as u64);
    let n = (chunk * ROUNDS as u64) as usize;
    rates(rep, w, &names(&engines), &totals, n, "");
}

/// Durable batches of `batch_size` memories; then the bytes each engine allocated per memory.
pub fn note_batch(plan: &Plan, dir: &Path, rep: &mut Report) {
    let w = "note_batch";
    let (total, size) = (plan.batch_total as u64, plan.batch_size as u64);
    let per_round = total / ROUNDS as u64;
    println!("{w}: {total} memories in durable batches of {size}");
    if plan.quick {
        rep.note(format!(
            "{w}: quick mode, {total} memories per engine (full: 100,000)"
        ));
    }
    // SQLite with an FTS5 table next to SQLite: a search user's SQLite, which indexes each
    // memory in its transaction as somna does.
    let mut entries = engines::list(false);
    let at = entries
        .iter()
        .position(|e| e.name == engines::SQLITE)
        .map_or(0, |i| i + 1);
    entries.splice(at..at, engines::SEARCHABLE.iter());
    let mut engines = engines::open_memory(&entries, &dir.join("nb"));
    // redb's floor: the same batches' texts into one table, timed right after somna's turn.
    let (floor, _) = redb_floor::open_counted(&dir.join("nb-floor.redb"), false);
    let mut floor_time = Duration::ZERO;
    // The batches of round r.
    let batches = move |r: usize| {
        let lo = r as u64 * per_round;
        (0..per_round / size).map(move |k| lo + k * size..lo + (k + 1) * size)
    };
    let totals = interleave(ROUNDS, &mut engines, |e, r| {
        let t = timed(|| {
            for b in batches(r) {
                e.note_batch(b);
            }
        });
        if e.name() == engines::SOMNA {
            floor_time += timed(|| {
                for b in batches(r) {
                    redb_floor::insert_batch(&floor, b);
                }
            });
        }
        t
    });
    let done = per_round * ROUNDS as u64;
    check_counts(&engines, done);
    rates(rep, w, &names(&engines), &totals, done as usize, "");
    let floor_ns = floor_time.as_secs_f64() * 1e9 / done as f64;
    rep.fact(&format!("{w} floor"), floor_ns);
    rep.diag(format!(
        "{w}: redb floor (each batch's texts into one table, one durable commit; same rounds): {:.2} us/memory",
        floor_ns / 1e3
    ));
    let per_memory = bytes_after(engines, done);
    let of = |name: &str| per_memory.iter().find(|b| b.0 == name).map_or(0.0, |b| b.1);
    rep.diag(format!(
        "{w}: after {done} appended memories (no summaries), bytes allocated per memory: somna {:.0} (its search index included), sqlite {:.0}, sqlite with FTS5 {:.0}, flat file {:.0} (the JSON list: {:.0})",
        of(engines::SOMNA),
        of(engines::SQLITE),
        of(SQLITE_FTS),
        of(engines::FLATFILE),
        of(engines::JSONFILE),
    ));
}

/// Settles and closes the engines, then measures the bytes each allocated on disk per item.
fn bytes_after(mut engines: Vec<Box<dyn MemoryEngine>>, items: u64) -> Vec<(&'static str, f64)> {
    let mut files = Vec::new();
    for e in engines.iter_mut() {
        e.settle();
        files.push((e.name(), e.files()));
    }
    drop(engines);
    files
        .into_iter()
        .map(|(name, f)| (name, disk_bytes(&f) as f64 / items as f64))
        .collect()
}

/// `threads` threads, each making `per_thread` durable single notes, all started together.
pub fn note_concurrent(plan: &Plan, dir: &Path, rep: &mut Report) {
    let w = "note_concurrent";
    let (threads, per) = (plan.threads, plan.per_thread);
    let per_round = per / ROUNDS;
    let n = threads * per_round * ROUNDS;
    println!("{w}: {threads} threads x {per} durable single memories");
    if plan.quick {
        rep.note(format!(
            "{w}: quick mode, {per} notes per thread (full: 250)"
        ));
    }
    // Ids: round r, thread t, k-th note.
    let id = move |r: usize, t: usize, k: usize| {
        (r * threads * per_round + t * per_round + k) as u64 + WARM
    };
    let mut engines = engines::open_memory(&engines::list(true), &dir.join("nc"));
    warm(&mut engines);
    let totals = interleave(ROUNDS, &mut engines, |e, r| {
        concurrently(
            threads,
            per_round,
            |_| e.writer(),
            move |write, t, k| write(id(r, t, k)),
        )
    });
    check_counts(&engines, WARM + n as u64);
    rates(rep, w, &names(&engines), &totals, n, "");
}
