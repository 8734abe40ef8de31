//! What a run found: the rows of figures, the workloads an engine could not run, the notes on
//! scale and the diagnostics; and their outputs: the Markdown table with the targets,
//! `compare.json`, and (in `svg`) the wake plot.

pub mod machine;
pub mod svg;

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::engines::somna::SOMNA_X;
use crate::engines::sqlite::SQLITE_FTS;
use crate::engines::{self, FLATFILE, JSONFILE, SOMNA, SQLITE};

pub const OPS: &str = "ops_per_sec";
pub const NS: &str = "ns_per_op";
pub const BYTES: &str = "bytes";

/// The workloads, in the table's order.
const ORDER: [&str; 13] = [
    "note_durable",
    "note_batch",
    "note_concurrent",
    "wake_1e3",
    "wake_1e5",
    "wake_1e6",
    "recall_1e6",
    "session_growth",
    "session_long",
    "session_load",
    "session_list",
    "disk_bytes_per_memory",
    "disk_bytes_per_message",
];

struct Row {
    workload: String,
    engine: &'static str,
    metric: &'static str,
    value: f64,
}

#[derive(Default)]
pub struct Report {
    rows: Vec<Row>,
    /// (workload, engine, why) for figures that are not measured.
    na: Vec<(String, &'static str, String)>,
    /// Lines about the scale of a workload (quick mode, dataset sizes).
    notes: Vec<String>,
    /// Diagnostic lines: where somna's time goes.
    diag: Vec<String>,
    /// Derived figures the targets need (name -> value).
    facts: Vec<(String, f64)>,
    /// The wake plot's points: (memories, engine or floor, median ns).
    pub wake: Vec<(u64, &'static str, f64)>,
}

impl Report {
    pub fn put(&mut self, workload: &str, engine: &'static str, metric: &'static str, value: f64) {
        self.rows.push(Row {
            workload: workload.to_string(),
            engine,
            metric,
            value,
        });
    }

    /// Records a throughput: `ops` operations in `elapsed`.
    pub fn rate(&mut self, workload: &str, engine: &'static str, ops: usize, elapsed: Duration) {
        let s = elapsed.as_secs_f64();
        self.put(workload, engine, OPS, ops as f64 / s);
        self.put(workload, engine, NS, s * 1e9 / ops as f64);
        println!(
            "  {workload:<16} {engine:<9} {:>12.0} ops/s {:>12.1} us/op",
            ops as f64 / s,
            s * 1e6 / ops as f64
        );
    }

    /// Records a latency (median nanoseconds of one operation).
    pub fn latency(&mut self, workload: &str, engine: &'static str, ns: f64) {
        self.put(workload, engine, NS, ns);
        self.put(workload, engine, OPS, 1e9 / ns);
        println!(
            "  {workload:<16} {engine:<9} {:>12.0} ops/s {:>12.1} us/op (median)",
            1e9 / ns,
            ns / 1e3
        );
    }

    pub fn bytes(&mut self, workload: &str, engine: &'static str, b: f64) {
        self.put(workload, engine, BYTES, b);
        println!("  {workload:<16} {engine:<9} {b:>12.1} bytes");
    }

    pub fn not_measured(&mut self, workload: &str, engine: &'static str, why: &str) {
        self.na
            .push((workload.to_string(), engine, why.to_string()));
    }

    pub fn fact(&mut self, name: &str, v: f64) {
        self.facts.push((name.to_string(), v));
    }

    fn get_fact(&self, name: &str) -> Option<f64> {
        self.facts.iter().find(|f| f.0 == name).map(|f| f.1)
    }

    fn get(&self, workload: &str, engine: &str, metric: &str) -> Option<f64> {
        self.rows
            .iter()
            .find(|r| r.workload == workload && r.engine == engine && r.metric == metric)
            .map(|r| r.value)
    }

    pub fn note(&mut self, s: String) {
        println!("  note: {s}");
        self.notes.push(s);
    }

    pub fn diag(&mut self, s: String) {
        println!("  diag: {s}");
        self.diag.push(s);
    }
}

/// Where the outputs go: `target/bench` of the workspace (or of `CARGO_TARGET_DIR`).
pub fn bench_dir() -> PathBuf {
    // The workspace's target dir: the parent of the `tmp` dir cargo gives benchmarks.
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            Path::new(env!("CARGO_TARGET_TMPDIR"))
                .parent()
                .map(Path::to_path_buf)
        })
        .unwrap_or_else(|| Path::new(machine::ROOT).join("target"));
    let d = target.join("bench");
    fs::create_dir_all(&d).expect("mkdir target/bench");
    d
}

