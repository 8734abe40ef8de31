//! Session save cost as history grows: sessions grown turn by turn to 200 messages, saving the
//! whole list after every turn (the pure_agents pattern). Reports the cost of the 1st and the
//! 200th save and the bytes the process wrote per save (from /proc/self/io), for somna and for
//! the JSON-file store of agent libraries (temp file + fsync + rename of the whole list).
//!
//! `cargo bench --bench sessions` (`-- --quick` for fewer sessions).

use std::io::Write;
use std::time::{Duration, Instant};

use somna::{Options, Store};

fn io_written() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("write_bytes: ")
                    .and_then(|v| v.trim().parse().ok())
            })
        })
        .unwrap_or(0)
}

fn message(i: usize) -> String {
    let role = if i.is_multiple_of(2) {
        "user"
    } else {
        "assistant"
    };
    format!(
        r#"{{"role":"{role}","content":"turn {i}: a realistic message of a few hundred bytes, talking about the build, the tests and the next step to take in this project; {}"}}"#,
        "x".repeat(150)
    )
}

struct Row {
    first: Duration,
    last: Duration,
    first_bytes: f64,
    last_bytes: f64,
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn run(sessions: usize, turns: usize, mut save: impl FnMut(usize, &[String])) -> Row {
    let msgs: Vec<String> = (0..turns).map(message).collect();
    let mut first = Vec::new();
    let mut last = Vec::new();
    let (mut fb, mut lb) = (0u64, 0u64);
    for s in 0..sessions {
        for t in 1..=turns {
            let before = io_written();
            let start = Instant::now();
            save(s, &msgs[..t]);
            let el = start.elapsed();
            let written = io_written() - before;
            if t == 1 {
                first.push(el);
                fb += written;
            }
            if t == turns {
                last.push(el);
                lb += written;
            }
        }
    }
    Row {
        first: median(first),
        last: median(last),
        first_bytes: fb as f64 / sessions as f64,
        last_bytes: lb as f64 / sessions as f64,
    }
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let sessions = if quick { 5 } else { 20 };
    let turns = 200;
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::create_with(dir.path().join("s.redb"), Options::default()).expect("create");
    let somna = run(sessions, turns, |s, msgs| {
        let refs: Vec<&str> = msgs.iter().map(String::as_str).collect();
        store
            .session_save(&format!("session-{s}"), &refs, None)
            .expect("save");
    });
    let jdir = dir.path().join("json");
    std::fs::create_dir(&jdir).expect("mkdir");
    let json = run(sessions, turns, |s, msgs| {
        let path = jdir.join(format!("session-{s}.json"));
        let tmp = jdir.join(format!("session-{s}.json.tmp"));
        let mut f = std::fs::File::create(&tmp).expect("create");
        f.write_all(b"[").expect("write");
        for (i, m) in msgs.iter().enumerate() {
            if i > 0 {
                f.write_all(b",").expect("write");
            }
            f.write_all(m.as_bytes()).expect("write");
        }
        f.write_all(b"]").expect("write");
        f.sync_all().expect("fsync");
        std::fs::rename(&tmp, &path).expect("rename");
    });
    println!("{sessions} sessions x {turns} turns, whole list saved after every turn");
    println!(
        "{:<10} {:>14} {:>14} {:>8} {:>16} {:>16}",
        "engine", "save#1 us", "save#200 us", "ratio", "bytes/save#1", "bytes/save#200"
    );
    for (name, r) in [("somna", &somna), ("jsonfile", &json)] {
        println!(
            "{name:<10} {:>14.1} {:>14.1} {:>7.2}x {:>16.0} {:>16.0}",
            r.first.as_secs_f64() * 1e6,
            r.last.as_secs_f64() * 1e6,
            r.last.as_secs_f64() / r.first.as_secs_f64(),
            r.first_bytes,
            r.last_bytes
        );
    }
}
