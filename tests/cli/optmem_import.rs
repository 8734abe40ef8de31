//! `somna import --optmem DIR` migrates an OptMem store exactly: every memory keeps its id,
//! date and text, every summary in `TREE/<s>` lands on its block (all-space records stay
//! missing and become pending merges), a torn trailing LOG.txt record is ignored and reported,
//! any other damaged record is an error naming its position that writes nothing, and a scope
//! that already holds memories is never imported into. The OptMem files are built here from the
//! format in the reference: LOG.txt of 320-byte records `#<i> <YYYY-MM-DD> <text>` padded with
//! spaces to 319 bytes then `\n`; `TREE/<s>` of 288-byte records, text padded to 287 then `\n`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const LOG_RECORD: usize = 320;
const TREE_RECORD: usize = 288;

use crate::common::Env;

#[derive(Debug)]
struct Run {
    code: i32,
    out: String,
    err: String,
}

/// What these tests run besides [`Env`]'s shared helpers: runs with text output, imports.
trait OptMemEnv {
    fn run(&self, args: &[&str]) -> Run;
    fn import(&self, dir: &Path, scope: &str) -> Run;
}

impl OptMemEnv for Env {
    fn run(&self, args: &[&str]) -> Run {
        let mut c = self.cmd();
        c.args(args);
        let r = crate::common::run_raw(c, None);
        Run {
            code: r.code,
            out: String::from_utf8(r.out).expect("UTF-8"),
            err: String::from_utf8(r.err).expect("UTF-8"),
        }
    }

    fn import(&self, dir: &Path, scope: &str) -> Run {
        self.run(&[
            "--scope",
            scope,
            "import",
            "--optmem",
            dir.to_str().expect("utf8"),
        ])
    }
}

/// A synthetic OptMem store: the memories (date, text) and the level files (size -> records,
/// `None` for an all-space record).
pub(crate) struct OptMem {
    memories: Vec<(String, String)>,
    levels: BTreeMap<u64, Vec<Option<String>>>,
}

fn log_record(i: usize, date: &str, text: &str) -> Vec<u8> {
    let s = format!("#{i} {date} {text}");
    assert!(s.len() < LOG_RECORD, "record {i} too long");
    let mut r = s.into_bytes();
    r.resize(LOG_RECORD - 1, b' ');
    r.push(b'\n');
    r
}

fn tree_record(text: Option<&str>) -> Vec<u8> {
    let mut r = text.unwrap_or("").as_bytes().to_vec();
    assert!(r.len() < TREE_RECORD);
    r.resize(TREE_RECORD - 1, b' ');
    r.push(b'\n');
    r
}

fn date(i: usize) -> String {
    format!("2024-{:02}-{:02}", 1 + i / 2 / 28, 1 + (i / 2) % 28)
}

fn memory_text(i: usize) -> String {
    match i {
        5 => "the user prefers tabs; caf\u{e9} \u{2615} and \u{1F600} are fine".into(),
        9 => "x".repeat(280),
        13 => "quotes \"double\" 'single' $HOME `cmd` #hash  two  spaces".into(),
        _ => format!("memory {i}: fact number {i} about the project"),
    }
}

/// 40 memories; TREE/2 complete but records 3 and 11 missing, TREE/4 with record 5 missing,
/// TREE/8 complete, TREE/16 only its first record (a dense prefix), no TREE/32.
pub(crate) fn sample() -> OptMem {
    let memories = (0..40).map(|i| (date(i), memory_text(i))).collect();
    let mut levels = BTreeMap::new();
    for (size, count, missing) in [
        (2u64, 20usize, &[3usize, 11][..]),
        (4, 10, &[5]),
        (8, 5, &[]),
        (16, 1, &[]),
    ] {
        let recs = (0..count)
            .map(|k| {
                if missing.contains(&k) {
                    None
                } else if size == 8 && k == 2 {
                    Some("s".repeat(280))
                } else {
                    let lo = k as u64 * size;
                    Some(format!(
                        "summary of {lo}-{}: \u{e9}t\u{e9} notes",
                        lo + size - 1
                    ))
                }
            })
            .collect();
        levels.insert(size, recs);
    }
    OptMem { memories, levels }
}

