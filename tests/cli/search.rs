//! Guards `somna search` and `somna reindex` as a user sees them: ranked `#id date text`
//! lines best first with the count line, the scope before each hit across scopes, a summary hit
//! as its block line, `--limit` and the `--offset` cursor, `--json` with scores and matched
//! terms, `note --vector` with `search --vector -`, `reindex` leaving a store that verifies, and
//! a running process (`somna mcp`) finding what another process noted since its last search,
//! with the scope's statistics updated. The vector mode without a vector is refused as invalid,
//! on the command line and over MCP, never answered "No hit." (issue 52, point 6).

use crate::common::{run_raw, Env};

fn notes(e: &Env, texts: &[&str]) {
    for t in texts {
        e.ok(&["note", t]);
    }
}

#[test]
fn search_prints_ranked_lines_and_a_count() {
    let e = Env::init();
    notes(
        &e,
        &[
            "lunch was pasta",
            "the deploy goes through staging",
            "staging is down",
        ],
    );
    let out = e.lines(&["search", "deploy staging", "--neighbour-weight", "0"]);
    assert_eq!(out.len(), 3, "{out:?}");
    assert!(
        out[0].starts_with("#1 ") && out[0].ends_with(" the deploy goes through staging"),
        "{out:?}"
    );
    assert!(out[1].starts_with("#2 "), "{out:?}");
    assert_eq!(out[2], "2 hits.");
    assert_eq!(e.lines(&["search", "zebra"]), ["No hit."]);
}

#[test]
fn limit_and_offset_page_through_the_hits() {
    let e = Env::init();
    notes(&e, &["cat one", "cat two", "cat three"]);
    let first = e.lines(&["search", "cat", "--limit", "2"]);
    assert_eq!(first.len(), 3, "{first:?}");
    assert_eq!(first[2], "Best 2 hits; more with --offset 2.");
    let rest = e.lines(&["search", "cat", "--limit", "2", "--offset", "2"]);
    assert_eq!(rest.len(), 2, "{rest:?}");
    assert!(!first.contains(&rest[0]));
}

#[test]
fn json_gives_scores_terms_and_scopes() {
    let e = Env::init();
    e.ok(&["--scope", "a", "note", "red apples"]);
    e.ok(&["--scope", "b", "note", "green apples"]);
    let v: serde_json::Value =
        serde_json::from_str(&e.ok(&["--json", "search", "apples", "--all"])).unwrap();
    let hits = v["hits"].as_array().unwrap();
    assert_eq!(hits.len(), 2);
    assert!(hits.iter().all(|h| h["score"].as_f64().unwrap() > 0.0));
    assert_eq!(
        hits[0]["terms"],
        serde_json::json!(["appl"]),
        "the stemmed term"
    );
    let text = e.lines(&["search", "apples", "--scope", "a,b"]);
    assert!(
        text[0].starts_with("a #0 ") || text[0].starts_with("b #0 "),
        "{text:?}"
    );
}

#[test]
fn a_summary_hit_prints_its_block() {
    let e = Env::init();
    notes(&e, &["one", "two"]);
    e.ok(&["nap", "0-1", "the zeppelin review"]);
    assert_eq!(
        e.lines(&["search", "zeppelin"]),
        ["#0-1 the zeppelin review", "1 hit."]
    );
}

#[test]
fn vectors_go_in_with_note_and_rank_with_search() {
    let e = Env::init();
    let a = e.file("a.json", b"[1, 0, 0]");
    let b = e.file("b.txt", b"0 1 0");
    e.ok(&["note", "first thing", "--vector", &a]);
    e.ok(&["note", "second thing", "--vector", &b]);
    let mut c = e.cmd();
    c.args(["search", "thing", "--vector", "-", "--mode", "vector"]);
    let r = run_raw(c, Some(b"0.1, 0.9, 0"));
    assert_eq!(r.code, 0, "{r:?}");
    let out = String::from_utf8(r.out).unwrap();
    assert!(out.starts_with("#1 "), "{out}");
}

#[test]
fn reindex_rebuilds_and_the_store_verifies() {
    let e = Env::init();
    notes(&e, &["alpha", "beta"]);
    assert_eq!(e.lines(&["reindex"]), ["Indexed 2 documents in 1 scope."]);
    e.ok(&["verify"]);
    assert_eq!(
        e.lines(&["search", "beta"])[0].split(' ').next(),
        Some("#1")
    );
}

/// The hits of an MCP `search` call: (id, score), best first.
#[cfg(feature = "mcp")]
fn mcp_hits(s: &mut crate::common::mcp::StdioServer, query: &str) -> Vec<(u64, f64)> {
    let r = s.call("search", serde_json::json!({"query": query}));
    let hits = r["structuredContent"]["hits"]
        .as_array()
        .unwrap_or_else(|| panic!("no hits: {r}"));
    hits.iter()
        .map(|h| (h["id"].as_u64().unwrap(), h["score"].as_f64().unwrap()))
        .collect()
}

#[cfg(feature = "mcp")]
#[test]
fn a_note_by_another_process_is_found_by_the_next_search_of_a_running_one() {
    use crate::common::mcp::StdioServer;
    let e = Env::init();
    notes(
        &e,
        &["red apples", "the garden needs water", "lunch was soup"],
    );
    let mut s = StdioServer::start(&e, &[], &[]);
    let before = mcp_hits(&mut s, "apples");
    assert_eq!(before.first().map(|h| h.0), Some(0), "{before:?}");
    e.ok(&["--scope", "other", "note", "apples apples apples"]);
    assert_eq!(
        mcp_hits(&mut s, "apples"),
        before,
        "a note in another scope changed this scope's ranking"
    );
    e.ok(&["note", "green apples and pears"]);
    let after = mcp_hits(&mut s, "apples");
    assert!(after.iter().any(|h| h.0 == 3), "the new note: {after:?}");
    let old = after.iter().find(|h| h.0 == 0).expect("#0 still ranks");
    assert_ne!(
        old.1, before[0].1,
        "#0's score ignores the new document frequency: {before:?} -> {after:?}"
    );
}

#[test]
fn the_vector_mode_without_a_vector_is_invalid() {
    let e = Env::init();
    notes(&e, &["the deploy goes through staging"]);
    let mut c = e.cmd();
    c.args(["search", "deploy", "--mode", "vector"]);
    let r = run_raw(c, None);
    let err = String::from_utf8_lossy(&r.err);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(
        err.contains("invalid vector") && !err.contains("No hit"),
        "{err}"
    );
    let mut s = crate::common::mcp::StdioServer::start(&e, &[], &[]);
    let res = s.call(
        "search",
        serde_json::json!({"query": "deploy", "mode": "vector"}),
    );
    assert_eq!(crate::common::mcp::error_class(&res), "invalid", "{res}");
    let text = res["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.contains("invalid vector: "), "{res}");
}
