//! Side-by-side benchmark: engram against the stores it is swapped in for, with identical data,
//! in one run on one machine, so that every figure is read as a ratio.
//!
//! - `sqlite`: SQLite (bundled) through rusqlite, one connection, prepared statements, WAL,
//!   `synchronous=FULL`, a 32 MiB page cache (engram's cache size); tables `memories(id INTEGER
//!   PRIMARY KEY, observed_us, text)`, `summaries(level, lo, text)` keyed by (level, lo), and
//!   `sessions(id PRIMARY KEY, messages)` written with INSERT OR REPLACE of the whole JSON array
//!   (the documented custom backend of pure_agents).
//! - `jsonfile`: the JSON-file stores of agent libraries: one JSON array per session (pure_agents
//!   `JSONMemory`) or one JSON list of memories (the optillm plugin), the whole file rewritten on
//!   every save through a temp file, fsync and rename.
//! - `flatfile`: OptMem's files: `LOG.txt` of 320-byte records appended with O_APPEND +
//!   fdatasync, `TREE/<s>` of 288-byte records; wake computes the same cover
//!   (`engram::wake::reference_cover`) and reads its records by offset; recall runs the same
//!   regex over the log (the scan floor).
//!
//! Every write workload runs in rounds in which the engines take turns (rotating order), and every
//! read workload alternates the engines (and the history sizes) in the same way, so that a busy
//! moment of the shared machine or disk falls on all of them alike. Each engine's answers are
//! checked equal (same wake text, same recall matches, same sessions) before anything is timed.
//! Diagnostics (text only) measure redb's own floor under engram on the same data: one value per
//! durable commit with a counting storage backend (fsyncs, bytes, time per commit), the same
//! wake cover read by key, and the log scanned raw with engram's per-record work added layer by
//! layer.
//!
//! `cargo bench -p engram-bench-compare --bench compare` runs everything (about 2 minutes on 2 cores, longer when other
//! processes keep the disk busy); `cargo bench -p engram-bench-compare --bench compare -- --quick` uses fewer notes and
//! sessions (it says which) and finishes in about a minute and a half. `-- --only note_durable,history` runs a subset (workload names,
//! or the groups `history` (wake, recall, bytes per memory), `sessions` (load, list, bytes per
//! message) and `diagnostics`); `-- --only profile:note|note-mw|session|wake|wake3|wake6|recall|
//! load` runs one engram workload for `valgrind --tool=callgrind --toggle-collect='*measured_part*'`.
//! The table goes to stdout and `target/bench/compare.md`, the figures to
//! `target/bench/compare.json`, the wake plot to `target/bench/wake_latency.svg`.
//! `ENGRAM_BENCH_DIR` chooses where the stores are built (default: a temp dir in /tmp, which must
//! be a real disk for the durable figures to mean anything).

use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use engram::redb::{self, ReadableDatabase, StorageBackend};
use engram::text::date_of;
use engram::{
    Block, BuiltFrom, Kind, Memory, NewMemory, Options, RecallQuery, Status, Store, Summary,
    WakeOptions,
};
use rusqlite::{params, Connection};

const ENGRAM: &str = "engram";
const SQLITE: &str = "sqlite";
const JSONFILE: &str = "jsonfile";
const FLATFILE: &str = "flatfile";
const ENGINES: [&str; 4] = [ENGRAM, SQLITE, JSONFILE, FLATFILE];

const OPS: &str = "ops_per_sec";
const NS: &str = "ns_per_op";
const BYTES: &str = "bytes";

const SCOPE: &str = "default";
const WAKE_LINES: usize = 96;
const LOG_RECORD: usize = 320;
const TREE_RECORD: usize = 288;
/// The recall pattern: selective (about one memory in 1,261 matches).
const RECALL_PATTERN: &str = "module 42 passed after fixing flaky test 5$";
const RECALL_BYTES: usize = 20_000;

// ---------------------------------------------------------------------------------------------
// The plan and the report.

struct Plan {
    quick: bool,
    only: Option<Vec<String>>,
    durable_notes: usize,
    batch_total: usize,
    batch_size: usize,
    threads: usize,
    per_thread: usize,
    wake_sizes: [u64; 3],
    wake_iters: usize,
    recall_iters: usize,
    growth_sessions: usize,
    turns: usize,
    stored_sessions: usize,
    stored_messages: usize,
    load_iters: usize,
    list_iters: usize,
}

impl Plan {
    fn new(quick: bool, only: Option<Vec<String>>) -> Plan {
        Plan {
            quick,
            only,
            durable_notes: if quick { 300 } else { 2000 },
            batch_total: if quick { 20_000 } else { 100_000 },
            batch_size: 1000,
            threads: 8,
            per_thread: if quick { 40 } else { 250 },
            wake_sizes: [1_000, 100_000, 1_000_000],
            wake_iters: if quick { 300 } else { 2000 },
            recall_iters: if quick { 3 } else { 7 },
            growth_sessions: if quick { 5 } else { 100 },
            turns: 200,
            stored_sessions: 10_000,
            stored_messages: 20,
            load_iters: if quick { 500 } else { 3000 },
            list_iters: if quick { 10 } else { 40 },
        }
    }

    fn runs(&self, group: &str, name: &str) -> bool {
        match &self.only {
            None => true,
            Some(list) => list.iter().any(|o| o == group || o == name),
        }
    }
}

struct Row {
    workload: String,
    engine: &'static str,
    metric: &'static str,
    value: f64,
}

#[derive(Default)]
struct Report {
    rows: Vec<Row>,
    /// (workload, engine, why) for figures that are not measured.
    na: Vec<(String, &'static str, String)>,
    /// Lines about the scale of a workload (quick mode, dataset sizes).
    notes: Vec<String>,
    /// Diagnostic lines: where engram's time goes.
    diag: Vec<String>,
    /// Derived figures the targets need (name -> value).
    facts: Vec<(String, f64)>,
}

impl Report {
    fn put(&mut self, workload: &str, engine: &'static str, metric: &'static str, value: f64) {
        self.rows.push(Row {
            workload: workload.to_string(),
            engine,
            metric,
            value,
        });
    }

    /// Records a throughput: `ops` operations in `elapsed`.
    fn rate(&mut self, workload: &str, engine: &'static str, ops: usize, elapsed: Duration) {
        let s = elapsed.as_secs_f64();
        self.put(workload, engine, OPS, ops as f64 / s);
        self.put(workload, engine, NS, s * 1e9 / ops as f64);
        println!(
            "  {workload:<16} {engine:<9} {:>12.0} ops/s {:>12.1} us/op",
            ops as f64 / s,
            s * 1e6 / ops as f64
        );
    }

    /// Records a latency (median nanoseconds of one operation).
    fn latency(&mut self, workload: &str, engine: &'static str, ns: f64) {
        self.put(workload, engine, NS, ns);
        self.put(workload, engine, OPS, 1e9 / ns);
        println!(
            "  {workload:<16} {engine:<9} {:>12.0} ops/s {:>12.1} us/op (median)",
            1e9 / ns,
            ns / 1e3
        );
    }

    fn bytes(&mut self, workload: &str, engine: &'static str, b: f64) {
        self.put(workload, engine, BYTES, b);
        println!("  {workload:<16} {engine:<9} {b:>12.1} bytes");
    }

    fn not_measured(&mut self, workload: &str, engine: &'static str, why: &str) {
        self.na
            .push((workload.to_string(), engine, why.to_string()));
    }

    fn fact(&mut self, name: &str, v: f64) {
        self.facts.push((name.to_string(), v));
    }

    fn get_fact(&self, name: &str) -> Option<f64> {
        self.facts.iter().find(|f| f.0 == name).map(|f| f.1)
    }

    fn get(&self, workload: &str, engine: &str, metric: &str) -> Option<f64> {
        self.rows
            .iter()
            .find(|r| r.workload == workload && r.engine == engine && r.metric == metric)
            .map(|r| r.value)
    }

    fn note(&mut self, s: String) {
        println!("  note: {s}");
        self.notes.push(s);
    }

    fn diag(&mut self, s: String) {
        println!("  diag: {s}");
        self.diag.push(s);
    }
}

// ---------------------------------------------------------------------------------------------
// The data: the same memories, summaries and messages for every engine.

const BASE_US: i64 = 1_700_000_000_000_000;

/// Observed time of memory `i`: 100 memories a day.
fn observed(i: u64) -> i64 {
    BASE_US + i as i64 * 864_000_000
}

fn mem_text(i: u64) -> String {
    format!(
        "memory {i}: the build of module {} passed after fixing flaky test {}",
        i % 97,
        i % 13
    )
}

fn sum_text(b: Block) -> String {
    format!("summary of {b}: builds of several modules passed; flaky tests fixed")
}

fn memory(i: u64) -> Memory {
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

fn summary(b: Block) -> Summary {
    Summary {
        text: sum_text(b),
        written_us: BASE_US,
        built_from: BuiltFrom::Raw,
        inputs_crc: 0,
    }
}

/// Every block of a fully summarized history of `t` memories, smallest first.
fn all_blocks(t: u64) -> Vec<Block> {
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
fn message(session: usize, i: usize) -> String {
    let role = if i % 2 == 0 { "user" } else { "assistant" };
    format!(
        r#"{{"role":"{role}","content":"session {session} turn {i}: a realistic message of a few hundred bytes, talking about the build, the tests and the next step to take in this project; {}"}}"#,
        "x".repeat(150)
    )
}

fn session_id(s: usize) -> String {
    format!("session-{s:05}")
}

fn json_array(msgs: &[String]) -> String {
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

fn parse_array(json: &str) -> Vec<String> {
    let raw: Vec<Box<serde_json::value::RawValue>> =
        serde_json::from_str(json).expect("a JSON array");
    raw.into_iter().map(|r| r.get().to_string()).collect()
}

// ---------------------------------------------------------------------------------------------
// Measuring.

fn io_written() -> u64 {
    fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("write_bytes: ")
                    .and_then(|v| v.trim().parse().ok())
            })
        })
        .unwrap_or(0)
}

/// Median nanoseconds of `f`, after a warm-up.
fn median_ns(iters: usize, mut f: impl FnMut()) -> f64 {
    for _ in 0..(iters / 10).clamp(2, 50) {
        f();
    }
    let mut v: Vec<u64> = (0..iters)
        .map(|_| {
            let s = Instant::now();
            f();
            s.elapsed().as_nanos() as u64
        })
        .collect();
    v.sort_unstable();
    v[v.len() / 2] as f64
}

/// Median nanoseconds of each function, measured in alternating rounds (rotating order) so that a
/// busy moment of the machine is spread over all of them.
fn medians(iters: usize, fs: &mut [&mut dyn FnMut()]) -> Vec<f64> {
    for f in fs.iter_mut() {
        for _ in 0..(iters / 10).clamp(2, 50) {
            f();
        }
    }
    let rounds = ROUNDS.min(iters);
    let per = iters.div_ceil(rounds);
    let mut samples: Vec<Vec<u64>> = vec![Vec::with_capacity(per * rounds); fs.len()];
    for r in 0..rounds {
        for k in 0..fs.len() {
            let e = (k + r) % fs.len();
            for _ in 0..per {
                let s = Instant::now();
                fs[e]();
                samples[e].push(s.elapsed().as_nanos() as u64);
            }
        }
    }
    samples
        .into_iter()
        .map(|mut v| {
            v.sort_unstable();
            v[v.len() / 2] as f64
        })
        .collect()
}

fn timed(f: impl FnOnce()) -> Duration {
    let s = Instant::now();
    f();
    s.elapsed()
}

/// Bytes allocated on disk (st_blocks) by a file or, recursively, a directory.
fn disk_bytes(p: &Path) -> u64 {
    let Ok(m) = fs::symlink_metadata(p) else {
        return 0;
    };
    if m.is_dir() {
        fs::read_dir(p)
            .map(|rd| rd.flatten().map(|e| disk_bytes(&e.path())).sum())
            .unwrap_or(0)
    } else {
        m.blocks() * 512
    }
}