fn fmt_num(v: f64) -> String {
    if v >= 100.0 {
        let s = format!("{v:.0}");
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        out
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The table in Markdown: absolute figures and, per row, somna's advantage (the other engine's
/// time or bytes divided by somna's: above 1 means somna is faster or smaller).
pub fn table(rep: &Report) -> String {
    let mut out = String::new();
    out.push_str("| workload | engine | ops/s | µs/op | bytes | vs somna |\n");
    out.push_str("|---|---|---:|---:|---:|---:|\n");
    for w in ORDER {
        for e in engines::names() {
            let ops = rep.get(w, e, OPS);
            let ns = rep.get(w, e, NS);
            let b = rep.get(w, e, BYTES);
            if ops.is_none() && ns.is_none() && b.is_none() {
                if let Some((_, _, why)) = rep.na.iter().find(|x| x.0 == w && x.1 == e) {
                    let _ = writeln!(out, "| {w} | {e} | n/a | n/a | n/a | ({why}) |");
                }
                continue;
            }
            let ratio = if let (Some(ns), Some(base)) = (ns, rep.get(w, SOMNA, NS)) {
                format!("{:.2}x", ns / base)
            } else if let (Some(b), Some(base)) = (b, rep.get(w, SOMNA, BYTES)) {
                format!("{:.2}x", b / base)
            } else {
                String::new()
            };
            let ratio = if e == SOMNA { "1".to_string() } else { ratio };
            let _ = writeln!(
                out,
                "| {w} | {e} | {} | {} | {} | {ratio} |",
                ops.map(fmt_num).unwrap_or_default(),
                ns.map(|v| fmt_num(v / 1e3)).unwrap_or_default(),
                b.map(fmt_num).unwrap_or_default(),
            );
        }
    }
    out
}

/// A target of issue 25 (or of an earlier issue it kept) that compares two times: (target,
/// numerator, denominator, how the ratio reads, whether it is met, and the floor under somna's
/// side measured in the same run, if one is: the fact that holds it and what it is).
type RatioTarget = (
    &'static str,
    (&'static str, &'static str),
    (&'static str, &'static str),
    &'static str,
    fn(f64) -> bool,
    Option<(&'static str, &'static str)>,
);

/// SQLite's time over somna's, at least 1.0: issue 25's target for every single-process workload.
const fn vs_sqlite(
    name: &'static str,
    w: &'static str,
    floor: Option<(&'static str, &'static str)>,
) -> RatioTarget {
    (
        name,
        (w, SQLITE),
        (w, SOMNA),
        "(SQLite time / somna time)",
        |v| v >= 1.0,
        floor,
    )
}

/// The default mode's floor under every durable write (the diagnostics' counted store).
const COMMIT_FLOOR: (&str, &str) = ("commit floor", "redb, one value, one durable commit");
/// Recall's floor: redb's walk of the log, every record's CRC checked.
const RECALL_FLOOR: (&str, &str) = ("recall_1e6 floor", "redb's walk + CRC per record");

const RATIO_TARGETS: [RatioTarget; 14] = [
    vs_sqlite(
        "wake_1e3 at least as fast as SQLite",
        "wake_1e3",
        Some(("wake_1e3 floor", "redb, the same values read")),
    ),
    vs_sqlite(
        "wake_1e5 at least as fast as SQLite",
        "wake_1e5",
        Some(("wake_1e5 floor", "redb, the same values read")),
    ),
    vs_sqlite(
        "wake_1e6 at least as fast as SQLite",
        "wake_1e6",
        Some(("wake_1e6 floor", "redb, the same values read")),
    ),
    vs_sqlite(
        "note_durable, many-process default, at least as fast as SQLite",
        "note_durable",
        Some(COMMIT_FLOOR),
    ),
    (
        "note_durable, one process owns the file (somna-x), at least as fast as SQLite",
        ("note_durable", SQLITE),
        ("note_durable", SOMNA_X),
        "(SQLite time / somna-x time)",
        |v| v >= 1.0,
        Some(("append floor", "a 320-byte append + fdatasync")),
    ),
    (
        "note_batch at least as fast as SQLite with an FTS5 table written in the same transaction",
        ("note_batch", SQLITE_FTS),
        ("note_batch", SOMNA),
        "(SQLite with FTS5 time / somna time)",
        |v| v >= 1.0,
        Some((
            "note_batch floor",
            "redb, the batch's texts, one durable commit",
        )),
    ),
    vs_sqlite(
        "note_batch at least as fast as plain SQLite (no search index)",
        "note_batch",
        Some((
            "note_batch floor",
            "redb, the batch's texts, one durable commit",
        )),
    ),
    vs_sqlite(
        "session_load at least as fast as SQLite",
        "session_load",
        Some(("session_load floor", "redb, the same values read")),
    ),
    vs_sqlite(
        "session_list at least as fast as SQLite",
        "session_list",
        Some(("session_list floor", "redb, the same values read")),
    ),
    vs_sqlite(
        "session_growth at least as fast as SQLite",
        "session_growth",
        Some(COMMIT_FLOOR),
    ),
    (
        "recall_1e6 within 1.3x of the flat-file scan floor",
        ("recall_1e6", SOMNA),
        ("recall_1e6", FLATFILE),
        "(somna / flat file)",
        |v| v <= 1.3,
        Some(RECALL_FLOOR),
    ),
    vs_sqlite(
        "recall_1e6 at least as fast as SQLite",
        "recall_1e6",
        Some(RECALL_FLOOR),
    ),
    (
        "session_long (2,000 messages of 2 KB) at least 10x the JSON file store",
        ("session_long", JSONFILE),
        ("session_long", SOMNA),
        "(JSON time / somna time)",
        |v| v >= 10.0,
        Some(COMMIT_FLOOR),
    ),
    (
        "note_concurrent (8 writers) at least 5x SQLite",
        ("note_concurrent", SQLITE),
        ("note_concurrent", SOMNA),
        "(SQLite time / somna time)",
        |v| v >= 5.0,
        None,
    ),
];

/// The floor cell of a ratio target: the floor's time and the ratio somna would have at it
/// (the floor in place of somna's time).
fn floor_cell(rep: &Report, t: &RatioTarget) -> String {
    let (_, (wa, ea), (wb, eb), _, met, floor) = *t;
    let Some((label, f)) = floor.and_then(|(k, label)| rep.get_fact(k).map(|v| (label, v))) else {
        return "none measured".to_string();
    };
    let somna_side = |e: &str| e == SOMNA || e == SOMNA_X;
    let ratio = if somna_side(ea) {
        rep.get(wb, eb, NS).map(|b| f / b)
    } else {
        rep.get(wa, ea, NS).map(|a| a / f)
    };
    match ratio {
        Some(r) => format!(
            "{label}: {} µs, {r:.2}x ({})",
            fmt_num(f / 1e3),
            if met(r) {
                "met at the floor"
            } else {
                "missed at the floor too"
            }
        ),
        None => "not run".to_string(),
    }
}

/// The targets of the issue, each with its measured value and, for the ratios, redb's floor
/// measured in the same run (issue 25: "where a target is missed, ... the floor measured in the
/// same run").
pub fn targets(rep: &Report) -> String {
    let mut out = String::new();
    out.push_str("| target | measured | met | the floor in this run, and the ratio at it |\n");
    out.push_str("|---|---|---|---|\n");
    let mut row =
        |name: &str, value: Option<(f64, String)>, ok: &dyn Fn(f64) -> bool, floor: &str| {
            match value {
                Some((v, shown)) => {
                    let _ = writeln!(
                        out,
                        "| {name} | {shown} | {} | {floor} |",
                        if ok(v) { "yes" } else { "**no**" }
                    );
                }
                None => {
                    let _ = writeln!(out, "| {name} | not run | | |");
                }
            }
        };
    for t in &RATIO_TARGETS {
        let (name, (wa, ea), (wb, eb), label, met, _) = *t;
        let ratio = rep
            .get(wa, ea, NS)
            .zip(rep.get(wb, eb, NS))
            .map(|(a, b)| (a / b, format!("{:.2}x {label}", a / b)));
        row(name, ratio, &met, &floor_cell(rep, t));
    }
    let (early, late) = (rep.get_fact("somna early"), rep.get_fact("somna late"));
    row(
        "session_growth: bytes written per save proportional to the new messages (not to the history)",
        early.zip(late).map(|(e, l)| {
            (
                l / e,
                format!(
                    "{:.0} bytes/save over turns 1-10, {:.0} over turns 191-200 ({:.2}x) for one new message of 322 bytes",
                    e,
                    l,
                    l / e
                ),
            )
        }),
        &|v| v <= 1.5,
        "",
    );
    for (mode, key) in [
        ("ExclusiveWriter", "save cpu true"),
        ("MultiWriter", "save cpu false"),
    ] {
        row(
            &format!("session_growth: somna's CPU per save at most 150 µs ({mode}, diagnostics)"),
            rep.get_fact(key).map(|v| (v, format!("{v:.0} µs"))),
            &|v| v <= 150.0,
            "",
        );
    }
    let (short, long) = (
        rep.get_fact("somna long short"),
        rep.get_fact("somna long long"),
    );
    row(
        "session_long: bytes written per save flat in the history length",
        short.zip(long).map(|(s, l)| {
            (
                l / s,
                format!(
                    "{s:.0} bytes/save with 10 messages stored, {l:.0} with 2,000 ({:.2}x) for one new message of 2,048 bytes",
                    l / s
                ),
            )
        }),
        &|v| v <= 1.5,
        "",
    );
    row(
        "bytes on disk per memory at most 235 (issue 25: the format before the search index)",
        rep.get("disk_bytes_per_memory", SOMNA, BYTES)
            .map(|v| (v, format!("{v:.0} bytes"))),
        &|v| v <= 235.0,
        "",
    );
    out
}

/// `compare.json`: a list of `{"workload", "engine", "metric", "value"}` objects.
pub fn json(rep: &Report) -> String {
    let rows: Vec<serde_json::Value> = rep
        .rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "workload": r.workload,
                "engine": r.engine,
                "metric": r.metric,
                "value": r.value,
            })
        })
        .collect();
    serde_json::to_string_pretty(&rows).expect("json")
}

/// `compare.md`: the header lines (`head`), the table, the targets, the scale notes and the
/// diagnostics.
pub fn markdown(rep: &Report, head: &str) -> String {
    let mut md = String::from(head);
    md.push_str(&table(rep));
    md.push('\n');
    md.push_str(&targets(rep));
    if !rep.notes.is_empty() {
        md.push_str("\nScale:\n");
        for n in &rep.notes {
            let _ = writeln!(md, "- {n}");
        }
    }
    if !rep.diag.is_empty() {
        md.push_str("\nDiagnostics:\n");
        for d in &rep.diag {
            let _ = writeln!(md, "- {d}");
        }
    }
    md
}
