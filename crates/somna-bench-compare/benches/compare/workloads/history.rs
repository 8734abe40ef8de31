//! The read side of a memory store, on fully summarized histories of 10^3, 10^5 and 10^6
//! memories: wake at every size (all sizes and engines in the same alternating rounds), recall
//! at the largest, then the page reads of somna's own wake and recall, and the bytes on disk
//! per memory.

use std::path::{Path, PathBuf};
use std::time::Instant;

use ::somna::{Options, RecallQuery, Store, WakeOptions};

use super::{disk_bytes, file_bytes, median_ns, medians_of, remove, same_answers, timed, Plan};
use crate::data::{self, RECALL_BYTES, RECALL_PATTERN, SCOPE, WAKE_LINES};
use crate::engines::redb_floor::{self, Counting, Floor, RECALL_FLOOR, RECALL_LAYERS};
use crate::engines::{self, Lacks, MemoryEngine, Pattern, FLATFILE, SOMNA};
use crate::report::Report;

/// One fully summarized history of `t` memories, on every engine, and redb's floor on a copy of
/// somna's file.
struct History {
    t: u64,
    w: &'static str,
    stem: PathBuf,
    engines: Vec<Box<dyn MemoryEngine>>,
    /// Per engine: why it has no wake (no summary tree), or `None`.
    lacks: Vec<Option<Lacks>>,
    floor: Floor,
}

/// Wake over fully summarized histories of every size (all measured in the same alternating
/// rounds, so that sizes and engines see the same machine), then recall and bytes on disk at the
/// largest size.
pub fn history(plan: &Plan, dir: &Path, rep: &mut Report) {
    let names = ["wake_1e3", "wake_1e5", "wake_1e6"];
    let mut hs: Vec<History> = Vec::new();
    for (k, &t) in plan.wake_sizes.iter().enumerate() {
        let w = names[k];
        let big = k == names.len() - 1;
        if plan.runs("history", w) || (big && plan.runs("history", "recall_1e6")) {
            hs.push(build(dir, t, w));
        }
    }
    if hs.is_empty() {
        return;
    }
    wake(plan, &hs, rep);
    if let Some(h) = hs.iter().find(|h| h.w == "wake_1e6") {
        if plan.runs("history", "recall_1e6") {
            recall(plan, h, rep);
        }
    }
    for h in hs {
        teardown(h, rep);
    }
}

/// Builds the history on every engine that keeps a summary tree, copies somna's file for the
/// floor, opens everything, and checks that every engine prints the same wake.
fn build(dir: &Path, t: u64, w: &'static str) -> History {
    println!("{w}: building fully summarized histories of {t} memories");
    let stem = dir.join(format!("h{t}"));
    let mut built = Vec::new();
    for e in &engines::ENGINES {
        if let Some(build) = e.build_history {
            let took = timed(|| build(&stem, t));
            built.push(format!("{:.1} s ({})", took.as_secs_f64(), e.name));
        }
    }
    println!("  built in {}", built.join(", "));
    // Before somna opens its file: an open store marks the file as needing recovery.
    let copy = engines::with_suffix(&stem, "-copy.redb");
    let floor = Floor::copy_of(&engines::somna::file(&stem, false), &copy, t);
    let engines = engines::open_memory(&engines::list(false), &stem);
    // Every engine must print the same text: same cover, same records.
    let mut answers = Vec::new();
    let mut lacks = Vec::new();
    for e in &engines {
        match e.wake() {
            Ok(text) => {
                answers.push((e.name(), text));
                lacks.push(None);
            }
            Err(why) => lacks.push(Some(why)),
        }
    }
    answers.push((redb_floor::NAME, floor.wake()));
    same_answers(&format!("wake at {t}"), &answers);
    println!(
        "  {} lines, identical text on every engine",
        answers[0].1.lines().count() - 2
    );
    History {
        t,
        w,
        stem,
        engines,
        lacks,
        floor,
    }
}