/// Apparent size (st_size) of a file or, recursively, a directory.
fn file_bytes(p: &Path) -> u64 {
    let Ok(m) = fs::symlink_metadata(p) else {
        return 0;
    };
    if m.is_dir() {
        fs::read_dir(p)
            .map(|rd| rd.flatten().map(|e| file_bytes(&e.path())).sum())
            .unwrap_or(0)
    } else {
        m.len()
    }
}

fn sqlite_files(db: &Path) -> Vec<PathBuf> {
    let s = db.to_string_lossy();
    vec![
        db.to_path_buf(),
        PathBuf::from(format!("{s}-wal")),
        PathBuf::from(format!("{s}-shm")),
    ]
}

// ---------------------------------------------------------------------------------------------
// SQLite.

fn sqlite_open(path: &Path) -> Connection {
    let c = Connection::open(path).expect("sqlite open");
    let mode: String = c
        .query_row("PRAGMA journal_mode=WAL", [], |r| r.get(0))
        .expect("wal");
    assert_eq!(mode.to_lowercase(), "wal");
    c.execute_batch(
        "PRAGMA synchronous=FULL;
         PRAGMA cache_size=-32768;
         CREATE TABLE IF NOT EXISTS memories(
             id INTEGER PRIMARY KEY, observed_us INTEGER NOT NULL, text TEXT NOT NULL);
         CREATE TABLE IF NOT EXISTS summaries(
             level INTEGER NOT NULL, lo INTEGER NOT NULL, text TEXT NOT NULL,
             PRIMARY KEY(level, lo)) WITHOUT ROWID;
         CREATE TABLE IF NOT EXISTS sessions(id TEXT PRIMARY KEY, messages TEXT NOT NULL);",
    )
    .expect("schema");
    c.busy_timeout(Duration::from_secs(10)).expect("busy");
    c
}

fn sqlite_note(c: &Connection, i: u64) {
    c.prepare_cached("INSERT INTO memories(observed_us, text) VALUES (?1, ?2)")
        .expect("prepare")
        .execute(params![observed(i), mem_text(i)])
        .expect("insert");
}

fn sqlite_count(c: &Connection) -> u64 {
    c.query_row("SELECT count(*) FROM memories", [], |r| r.get::<_, i64>(0))
        .expect("count") as u64
}

fn sqlite_checkpoint(c: &Connection) {
    c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("checkpoint");
}

// ---------------------------------------------------------------------------------------------
// The JSON-file stores.

/// The optillm pattern: one JSON list of memories, rewritten whole after every add.
struct JsonList {
    path: PathBuf,
    tmp: PathBuf,
    items: Vec<String>,
}

impl JsonList {
    fn new(dir: &Path) -> JsonList {
        fs::create_dir_all(dir).expect("mkdir");
        JsonList {
            path: dir.join("memory.json"),
            tmp: dir.join("memory.json.tmp"),
            items: Vec::new(),
        }
    }

    fn add(&mut self, ids: std::ops::Range<u64>) {
        for i in ids {
            self.items
                .push(format!("{} {}", date_of(observed(i)), mem_text(i)));
        }
        let bytes = serde_json::to_vec(&self.items).expect("json");
        write_replace(&self.tmp, &self.path, &bytes);
    }
}

/// Temp file, write, fsync, rename: how agent libraries replace a JSON file.
fn write_replace(tmp: &Path, path: &Path, bytes: &[u8]) {
    let mut f = File::create(tmp).expect("create");
    f.write_all(bytes).expect("write");
    f.sync_all().expect("fsync");
    fs::rename(tmp, path).expect("rename");
}

/// pure_agents `JSONMemory`: one JSON array per session.
struct JsonSessions {
    dir: PathBuf,
}

impl JsonSessions {
    fn save(&self, id: &str, msgs: &[String]) {
        write_replace(
            &self.dir.join(format!("{id}.json.tmp")),
            &self.dir.join(format!("{id}.json")),
            json_array(msgs).as_bytes(),
        );
    }

    fn load(&self, id: &str) -> Option<Vec<String>> {
        let s = fs::read_to_string(self.dir.join(format!("{id}.json"))).ok()?;
        Some(parse_array(&s))
    }

    fn list(&self) -> Vec<String> {
        let mut out: Vec<String> = fs::read_dir(&self.dir)
            .expect("read_dir")
            .flatten()
            .filter_map(|e| {
                e.file_name()
                    .to_str()
                    .and_then(|n| n.strip_suffix(".json"))
                    .map(str::to_string)
            })
            .collect();
        out.sort();
        out
    }
}

// ---------------------------------------------------------------------------------------------
// OptMem's flat files.

fn padded(line: &str, size: usize) -> Vec<u8> {
    let mut r = Vec::with_capacity(size);
    r.extend_from_slice(line.as_bytes());
    assert!(r.len() < size, "record too long");
    r.resize(size - 1, b' ');
    r.push(b'\n');
    r
}

fn log_record(i: u64) -> Vec<u8> {
    padded(
        &format!("#{i} {} {}", date_of(observed(i)), mem_text(i)),
        LOG_RECORD,
    )
}

fn record_text(rec: &[u8]) -> &str {
    let body = rec.strip_suffix(b"\n").unwrap_or(rec);
    let end = body.iter().rposition(|&c| c != b' ').map_or(0, |p| p + 1);
    std::str::from_utf8(&body[..end]).expect("utf-8 record")
}

/// `LOG.txt` opened for appending; ids are positions.
struct FlatLog {
    file: File,
    count: u64,
}

impl FlatLog {
    fn create(dir: &Path) -> FlatLog {
        fs::create_dir_all(dir.join("TREE")).expect("mkdir");
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("LOG.txt"))
            .expect("open");
        let count = file.metadata().expect("stat").len() / LOG_RECORD as u64;
        FlatLog { file, count }
    }

    /// Appends records for `ids` in one write (no sync).
    fn write(&mut self, n: u64) -> u64 {
        let first = self.count;
        let mut buf = Vec::with_capacity(n as usize * LOG_RECORD);
        for i in first..first + n {
            buf.extend_from_slice(&log_record(i));
        }
        self.file.write_all(&buf).expect("append");
        self.count += n;
        first
    }

    fn append_durable(&mut self, n: u64) -> u64 {
        let first = self.write(n);
        self.file.sync_data().expect("fdatasync");
        first
    }
}

/// Builds an OptMem directory holding a fully summarized history of `t` memories.
fn flat_build(dir: &Path, t: u64) {
    fs::create_dir_all(dir.join("TREE")).expect("mkdir");
    let mut log =
        BufWriter::with_capacity(1 << 20, File::create(dir.join("LOG.txt")).expect("log"));
    for i in 0..t {
        log.write_all(&log_record(i)).expect("write");
    }
    log.flush().expect("flush");
    let mut level = 1u8;
    while (1u64 << level) <= t {
        let size = 1u64 << level;
        let f = File::create(dir.join("TREE").join(size.to_string())).expect("tree");
        let mut w = BufWriter::with_capacity(1 << 20, f);
        for k in 0..t / size {
            let b = Block::new(level, k * size).expect("block");
            w.write_all(&padded(&sum_text(b), TREE_RECORD))
                .expect("write");
        }
        w.flush().expect("flush");
        level += 1;
    }
}

/// An OptMem directory opened for reading: wake reads the cover's records by offset.
struct FlatReader {
    log: File,
    tree: Vec<Option<File>>,
}

impl FlatReader {
    fn open(dir: &Path) -> FlatReader {
        let log = File::open(dir.join("LOG.txt")).expect("log");
        let tree = (0..64u32)
            .map(|level| File::open(dir.join("TREE").join((1u64 << level).to_string())).ok())
            .collect();
        FlatReader { log, tree }
    }

    fn count(&self) -> u64 {
        self.log.metadata().expect("stat").len() / LOG_RECORD as u64
    }

    fn wake(&self) -> String {
        let t = self.count();
        let cover = engram::wake::reference_cover(t, WAKE_LINES);
        let mut out = String::with_capacity(cover.len() * 96 + 128);
        let _ = writeln!(
            out,
            "Your memory, part 1 of 1, oldest first ({t} memories)."
        );
        let mut buf = [0u8; LOG_RECORD];
        for b in cover {
            if b.size() == 1 {
                let rec = &mut buf[..LOG_RECORD];
                self.log
                    .read_exact_at(rec, b.lo() * LOG_RECORD as u64)
                    .expect("read log");
                out.push_str(record_text(rec));
            } else {
                let f = self.tree[b.level() as usize].as_ref().expect("level file");
                let rec = &mut buf[..TREE_RECORD];
                f.read_exact_at(rec, b.lo() / b.size() * TREE_RECORD as u64)
                    .expect("read tree");
                let _ = write!(out, "#{b} {}", record_text(rec));
            }
            out.push('\n');
        }
        out.push_str("You are awake.\n");
        out
    }

    /// Recall: the same regex over every record, streaming the log; the newest matches that fit
    /// the byte budget are kept. Returns (total matches, kept lines).
    fn recall(&self, re: &regex::Regex) -> (u64, Vec<String>) {
        let mut f = &self.log;
        let chunk = LOG_RECORD * 4096;
        let mut buf = vec![0u8; chunk];
        let mut matched: Vec<(u64, String)> = Vec::new();
        let mut total = 0u64;
        let mut id = 0u64;
        let mut have = 0usize;
        loop {
            let n = f.read(&mut buf[have..]).expect("read");
            if n == 0 {
                break;
            }
            have += n;
            let whole = have / LOG_RECORD * LOG_RECORD;
            for rec in buf[..whole].chunks_exact(LOG_RECORD) {
                let line = record_text(rec);
                if re.is_match(line) {
                    total += 1;
                    matched.push((id, line.to_string()));
                }
                id += 1;
            }
            buf.copy_within(whole..have, 0);
            have -= whole;
        }
        // Rewind for the next run (a shared &File has one offset).
        use std::io::Seek;
        f.seek(std::io::SeekFrom::Start(0)).expect("seek");
        (
            total,
            keep_newest(matched.into_iter().map(|x| x.1).collect()),
        )
    }
}

