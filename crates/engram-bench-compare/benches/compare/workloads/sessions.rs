//! Conversation histories: sessions grown turn by turn with a whole-list save after every turn
//! (time and bytes written per save), then 10,000 stored sessions loaded and listed, and the
//! bytes on disk per message.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{disk_bytes, file_bytes, io_written, median_ns, medians_of, same_answers, Plan};
use crate::data::{message, session_id};
use crate::engines::{self, Entry, SessionEngine};
use crate::report::{Report, BYTES};

/// Opens the session store of every entry that has one at `stem`; records why the others have
/// none for each workload of `ws`.
fn open(
    entries: &[&Entry],
    stem: &Path,
    ws: &[&str],
    rep: &mut Report,
) -> Vec<Box<dyn SessionEngine>> {
    let mut out = Vec::new();
    for e in entries {
        match (e.sessions)(stem) {
            Ok(s) => out.push(s),
            Err(why) => {
                for w in ws {
                    rep.not_measured(w, e.name, why);
                }
            }
        }
    }
    out
}

/// Settles and closes the engines; returns each one's files.
fn close(mut engines: Vec<Box<dyn SessionEngine>>) -> Vec<(&'static str, Vec<PathBuf>)> {
    let mut files = Vec::new();
    for e in engines.iter_mut() {
        e.settle();
        files.push((e.name(), e.files()));
    }
    files
}

#[derive(Default)]
struct Growth {
    elapsed: Duration,
    saves: usize,
    bytes: u64,
    early: u64,
    late: u64,
}

/// Grows session `s` turn by turn to `turns` messages, saving the whole list after every turn.
/// Bytes written (from /proc/self/io) are also sampled over the first and the last ten turns.
fn grow_one(g: &mut Growth, s: usize, turns: usize, e: &mut dyn SessionEngine) {
    let window = 10.min(turns);
    let id = session_id(s);
    let msgs: Vec<String> = (0..turns).map(|i| message(s, i)).collect();
    let io0 = io_written();
    let mut mark = io0;
    let start = Instant::now();
    for t in 1..=turns {
        if t == turns - window + 1 {
            mark = io_written();
        }
        e.save(&id, &msgs[..t]);
        if t == window {
            g.early += io_written() - io0;
        }
    }
    g.elapsed += start.elapsed();
    let io1 = io_written();
    g.late += io1 - mark;
    g.bytes += io1 - io0;
    g.saves += turns;
}

/// `growth_sessions` sessions grown to `turns` messages, session by session, the engines taking
/// turns (rotating order).
pub fn session_growth(plan: &Plan, dir: &Path, rep: &mut Report) {
    let w = "session_growth";
    let (sessions, turns) = (plan.growth_sessions, plan.turns);
    println!(
        "{w}: {sessions} sessions grown to {turns} messages, the whole list saved after every turn"
    );
    if plan.quick {
        rep.note(format!(
            "{w}: quick mode, {sessions} sessions per engine (full: 100)"
        ));
    }
    let mut engines = open(&engines::list(true), &dir.join("sg"), &[w], rep);
    let mut growth: Vec<Growth> = engines.iter().map(|_| Growth::default()).collect();
    for s in 0..sessions {
        for k in 0..engines.len() {
            let e = (k + s) % engines.len();
            grow_one(&mut growth[e], s, turns, engines[e].as_mut());
        }
    }
    for e in &engines {
        let n = e.load(&session_id(0)).map(|m| m.len());
        assert_eq!(n, Some(turns), "{} lost messages", e.name());
    }
    let files = close(engines);
    let payload = (0..turns).map(|i| message(0, i).len()).sum::<usize>() as f64 / turns as f64;
    let window = (sessions * 10.min(turns)) as f64;
    for ((engine, files), g) in files.into_iter().zip(growth) {
        let per_save = g.bytes as f64 / g.saves as f64;
        if let Some(label) = engines::variant_label(engine) {
            rep.diag(format!(
                "{w}: {label} (one fsync per commit): {:.0} saves/s, {:.1} us/save, {per_save:.0} bytes written/save",
                g.saves as f64 / g.elapsed.as_secs_f64(),
                g.elapsed.as_secs_f64() * 1e6 / g.saves as f64,
            ));
            continue;
        }
        rep.rate(w, engine, g.saves, g.elapsed);
        rep.put(w, engine, BYTES, per_save);
        let (early, late) = (g.early as f64 / window, g.late as f64 / window);
        rep.fact(&format!("{engine} early"), early);
        rep.fact(&format!("{engine} late"), late);
        println!("  {w:<16} {engine:<9} {per_save:>12.0} bytes written/save (mean)");
        rep.diag(format!(
            "{w}: {engine}: bytes written per save {early:.0} over turns 1-10, {late:.0} over turns {}-{} (a new message is {payload:.0} bytes); {:.0} bytes on disk per message after the run",
            turns - 9,
            turns,
            disk_bytes(&files) as f64 / (sessions * turns) as f64
        ));
    }
}