/// Every engine's wake and the floor's, at every size, in the same alternating rounds.
fn wake(plan: &Plan, hs: &[History], rep: &mut Report) {
    println!(
        "wake ({WAKE_LINES} lines): {} iterations per engine and size, in alternating rounds",
        plan.wake_iters
    );
    let mut fs: Vec<Box<dyn FnMut() + '_>> = Vec::new();
    for h in hs {
        for (e, lacks) in h.engines.iter().zip(&h.lacks) {
            if lacks.is_none() {
                fs.push(Box::new(move || {
                    std::hint::black_box(e.wake()).expect("wake");
                }));
            }
        }
        fs.push(Box::new(|| {
            std::hint::black_box(h.floor.wake());
        }));
    }
    let mut mm = medians_of(plan.wake_iters, &mut fs).into_iter();
    drop(fs);
    for h in hs {
        let (w, t) = (h.w, h.t);
        let mut measured = Vec::new();
        for (e, lacks) in h.engines.iter().zip(&h.lacks) {
            match lacks {
                None => measured.push((e.name(), mm.next().expect("a median"))),
                Some(why) => rep.not_measured(w, e.name(), why),
            }
        }
        let floor_ns = mm.next().expect("a median");
        for &(e, ns) in &measured {
            rep.latency(w, e, ns);
            rep.wake.push((t, e, ns));
        }
        rep.wake.push((t, redb_floor::NAME, floor_ns));
        rep.fact(&format!("{w} floor"), floor_ns);
        let of = |name: &str| {
            measured
                .iter()
                .find(|m| m.0 == name)
                .map_or(f64::NAN, |m| m.1)
        };
        rep.diag(format!(
            "{w}: redb floor (cover_all, then the cover's values read by key from a copy of somna's file, decoded, rendered; same rounds): {:.1} us = {:.2}x the flat file; somna's wake_text is {:.2}x the floor",
            floor_ns / 1e3,
            floor_ns / of(FLATFILE),
            of(SOMNA) / floor_ns
        ));
        // The cover alone, which every engine computes: the floor under any wake.
        let cns = median_ns(plan.wake_iters, || {
            std::hint::black_box(::somna::cover::cover_all(t, WAKE_LINES).ok());
        });
        let bns = median_ns(plan.wake_iters, || {
            std::hint::black_box(::somna::cover::reference_cover(t, WAKE_LINES));
        });
        rep.diag(format!(
            "{w}: computing the cover alone (cover_all, no I/O) takes {:.1} us (the 60-step bisection, reference_cover: {:.1} us)",
            cns / 1e3,
            bns / 1e3
        ));
    }
}

