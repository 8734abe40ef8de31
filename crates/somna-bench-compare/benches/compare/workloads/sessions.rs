//! Conversation histories: sessions grown turn by turn with a whole-list save after every turn
//! (time and bytes written per save), then 10,000 stored sessions loaded and listed, and the
//! bytes on disk per message.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use super::{
    disk_bytes, file_bytes, io_written, median_ns, medians_of, same_answers, Plan, ROUNDS,
};
use crate::data::{message, message_2k, session_id};
use crate::engines::redb_floor::SessionFloor;
use crate::engines::{self, Entry, SessionEngine};
use crate::report::{Report, BYTES, NS};

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
                "{w}: {label}: {:.0} saves/s, {:.1} us/save, {per_save:.0} bytes written/save",
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

/// A realistic long session: `long_messages` messages of 2 KB (tool outputs) stored, then
/// `long_saves` saves each adding one message (the whole list, as a framework saves it), the
/// engines taking turns in rounds. Bytes written per save are also measured at the start of the
/// same session (history of 10), to show whether they grow with the history.
pub fn session_long(plan: &Plan, dir: &Path, rep: &mut Report) {
    let w = "session_long";
    let (len, saves) = (plan.long_messages, plan.long_saves);
    println!(
        "{w}: one session of {len} messages of 2 KB, then {saves} saves of one more message each"
    );
    let mut engines = open(&engines::list(true), &dir.join("sl"), &[w], rep);
    let id = session_id(0);
    let msgs: Vec<String> = (0..len + saves).map(|i| message_2k(0, i)).collect();
    let short = 10usize;
    // Bytes per save with a short history: saves 11..=20, one engine after the other.
    let mut early = vec![0u64; engines.len()];
    for (k, e) in engines.iter_mut().enumerate() {
        for t in 1..=short {
            e.save(&id, &msgs[..t]);
        }
        let io0 = io_written();
        for t in short + 1..=2 * short {
            e.save(&id, &msgs[..t]);
        }
        early[k] = io_written() - io0;
    }
    for e in engines.iter_mut() {
        e.save(&id, &msgs[..len]);
    }
    let per_round = saves.div_ceil(ROUNDS);
    let mut elapsed = vec![Duration::ZERO; engines.len()];
    let mut bytes = vec![0u64; engines.len()];
    let mut done = vec![len; engines.len()];
    for r in 0..ROUNDS {
        for k in 0..engines.len() {
            let e = (k + r) % engines.len();
            let io0 = io_written();
            let start = Instant::now();
            for _ in 0..per_round {
                if done[e] < len + saves {
                    done[e] += 1;
                    engines[e].save(&id, &msgs[..done[e]]);
                }
            }
            elapsed[e] += start.elapsed();
            bytes[e] += io_written() - io0;
        }
    }
    for e in &engines {
        let n = e.load(&id).map(|m| m.len());
        assert_eq!(n, Some(len + saves), "{} lost messages", e.name());
    }
    let names: Vec<&'static str> = engines.iter().map(|e| e.name()).collect();
    close(engines);
    // The append contract (Agents SDK, LangChain): only the new message is passed, so nothing
    // of the history is hashed or read.
    {
        let store = crate::engines::somna::create(&dir.join("sl-append.redb"), false);
        let refs: Vec<&str> = msgs[..len].iter().map(String::as_str).collect();
        store.session_save(&id, &refs, None).expect("save");
        let io0 = io_written();
        let start = Instant::now();
        for m in &msgs[len..] {
            store
                .session_append(&id, &[m.as_str()], None, None)
                .expect("append");
        }
        let took = start.elapsed();
        let written = io_written() - io0;
        rep.diag(format!(
            "{w}: somna session_append of each new message instead of a whole-list save: {:.1} us/append, {:.0} bytes written/append",
            took.as_secs_f64() * 1e6 / saves as f64,
            written as f64 / saves as f64
        ));
    }
    for (k, engine) in names.into_iter().enumerate() {
        let per_save = bytes[k] as f64 / saves as f64;
        let short_save = early[k] as f64 / short as f64;
        let us = elapsed[k].as_secs_f64() * 1e6 / saves as f64;
        match engines::variant_label(engine) {
            Some(label) => {
                rep.put(w, engine, NS, us * 1e3);
                rep.diag(format!(
                    "{w}: {label}: {us:.1} us/save, {per_save:.0} bytes written/save"
                ));
            }
            None => {
                rep.rate(w, engine, saves, elapsed[k]);
                rep.put(w, engine, BYTES, per_save);
                rep.fact(&format!("{engine} long short"), short_save);
                rep.fact(&format!("{engine} long long"), per_save);
            }
        }
        rep.diag(format!(
            "{w}: {engine}: bytes written per save {short_save:.0} with 10 messages stored, {per_save:.0} with {len} (a new message is 2,048 bytes)"
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
    // redb's floor: the same sessions in a somna store of their own, closed, then read by
    // redb directly (redb will not open a file twice).
    {
        let mut f = crate::engines::somna::Somna::open(&dir.join("ss-floor"), false);
        f.fill(n, &msgs_of);
        f.settle();
    }
    let floor = SessionFloor::open(&crate::engines::somna::file(&dir.join("ss-floor"), false));
    // Same answers everywhere.
    let id = session_id(n / 2);
    let loads: Vec<_> = engines.iter().map(|e| (e.name(), e.load(&id))).collect();
    assert!(loads[0].1.is_some(), "{id} is missing");
    same_answers(&format!("load {id}"), &loads);
    let lists: Vec<_> = engines.iter().map(|e| (e.name(), e.ids())).collect();
    assert_eq!(lists[0].1.len(), n);
    same_answers("list", &lists);
    assert_eq!(floor.load(&id), loads[0].1.clone().unwrap_or_default());
    assert_eq!(floor.list(), lists[0].1);

    load_and_list(plan, &engines, &floor, rep);
    drop(floor);
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
fn load_and_list(
    plan: &Plan,
    engines: &[Box<dyn SessionEngine>],
    floor: &SessionFloor,
    rep: &mut Report,
) {
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
    fs.push(Box::new(|| {
        std::hint::black_box(floor.load(&next()));
    }));
    let mm = medians_of(plan.load_iters, &mut fs);
    drop(fs);
    for (e, ns) in engines.iter().zip(&mm) {
        rep.latency(w, e.name(), *ns);
    }
    floor_line(
        rep,
        w,
        "its record's count, then its chunks by range until they hold it, each decoded into its messages' Strings",
        &mm,
        engines,
    );

    let w = "session_list";
    let mut fs: Vec<Box<dyn FnMut() + '_>> = Vec::new();
    for e in engines {
        fs.push(Box::new(|| {
            std::hint::black_box(e.list());
        }));
    }
    fs.push(Box::new(|| {
        std::hint::black_box(floor.list());
    }));
    let mm = medians_of(plan.list_iters, &mut fs);
    drop(fs);
    for (e, ns) in engines.iter().zip(&mm) {
        rep.latency(w, e.name(), *ns);
    }
    floor_line(
        rep,
        w,
        "every id and record by range, the record's envelope checked",
        &mm,
        engines,
    );
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

/// The diagnostic line of redb's floor (the last of `mm`) against somna and SQLite.
fn floor_line(
    rep: &mut Report,
    w: &str,
    what: &str,
    mm: &[f64],
    engines: &[Box<dyn SessionEngine>],
) {
    let Some(&f) = mm.last() else { return };
    let of = |name: &str| {
        engines
            .iter()
            .zip(mm)
            .find(|(e, _)| e.name() == name)
            .map(|(_, ns)| *ns)
    };
    rep.fact(&format!("{w} floor"), f);
    rep.diag(format!(
        "{w}: redb floor ({what}; same rounds): {:.1} us; somna is {:.2}x the floor; SQLite is {:.2}x the floor",
        f / 1e3,
        of(crate::engines::SOMNA).unwrap_or(f64::NAN) / f,
        of(crate::engines::SQLITE).unwrap_or(f64::NAN) / f,
    ));
}
