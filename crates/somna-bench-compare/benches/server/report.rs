//! The table of the server benchmark: one row per figure, somna beside the SQL baseline, the
//! ratio of their times per operation, the round trips each makes per operation, the target
//! where there is one, and the 1-minute load average when the workload started; written as
//! Markdown (`target/bench/server.md`) and JSON (`target/bench/server.json`).

use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};

/// How a figure reads.
#[derive(Clone, Copy, PartialEq)]
pub enum Unit {
    /// Operations per second (higher is better).
    Rate,
    /// Microseconds per operation (lower is better).
    Micros,
    /// A factor between two figures of the same engine (no ratio between the engines).
    Factor,
}

pub struct Row {
    pub workload: String,
    pub unit: Unit,
    pub somna: f64,
    pub sql: f64,
    /// Round trips per operation: somna, baseline.
    pub trips: Option<(f64, f64)>,
    /// The target and whether somna meets it.
    pub target: Option<(String, bool)>,
    pub load: f64,
}

impl Row {
    /// somna's time per operation over the baseline's (above 1: somna is slower).
    pub fn ratio(&self) -> f64 {
        match self.unit {
            Unit::Rate => self.sql / self.somna,
            Unit::Micros => self.somna / self.sql,
            Unit::Factor => f64::NAN,
        }
    }
}

#[derive(Default)]
pub struct Report {
    pub rows: Vec<Row>,
    pub notes: Vec<String>,
}

impl Report {
    pub fn row(&mut self, r: Row) {
        println!(
            "  {:<28} somna {:>10} {}  sql {:>10}  ({:.2}x the baseline's time){}",
            r.workload,
            fmt(r.somna),
            unit(r.unit),
            fmt(r.sql),
            r.ratio(),
            r.target
                .as_ref()
                .map(|(t, ok)| format!("  target {t}: {}", met(*ok)))
                .unwrap_or_default()
        );
        self.rows.push(r);
    }

    pub fn note(&mut self, s: String) {
        println!("  {s}");
        self.notes.push(s);
    }

    pub fn markdown(&self, head: &str) -> String {
        let mut md = String::from(head);
        md.push_str("| workload | unit | somna | SQL baseline | somna's time / baseline's | round trips per op (somna / baseline) | target | load |\n");
        md.push_str("|---|---|---:|---:|---:|---:|---|---:|\n");
        for r in &self.rows {
            let ratio = r.ratio();
            let _ = writeln!(
                md,
                "| {} | {} | {} | {} | {} | {} | {} | {:.2} |",
                r.workload,
                unit(r.unit),
                fmt(r.somna),
                fmt(r.sql),
                if ratio.is_nan() {
                    "-".to_string()
                } else {
                    format!("{ratio:.2}x")
                },
                r.trips
                    .map(|(e, s)| format!("{} / {}", fmt(e), fmt(s)))
                    .unwrap_or_else(|| "-".into()),
                r.target
                    .as_ref()
                    .map(|(t, ok)| format!("{t}: **{}**", met(*ok)))
                    .unwrap_or_else(|| "-".into()),
                r.load
            );
        }
        if !self.notes.is_empty() {
            md.push('\n');
            for n in &self.notes {
                let _ = writeln!(md, "- {n}");
            }
        }
        md
    }

    pub fn json(&self) -> String {
        let rows: Vec<serde_json::Value> = self
            .rows
            .iter()
            .map(|r| {
                serde_json::json!({
                    "workload": r.workload,
                    "unit": unit(r.unit),
                    "somna": r.somna,
                    "sql": r.sql,
                    "ratio": r.ratio(),
                    "trips": r.trips.map(|(e, s)| [e, s]),
                    "target": r.target.as_ref().map(|t| &t.0),
                    "met": r.target.as_ref().map(|t| t.1),
                    "load": r.load,
                })
            })
            .collect();
        serde_json::to_string_pretty(&rows).expect("json")
    }
}

fn met(ok: bool) -> &'static str {
    if ok {
        "met"
    } else {
        "not met"
    }
}

fn unit(u: Unit) -> &'static str {
    match u {
        Unit::Rate => "ops/s",
        Unit::Micros => "µs",
        Unit::Factor => "x",
    }
}

pub fn fmt(v: f64) -> String {
    let s = if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    };
    // Thousands separators on the integer part.
    let (int, frac) = s.split_once('.').map_or((s.as_str(), ""), |(a, b)| (a, b));
    let mut out = String::new();
    for (i, c) in int.chars().enumerate() {
        if i > 0 && (int.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    if !frac.is_empty() {
        out.push('.');
        out.push_str(frac);
    }
    out
}

/// The workspace's `target/bench`.
pub fn bench_dir() -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            Path::new(env!("CARGO_TARGET_TMPDIR"))
                .parent()
                .map(Path::to_path_buf)
        })
        .unwrap_or_else(|| PathBuf::from("target"));
    let d = target.join("bench");
    fs::create_dir_all(&d).expect("mkdir target/bench");
    d
}

/// Median µs of a 320-byte append + `fdatasync` to a temp file (100 of them): how busy the disk
/// is (the server's data directory shares it here).
pub fn disk_probe() -> f64 {
    use std::io::Write as _;
    let mut f = tempfile::tempfile().expect("temp file");
    let buf = [7u8; 320];
    let mut v: Vec<u64> = (0..100)
        .map(|_| {
            let s = std::time::Instant::now();
            f.write_all(&buf).expect("append");
            f.sync_data().expect("fdatasync");
            s.elapsed().as_nanos() as u64
        })
        .collect();
    v.sort_unstable();
    v[v.len() / 2] as f64 / 1e3
}
