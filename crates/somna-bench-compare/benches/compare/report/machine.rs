//! The machine a run measured: cores, CPU, memory and date; the build (commit and compiler);
//! the file system the stores live on; and how busy its disk was (a durable-append probe).

use std::fs;
use std::path::Path;

use crate::engines::flatfile::FlatLog;
use crate::workloads::median_ns;

pub use crate::host::{disk_of, machine};

/// The repository root (this crate is `crates/somna-bench-compare`).
pub const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

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
        "somna {commit}{}, {rustc}",
        if dirty { " (src/ modified)" } else { "" }
    )
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
