//! somna on PostgreSQL against a plain SQL baseline on the same server, in the row shapes of
//! the peers that run on PostgreSQL (LangGraph's `PostgresStore`, the Agents SDK's
//! `SQLAlchemySession`; `baseline.rs`): durable notes by 1 and by 8 processes, wake and recall
//! over 10^5 memories, a session grown to 1,000 turns, a session of 200 messages loaded.
//! Every workload checks that both give the same answers before it times anything.
//!
//! ```sh
//! bash scripts/pg-server.sh start /tmp/pgb          # prints the URL; fsync on
//! cargo bench -p somna-bench-compare --bench server -- --url postgresql://postgres@127.0.0.1:PORT/postgres [--quick]
//! bash scripts/pg-server.sh stop /tmp/pgb
//! ```
//!
//! `SOMNA_BENCH_PG` may name the URL instead of `--url`. `--only notes,history,sessions` runs
//! a subset. The run drops and creates the schemas `bench_note`, `bench_hist`, `bench_sess`
//! (somna's stores) and `bench_sql` (the baseline's tables) on that server. The table goes to
//! stdout and `target/bench/server.md`, the figures to `target/bench/server.json`.
//!
//! The processes of the note workload are this program again (`--child-note`), one OS process
//! each, with its own store (or connection).

#[allow(dead_code)]
#[path = "../compare/data.rs"]
mod data;
#[path = "../shared/host.rs"]
mod host;

mod baseline;
mod proxy;
mod report;
mod workloads;

use std::fs;
use std::time::Instant;

use host::{disk_of, load, machine};
use report::{bench_dir, disk_probe, Report};
use workloads::{Plan, Server};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--child-note") {
        workloads::child_note(&args[i + 1..]);
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    let after = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let only: Option<Vec<String>> =
        after("--only").map(|s| s.split(',').map(str::to_string).collect());
    let Some(url) = after("--url").or_else(|| std::env::var("SOMNA_BENCH_PG").ok()) else {
        eprintln!(
            "no server: pass --url postgresql://postgres@127.0.0.1:PORT/postgres or set SOMNA_BENCH_PG \
             (`bash scripts/pg-server.sh start DIR` starts one and prints its URL)"
        );
        std::process::exit(2);
    };
    let url = url.split('?').next().unwrap_or(&url).to_string();
    let config: postgres::Config = url.parse().expect("a postgresql:// URL");
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        _ => panic!("the bench needs a TCP host in the URL"),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let srv = Server { url, host, port };
    let plan = Plan::new(quick);
    let runs = |w: &str| only.as_ref().is_none_or(|o| o.iter().any(|x| x == w));
    let started = Instant::now();
    let head = header(&srv, quick);
    let probe = disk_probe();
    println!("{head}disk probe: {probe:.0} µs\n");
    baseline::reset(&srv.url);
    let mut rep = Report::default();
    if runs("notes") {
        workloads::notes(&plan, &srv, &mut rep);
    }
    if runs("history") {
        workloads::history(&plan, &srv, &mut rep);
    }
    if runs("sessions") {
        workloads::sessions(&plan, &srv, &mut rep);
    }
    let head = format!(
        "{head}Run took {:.0} s; load average at the end {:.2}; disk probe (a 320-byte append + fdatasync in /tmp, median of 100) {probe:.0} µs at the start, {:.0} µs at the end.\n\n",
        started.elapsed().as_secs_f64(),
        load(),
        disk_probe()
    );
    let md = rep.markdown(&head);
    let out = bench_dir();
    fs::write(out.join("server.md"), &md).expect("write server.md");
    fs::write(out.join("server.json"), rep.json()).expect("write server.json");
    println!("\n{md}");
    println!(
        "wrote {} and {}",
        out.join("server.md").display(),
        out.join("server.json").display()
    );
}

/// The machine, the server's settings and the round-trip time of the loopback.
fn header(srv: &Server, quick: bool) -> String {
    let mut c =
        postgres::Client::connect(&srv.url, postgres::NoTls).expect("connect to the server");
    let show = |c: &mut postgres::Client, what: &str| -> String {
        c.query_one(&format!("SHOW {what}"), &[])
            .map(|r| r.get::<_, String>(0))
            .unwrap_or_else(|_| "?".into())
    };
    let version = show(&mut c, "server_version");
    let settings: Vec<String> = [
        "fsync",
        "synchronous_commit",
        "wal_sync_method",
        "shared_buffers",
        "max_connections",
    ]
    .iter()
    .map(|s| format!("{s}={}", show(&mut c, s)))
    .collect();
    let data_dir = show(&mut c, "data_directory");
    // One round trip: a prepared `SELECT 1`, median of 2,000.
    let st = c.prepare("SELECT 1").expect("prepare");
    let mut v: Vec<u64> = (0..2000)
        .map(|_| {
            let s = Instant::now();
            c.query_one(&st, &[]).expect("select 1");
            s.elapsed().as_nanos() as u64
        })
        .collect();
    v.sort_unstable();
    format!(
        "{} run on {}; load average {:.2} at the start.\n\nServer: PostgreSQL {version} at {}:{} (loopback), {}; data in {} ({}).\nOne round trip (a prepared SELECT 1, median of 2,000): {:.0} µs.\n\n",
        if quick { "Quick" } else { "Full" },
        machine(),
        load(),
        srv.host,
        srv.port,
        settings.join(", "),
        data_dir,
        disk_of(std::path::Path::new(&data_dir)),
        v[v.len() / 2] as f64 / 1e3
    )
}
