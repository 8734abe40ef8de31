//! The JSON-file stores of agent libraries. Memories: the optillm plugin's one JSON list of
//! strings. Sessions: pure_agents' `JSONMemory`, one JSON array per session in `<id>.json`,
//! after a first line that keeps what somna's `session_list` returns (a JSON object of the
//! created and updated times, the revision and the message count), so that a list returns the
//! same fields on every engine: a save reads the old file's first line (its creation time and
//! revision), a list reads each file's first line.
//! Every save rewrites the whole file through a temp file, `fsync` and `rename`, as those
//! libraries do (no directory fsync). The list has no summary tree (no wake) and no log to scan
//! (recall would parse the whole list).

use std::fs::{self, File};
use std::io::{Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ::somna::text::date_of;

use super::{
    now_us, with_suffix, Entry, Lacks, Listed, MemoryEngine, Pattern, SessionEngine, Writer,
    JSONFILE,
};
use crate::data;

pub const ENTRY: Entry = Entry {
    name: JSONFILE,
    variant: None,
    open: |stem| Box::new(JsonFile::open(stem)),
    build_history: None,
    sessions: |stem| Ok(Box::new(JsonSessions::open(stem))),
};

/// Temp file, write, fsync, rename: how agent libraries replace a JSON file.
fn write_replace(tmp: &Path, path: &Path, bytes: &[u8]) {
    let mut f = File::create(tmp).expect("create");
    f.write_all(bytes).expect("write");
    f.sync_all().expect("fsync");
    fs::rename(tmp, path).expect("rename");
}

/// The optillm pattern: one JSON list of memories, rewritten whole after every add.
struct JsonList {
    path: PathBuf,
    tmp: PathBuf,
    items: Vec<String>,
}

impl JsonList {
    fn add(&mut self, ids: Range<u64>) {
        for i in ids {
            self.items.push(format!(
                "{} {}",
                date_of(data::observed(i)),
                data::mem_text(i)
            ));
        }
        let bytes = serde_json::to_vec(&self.items).expect("json");
        write_replace(&self.tmp, &self.path, &bytes);
    }
}

/// The list behind a mutex, so that concurrent writers take turns (as one process's threads
/// sharing the list would).
pub struct JsonFile {
    dir: PathBuf,
    list: Arc<Mutex<JsonList>>,
}

impl JsonFile {
    fn open(stem: &Path) -> JsonFile {
        let dir = with_suffix(stem, ".json");
        fs::create_dir_all(&dir).expect("mkdir");
        let list = JsonList {
            path: dir.join("memory.json"),
            tmp: dir.join("memory.json.tmp"),
            items: Vec::new(),
        };
        JsonFile {
            dir,
            list: Arc::new(Mutex::new(list)),
        }
    }
}

impl MemoryEngine for JsonFile {
    fn name(&self) -> &'static str {
        JSONFILE
    }

    fn note(&mut self, i: u64) {
        self.list.lock().expect("lock").add(i..i + 1);
    }

    fn note_batch(&mut self, ids: Range<u64>) {
        self.list.lock().expect("lock").add(ids);
    }

    fn writer(&self) -> Writer {
        let list = Arc::clone(&self.list);
        Box::new(move |i| list.lock().expect("lock").add(i..i + 1))
    }

    fn count(&self) -> u64 {
        self.list.lock().expect("lock").items.len() as u64
    }

    fn wake(&self) -> Result<String, Lacks> {
        Err("no summary tree")
    }

    fn recall(&self, _: &Pattern) -> Result<(u64, Vec<String>), Lacks> {
        Err("no log to scan (the list would be parsed whole)")
    }

    fn settle(&mut self) {}

    fn files(&self) -> Vec<PathBuf> {
        vec![self.dir.clone()]
    }
}

/// The first line of a session's file.
struct Head {
    created_us: i64,
    updated_us: i64,
    revision: u64,
    count: u64,
}

/// A session's file: its [`Head`] on the first line, then the JSON array of its messages.
fn file_text(created_us: i64, updated_us: i64, revision: u64, msgs: &[String]) -> String {
    let mut out = format!(
        "{{\"created_us\":{created_us},\"updated_us\":{updated_us},\"revision\":{revision},\"count\":{}}}\n",
        msgs.len()
    );
    out.push_str(&data::json_array(msgs));
    out
}

/// The first line of the file at `path` (at most its first 256 bytes read), or `None` when there
/// is no such file.
fn head(path: &Path) -> Option<Head> {
    let mut buf = [0u8; 256];
    let n = File::open(path).ok()?.read(&mut buf).ok()?;
    let line = buf.get(..n)?.split(|b| *b == b'\n').next()?;
    let v: serde_json::Value = serde_json::from_slice(line).ok()?;
    Some(Head {
        created_us: v.get("created_us")?.as_i64()?,
        updated_us: v.get("updated_us")?.as_i64()?,
        revision: v.get("revision")?.as_u64()?,
        count: v.get("count")?.as_u64()?,
    })
}

/// pure_agents `JSONMemory`: one JSON array per session (after the list's line).
pub struct JsonSessions {
    dir: PathBuf,
}

impl JsonSessions {
    fn open(stem: &Path) -> JsonSessions {
        let dir = with_suffix(stem, ".json");
        fs::create_dir_all(&dir).expect("mkdir");
        JsonSessions { dir }
    }

    fn file(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }
}

impl SessionEngine for JsonSessions {
    fn name(&self) -> &'static str {
        JSONFILE
    }

    fn save(&mut self, id: &str, msgs: &[String]) {
        let path = self.file(id);
        let now = now_us();
        let (created_us, revision) = head(&path).map_or((now, 0), |h| (h.created_us, h.revision));
        let bytes = file_text(created_us, now, revision + 1, msgs);
        write_replace(
            &self.dir.join(format!("{id}.json.tmp")),
            &path,
            bytes.as_bytes(),
        );
    }

    /// Written without fsync (setup only).
    fn fill(&mut self, n: usize, msgs_of: &dyn Fn(usize) -> Vec<String>) {
        for k in 0..n {
            let path = self.file(&data::session_id(k));
            let now = now_us();
            fs::write(path, file_text(now, now, 1, &msgs_of(k))).expect("write");
        }
    }

    fn load(&self, id: &str) -> Option<Vec<String>> {
        let s = fs::read_to_string(self.file(id)).ok()?;
        let (_, array) = s.split_once('\n')?;
        Some(data::parse_array(array))
    }

    fn list(&self) -> Vec<Listed> {
        let mut out: Vec<Listed> = fs::read_dir(&self.dir)
            .expect("read_dir")
            .flatten()
            .filter_map(|e| {
                let name = e.file_name();
                let id = name.to_str()?.strip_suffix(".json")?.to_string();
                let h = head(&e.path())?;
                Some(Listed {
                    id,
                    created_us: h.created_us,
                    updated_us: h.updated_us,
                    count: h.count,
                    revision: h.revision,
                })
            })
            .collect();
        out.sort_by(|a, b| a.id.cmp(&b.id));
        out
    }

    fn settle(&mut self) {}

    fn files(&self) -> Vec<PathBuf> {
        vec![self.dir.clone()]
    }
}
