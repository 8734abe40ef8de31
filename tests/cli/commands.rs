//! Every `somna` command, run as the real binary on a temp store, does what the OptMem
//! reference and the CLI promise: `init` is idempotent and private, `note`/`nap`/`forget`/
//! `import`/`config` change exactly what they say (and nothing when they fail), `wake` pages
//! within its line and byte budgets, `recall` prints the reference's count lines, an export
//! imported into a fresh store wakes byte-for-byte the same, every command on a missing store
//! fails without creating a file, global options work on either side of the verb, and each
//! failure kind has its documented exit code (`Error::exit_code`).

use std::path::Path;
use std::process::Command;

use crate::common::Env;

/// What one run of the binary produced.
#[derive(Debug)]
struct Run {
    code: i32,
    out: String,
    err: String,
}

/// What these tests run besides [`Env`]'s shared helpers: runs with text output.
trait CommandsEnv {
    fn run_with(&self, c: Command, input: Option<&[u8]>) -> Run;
    fn run(&self, args: &[&str]) -> Run;
    fn run_stdin(&self, args: &[&str], input: &[u8]) -> Run;
    fn fail(&self, args: &[&str], code: i32) -> String;
    fn import_lines(&self, lines: &[String]);
    fn summarize_all(&self);
}

impl CommandsEnv for Env {
    fn run_with(&self, c: Command, input: Option<&[u8]>) -> Run {
        let r = crate::common::run_raw(c, input);
        Run {
            code: r.code,
            out: String::from_utf8(r.out).expect("stdout is UTF-8"),
            err: String::from_utf8(r.err).expect("stderr is UTF-8"),
        }
    }

    fn run(&self, args: &[&str]) -> Run {
        let mut c = self.cmd();
        c.args(args);
        self.run_with(c, None)
    }

    fn run_stdin(&self, args: &[&str], input: &[u8]) -> Run {
        let mut c = self.cmd();
        c.args(args);
        self.run_with(c, Some(input))
    }

    fn fail(&self, args: &[&str], code: i32) -> String {
        let r = self.run(args);
        assert_eq!(r.code, code, "somna {args:?}: unexpected exit: {r:?}");
        assert!(
            r.out.is_empty() || code == 5,
            "somna {args:?} printed {r:?}"
        );
        assert!(
            r.err.starts_with("somna: ") || r.err.starts_with("error:"),
            "{r:?}"
        );
        r.err
    }

    fn import_lines(&self, lines: &[String]) {
        let f = self.file("import.txt", (lines.join("\n") + "\n").as_bytes());
        self.ok(&["import", &f]);
    }

    /// Answers every pending merge with `sum LO-HI` in one `nap --apply`.
    fn summarize_all(&self) {
        let pending = self.lines(&["pending"]);
        assert!(!pending.is_empty());
        let answers: String = pending.iter().map(|b| format!("{b}\tsum {b}\n")).collect();
        let f = self.file("answers.tsv", answers.as_bytes());
        let out = self.ok(&["nap", "--apply", &f]);
        assert!(out.starts_with(&format!("Saved {} summaries", pending.len())));
        assert!(self.lines(&["pending"]).is_empty());
    }
}

fn saved_id(out: &str) -> u64 {
    let first = out.lines().next().expect("a line");
    first
        .strip_prefix("Saved as #")
        .and_then(|s| s.strip_suffix('.'))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("not a `Saved as #N.` line: {first:?}"))
}

/// `n` dated lines `2024-MM-DD memory NNN[ xxx...]`, ten a day from 2024-01-01 (28-day
/// months), with `pad` extra bytes of text when `pad > 0`.
fn dated(n: usize, pad: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let d = i / 10;
            let mut l = format!("2024-{:02}-{:02} memory {i:03}", 1 + d / 28, 1 + d % 28);
            if pad > 0 {
                l.push(' ');
                l.push_str(&"x".repeat(pad));
            }
            l
        })
        .collect()
}

/// The header of a wake part: (k, n, T).
fn header(part: &str) -> (usize, usize, u64) {
    let h = part.lines().next().expect("header");
    let rest = h
        .strip_prefix("Your memory, part ")
        .unwrap_or_else(|| panic!("bad header {h:?}"));
    let (k, rest) = rest.split_once(" of ").expect("of");
    let (n, rest) = rest.split_once(", oldest first (").expect("oldest first");
    let t = rest
        .strip_suffix(" memories).")
        .or_else(|| rest.strip_suffix(" memory)."))
        .expect("memories).");
    (
        k.parse().expect("k"),
        n.parse().expect("n"),
        t.parse().expect("T"),
    )
}

/// The memory lines of a wake part (between its header and its footer).
fn body(part: &str) -> Vec<String> {
    let lines: Vec<&str> = part.lines().collect();
    let end = lines
        .iter()
        .position(|l| l.starts_with("Not awake yet. Run: ") || *l == "You are awake.")
        .expect("a footer");
    lines[1..end].iter().map(|s| s.to_string()).collect()
}

/// Runs `wake ARGS`, then every `Not awake yet. Run: somna --db PATH ...` it prints, and returns all the
/// parts. Checks each part's frame and its size (at most 500 lines and 20,000 bytes).
fn wake_chain(env: &Env, args: &[&str]) -> Vec<String> {
    let mut parts = Vec::new();
    let mut next: Vec<String> = std::iter::once("wake".to_string())
        .chain(args.iter().map(|s| s.to_string()))
        .collect();
    loop {
        let argv: Vec<&str> = next.iter().map(String::as_str).collect();
        let part = env.ok(&argv);
        let (k, n, _) = header(&part);
        assert_eq!(k, parts.len() + 1, "{part}");
        assert!(part.lines().count() <= 500, "part {k} has too many lines");
        assert!(part.len() <= 20_000, "part {k} has {} bytes", part.len());
        let footer = part
            .lines()
            .find(|l| l.starts_with("Not awake yet. Run: ") || *l == "You are awake.")
            .expect("footer")
            .to_string();
        parts.push(part);
        if footer == "You are awake." {
            assert_eq!(k, n);
            return parts;
        }
        assert!(k < n);
        let cmd = footer
            .strip_prefix(&format!("Not awake yet. Run: {} ", env.prefix()))
            .expect("Run: somna --db PATH");
        next = cmd.split_whitespace().map(str::to_string).collect();
        assert!(parts.len() < 100, "wake never ends");
    }
}

