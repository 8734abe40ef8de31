//! Getting memories in and out: JSON Lines export and import of every scope ([`ExportLine`],
//! [`ImportSummary`]), dated text lines ([`parse_dated_lines`]), an OptMem store
//! ([`read_optmem`]), a whole store copied to another location ([`Copied`]), and the bounded
//! reading of an input file ([`read_file`]).
//!
//! **Layer 4, import and export**: may use every layer below it ([`crate::domain`],
//! [`crate::storage`], [`crate::trust`], [`crate::memory`], [`crate::session`]).
//!
//! Getting memories in and out: dated text lines, a whole OptMem store, and JSON Lines
//! export/import of every scope. Every importer validates all of its input before it writes
//! anything, and writes in one transaction: all or nothing. JSON Lines are in `jsonl.rs`, the
//! copy of a whole store to another location (or engine) in [`copy`].

pub(crate) mod copy;
mod jsonl;

pub use copy::Copied;
pub use jsonl::{ExportLine, ImportSummary};

use std::collections::HashSet;
use std::io::Read;
use std::path::Path;

use crate::domain::block::Block;
use crate::domain::record::{BuiltFrom, Kind, Memory, Status, Summary};
use crate::domain::text::validate_scope;
use crate::domain::text::{parse_time, validate_line, MAX_ENTRY_BYTES};
use crate::error::{Error, Result};
use crate::memory::note::NewMemory;
use crate::storage::codec::encode;
use crate::storage::store::Store;
use crate::storage::tables::{LOG, PENDING, TREE};
use crate::storage::txn::WriteTxn;

/// Parses `YYYY-MM-DD text` lines (the reference's import format). Every line is checked: a real
/// date, dates never going back, valid text. Blank lines are skipped.
pub fn parse_dated_lines(input: &str, entry_bytes: usize) -> Result<Vec<NewMemory>> {
    let mut out = Vec::new();
    let mut last = i64::MIN;
    for (n, line) in input.split('\n').enumerate() {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.trim().is_empty() {
            continue;
        }
        let at = |e: Error| match e {
            Error::Invalid { what, reason } => {
                Error::invalid("import", format!("line {}: {what}: {reason}", n + 1))
            }
            e => e,
        };
        let (date, text) = line.split_once(' ').ok_or_else(|| {
            Error::invalid(
                "import",
                format!("line {}: expected `YYYY-MM-DD text`", n + 1),
            )
        })?;
        if date.len() != 10 {
            return Err(Error::invalid(
                "import",
                format!("line {}: {date:?} is not a date YYYY-MM-DD", n + 1),
            ));
        }
        let t = parse_time(date).map_err(at)?;
        if t < last {
            return Err(Error::invalid(
                "import",
                format!("line {}: dates must not go back in time", n + 1),
            ));
        }
        last = t;
        validate_line(text, entry_bytes).map_err(at)?;
        out.push(NewMemory::new(text).observed_us(t));
    }
    if out.is_empty() {
        return Err(Error::invalid("import", "no memories in the input"));
    }
    Ok(out)
}

/// An OptMem store read into memory, validated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptMemStore {
    /// The memories: observed date (microseconds) and text, ids 0.. in order.
    pub memories: Vec<(i64, String)>,
    /// The summaries present.
    pub summaries: Vec<(Block, String)>,
    /// Bytes of a torn trailing LOG.txt record that were ignored.
    pub torn_bytes: u64,
}

/// The most bytes somna reads from one input: a file given on the command line, stdin, an
/// OptMem `LOG.txt` or level file, a session file of `session import-dir` (docs/security.md).
pub const MAX_INPUT_BYTES: u64 = 256 << 20;

/// Reads a whole regular file of at most [`MAX_INPUT_BYTES`]. Anything else is refused before
/// it is read: a directory, a FIFO (which would block), a device (`/dev/zero` never ends) or a
/// socket, also behind a symbolic link; so is a longer file, without reading past the limit.
pub fn read_file(path: &Path, what: &'static str) -> Result<Vec<u8>> {
    let shown = crate::domain::text::display_safe(&path.to_string_lossy()).into_owned();
    let cannot = |e: std::io::Error| Error::invalid(what, format!("cannot read {shown}: {e}"));
    let meta = std::fs::metadata(path).map_err(cannot)?;
    if !meta.is_file() {
        return Err(Error::invalid(
            what,
            format!("{shown} is not a regular file (a directory, FIFO, device or socket)"),
        ));
    }
    let file = std::fs::File::open(path).map_err(cannot)?;
    read_bounded(file, what, &shown)
}

