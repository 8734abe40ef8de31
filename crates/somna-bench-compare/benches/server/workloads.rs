//! The workloads, each run on somna (a store in its own schema) and on the SQL baseline (its
//! own schema) of the same server, checked for equal answers before anything is timed, and
//! timed in alternating rounds (rotating order), so that a busy moment of the shared machine
//! falls on both.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use somna::{NewMemory, Options, RecallQuery, Store, WakeOptions};

use crate::baseline::{self, Sql};
use crate::data;
use crate::host::load;
use crate::proxy::Proxy;
use crate::report::{Report, Row, Unit};

/// The scope (somna) and prefix (baseline) of the history.
const HIST: &str = "default";

/// The sizes of a run: full, or `--quick`.
pub struct Plan {
    pub quick: bool,
    pub rounds: usize,
    pub notes_1: usize,
    pub procs: usize,
    pub notes_per_proc: usize,
    pub history: u64,
    pub wake_iters: usize,
    pub recall_iters: usize,
    pub turns: usize,
    pub load_messages: usize,
    pub load_iters: usize,
}

impl Plan {
    pub fn new(quick: bool) -> Plan {
        Plan {
            quick,
            rounds: if quick { 2 } else { 5 },
            notes_1: if quick { 100 } else { 300 },
            procs: 8,
            notes_per_proc: if quick { 25 } else { 75 },
            history: 100_000,
            wake_iters: if quick { 100 } else { 1000 },
            recall_iters: if quick { 5 } else { 15 },
            turns: if quick { 300 } else { 2000 },
            load_messages: 200,
            load_iters: if quick { 200 } else { 2000 },
        }
    }
}

/// The server: its URL (no query string) and where the counting proxy points.
pub struct Server {
    pub url: String,
    pub host: String,
    pub port: u16,
}

impl Server {
    /// The URL of somna's store in `schema`.
    pub fn somna_url(&self, schema: &str) -> String {
        format!("{}?schema={schema}", self.url)
    }

    /// The same URL through the proxy.
    pub fn proxied(&self, proxy: &Proxy, schema: Option<&str>) -> String {
        let base = self.url.replacen(
            &format!("{}:{}", self.host, self.port),
            &format!("127.0.0.1:{}", proxy.port),
            1,
        );
        // Named, so that a server log with `log_statement = all` and `%a` in its prefix shows
        // the counted statements apart.
        match schema {
            Some(s) => format!("{base}?schema={s}&application_name=rt_somna"),
            None => format!("{base}?application_name=rt_sql"),
        }
    }

    pub fn drop_schema(&self, schema: &str) {
        let mut c = postgres::Client::connect(&self.url, postgres::NoTls).expect("connect");
        c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
            .expect("drop schema");
    }

    /// A fresh somna store in `schema`.
    pub fn fresh_store(&self, schema: &str) -> Store {
        self.drop_schema(schema);
        Store::create(self.somna_url(schema)).expect("create the store on the server")
    }
}

/// Median and 95th percentile (µs) of samples in nanoseconds.
fn stats(mut v: Vec<u64>) -> (f64, f64) {
    v.sort_unstable();
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize] as f64 / 1e3;
    (at(0.5), at(0.95))
}

