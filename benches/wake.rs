//! Wake cost against history size: wake (96 lines) over fully summarized histories of 10^3,
//! 10^4, 10^5 and 10^6 memories, in process (store open, read transaction, cover, render) and
//! through the real CLI process. The claim it checks: wake reads O(B log T) values, so wake at
//! 10^6 costs no more than twice wake at 10^3.
//!
//! `cargo bench --bench wake` (add `-- --quick` for fewer iterations).

use std::time::{Duration, Instant};

use somna::{Block, BuiltFrom, Kind, Memory, Options, Status, Store, Summary, WakeOptions};

fn build(path: &std::path::Path, t: u64) -> Store {
    let store = Store::create_with(path, Options::default().exclusive(true)).expect("create");
    let day = 86_400_000_000i64;
    let memories: Vec<Memory> = (0..t)
        .map(|i| Memory {
            id: i,
            observed_us: 1_700_000_000_000_000 + (i as i64) * day / 100,
            recorded_us: 1_700_000_000_000_000 + (i as i64) * day / 100,
            text: format!(
                "memory {i}: the build of module {} passed after fixing flaky test {}",
                i % 97,
                i % 13
            ),
            kind: Kind::Observation,
            status: Status::Accepted,
            source: None,
            source_uri: None,
            supersedes: vec![],
            conflicts_with: vec![],
            valid_until_us: None,
        })
        .collect();
    let mut summaries = Vec::new();
    let mut level = 1u8;
    while (1u64 << level) <= t {
        let size = 1u64 << level;
        for k in 0..t / size {
            let b = Block::new(level, k * size).expect("block");
            summaries.push((
                b,
                Summary {
                    text: format!(
                        "summary of {b}: builds of several modules passed; flaky tests fixed"
                    ),
                    written_us: 1_700_000_000_000_000,
                    built_from: BuiltFrom::Raw,
                    inputs_crc: 0,
                },
            ));
        }
        level += 1;
    }
    // `write` takes an `FnMut` (it may run again): hand the data over once.
    let mut load = Some((memories, summaries));
    store
        .write(|tx| {
            let (m, s) = load.take().expect("one attempt");
            tx.restore_scope("default", m, s)
        })
        .expect("load");
    store
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let iters = if quick { 200 } else { 2000 };
    let dir = tempfile::tempdir().expect("tempdir");
    let exe = std::env::var("SOMNA_BIN")
        .ok()
        .map(std::path::PathBuf::from)
        .or_else(|| {
            let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target/release/somna");
            p.exists().then_some(p)
        });
    println!(
        "{:>9} {:>14} {:>14} {:>8} {:>16}",
        "memories", "wake_us(lib)", "open+wake_us", "lines", "cli_wake_us"
    );
    let mut results = Vec::new();
    for t in [1_000u64, 10_000, 100_000, 1_000_000] {
        let path = dir.path().join(format!("wake{t}.redb"));
        let store = build(&path, t);
        drop(store);
        let store = Store::open(&path).expect("open");
        let opts = WakeOptions::default();
        let text = store.wake_text("default", &opts).expect("wake");
        let lines = text.lines().count();
        for _ in 0..20 {
            store.wake_text("default", &opts).expect("wake");
        }
        let mut lib = Vec::with_capacity(iters);
        for _ in 0..iters {
            let s = Instant::now();
            let w = store.wake_text("default", &opts).expect("wake");
            lib.push(s.elapsed());
            std::hint::black_box(w);
        }
        drop(store);
        let mut open = Vec::new();
        for _ in 0..(iters / 10).max(20) {
            let s = Instant::now();
            let st = Store::open(&path).expect("open");
            let w = st.wake_text("default", &opts).expect("wake");
            open.push(s.elapsed());
            std::hint::black_box(w);
        }
        let cli = exe.as_ref().map(|exe| {
            let mut v = Vec::new();
            for _ in 0..30 {
                let s = Instant::now();
                let o = std::process::Command::new(exe)
                    .args(["--db", path.to_str().expect("utf8"), "wake"])
                    .output()
                    .expect("run somna");
                v.push(s.elapsed());
                assert!(o.status.success());
            }
            median(v)
        });
        let (l, o) = (median(lib), median(open));
        println!(
            "{t:>9} {:>14.1} {:>14.1} {lines:>8} {:>16}",
            l.as_secs_f64() * 1e6,
            o.as_secs_f64() * 1e6,
            cli.map(|c| format!("{:.1}", c.as_secs_f64() * 1e6))
                .unwrap_or_else(|| "-".into())
        );
        results.push((t, l, o));
    }
    if let (Some(first), Some(last)) = (results.first(), results.last()) {
        println!(
            "ratio wake(10^6)/wake(10^3): lib {:.2}x, open+wake {:.2}x",
            last.1.as_secs_f64() / first.1.as_secs_f64(),
            last.2.as_secs_f64() / first.2.as_secs_f64()
        );
    }
}
