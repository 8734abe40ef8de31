//! The engines under test, behind two traits: [`MemoryEngine`] (a log of memories: durable
//! notes, batches, concurrent writers, and once loaded with a summarized history, wake, recall
//! and bytes on disk) and [`SessionEngine`] (whole-list saves of conversation histories, loads,
//! lists, bytes on disk).
//!
//! Every engine lives in one file and is one [`Entry`] of [`ENGINES`]; a workload is written once
//! over the engines it is given. An engine that cannot answer a workload says why
//! ([`Lacks`]), and the table shows that reason instead of a figure.
//!
//! `redb_floor` is not an engine of the table: it is redb used directly under somna, measured
//! in the diagnostics.

pub mod flatfile;
pub mod jsonfile;
pub mod redb_floor;
pub mod somna;
pub mod sqlite;

use std::ffi::OsString;
use std::ops::Range;
use std::path::{Path, PathBuf};

use ::somna::RecallQuery;

pub const SOMNA: &str = "somna";
pub const SQLITE: &str = "sqlite";
pub const JSONFILE: &str = "jsonfile";
pub const FLATFILE: &str = "flatfile";

/// Why an engine cannot run a workload (shown in the table as "n/a" with this reason).
pub type Lacks = &'static str;

/// A writer another thread makes durable single notes through: `w(i)` writes memory `i`.
pub type Writer = Box<dyn FnMut(u64) + Send>;

/// The engines of the table, in its order.
pub const ENGINES: [Entry; 4] = [
    somna::ENTRY,
    sqlite::ENTRY,
    jsonfile::ENTRY,
    flatfile::ENTRY,
];

/// Variants of an engine, run next to it in some workloads and reported in the diagnostics.
pub const VARIANTS: [Entry; 2] = [somna::EXCLUSIVE, somna::EXCLUSIVE_NO_JOURNAL];

/// SQLite with a full-text index written with each memory: in `note_batch` only, beside SQLite
/// (the anchor of issue 50's target), reported like a variant.
pub const SEARCHABLE: [Entry; 1] = [sqlite::FTS];

/// One engine: its name and how to open it for each kind of workload.
pub struct Entry {
    pub name: &'static str,
    /// For a variant: the engine it follows in the rotation, and how the diagnostics name it.
    pub variant: Option<(&'static str, &'static str)>,
    /// Opens the memory store at `stem` (each engine adds its own extension), creating it empty
    /// when it does not exist.
    pub open: fn(&Path) -> Box<dyn MemoryEngine>,
    /// Writes a fully summarized history of `t` memories at `stem`, then closes it; `None` for an
    /// engine with no summary tree.
    pub build_history: Option<fn(&Path, u64)>,
    /// Opens (or creates) the session store at `stem`, or says why the engine has none.
    pub sessions: fn(&Path) -> Result<Box<dyn SessionEngine>, Lacks>,
}

/// The engines of the table, each followed by its variants when `variants` is set: the order of
/// the rotation.
pub fn list(variants: bool) -> Vec<&'static Entry> {
    let mut out = Vec::new();
    for e in &ENGINES {
        out.push(e);
        if variants {
            out.extend(
                VARIANTS
                    .iter()
                    .filter(|v| v.variant.map(|x| x.0) == Some(e.name)),
            );
        }
    }
    out
}

/// The names of the table's engines, in its order.
pub fn names() -> impl Iterator<Item = &'static str> {
    ENGINES.iter().map(|e| e.name)
}

/// How the diagnostics name a variant; `None` for an engine of the table.
pub fn variant_label(name: &str) -> Option<&'static str> {
    VARIANTS
        .iter()
        .chain(&SEARCHABLE)
        .find(|v| v.name == name)
        .and_then(|v| v.variant.map(|x| x.1))
}

/// Opens the memory store of every entry at `stem`.
pub fn open_memory(entries: &[&Entry], stem: &Path) -> Vec<Box<dyn MemoryEngine>> {
    entries.iter().map(|e| (e.open)(stem)).collect()
}

