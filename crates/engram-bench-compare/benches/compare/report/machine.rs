//! The machine a run measured: cores, CPU, memory and date; the build (commit and compiler);
//! the file system the stores live on; and how busy its disk was (a durable-append probe).

use std::fs;
use std::path::Path;

use crate::engines::flatfile::FlatLog;
use crate::workloads::median_ns;

/// The repository root (this crate is `crates/engram-bench-compare`).
pub const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// Cores, CPU model, memory and the current time.
pub fn machine() -> String {
    let mem = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map(|kb| format!("{:.1} GiB", kb as f64 / (1 << 20) as f64))
        .unwrap_or_else(|| "?".into());
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_else(|| "?".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    format!(
        "{cores} cores ({cpu}), {mem} memory, {}",
        engram::domain::text::rfc3339_of(engram::domain::text::now_us())
    )
}

/// The commit of the tree the benchmark was built from (`+` when it has changes) and the compiler.
pub fn build_info() -> String {
    let run = |cmd: &str, args: &[&str]| {
        std::process::Command::new(cmd)
            .args(args)
            .current_dir(ROOT)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = run("git", &["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "?".into());
    let dirty = run(
        "git",
        &["status", "--porcelain", "--untracked-files=no", "src"],
    )
    .is_some_and(|s| !s.is_empty());
    let rustc = run("rustc", &["--version"]).unwrap_or_else(|| "rustc ?".into());
    format!(
        "engram {commit}{}, {rustc}",
        if dirty { " (src/ modified)" } else { "" }
    )
}

/// The mount point, file system and device that hold `p`.
pub fn disk_of(p: &Path) -> String {
    let p = fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let mounts = fs::read_to_string("/proc/mounts").unwrap_or_default();
    let mut best: Option<(usize, String)> = None;
    for l in mounts.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 3 {
            continue;
        }
        if p.starts_with(f[1]) && best.as_ref().is_none_or(|b| f[1].len() > b.0) {
            best = Some((f[1].len(), format!("{} ({}) on {}", f[1], f[2], f[0])));
        }
    }
    best.map(|b| b.1).unwrap_or_else(|| "?".into())
}

/// The median latency of one 320-byte append + fdatasync on the benchmark's disk: the floor of a
/// durable write, measured at the start and at the end of a run to show how busy the disk was.
pub fn disk_probe(dir: &Path) -> f64 {
    let mut f = FlatLog::create(&dir.join("probe.optmem"));
    let ns = median_ns(100, || {
        f.append_durable(1);
    });
    let _ = fs::remove_dir_all(dir.join("probe.optmem"));
    ns / 1e3
}
