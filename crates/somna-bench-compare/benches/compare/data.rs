//! The data: the same memories, summaries and session messages for every engine, and the rules
//! every engine's answers follow (the wake header, recall's byte budget), so that the answers
//! can be checked equal.

use std::fmt::Write as _;

use somna::{Block, BuiltFrom, Kind, Memory, Status, Summary};

/// The one scope every memory workload writes.
pub const SCOPE: &str = "default";
/// Wake's budget in lines: the cover every engine reads.
pub const WAKE_LINES: usize = 96;
/// The recall pattern: selective (about one memory in 1,261 matches).
pub const RECALL_PATTERN: &str = "module 42 passed after fixing flaky test 5$";
/// Recall keeps the newest matches that fit this many bytes.
pub const RECALL_BYTES: usize = 20_000;

const BASE_US: i64 = 1_700_000_000_000_000;

/// Observed time of memory `i`: 100 memories a day.
pub fn observed(i: u64) -> i64 {
    BASE_US + i as i64 * 864_000_000
}

pub fn mem_text(i: u64) -> String {
    format!(
        "memory {i}: the build of module {} passed after fixing flaky test {}",
        i % 97,
        i % 13
    )
}

pub fn sum_text(b: Block) -> String {
    format!("summary of {b}: builds of several modules passed; flaky tests fixed")
}

pub fn memory(i: u64) -> Memory {
    Memory {
        id: i,
        observed_us: observed(i),
        recorded_us: observed(i),
        text: mem_text(i),
        kind: Kind::Observation,
        status: Status::Accepted,
        source: None,
        source_uri: None,
        supersedes: vec![],
        conflicts_with: vec![],
        valid_until_us: None,
    }
}

pub fn summary(b: Block) -> Summary {
    Summary {
        text: sum_text(b),
        written_us: BASE_US,
        built_from: BuiltFrom::Raw,
        inputs_crc: 0,
    }
}

/// Every block of a fully summarized history of `t` memories, smallest first.
pub fn all_blocks(t: u64) -> Vec<Block> {
    let mut out = Vec::new();
    let mut level = 1u8;
    while (1u64 << level) <= t {
        let size = 1u64 << level;
        for k in 0..t / size {
            out.push(Block::new(level, k * size).expect("block"));
        }
        level += 1;
    }
    out
}

/// One session message of a few hundred bytes, as an agent library would save it.
pub fn message(session: usize, i: usize) -> String {
    let role = if i.is_multiple_of(2) {
        "user"
    } else {
        "assistant"
    };
    format!(
        r#"{{"role":"{role}","content":"session {session} turn {i}: a realistic message of a few hundred bytes, talking about the build, the tests and the next step to take in this project; {}"}}"#,
        "x".repeat(150)
    )
}

/// A message of about 2 KB, as a tool's output is: the long session of `session_long`.
pub fn message_2k(session: usize, i: usize) -> String {
    let head = format!(
        r#"{{"role":"tool","content":"session {session} turn {i}: output of the test run: "#
    );
    let pad = 2048usize.saturating_sub(head.len() + 2);
    format!("{head}{}\"}}", "y".repeat(pad))
}

pub fn session_id(s: usize) -> String {
    format!("session-{s:05}")
}

pub fn json_array(msgs: &[String]) -> String {
    let mut out = String::with_capacity(msgs.iter().map(|m| m.len() + 1).sum::<usize>() + 2);
    out.push('[');
    for (i, m) in msgs.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(m);
    }
    out.push(']');
    out
}

pub fn parse_array(json: &str) -> Vec<String> {
    let raw: Vec<Box<serde_json::value::RawValue>> =
        serde_json::from_str(json).expect("a JSON array");
    raw.into_iter().map(|r| r.get().to_string()).collect()
}

/// The first line of a wake of `t` memories, in a buffer sized for a cover of `blocks` blocks;
/// the engines other than somna write the same text as `Store::wake_text`.
pub fn wake_begin(t: u64, blocks: usize) -> String {
    let mut out = String::with_capacity(blocks * 96 + 128);
    let _ = writeln!(
        out,
        "Your memory, part 1 of 1, oldest first ({t} memories)."
    );
    out
}

/// The last line of a wake.
pub const WAKE_END: &str = "You are awake.\n";

/// The newest lines (of `lines`, oldest first) that fit recall's byte budget, oldest first.
pub fn keep_newest(lines: Vec<String>) -> Vec<String> {
    let mut kept = Vec::new();
    let mut bytes = 0usize;
    for l in lines.into_iter().rev() {
        if bytes + l.len() < RECALL_BYTES {
            bytes += l.len() + 1;
            kept.push(l);
        } else {
            break;
        }
    }
    kept.reverse();
    kept
}