/// Parses a body line into the block it shows: `#a-b ...` or `#id ...`.
fn line_block(l: &str) -> (u64, u64) {
    let tok = l
        .strip_prefix('#')
        .and_then(|s| s.split(' ').next())
        .unwrap_or_else(|| panic!("not a memory line {l:?}"));
    match tok.split_once('-') {
        Some((a, b)) => (a.parse().expect("lo"), b.parse::<u64>().expect("hi") + 1),
        None => {
            let id: u64 = tok.parse().expect("id");
            (id, id + 1)
        }
    }
}

/// Checks that body lines tile `[omitted, t)` with aligned blocks, sizes never growing.
fn assert_tiles(lines: &[String], t: u64) {
    let mut lines = lines;
    let mut lo = 0;
    if let Some(first) = lines.first().filter(|l| l.starts_with('(')) {
        let n = first
            .strip_prefix('(')
            .and_then(|s| s.split(' ').next())
            .and_then(|s| s.parse::<u64>().ok())
            .expect("left-out count");
        assert!(
            first.contains("older memories") && first.contains("left out"),
            "{first}"
        );
        lo = n;
        lines = &lines[1..];
    }
    let mut last_size = u64::MAX;
    for l in lines {
        let (a, b) = line_block(l);
        let size = b - a;
        assert_eq!(a, lo, "gap or overlap at {l:?}");
        assert!(size.is_power_of_two() && a % size == 0, "unaligned {l:?}");
        assert!(size <= last_size, "block size grows at {l:?}");
        last_size = size;
        lo = b;
    }
    assert_eq!(lo, t, "the cover does not reach T");
}

#[test]
fn init_is_idempotent_and_the_file_is_private() {
    let e = Env::new();
    let out = e.ok(&["init"]);
    assert!(out.starts_with("Created somna store at "), "{out}");
    assert!(out.contains(&format!("`{} wake`", e.prefix())), "{out}");
    assert!(out.contains("Subagents must not write memory"), "{out}");
    #[cfg(unix)]
    if !e.on_server() {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&e.db)
            .expect("store")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "store mode {mode:o}");
    }
    e.ok(&["note", "kept across init"]);
    let again = e.ok(&["init"]);
    assert!(
        again.starts_with("somna store already exists at "),
        "{again}"
    );
    let r = e.ok(&["recall", "kept"]);
    assert!(r.starts_with("#0 "), "{r}");
    assert!(r.ends_with(" kept across init\n1 match.\n"), "{r}");
}

#[test]
fn init_creates_private_parent_directories_and_names_the_db_it_was_given() {
    let e = Env::new();
    let nested = e.dir.path().join("a").join("b").join("m.redb");
    let mut c = e.cmd();
    c.env_remove("SOMNA_DB")
        .arg("--db")
        .arg(&nested)
        .arg("init");
    let r = e.run_with(c, None);
    assert_eq!(r.code, 0, "{r:?}");
    // The instructions name the store given on the command line.
    assert!(
        r.out
            .contains(&format!("`somna --db {} wake`", nested.display())),
        "{}",
        r.out
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let m = |p: &Path| std::fs::metadata(p).expect("exists").permissions().mode() & 0o777;
        assert_eq!(m(&nested), 0o600);
        assert_eq!(m(nested.parent().expect("parent")), 0o700);
    }
}

#[test]
fn note_assigns_ids_in_order_and_reads_stdin() {
    let e = Env::init();
    assert_eq!(
        saved_id(&e.ok(&["note", "the user prefers small commits"])),
        0
    );
    let r = e.run_stdin(
        &["note", "-"],
        b"deploys go through the 'staging' branch; $HOME `x`\n",
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(saved_id(&r.out), 1);
    // The second note completes block 0-1: the merge prompt follows, ending with the command.
    assert!(r.out.contains("Merge 0-1: "), "{}", r.out);
    assert!(
        r.out
            .ends_with(&format!("Run: {} nap 0-1 \"<your line>\"\n", e.prefix())),
        "{}",
        r.out
    );
    let lines = e.lines(&["recall", "."]);
    assert_eq!(lines.len(), 3);
    assert!(lines[0].starts_with("#0 ") && lines[0].ends_with(" the user prefers small commits"));
    assert!(
        lines[1].ends_with(" deploys go through the 'staging' branch; $HOME `x`"),
        "{lines:?}"
    );
    assert_eq!(lines[2], "2 matches.");
}

#[test]
fn note_with_the_same_key_is_saved_once() {
    let e = Env::init();
    assert_eq!(saved_id(&e.ok(&["note", "--key", "k1", "once only"])), 0);
    assert_eq!(saved_id(&e.ok(&["note", "--key", "k1", "once only"])), 0);
    assert_eq!(saved_id(&e.ok(&["note", "another"])), 1);
    // The same key with other text is a conflict (exit 1) and writes nothing.
    let before = e.export();
    e.fail(&["note", "--key", "k1", "different"], 1);
    assert_eq!(e.export(), before);
}

#[test]
fn pending_lists_blocks_smallest_first_then_oldest() {
    let e = Env::init();
    e.import_lines(&dated(8, 0));
    assert_eq!(
        e.lines(&["pending"]),
        ["0-1", "2-3", "4-5", "6-7", "0-3", "4-7", "0-7"]
    );
    assert_eq!(e.lines(&["pending", "--limit", "2"]), ["0-1", "2-3"]);
    let j: serde_json::Value =
        serde_json::from_str(&e.ok(&["pending", "--json"])).expect("pending --json");
    assert_eq!(j.as_array().map(Vec::len), Some(7));
    // With T memories and nothing built, T - popcount(T) blocks are owed.
    let e = Env::init();
    e.import_lines(&dated(100, 0));
    assert_eq!(e.lines(&["pending"]).len(), 100 - 3);
}

#[test]
fn nap_prompts_accepts_the_next_block_refuses_others_and_settles_idempotently() {
    let e = Env::init();
    let empty = e.ok(&["nap"]);
    assert_eq!(empty, "Nothing left to compress.\n");
    e.import_lines(&dated(4, 0));
    let prompt = e.ok(&["nap"]);
    let lines: Vec<&str> = prompt.lines().collect();
    assert!(lines[0].starts_with("Merge 0-1: "), "{prompt}");
    assert!(lines[1].starts_with("#0 2024-01-01 memory 000"), "{prompt}");
    assert!(lines[2].starts_with("#1 2024-01-01 memory 001"), "{prompt}");
    assert!(prompt.contains("2 more merges are pending"), "{prompt}");
    let last = format!("Run: {} nap 0-1 \"<your line>\"", e.prefix());
    assert_eq!(lines.last(), Some(&last.as_str()));

    // Wrong block: refused, names the next one, writes nothing.
    let before = e.export();
    let err = e.fail(&["nap", "2-3", "too early"], 2);
    assert!(err.contains("Wrong block 2-3"), "{err}");
    assert!(err.contains("0-1"), "{err}");
    assert_eq!(e.export(), before);

    // Right block: saved, and the next prompt follows.
    let out = e.ok(&["nap", "0-1", "first pair"]);
    assert!(out.starts_with("Saved 0-1.\n"), "{out}");
    assert!(out.contains("\nMerge 2-3: "), "{out}");

    // Already settled: exit 0, nothing written, and the next prompt follows (issue 22, point 8).
    let before = e.export();
    let out = e.ok(&["nap", "0-1", "another answer"]);
    assert!(
        out.starts_with("0-1 is already settled.\nMerge 2-3: "),
        "{out}"
    );
    assert_eq!(e.export(), before);
    assert!(e.ok(&["zoom", "0-3"]).starts_with("#0-1 first pair\n"));

    // The summary may come from stdin.
    let r = e.run_stdin(&["nap", "2-3", "-"], b"second pair\n");
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.out.starts_with("Saved 2-3.\n"), "{r:?}");

    // A block without a summary, a bad block, a too-long summary: rejected, nothing written.
    let before = e.export();
    let err = e.fail(&["nap", "0-3"], 2);
    assert!(err.contains("summary"), "{err}");
    e.fail(&["nap", "1-2", "unaligned"], 2);
    e.fail(&["nap", "0-3", &"y".repeat(281)], 2);
    e.fail(&["nap", "0-3", ""], 2);
    assert_eq!(e.export(), before);

    let out = e.ok(&["nap", "0-3", "all four"]);
    assert!(out.starts_with("Saved 0-3.\n"), "{out}");
    assert!(out.ends_with("\nNothing left to compress.\n"), "{out}");
    // Settled, and nothing pending: says so, nothing written.
    let before = e.export();
    let out = e.ok(&["nap", "0-1", "again"]);
    assert_eq!(out, "0-1 is already settled.\nNothing left to compress.\n");
    assert_eq!(e.export(), before);
}

