//! Side-by-side benchmark: somna against the stores it is swapped in for, with identical data,
//! in one run on one machine, so that every figure is read as a ratio.
//!
//! - `engines/`: the engines, one file each, behind `MemoryEngine` and `SessionEngine`:
//!   `somna`, `sqlite`, `jsonfile`, `flatfile`; and `redb_floor`, redb used directly under
//!   somna (diagnostics only).
//! - `workloads/`: one function per workload, written once over the engines. Every write
//!   workload runs in rounds in which the engines take turns (rotating order), and every read
//!   workload alternates the engines (and the history sizes) in the same way, so that a busy
//!   moment of the shared machine or disk falls on all of them alike. Each engine's answers are
//!   checked equal (same wake text, same recall matches, same sessions) before anything is timed.
//!   The diagnostics (text only) measure redb's own floor under somna on the same data.
//! - `report/`: the table, the targets, `compare.json`, the wake plot and the machine.
//!
//! `cargo bench -p somna-bench-compare --bench compare` runs everything (about 2 minutes on 2
//! cores, longer when other processes keep the disk busy); `-- --quick` uses fewer notes and
//! sessions (it says which). `-- --only note_durable,history` runs a subset (workload names, or
//! the groups `history` (wake, recall, bytes per memory), `sessions` (load, list, bytes per
//! message) and `diagnostics`); `-- --only profile:note|note-mw|batch|session|wake|wake3|wake6|recall|
//! load|note-at` runs one somna workload for `valgrind --tool=callgrind --toggle-collect='*measured_part*'`.
//! The table goes to stdout and `target/bench/compare.md`, the figures to
//! `target/bench/compare.json`, the wake plot to `target/bench/wake_latency.svg`.
//! `SOMNA_BENCH_DIR` chooses where the stores are built (default: a temp dir in /tmp, which must
//! be a real disk for the durable figures to mean anything).

mod data;
mod engines;
// `load` is for the server bench, which prints the load average per workload.
#[allow(dead_code)]
#[path = "../shared/host.rs"]
mod host;
mod report;
mod workloads;

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

use report::machine::{build_info, disk_of, disk_probe, machine};
use report::Report;
use workloads::{diagnostics, history, notes, profile, sessions, Plan};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.split(',').map(str::to_string).collect());
    let plan = Plan::new(quick, only);
    let base = std::env::var_os("SOMNA_BENCH_DIR").map(PathBuf::from);
    let tmp = match &base {
        Some(b) => {
            fs::create_dir_all(b).expect("mkdir");
            tempfile::tempdir_in(b)
        }
        None => tempfile::tempdir(),
    }
    .expect("tempdir");
    let dir = tmp.path();
    let started = Instant::now();
    println!(
        "somna compare ({} run) on {}; stores in {} ({})",
        if quick { "quick" } else { "full" },
        machine(),
        dir.display(),
        disk_of(dir)
    );
    let probe_start = disk_probe(dir);
    println!("disk probe: append + fdatasync takes {probe_start:.0} us (median of 100)");
    if let Some(p) = plan
        .only
        .iter()
        .flatten()
        .find_map(|o| o.strip_prefix("profile:"))
    {
        profile::profile(dir, p);
        return;
    }
    let mut rep = Report::default();
    run(&plan, dir, &mut rep);
    let probe_end = disk_probe(dir);
    write(&rep, &plan, dir, started, (probe_start, probe_end));
}

/// Every workload `--only` selects, in this order.
fn run(plan: &Plan, dir: &Path, rep: &mut Report) {
    if plan.runs("note_durable", "note_durable") {
        notes::note_durable(plan, dir, rep);
    }
    if plan.runs("note_batch", "note_batch") {
        notes::note_batch(plan, dir, rep);
    }
    if plan.runs("note_concurrent", "note_concurrent") {
        notes::note_concurrent(plan, dir, rep);
    }
    history::history(plan, dir, rep);
    if plan.runs("session_growth", "session_growth") {
        sessions::session_growth(plan, dir, rep);
    }
    if plan.runs("session_long", "session_long") {
        sessions::session_long(plan, dir, rep);
    }
    if plan.runs("sessions", "session_load") || plan.runs("sessions", "session_list") {
        sessions::sessions(plan, dir, rep);
    }
    if plan.runs("diagnostics", "diagnostics") {
        diagnostics::diagnostics(plan, dir, rep);
    }
}

/// Writes `compare.json`, `compare.md` and (when wake ran) `wake_latency.svg`, and prints the
/// Markdown.
fn write(rep: &Report, plan: &Plan, dir: &Path, started: Instant, probe: (f64, f64)) {
    let out = report::bench_dir();
    if !rep.wake.is_empty() {
        let svg = out.join("wake_latency.svg");
        fs::write(&svg, report::svg::wake_svg(&rep.wake, plan.quick)).expect("write svg");
        println!("  plot: {}", svg.display());
    }
    fs::write(out.join("compare.json"), report::json(rep)).expect("write json");
    let mut head = String::new();
    let _ = writeln!(
        head,
        "{} run, {:.0} s, on {}; {}; stores on {}\n",
        if plan.quick { "Quick" } else { "Full" },
        started.elapsed().as_secs_f64(),
        machine(),
        build_info(),
        disk_of(dir)
    );
    let (probe_start, probe_end) = probe;
    let _ = writeln!(
        head,
        "Disk probe (one 320-byte append + fdatasync, median of 100): {probe_start:.0} µs at the start, {probe_end:.0} µs at the end{}.\n",
        if probe_start.max(probe_end) > 300.0 {
            " — the disk was busy (other processes), durable figures are inflated"
        } else {
            ""
        }
    );
    let md = report::markdown(rep, &head);
    fs::write(out.join("compare.md"), &md).expect("write md");
    println!("\n{md}");
    println!(
        "wrote {} and {}",
        out.join("compare.json").display(),
        out.join("compare.md").display()
    );
}