impl OptMem {
    fn log_bytes(&self) -> Vec<u8> {
        self.memories
            .iter()
            .enumerate()
            .flat_map(|(i, (d, t))| log_record(i, d, t))
            .collect()
    }

    pub(crate) fn write(&self, root: &Path, name: &str) -> PathBuf {
        let dir = root.join(name);
        std::fs::create_dir_all(dir.join("TREE")).expect("mkdir");
        std::fs::write(dir.join("LOG.txt"), self.log_bytes()).expect("LOG.txt");
        for (size, recs) in &self.levels {
            let bytes: Vec<u8> = recs
                .iter()
                .flat_map(|r| tree_record(r.as_deref()))
                .collect();
            std::fs::write(dir.join("TREE").join(size.to_string()), bytes).expect("TREE");
        }
        dir
    }

    /// The summaries present: block (lo, hi inclusive) -> text.
    fn summaries(&self) -> BTreeMap<(u64, u64), String> {
        let mut out = BTreeMap::new();
        for (size, recs) in &self.levels {
            for (k, r) in recs.iter().enumerate() {
                if let Some(t) = r {
                    let lo = k as u64 * size;
                    out.insert((lo, lo + size - 1), t.clone());
                }
            }
        }
        out
    }
}

/// The summaries somna holds for `scope`, from its export.
fn exported_summaries(e: &Env, scope: &str) -> BTreeMap<(u64, u64), String> {
    let mut out = BTreeMap::new();
    for line in e.ok(&["export"]).lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("export line");
        if v["type"] == "summary" && v["scope"] == scope {
            let lo = v["lo"].as_u64().expect("lo");
            let hi = v["hi"].as_u64().expect("hi");
            out.insert((lo, hi - 1), v["text"].as_str().expect("text").to_string());
        }
    }
    out
}

/// Checks that `scope` holds exactly the sample's memories and summaries.
fn assert_same(e: &Env, scope: &str, src: &OptMem) {
    let recall = e.lines(&["--scope", scope, "recall", "."]);
    let want: Vec<String> = src
        .memories
        .iter()
        .enumerate()
        .map(|(i, (d, t))| format!("#{i} {d} {t}"))
        .chain(std::iter::once(format!("{} matches.", src.memories.len())))
        .collect();
    assert_eq!(recall, want);
    assert_eq!(exported_summaries(e, scope), src.summaries());
}