#[test]
fn nap_batch_prints_independent_merges_and_apply_is_all_or_nothing() {
    let e = Env::init();
    e.import_lines(&dated(40, 0));
    let out = e.ok(&["nap", "--batch", "3"]);
    assert!(out.starts_with("3 independent merges."), "{out}");
    let heads: Vec<&str> = out.lines().filter(|l| l.starts_with("== ")).collect();
    assert_eq!(heads, ["== 0-1", "== 2-3", "== 4-5"]);
    assert!(
        out.ends_with(&format!("Run: {} nap --apply FILE\n", e.prefix())),
        "{out}"
    );
    let j: serde_json::Value =
        serde_json::from_str(&e.ok(&["nap", "--batch", "5", "--json"])).expect("batch --json");
    assert_eq!(j.as_array().map(Vec::len), Some(5));

    // Each file has good lines and one bad line: nothing at all is written.
    let before = e.export();
    let bad_files: &[&str] = &[
        "0-1\tgood\n2-3 no tab here\n",
        "0-1\tgood\n3-4\tunaligned block\n",
        "0-1\tgood\n2-3\tcontrol \u{1b} char\n",
        "0-1\tgood\n0-1\tanswered twice\n",
        "0-1\tgood\n64-127\tpast the end\n",
        "0-1\tgood\n0-31\tits halves have no summary\n",
        "0-1\tgood\n2-3\t\n",
    ];
    for (i, content) in bad_files.iter().enumerate() {
        let f = e.file(&format!("bad{i}.tsv"), content.as_bytes());
        let r = e.run(&["nap", "--apply", &f]);
        assert_ne!(r.code, 0, "bad batch {content:?} accepted: {r:?}");
        assert_eq!(r.err.lines().count(), 1, "{r:?}");
        assert_eq!(e.export(), before, "bad batch {content:?} wrote something");
    }
    e.fail(&["nap", "--apply", "/nonexistent/answers.tsv"], 2);

    // A good batch, in any order, including a parent with its halves; from stdin.
    let r = e.run_stdin(
        &["nap", "--apply", "-"],
        b"0-3\tfour\n0-1\tpair a\n\n2-3\tpair b\n",
    );
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.out.starts_with("Saved 3 summaries: 0-1, 2-3, 0-3.\n"),
        "{r:?}"
    );
    // Settled ones are reported and left alone.
    let f = e.file("again.tsv", b"0-1\tother\n4-5\tpair c\n");
    let out = e.ok(&["nap", "--apply", &f]);
    assert!(
        out.starts_with("Saved 1 summary: 4-5.\nAlready settled: 1 block: 0-1.\n"),
        "{out}"
    );
    assert!(e
        .ok(&["zoom", "0-3"])
        .starts_with("#0-1 pair a\n#2-3 pair b\n"));
    assert!(e.ok(&["verify"]).starts_with("OK: "));
}

#[test]
fn wake_with_no_memories_says_how_to_start() {
    let e = Env::init();
    assert_eq!(
        e.ok(&["wake"]),
        format!(
            "No memories yet. Record the first with: {} note \"<something worth keeping>\"\nYou are awake.\n",
            e.prefix()
        )
    );
}

#[test]
fn wake_pages_have_headers_and_footers_that_chain() {
    // 100 memories of ~290-byte lines: 96 lines do not fit one 20,000-byte part.
    let e = Env::init();
    e.import_lines(&dated(100, 260));
    let parts = wake_chain(&e, &[]);
    assert!(parts.len() >= 2, "expected several parts");
    let n = parts.len();
    let mut all = Vec::new();
    for (i, p) in parts.iter().enumerate() {
        assert_eq!(header(p), (i + 1, n, 100));
        if i + 1 < n {
            let last = p.lines().last().expect("footer");
            assert_eq!(
                last,
                format!("Not awake yet. Run: {} wake {} 100", e.prefix(), i + 2)
            );
        } else {
            assert!(p.contains("\nYou are awake.\n"), "{p}");
            assert!(
                p.ends_with(&format!("97 merges are pending. Run: {} nap\n", e.prefix())),
                "{p}"
            );
        }
        all.extend(body(p));
    }
    assert!(all.len() <= 96);
    assert_tiles(&all, 100);

    // A part that does not exist, and part 0, are errors.
    e.fail(&["wake", &(n + 1).to_string(), "100"], 2);
    e.fail(&["wake", "0"], 2);
    // A snapshot larger than the log is an error.
    e.fail(&["wake", "1", "101"], 2);

    // 600 short memories with a 600-line budget: parts split at 500 lines.
    let e = Env::init();
    e.import_lines(&dated(600, 0));
    let parts = wake_chain(&e, &["--lines", "600"]);
    assert!(parts.len() >= 2);
    assert!(parts[0]
        .lines()
        .last()
        .expect("footer")
        .starts_with(&format!(
            "Not awake yet. Run: {} wake --lines 600 2 600",
            e.prefix()
        )));
    let all: Vec<String> = parts.iter().flat_map(|p| body(p)).collect();
    assert_eq!(all.len(), 600);
    assert_tiles(&all, 600);
}