/// The newest lines (of `lines`, oldest first) that fit recall's byte budget, oldest first.
fn keep_newest(lines: Vec<String>) -> Vec<String> {
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

// ---------------------------------------------------------------------------------------------
// Wake and recall on SQLite: the same cover, rows read by primary key.

fn sqlite_wake(c: &Connection) -> String {
    let tx = c.unchecked_transaction().expect("begin");
    let t: i64 = tx
        .query_row("SELECT coalesce(max(id) + 1, 0) FROM memories", [], |r| {
            r.get(0)
        })
        .expect("count");
    let t = t as u64;
    let cover = engram::wake::reference_cover(t, WAKE_LINES);
    let mut out = String::with_capacity(cover.len() * 96 + 128);
    let _ = writeln!(
        out,
        "Your memory, part 1 of 1, oldest first ({t} memories)."
    );
    {
        let mut mem = tx
            .prepare_cached("SELECT observed_us, text FROM memories WHERE id = ?1")
            .expect("prepare");
        let mut sum = tx
            .prepare_cached("SELECT text FROM summaries WHERE level = ?1 AND lo = ?2")
            .expect("prepare");
        for b in cover {
            if b.size() == 1 {
                mem.query_row(params![b.lo() as i64], |r| {
                    let us: i64 = r.get(0)?;
                    let text = r.get_ref(1)?.as_str()?;
                    let _ = writeln!(out, "#{} {} {text}", b.lo(), date_of(us));
                    Ok(())
                })
                .expect("memory row");
            } else {
                sum.query_row(params![b.level() as i64, b.lo() as i64], |r| {
                    let _ = writeln!(out, "#{b} {}", r.get_ref(0)?.as_str()?);
                    Ok(())
                })
                .expect("summary row");
            }
        }
    }
    tx.commit().expect("end");
    out.push_str("You are awake.\n");
    out
}

fn sqlite_recall(c: &Connection, re: &regex::Regex) -> (u64, Vec<String>) {
    let mut st = c
        .prepare_cached("SELECT id, observed_us, text FROM memories ORDER BY id DESC")
        .expect("prepare");
    let mut rows = st.query([]).expect("query");
    let mut total = 0u64;
    let mut kept = Vec::new();
    let mut bytes = 0usize;
    let mut collecting = true;
    let mut line = String::new();
    while let Some(r) = rows.next().expect("row") {
        let id: i64 = r.get(0).expect("id");
        let us: i64 = r.get(1).expect("time");
        let text = r.get_ref(2).expect("text").as_str().expect("utf-8");
        line.clear();
        let _ = write!(line, "#{id} {} {text}", date_of(us));
        if !re.is_match(&line) {
            continue;
        }
        total += 1;
        if collecting {
            if bytes + line.len() < RECALL_BYTES {
                bytes += line.len() + 1;
                kept.push(line.clone());
            } else {
                collecting = false;
            }
        }
    }
    kept.reverse();
    (total, kept)
}

// ---------------------------------------------------------------------------------------------
// engram helpers.

fn engram_create(path: &Path, exclusive: bool) -> Store {
    Store::create_with(path, Options::default().exclusive(exclusive)).expect("create store")
}

fn new_memory(i: u64) -> NewMemory {
    NewMemory::new(mem_text(i)).observed_us(observed(i))
}

fn engram_build_history(path: &Path, t: u64) {
    let store = engram_create(path, true);
    let memories: Vec<Memory> = (0..t).map(memory).collect();
    let summaries: Vec<(Block, Summary)> =
        all_blocks(t).into_iter().map(|b| (b, summary(b))).collect();
    store
        .write(|tx| tx.restore_scope(SCOPE, memories, summaries))
        .expect("restore_scope");
}

fn sqlite_build_history(path: &Path, t: u64) {
    let mut c = sqlite_open(path);
    c.execute_batch("PRAGMA synchronous=OFF").expect("pragma");
    {
        let tx = c.transaction().expect("begin");
        {
            let mut m = tx
                .prepare("INSERT INTO memories(id, observed_us, text) VALUES (?1, ?2, ?3)")
                .expect("prepare");
            for i in 0..t {
                m.execute(params![i as i64, observed(i), mem_text(i)])
                    .expect("insert");
            }
            let mut s = tx
                .prepare("INSERT INTO summaries(level, lo, text) VALUES (?1, ?2, ?3)")
                .expect("prepare");
            for b in all_blocks(t) {
                s.execute(params![b.level() as i64, b.lo() as i64, sum_text(b)])
                    .expect("insert");
            }
        }
        tx.commit().expect("commit");
    }
    sqlite_checkpoint(&c);
}

// ---------------------------------------------------------------------------------------------
// A redb backend that counts what engram asks of the disk: the fsyncs and bytes of a commit.

#[derive(Debug, Default)]
struct IoCount {
    syncs: AtomicU64,
    sync_ns: AtomicU64,
    writes: AtomicU64,
    write_bytes: AtomicU64,
    write_ns: AtomicU64,
    reads: AtomicU64,
    other_ns: AtomicU64,
}

impl IoCount {
    fn snapshot(&self) -> [u64; 7] {
        [
            self.syncs.load(Ordering::Relaxed),
            self.sync_ns.load(Ordering::Relaxed),
            self.writes.load(Ordering::Relaxed),
            self.write_bytes.load(Ordering::Relaxed),
            self.reads.load(Ordering::Relaxed),
            self.write_ns.load(Ordering::Relaxed),
            self.other_ns.load(Ordering::Relaxed),
        ]
    }

    /// Times `f` into `other_ns` (reads, set_len, locks).
    fn other<R>(&self, f: impl FnOnce() -> R) -> R {
        let s = Instant::now();
        let r = f();
        self.other_ns
            .fetch_add(s.elapsed().as_nanos() as u64, Ordering::Relaxed);
        r
    }
}

#[derive(Debug)]
struct Counting {
    inner: redb::backends::FileBackend,
    count: Arc<IoCount>,
}

impl Counting {
    fn open(path: &Path) -> (Counting, Arc<IoCount>) {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)
            .expect("open");
        let count = Arc::new(IoCount::default());
        (
            Counting {
                inner: redb::backends::FileBackend::new(f).expect("backend"),
                count: Arc::clone(&count),
            },
            count,
        )
    }
}

type Bound = std::ops::Bound<u64>;

impl StorageBackend for Counting {
    fn len(&self) -> Result<u64, std::io::Error> {
        self.inner.len()
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        self.count.reads.fetch_add(1, Ordering::Relaxed);
        self.count.other(|| self.inner.read(offset, out))
    }
    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        self.count.other(|| self.inner.set_len(len))
    }
    fn sync_data(&self) -> Result<(), std::io::Error> {
        let s = Instant::now();
        let r = self.inner.sync_data();
        self.count.syncs.fetch_add(1, Ordering::Relaxed);
        self.count
            .sync_ns
            .fetch_add(s.elapsed().as_nanos() as u64, Ordering::Relaxed);
        r
    }
    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        self.count.writes.fetch_add(1, Ordering::Relaxed);
        self.count
            .write_bytes
            .fetch_add(data.len() as u64, Ordering::Relaxed);
        let s = Instant::now();
        let r = self.inner.write(offset, data);
        self.count
            .write_ns
            .fetch_add(s.elapsed().as_nanos() as u64, Ordering::Relaxed);
        r
    }
    fn close(&self) -> Result<(), std::io::Error> {
        self.inner.close()
    }
    fn try_lock_range(&self, a: Bound, b: Bound) -> Result<bool, redb::BackendError> {
        self.count.other(|| self.inner.try_lock_range(a, b))
    }
    fn try_lock_shared_range(&self, a: Bound, b: Bound) -> Result<bool, redb::BackendError> {
        self.count.other(|| self.inner.try_lock_shared_range(a, b))
    }
    fn lock_range(&self, a: Bound, b: Bound) -> Result<(), redb::BackendError> {
        self.count.other(|| self.inner.lock_range(a, b))
    }
    fn lock_shared_range(&self, a: Bound, b: Bound) -> Result<(), redb::BackendError> {
        self.count.other(|| self.inner.lock_shared_range(a, b))
    }
    fn unlock_range(&self, a: Bound, b: Bound) -> Result<(), redb::BackendError> {
        self.count.other(|| self.inner.unlock_range(a, b))
    }
    fn query_lock_range(&self, a: Bound, b: Bound) -> Result<bool, redb::BackendError> {
        self.count.other(|| self.inner.query_lock_range(a, b))
    }
}

const FLOOR: redb::TableDefinition<u64, &[u8]> = redb::TableDefinition::new("floor");

fn redb_floor(path: &Path, exclusive: bool) -> (redb::Database, Arc<IoCount>) {
    let (backend, count) = Counting::open(path);
    let mut b = redb::Database::builder();
    b.set_cache_size(32 << 20);
    b.set_concurrency_mode(if exclusive {
        redb::ConcurrencyMode::ExclusiveWriter
    } else {
        redb::ConcurrencyMode::MultiWriter
    });
    let db = b.create_with_backend(backend).expect("redb");
    (db, count)
}

/// One durable commit of one value straight into redb: the floor under an engram note.
fn redb_floor_insert(db: &redb::Database, i: u64) {
    let tx = db.begin_write().expect("begin");
    {
        let mut t = tx.open_table(FLOOR).expect("table");
        t.insert(i, mem_text(i).as_bytes()).expect("insert");
    }
    tx.commit().expect("commit");
}

// ---------------------------------------------------------------------------------------------
// Workloads.

const WARM: u64 = 20;
/// The write workloads run in rounds, the engines taking turns within each round (in a rotating
/// order), so that a slow moment of the shared disk is spread over every engine.
const ROUNDS: usize = 5;

/// One engine of an interleaved workload: `run(k)` does the k-th chunk and returns its time.
type Turn<'a> = (&'static str, Box<dyn FnMut(usize) -> Duration + 'a>);

/// Runs `rounds` rounds; in round r every engine runs its chunk r, engines in rotating order.
/// Returns the total time of each engine.
fn interleave(rounds: usize, engines: &mut [Turn<'_>]) -> Vec<(&'static str, Duration)> {
    let mut total = vec![Duration::ZERO; engines.len()];
    for r in 0..rounds {
        for k in 0..engines.len() {
            let e = (k + r) % engines.len();
            total[e] += (engines[e].1)(r);
        }
    }
    engines.iter().map(|e| e.0).zip(total).collect()
}

fn note_durable(plan: &Plan, dir: &Path, rep: &mut Report) {
    let w = "note_durable";
    let n = plan.durable_notes as u64;
    let chunk = n / ROUNDS as u64;
    println!("{w}: {n} memories, each its own durable commit");
    if plan.quick {
        rep.note(format!(
            "{w}: quick mode, {n} commits per engine (full: 2000)"
        ));
    }
    // engram, the default options (MultiWriter: many processes may share the file).
    let store = engram_create(&dir.join("nd.redb"), false);
    // Diagnostic: the same with Options::exclusive(true) (one process owns the file).
    let xstore = engram_create(&dir.join("nd-x.redb"), true);
    let c = sqlite_open(&dir.join("nd.sqlite"));
    let mut j = JsonList::new(&dir.join("nd.json"));
    let mut f = FlatLog::create(&dir.join("nd.optmem"));
    for i in 0..WARM {
        store.note(SCOPE, new_memory(i)).expect("note");
        xstore.note(SCOPE, new_memory(i)).expect("note");
        sqlite_note(&c, i);
        j.add(i..i + 1);
        f.append_durable(1);
    }
    let ids = |r: usize| WARM + r as u64 * chunk..WARM + (r as u64 + 1) * chunk;
    let mut engines: Vec<Turn<'_>> = vec![
        (
            ENGRAM,
            Box::new(|r| {
                timed(|| {
                    for i in ids(r) {
                        store.note(SCOPE, new_memory(i)).expect("note");
                    }
                })
            }),
        ),
        (
            "engram-x",
            Box::new(|r| {
                timed(|| {
                    for i in ids(r) {
                        xstore.note(SCOPE, new_memory(i)).expect("note");
                    }
                })
            }),
        ),
        (
            SQLITE,
            Box::new(|r| {
                timed(|| {
                    for i in ids(r) {
                        sqlite_note(&c, i);
                    }
                })
            }),
        ),
        (
            JSONFILE,
            Box::new(|r| {
                timed(|| {
                    for i in ids(r) {
                        j.add(i..i + 1);
                    }
                })
            }),
        ),
        (
            FLATFILE,
            Box::new(|r| {
                timed(|| {
                    for _ in ids(r) {
                        f.append_durable(1);
                    }
                })
            }),
        ),
    ];
    let totals = interleave(ROUNDS, &mut engines);
    drop(engines);
    let done = WARM + chunk * ROUNDS as u64;
    assert_eq!(store.count(SCOPE).expect("count"), done);
    assert_eq!(sqlite_count(&c), done);
    assert_eq!(j.items.len() as u64, done);
    assert_eq!(f.count, done);
    assert_eq!(xstore.count(SCOPE).expect("count"), done);
    let n = (chunk * ROUNDS as u64) as usize;
    for (e, t) in totals {
        match ENGINES.into_iter().find(|x| *x == e) {
            Some(e) => rep.rate(w, e, n, t),
            None => rep.diag(format!(
                "{w}: engram with Options::exclusive(true) (one fsync per commit): {:.0} ops/s, {:.1} us/op",
                n as f64 / t.as_secs_f64(),
                t.as_secs_f64() * 1e6 / n as f64
            )),
        }
    }
}