#[test]
fn import_keeps_ids_dates_texts_and_summaries() {
    let e = Env::init();
    let src = sample();
    let dir = src.write(e.dir.path(), "optmem");
    let r = e.import(&dir, "default");
    assert_eq!(r.code, 0, "{r:?}");
    assert_eq!(
        r.out,
        format!(
            "Imported 40 memories and 33 summaries from {}.\n",
            dir.display()
        )
    );
    assert_same(&e, "default", &src);

    // All-space records are missing: zoom says so, and they (and what is built on them) are
    // the pending merges, smallest first.
    assert_eq!(
        e.lines(&["zoom", "4-7"]),
        [
            "#4-5 summary of 4-5: \u{e9}t\u{e9} notes",
            "#6-7 not compressed yet"
        ]
    );
    assert_eq!(
        e.lines(&["zoom", "16-23"]),
        [
            "#16-19 summary of 16-19: \u{e9}t\u{e9} notes",
            "#20-23 not compressed yet"
        ]
    );
    assert_eq!(
        e.lines(&["zoom", "16-31"])[1],
        "#24-31 summary of 24-31: \u{e9}t\u{e9} notes"
    );
    assert_eq!(
        e.lines(&["zoom", "16-31"])[0],
        format!("#16-23 {}", "s".repeat(280))
    );
    assert_eq!(
        e.lines(&["zoom", "8-9"]),
        [
            format!("#8 {} {}", date(8), memory_text(8)),
            format!("#9 {} {}", date(9), "x".repeat(280)),
        ]
    );
    assert_eq!(
        e.lines(&["pending"]),
        ["6-7", "22-23", "20-23", "16-31", "0-31"]
    );
    // The next merge is the first missing block, from its raw memories.
    let prompt = e.ok(&["nap"]);
    assert!(prompt.starts_with("Merge 6-7: "), "{prompt}");
    assert!(prompt.contains(&format!("#6 {} {}\n", date(6), memory_text(6))));
    assert!(e
        .ok(&["verify"])
        .starts_with("OK: 1 scope, 40 memories, 33 summaries"));

    // Wake uses the imported summaries, and shows each one's text on its own block.
    let want = src.summaries();
    for lines in ["4", "8", "12", "40"] {
        let out = e.ok(&["wake", "--lines", lines]);
        assert!(out.starts_with("Your memory, part 1 of 1, oldest first (40 memories).\n"));
        for l in out.lines().filter(|l| l.starts_with('#')) {
            let (tok, text) = l.split_once(' ').expect("line");
            if let Some((a, b)) = tok.trim_start_matches('#').split_once('-') {
                let key = (a.parse().expect("lo"), b.parse().expect("hi"));
                assert_eq!(want.get(&key).map(String::as_str), Some(text), "{l}");
            }
        }
    }
    // Recall finds imported memories by date and by wording.
    assert_eq!(
        e.lines(&["recall", "caf\u{e9}"]),
        [
            format!("#5 {} {}", date(5), memory_text(5)),
            "1 match.".into()
        ]
    );
    assert_eq!(
        e.lines(&["recall", "a", "--since", &date(36), "--until", &date(38)]),
        [
            format!("#36 {} {}", date(36), memory_text(36)),
            format!("#37 {} {}", date(37), memory_text(37)),
            "2 matches.".into()
        ]
    );
}

#[test]
fn a_torn_last_record_is_ignored_and_reported() {
    let e = Env::init();
    let src = sample();
    let dir = src.write(e.dir.path(), "torn");
    // A write of record #40 that stopped after 100 bytes.
    let mut log = src.log_bytes();
    log.extend_from_slice(&log_record(40, &date(40), "the last note, torn")[..100]);
    std::fs::write(dir.join("LOG.txt"), log).expect("LOG.txt");
    let r = e.import(&dir, "default");
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        r.out
            .starts_with("Imported 40 memories and 33 summaries from "),
        "{r:?}"
    );
    assert!(
        r.out.contains("torn"),
        "the torn record is not reported: {r:?}"
    );
    assert!(r.out.contains("100 bytes"), "{r:?}");
    assert_same(&e, "default", &src);
    assert!(!e.ok(&["recall", "torn"]).contains("#40"));
    assert!(e.ok(&["verify"]).starts_with("OK: "));
}

