//! The JSON-file stores of agent libraries. Memories: the optillm plugin's one JSON list of
//! strings. Sessions: pure_agents' `JSONMemory`, one JSON array per session in `<id>.json`.
//! Every save rewrites the whole file through a temp file, `fsync` and `rename`, as those
//! libraries do (no directory fsync). The list has no summary tree (no wake) and no log to scan
//! (recall would parse the whole list).

use std::fs::{self, File};
use std::io::Write;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use ::somna::text::date_of;

use super::{with_suffix, Entry, Lacks, MemoryEngine, Pattern, SessionEngine, Writer, JSONFILE};
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

/// pure_agents `JSONMemory`: one JSON array per session.
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
        write_replace(
            &self.dir.join(format!("{id}.json.tmp")),
            &self.file(id),
            data::json_array(msgs).as_bytes(),
        );
    }

    /// Written without fsync (setup only).
    fn fill(&mut self, n: usize, msgs_of: &dyn Fn(usize) -> Vec<String>) {
        for k in 0..n {
            let path = self.file(&data::session_id(k));
            fs::write(path, data::json_array(&msgs_of(k))).expect("write");
        }
    }

    fn load(&self, id: &str) -> Option<Vec<String>> {
        let s = fs::read_to_string(self.file(id)).ok()?;
        Some(data::parse_array(&s))
    }

    fn ids(&self) -> Vec<String> {
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

    fn settle(&mut self) {}

    fn files(&self) -> Vec<PathBuf> {
        vec![self.dir.clone()]
    }
}