fn note_batch(plan: &Plan, dir: &Path, rep: &mut Report) {
    let w = "note_batch";
    let (total, size) = (plan.batch_total as u64, plan.batch_size as u64);
    let per_round = total / ROUNDS as u64;
    println!("{w}: {total} memories in durable batches of {size}");
    if plan.quick {
        rep.note(format!(
            "{w}: quick mode, {total} memories per engine (full: 100,000)"
        ));
    }
    let epath = dir.join("nb.redb");
    let store = engram_create(&epath, false);
    let spath = dir.join("nb.sqlite");
    let mut c = sqlite_open(&spath);
    let mut j = JsonList::new(&dir.join("nb.json"));
    let mut f = FlatLog::create(&dir.join("nb.optmem"));
    // The batches of round r.
    let batches = move |r: usize| {
        let lo = r as u64 * per_round;
        (0..per_round / size).map(move |k| lo + k * size..lo + (k + 1) * size)
    };
    let mut engines: Vec<Turn<'_>> = vec![
        (
            ENGRAM,
            Box::new(|r| {
                timed(|| {
                    for b in batches(r) {
                        let items: Vec<NewMemory> = b.map(new_memory).collect();
                        store.append(SCOPE, items, None).expect("append");
                    }
                })
            }),
        ),
        (
            SQLITE,
            Box::new(|r| {
                timed(|| {
                    for b in batches(r) {
                        let tx = c.transaction().expect("begin");
                        {
                            let mut st = tx
                                .prepare_cached(
                                    "INSERT INTO memories(observed_us, text) VALUES (?1, ?2)",
                                )
                                .expect("prepare");
                            for k in b {
                                st.execute(params![observed(k), mem_text(k)])
                                    .expect("insert");
                            }
                        }
                        tx.commit().expect("commit");
                    }
                })
            }),
        ),
        (
            JSONFILE,
            Box::new(|r| {
                timed(|| {
                    for b in batches(r) {
                        j.add(b);
                    }
                })
            }),
        ),
        (
            FLATFILE,
            Box::new(|r| {
                timed(|| {
                    for _ in batches(r) {
                        f.append_durable(size);
                    }
                })
            }),
        ),
    ];
    let totals = interleave(ROUNDS, &mut engines);
    drop(engines);
    let done = per_round * ROUNDS as u64;
    assert_eq!(store.count(SCOPE).expect("count"), done);
    assert_eq!(sqlite_count(&c), done);
    assert_eq!(j.items.len() as u64, done);
    assert_eq!(f.count, done);
    for (e, t) in totals {
        rep.rate(w, e, done as usize, t);
    }
    drop(store);
    sqlite_checkpoint(&c);
    drop(c);
    let sq: u64 = sqlite_files(&spath).iter().map(|p| disk_bytes(p)).sum();
    rep.diag(format!(
        "{w}: after {done} appended memories (no summaries), bytes allocated per memory: engram {:.0}, sqlite {:.0}, flat file {:.0} (the JSON list: {:.0})",
        disk_bytes(&epath) as f64 / done as f64,
        sq as f64 / done as f64,
        disk_bytes(&dir.join("nb.optmem")) as f64 / done as f64,
        disk_bytes(&dir.join("nb.json")) as f64 / done as f64,
    ));
}

/// Runs `per` operations on each of `threads` threads (`op(state, thread, k)`), all started
/// together; returns the wall time from the start to the last finish.
fn concurrently<S: Send + 'static>(
    threads: usize,
    per: usize,
    setup: impl Fn(usize) -> S,
    op: impl Fn(&mut S, usize, usize) + Send + Sync + 'static,
) -> Duration {
    let barrier = Arc::new(Barrier::new(threads + 1));
    let op = Arc::new(op);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let mut state = setup(t);
            let barrier = Arc::clone(&barrier);
            let op = Arc::clone(&op);
            std::thread::spawn(move || {
                barrier.wait();
                for k in 0..per {
                    op(&mut state, t, k);
                }
            })
        })
        .collect();
    barrier.wait();
    let s = Instant::now();
    for h in handles {
        h.join().expect("thread");
    }
    s.elapsed()
}

fn note_concurrent(plan: &Plan, dir: &Path, rep: &mut Report) {
    let w = "note_concurrent";
    let (threads, per) = (plan.threads, plan.per_thread);
    let per_round = per / ROUNDS;
    let n = threads * per_round * ROUNDS;
    println!("{w}: {threads} threads x {per} durable single memories");
    if plan.quick {
        rep.note(format!(
            "{w}: quick mode, {per} notes per thread (full: 250)"
        ));
    }
    // Ids: round r, thread t, k-th note.
    let id = move |r: usize, t: usize, k: usize| {
        (r * threads * per_round + t * per_round + k) as u64 + WARM
    };

    let store = Arc::new(engram_create(&dir.join("nc.redb"), false));
    let xstore = Arc::new(engram_create(&dir.join("nc-x.redb"), true));
    let spath = dir.join("nc.sqlite");
    let c = sqlite_open(&spath);
    let j = Arc::new(Mutex::new(JsonList::new(&dir.join("nc.json"))));
    // One shared file: the record is written under the mutex (so ids are dense), and each
    // writer then fdatasyncs outside it, so the kernel may cover several writers with one sync.
    let flat = FlatLog::create(&dir.join("nc.optmem"));
    let sync_handle = flat.file.try_clone().expect("dup");
    let shared = Arc::new((Mutex::new(flat), sync_handle));
    for i in 0..WARM {
        store.note(SCOPE, new_memory(i)).expect("note");
        xstore.note(SCOPE, new_memory(i)).expect("note");
        sqlite_note(&c, i);
        j.lock().expect("lock").add(i..i + 1);
        shared.0.lock().expect("lock").append_durable(1);
    }
    let engram_turn = |st: &Arc<Store>| {
        let st = Arc::clone(st);
        move |r: usize| {
            concurrently(
                threads,
                per_round,
                |_| Arc::clone(&st),
                move |s, t, k| {
                    s.note(SCOPE, new_memory(id(r, t, k))).expect("note");
                },
            )
        }
    };
    let sp = spath.clone();
    let jj = Arc::clone(&j);
    let sh = Arc::clone(&shared);
    let mut engines: Vec<Turn<'_>> = vec![
        (ENGRAM, Box::new(engram_turn(&store))),
        ("engram-x", Box::new(engram_turn(&xstore))),
        (
            SQLITE,
            Box::new(move |r| {
                concurrently(
                    threads,
                    per_round,
                    |_| sqlite_open(&sp),
                    move |c, t, k| sqlite_note(c, id(r, t, k)),
                )
            }),
        ),
        (
            JSONFILE,
            Box::new(move |r| {
                concurrently(
                    threads,
                    per_round,
                    |_| Arc::clone(&jj),
                    move |j, t, k| {
                        let i = id(r, t, k);
                        j.lock().expect("lock").add(i..i + 1)
                    },
                )
            }),
        ),
        (
            FLATFILE,
            Box::new(move |_| {
                concurrently(
                    threads,
                    per_round,
                    |_| Arc::clone(&sh),
                    |s, _, _| {
                        s.0.lock().expect("lock").write(1);
                        s.1.sync_data().expect("fdatasync");
                    },
                )
            }),
        ),
    ];
    let totals = interleave(ROUNDS, &mut engines);
    drop(engines);
    let done = WARM + n as u64;
    assert_eq!(store.count(SCOPE).expect("count"), done);
    assert_eq!(xstore.count(SCOPE).expect("count"), done);
    assert_eq!(sqlite_count(&c), done);
    assert_eq!(j.lock().expect("lock").items.len() as u64, done);
    assert_eq!(shared.0.lock().expect("lock").count, done);
    for (e, t) in totals {
        if e == "engram-x" {
            rep.diag(format!(
                "{w}: engram with Options::exclusive(true): {:.0} ops/s, {:.1} us/op",
                n as f64 / t.as_secs_f64(),
                t.as_secs_f64() * 1e6 / n as f64
            ));
        } else {
            let e = ENGINES.into_iter().find(|x| *x == e).expect("engine");
            rep.rate(w, e, n, t);
        }
    }
}

/// One fully summarized history, on every engine.
struct History {
    t: u64,
    w: &'static str,
    epath: PathBuf,
    spath: PathBuf,
    fdir: PathBuf,
    cpath: PathBuf,
    store: Store,
    conn: Connection,
    flat: FlatReader,
    floor_db: redb::Database,
}

fn build_history(dir: &Path, t: u64, w: &'static str) -> History {
    println!("{w}: building fully summarized histories of {t} memories");
    let epath = dir.join(format!("h{t}.redb"));
    let spath = dir.join(format!("h{t}.sqlite"));
    let fdir = dir.join(format!("h{t}.optmem"));
    let bt = timed(|| engram_build_history(&epath, t));
    let st = timed(|| sqlite_build_history(&spath, t));
    let ft = timed(|| flat_build(&fdir, t));
    println!(
        "  built in {:.1} s (engram restore_scope), {:.1} s (sqlite), {:.1} s (flat files)",
        bt.as_secs_f64(),
        st.as_secs_f64(),
        ft.as_secs_f64()
    );
    // redb's floor runs on a byte copy of engram's file (redb will not open a file twice).
    let cpath = dir.join(format!("h{t}-copy.redb"));
    fs::copy(&epath, &cpath).expect("copy");
    let floor_db = {
        let mut b = redb::Database::builder();
        b.set_cache_size(32 << 20);
        b.set_concurrency_mode(redb::ConcurrencyMode::MultiWriter);
        b.open(&cpath).expect("redb open")
    };
    let h = History {
        t,
        w,
        store: Store::open(&epath).expect("open"),
        conn: sqlite_open(&spath),
        flat: FlatReader::open(&fdir),
        floor_db,
        epath,
        spath,
        fdir,
        cpath,
    };
    // Every engine must print the same text: same cover, same records.
    let e = h
        .store
        .wake_text(SCOPE, &WakeOptions::default())
        .expect("wake");
    assert_eq!(
        e,
        sqlite_wake(&h.conn),
        "engram and sqlite wake differ at {t}"
    );
    assert_eq!(e, h.flat.wake(), "engram and flat-file wake differ at {t}");
    assert_eq!(
        e,
        redb_wake(&h.floor_db, t),
        "the redb floor's wake differs at {t}"
    );
    println!(
        "  {} lines, identical text on every engine",
        e.lines().count() - 2
    );
    h
}