#[test]
fn wake_snapshot_pins_the_later_parts() {
    let e = Env::init();
    e.import_lines(&dated(100, 260));
    let part1 = e.ok(&["wake"]);
    assert!(
        part1.ends_with(&format!("Not awake yet. Run: {} wake 2 100\n", e.prefix())),
        "{part1}"
    );
    let part2 = e.ok(&["wake", "2", "100"]);
    // A note lands between the two parts.
    assert_eq!(saved_id(&e.ok(&["note", "landed in between"])), 100);
    let pinned = e.ok(&["wake", "2", "100"]);
    assert_eq!(header(&pinned).2, 100);
    assert_eq!(body(&pinned), body(&part2));
    assert!(!pinned.contains("landed in between"));
    let fresh = e.ok(&["wake"]);
    assert_eq!(header(&fresh).2, 101);
}

#[test]
fn wake_lines_budget_gives_the_reference_cover() {
    let e = Env::init();
    e.import_lines(&dated(100, 0));
    e.summarize_all();
    let out = e.ok(&["wake", "--lines", "10"]);
    let b = body(&out);
    let blocks: Vec<String> = b
        .iter()
        .map(|l| l.split(' ').next().expect("token").to_string())
        .collect();
    assert_eq!(
        blocks,
        ["#0-31", "#32-63", "#64-79", "#80-87", "#88-91", "#92-95", "#96", "#97", "#98", "#99"]
    );
    assert_eq!(b[0], "#0-31 sum 0-31");
    assert_eq!(b[6], "#96 2024-01-10 memory 096");
    assert!(out.ends_with("You are awake.\n"), "{out}");
    for lines in [1usize, 2, 3, 4, 7, 20, 50, 96, 99, 100, 1000] {
        let parts = wake_chain(&e, &["--lines", &lines.to_string()]);
        let all: Vec<String> = parts.iter().flat_map(|p| body(p)).collect();
        assert!(all.len() <= lines, "--lines {lines}: {} lines", all.len());
        assert_tiles(&all, 100);
        if lines >= 100 {
            assert_eq!(all.len(), 100, "every memory raw when T <= B");
        }
    }
    // WAKE_LINES is the default budget.
    e.ok(&["config", "WAKE_LINES=5"]);
    assert!(body(&e.ok(&["wake"])).len() <= 5);
    e.fail(&["wake", "--lines", "0"], 2);
}

#[test]
fn wake_bytes_budget_is_never_exceeded() {
    let e = Env::init();
    e.import_lines(&dated(100, 260));
    let f = e.file("half.tsv", b"0-1\tsum a\n2-3\tsum b\n0-3\tsum c\n");
    e.ok(&["nap", "--apply", &f]);
    for budget in [
        100usize, 400, 600, 1000, 2_000, 5_000, 10_000, 19_999, 25_000, 40_000, 100_000,
    ] {
        let b = budget.to_string();
        let r = e.run(&["wake", "--bytes", &b]);
        if r.code != 0 {
            assert_eq!(r.code, 2, "{r:?}");
            assert!(r.err.contains("--bytes"), "{r:?}");
            assert!(
                budget < 1000,
                "a {budget}-byte budget should fit some lines: {r:?}"
            );
            continue;
        }
        let parts = wake_chain(&e, &["--bytes", &b]);
        let total: usize = parts.iter().map(String::len).sum();
        assert!(total <= budget, "--bytes {budget}: printed {total}");
        let all: Vec<String> = parts.iter().flat_map(|p| body(p)).collect();
        assert!(!all.is_empty());
        assert_tiles(&all, 100);
    }
    // WAKE_BYTES is the default byte budget.
    e.ok(&["config", "WAKE_BYTES=3000"]);
    let out = e.ok(&["wake"]);
    assert!(out.len() <= 3000, "{}", out.len());
}

#[test]
fn wake_json_parses_and_matches_the_text() {
    let e = Env::init();
    e.import_lines(&dated(20, 0));
    e.summarize_all();
    let j: serde_json::Value =
        serde_json::from_str(&e.ok(&["wake", "--json", "--lines", "6"])).expect("wake --json");
    assert_eq!(j["total"], 20);
    let items = j["items"].as_array().expect("items");
    let text = body(&e.ok(&["wake", "--lines", "6"]));
    assert_eq!(items.len(), text.len());
    assert_eq!(items[0]["type"], "summary");
    for (item, line) in items.iter().zip(&text) {
        if item["type"] == "summary" {
            let (lo, hi) = (&item["block"]["lo"], &item["block"]["hi"]);
            let hi = hi.as_u64().expect("hi") - 1;
            let s = item["summary"]["text"].as_str().expect("text");
            assert_eq!(*line, format!("#{lo}-{hi} {s}"));
        } else {
            assert_eq!(item["type"], "memory");
            assert!(line.starts_with(&format!("#{} ", item["id"])), "{line}");
            assert!(
                line.ends_with(item["text"].as_str().expect("text")),
                "{line}"
            );
        }
    }
    let empty = Env::init();
    let j: serde_json::Value =
        serde_json::from_str(&empty.ok(&["--json", "wake"])).expect("empty wake --json");
    assert_eq!(j["total"], 0);
}

#[test]
fn zoom_opens_a_block_into_its_halves() {
    let e = Env::init();
    e.import_lines(&dated(100, 0));
    e.summarize_all();
    assert_eq!(
        e.lines(&["zoom", "0-31"]),
        ["#0-15 sum 0-15", "#16-31 sum 16-31"]
    );
    assert_eq!(
        e.lines(&["zoom", "0-1"]),
        ["#0 2024-01-01 memory 000", "#1 2024-01-01 memory 001"]
    );
    // A half beyond T is skipped; a half not built yet says so.
    assert_eq!(e.lines(&["zoom", "64-127"])[0], "#64-95 sum 64-95");
    assert_eq!(e.lines(&["zoom", "96-127"]), ["#96-111 not compressed yet"]);
    e.ok(&["forget", "2-3"]);
    assert_eq!(
        e.lines(&["zoom", "0-3"]),
        ["#0-1 sum 0-1", "#2-3 not compressed yet"]
    );
    let j: serde_json::Value =
        serde_json::from_str(&e.ok(&["zoom", "0-3", "--json"])).expect("zoom --json");
    assert_eq!(j.as_array().map(Vec::len), Some(2));
    // Past the end, a single memory, malformed blocks: errors.
    let err = e.fail(&["zoom", "128-255"], 2);
    assert!(err.contains("past the end"), "{err}");
    // ... and it names the way back to what exists.
    assert!(
        err.ends_with(&format!("\nRun: {} wake\n", e.prefix())),
        "{err}"
    );
    e.fail(&["zoom", "5-5"], 2);
    e.fail(&["zoom", "3-4"], 2);
    e.fail(&["zoom", "banana"], 2);
}

