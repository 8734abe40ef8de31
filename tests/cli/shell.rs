//! The CLI's shell conventions: `somna completions SHELL` prints a script for bash, zsh, fish,
//! elvish and powershell naming every verb, option and option value (the bash one loads into a
//! real bash); `somna man` renders with `man -l` and documents every verb; `somna --version`
//! names the store format and the optional parts; and long commands show progress on stderr
//! only when it is a terminal: run under a pseudo-terminal (util-linux `script`) each of them
//! prints exactly the same stdout as in a pipe, the terminal sees the progress, and a
//! non-terminal stderr sees nothing of it.

use std::path::Path;
use std::process::Command;

use crate::common::{run_raw, Env, Raw, BIN};

/// The verbs `somna --help` lists.
fn verbs(env: &Env) -> Vec<String> {
    let help = env.ok(&["--help"]);
    let commands = help
        .split("Commands:")
        .nth(1)
        .and_then(|s| s.split("Options:").next())
        .expect("a Commands section");
    commands
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|v| *v != "help")
        .map(str::to_string)
        .collect()
}

#[test]
fn completions_name_every_verb_option_and_value_in_every_shell() {
    let env = Env::new();
    let verbs = verbs(&env);
    assert!(verbs.len() > 25, "{verbs:?}");
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = env.ok(&["completions", shell]);
        for v in &verbs {
            assert!(script.contains(v.as_str()), "{shell}: no {v}");
        }
        // Options (`--kind`, or fish's `-l kind`), and the values they take where the shell's
        // generator completes values (clap_complete's elvish and powershell scripts do not).
        for word in ["scope", "kind", "status", "busy-timeout-ms"] {
            assert!(script.contains(word), "{shell}: no {word}");
        }
        if ["bash", "zsh", "fish"].contains(&shell) {
            for value in ["observation", "inference", "retracted"] {
                assert!(script.contains(value), "{shell}: no value {value}");
            }
        }
        // Values of positional arguments (access levels, shells): bash and zsh.
        if ["bash", "zsh"].contains(&shell) {
            for value in ["write", "powershell"] {
                assert!(script.contains(value), "{shell}: no value {value}");
            }
        }
    }
    // The bash script loads into a real bash and registers the completion.
    let script = env.ok(&["completions", "bash"]);
    let file = env.dir.path().join("somna.bash");
    std::fs::write(&file, script).expect("write");
    let mut c = Command::new("bash");
    c.arg("-c")
        .arg(format!("source {} && complete -p somna", file.display()));
    let r = run_raw(c, None);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(String::from_utf8_lossy(&r.out).contains("somna"), "{r:?}");
    // An unknown shell is a usage error.
    let mut c = env.cmd();
    c.args(["completions", "tcsh"]);
    assert_eq!(run_raw(c, None).code, 2);
}

#[test]
fn the_manual_renders_with_man_and_documents_every_verb() {
    let env = Env::new();
    let roff = env.ok(&["man"]);
    let file = env.dir.path().join("somna.1");
    std::fs::write(&file, &roff).expect("write");
    let mut c = Command::new("man");
    c.env("MANWIDTH", "100")
        .env("LC_ALL", "C")
        .args(["-l", "-P", "cat"])
        .arg(&file);
    let r = run_raw(c, None);
    assert_eq!(r.code, 0, "{r:?}");
    let page = String::from_utf8_lossy(&r.out);
    assert!(page.contains("somna(1)"), "{page}");
    for v in verbs(&env) {
        assert!(page.contains(&format!("somna-{v}(1)")), "no page for {v}");
    }
    for session_verb in ["save", "append", "load", "import-dir", "export-dir"] {
        assert!(page.contains(&format!("somna-session-{session_verb}(1)")));
    }
    assert!(page.contains("--busy-timeout-ms"), "options are documented");
}

#[test]
fn version_names_the_store_format_and_the_optional_parts() {
    let env = Env::new();
    let v = env.ok(&["--version"]);
    let lines: Vec<&str> = v.lines().collect();
    assert_eq!(lines[0], format!("somna {}", env!("CARGO_PKG_VERSION")));
    assert_eq!(
        lines[1],
        format!(
            "store format {} (one redb file, or one schema on a PostgreSQL server)",
            somna::format::STORE_FORMAT
        )
    );
    assert!(lines[2].starts_with("server backend (PostgreSQL): "), "{v}");
    assert!(lines[3].starts_with("MCP server: "), "{v}");
}