/// Wake over fully summarized histories of every size (all measured in the same alternating
/// rounds, so that sizes and engines see the same machine), then recall and bytes on disk at the
/// largest size.
fn history(plan: &Plan, dir: &Path, rep: &mut Report) {
    let names = ["wake_1e3", "wake_1e5", "wake_1e6"];
    let mut hs: Vec<History> = Vec::new();
    for (k, &t) in plan.wake_sizes.iter().enumerate() {
        let w = names[k];
        let big = k == names.len() - 1;
        if plan.runs("history", w) || (big && plan.runs("history", "recall_1e6")) {
            hs.push(build_history(dir, t, w));
        }
    }
    if hs.is_empty() {
        return;
    }
    println!(
        "wake ({WAKE_LINES} lines): {} iterations per engine and size, in alternating rounds",
        plan.wake_iters
    );
    let opts = WakeOptions::default();
    let mut fs_: Vec<Box<dyn FnMut() + '_>> = Vec::new();
    for h in &hs {
        let t = h.t;
        fs_.push(Box::new(|| {
            std::hint::black_box(h.store.wake_text(SCOPE, &opts).expect("wake"));
        }));
        fs_.push(Box::new(|| {
            std::hint::black_box(sqlite_wake(&h.conn));
        }));
        fs_.push(Box::new(|| {
            std::hint::black_box(h.flat.wake());
        }));
        fs_.push(Box::new(move || {
            std::hint::black_box(redb_wake(&h.floor_db, t));
        }));
    }
    let mut refs: Vec<&mut dyn FnMut()> = fs_
        .iter_mut()
        .map(|f| f.as_mut() as &mut dyn FnMut())
        .collect();
    let mm = medians(plan.wake_iters, &mut refs);
    drop(refs);
    drop(fs_);
    let mut wake_rows: Vec<(u64, &'static str, f64)> = Vec::new();
    for (k, h) in hs.iter().enumerate() {
        let (ens, sns, fns, floor_ns) = (mm[4 * k], mm[4 * k + 1], mm[4 * k + 2], mm[4 * k + 3]);
        let (w, t) = (h.w, h.t);
        rep.latency(w, ENGRAM, ens);
        rep.latency(w, SQLITE, sns);
        rep.latency(w, FLATFILE, fns);
        rep.not_measured(w, JSONFILE, "no summary tree");
        wake_rows.extend([
            (t, ENGRAM, ens),
            (t, SQLITE, sns),
            (t, FLATFILE, fns),
            (t, FLOOR_LINE, floor_ns),
        ]);
        rep.diag(format!(
            "{w}: redb floor (reference_cover, then the cover's values read by key from a copy of engram's file, decoded, rendered; same rounds): {:.1} us = {:.2}x the flat file; engram's wake_text is {:.2}x the floor",
            floor_ns / 1e3,
            floor_ns / fns,
            ens / floor_ns
        ));
        // The cover alone, which every engine computes: the floor under any wake.
        let cns = median_ns(plan.wake_iters, || {
            std::hint::black_box(engram::wake::reference_cover(t, WAKE_LINES));
        });
        rep.diag(format!(
            "{w}: computing the cover alone (reference_cover, no I/O) takes {:.1} us",
            cns / 1e3
        ));
    }
    if let Some(h) = hs.iter().find(|h| h.w == "wake_1e6") {
        if plan.runs("history", "recall_1e6") {
            recall(plan, &h.store, &h.conn, &h.flat, &h.floor_db, h.t, rep);
        }
    }
    for h in hs {
        let History {
            t,
            w,
            epath,
            spath,
            fdir,
            cpath,
            store,
            conn,
            flat,
            floor_db,
        } = h;
        let big = w == "wake_1e6";
        drop((store, flat, floor_db));
        let _ = fs::remove_file(&cpath);
        page_reads(&epath, w, big, rep);
        if big {
            let w = "disk_bytes_per_memory";
            println!("{w}: bytes allocated on disk / memories, for the {t}-memory histories (memories + {} summaries)", all_blocks(t).len());
            sqlite_checkpoint(&conn);
            let eb = disk_bytes(&epath);
            let sb: u64 = sqlite_files(&spath).iter().map(|p| disk_bytes(p)).sum();
            let fb = disk_bytes(&fdir);
            rep.bytes(w, ENGRAM, eb as f64 / t as f64);
            rep.bytes(w, SQLITE, sb as f64 / t as f64);
            rep.bytes(w, FLATFILE, fb as f64 / t as f64);
            rep.not_measured(w, JSONFILE, "no summary tree");
            rep.diag(format!(
                "{w}: apparent sizes: engram {:.0}, sqlite {:.0}, flatfile {:.0} bytes/memory",
                file_bytes(&epath) as f64 / t as f64,
                sqlite_files(&spath)
                    .iter()
                    .map(|p| file_bytes(p))
                    .sum::<u64>() as f64
                    / t as f64,
                file_bytes(&fdir) as f64 / t as f64
            ));
        }
        drop(conn);
        let _ = fs::remove_file(&epath);
        for p in sqlite_files(&spath) {
            let _ = fs::remove_file(p);
        }
        let _ = fs::remove_dir_all(&fdir);
    }
    let svg = wake_svg(&wake_rows, plan.quick);
    let out = bench_dir().join("wake_latency.svg");
    fs::write(&out, svg).expect("write svg");
    println!("  plot: {}", out.display());
}

/// The page reads engram's own wake and recall make (redb cache misses), through a counting
/// backend.
fn page_reads(epath: &Path, w: &str, big: bool, rep: &mut Report) {
    let (backend, count) = Counting::open(epath);
    let store = Store::with_backend(backend, "counted", Options::default()).expect("open");
    let opts = WakeOptions::default();
    store.wake_text(SCOPE, &opts).expect("wake");
    let a = count.snapshot();
    let n = 20;
    for _ in 0..n {
        store.wake_text(SCOPE, &opts).expect("wake");
    }
    let b = count.snapshot();
    rep.diag(format!(
        "{w}: engram wake, warm: {:.1} page reads from the file per wake (redb cache misses, 32 MiB cache)",
        (b[4] - a[4]) as f64 / n as f64
    ));
    if big {
        let q = RecallQuery::new(RECALL_PATTERN);
        store.recall(SCOPE, &q).expect("recall");
        let a = count.snapshot();
        let s = Instant::now();
        store.recall(SCOPE, &q).expect("recall");
        let el = s.elapsed();
        let b = count.snapshot();
        rep.diag(format!(
            "recall_1e6: engram recall reads {} pages from the file (the log does not fit the 32 MiB cache), {:.0} ms of {:.0} ms in those reads",
            b[4] - a[4],
            (b[6] - a[6]) as f64 / 1e6,
            el.as_secs_f64() * 1e3
        ));
    }
}

type LogTable = redb::TableDefinition<'static, (u32, u64), &'static [u8]>;
type TreeTable = redb::TableDefinition<'static, (u32, u8, u64), &'static [u8]>;
const LOG_T: LogTable = engram::schema::LOG;
const TREE_T: TreeTable = engram::schema::TREE;

fn redb_wake(db: &redb::Database, t: u64) -> String {
    let rtx = db.begin_read().expect("read");
    let log = rtx.open_table(LOG_T).expect("log");
    let tree = rtx.open_table(TREE_T).expect("tree");
    let cover = engram::wake::reference_cover(t, WAKE_LINES);
    let mut out = String::with_capacity(cover.len() * 96 + 128);
    let _ = writeln!(
        out,
        "Your memory, part 1 of 1, oldest first ({t} memories)."
    );
    for b in cover {
        if b.size() == 1 {
            let v = log.get((0, b.lo())).expect("get").expect("memory");
            let m: Memory = engram::codec::decode("log", &b, v.value()).expect("decode");
            let _ = writeln!(out, "#{} {} {}", m.id, date_of(m.observed_us), m.text);
        } else {
            let v = tree
                .get((0, b.level(), b.lo()))
                .expect("get")
                .expect("summary");
            let s: Summary = engram::codec::decode("tree", &b, v.value()).expect("decode");
            let _ = writeln!(out, "#{b} {}", s.text);
        }
    }
    out.push_str("You are awake.\n");
    out
}

/// The layers of redb's floor under recall, each adding one part of engram's per-record work.
const RECALL_LAYERS: [&str; 5] = [
    "range scan only",
    "+ envelope CRC check",
    "+ postcard decode to an owned Memory",
    "+ the line built with date_of and write!",
    "+ the regex (engram's loop without display_safe and lifecycle)",
];

/// The log scanned newest first straight from redb, with the first `depth + 1` layers of
/// [`RECALL_LAYERS`].
fn recall_layer(db: &redb::Database, t: u64, depth: usize, re: &regex::Regex) -> u64 {
    let rtx = db.begin_read().expect("read");
    let log = rtx.open_table(LOG_T).expect("log");
    let mut acc = 0u64;
    let mut line = String::new();
    for item in log.range((0, 0)..(0, t)).expect("range").rev() {
        let (k, v) = item.expect("item");
        let bytes = v.value();
        acc += bytes.len() as u64;
        if depth >= 1 {
            let p = engram::codec::payload("log", &k.value().1, bytes).expect("crc");
            acc += p.len() as u64;
        }
        if depth >= 2 {
            let m: Memory = engram::codec::decode("log", &k.value().1, bytes).expect("decode");
            if depth >= 3 {
                line.clear();
                let _ = write!(line, "#{} {} {}", m.id, date_of(m.observed_us), m.text);
                acc += line.len() as u64;
            }
            if depth >= 4 {
                acc += re.is_match(&line) as u64;
            }
        }
    }
    acc
}

fn recall(
    plan: &Plan,
    store: &Store,
    conn: &Connection,
    flat: &FlatReader,
    floor_db: &redb::Database,
    t: u64,
    rep: &mut Report,
) {
    let w = "recall_1e6";
    println!("{w}: the regex {RECALL_PATTERN:?} over {t} memories (case-insensitive, newest that fit {RECALL_BYTES} bytes)");
    let re = engram::compile_pattern(RECALL_PATTERN).expect("regex");
    let q = RecallQuery::new(RECALL_PATTERN);
    let e = store.recall(SCOPE, &q).expect("recall");
    let (stotal, slines) = sqlite_recall(conn, &re);
    let (ftotal, flines) = flat.recall(&re);
    assert_eq!(e.total, stotal);
    assert_eq!(e.total, ftotal);
    assert_eq!(e.lines, slines);
    assert_eq!(e.lines, flines);
    println!(
        "  {} matches, {} shown, identical on the three engines",
        e.total,
        e.lines.len()
    );
    let iters = plan.recall_iters;
    let mm = medians(
        iters,
        &mut [
            &mut || {
                std::hint::black_box(store.recall(SCOPE, &q).expect("recall"));
            },
            &mut || {
                std::hint::black_box(sqlite_recall(conn, &re));
            },
            &mut || {
                std::hint::black_box(flat.recall(&re));
            },
            &mut || {
                std::hint::black_box(recall_layer(floor_db, t, 0, &re));
            },
            &mut || {
                std::hint::black_box(recall_layer(floor_db, t, 1, &re));
            },
            &mut || {
                std::hint::black_box(recall_layer(floor_db, t, 2, &re));
            },
            &mut || {
                std::hint::black_box(recall_layer(floor_db, t, 3, &re));
            },
            &mut || {
                std::hint::black_box(recall_layer(floor_db, t, 4, &re));
            },
        ],
    );
    let (ens, sns, fns) = (mm[0], mm[1], mm[2]);
    let mut prev = 0.0;
    for (k, name) in RECALL_LAYERS.iter().enumerate() {
        let ns = mm[3 + k];
        rep.diag(format!(
            "{w}: redb floor, {name}: {:.0} ms (+{:.0} ms), measured in the same rounds (engram {:.0} ms, flat file {:.0} ms)",
            ns / 1e6,
            (ns - prev) / 1e6,
            ens / 1e6,
            fns / 1e6
        ));
        prev = ns;
    }
    rep.latency(w, ENGRAM, ens);
    rep.latency(w, SQLITE, sns);
    rep.latency(w, FLATFILE, fns);
    rep.not_measured(
        w,
        JSONFILE,
        "no log to scan (the list would be parsed whole)",
    );
    // Where a recall's time goes: the per-record work outside the scan itself.
    let dns = median_ns(iters, || {
        let mut n = 0u64;
        for i in (0..t).rev() {
            n += date_of(observed(i)).len() as u64;
        }
        std::hint::black_box(n);
    });
    rep.diag(format!(
        "{w}: formatting {t} dates with text::date_of alone takes {:.1} ms ({:.0}% of engram's recall)",
        dns / 1e6,
        dns / ens * 100.0
    ));
}

#[derive(Default)]
struct Growth {
    elapsed: Duration,
    saves: usize,
    bytes: u64,
    early: u64,
    late: u64,
}

/// Grows session `s` turn by turn to `turns` messages, calling `save` with the whole list after
/// every turn. Bytes written (from /proc/self/io) are also sampled over the first and the last
/// ten turns.
fn grow_one(g: &mut Growth, s: usize, turns: usize, save: &mut dyn FnMut(&str, &[String])) {
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
        save(&id, &msgs[..t]);
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

/// A session store's save: the session id and the whole list of messages.
type SaveFn<'a> = dyn FnMut(&str, &[String]) + 'a;

fn session_growth(plan: &Plan, dir: &Path, rep: &mut Report) {
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
    let epath = dir.join("sg.redb");
    let store = engram_create(&epath, false);
    let xstore = engram_create(&dir.join("sg-x.redb"), true);
    let spath = dir.join("sg.sqlite");
    let c = sqlite_open(&spath);
    let jdir = dir.join("sg.json");
    fs::create_dir_all(&jdir).expect("mkdir");
    let js = JsonSessions { dir: jdir.clone() };
    let mut esave = |id: &str, msgs: &[String]| {
        let refs: Vec<&str> = msgs.iter().map(String::as_str).collect();
        store.session_save(id, &refs, None).expect("save");
    };
    let mut xsave = |id: &str, msgs: &[String]| {
        let refs: Vec<&str> = msgs.iter().map(String::as_str).collect();
        xstore.session_save(id, &refs, None).expect("save");
    };
    let mut ssave = |id: &str, msgs: &[String]| {
        c.prepare_cached("INSERT OR REPLACE INTO sessions(id, messages) VALUES (?1, ?2)")
            .expect("prepare")
            .execute(params![id, json_array(msgs)])
            .expect("save");
    };
    let mut jsave = |id: &str, msgs: &[String]| js.save(id, msgs);
    let mut engines: [(&'static str, &mut SaveFn<'_>, Growth); 4] = [
        (ENGRAM, &mut esave, Growth::default()),
        ("engram-x", &mut xsave, Growth::default()),
        (SQLITE, &mut ssave, Growth::default()),
        (JSONFILE, &mut jsave, Growth::default()),
    ];
    // Session by session, the engines taking turns (rotating order).
    for s in 0..sessions {
        for k in 0..engines.len() {
            let e = &mut engines[(k + s) % 4];
            grow_one(&mut e.2, s, turns, e.1);
        }
    }
    let results: Vec<(&'static str, Growth)> =
        engines.into_iter().map(|(e, _, g)| (e, g)).collect();
    assert_eq!(
        store
            .session_load(&session_id(0))
            .expect("load")
            .expect("exists")
            .len(),
        turns
    );
    assert_eq!(js.load(&session_id(0)).expect("exists").len(), turns);
    drop(store);
    sqlite_checkpoint(&c);
    drop(c);
    let payload = (0..turns).map(|i| message(0, i).len()).sum::<usize>() as f64 / turns as f64;
    let window = (sessions * 10.min(turns)) as f64;
    for (engine, g) in results {
        let Some(engine) = ENGINES.into_iter().find(|x| *x == engine) else {
            rep.diag(format!(
                "{w}: engram with Options::exclusive(true) (one fsync per commit): {:.0} saves/s, {:.1} us/save, {:.0} bytes written/save",
                g.saves as f64 / g.elapsed.as_secs_f64(),
                g.elapsed.as_secs_f64() * 1e6 / g.saves as f64,
                g.bytes as f64 / g.saves as f64
            ));
            continue;
        };
        let disk = match engine {
            ENGRAM => disk_bytes(&epath),
            SQLITE => sqlite_files(&spath).iter().map(|p| disk_bytes(p)).sum(),
            _ => disk_bytes(&jdir),
        };
        rep.rate(w, engine, g.saves, g.elapsed);
        rep.put(w, engine, BYTES, g.bytes as f64 / g.saves as f64);
        rep.fact(&format!("{engine} early"), g.early as f64 / window);
        rep.fact(&format!("{engine} late"), g.late as f64 / window);
        println!(
            "  {w:<16} {engine:<9} {:>12.0} bytes written/save (mean)",
            g.bytes as f64 / g.saves as f64,
        );
        rep.diag(format!(
            "{w}: {engine}: bytes written per save {:.0} over turns 1-10, {:.0} over turns {}-{} (a new message is {payload:.0} bytes); {:.0} bytes on disk per message after the run",
            g.early as f64 / window,
            g.late as f64 / window,
            turns - 9,
            turns,
            disk as f64 / (sessions * turns) as f64
        ));
    }
    rep.not_measured(w, FLATFILE, "OptMem has no sessions");
}

fn sessions(plan: &Plan, dir: &Path, rep: &mut Report) {
    let (n, m) = (plan.stored_sessions, plan.stored_messages);
    println!("session_load, session_list: {n} sessions of {m} messages stored");
    let msgs_of = |s: usize| -> Vec<String> { (0..m).map(|i| message(s, i)).collect() };

    let epath = dir.join("ss.redb");
    let store = engram_create(&epath, false);
    let mut s = 0;
    while s < n {
        let hi = (s + 500).min(n);
        store
            .write(|tx| {
                for k in s..hi {
                    let msgs = msgs_of(k);
                    let refs: Vec<&str> = msgs.iter().map(String::as_str).collect();
                    tx.session_save(&session_id(k), &refs, None)?;
                }
                Ok(())
            })
            .expect("save");
        s = hi;
    }
    let spath = dir.join("ss.sqlite");
    let mut c = sqlite_open(&spath);
    {
        let tx = c.transaction().expect("begin");
        {
            let mut st = tx
                .prepare("INSERT OR REPLACE INTO sessions(id, messages) VALUES (?1, ?2)")
                .expect("prepare");
            for k in 0..n {
                st.execute(params![session_id(k), json_array(&msgs_of(k))])
                    .expect("insert");
            }
        }
        tx.commit().expect("commit");
    }
    sqlite_checkpoint(&c);
    let jdir = dir.join("ss.json");
    fs::create_dir_all(&jdir).expect("mkdir");
    let js = JsonSessions { dir: jdir.clone() };
    for k in 0..n {
        // Setup only: written without fsync.
        fs::write(
            jdir.join(format!("{}.json", session_id(k))),
            json_array(&msgs_of(k)),
        )
        .expect("write");
    }

    // Same answers everywhere.
    let id = session_id(n / 2);
    let e = store.session_load(&id).expect("load").expect("exists");
    let sq = |c: &Connection, id: &str| -> Vec<String> {
        c.prepare_cached("SELECT messages FROM sessions WHERE id = ?1")
            .expect("prepare")
            .query_row(params![id], |r| Ok(parse_array(r.get_ref(0)?.as_str()?)))
            .expect("row")
    };
    assert_eq!(e, sq(&c, &id));
    assert_eq!(Some(e), js.load(&id));
    let ids = |c: &Connection| -> Vec<String> {
        let mut st = c
            .prepare_cached("SELECT id FROM sessions ORDER BY id")
            .expect("prepare");
        st.query_map([], |r| r.get::<_, String>(0))
            .expect("query")
            .map(|r| r.expect("id"))
            .collect()
    };
    let listed: Vec<String> = store
        .session_list("", None, None)
        .expect("list")
        .into_iter()
        .map(|i| i.id)
        .collect();
    assert_eq!(listed.len(), n);
    assert_eq!(listed, ids(&c));
    assert_eq!(listed, js.list());

    let w = "session_load";
    let pick = |k: usize| session_id(k * 7919 % n);
    let k = std::cell::Cell::new(0usize);
    let next = || {
        k.set(k.get() + 1);
        pick(k.get())
    };
    let mm = medians(
        plan.load_iters,
        &mut [
            &mut || {
                std::hint::black_box(store.session_load(&next()).expect("load"));
            },
            &mut || {
                std::hint::black_box(sq(&c, &next()));
            },
            &mut || {
                std::hint::black_box(js.load(&next()));
            },
        ],
    );
    let (ens, sns, jns) = (mm[0], mm[1], mm[2]);
    rep.latency(w, ENGRAM, ens);
    rep.latency(w, SQLITE, sns);
    rep.latency(w, JSONFILE, jns);
    rep.not_measured(w, FLATFILE, "OptMem has no sessions");

    let w = "session_list";
    let mm = medians(
        plan.list_iters,
        &mut [
            &mut || {
                std::hint::black_box(store.session_list("", None, None).expect("list"));
            },
            &mut || {
                std::hint::black_box(ids(&c));
            },
            &mut || {
                std::hint::black_box(js.list());
            },
        ],
    );
    let (ens, sns, jns) = (mm[0], mm[1], mm[2]);
    rep.latency(w, ENGRAM, ens);
    rep.latency(w, SQLITE, sns);
    rep.latency(w, JSONFILE, jns);
    rep.not_measured(w, FLATFILE, "OptMem has no sessions");
    let ids_ns = median_ns(plan.list_iters, || {
        std::hint::black_box(store.session_ids().expect("ids"));
    });
    rep.diag(format!(
        "{w}: engram session_ids() (ids only, the pure_agents list_sessions contract): {:.0} us",
        ids_ns / 1e3
    ));

    let w = "disk_bytes_per_message";
    println!("{w}: bytes allocated on disk / messages, for the {n} x {m} stored sessions");
    drop(store);
    drop(c);
    let total = (n * m) as f64;
    rep.bytes(w, ENGRAM, disk_bytes(&epath) as f64 / total);
    rep.bytes(
        w,
        SQLITE,
        sqlite_files(&spath)
            .iter()
            .map(|p| disk_bytes(p))
            .sum::<u64>() as f64
            / total,
    );
    rep.bytes(w, JSONFILE, disk_bytes(&jdir) as f64 / total);
    rep.not_measured(w, FLATFILE, "OptMem has no sessions");
    let payload = (0..m).map(|i| message(0, i).len()).sum::<usize>() as f64 / m as f64;
    rep.diag(format!(
        "{w}: a message is {payload:.0} bytes of JSON; apparent sizes: engram {:.0}, sqlite {:.0}, jsonfile {:.0} bytes/message",
        file_bytes(&epath) as f64 / total,
        sqlite_files(&spath).iter().map(|p| file_bytes(p)).sum::<u64>() as f64 / total,
        file_bytes(&jdir) as f64 / total
    ));
}

/// Where engram's time goes on the write paths: engram's commits against redb's floor (one
/// value, one table, one durable commit) in both concurrency modes, with the fsyncs and bytes of
/// each commit counted by a wrapping storage backend. The three run in alternating rounds.
fn diagnostics(plan: &Plan, dir: &Path, rep: &mut Report) {
    println!("diagnostics: engram's commits against redb's floor");
    let n = (plan.durable_notes.min(1000) / ROUNDS) as u64;
    for exclusive in [false, true] {
        let mode = if exclusive {
            "ExclusiveWriter"
        } else {
            "MultiWriter (default)"
        };
        let open = |name: &str| {
            let (backend, count) = Counting::open(&dir.join(format!("dg-{name}-{exclusive}.redb")));
            let store =
                Store::with_backend(backend, "diag", Options::default().exclusive(exclusive))
                    .expect("store");
            (store, count)
        };
        let (notes, ncount) = open("note");
        let (db, fcount) = redb_floor(&dir.join(format!("dg-floor-{exclusive}.redb")), exclusive);
        let (sess, scount) = open("session");
        let msgs: Vec<String> = (0..200).map(|i| message(0, i)).collect();
        let save = |k: usize| {
            let refs: Vec<&str> = msgs[..k].iter().map(String::as_str).collect();
            sess.session_save("s", &refs, None).expect("save");
        };
        for i in 0..WARM {
            notes.note(SCOPE, new_memory(i)).expect("note");
            redb_floor_insert(&db, i);
        }
        for k in 1..=100 {
            save(k);
        }
        // (time, counters before, counters after) summed over rounds.
        let mut acc = [(Duration::ZERO, [0u64; 7]); 3];
        let add = |slot: &mut (Duration, [u64; 7]), t: Duration, a: [u64; 7], b: [u64; 7]| {
            slot.0 += t;
            for i in 0..7 {
                slot.1[i] += b[i] - a[i];
            }
        };
        let per_save = 100 / ROUNDS;
        for r in 0..ROUNDS as u64 {
            let ids = WARM + r * n..WARM + (r + 1) * n;
            let a = ncount.snapshot();
            let t = timed(|| {
                for i in ids.clone() {
                    notes.note(SCOPE, new_memory(i)).expect("note");
                }
            });
            add(&mut acc[0], t, a, ncount.snapshot());
            let a = fcount.snapshot();
            let t = timed(|| {
                for i in ids.clone() {
                    redb_floor_insert(&db, i);
                }
            });
            add(&mut acc[1], t, a, fcount.snapshot());
            let a = scount.snapshot();
            let first = 101 + r as usize * per_save;
            let t = timed(|| {
                for k in first..first + per_save {
                    save(k);
                }
            });
            add(&mut acc[2], t, a, scount.snapshot());
        }
        let total = n * ROUNDS as u64;
        commit_line(rep, &format!("engram note, {mode}"), total, acc[0]);
        commit_line(
            rep,
            &format!("redb floor (1 insert), {mode}"),
            total,
            acc[1],
        );
        commit_line(
            rep,
            &format!("engram session_save (101st-200th message), {mode}"),
            (per_save * ROUNDS) as u64,
            acc[2],
        );
        // engram, 8 threads: how many notes each group commit carries.
        let notes = Arc::new(notes);
        let per = plan.per_thread;
        let a = ncount.snapshot();
        let t = concurrently(
            plan.threads,
            per,
            |_| Arc::clone(&notes),
            move |s, t, k| {
                s.note(SCOPE, new_memory((2_000_000 + t * per + k) as u64))
                    .expect("note");
            },
        );
        let b = ncount.snapshot();
        let m = (plan.threads * per) as f64;
        let syncs_per_commit = if exclusive { 1.0 } else { 2.0 };
        let commits = (b[0] - a[0]) as f64 / syncs_per_commit;
        rep.diag(format!(
            "engram note, {} threads, {mode}: {:.0} notes/s, {:.0} commits/s, {:.2} notes per commit (group commit), {:.1} us/commit of which {:.1} us in fsyncs",
            plan.threads,
            m / t.as_secs_f64(),
            commits / t.as_secs_f64(),
            m / commits,
            t.as_secs_f64() * 1e6 / commits,
            (b[1] - a[1]) as f64 / 1e3 / commits
        ));
        // redb floor, 8 threads, blocking begin_write
        let db = Arc::new(db);
        let a = fcount.snapshot();
        let per = plan.per_thread;
        let t = concurrently(
            plan.threads,
            per,
            |_| Arc::clone(&db),
            move |db, t, k| redb_floor_insert(db, (1_000_000 + t * per + k) as u64),
        );
        let b = fcount.snapshot();
        let m = (plan.threads * per) as f64;
        rep.diag(format!(
            "redb floor, {} threads, blocking begin_write, {mode}: {:.0} commits/s, {:.1} us/commit wall, {:.2} fsyncs per commit",
            plan.threads,
            m / t.as_secs_f64(),
            t.as_secs_f64() * 1e6 / m,
            (b[0] - a[0]) as f64 / m
        ));
    }
    // The durable-append floor of this disk.
    let mut f = FlatLog::create(&dir.join("dg.optmem"));
    let n = plan.durable_notes.min(1000);
    let t = timed(|| {
        for _ in 0..n {
            f.append_durable(1);
        }
    });
    rep.diag(format!(
        "floor: flat-file append + fdatasync: {:.1} us/commit",
        t.as_secs_f64() * 1e6 / n as f64
    ));
}

fn commit_line(rep: &mut Report, what: &str, n: u64, acc: (Duration, [u64; 7])) {
    let (t, d) = acc;
    let per = |i: usize| d[i] as f64 / n as f64;
    let us = t.as_secs_f64() * 1e6 / n as f64;
    let (sync_us, write_us, other_us) = (per(1) / 1e3, per(5) / 1e3, per(6) / 1e3);
    rep.diag(format!(
        "{what}: {us:.1} us/commit = {sync_us:.1} us in {:.2} fsyncs + {write_us:.1} us in {:.1} writes ({:.0} bytes) + {other_us:.1} us in reads/locks/set_len ({:.1} reads) + {:.1} us CPU",
        per(0),
        per(2),
        per(3),
        per(4),
        us - sync_us - write_us - other_us
    ));
}

/// CPU profile targets for callgrind (`-- --only profile:note|note-mw|session|wake|wake3|wake6|recall|load`): the
/// engram work of one workload, in a function named `measured_part` so that
/// `valgrind --tool=callgrind --toggle-collect='*measured_part*'` leaves the setup out.
fn profile(dir: &Path, what: &str) {
    let path = dir.join("pf.redb");
    match what {
        "note" | "note-mw" => {
            let store = engram_create(&path, what == "note");
            measured_part(&mut || {
                for i in 0..200 {
                    store.note(SCOPE, new_memory(i)).expect("note");
                }
            });
        }
        "session" => {
            let store = engram_create(&path, true);
            let msgs: Vec<String> = (0..200).map(|i| message(0, i)).collect();
            measured_part(&mut || {
                for k in 1..=200 {
                    let refs: Vec<&str> = msgs[..k].iter().map(String::as_str).collect();
                    store.session_save("s", &refs, None).expect("save");
                }
            });
        }
        "load" => {
            let store = engram_create(&path, true);
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
                    std::hint::black_box(
                        store.session_load(&session_id(k * 7 % 1000)).expect("load"),
                    );
                }
                for _ in 0..20 {
                    std::hint::black_box(store.session_list("", None, None).expect("list"));
                }
            });
        }
        "wake" | "wake3" | "wake6" => {
            let t = match what {
                "wake3" => 1_000,
                "wake6" => 1_000_000,
                _ => 10_000,
            };
            engram_build_history(&path, t);
            let store = Store::open(&path).expect("open");
            let opts = WakeOptions::default();
            measured_part(&mut || {
                for _ in 0..100 {
                    std::hint::black_box(store.wake_text(SCOPE, &opts).expect("wake"));
                }
            });
        }
        "recall" => {
            engram_build_history(&path, 20_000);
            let store = Store::open(&path).expect("open");
            let q = RecallQuery::new(RECALL_PATTERN);
            measured_part(&mut || {
                for _ in 0..10 {
                    std::hint::black_box(store.recall(SCOPE, &q).expect("recall"));
                }
            });
        }
        other => panic!("unknown profile target {other:?}"),
    }
    println!("profile {what}: done");
}