/// Reads `r` to its end, refusing it (after [`MAX_INPUT_BYTES`] and one more byte) when it holds
/// more; `name` says what it is in the error.
pub fn read_bounded(r: impl Read, what: &'static str, name: &str) -> Result<Vec<u8>> {
    let mut buf = Vec::new();
    r.take(MAX_INPUT_BYTES + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > MAX_INPUT_BYTES {
        return Err(Error::invalid(
            what,
            format!("{name} holds more than {} MiB", MAX_INPUT_BYTES >> 20),
        ));
    }
    Ok(buf)
}

const LOG_RECORD: usize = 320;
const TREE_RECORD: usize = 288;

/// Reads and validates an OptMem directory (`LOG.txt` and `TREE/<size>`). A torn trailing record
/// is ignored; any other bad record is an error naming its position.
pub fn read_optmem(dir: &Path) -> Result<OptMemStore> {
    let log_path = dir.join("LOG.txt");
    let bytes = read_file(&log_path, "OptMem store")?;
    let full = bytes.len() / LOG_RECORD;
    let torn_bytes = (bytes.len() % LOG_RECORD) as u64;
    let mut memories = Vec::with_capacity(full);
    for (i, rec) in bytes.chunks_exact(LOG_RECORD).enumerate() {
        let bad = |why: &str| Error::Corrupt {
            table: "LOG.txt",
            key: format!("record #{i} (byte {})", i * LOG_RECORD),
            reason: why.to_string(),
        };
        let s = record_text(rec, bad)?;
        let rest = s
            .strip_prefix(&format!("#{i} "))
            .ok_or_else(|| bad(&format!("does not start with \"#{i} \"")))?;
        let (date, text) = rest
            .split_once(' ')
            .ok_or_else(|| bad("has no date and text"))?;
        if date.len() != 10 {
            return Err(bad("has no date YYYY-MM-DD"));
        }
        let t = parse_time(date).map_err(|_| bad(&format!("has a bad date {date:?}")))?;
        validate_line(text, MAX_ENTRY_BYTES).map_err(|e| bad(&e.to_string()))?;
        memories.push((t, text.to_string()));
    }
    let total = memories.len() as u64;
    let mut summaries = Vec::new();
    let tree_dir = dir.join("TREE");
    if tree_dir.is_dir() {
        let mut sizes = Vec::new();
        for entry in std::fs::read_dir(&tree_dir)? {
            let entry = entry?;
            let name = entry.file_name();
            let Some(name) = name.to_str() else { continue };
            let Ok(size) = name.parse::<u64>() else {
                continue;
            };
            if size < 2 || !size.is_power_of_two() {
                return Err(Error::Corrupt {
                    table: "TREE",
                    key: name.to_string(),
                    reason: "a level file must be named by a power of two of at least 2".into(),
                });
            }
            sizes.push(size);
        }
        sizes.sort_unstable();
        for size in sizes {
            let data = read_file(&tree_dir.join(size.to_string()), "OptMem store")?;
            for (k, rec) in data.chunks_exact(TREE_RECORD).enumerate() {
                let lo = k as u64 * size;
                let bad = |why: &str| Error::Corrupt {
                    table: "TREE",
                    key: format!("{size} record {k} (block {lo}-{})", lo + size - 1),
                    reason: why.to_string(),
                };
                let s = record_text(rec, bad)?;
                if s.is_empty() {
                    continue;
                }
                if lo + size > total {
                    return Err(bad("summarizes memories past the end of the log"));
                }
                validate_line(s, MAX_ENTRY_BYTES).map_err(|e| bad(&e.to_string()))?;
                summaries.push((Block::new(size.trailing_zeros() as u8, lo)?, s.to_string()));
            }
        }
    }
    Ok(OptMemStore {
        memories,
        summaries,
        torn_bytes,
    })
}

/// The text of one fixed-width OptMem record: UTF-8 padded with spaces, then a newline.
fn record_text(rec: &[u8], bad: impl Fn(&str) -> Error) -> Result<&str> {
    let Some((b'\n', body)) = rec.split_last() else {
        return Err(bad("does not end with a newline"));
    };
    let s = std::str::from_utf8(body).map_err(|_| bad("is not UTF-8"))?;
    Ok(s.trim_end_matches(' '))
}

impl WriteTxn<'_> {
    /// Bulk-loads an empty scope with memories and summaries exactly as given (ids, times,
    /// envelopes), and makes every complete block without a summary pending. Memories must be
    /// numbered 0, 1, 2, ... in order; summaries must be blocks inside the log. This is the
    /// path of every importer, and the fast way to migrate a history in one commit.
    pub fn restore_scope(
        &mut self,
        scope: &str,
        memories: Vec<Memory>,
        summaries: Vec<(Block, Summary)>,
    ) -> Result<()> {
        self.restore_scope_from(scope, &memories, &summaries)
    }

    /// [`WriteTxn::restore_scope`] from borrowed slices (a write closure may run again).
    pub(crate) fn restore_scope_from(
        &mut self,
        scope: &str,
        memories: &[Memory],
        summaries: &[(Block, Summary)],
    ) -> Result<()> {
        validate_scope(scope)?;
        let mut meta = self.scope_or_create(scope)?;
        if meta.count > 0 || meta.summaries > 0 {
            return Err(Error::Conflict(format!(
                "scope {scope:?} already holds {} memories; import into an empty scope or a fresh store",
                meta.count
            )));
        }
        let t = memories.len() as u64;
        {
            for (i, m) in memories.iter().enumerate() {
                validate_line(&m.text, MAX_ENTRY_BYTES)?;
                crate::domain::text::validate_optional_field("source", &m.source)?;
                crate::domain::text::validate_optional_field("source URI", &m.source_uri)?;
                if m.supersedes
                    .iter()
                    .chain(&m.conflicts_with)
                    .any(|x| *x >= m.id)
                {
                    return Err(Error::invalid(
                        "import",
                        format!("scope {scope}: #{} links to a later memory", m.id),
                    ));
                }
                if m.id != i as u64 {
                    let reason = format!(
                        "scope {scope}: memory #{} is out of order (expected #{i})",
                        m.id
                    );
                    return Err(Error::invalid("import", reason));
                }
                LOG.put(&mut *self.tx, (meta.id, m.id), &encode(m)?)?;
            }
        }
        let mut present = HashSet::new();
        {
            for (b, s) in summaries {
                if b.size() < 2 || b.hi() > t {
                    return Err(Error::invalid(
                        "import",
                        format!("scope {scope}: summary {b} is outside the log of {t}"),
                    ));
                }
                validate_line(&s.text, MAX_ENTRY_BYTES)?;
                if !present.insert(*b) {
                    return Err(Error::invalid(
                        "import",
                        format!("scope {scope}: summary {b} appears twice"),
                    ));
                }
                TREE.put(&mut *self.tx, (meta.id, b.level(), b.lo()), &encode(s)?)?;
            }
        }
        let mut pending_count = 0u64;
        {
            let mut level = 1u8;
            while level < 63 && (1u64 << level) <= t {
                let size = 1u64 << level;
                for k in 0..t / size {
                    let b = Block::raw(level, k * size);
                    if !present.contains(&b) {
                        PENDING.put(&mut *self.tx, (meta.id, level, b.lo()), &[])?;
                        pending_count += 1;
                    }
                }
                level += 1;
            }
        }
        meta.count = t;
        meta.summaries = summaries.len() as u64;
        meta.pending = pending_count;
        crate::storage::index::build::rebuild(&mut *self.tx, meta.id, t)?;
        self.put_scope(scope, &meta)
    }

    /// Imports a validated OptMem store into the empty `scope`: same ids, same summaries.
    pub fn import_optmem(&mut self, scope: &str, src: &OptMemStore) -> Result<u64> {
        let now = self.now;
        let memories = src
            .memories
            .iter()
            .enumerate()
            .map(|(i, (t, text))| Memory {
                id: i as u64,
                observed_us: *t,
                recorded_us: now,
                text: text.clone(),
                kind: Kind::Observation,
                status: Status::Accepted,
                source: Some("optmem-import".into()),
                source_uri: None,
                supersedes: Vec::new(),
                conflicts_with: Vec::new(),
                valid_until_us: None,
            })
            .collect();
        let summaries = src
            .summaries
            .iter()
            .map(|(b, text)| {
                (
                    *b,
                    Summary {
                        text: text.clone(),
                        written_us: now,
                        built_from: BuiltFrom::Imported,
                        inputs_crc: 0,
                    },
                )
            })
            .collect();
        self.restore_scope(scope, memories, summaries)?;
        Ok(src.memories.len() as u64)
    }
}

impl Store {
    /// Imports `YYYY-MM-DD text` lines into `scope` in one transaction.
    pub fn import_lines(&self, scope: &str, input: &str) -> Result<crate::memory::note::Appended> {
        let cfg = self.config()?;
        let items = parse_dated_lines(input, cfg.entry_bytes)?;
        self.append(scope, items, None)
    }

    /// Migrates an OptMem directory into the empty `scope`. Returns the store read.
    pub fn import_optmem(&self, scope: &str, dir: &Path) -> Result<OptMemStore> {
        let src = read_optmem(dir)?;
        if src.memories.is_empty() {
            return Err(Error::invalid(
                "OptMem store",
                "LOG.txt holds no complete record",
            ));
        }
        self.write(|tx| tx.import_optmem(scope, &src))?;
        Ok(src)
    }
}