/// Recall of [`RECALL_PATTERN`] on every engine with a log to scan, checked equal, then timed in
/// the same rounds as redb's floor layer by layer.
fn recall(plan: &Plan, h: &History, rep: &mut Report) {
    let (w, t) = ("recall_1e6", h.t);
    println!("{w}: the regex {RECALL_PATTERN:?} over {t} memories (case-insensitive, newest that fit {RECALL_BYTES} bytes)");
    let p = Pattern::new(RECALL_PATTERN);
    let mut answers = Vec::new();
    let mut scanning: Vec<&dyn MemoryEngine> = Vec::new();
    let mut lacking = Vec::new();
    for e in &h.engines {
        match e.recall(&p) {
            Ok(a) => {
                answers.push((e.name(), a));
                scanning.push(e.as_ref());
            }
            Err(why) => lacking.push((e.name(), why)),
        }
    }
    same_answers("recall", &answers);
    let (total, lines) = &answers[0].1;
    println!(
        "  {total} matches, {} shown, identical on the {} engines",
        lines.len(),
        answers.len()
    );
    let mut fs: Vec<Box<dyn FnMut() + '_>> = Vec::new();
    for &e in &scanning {
        let p = &p;
        fs.push(Box::new(move || {
            std::hint::black_box(e.recall(p)).expect("recall");
        }));
    }
    for depth in 0..RECALL_LAYERS.len() {
        let (floor, re) = (&h.floor, &p.re);
        fs.push(Box::new(move || {
            std::hint::black_box(floor.recall_layer(depth, re));
        }));
    }
    let mm = medians_of(plan.recall_iters, &mut fs);
    drop(fs);
    let measured: Vec<(&'static str, f64)> = scanning
        .iter()
        .map(|e| e.name())
        .zip(mm.iter().copied())
        .collect();
    let of = |name: &str| {
        measured
            .iter()
            .find(|m| m.0 == name)
            .map_or(f64::NAN, |m| m.1)
    };
    let (ens, fns) = (of(SOMNA), of(FLATFILE));
    let mut prev = 0.0;
    for (k, name) in RECALL_LAYERS.iter().enumerate() {
        let ns = mm[measured.len() + k];
        rep.diag(format!(
            "{w}: redb floor, {name}: {:.0} ms ({:+.0} ms), measured in the same rounds (somna {:.0} ms, flat file {:.0} ms)",
            ns / 1e6,
            (ns - prev) / 1e6,
            ens / 1e6,
            fns / 1e6
        ));
        prev = ns;
        if k == RECALL_FLOOR {
            rep.fact(&format!("{w} floor"), ns);
        }
    }
    for &(e, ns) in &measured {
        rep.latency(w, e, ns);
    }
    for (e, why) in lacking {
        rep.not_measured(w, e, why);
    }
    date_cost(plan, t, ens, rep);
}

/// Where a recall's time goes: the per-record date formatting outside the scan itself.
fn date_cost(plan: &Plan, t: u64, somna_ns: f64, rep: &mut Report) {
    let dns = median_ns(plan.recall_iters, || {
        let mut n = 0u64;
        for i in (0..t).rev() {
            n += ::somna::text::date_of(data::observed(i)).len() as u64;
        }
        std::hint::black_box(n);
    });
    rep.diag(format!(
        "recall_1e6: formatting {t} dates with text::date_of alone takes {:.1} ms ({:.0}% of somna's recall)",
        dns / 1e6,
        dns / somna_ns * 100.0
    ));
}

/// Closes everything, measures somna's page reads and (at the largest size) the bytes on disk
/// per memory, and removes the files.
fn teardown(h: History, rep: &mut Report) {
    let History {
        t,
        w,
        stem,
        mut engines,
        lacks,
        floor,
    } = h;
    let big = w == "wake_1e6";
    // somna closes its store (page_reads opens the file again); SQLite checkpoints.
    for e in engines.iter_mut() {
        e.settle();
    }
    floor.remove();
    page_reads(&engines::somna::file(&stem, false), w, big, rep);
    if big {
        bytes_per_memory(t, &engines, &lacks, rep);
    }
    let files: Vec<PathBuf> = engines.iter().flat_map(|e| e.files()).collect();
    drop(engines);
    remove(&files);
}

fn bytes_per_memory(
    t: u64,
    engines: &[Box<dyn MemoryEngine>],
    lacks: &[Option<Lacks>],
    rep: &mut Report,
) {
    let w = "disk_bytes_per_memory";
    println!("{w}: bytes allocated on disk / memories, for the {t}-memory histories (memories + {} summaries)", data::all_blocks(t).len());
    let mut apparent = Vec::new();
    for (e, lacks) in engines.iter().zip(lacks) {
        match lacks {
            None => {
                rep.bytes(w, e.name(), disk_bytes(&e.files()) as f64 / t as f64);
                apparent.push(format!(
                    "{} {:.0}",
                    e.name(),
                    file_bytes(&e.files()) as f64 / t as f64
                ));
            }
            Some(why) => rep.not_measured(w, e.name(), why),
        }
    }
    rep.diag(format!(
        "{w}: apparent sizes: {} bytes/memory",
        apparent.join(", ")
    ));
}

/// The page reads somna's own wake and recall make (redb cache misses), through a counting
/// backend.
fn page_reads(epath: &Path, w: &str, big: bool, rep: &mut Report) {
    let (backend, count) = Counting::open(epath);
    let store = Store::with_backend(backend, "counted", Options::default()).expect("open");
    let opts = WakeOptions::default();
    store.wake_text(SCOPE, &opts).expect("wake");
    let a = count.snapshot();
    let n = 20;
    for _ in 0..n {
        store.wake_text(SCOPE, &opts).expect("wake");
    }
    let b = count.snapshot();
    rep.diag(format!(
        "{w}: somna wake, warm: {:.1} page reads from the file per wake (redb cache misses, 32 MiB cache)",
        (b[4] - a[4]) as f64 / n as f64
    ));
    if big {
        let q = RecallQuery::new(RECALL_PATTERN);
        store.recall(SCOPE, &q).expect("recall");
        let a = count.snapshot();
        let s = Instant::now();
        store.recall(SCOPE, &q).expect("recall");
        let el = s.elapsed();
        let b = count.snapshot();
        rep.diag(format!(
            "recall_1e6: somna recall reads {} pages from the file (the log does not fit the 32 MiB cache), {:.0} ms of {:.0} ms in those reads",
            b[4] - a[4],
            (b[6] - a[6]) as f64 / 1e6,
            el.as_secs_f64() * 1e3
        ));
    }
}
