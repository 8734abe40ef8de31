//! redb used directly under somna: the floor somna's figures are read against (diagnostics
//! only, not an engine of the table).
//!
//! - [`Counting`]: a `StorageBackend` that wraps redb's `FileBackend` and counts the fsyncs,
//!   writes, bytes and page reads of every commit, with the time spent in each.
//! - [`open_counted`] and [`insert`]: one value into one table per durable commit, the floor
//!   under a somna note.
//! - [`Floor`]: a byte copy of somna's history file (redb will not open a file twice), read as
//!   somna does: the same wake cover's values by key, decoded and rendered; the log scanned raw
//!   with somna's per-record work added one layer at a time.

use std::fmt::Write as _;
use std::fs::{self, OpenOptions};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use ::redb::{self, ReadableDatabase, StorageBackend};
use ::somna::text::date_of;
use ::somna::{Memory, Summary};

use crate::data::{self, WAKE_LINES};

/// The floor's line in the wake plot.
pub const NAME: &str = "redb-floor";

/// What a [`Counting`] backend has seen; `snapshot` reads it as an array (see its indices).
#[derive(Debug, Default)]
pub struct IoCount {
    syncs: AtomicU64,
    sync_ns: AtomicU64,
    writes: AtomicU64,
    write_bytes: AtomicU64,
    write_ns: AtomicU64,
    reads: AtomicU64,
    other_ns: AtomicU64,
}