/// Every way to damage the files, with words the error must contain.
fn damaged(root: &Path) -> Vec<(&'static str, PathBuf, Vec<&'static str>)> {
    let src = sample();
    let mut out = Vec::new();
    let mut case = |name: &'static str, words: Vec<&'static str>, f: &dyn Fn(&Path)| {
        let dir = src.write(root, name);
        f(&dir);
        out.push((name, dir, words));
    };
    let patch_log = |dir: &Path, i: usize, rec: Vec<u8>| {
        let p = dir.join("LOG.txt");
        let mut b = std::fs::read(&p).expect("read");
        b[i * LOG_RECORD..(i + 1) * LOG_RECORD].copy_from_slice(&rec);
        std::fs::write(&p, b).expect("write");
    };
    case("wrong-id", vec!["LOG.txt", "#7"], &|d| {
        patch_log(d, 7, log_record(8, &date(7), "claims to be eight"))
    });
    case("utf8", vec!["LOG.txt", "#12"], &|d| {
        let mut r = log_record(12, &date(12), "bad byte here");
        r[20] = 0xff;
        patch_log(d, 12, r)
    });
    case("no-newline", vec!["LOG.txt", "#20"], &|d| {
        let mut r = log_record(20, &date(20), "no newline");
        r[LOG_RECORD - 1] = b' ';
        patch_log(d, 20, r)
    });
    case("bad-date", vec!["LOG.txt", "#3"], &|d| {
        patch_log(d, 3, log_record(3, "2024-02-30", "no such day"))
    });
    case("control", vec!["LOG.txt", "#30"], &|d| {
        patch_log(d, 30, log_record(30, &date(30), "escape \u{1b}[2J here"))
    });
    case("blank", vec!["LOG.txt", "#0"], &|d| {
        let mut r = vec![b' '; LOG_RECORD - 1];
        r.push(b'\n');
        patch_log(d, 0, r)
    });
    case("tree-utf8", vec!["TREE", "8-11"], &|d| {
        let p = d.join("TREE").join("4");
        let mut b = std::fs::read(&p).expect("read");
        b[2 * TREE_RECORD + 3] = 0xc3;
        b[2 * TREE_RECORD + 4] = b'(';
        std::fs::write(&p, b).expect("write");
    });
    case("tree-newline", vec!["TREE", "0-1"], &|d| {
        let p = d.join("TREE").join("2");
        let mut b = std::fs::read(&p).expect("read");
        b[TREE_RECORD - 1] = b'x';
        std::fs::write(&p, b).expect("write");
    });
    case("tree-past-end", vec!["TREE", "40-47"], &|d| {
        let p = d.join("TREE").join("8");
        let mut b = std::fs::read(&p).expect("read");
        b.extend(tree_record(Some("beyond the log")));
        std::fs::write(&p, b).expect("write");
    });
    case("tree-name", vec!["TREE", "3"], &|d| {
        std::fs::write(d.join("TREE").join("3"), tree_record(Some("odd level"))).expect("write")
    });
    case("no-log", vec!["LOG.txt"], &|d| {
        std::fs::remove_file(d.join("LOG.txt")).expect("rm")
    });
    case("empty-log", vec!["LOG.txt"], &|d| {
        std::fs::write(d.join("LOG.txt"), b"").expect("write");
        std::fs::remove_dir_all(d.join("TREE")).expect("rm TREE");
    });
    out
}

#[test]
fn a_damaged_record_is_an_error_naming_it_and_nothing_is_written() {
    let e = Env::init();
    let before = e.ok(&["export"]);
    for (name, dir, words) in damaged(e.dir.path()) {
        let r = e.import(&dir, "default");
        assert!(
            r.code != 0 && r.code != 70 && r.code >= 0,
            "{name}: damaged store accepted or crashed: {r:?}"
        );
        assert!(r.out.is_empty(), "{name}: {r:?}");
        assert!(r.err.starts_with("somna: "), "{name}: {r:?}");
        assert_eq!(r.err.lines().count(), 1, "{name}: {r:?}");
        for w in words {
            assert!(
                r.err.contains(w),
                "{name}: the error does not name {w:?}: {}",
                r.err
            );
        }
        assert_eq!(e.ok(&["export"]), before, "{name}: something was written");
    }
    // Nothing was written, so the real import still works into the same scope.
    let src = sample();
    let dir = src.write(e.dir.path(), "good");
    assert_eq!(e.import(&dir, "default").code, 0);
    assert_same(&e, "default", &src);
}

#[test]
fn importing_into_a_non_empty_scope_is_refused() {
    let e = Env::init();
    let src = sample();
    let dir = src.write(e.dir.path(), "optmem");
    e.ok(&["note", "already here"]);
    let before = e.ok(&["export"]);
    let r = e.import(&dir, "default");
    assert_ne!(r.code, 0, "{r:?}");
    assert!(r.out.is_empty(), "{r:?}");
    assert!(r.err.contains("already holds"), "{r:?}");
    assert_eq!(e.ok(&["export"]), before);
    // Another (empty) scope takes it; a second import there is refused too.
    assert_eq!(e.import(&dir, "migrated").code, 0);
    assert_same(&e, "migrated", &src);
    let before = e.ok(&["export"]);
    let r = e.import(&dir, "migrated");
    assert_ne!(r.code, 0, "{r:?}");
    assert_eq!(e.ok(&["export"]), before);
}
