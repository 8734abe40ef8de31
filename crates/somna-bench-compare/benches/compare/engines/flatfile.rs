//! OptMem's flat files: `LOG.txt` of 320-byte records appended with `O_APPEND` + `fdatasync`,
//! `TREE/<s>` of 288-byte records. Wake computes the same cover
//! (`somna::cover::cover_all`) and reads its records by offset (`pread`); recall runs the
//! same regex over every record of the log, read in 1.3 MB chunks (the scan floor). Concurrent
//! writers write their record under a mutex (so ids stay dense) and `fdatasync` outside it, so
//! the kernel may cover several writers with one sync. OptMem has no sessions.

use std::fmt::Write as _;
use std::fs::{self, File, OpenOptions};
use std::io::{BufWriter, Read, Write};
use std::ops::Range;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ::somna::text::date_of;
use ::somna::Block;

use super::{with_suffix, Entry, Lacks, MemoryEngine, Pattern, Writer, FLATFILE};
use crate::data::{self, WAKE_LINES};

pub const ENTRY: Entry = Entry {
    name: FLATFILE,
    variant: None,
    open: |stem| Box::new(FlatFile::open(stem)),
    build_history: Some(build_history),
    sessions: |_| Err("OptMem has no sessions"),
};

const LOG_RECORD: usize = 320;
const TREE_RECORD: usize = 288;

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
        &format!("#{i} {} {}", date_of(data::observed(i)), data::mem_text(i)),
        LOG_RECORD,
    )
}

fn record_text(rec: &[u8]) -> &str {
    let body = rec.strip_suffix(b"\n").unwrap_or(rec);
    let end = body.iter().rposition(|&c| c != b' ').map_or(0, |p| p + 1);
    std::str::from_utf8(&body[..end]).expect("utf-8 record")
}

/// `LOG.txt` opened for appending; ids are positions.
pub struct FlatLog {
    file: File,
    count: u64,
}

impl FlatLog {
    pub fn create(dir: &Path) -> FlatLog {
        fs::create_dir_all(dir.join("TREE")).expect("mkdir");
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(dir.join("LOG.txt"))
            .expect("open");
        let count = file.metadata().expect("stat").len() / LOG_RECORD as u64;
        FlatLog { file, count }
    }

    /// Appends the next `n` records in one write (no sync); returns the first id.
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

    /// Appends the next `n` records in one write, then `fdatasync`.
    pub fn append_durable(&mut self, n: u64) -> u64 {
        let first = self.write(n);
        self.file.sync_data().expect("fdatasync");
        first
    }
}

/// Writes an OptMem directory holding a fully summarized history of `t` memories.
fn build_history(stem: &Path, t: u64) {
    let dir = with_suffix(stem, ".optmem");
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
            w.write_all(&padded(&data::sum_text(b), TREE_RECORD))
                .expect("write");
        }
        w.flush().expect("flush");
        level += 1;
    }
}

/// The log for appending (behind a mutex, with a second handle that syncs outside it) and the
/// files opened for reading.
pub struct FlatFile {
    dir: PathBuf,
    log: Arc<(Mutex<FlatLog>, File)>,
    reader: FlatReader,
}

impl FlatFile {
    fn open(stem: &Path) -> FlatFile {
        let dir = with_suffix(stem, ".optmem");
        let log = FlatLog::create(&dir);
        let sync = log.file.try_clone().expect("dup");
        FlatFile {
            reader: FlatReader::open(&dir),
            log: Arc::new((Mutex::new(log), sync)),
            dir,
        }
    }
}

impl MemoryEngine for FlatFile {
    fn name(&self) -> &'static str {
        FLATFILE
    }

    fn note(&mut self, _: u64) {
        self.log.0.lock().expect("lock").append_durable(1);
    }

    fn note_batch(&mut self, ids: Range<u64>) {
        let n = ids.end - ids.start;
        self.log.0.lock().expect("lock").append_durable(n);
    }

    fn writer(&self) -> Writer {
        let log = Arc::clone(&self.log);
        Box::new(move |_| {
            log.0.lock().expect("lock").write(1);
            log.1.sync_data().expect("fdatasync");
        })
    }

    fn count(&self) -> u64 {
        self.log.0.lock().expect("lock").count
    }

    fn wake(&self) -> Result<String, Lacks> {
        Ok(self.reader.wake())
    }

    fn recall(&self, p: &Pattern) -> Result<(u64, Vec<String>), Lacks> {
        Ok(self.reader.recall(&p.re))
    }

    fn settle(&mut self) {}

    fn files(&self) -> Vec<PathBuf> {
        vec![self.dir.clone()]
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
        let cover = ::somna::cover::cover_all(t, WAKE_LINES)
            .map(|c| c.blocks)
            .unwrap_or_default();
        let mut out = data::wake_begin(t, cover.len());
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
        out.push_str(data::WAKE_END);
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
            data::keep_newest(matched.into_iter().map(|x| x.1).collect()),
        )
    }
}