impl IoCount {
    /// [syncs, sync ns, writes, write bytes, reads, write ns, other ns].
    pub fn snapshot(&self) -> [u64; 7] {
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
pub struct Counting {
    inner: redb::backends::FileBackend,
    count: Arc<IoCount>,
}

impl Counting {
    pub fn open(path: &Path) -> (Counting, Arc<IoCount>) {
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

/// A new redb database at `path` behind a [`Counting`] backend, somna's cache size.
pub fn open_counted(path: &Path, exclusive: bool) -> (redb::Database, Arc<IoCount>) {
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

/// One durable commit of one value straight into redb: the floor under a somna note.
pub fn insert(db: &redb::Database, i: u64) {
    let tx = db.begin_write().expect("begin");
    {
        let mut t = tx.open_table(FLOOR).expect("table");
        t.insert(i, data::mem_text(i).as_bytes()).expect("insert");
    }
    tx.commit().expect("commit");
}

/// One durable commit of the texts of memories `ids` straight into one redb table: the floor
/// under a somna batch (no record around the text, no scope, no index).
pub fn insert_batch(db: &redb::Database, ids: std::ops::Range<u64>) {
    let tx = db.begin_write().expect("begin");
    {
        let mut t = tx.open_table(FLOOR).expect("table");
        for i in ids {
            t.insert(i, data::mem_text(i).as_bytes()).expect("insert");
        }
    }
    tx.commit().expect("commit");
}

type LogTable = redb::TableDefinition<'static, (u32, u64), &'static [u8]>;
type TreeTable = redb::TableDefinition<'static, (u32, u8, u64), &'static [u8]>;
const LOG_T: LogTable = ::somna::format::LOG;
const TREE_T: TreeTable = ::somna::format::TREE;

/// The layers of redb's floor under recall: redb's iterator alone, then the vendored redb's
/// borrowed walk (`Range::for_each_entry_back`, which somna's scans use), then each further
/// layer adding one part of somna's per-record work to the walk.
pub const RECALL_LAYERS: [&str; 6] = [
    "range scan only (the iterator: a guard and a page reference per entry)",
    "range walk only (for_each_entry_back: entries borrowed from their page)",
    "+ envelope CRC check",
    "+ postcard decode to an owned Memory",
    "+ the line built with date_of and write!",
    "+ the regex (somna's loop without display_safe and lifecycle)",
];

/// The layer of [`RECALL_LAYERS`] that is recall's floor in the targets: the least a scan that
/// checks every record's CRC takes (somna checks every record it reads; the layers after it add
/// work somna's own loop does differently).
pub const RECALL_FLOOR: usize = 2;

/// redb on a byte copy of somna's history of `t` memories.
pub struct Floor {
    db: redb::Database,
    t: u64,
    copy: std::path::PathBuf,
}

impl Floor {
    /// Copies somna's closed store file `file` to `copy` and opens the copy. Call it before
    /// somna opens `file`: an open store marks its file as needing recovery.
    pub fn copy_of(file: &Path, copy: &Path, t: u64) -> Floor {
        fs::copy(file, copy).expect("copy");
        let mut b = redb::Database::builder();
        b.set_cache_size(32 << 20);
        b.set_concurrency_mode(redb::ConcurrencyMode::MultiWriter);
        Floor {
            db: b.open(copy).expect("redb open"),
            t,
            copy: copy.to_path_buf(),
        }
    }

    /// Closes the database and removes the copy.
    pub fn remove(self) {
        let copy = self.copy.clone();
        drop(self);
        let _ = fs::remove_file(copy);
    }

    /// The reference cover's values read by key, decoded with `somna::codec` and rendered.
    pub fn wake(&self) -> String {
        let t = self.t;
        let rtx = self.db.begin_read().expect("read");
        let log = rtx.open_table(LOG_T).expect("log");
        let tree = rtx.open_table(TREE_T).expect("tree");
        let cover = ::somna::cover::cover_all(t, WAKE_LINES)
            .map(|c| c.blocks)
            .unwrap_or_default();
        let mut out = data::wake_begin(t, cover.len());
        for b in cover {
            if b.size() == 1 {
                let v = log.get((0, b.lo())).expect("get").expect("memory");
                let m: Memory = ::somna::format::decode("log", &b, v.value()).expect("decode");
                let _ = writeln!(out, "#{} {} {}", m.id, date_of(m.observed_us), m.text);
            } else {
                let v = tree
                    .get((0, b.level(), b.lo()))
                    .expect("get")
                    .expect("summary");
                let s: Summary = ::somna::format::decode("tree", &b, v.value()).expect("decode");
                let _ = writeln!(out, "#{b} {}", s.text);
            }
        }
        out.push_str(data::WAKE_END);
        out
    }

    /// The log scanned newest first: layer 0 by redb's iterator; layer `depth` >= 1 by the
    /// walk with the layers after it up to `depth` (see [`RECALL_LAYERS`]).
    pub fn recall_layer(&self, depth: usize, re: &regex::Regex) -> u64 {
        let rtx = self.db.begin_read().expect("read");
        let log = rtx.open_table(LOG_T).expect("log");
        let mut range = log.range((0, 0)..(0, self.t)).expect("range");
        let mut acc = 0u64;
        if depth == 0 {
            for item in range.rev() {
                let (_, v) = item.expect("item");
                acc += v.value().len() as u64;
            }
            return acc;
        }
        let mut line = String::new();
        range
            .for_each_entry_back(|(_, pos), bytes| {
                acc += bytes.len() as u64;
                if depth >= 2 {
                    let p = ::somna::format::payload("log", &pos, bytes).expect("crc");
                    acc += p.len() as u64;
                }
                if depth >= 3 {
                    let m: Memory = ::somna::format::decode("log", &pos, bytes).expect("decode");
                    if depth >= 4 {
                        line.clear();
                        let _ = write!(line, "#{} {} {}", m.id, date_of(m.observed_us), m.text);
                        acc += line.len() as u64;
                    }
                    if depth >= 5 {
                        acc += re.is_match(&line) as u64;
                    }
                }
                true
            })
            .expect("walk");
        acc
    }
}

/// A byte copy of a somna session store, read as somna's `session_load` and `session_list`
/// must at least read it, by the vendored redb's borrowed walk as somna's scans read: the chunks
/// of one session by range (store format 3), each checked and decoded with `somna::format` into
/// its messages' `String`s; every session's id and record (checked, not decoded).
pub struct SessionFloor {
    db: redb::Database,
}

impl SessionFloor {
    /// Opens `file`, a closed somna store (the caller built it for the floor alone).
    pub fn open(file: &Path) -> SessionFloor {
        let mut b = redb::Database::builder();
        b.set_cache_size(32 << 20);
        b.set_concurrency_mode(redb::ConcurrencyMode::MultiWriter);
        SessionFloor {
            db: b.open(file).expect("redb open"),
        }
    }

    /// The messages of session `id`, oldest first: its record's message count (the record
    /// decoded, envelope checked), then its chunks by range until they hold that many (as somna
    /// stops: the next key would be another session's, usually in another leaf).
    pub fn load(&self, id: &str) -> Vec<String> {
        let rtx = self.db.begin_read().expect("read");
        let count = {
            let t = rtx.open_table(::somna::format::SESSIONS).expect("sessions");
            let v = t.get(id).expect("get").expect("the session");
            // The record: created, updated, revision, next sequence number, count, ... (nine
            // postcard varints; docs/design.md).
            type Record = (i64, i64, u64, u64, u64, u64, u64, u64, u64);
            let r: Record = ::somna::format::decode("sessions", &id, v.value()).expect("record");
            r.4
        };
        let t = rtx
            .open_table(::somna::format::SESSION_CHUNKS)
            .expect("session_chunks");
        let mut out = Vec::new();
        t.range((id, 0)..=(id, u64::MAX))
            .expect("range")
            .for_each_entry(|(_, seq), v| {
                let c = ::somna::format::decode_chunk(id, seq, v).expect("chunk");
                out.extend(c.entries.into_iter().map(|e| e.text));
                (out.len() as u64) < count
            })
            .expect("walk");
        out
    }

    /// Every session id, in order, each record's envelope checked.
    pub fn list(&self) -> Vec<String> {
        let rtx = self.db.begin_read().expect("read");
        let t = rtx.open_table(::somna::format::SESSIONS).expect("sessions");
        let mut out = Vec::new();
        t.range::<&str>(..)
            .expect("range")
            .for_each_entry(|id, v| {
                ::somna::format::payload("sessions", &id, v).expect("record");
                out.push(id.to_string());
                true
            })
            .expect("walk");
        out
    }
}