/// A store with memories, a pending merge and sessions, and the input files of every long
/// command, in `dir`.
fn long_work(dir: &Path) -> Vec<Vec<String>> {
    let env = Env {
        dir: tempfile::tempdir_in(dir).expect("tempdir"),
        db: dir.join("memory.redb"),
    };
    env.ok(&["init"]);
    let lines: String = (0..40)
        .map(|i| format!("2024-01-01 memory {i}\n"))
        .collect();
    std::fs::write(dir.join("lines.txt"), &lines).expect("lines");
    env.ok(&["import", &dir.join("lines.txt").to_string_lossy()]);
    let export = env.ok(&["export"]);
    std::fs::write(dir.join("export.jsonl"), export).expect("export");
    let answers: String = (0..20)
        .map(|i| format!("{}-{}\tpair {i}\n", 2 * i, 2 * i + 1))
        .collect();
    std::fs::write(dir.join("answers.tsv"), answers).expect("answers");
    std::fs::create_dir_all(dir.join("sessions")).expect("mkdir");
    for i in 0..5 {
        std::fs::write(
            dir.join("sessions").join(format!("chat-{i}.json")),
            format!(r#"[{{"role":"user","content":"hello {i}"}}]"#),
        )
        .expect("session");
    }
    crate::optmem_import::sample().write(dir, "om");
    let d = |p: &str| dir.join(p).to_string_lossy().into_owned();
    env.ok(&["--db", &d("fresh.redb"), "init"]);
    let c = |args: &[&str]| args.iter().map(|s| s.to_string()).collect();
    vec![
        c(&["--scope", "more", "import", &d("lines.txt")]),
        c(&["--scope", "om", "import", "--optmem", &d("om")]),
        c(&[
            "import",
            "--jsonl",
            &d("export.jsonl"),
            "--db",
            &d("fresh.redb"),
        ]),
        c(&["export"]),
        c(&["verify"]),
        c(&["nap", "--apply", &d("answers.tsv")]),
        c(&["session", "import-dir", &d("sessions")]),
        c(&["session", "export-dir", &d("out")]),
    ]
}

/// Runs `somna ARGS` in `dir` (store `memory.redb`) with stderr on a pseudo-terminal and
/// stdout in a file; returns (stdout, what the terminal saw).
fn on_a_terminal(dir: &Path, args: &[String]) -> (String, String) {
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let out = dir.join("stdout.txt");
    let inner = format!("{BIN} {} > '{}'", quoted.join(" "), out.display());
    let mut c = Command::new("script");
    c.env("SOMNA_DB", dir.join("memory.redb"))
        .env("TERM", "xterm")
        .env("HOME", dir)
        .args(["-qefc", &inner])
        .arg(dir.join("terminal.log"));
    let r = run_raw(c, None);
    assert_eq!(r.code, 0, "somna {args:?} on a terminal: {r:?}");
    let stdout = std::fs::read_to_string(&out).expect("stdout");
    let seen = std::fs::read(dir.join("terminal.log")).expect("log");
    (stdout, String::from_utf8_lossy(&seen).into_owned())
}

/// Copies the folder `from` (files and folders) to `to`.
fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("read dir") {
        let p = e.expect("entry").path();
        let target = to.join(p.file_name().expect("a name"));
        if p.is_dir() {
            copy_tree(&p, &target);
        } else {
            std::fs::copy(&p, &target).expect("copy");
        }
    }
}

#[test]
fn progress_shows_on_a_terminal_only_and_never_changes_stdout() {
    let made = tempfile::tempdir().expect("tempdir");
    let work = long_work(made.path());
    for args in work {
        // Two identical copies of the store and the inputs: one run in a pipe, one with
        // stderr on a terminal.
        let piped = tempfile::tempdir().expect("tempdir");
        let tty = tempfile::tempdir().expect("tempdir");
        copy_tree(made.path(), piped.path());
        copy_tree(made.path(), tty.path());
        let here = |dir: &Path| -> Vec<String> {
            let from = made.path().to_string_lossy().into_owned();
            let to = dir.to_string_lossy().into_owned();
            args.iter().map(|a| a.replace(&from, &to)).collect()
        };
        let mut c = Command::new(BIN);
        c.env("SOMNA_DB", piped.path().join("memory.redb"))
            .env("HOME", piped.path())
            .args(here(piped.path()));
        let r: Raw = run_raw(c, None);
        assert_eq!(r.code, 0, "somna {args:?}: {r:?}");
        assert!(
            r.err.is_empty(),
            "somna {args:?} wrote to a non-terminal stderr: {r:?}"
        );
        let (stdout, seen) = on_a_terminal(tty.path(), &here(tty.path()));
        let same = |s: &str, dir: &Path| s.replace(&dir.to_string_lossy().into_owned(), "DIR");
        assert_eq!(
            same(&stdout, tty.path()),
            same(&String::from_utf8_lossy(&r.out), piped.path()),
            "somna {args:?}: stdout differs on a terminal"
        );
        assert!(
            ["importing", "exporting", "verifying", "saving", "reading"]
                .iter()
                .any(|w| seen.contains(w)),
            "somna {args:?} showed no progress on a terminal: {seen:?}"
        );
    }
}
