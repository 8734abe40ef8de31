//! `recall --words` takes natural language: every whitespace-separated word must occur in the
//! line, in any order, each as a literal (regex characters match themselves), case-insensitive.
//! `recall --before ID` is the cursor of a cut recall: the count line names the id to pass, and
//! following it page after page returns every match exactly once, newest pages first.

use crate::common::{run_raw, Env};

#[test]
fn words_match_all_in_any_order_as_literals() {
    let e = Env::init();
    for t in [
        "deploy goes through staging",
        "staging is down (again)",
        "the deploy key rotates monthly",
        "a.b matches literally",
    ] {
        e.ok(&["note", t]);
    }
    let ids = |args: &[&str]| -> Vec<u64> {
        let v: serde_json::Value =
            serde_json::from_str(&e.ok(&[&["--json", "recall"], args].concat())).expect("json");
        v["matches"]
            .as_array()
            .expect("matches")
            .iter()
            .filter_map(|m| m["id"].as_u64())
            .collect()
    };
    assert_eq!(ids(&["--words", "STAGING deploy"]), [0]);
    assert_eq!(ids(&["--words", "deploy"]), [0, 2]);
    assert_eq!(ids(&["--words", "(again)"]), [1]);
    assert_eq!(ids(&["--words", "a.b"]), [3]);
    assert_eq!(ids(&["a.b"]), [3]);
    assert_eq!(ids(&["--words", "axb"]), Vec::<u64>::new());
    let mut blank = e.cmd();
    blank.args(["recall", "--words", "   "]);
    assert_eq!(run_raw(blank, None).code, 2);
}

#[test]
fn before_pages_through_every_match_once() {
    let e = Env::init();
    let lines: String = (0..30).map(|i| format!("2024-01-01 entry {i}\n")).collect();
    let f = e.file("lines.txt", lines.as_bytes());
    e.ok(&["import", &f]);
    let mut seen = Vec::new();
    let mut before: Option<String> = None;
    for _ in 0..10 {
        let mut args = vec!["recall", "entry", "--limit", "8"];
        if let Some(b) = &before {
            args.extend(["--before", b.as_str()]);
        }
        let out = e.lines(&args);
        let (last, shown) = out.split_last().expect("a count line");
        let ids: Vec<u64> = shown
            .iter()
            .map(|l| {
                l[1..]
                    .split(' ')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("id")
            })
            .collect();
        seen.splice(0..0, ids.iter().copied());
        match last.split("--before ").nth(1) {
            Some(rest) => {
                let next = rest.trim_end_matches('.').to_string();
                assert_eq!(next, ids[0].to_string(), "{last}");
                before = Some(next);
            }
            None => {
                assert!(
                    last.ends_with("matches.") || last.ends_with("match."),
                    "{last}"
                );
                break;
            }
        }
    }
    assert_eq!(seen, (0..30).collect::<Vec<u64>>());
}
