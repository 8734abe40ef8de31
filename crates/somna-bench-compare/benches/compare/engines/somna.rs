//! somna: a `Store` with its default `Options` (MultiWriter: any number of processes may share
//! the file; every commit durable; a 32 MiB page cache). Its variant `somna-x` opens the store
//! with `Options::exclusive(true)` (one process owns the file; each commit is one record of the
//! commit journal and its `fdatasync`, redb made durable at checkpoints), and `somna-x0` the
//! same without the journal (`journal(false)`: one durable redb commit, one fsync, per commit).

use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ::somna::{Block, Memory, NewMemory, Options, Store, Summary, WakeOptions};

use super::{
    with_suffix, Entry, Lacks, Listed, MemoryEngine, Pattern, SessionEngine, Writer, SOMNA,
};
use crate::data::{self, SCOPE};

/// The variant's name.
pub const SOMNA_X: &str = "somna-x";
/// The variant without the commit journal.
pub const SOMNA_X0: &str = "somna-x0";

pub const ENTRY: Entry = Entry {
    name: SOMNA,
    variant: None,
    open: |stem| Box::new(Somna::open(stem, false)),
    build_history: Some(build_history),
    sessions: |stem| Ok(Box::new(Somna::open(stem, false))),
};

pub const EXCLUSIVE: Entry = Entry {
    name: SOMNA_X,
    variant: Some((SOMNA, "somna with Options::exclusive(true)")),
    open: |stem| Box::new(Somna::open(stem, true)),
    build_history: None,
    sessions: |stem| Ok(Box::new(Somna::open(stem, true))),
};

pub const EXCLUSIVE_NO_JOURNAL: Entry = Entry {
    name: SOMNA_X0,
    variant: Some((SOMNA, "somna with Options::exclusive(true).journal(false)")),
    open: |stem| Box::new(Somna::open_x0(stem)),
    build_history: None,
    sessions: |stem| Ok(Box::new(Somna::open_x0(stem))),
};

/// The store file at `stem`.
pub fn file(stem: &Path, exclusive: bool) -> PathBuf {
    with_suffix(stem, if exclusive { "-x.redb" } else { ".redb" })
}

/// Creates the store at `path`, or opens it if it exists.
pub fn create(path: &Path, exclusive: bool) -> Store {
    Store::create_with(path, Options::default().exclusive(exclusive)).expect("create store")
}

pub fn new_memory(i: u64) -> NewMemory {
    NewMemory::new(data::mem_text(i)).observed_us(data::observed(i))
}

/// Writes a fully summarized history of `t` memories at `path` with `restore_scope`.
pub fn build(path: &Path, t: u64) {
    let store = create(path, true);
    let memories: Vec<Memory> = (0..t).map(data::memory).collect();
    let summaries: Vec<(Block, Summary)> = data::all_blocks(t)
        .into_iter()
        .map(|b| (b, data::summary(b)))
        .collect();
    let mut load = Some((memories, summaries));
    store
        .write(|tx| {
            // `write` takes an `FnMut` (it may run again): hand the data over once.
            let (m, s) = load.take().expect("one attempt");
            tx.restore_scope(SCOPE, m, s)
        })
        .expect("restore_scope");
}

fn build_history(stem: &Path, t: u64) {
    build(&file(stem, false), t);
}

pub struct Somna {
    name: &'static str,
    path: PathBuf,
    /// `None` once settled.
    store: Option<Arc<Store>>,
    opts: WakeOptions,
}

impl Somna {
    pub fn open(stem: &Path, exclusive: bool) -> Somna {
        let path = file(stem, exclusive);
        Somna {
            name: if exclusive { SOMNA_X } else { SOMNA },
            store: Some(Arc::new(create(&path, exclusive))),
            path,
            opts: WakeOptions::default(),
        }
    }

    /// The exclusive variant without the commit journal.
    pub fn open_x0(stem: &Path) -> Somna {
        let path = with_suffix(stem, "-x0.redb");
        let opts = Options::default().exclusive(true).journal(false);
        Somna {
            name: SOMNA_X0,
            store: Some(Arc::new(
                Store::create_with(&path, opts).expect("create store"),
            )),
            path,
            opts: WakeOptions::default(),
        }
    }

    fn store(&self) -> &Store {
        self.store.as_deref().expect("the store is open")
    }
}

impl MemoryEngine for Somna {
    fn name(&self) -> &'static str {
        self.name
    }

    fn note(&mut self, i: u64) {
        self.store().note(SCOPE, new_memory(i)).expect("note");
    }

    fn note_batch(&mut self, ids: Range<u64>) {
        let items: Vec<NewMemory> = ids.map(new_memory).collect();
        self.store().append(SCOPE, items, None).expect("append");
    }

    fn writer(&self) -> Writer {
        let store = Arc::clone(self.store.as_ref().expect("the store is open"));
        Box::new(move |i| {
            store.note(SCOPE, new_memory(i)).expect("note");
        })
    }

    fn count(&self) -> u64 {
        self.store().count(SCOPE).expect("count")
    }

    fn wake(&self) -> Result<String, Lacks> {
        Ok(self.store().wake_text(SCOPE, &self.opts).expect("wake"))
    }

    fn recall(&self, p: &Pattern) -> Result<(u64, Vec<String>), Lacks> {
        let r = self.store().recall(SCOPE, &p.query).expect("recall");
        Ok((r.total, r.lines))
    }

    fn settle(&mut self) {
        self.store = None;
    }

    fn files(&self) -> Vec<PathBuf> {
        vec![self.path.clone()]
    }
}

impl SessionEngine for Somna {
    fn name(&self) -> &'static str {
        self.name
    }

    fn save(&mut self, id: &str, msgs: &[String]) {
        let refs: Vec<&str> = msgs.iter().map(String::as_str).collect();
        self.store().session_save(id, &refs, None).expect("save");
    }

    fn fill(&mut self, n: usize, msgs_of: &dyn Fn(usize) -> Vec<String>) {
        let mut s = 0;
        while s < n {
            let hi = (s + 500).min(n);
            self.store()
                .write(|tx| {
                    for k in s..hi {
                        let msgs = msgs_of(k);
                        let refs: Vec<&str> = msgs.iter().map(String::as_str).collect();
                        tx.session_save(&data::session_id(k), &refs, None)?;
                    }
                    Ok(())
                })
                .expect("save");
            s = hi;
        }
    }

    fn load(&self, id: &str) -> Option<Vec<String>> {
        self.store().session_load(id).expect("load")
    }

    /// `session_list`: every session's info, not only its id.
    fn list(&self) -> Vec<Listed> {
        let list = self.store().session_list("", None, None).expect("list");
        list.into_iter()
            .map(|i| Listed {
                id: i.id,
                created_us: i.created_us,
                updated_us: i.updated_us,
                count: i.count,
                revision: i.revision,
            })
            .collect()
    }

    fn ids_only(&self) -> Option<Vec<String>> {
        Some(self.store().session_ids().expect("ids"))
    }

    fn settle(&mut self) {
        self.store = None;
    }

    fn files(&self) -> Vec<PathBuf> {
        vec![self.path.clone()]
    }
}