/// Samples (ns) of each function, a warm-up first, in alternating rounds (rotating order).
fn samples(iters: usize, fs: &mut [&mut dyn FnMut()]) -> Vec<Vec<u64>> {
    for f in fs.iter_mut() {
        for _ in 0..(iters / 10).clamp(2, 50) {
            f();
        }
    }
    let rounds = 5.min(iters);
    let per = iters.div_ceil(rounds);
    let mut out: Vec<Vec<u64>> = vec![Vec::with_capacity(per * rounds); fs.len()];
    for r in 0..rounds {
        for k in 0..fs.len() {
            let e = (k + r) % fs.len();
            for _ in 0..per {
                let s = Instant::now();
                fs[e]();
                out[e].push(s.elapsed().as_nanos() as u64);
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Notes by 1 and by 8 processes.

/// The child process of the note workload: opens its store (or connection), says `ready`,
/// waits for `go`, makes `n` durable notes (memories `base..base + n`), says `done`.
pub fn child_note(args: &[String]) {
    let [engine, url, scope, base, n] = args else {
        panic!("usage: --child-note ENGINE URL SCOPE BASE N");
    };
    let base: u64 = base.parse().expect("BASE");
    let n: u64 = n.parse().expect("N");
    let mut note: Box<dyn FnMut(u64)> = match engine.as_str() {
        "somna" => {
            let store = Store::create(url).expect("open the store on the server");
            let scope = scope.clone();
            Box::new(move |i| {
                store
                    .note(
                        &scope,
                        NewMemory::new(data::mem_text(i)).observed_us(data::observed(i)),
                    )
                    .expect("note");
            })
        }
        _ => {
            let mut sql = Sql::open(url);
            let prefix = scope.clone();
            Box::new(move |i| sql.put(&prefix, &baseline::mem_key(i), &baseline::mem_value(i)))
        }
    };
    let mut out = std::io::stdout();
    writeln!(out, "ready").expect("stdout");
    out.flush().expect("stdout");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).expect("stdin");
    for i in base..base + n {
        note(i);
    }
    writeln!(out, "done").expect("stdout");
    out.flush().expect("stdout");
}

struct Kid {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

fn expect_line(k: &mut Kid, want: &str) {
    let mut line = String::new();
    k.stdout.read_line(&mut line).expect("read a child");
    assert_eq!(
        line.trim(),
        want,
        "a child process failed (its stderr is above)"
    );
}

/// Runs one child per `(scope, base, n)`, all started together once every one is connected;
/// the wall time from the start to the last one's finish.
fn processes(engine: &str, url: &str, jobs: &[(String, u64, u64)]) -> Duration {
    let exe = std::env::current_exe().expect("this program");
    let mut kids: Vec<Kid> = jobs
        .iter()
        .map(|(scope, base, n)| {
            let (base, n) = (base.to_string(), n.to_string());
            let mut child = Command::new(&exe)
                .args(["--child-note", engine, url, scope.as_str(), &base, &n])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("start a child process");
            let stdin = child.stdin.take().expect("stdin");
            let stdout = BufReader::new(child.stdout.take().expect("stdout"));
            Kid {
                child,
                stdin,
                stdout,
            }
        })
        .collect();
    for k in kids.iter_mut() {
        expect_line(k, "ready");
    }
    let start = Instant::now();
    for k in kids.iter_mut() {
        writeln!(k.stdin, "go").expect("start a child");
        k.stdin.flush().expect("start a child");
    }
    for k in kids.iter_mut() {
        expect_line(k, "done");
    }
    let took = start.elapsed();
    for k in kids.iter_mut() {
        assert!(k.child.wait().expect("wait").success(), "a child failed");
    }
    took
}

/// Durable single notes by 1 process, and by 8 processes into one shared scope and into a
/// scope each; each process is a separate OS process with its own store (or connection).
pub fn notes(plan: &Plan, srv: &Server, rep: &mut Report) {
    let (procs, per, n1) = (plan.procs, plan.notes_per_proc as u64, plan.notes_1 as u64);
    println!(
        "note: durable single notes, {n1} by 1 process, {per} by each of {procs} processes (one scope, and a scope each), {} rounds",
        plan.rounds
    );
    let load0 = load();
    let schema = "bench_note";
    let store = srv.fresh_store(schema);
    let eurl = srv.somna_url(schema);
    let mut sql = Sql::open(&srv.url);
    // kinds: 0 = one process, 1 = 8 processes into one scope, 2 = 8 processes, a scope each.
    let kinds = [
        "1 process",
        "8 processes, one scope",
        "8 processes, a scope each",
    ];
    let jobs = |kind: usize, r: usize| -> Vec<(String, u64, u64)> {
        match kind {
            0 => vec![(format!("r{r}-one"), 0, n1)],
            1 => (0..procs)
                .map(|p| (format!("r{r}-shared"), p as u64 * 1_000_000, per))
                .collect(),
            _ => (0..procs)
                .map(|p| (format!("r{r}-own-{p}"), p as u64 * 1_000_000, per))
                .collect(),
        }
    };
    // [kind][engine: 0 somna, 1 sql] total time and notes.
    let mut total = [[Duration::ZERO; 2]; 3];
    let mut count = [[0u64; 2]; 3];
    for r in 0..plan.rounds {
        for k in 0..6 {
            let slot = (k + r) % 6;
            let (kind, engine) = (slot / 2, slot % 2);
            let js = jobs(kind, r);
            // Each kind's connections are named (note_1, note_8_shared, note_8_own), so that
            // the server log (`%a` in log_line_prefix) shows whose attempts it refused.
            let app = ["note_1", "note_8_shared", "note_8_own"][kind];
            let url = if engine == 0 {
                format!("{eurl}&application_name={app}")
            } else {
                format!("{}?application_name={app}", srv.url)
            };
            let name = if engine == 0 { "somna" } else { "sql" };
            total[kind][engine] += processes(name, &url, &js);
            count[kind][engine] += js.iter().map(|j| j.2).sum::<u64>();
        }
        // Every note landed once: somna's dense ids and the baseline's rows.
        for (kind, label) in kinds.iter().enumerate() {
            let mut scopes: Vec<String> = jobs(kind, r).into_iter().map(|j| j.0).collect();
            scopes.dedup();
            let want: u64 = jobs(kind, r).iter().map(|j| j.2).sum();
            let e: u64 = scopes.iter().map(|s| store.count(s).expect("count")).sum();
            let s: u64 = scopes.iter().map(|s| sql.count(s)).sum();
            assert_eq!(
                (e, s),
                (want, want),
                "round {r}, {label}: notes lost or repeated"
            );
        }
    }
    println!("  every note present once on both (somna's counts and the baseline's rows)");
    let rate = |kind: usize, e: usize| count[kind][e] as f64 / total[kind][e].as_secs_f64();
    // Round trips of one note, through the proxy (after one note to warm the statements).
    let proxy = Proxy::start(&srv.host, srv.port);
    let pstore = Store::create(srv.proxied(&proxy, Some(schema))).expect("proxied store");
    let mut psql = Sql::open(&srv.proxied(&proxy, None));
    let note = |i: u64| {
        pstore
            .note(
                "trips",
                NewMemory::new(data::mem_text(i)).observed_us(data::observed(i)),
            )
            .expect("note");
    };
    note(0);
    let et = proxy.trips(|| (1..11).for_each(note)) as f64 / 10.0;
    psql.put("trips", "k0", &baseline::mem_value(0));
    let st = proxy.trips(|| {
        (1..11).for_each(|i| psql.put("trips", &format!("k{i}"), &baseline::mem_value(i)))
    }) as f64
        / 10.0;
    for (kind, label) in kinds.iter().enumerate() {
        let w = match kind {
            0 => "note, 1 process".to_string(),
            _ => format!("note, {label}"),
        };
        rep.row(Row {
            workload: w,
            unit: Unit::Rate,
            somna: rate(kind, 0),
            sql: rate(kind, 1),
            trips: Some((et, st)),
            target: None,
            load: load0,
        });
    }
    for (kind, label) in kinds.iter().enumerate().skip(1) {
        let (e, s) = (rate(kind, 0) / rate(0, 0), rate(kind, 1) / rate(0, 1));
        rep.row(Row {
            workload: format!("note, {label}: 8 vs 1"),
            unit: Unit::Factor,
            somna: e,
            sql: s,
            trips: None,
            target: Some(("≥ 3x".into(), e >= 3.0)),
            load: load0,
        });
    }
    if plan.quick {
        rep.note(format!("note: quick mode, {n1} notes by 1 process and {per} by each of 8 per round, {} rounds (full: 300 and 75, 5 rounds)", plan.rounds));
    }
}

// ---------------------------------------------------------------------------------------------
// Wake and recall over 10^5 memories.

/// A fully summarized history of `t` memories: built in a file (as the compare bench builds
/// it), copied to the server with `Store::copy_into` (512 rows a statement); the baseline's
/// rows inserted 10,000 a statement. Then wake and recall, checked equal and timed.
pub fn history(plan: &Plan, srv: &Server, rep: &mut Report) {
    let t = plan.history;
    println!("history: {t} memories, fully summarized, on both");
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("h.redb");
    let started = Instant::now();
    {
        let f = Store::create_with(&file, Options::default().exclusive(true)).expect("file store");
        let memories: Vec<somna::Memory> = (0..t).map(data::memory).collect();
        let summaries: Vec<(somna::Block, somna::Summary)> = data::all_blocks(t)
            .into_iter()
            .map(|b| (b, data::summary(b)))
            .collect();
        let mut once = Some((memories, summaries));
        f.write(|tx| {
            let (m, s) = once.take().expect("one attempt");
            tx.restore_scope(HIST, m, s)
        })
        .expect("restore_scope");
        let schema = "bench_hist";
        let store = srv.fresh_store(schema);
        let copied = f
            .copy_into(&store, &mut |_| {})
            .expect("copy to the server");
        println!(
            "  somna: built in a file and copied to the server ({} rows) in {:.1} s",
            copied.rows,
            started.elapsed().as_secs_f64()
        );
    }
    let started = Instant::now();
    let mut sql = Sql::open(&srv.url);
    sql.load_history(HIST, t);
    println!(
        "  baseline: {} rows inserted in {:.1} s",
        t + data::all_blocks(t).len() as u64,
        started.elapsed().as_secs_f64()
    );
    let store = Store::create(srv.somna_url("bench_hist")).expect("open");
    let opts = WakeOptions::default();
    let text = store.wake_text(HIST, &opts).expect("wake");
    assert_eq!(
        text,
        sql.wake(HIST),
        "somna and the baseline wake differently"
    );
    println!("  wake: {} lines, identical text", text.lines().count() - 2);
    let q = RecallQuery::new(data::RECALL_PATTERN);
    let r = store.recall(HIST, &q).expect("recall");
    let sr = sql.recall(HIST, data::RECALL_PATTERN);
    assert_eq!(
        (r.total, &r.lines),
        (sr.0, &sr.1),
        "somna and the baseline recall differently"
    );
    println!(
        "  recall {:?}: {} matches, {} shown, identical",
        data::RECALL_PATTERN,
        r.total,
        r.lines.len()
    );

    // Round trips, through the proxy (warm: statements prepared on the first call).
    let proxy = Proxy::start(&srv.host, srv.port);
    let pstore = Store::create(srv.proxied(&proxy, Some("bench_hist"))).expect("proxied store");
    let mut psql = Sql::open(&srv.proxied(&proxy, None));
    pstore.wake_text(HIST, &opts).expect("wake");
    psql.wake(HIST);
    let wt = (
        proxy.trips(|| drop(pstore.wake_text(HIST, &opts).expect("wake"))) as f64,
        proxy.trips(|| drop(psql.wake(HIST))) as f64,
    );
    pstore.recall(HIST, &q).expect("recall");
    psql.recall(HIST, data::RECALL_PATTERN);
    let rt = (
        proxy.trips(|| drop(pstore.recall(HIST, &q).expect("recall"))) as f64,
        proxy.trips(|| drop(psql.recall(HIST, data::RECALL_PATTERN))) as f64,
    );

    let load0 = load();
    println!("  wake: {} iterations each, alternating", plan.wake_iters);
    let s = {
        let mut e = || {
            drop(std::hint::black_box(
                store.wake_text(HIST, &opts).expect("wake"),
            ))
        };
        let mut b = || drop(std::hint::black_box(sql.wake(HIST)));
        samples(plan.wake_iters, &mut [&mut e, &mut b])
    };
    let mut it = s.into_iter();
    let (em, ep) = stats(it.next().expect("somna"));
    let (sm, sp) = stats(it.next().expect("sql"));
    for (w, e, b) in [
        ("wake over 10^5, median", em, sm),
        ("wake over 10^5, p95", ep, sp),
    ] {
        rep.row(Row {
            workload: w.into(),
            unit: Unit::Micros,
            somna: e,
            sql: b,
            trips: Some(wt),
            target: Some(("≤ 5 ms".into(), e <= 5_000.0)),
            load: load0,
        });
    }
    let load1 = load();
    println!(
        "  recall: {} iterations each, alternating",
        plan.recall_iters
    );
    let s = {
        let mut e = || {
            drop(std::hint::black_box(
                store.recall(HIST, &q).expect("recall"),
            ))
        };
        let mut b = || drop(std::hint::black_box(sql.recall(HIST, data::RECALL_PATTERN)));
        samples(plan.recall_iters, &mut [&mut e, &mut b])
    };
    let mut it = s.into_iter();
    rep.row(Row {
        workload: "recall over 10^5, median".into(),
        unit: Unit::Micros,
        somna: stats(it.next().expect("somna")).0,
        sql: stats(it.next().expect("sql")).0,
        trips: Some(rt),
        target: None,
        load: load1,
    });
}

// ---------------------------------------------------------------------------------------------
// Sessions.

/// A session message of about 1 KB, as an agent library saves it.
pub fn message(session: usize, i: usize) -> String {
    let role = if i.is_multiple_of(2) {
        "user"
    } else {
        "assistant"
    };
    let head = format!(
        r#"{{"role":"{role}","content":"session {session} turn {i}: a message of about a kilobyte, about the build, the tests and the next step; "#
    );
    let pad = 1022usize.saturating_sub(head.len());
    format!("{head}{}\"}}", "x".repeat(pad))
}

/// A session grown turn by turn to `turns` messages: somna saves the whole list every turn
/// (`session_save`), the baseline appends the new message (`add_items`), the two alternating
/// turn by turn; then a stored session of 200 messages loaded.
pub fn sessions(plan: &Plan, srv: &Server, rep: &mut Report) {
    let turns = plan.turns;
    let schema = "bench_sess";
    let store = srv.fresh_store(schema);
    let mut sql = Sql::open(&srv.url);
    println!("session growth: one session grown to {turns} messages of ~1 KB, a save per turn");
    let load0 = load();
    let id = "grow-0";
    let msgs: Vec<String> = (0..turns).map(|i| message(0, i)).collect();
    let mut et = Vec::with_capacity(turns);
    let mut st = Vec::with_capacity(turns);
    for t in 1..=turns {
        let mut e = || {
            let refs: Vec<&str> = msgs[..t].iter().map(String::as_str).collect();
            let s = Instant::now();
            store.session_save(id, &refs, None).expect("save");
            et.push(s.elapsed().as_nanos() as u64);
        };
        let mut b = || {
            let s = Instant::now();
            sql.add_items(id, &msgs[t - 1..t]);
            st.push(s.elapsed().as_nanos() as u64);
        };
        if t % 2 == 0 {
            e();
            b();
        } else {
            b();
            e();
        }
    }
    let w = 50.min(turns / 4);
    let (e0, e1) = (stats(et[..w].to_vec()).0, stats(et[turns - w..].to_vec()).0);
    let (s0, s1) = (stats(st[..w].to_vec()).0, stats(st[turns - w..].to_vec()).0);

    // The same moment: `w` more turns of the long session, each save alternating with a save of
    // a fresh session growing from 1 message, so that the disk's state (the time of a commit
    // flush moves 10x on a shared machine) falls on both alike.
    let mut all = msgs.clone();
    let short: Vec<String> = (0..w).map(|i| message(3, i)).collect();
    let (mut el, mut es, mut sl, mut ss): (Vec<u64>, Vec<u64>, Vec<u64>, Vec<u64>) =
        (vec![], vec![], vec![], vec![]);
    for j in 0..w {
        all.push(message(0, turns + j));
        let long: Vec<&str> = all.iter().map(String::as_str).collect();
        let fresh: Vec<&str> = short[..=j].iter().map(String::as_str).collect();
        for k in 0..4 {
            let op = (k + j) % 4;
            let s = Instant::now();
            match op {
                0 => {
                    store.session_save(id, &long, None).expect("save");
                }
                1 => {
                    store.session_save("fresh", &fresh, None).expect("save");
                }
                2 => sql.add_items(id, &all[turns + j..]),
                _ => sql.add_items("fresh", &short[j..=j]),
            }
            let ns = s.elapsed().as_nanos() as u64;
            [&mut el, &mut es, &mut sl, &mut ss][op].push(ns);
        }
    }
    let (el, es) = (stats(el).0, stats(es).0);
    let (sl, ss) = (stats(sl).0, stats(ss).0);
    let grown = turns;
    let turns = turns + w;
    let loaded = store.session_load(id).expect("load").expect("the session");
    assert_eq!(loaded.len(), turns, "somna lost messages");
    assert_eq!(
        loaded,
        sql.get_items(id),
        "somna and the baseline hold different sessions"
    );
    println!("  both hold the same {turns} messages");
    let msgs = all;

    // Round trips of a save at the start and at the end, through the proxy.
    let proxy = Proxy::start(&srv.host, srv.port);
    let pstore = Store::create(srv.proxied(&proxy, Some(schema))).expect("proxied store");
    let mut psql = Sql::open(&srv.proxied(&proxy, None));
    let m2: Vec<String> = (0..2).map(|i| message(1, i)).collect();
    let r2: Vec<&str> = m2.iter().map(String::as_str).collect();
    pstore.session_save("trips", &r2[..1], None).expect("save");
    psql.add_items("trips", &m2[..1]);
    let early = (
        proxy.trips(|| {
            pstore.session_save("trips", &r2, None).expect("save");
        }) as f64,
        proxy.trips(|| psql.add_items("trips", &m2[1..])) as f64,
    );
    let mut more = msgs.clone();
    more.push(message(0, turns));
    let rm: Vec<&str> = more.iter().map(String::as_str).collect();
    let late = (
        proxy.trips(|| {
            pstore.session_save(id, &rm, None).expect("save");
        }) as f64,
        proxy.trips(|| psql.add_items(id, &more[turns..])) as f64,
    );
    let flat = el <= 1.5 * es;
    rep.row(Row {
        workload: format!("session save, turns 1-{w} (median)"),
        unit: Unit::Micros,
        somna: e0,
        sql: s0,
        trips: Some(early),
        target: None,
        load: load0,
    });
    rep.row(Row {
        workload: format!("session save, turns {}-{grown} (median)", grown - w + 1),
        unit: Unit::Micros,
        somna: e1,
        sql: s1,
        trips: Some(late),
        target: None,
        load: load0,
    });
    rep.row(Row {
        workload: format!(
            "session save at {}-{turns} messages / at 1-{w}, same moment",
            grown + 1
        ),
        unit: Unit::Factor,
        somna: el / es,
        sql: sl / ss,
        trips: None,
        target: Some(("flat: ≤ 1.5x".into(), flat)),
        load: load0,
    });
    rep.note(format!(
        "session growth: turns 1-{w} against turns {}-{grown}: somna {:.2}x, the baseline {:.2}x (minutes apart: the disk moves both); at the same moment (alternating saves): somna {:.0} µs at {}-{turns} messages against {:.0} µs at 1-{w}, the baseline {:.0} against {:.0} µs; a message is {} bytes",
        grown - w + 1,
        e1 / e0,
        s1 / s0,
        el,
        grown + 1,
        es,
        sl,
        ss,
        msgs[0].len()
    ));
    if plan.quick {
        rep.note(format!(
            "session growth: quick mode, {grown} turns (full: 2,000)"
        ));
    }

    // Load of a stored session of 200 messages.
    let n = plan.load_messages;
    let id = "load-200";
    let msgs: Vec<String> = (0..n).map(|i| message(2, i)).collect();
    let refs: Vec<&str> = msgs.iter().map(String::as_str).collect();
    store.session_save(id, &refs, None).expect("save");
    sql.add_items(id, &msgs);
    assert_eq!(
        store.session_load(id).expect("load").expect("the session"),
        sql.get_items(id),
        "somna and the baseline load different sessions"
    );
    pstore.session_load(id).expect("load");
    psql.get_items(id);
    let lt = (
        proxy.trips(|| drop(pstore.session_load(id).expect("load"))) as f64,
        proxy.trips(|| drop(psql.get_items(id))) as f64,
    );
    let load1 = load();
    let s = {
        let mut e = || drop(std::hint::black_box(store.session_load(id).expect("load")));
        let mut b = || drop(std::hint::black_box(sql.get_items(id)));
        samples(plan.load_iters, &mut [&mut e, &mut b])
    };
    let mut it = s.into_iter();
    rep.row(Row {
        workload: format!("session load, {n} messages (median)"),
        unit: Unit::Micros,
        somna: stats(it.next().expect("somna")).0,
        sql: stats(it.next().expect("sql")).0,
        trips: Some(lt),
        target: None,
        load: load1,
    });
}
