//! The README's tour runs as printed (issue 27, point 11): every line of its first shell block,
//! run one by one through bash as a newcomer would (with `somna` on `PATH` and the store in a
//! temp folder), succeeds, and none says that a summary cites nothing or that a block has no
//! summary. Only the lines that need what a test machine lacks are left out: the PostgreSQL
//! server of the last section and `man`.

use std::process::Command;

use crate::common::{run_raw, Env};

/// The lines of the README's tour: the shell block after `## A tour`.
fn tour() -> Vec<String> {
    let readme = include_str!("../../README.md");
    let (_, after) = readme.split_once("## A tour").expect("a tour section");
    let (_, block) = after.split_once("```sh\n").expect("a shell block");
    let (block, _) = block.split_once("```").expect("the block's end");
    block.lines().map(str::to_string).collect()
}

/// Whether the line needs a PostgreSQL server or `man`, or only sets the store.
fn left_out(line: &str) -> bool {
    ["postgresql://", "PGPASSWORD", "man -l", "export SOMNA_DB"]
        .iter()
        .any(|s| line.contains(s))
}

#[test]
fn the_readme_tour_runs_line_by_line() {
    let e = Env::new();
    std::fs::create_dir_all(
        e.dir
            .path()
            .join(".local/share/bash-completion/completions"),
    )
    .unwrap();
    let lines = tour();
    assert!(
        lines.iter().any(|l| l.contains("somna nap 0-1")),
        "{lines:?}"
    );
    let mut ran = 0;
    for line in lines {
        let code = line.split('#').next().unwrap_or("").trim();
        if code.is_empty() || left_out(&line) {
            continue;
        }
        let path = e
            .cmd()
            .get_envs()
            .find(|(k, _)| *k == "PATH")
            .and_then(|(_, v)| v.map(std::ffi::OsStr::to_os_string))
            .expect("PATH");
        let mut sh = Command::new("bash");
        sh.arg("-c")
            .arg(format!("set -o pipefail; {line}"))
            .current_dir(e.dir.path())
            .env("PATH", path)
            .env("HOME", e.dir.path())
            .env("SOMNA_DB", &e.db)
            .env_remove("SOMNA_SCOPE")
            .env_remove("SOMNA_PRINCIPAL");
        let r = run_raw(sh, None);
        let out = String::from_utf8_lossy(&r.out);
        assert_eq!(r.code, 0, "{line}: {r:?}");
        assert!(!out.contains("Flagged"), "{line}: {out}");
        assert!(!out.contains("has no summary"), "{line}: {out}");
        ran += 1;
    }
    assert!(ran > 20, "only {ran} lines ran");
}