#[test]
fn recall_across_scopes_names_each_scope_and_only_readable_ones() {
    let e = Env::init();
    e.ok(&["note", "deploys go through staging"]);
    e.ok(&["--scope", "project:acme", "note", "acme deploys on fridays"]);
    e.ok(&["--scope", "secret", "note", "deploy keys live in the vault"]);
    let all = e.ok(&["recall", "--all", "deploy"]);
    assert_eq!(
        all.lines().collect::<Vec<_>>(),
        [
            "default #0 2026-11-30 deploys go through staging",
            "project:acme #0 2026-11-30 acme deploys on fridays",
            "secret #0 2026-11-30 deploy keys live in the vault",
            "3 matches in 3 scopes.",
        ]
        .map(|l| l.replace("2026-11-30", &today()))
    );
    let two = e.ok(&["--scope", "project:acme,default", "recall", "deploy"]);
    assert!(two.starts_with("project:acme #0 "), "{two}");
    assert!(two.ends_with("2 matches in 2 scopes.\n"), "{two}");
    let j: serde_json::Value =
        serde_json::from_str(&e.ok(&["--json", "--scope", "default,secret", "recall", "vault"]))
            .expect("json");
    assert_eq!(j[0]["scope"], "default");
    assert_eq!(j[0]["recall"]["total"], 0);
    assert_eq!(j[1]["scope"], "secret");
    assert_eq!(j[1]["recall"]["total"], 1);
    // A principal sees only the scopes it may read, and naming another is denied without a
    // word about whether it exists.
    e.ok(&["grant", "user:bob", "read", "project:"]);
    let bob = e.ok(&["--as", "user:bob", "recall", "--all", "deploy"]);
    assert_eq!(bob.lines().count(), 2, "{bob}");
    assert!(bob.starts_with("project:acme #0 "), "{bob}");
    assert!(bob.ends_with("1 match in 1 scope.\n"), "{bob}");
    let denied = e.fail(
        &[
            "--as",
            "user:bob",
            "--scope",
            "project:acme,secret",
            "recall",
            "x",
        ],
        6,
    );
    let missing = e.fail(
        &[
            "--as",
            "user:bob",
            "--scope",
            "project:acme,nosuch",
            "recall",
            "x",
        ],
        6,
    );
    assert_eq!(
        denied.replace("secret", "S"),
        missing.replace("nosuch", "S"),
        "a denial says nothing about existence"
    );
}

