//! The library's layers hold: no source file names a folder of a higher layer, and the sibling
//! folders `memory`, `session` and `checkpoint` never name each other (docs/design.md, "Source layout"). Rust
//! itself rejects no import cycle between modules, so this scan is what keeps a new one from
//! creeping back. Ranks: `domain` and `error.rs` 0, `storage` 1, `trust` 2, `memory`,
//! `session` and `checkpoint` 3, `import` 4, the top-level `verify.rs` and `lib.rs` 5. The CLI (`src/bin/`)
//! uses only the public API and is not scanned.

use std::path::{Path, PathBuf};

/// The rank of a folder (or top-level module) as `crate::NAME` names it.
fn rank(name: &str) -> Option<u8> {
    Some(match name {
        "domain" | "error" => 0,
        "storage" => 1,
        "trust" => 2,
        "memory" | "session" | "checkpoint" => 3,
        "import" => 4,
        "verify" => 5,
        _ => return None,
    })
}

fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read src") {
        let p = e.expect("entry").path();
        if p.is_dir() && !p.ends_with("bin") {
            sources(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("main.rs") {
            out.push(p);
        }
    }
}

/// The folder of a file under `src/` (its first path component, without `.rs`).
fn home(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).expect("under src");
    let first = rel.components().next().expect("a component");
    let name = first.as_os_str().to_string_lossy();
    name.trim_end_matches(".rs").to_string()
}

#[test]
fn no_file_names_a_higher_layer_and_memory_and_session_stay_apart() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut violations = Vec::new();
    for f in &files {
        let from = home(&src, f);
        let Some(own) = rank(&from).or(if from == "lib" { Some(5) } else { None }) else {
            violations.push(format!("{}: not in a ranked folder", f.display()));
            continue;
        };
        let text = std::fs::read_to_string(f).expect("read");
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for (i, _) in code.match_indices("crate::") {
                let name: String = code[i + 7..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                let Some(r) = rank(&name) else { continue };
                let third = ["memory", "session", "checkpoint"];
                let siblings = from != name
                    && third.contains(&from.as_str())
                    && third.contains(&name.as_str());
                if r > own || siblings {
                    violations.push(format!("{}:{}: {from} names {name}", f.display(), n + 1));
                }
            }
        }
    }
    assert!(
        files.len() > 20,
        "the scan found only {} files",
        files.len()
    );
    assert!(
        violations.is_empty(),
        "layer violations:\n{}",
        violations.join("\n")
    );
}
