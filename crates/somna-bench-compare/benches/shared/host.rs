//! The host a benchmark ran on: cores, CPU, memory and date; the file system under a path; the
//! load average. Shared by the `compare` and `server` benches (each includes this file).

use std::fs;
use std::path::Path;

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
        somna::text::rfc3339_of(somna::text::now_us())
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

/// The 1-minute load average.
pub fn load() -> f64 {
    fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().and_then(|v| v.parse().ok()))
        .unwrap_or(f64::NAN)
}