/// Today's date as somna prints it (UTC).
fn today() -> String {
    let out = std::process::Command::new("date")
        .args(["-u", "+%Y-%m-%d"])
        .output()
        .expect("date");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn nap_apply_of_many_answers_prints_a_count_and_the_first_and_last_blocks() {
    let e = Env::init();
    e.import_lines(&dated(64, 0));
    let answers: String = (0..32)
        .map(|i| format!("{}-{}\tpair {i}\n", 2 * i, 2 * i + 1))
        .collect();
    let f = e.file("answers.tsv", answers.as_bytes());
    let out = e.ok(&["nap", "--apply", &f]);
    assert!(
        out.starts_with("Saved 32 summaries, from 0-1 to 62-63.\n"),
        "{out}"
    );
    let again = e.ok(&["nap", "--apply", &f]);
    assert!(
        again.starts_with("Saved 0 summaries.\nAlready settled: 32 blocks, from 0-1 to 62-63.\n"),
        "{again}"
    );
    assert!(again.lines().all(|l| l.len() < 200), "{again}");
}

#[test]
fn recall_prints_matches_and_the_reference_count_lines() {
    let e = Env::init();
    let f = e.file(
        "r.txt",
        b"2024-01-01 alpha one\n2024-01-02 beta two\n2024-01-03 alpha three\n2024-02-01 gamma four\n2024-03-01 alpha five\n",
    );
    e.ok(&["import", &f]);
    assert_eq!(
        e.lines(&["recall", "alpha"]),
        [
            "#0 2024-01-01 alpha one",
            "#2 2024-01-03 alpha three",
            "#4 2024-03-01 alpha five",
            "3 matches."
        ]
    );
    // Case-insensitive, and ids and dates match too.
    assert_eq!(
        e.lines(&["recall", "ALPHA"]).last().map(String::as_str),
        Some("3 matches.")
    );
    assert_eq!(
        e.lines(&["recall", "^#1 "]),
        ["#1 2024-01-02 beta two", "1 match."]
    );
    assert_eq!(
        e.lines(&["recall", "2024-02"]),
        ["#3 2024-02-01 gamma four", "1 match."]
    );
    assert_eq!(e.ok(&["recall", "zzz"]), "No match.\n");
    // --limit keeps the newest, printed oldest first.
    assert_eq!(
        e.lines(&["recall", "alpha", "--limit", "2"]),
        [
            "#2 2024-01-03 alpha three",
            "#4 2024-03-01 alpha five",
            "Newest 2 of 3 matches. Narrow the regex, or see older ones with --before 2."
        ]
    );
    // --since is inclusive, --until exclusive.
    assert_eq!(
        e.lines(&[
            "recall",
            ".",
            "--since",
            "2024-01-03",
            "--until",
            "2024-03-01"
        ]),
        [
            "#2 2024-01-03 alpha three",
            "#3 2024-02-01 gamma four",
            "2 matches."
        ]
    );
    assert_eq!(
        e.ok(&["recall", ".", "--since", "2025-01-01"]),
        "No match.\n"
    );
    // --kind.
    e.ok(&["note", "--kind", "decision", "alpha was chosen"]);
    let d = e.lines(&["recall", "alpha", "--kind", "decision"]);
    assert_eq!(d.len(), 2, "{d:?}");
    assert!(
        d[0].starts_with("#5 ") && d[0].ends_with(" alpha was chosen"),
        "{d:?}"
    );
    assert_eq!(d[1], "1 match.");
    assert_eq!(
        e.ok(&["recall", "beta", "--kind", "decision"]),
        "No match.\n"
    );
    let j: serde_json::Value =
        serde_json::from_str(&e.ok(&["recall", "alpha", "--json"])).expect("recall --json");
    assert_eq!(j["total"], 4);
    // Errors.
    let err = e.fail(&["recall", "("], 2);
    assert!(err.contains("regex"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    e.fail(&["recall", ""], 2);
    e.fail(&["recall", "a", "--since", "2024-02-30"], 2);
    e.fail(&["recall", "a", "--kind", "rumour"], 2);
    e.fail(&["recall", "a{1000}{1000}{1000}"], 2);
}

#[test]
fn recall_output_is_bounded_and_says_so() {
    let e = Env::init();
    e.import_lines(&dated(100, 260));
    let out = e.ok(&["recall", "memory"]);
    let last = out.lines().last().expect("count line");
    let shown = out.lines().count() - 1;
    assert!(shown < 100);
    let oldest = 100 - shown;
    assert_eq!(
        last,
        format!(
            "Newest {shown} of 100 matches. Narrow the regex, or see older ones with --before {oldest}."
        )
    );
    assert!(out.len() - last.len() - 1 <= 20_000, "{}", out.len());
    assert!(out
        .lines()
        .nth(shown - 1)
        .expect("newest")
        .starts_with("#99 "));
}

#[test]
fn forget_drops_only_the_block_and_its_ancestors() {
    let e = Env::init();
    e.import_lines(&dated(40, 0));
    e.summarize_all();
    let log = e.ok(&["recall", "."]);
    // 40 memories: 20 + 10 + 5 + 2 + 1 = 38 summaries.
    assert!(e
        .ok(&["stats"])
        .contains("40 memories, 38 summaries, 0 pending"));
    let out = e.ok(&["forget", "2-3"]);
    assert_eq!(
        out,
        format!("Forgot 5 summaries: 2-3, 0-3, 0-7, 0-15, 0-31. The log is untouched; run `{} nap` to rebuild.\n", e.prefix())
    );
    assert_eq!(e.lines(&["pending"]), ["2-3", "0-3", "0-7", "0-15", "0-31"]);
    assert!(e
        .ok(&["stats"])
        .contains("40 memories, 33 summaries, 5 pending"));
    assert_eq!(e.ok(&["recall", "."]), log, "the log changed");
    // Siblings and other branches stay.
    assert_eq!(
        e.lines(&["zoom", "0-3"]),
        ["#0-1 sum 0-1", "#2-3 not compressed yet"]
    );
    assert_eq!(
        e.lines(&["zoom", "32-39"]),
        ["#32-35 sum 32-35", "#36-39 sum 36-39"]
    );
    // Nothing to forget, past the end, single memory.
    assert_eq!(e.ok(&["forget", "2-3"]), "No summary to forget in 2-3.\n");
    e.fail(&["forget", "64-127"], 2);
    e.fail(&["forget", "0-0"], 2);
    // The next merge offered is the first forgotten block.
    assert!(e.ok(&["nap"]).starts_with("Merge 2-3: "));
    assert!(e.ok(&["verify"]).starts_with("OK: "));
}

#[test]
fn import_dated_lines_is_validated_whole_before_writing() {
    let e = Env::init();
    e.ok(&["note", "before the import"]);
    let f = e.file(
        "ok.txt",
        b"2023-12-31 last year\n\n2024-02-29 a leap day\r\n2024-02-29 same day\n",
    );
    assert_eq!(e.ok(&["import", &f]), "Imported 3 memories, #1 to #3.\n");
    assert_eq!(
        e.lines(&["recall", "year|leap|same"]),
        [
            "#1 2023-12-31 last year",
            "#2 2024-02-29 a leap day",
            "#3 2024-02-29 same day",
            "3 matches."
        ]
    );
    let r = e.run_stdin(&["import", "-"], b"2024-03-01 from stdin\n");
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(r.out, "Imported 1 memories, #4 to #4.\n");

    let before = e.export();
    let long = format!("2024-01-02 {}\n", "z".repeat(281));
    let bad: Vec<(&str, String)> = vec![
        (
            "not a real date",
            "2024-01-01 fine\n2023-02-29 no such day\n".into(),
        ),
        (
            "a month 13",
            "2024-01-01 fine\n2024-13-01 bad month\n".into(),
        ),
        ("going back", "2024-01-05 fine\n2024-01-04 earlier\n".into()),
        ("no date", "2024-01-01 fine\njust text\n".into()),
        ("short date", "2024-01-01 fine\n2024-1-2 text\n".into()),
        ("date only", "2024-01-01 fine\n2024-01-02\n".into()),
        ("too long", format!("2024-01-01 fine\n{long}")),
        (
            "control char",
            "2024-01-01 fine\n2024-01-02 a\u{7}b\n".into(),
        ),
        ("empty", "\n\n".into()),
    ];
    for (what, content) in &bad {
        let f = e.file("bad.txt", content.as_bytes());
        let r = e.run(&["import", &f]);
        assert_eq!(r.code, 2, "{what}: {r:?}");
        assert_eq!(r.err.lines().count(), 1, "{what}: {r:?}");
        assert_eq!(e.export(), before, "{what}: something was written");
    }
    let f = e.file("bad.txt", b"2024-01-01 fine\n2023-02-29 no such day\n");
    let err = e.fail(&["import", &f], 2);
    assert!(err.contains("line 2"), "{err}");
    let f = e.file("latin1.txt", b"2024-01-01 caf\xe9\n");
    e.fail(&["import", &f], 2);
    e.fail(&["import", "/nonexistent/file.txt"], 2);
    assert_eq!(e.export(), before);
}

#[test]
fn export_then_import_jsonl_into_a_fresh_store_wakes_identically() {
    let a = Env::init();
    a.import_lines(&dated(70, 20));
    a.summarize_all();
    a.ok(&["forget", "8-15"]);
    a.ok(&[
        "note",
        "--kind",
        "decision",
        "--source",
        "user:alice",
        "use postgres",
    ]);
    a.ok(&["--scope", "project:acme", "note", "acme uses postgres 16"]);
    a.ok(&["config", "WAKE_LINES=12"]);
    let export = a.export();
    assert!(export.lines().count() > 70);

    let b = Env::init();
    let f = b.file("export.jsonl", export.as_bytes());
    let out = b.ok(&["import", "--jsonl", &f]);
    assert!(out.starts_with("Imported 72 memories and "), "{out}");
    assert!(out.ends_with(" in 2 scopes.\n"), "{out}");
    for args in [
        &["wake"][..],
        &["wake", "--lines", "5"],
        &["wake", "--lines", "200"],
        &["wake", "--json"],
        &["--scope", "project:acme", "wake"],
        &["pending"],
        &["zoom", "0-63"],
        &["zoom", "8-15"],
        &["recall", "memory 0[0-3]"],
        &["config"],
        &["export"],
    ] {
        // The `Run:` lines name each store's own path.
        let a_out = a.ok(args).replace(&a.prefix(), "somna");
        let b_out = b.ok(args).replace(&b.prefix(), "somna");
        assert_eq!(a_out, b_out, "somna {args:?} differs");
    }
    assert!(b.ok(&["verify"]).starts_with("OK: 2 scopes, 72 memories"));
    // Importing again would overwrite: refused, nothing written.
    let before = b.export();
    let err = b.fail(&["import", "--jsonl", &f], 1);
    assert!(err.contains("already holds"), "{err}");
    assert_eq!(b.export(), before);
    // Via stdin into a third store.
    let c = Env::init();
    let r = c.run_stdin(&["import", "--jsonl", "-"], export.as_bytes());
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        c.ok(&["wake"]).replace(&c.prefix(), "somna"),
        a.ok(&["wake"]).replace(&a.prefix(), "somna")
    );
    // A bad line anywhere writes nothing.
    let d = Env::init();
    let before = d.export();
    let broken = export.replacen("\"type\":\"memory\"", "\"type\":\"memroy\"", 1);
    let f = d.file("broken.jsonl", broken.as_bytes());
    let err = d.fail(&["import", "--jsonl", &f], 2);
    assert!(err.contains("line "), "{err}");
    assert_eq!(d.export(), before);
}

#[test]
fn config_sets_valid_values_and_rejects_the_rest() {
    let e = Env::init();
    assert!(
        e.ok(&["config"])
            .starts_with("ENTRY_BYTES=280\nRAW_MAX=16\nWAKE_LINES=96\nWAKE_BYTES=0\n"),
        "defaults"
    );
    for (set, show) in [
        ("ENTRY_BYTES=512", "ENTRY_BYTES=512"),
        ("RAW_MAX=2", "RAW_MAX=2"),
        ("WAKE_LINES=7", "WAKE_LINES=7"),
        ("WAKE_BYTES=4096", "WAKE_BYTES=4096"),
    ] {
        assert_eq!(e.ok(&["config", set]), format!("{show}\n"));
    }
    assert!(
        e.ok(&["config"])
            .starts_with("ENTRY_BYTES=512\nRAW_MAX=2\nWAKE_LINES=7\nWAKE_BYTES=4096\n"),
        "settings"
    );
    let j: serde_json::Value =
        serde_json::from_str(&e.ok(&["config", "--json"])).expect("config --json");
    assert_eq!(j["raw_max"], 2);
    let before = e.export();
    for bad in [
        "ENTRY_BYTES=15",
        "ENTRY_BYTES=4097",
        "ENTRY_BYTES=-1",
        "RAW_MAX=3",
        "RAW_MAX=1",
        "RAW_MAX=0",
        "WAKE_LINES=0",
        "WAKE_LINES=abc",
        "WAKE_BYTES=255",
        "WAKE_BYTES=1e3",
        "raw_max=4",
        "NOPE=1",
        "RAW_MAX",
        "=4",
        "RAW_MAX=",
    ] {
        let err = e.fail(&["config", bad], 2);
        assert_eq!(err.lines().count(), 1, "{bad}: {err}");
    }
    assert_eq!(e.export(), before);
    e.ok(&["config", "WAKE_BYTES=0"]);

    // The settings take effect: RAW_MAX=2 builds 0-3 from its two child summaries.
    e.import_lines(&dated(4, 0));
    e.ok(&["nap", "0-1", "pair a"]);
    e.ok(&["nap", "2-3", "pair b"]);
    let prompt = e.ok(&["nap"]);
    assert!(
        prompt.contains("It summarizes:\n#0-1 pair a\n#2-3 pair b\n"),
        "{prompt}"
    );
    // ENTRY_BYTES bounds notes.
    e.ok(&["config", "ENTRY_BYTES=16"]);
    e.ok(&["note", &"a".repeat(16)]);
    e.fail(&["note", &"a".repeat(17)], 2);
}

#[test]
fn stats_and_verify_report_the_store() {
    let e = Env::init();
    e.import_lines(&dated(8, 0));
    e.summarize_all();
    e.ok(&["--scope", "other", "note", "elsewhere"]);
    let stats = e.ok(&["stats"]);
    let lines: Vec<&str> = stats.lines().collect();
    assert_eq!(
        lines[0],
        "scope default: 8 memories, 7 summaries, 0 pending"
    );
    assert_eq!(lines[1], "scope other: 1 memories, 0 summaries, 0 pending");
    if e.on_server() {
        assert_eq!(
            lines[2],
            format!("server store {}: 9 memories", e.db.display())
        );
    } else {
        assert!(
            lines[2].starts_with(&format!("file {}: ", e.db.display())),
            "{stats}"
        );
        assert!(lines[2].contains(" bytes, 9 memories, "), "{stats}");
    }
    let j: serde_json::Value =
        serde_json::from_str(&e.ok(&["stats", "--json"])).expect("stats --json");
    assert_eq!(j["memories"], 9);
    assert_eq!(j["scopes"].as_array().map(Vec::len), Some(2));
    let v = e.ok(&["verify"]);
    assert!(
        v.starts_with("OK: 2 scopes, 9 memories, 7 summaries"),
        "{v}"
    );
    assert!(v.ends_with(" verified.\n") && v.lines().count() == 1, "{v}");
    let j: serde_json::Value =
        serde_json::from_str(&e.ok(&["verify", "--json"])).expect("verify --json");
    assert_eq!(j["problems"].as_array().map(Vec::len), Some(0));
}

#[test]
fn every_command_on_a_missing_store_fails_and_creates_nothing() {
    let e = Env::new();
    let jsonl = e.file("x.jsonl", b"{\"type\":\"store\",\"format\":1}\n");
    let lines = e.file("x.txt", b"2024-01-01 a\n");
    let tsv = e.file("x.tsv", b"0-1\ta\n");
    let optmem = e.dir.path().join("optmem");
    std::fs::create_dir(&optmem).expect("mkdir");
    std::fs::write(
        optmem.join("LOG.txt"),
        format!("{:<319}\n", "#0 2024-01-01 a"),
    )
    .expect("LOG.txt");
    let optmem = optmem.to_str().expect("utf8").to_string();
    let commands: Vec<Vec<&str>> = vec![
        vec!["note", "x"],
        vec!["note", "-"],
        vec!["pending"],
        vec!["nap"],
        vec!["nap", "0-1", "x"],
        vec!["nap", "--batch", "2"],
        vec!["nap", "--apply", &tsv],
        vec!["wake"],
        vec!["wake", "2", "10"],
        vec!["zoom", "0-1"],
        vec!["recall", "x"],
        vec!["forget", "0-1"],
        vec!["import", &lines],
        vec!["import", "--optmem", &optmem],
        vec!["import", "--jsonl", &jsonl],
        vec!["export"],
        vec!["config"],
        vec!["config", "RAW_MAX=4"],
        vec!["stats"],
        vec!["verify"],
    ];
    // Both a missing file in an existing directory and a missing directory.
    let nested = e.dir.path().join("no").join("such").join("m.redb");
    for db in [e.db.clone(), nested.clone()] {
        for args in &commands {
            let mut c = e.cmd();
            c.env("SOMNA_DB", &db).args(args);
            let r = e.run_with(c, Some(b"2024-01-01 a\n"));
            assert_eq!(r.code, 3, "somna {args:?} on a missing store: {r:?}");
            assert!(r.out.is_empty(), "{r:?}");
            // The error, then the Run: line that creates the store asked for (issue 22).
            let lines: Vec<&str> = r.err.lines().collect();
            assert_eq!(lines.len(), 2, "{r:?}");
            assert!(lines[0].starts_with("somna: no somna store at "), "{r:?}");
            assert!(lines[1].starts_with("Run: "), "{args:?}: {r:?}");
            assert!(lines[1].ends_with(" init"), "{args:?}: {r:?}");
            assert!(!db.exists(), "somna {args:?} created the store");
        }
    }
    assert!(!nested.parent().expect("parent").exists());
    // The default store under HOME is never touched either.
    assert!(!e.dir.path().join(".somna").exists());
}

#[test]
fn global_options_work_before_and_after_the_verb() {
    let e = Env::new();
    let db = e.db.to_str().expect("utf8").to_string();
    let run = |args: &[&str]| {
        let mut c = e.cmd();
        c.env_remove("SOMNA_DB").args(args);
        let r = e.run_with(c, None);
        assert_eq!(r.code, 0, "somna {args:?}: {r:?}");
        r.out
    };
    run(&["--db", &db, "init"]);
    run(&["init", "--db", &db]);
    assert_eq!(
        saved_id(&run(&["--db", &db, "--scope", "s1", "note", "one"])),
        0
    );
    assert_eq!(
        saved_id(&run(&["note", "two", "--scope", "s1", "--db", &db])),
        1
    );
    assert_eq!(
        saved_id(&run(&["note", "--scope", "s1", "three", "--db", &db])),
        2
    );
    assert_eq!(
        saved_id(&run(&["--scope", "s2", "note", "--db", &db, "other"])),
        0
    );
    let a = run(&["--db", &db, "--scope", "s1", "--json", "recall", "."]);
    let b = run(&["recall", ".", "--json", "--scope", "s1", "--db", &db]);
    assert_eq!(a, b);
    let j: serde_json::Value = serde_json::from_str(&a).expect("json");
    assert_eq!(j["total"], 3);
    let w1 = run(&["--scope", "s1", "--db", &db, "wake"]);
    let w2 = run(&["wake", "--db", &db, "--scope", "s1"]);
    assert_eq!(w1, w2);
    assert!(w1.contains("(3 memories)"), "{w1}");
    // The Run: lines name the --db and --scope given on the command line.
    let p = run(&["nap", "--db", &db, "--scope", "s1"]);
    assert!(
        p.ends_with(&format!(
            "Run: somna --db {} --scope s1 nap 0-1 \"<your line>\"\n",
            crate::common::quoted(&db)
        )),
        "{p}"
    );
    // SOMNA_SCOPE selects the scope too.
    let mut c = e.cmd();
    c.env("SOMNA_SCOPE", "s2").args(["recall", "."]);
    let r = e.run_with(c, None);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(r.out.ends_with("other\n1 match.\n"), "{r:?}");
}

#[test]
fn exit_codes_follow_the_error_kind() {
    let e = Env::init();
    e.import_lines(&dated(4, 0));
    // 0: success.
    assert_eq!(e.run(&["wake"]).code, 0);
    // 2: rejected input (invalid, wrong block, out of range) and usage errors.
    e.fail(&["note", ""], 2);
    e.fail(&["nap", "2-3", "x"], 2);
    e.fail(&["zoom", "8-15"], 2);
    e.fail(&["--scope", "bad scope", "wake"], 2);
    e.fail(&["config", "RAW_MAX=3"], 2);
    let usage = e.run(&["no-such-verb"]);
    assert_eq!(usage.code, 2, "{usage:?}");
    let usage = e.run(&["note"]);
    assert_eq!(usage.code, 2, "{usage:?}");
    // 3: missing store.
    let missing = Env::new();
    missing.fail(&["wake"], 3);
    // 1: a conflict (import into a non-empty scope).
    let f = e.file("more.jsonl", e.export().as_bytes());
    e.fail(&["import", "--jsonl", &f], 1);
    if e.on_server() {
        // The rest damages the store file's bytes.
        return;
    }
    // 5: corruption. Damage one stored memory's bytes in place.
    let marker = "UNIQUEMARKERQQ";
    e.ok(&["note", &format!("{marker} damaged later")]);
    e.ok(&["note", "intact afterwards"]);
    let mut bytes = std::fs::read(&e.db).expect("read store");
    let mut hits = 0;
    let mut i = 0;
    while let Some(p) = bytes[i..]
        .windows(marker.len())
        .position(|w| w == marker.as_bytes())
    {
        bytes[i + p] = b'X';
        hits += 1;
        i += p + 1;
    }
    assert!(hits > 0, "the memory's text is not stored verbatim");
    std::fs::write(&e.db, &bytes).expect("write store");
    // recall may show what is intact, but must say the rest is damaged and exit 5.
    let r = e.run(&["recall", "intact"]);
    assert_eq!(r.code, 5, "{r:?}");
    let said = format!("{}{}", r.out, r.err);
    assert!(
        said.contains("corrupt") || said.contains("damaged"),
        "{r:?}"
    );
    assert!(
        said.contains("#4"),
        "the damaged memory is not named: {r:?}"
    );
    assert_eq!(e.run(&["verify"]).code, 5);
}