/// `stored_sessions` sessions of `stored_messages` messages: load and list (the engines in
/// alternating rounds), then the bytes on disk per message.
pub fn sessions(plan: &Plan, dir: &Path, rep: &mut Report) {
    let (n, m) = (plan.stored_sessions, plan.stored_messages);
    println!("session_load, session_list: {n} sessions of {m} messages stored");
    let ws = ["session_load", "session_list", "disk_bytes_per_message"];
    let mut engines = open(&engines::list(false), &dir.join("ss"), &ws, rep);
    let msgs_of = |s: usize| -> Vec<String> { (0..m).map(|i| message(s, i)).collect() };
    for e in engines.iter_mut() {
        e.fill(n, &msgs_of);
    }
    // Same answers everywhere.
    let id = session_id(n / 2);
    let loads: Vec<_> = engines.iter().map(|e| (e.name(), e.load(&id))).collect();
    assert!(loads[0].1.is_some(), "{id} is missing");
    same_answers(&format!("load {id}"), &loads);
    let lists: Vec<_> = engines.iter().map(|e| (e.name(), e.ids())).collect();
    assert_eq!(lists[0].1.len(), n);
    same_answers("list", &lists);

    load_and_list(plan, &engines, rep);
    let w = "disk_bytes_per_message";
    println!("{w}: bytes allocated on disk / messages, for the {n} x {m} stored sessions");
    let files = close(engines);
    let total = (n * m) as f64;
    let mut apparent = Vec::new();
    for (e, f) in &files {
        rep.bytes(w, e, disk_bytes(f) as f64 / total);
        apparent.push(format!("{e} {:.0}", file_bytes(f) as f64 / total));
    }
    let payload = (0..m).map(|i| message(0, i).len()).sum::<usize>() as f64 / m as f64;
    rep.diag(format!(
        "{w}: a message is {payload:.0} bytes of JSON; apparent sizes: {} bytes/message",
        apparent.join(", ")
    ));
}

/// Loads of sessions spread over the store (one counter shared by the engines, so each loads
/// different ones), then whole lists; the engines in alternating rounds.
fn load_and_list(plan: &Plan, engines: &[Box<dyn SessionEngine>], rep: &mut Report) {
    let n = plan.stored_sessions;
    let w = "session_load";
    let pick = |k: usize| session_id(k * 7919 % n);
    let k = std::cell::Cell::new(0usize);
    let next = || {
        k.set(k.get() + 1);
        pick(k.get())
    };
    let mut fs: Vec<Box<dyn FnMut() + '_>> = Vec::new();
    for e in engines {
        fs.push(Box::new(|| {
            std::hint::black_box(e.load(&next()));
        }));
    }
    let mm = medians_of(plan.load_iters, &mut fs);
    drop(fs);
    for (e, ns) in engines.iter().zip(mm) {
        rep.latency(w, e.name(), ns);
    }

    let w = "session_list";
    let mut fs: Vec<Box<dyn FnMut() + '_>> = Vec::new();
    for e in engines {
        fs.push(Box::new(|| e.list()));
    }
    let mm = medians_of(plan.list_iters, &mut fs);
    drop(fs);
    for (e, ns) in engines.iter().zip(mm) {
        rep.latency(w, e.name(), ns);
    }
    for e in engines {
        if e.ids_only().is_some() {
            let ids_ns = median_ns(plan.list_iters, || {
                std::hint::black_box(e.ids_only());
            });
            rep.diag(format!(
                "{w}: {} session_ids() (ids only, the pure_agents list_sessions contract): {:.0} us",
                e.name(),
                ids_ns / 1e3
            ));
        }
    }
}
