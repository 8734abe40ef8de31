//! CPU profile targets for callgrind (`-- --only profile:note|note-mw|note-mw0|batch|session|session-long|session-long-mw|wake|
//! wake3|wake6|recall|load|load-big`): the somna work of one workload, in a function named `measured_part` so that
//! `valgrind --tool=callgrind --toggle-collect='*measured_part*'` leaves the setup out. Also
//! `profile:store:N`, which only builds a history of N memories at `$SOMNA_BENCH_KEEP`, and
//! `profile:note-at`, 200 default-mode notes to the store there (a commit's cost by store size).

use std::path::Path;

use ::somna::{RecallQuery, Store, WakeOptions};

use crate::data::{message, message_2k, session_id, RECALL_PATTERN, SCOPE};
use crate::engines::somna::{build, create, new_memory};

pub fn profile(dir: &Path, what: &str) {
    let path = dir.join("pf.redb");
    match what {
        "note" | "note-mw" => notes(&create(&path, what == "note")),
        // The default mode without the shared journal: one durable redb commit per note
        "note-mw0" => notes(
            &Store::create_with(&path, ::somna::Options::default().shared_journal(false))
                .expect("create store"),
        ),
        "batch" => {
            // note_batch's shape: 10 durable batches of 1,000 memories.
            let store = create(&path, false);
            measured_part(&mut || {
                for b in 0..10u64 {
                    let items = (b * 1000..(b + 1) * 1000).map(new_memory).collect();
                    store.append(SCOPE, items, None).expect("append");
                }
            });
        }
        "session" => {
            let store = create(&path, true);
            let msgs: Vec<String> = (0..200).map(|i| message(0, i)).collect();
            measured_part(&mut || {
                for k in 1..=200 {
                    let refs: Vec<&str> = msgs[..k].iter().map(String::as_str).collect();
                    store.session_save("s", &refs, None).expect("save");
                }
            });
        }
        "session-long" | "session-long-mw" => {
            let store = create(&path, what == "session-long");
            let msgs: Vec<String> = (0..2020).map(|i| message_2k(0, i)).collect();
            let refs: Vec<&str> = msgs.iter().map(String::as_str).collect();
            store.session_save("s", &refs[..2000], None).expect("save");
            let start = std::time::Instant::now();
            measured_part(&mut || {
                for k in 2001..=2020 {
                    store.session_save("s", &refs[..k], None).expect("save");
                }
            });
            println!(
                "{what}: {:.0} us a save",
                start.elapsed().as_secs_f64() * 1e6 / 20.0
            );
        }
        "note-at" => notes(&Store::open(keep("note-at")).expect("open")),
        "load" => load(&path),
        "load-big" => load_big(&path),
        "wake" | "wake3" | "wake6" => {
            let t = match what {
                "wake3" => 1_000,
                "wake6" => 1_000_000,
                _ => 10_000,
            };
            build(&path, t);
            let store = Store::open(&path).expect("open");
            let opts = WakeOptions::default();
            measured_part(&mut || {
                for _ in 0..100 {
                    std::hint::black_box(store.wake_text(SCOPE, &opts).expect("wake"));
                }
            });
        }
        "recall" => {
            build(&path, 20_000);
            let store = Store::open(&path).expect("open");
            let q = RecallQuery::new(RECALL_PATTERN);
            measured_part(&mut || {
                for _ in 0..10 {
                    std::hint::black_box(store.recall(SCOPE, &q).expect("recall"));
                }
            });
        }
        other => match other
            .strip_prefix("store:")
            .and_then(|n| n.parse::<u64>().ok())
        {
            // `profile:store:N` builds a fully summarized history of N memories and keeps it
            // at `$SOMNA_BENCH_KEEP` (for the CLI start-to-exit and peak-RSS measurements of
            // docs/performance.md, which run the `somna` binary on it).
            Some(t) => build(&keep("store:N"), t),
            None => match other
                .strip_prefix("rss:")
                .and_then(|n| n.parse::<usize>().ok())
            {
                Some(mib) => rss(mib),
                None => panic!("unknown profile target {other:?}"),
            },
        },
    }
    println!("profile {what}: done");
}