#[inline(never)]
fn measured_part(f: &mut dyn FnMut()) {
    f();
}

// ---------------------------------------------------------------------------------------------
// Output: the table, the targets, the JSON and the plot.

fn bench_dir() -> PathBuf {
    // The workspace's target dir: the parent of the `tmp` dir cargo gives benchmarks.
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| {
            Path::new(env!("CARGO_TARGET_TMPDIR"))
                .parent()
                .map(Path::to_path_buf)
        })
        .unwrap_or_else(|| Path::new(ROOT).join("target"));
    let d = target.join("bench");
    fs::create_dir_all(&d).expect("mkdir target/bench");
    d
}

/// The dashed line of the wake plot: redb's floor under engram's wake (a diagnostic, not an engine).
const FLOOR_LINE: &str = "redb-floor";

const ORDER: [&str; 12] = [
    "note_durable",
    "note_batch",
    "note_concurrent",
    "wake_1e3",
    "wake_1e5",
    "wake_1e6",
    "recall_1e6",
    "session_growth",
    "session_load",
    "session_list",
    "disk_bytes_per_memory",
    "disk_bytes_per_message",
];

fn fmt_num(v: f64) -> String {
    if v >= 100.0 {
        let s = format!("{v:.0}");
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        out
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// The table in Markdown: absolute figures and, per row, engram's advantage (the other engine's
/// time or bytes divided by engram's: above 1 means engram is faster or smaller).
fn table(rep: &Report) -> String {
    let mut out = String::new();
    out.push_str("| workload | engine | ops/s | µs/op | bytes | vs engram |\n");
    out.push_str("|---|---|---:|---:|---:|---:|\n");
    for w in ORDER {
        for e in ENGINES {
            let ops = rep.get(w, e, OPS);
            let ns = rep.get(w, e, NS);
            let b = rep.get(w, e, BYTES);
            if ops.is_none() && ns.is_none() && b.is_none() {
                if let Some((_, _, why)) = rep.na.iter().find(|x| x.0 == w && x.1 == e) {
                    let _ = writeln!(out, "| {w} | {e} | n/a | n/a | n/a | ({why}) |");
                }
                continue;
            }
            let ratio = if let (Some(ns), Some(base)) = (ns, rep.get(w, ENGRAM, NS)) {
                format!("{:.2}x", ns / base)
            } else if let (Some(b), Some(base)) = (b, rep.get(w, ENGRAM, BYTES)) {
                format!("{:.2}x", b / base)
            } else {
                String::new()
            };
            let ratio = if e == ENGRAM { "1".to_string() } else { ratio };
            let _ = writeln!(
                out,
                "| {w} | {e} | {} | {} | {} | {ratio} |",
                ops.map(fmt_num).unwrap_or_default(),
                ns.map(|v| fmt_num(v / 1e3)).unwrap_or_default(),
                b.map(fmt_num).unwrap_or_default(),
            );
        }
    }
    out
}

/// The targets of the issue, each with its measured ratio.
fn targets(rep: &Report) -> String {
    let ns = |w: &str, e: &str| rep.get(w, e, NS);
    let mut out = String::new();
    out.push_str("| target | measured | met |\n|---|---|---|\n");
    let mut row = |name: &str, value: Option<(f64, String)>, ok: &dyn Fn(f64) -> bool| match value {
        Some((v, shown)) => {
            let _ = writeln!(
                out,
                "| {name} | {shown} | {} |",
                if ok(v) { "yes" } else { "**no**" }
            );
        }
        None => {
            let _ = writeln!(out, "| {name} | not run | |");
        }
    };
    let ratio = |a: Option<f64>, b: Option<f64>, label: &str| -> Option<(f64, String)> {
        let (a, b) = (a?, b?);
        Some((a / b, format!("{:.2}x {label}", a / b)))
    };
    row(
        "note_durable at least as fast as SQLite",
        ratio(
            ns("note_durable", SQLITE),
            ns("note_durable", ENGRAM),
            "(SQLite time / engram time)",
        ),
        &|v| v >= 1.0,
    );
    row(
        "note_concurrent at least 3x SQLite",
        ratio(
            ns("note_concurrent", SQLITE),
            ns("note_concurrent", ENGRAM),
            "(SQLite time / engram time)",
        ),
        &|v| v >= 3.0,
    );
    row(
        "wake_1e6 within 2x of wake_1e3",
        ratio(
            ns("wake_1e6", ENGRAM),
            ns("wake_1e3", ENGRAM),
            "(engram 1e6 / engram 1e3)",
        ),
        &|v| v <= 2.0,
    );
    row(
        "wake_1e6 within 2x of the flat file reading the same cover",
        ratio(
            ns("wake_1e6", ENGRAM),
            ns("wake_1e6", FLATFILE),
            "(engram / flat file)",
        ),
        &|v| v <= 2.0,
    );
    row(
        "recall_1e6 within 1.5x of the flat-file scan floor",
        ratio(
            ns("recall_1e6", ENGRAM),
            ns("recall_1e6", FLATFILE),
            "(engram / flat file)",
        ),
        &|v| v <= 1.5,
    );
    row(
        "session_growth at least 10x faster than the JSON file store",
        ratio(
            ns("session_growth", JSONFILE),
            ns("session_growth", ENGRAM),
            "(JSON time / engram time)",
        ),
        &|v| v >= 10.0,
    );
    row(
        "session_growth faster than SQLite whole-row rewrites",
        ratio(
            ns("session_growth", SQLITE),
            ns("session_growth", ENGRAM),
            "(SQLite time / engram time)",
        ),
        &|v| v > 1.0,
    );
    let (early, late) = (rep.get_fact("engram early"), rep.get_fact("engram late"));
    row(
        "session_growth: bytes written per save proportional to the new messages (not to the history)",
        early.zip(late).map(|(e, l)| {
            (
                l / e,
                format!(
                    "{:.0} bytes/save over turns 1-10, {:.0} over turns 191-200 ({:.2}x) for one new message of 322 bytes",
                    e,
                    l,
                    l / e
                ),
            )
        }),
        &|v| v <= 1.5,
    );
    row(
        "bytes on disk per memory at most OptMem's 320 + 288",
        rep.get("disk_bytes_per_memory", ENGRAM, BYTES)
            .map(|v| (v, format!("{v:.0} bytes"))),
        &|v| v <= 608.0,
    );
    out
}

fn json(rep: &Report) -> String {
    let rows: Vec<serde_json::Value> = rep
        .rows
        .iter()
        .map(|r| {
            serde_json::json!({
                "workload": r.workload,
                "engine": r.engine,
                "metric": r.metric,
                "value": r.value,
            })
        })
        .collect();
    serde_json::to_string_pretty(&rows).expect("json")
}

/// Wake latency against history size, one line per engine; log-scale x, linear y from 0.
fn wake_svg(rows: &[(u64, &'static str, f64)], quick: bool) -> String {
    let (w, h) = (820.0f64, 440.0f64);
    let (left, right, top, bottom) = (80.0, 250.0, 60.0, 60.0);
    let (pw, ph) = (w - left - right, h - top - bottom);
    let max_us = rows.iter().map(|r| r.2 / 1e3).fold(0.0f64, f64::max);
    // A round top for the y axis.
    let step = {
        let raw = max_us / 5.0;
        let mag = 10f64.powf(raw.log10().floor());
        [1.0, 2.0, 2.5, 5.0, 10.0]
            .iter()
            .map(|m| m * mag)
            .find(|s| *s >= raw)
            .unwrap_or(10.0 * mag)
    };
    let ymax = (max_us * 1.08 / step).ceil().max(1.0) * step;
    let x = |t: u64| left + ((t as f64).log10() - 3.0) / 3.0 * pw;
    let y = |us: f64| top + ph - us / ymax * ph;
    let mut s = String::new();
    let _ = writeln!(
        s,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="13">"#
    );
    let _ = writeln!(s, r##"<rect width="{w}" height="{h}" fill="#ffffff"/>"##);
    let _ = writeln!(
        s,
        r##"<text x="{}" y="28" font-size="16" font-weight="bold" text-anchor="middle">Wake ({WAKE_LINES} lines) latency against history size</text>"##,
        left + pw / 2.0
    );
    let _ = writeln!(
        s,
        r##"<text x="{}" y="46" fill="#555" text-anchor="middle">median per wake, warm cache, fully summarized histories{}</text>"##,
        left + pw / 2.0,
        if quick { " (quick run)" } else { "" }
    );
    // Grid and y ticks.
    let mut v = 0.0;
    while v <= ymax + step / 2.0 {
        let yy = y(v);
        let _ = writeln!(
            s,
            r##"<line x1="{left}" y1="{yy:.1}" x2="{:.1}" y2="{yy:.1}" stroke="#e0e0e0"/>"##,
            left + pw
        );
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end">{}</text>"##,
            left - 8.0,
            yy + 4.0,
            if step >= 1.0 {
                format!("{v:.0}")
            } else {
                format!("{v:.1}")
            }
        );
        v += step;
    }
    for (t, label) in [
        (1_000u64, "1,000"),
        (10_000, "10,000"),
        (100_000, "100,000"),
        (1_000_000, "1,000,000"),
    ] {
        let xx = x(t);
        let _ = writeln!(
            s,
            r##"<line x1="{xx:.1}" y1="{top}" x2="{xx:.1}" y2="{:.1}" stroke="#e0e0e0"/>"##,
            top + ph
        );
        let _ = writeln!(
            s,
            r##"<text x="{xx:.1}" y="{:.1}" text-anchor="middle">{label}</text>"##,
            top + ph + 20.0
        );
    }
    let _ = writeln!(
        s,
        r##"<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>"##
    );
    let _ = writeln!(
        s,
        r##"<text x="{:.1}" y="{:.1}" text-anchor="middle">memories in the history (log scale)</text>"##,
        left + pw / 2.0,
        h - 18.0
    );
    let _ = writeln!(
        s,
        r##"<text x="20" y="{:.1}" text-anchor="middle" transform="rotate(-90 20 {:.1})">µs per wake</text>"##,
        top + ph / 2.0,
        top + ph / 2.0
    );
    let colors = [
        (ENGRAM, "#d62728", "engram (Store::wake_text)", ""),
        (SQLITE, "#1f77b4", "SQLite (rows by key)", ""),
        (FLATFILE, "#2ca02c", "flat file (by offset)", ""),
        (
            FLOOR_LINE,
            "#888888",
            "redb floor (same cover, by key)",
            r#" stroke-dasharray="6 4""#,
        ),
    ];
    for (i, (engine, color, label, dash)) in colors.iter().enumerate() {
        let mut pts: Vec<(u64, f64)> = rows
            .iter()
            .filter(|r| r.1 == *engine)
            .map(|r| (r.0, r.2 / 1e3))
            .collect();
        pts.sort_by_key(|p| p.0);
        if pts.is_empty() {
            continue;
        }
        let path: Vec<String> = pts
            .iter()
            .map(|(t, us)| format!("{:.1},{:.1}", x(*t), y(*us)))
            .collect();
        let _ = writeln!(
            s,
            r##"<polyline points="{}" fill="none" stroke="{color}" stroke-width="2.5"{dash}/>"##,
            path.join(" ")
        );
        for (t, us) in &pts {
            let _ = writeln!(
                s,
                r##"<circle cx="{:.1}" cy="{:.1}" r="4" fill="{color}"/>"##,
                x(*t),
                y(*us)
            );
            if *engine == FLOOR_LINE {
                continue;
            }
            // The lowest engine at this size is labelled below its point, the others above.
            let lowest = rows
                .iter()
                .filter(|r| r.0 == *t && r.1 != FLOOR_LINE)
                .all(|r| r.2 / 1e3 >= *us);
            let dy = if lowest { 18.0 } else { -9.0 };
            let _ = writeln!(
                s,
                r##"<text x="{:.1}" y="{:.1}" fill="{color}" font-size="11" text-anchor="middle">{:.0}</text>"##,
                x(*t),
                y(*us) + dy,
                us
            );
        }
        let ly = top + 20.0 + i as f64 * 22.0;
        let lx = left + pw + 16.0;
        let _ = writeln!(
            s,
            r##"<line x1="{lx:.1}" y1="{ly:.1}" x2="{:.1}" y2="{ly:.1}" stroke="{color}" stroke-width="2.5"{dash}/>"##,
            lx + 22.0
        );
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" font-size="11">{label}</text>"##,
            lx + 28.0,
            ly + 4.0
        );
    }
    s.push_str("</svg>\n");
    s
}

fn machine() -> String {
    let mem = fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map(|kb| format!("{:.1} GiB", kb as f64 / (1 << 20) as f64))
        .unwrap_or_else(|| "?".into());
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_else(|| "?".into());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(0);
    format!(
        "{cores} cores ({cpu}), {mem} memory, {}",
        engram::text::rfc3339_of(engram::text::now_us())
    )
}

/// The repository root (this crate is `crates/engram-bench-compare`).
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

/// The commit of the tree the benchmark was built from (`+` when it has changes) and the compiler.
fn build_info() -> String {
    let run = |cmd: &str, args: &[&str]| {
        std::process::Command::new(cmd)
            .args(args)
            .current_dir(ROOT)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = run("git", &["rev-parse", "--short", "HEAD"]).unwrap_or_else(|| "?".into());
    let dirty = run(
        "git",
        &["status", "--porcelain", "--untracked-files=no", "src"],
    )
    .is_some_and(|s| !s.is_empty());
    let rustc = run("rustc", &["--version"]).unwrap_or_else(|| "rustc ?".into());
    format!(
        "engram {commit}{}, {rustc}",
        if dirty { " (src/ modified)" } else { "" }
    )
}

fn disk_of(p: &Path) -> String {
    let p = fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let mounts = fs::read_to_string("/proc/mounts").unwrap_or_default();
    let mut best: Option<(usize, String)> = None;
    for l in mounts.lines() {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() < 3 {
            continue;
        }
        if p.starts_with(f[1]) && best.as_ref().is_none_or(|b| f[1].len() > b.0) {
            best = Some((f[1].len(), format!("{} ({}) on {}", f[1], f[2], f[0])));
        }
    }
    best.map(|b| b.1).unwrap_or_else(|| "?".into())
}

/// The median latency of one 320-byte append + fdatasync on the benchmark's disk: the floor of a
/// durable write, measured at the start and at the end of a run to show how busy the disk was.
fn disk_probe(dir: &Path) -> f64 {
    let mut f = FlatLog::create(&dir.join("probe.optmem"));
    let ns = median_ns(100, || {
        f.append_durable(1);
    });
    let _ = fs::remove_dir_all(dir.join("probe.optmem"));
    ns / 1e3
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1))
        .map(|s| s.split(',').map(str::to_string).collect());
    let plan = Plan::new(quick, only);
    let base = std::env::var_os("ENGRAM_BENCH_DIR").map(PathBuf::from);
    let tmp = match &base {
        Some(b) => {
            fs::create_dir_all(b).expect("mkdir");
            tempfile::tempdir_in(b)
        }
        None => tempfile::tempdir(),
    }
    .expect("tempdir");
    let dir = tmp.path();
    let started = Instant::now();
    println!(
        "engram compare ({} run) on {}; stores in {} ({})",
        if quick { "quick" } else { "full" },
        machine(),
        dir.display(),
        disk_of(dir)
    );
    let probe_start = disk_probe(dir);
    println!("disk probe: append + fdatasync takes {probe_start:.0} us (median of 100)");
    let mut rep = Report::default();
    if let Some(p) = plan
        .only
        .iter()
        .flatten()
        .find_map(|o| o.strip_prefix("profile:"))
    {
        profile(dir, p);
        return;
    }
    if plan.runs("note_durable", "note_durable") {
        note_durable(&plan, dir, &mut rep);
    }
    if plan.runs("note_batch", "note_batch") {
        note_batch(&plan, dir, &mut rep);
    }
    if plan.runs("note_concurrent", "note_concurrent") {
        note_concurrent(&plan, dir, &mut rep);
    }
    history(&plan, dir, &mut rep);
    if plan.runs("session_growth", "session_growth") {
        session_growth(&plan, dir, &mut rep);
    }
    if plan.runs("sessions", "session_load") || plan.runs("sessions", "session_list") {
        sessions(&plan, dir, &mut rep);
    }
    if plan.runs("diagnostics", "diagnostics") {
        diagnostics(&plan, dir, &mut rep);
    }

    let probe_end = disk_probe(dir);
    let out = bench_dir();
    fs::write(out.join("compare.json"), json(&rep)).expect("write json");
    let mut md = String::new();
    let _ = writeln!(
        md,
        "{} run, {:.0} s, on {}; {}; stores on {}\n",
        if quick { "Quick" } else { "Full" },
        started.elapsed().as_secs_f64(),
        machine(),
        build_info(),
        disk_of(dir)
    );
    let _ = writeln!(
        md,
        "Disk probe (one 320-byte append + fdatasync, median of 100): {probe_start:.0} µs at the start, {probe_end:.0} µs at the end{}.\n",
        if probe_start.max(probe_end) > 300.0 {
            " — the disk was busy (other processes), durable figures are inflated"
        } else {
            ""
        }
    );
    md.push_str(&table(&rep));
    md.push('\n');
    md.push_str(&targets(&rep));
    if !rep.notes.is_empty() {
        md.push_str("\nScale:\n");
        for n in &rep.notes {
            let _ = writeln!(md, "- {n}");
        }
    }
    if !rep.diag.is_empty() {
        md.push_str("\nDiagnostics:\n");
        for d in &rep.diag {
            let _ = writeln!(md, "- {d}");
        }
    }
    fs::write(out.join("compare.md"), &md).expect("write md");
    println!("\n{md}");
    println!(
        "wrote {} and {}",
        out.join("compare.json").display(),
        out.join("compare.md").display()
    );
}