/// The recall query, in the two forms the engines take: somna's and the regex it compiles to.
pub struct Pattern {
    pub query: RecallQuery,
    pub re: regex::Regex,
}

impl Pattern {
    pub fn new(pattern: &str) -> Pattern {
        Pattern {
            query: RecallQuery::new(pattern),
            re: ::somna::recall::compile_pattern(pattern).expect("regex"),
        }
    }
}

/// A memory store under test. Memory `i` is the same on every engine (`data::mem_text(i)`,
/// observed at `data::observed(i)`); ids are dense from 0.
pub trait MemoryEngine {
    /// The engine's name in the table, or its variant's name.
    fn name(&self) -> &'static str;
    /// Appends memory `i` in its own durable commit.
    fn note(&mut self, i: u64);
    /// Appends memories `ids` in one durable commit.
    fn note_batch(&mut self, ids: Range<u64>);
    /// A writer for another thread (opened before any timing starts).
    fn writer(&self) -> Writer;
    /// The memories stored.
    fn count(&self) -> u64;
    /// The wake text of the whole history: `WAKE_LINES` lines of the reference cover.
    fn wake(&self) -> Result<String, Lacks>;
    /// Recall of `p`, newest matches within `RECALL_BYTES`: (total matches, lines shown).
    fn recall(&self, p: &Pattern) -> Result<(u64, Vec<String>), Lacks>;
    /// Makes the files final before their size is measured: somna closes its store (redb
    /// trims the file), SQLite checkpoints its WAL. Only `files` may be called afterwards.
    fn settle(&mut self);
    /// The files and directories that hold the store.
    fn files(&self) -> Vec<PathBuf>;
}

/// A store of conversation histories under test: each save passes the whole list of messages,
/// as agent libraries do.
pub trait SessionEngine {
    /// The engine's name in the table, or its variant's name.
    fn name(&self) -> &'static str;
    /// Saves session `id` as the list `msgs` (durably).
    fn save(&mut self, id: &str, msgs: &[String]);
    /// Setup, not timed: stores sessions `0..n` (ids `data::session_id`) with `msgs_of(k)`.
    fn fill(&mut self, n: usize, msgs_of: &dyn Fn(usize) -> Vec<String>);
    /// The messages of session `id`.
    fn load(&self, id: &str) -> Option<Vec<String>>;
    /// Every session, in id order, with what somna's `session_list` returns (id, times, message
    /// count, revision): the timed list. Every engine returns the same fields, so that the
    /// workload compares like with like (issue 49).
    fn list(&self) -> Vec<Listed>;
    /// Every session id, in order: the answer `list` gives, as ids.
    fn ids(&self) -> Vec<String> {
        self.list().into_iter().map(|l| l.id).collect()
    }
    /// The ids alone, by a cheaper call than `list` where the engine has one (somna's
    /// `session_ids`, the pure_agents `list_sessions` contract); a diagnostic.
    fn ids_only(&self) -> Option<Vec<String>> {
        None
    }
    /// As [`MemoryEngine::settle`].
    fn settle(&mut self);
    /// The files and directories that hold the store.
    fn files(&self) -> Vec<PathBuf>;
}

/// One session as a list returns it, on every engine: the fields of somna's `SessionInfo` that
/// every engine can keep (its id, when it was created and last saved, its message count and its
/// revision).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Listed {
    pub id: String,
    pub created_us: i64,
    pub updated_us: i64,
    pub count: u64,
    pub revision: u64,
}

/// Microseconds since the epoch, now (the times the SQLite and JSON-file stores keep).
pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// `stem` with `suffix` appended to its last component (`h1000` + `.redb`).
pub fn with_suffix(stem: &Path, suffix: &str) -> PathBuf {
    let mut s = OsString::from(stem.as_os_str());
    s.push(suffix);
    PathBuf::from(s)
}