/// 200 loads of 20-message sessions among 1,000, then 20 lists.
fn load(path: &Path) {
    let store = create(path, true);
    store
        .write(|tx| {
            for k in 0..1000 {
                let msgs: Vec<String> = (0..20).map(|i| message(k, i)).collect();
                let refs: Vec<&str> = msgs.iter().map(String::as_str).collect();
                tx.session_save(&session_id(k), &refs, None)?;
            }
            Ok(())
        })
        .expect("save");
    measured_part(&mut || {
        for k in 0..200 {
            std::hint::black_box(store.session_load(&session_id(k * 7 % 1000)).expect("load"));
        }
        for _ in 0..20 {
            std::hint::black_box(store.session_list("", None, None).expect("list"));
        }
    });
}

/// session_load's shape: 10,000 sessions of 20 messages in a default-mode store (more than
/// redb's page cache holds), reopened, then 50,000 loads spread over them (for `perf`; under
/// callgrind, use `load`).
fn load_big(path: &Path) {
    {
        let store = create(path, false);
        for b in 0..10 {
            store
                .write(|tx| {
                    for k in b * 1000..(b + 1) * 1000 {
                        let msgs: Vec<String> = (0..20).map(|i| message(k, i)).collect();
                        let refs: Vec<&str> = msgs.iter().map(String::as_str).collect();
                        tx.session_save(&session_id(k), &refs, None)?;
                    }
                    Ok(())
                })
                .expect("save");
        }
    }
    let store = Store::open(path).expect("open");
    measured_part(&mut || {
        for k in 0..50_000 {
            std::hint::black_box(
                store
                    .session_load(&session_id(k * 7919 % 10_000))
                    .expect("load"),
            );
        }
    });
}

/// 200 durable single notes to `store`, measured; the median time of one is printed.
fn notes(store: &Store) {
    let mut times = Vec::with_capacity(200);
    measured_part(&mut || {
        for i in 0..200 {
            let t = std::time::Instant::now();
            store.note(SCOPE, new_memory(i)).expect("note");
            times.push(t.elapsed());
        }
    });
    times.sort();
    eprintln!(
        "median note: {:.1} us",
        times[times.len() / 2].as_secs_f64() * 1e6
    );
}

/// The store path in `$SOMNA_BENCH_KEEP`, which the target `what` needs.
fn keep(what: &str) -> std::path::PathBuf {
    std::env::var_os("SOMNA_BENCH_KEEP")
        .unwrap_or_else(|| panic!("profile:{what} needs SOMNA_BENCH_KEEP=<path of a store>"))
        .into()
}

#[inline(never)]
fn measured_part(f: &mut dyn FnMut()) {
    f();
}

/// `profile:rss:MIB`: opens the store at `$SOMNA_BENCH_KEEP` with a page cache of MIB MiB and
/// prints the process's peak resident set (VmHWM) after opening, after 20 wakes and after 3
/// recalls: what the cache setting bounds.
fn rss(mib: usize) {
    let keep = keep("rss:MIB");
    let hwm = || {
        std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmHWM:").map(|v| v.trim().to_string()))
            })
            .unwrap_or_default()
    };
    let store =
        Store::open_with(&keep, ::somna::Options::default().cache_bytes(mib << 20)).expect("open");
    println!("rss: cache {mib} MiB; after open: {}", hwm());
    let t = store.count(SCOPE).expect("count");
    for _ in 0..20 {
        std::hint::black_box(
            store
                .wake_text(SCOPE, &WakeOptions::default())
                .expect("wake"),
        );
    }
    println!("rss: after 20 wakes of {t} memories: {}", hwm());
    let q = RecallQuery::new(RECALL_PATTERN);
    for _ in 0..3 {
        std::hint::black_box(store.recall(SCOPE, &q).expect("recall"));
    }
    println!("rss: after 3 recalls over {t} memories: {}", hwm());
}
