//! SQLite (bundled) through rusqlite: one connection per writer, prepared and cached statements,
//! WAL, `synchronous=FULL`, a 32 MiB page cache (somna's cache size) and a 10 s busy timeout.
//! Tables `memories(id INTEGER PRIMARY KEY, observed_us, text)`, `summaries(level, lo, text)`
//! keyed by (level, lo), and `sessions(id PRIMARY KEY, created_us, updated_us, revision, count,
//! messages)` written with an upsert of the whole JSON array (the documented custom backend of
//! pure_agents, with the list's fields beside it). Wake reads the same
//! cover's rows by primary key; recall runs the same regex over every row, newest first.
//! A session row also keeps what somna's `session_list` returns (created and updated times, the
//! message count, a revision that grows with every save), so that a list returns the same fields
//! on every engine: a save is one upsert, a list one scan of a covering index of those fields
//! (`sessions_list`; without it, a list visits every row of the table, each holding its
//! messages: 28x slower in a quick run, 53 ms for 10,000 sessions), which every save keeps, as
//! somna's saves keep its `sessions` table.

use std::fmt::Write as _;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ::somna::text::date_of;
use rusqlite::{params, Connection};

use super::{
    now_us, with_suffix, Entry, Lacks, Listed, MemoryEngine, Pattern, SessionEngine, Writer, SQLITE,
};
use crate::data::{self, RECALL_BYTES, WAKE_LINES};

pub const ENTRY: Entry = Entry {
    name: SQLITE,
    variant: None,
    open: |stem| Box::new(Sqlite::open(stem)),
    build_history: Some(build_history),
    sessions: |stem| Ok(Box::new(Sqlite::open(stem))),
};

/// The variant's name: SQLite with a full-text index of the texts.
pub const SQLITE_FTS: &str = "sqlite-fts";

/// SQLite as a user who needs search runs it: an FTS5 table of the texts (external content,
/// rowid = the memory's id), written in the same transaction as each memory. In `note_batch`
/// only: somna's notes are searchable the moment they are acknowledged, so this is the SQLite
/// that does the same work (issue 50).
pub const FTS: Entry = Entry {
    name: SQLITE_FTS,
    variant: Some((
        SQLITE,
        "SQLite with an FTS5 table of the texts, written in the same transaction",
    )),
    open: |stem| Box::new(Sqlite::open_fts(stem)),
    build_history: None,
    sessions: |_| Err("the FTS5 variant is measured on memories only"),
};

pub fn open(path: &Path) -> Connection {
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
         CREATE TABLE IF NOT EXISTS sessions(
             id TEXT PRIMARY KEY, created_us INTEGER NOT NULL, updated_us INTEGER NOT NULL,
             revision INTEGER NOT NULL, count INTEGER NOT NULL, messages TEXT NOT NULL);
         CREATE INDEX IF NOT EXISTS sessions_list
             ON sessions(id, created_us, updated_us, revision, count);",
    )
    .expect("schema");
    c.busy_timeout(Duration::from_secs(10)).expect("busy");
    c
}

/// Adds the FTS5 table of the texts (external content: the text is stored once, in `memories`).
fn with_fts(c: Connection) -> Connection {
    c.execute_batch(
        "CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts
             USING fts5(text, content='memories', content_rowid='id');",
    )
    .expect("fts5 table");
    c
}

fn note(c: &Connection, i: u64, fts: bool) {
    if !fts {
        c.prepare_cached("INSERT INTO memories(observed_us, text) VALUES (?1, ?2)")
            .expect("prepare")
            .execute(params![data::observed(i), data::mem_text(i)])
            .expect("insert");
        return;
    }
    let tx = c.unchecked_transaction().expect("begin");
    insert(&tx, i, true);
    tx.commit().expect("commit");
}

/// Inserts memory `i` (and with `fts` its row of the full-text index) in the open transaction.
fn insert(c: &Connection, i: u64, fts: bool) {
    let text = data::mem_text(i);
    c.prepare_cached("INSERT INTO memories(observed_us, text) VALUES (?1, ?2)")
        .expect("prepare")
        .execute(params![data::observed(i), text])
        .expect("insert");
    if fts {
        c.prepare_cached("INSERT INTO memories_fts(rowid, text) VALUES (last_insert_rowid(), ?1)")
            .expect("prepare")
            .execute(params![text])
            .expect("insert fts");
    }
}

fn checkpoint(c: &Connection) {
    c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .expect("checkpoint");
}

/// The database file and its WAL and shared-memory files.
fn files(db: &Path) -> Vec<PathBuf> {
    vec![
        db.to_path_buf(),
        with_suffix(db, "-wal"),
        with_suffix(db, "-shm"),
    ]
}

/// Bulk inserts of the history in one transaction, without fsync (setup).
fn build_history(stem: &Path, t: u64) {
    let mut c = open(&with_suffix(stem, ".sqlite"));
    c.execute_batch("PRAGMA synchronous=OFF").expect("pragma");
    {
        let tx = c.transaction().expect("begin");
        {
            let mut m = tx
                .prepare("INSERT INTO memories(id, observed_us, text) VALUES (?1, ?2, ?3)")
                .expect("prepare");
            for i in 0..t {
                m.execute(params![i as i64, data::observed(i), data::mem_text(i)])
                    .expect("insert");
            }
            let mut s = tx
                .prepare("INSERT INTO summaries(level, lo, text) VALUES (?1, ?2, ?3)")
                .expect("prepare");
            for b in data::all_blocks(t) {
                s.execute(params![b.level() as i64, b.lo() as i64, data::sum_text(b)])
                    .expect("insert");
            }
        }
        tx.commit().expect("commit");
    }
    checkpoint(&c);
}

pub struct Sqlite {
    path: PathBuf,
    conn: Connection,
    /// The FTS5 variant: each memory also into `memories_fts`.
    fts: bool,
}

impl Sqlite {
    pub fn open(stem: &Path) -> Sqlite {
        let path = with_suffix(stem, ".sqlite");
        Sqlite {
            conn: open(&path),
            path,
            fts: false,
        }
    }

    /// The FTS5 variant, in a file of its own.
    pub fn open_fts(stem: &Path) -> Sqlite {
        let path = with_suffix(stem, ".fts.sqlite");
        Sqlite {
            conn: with_fts(open(&path)),
            path,
            fts: true,
        }
    }
}

impl MemoryEngine for Sqlite {
    fn name(&self) -> &'static str {
        if self.fts {
            SQLITE_FTS
        } else {
            SQLITE
        }
    }

    fn note(&mut self, i: u64) {
        note(&self.conn, i, self.fts);
    }

    fn note_batch(&mut self, ids: Range<u64>) {
        let tx = self.conn.transaction().expect("begin");
        for k in ids {
            insert(&tx, k, self.fts);
        }
        tx.commit().expect("commit");
    }

    /// A connection of its own, as each writer process of a shared database has.
    fn writer(&self) -> Writer {
        let (c, fts) = (open(&self.path), self.fts);
        Box::new(move |i| note(&c, i, fts))
    }

    fn count(&self) -> u64 {
        self.conn
            .query_row("SELECT count(*) FROM memories", [], |r| r.get::<_, i64>(0))
            .expect("count") as u64
    }

    fn wake(&self) -> Result<String, Lacks> {
        Ok(wake(&self.conn))
    }

    fn recall(&self, p: &Pattern) -> Result<(u64, Vec<String>), Lacks> {
        Ok(recall(&self.conn, &p.re))
    }

    fn settle(&mut self) {
        checkpoint(&self.conn);
    }

    fn files(&self) -> Vec<PathBuf> {
        files(&self.path)
    }
}

/// The same cover as somna's wake, rows read by primary key in one read transaction.
fn wake(c: &Connection) -> String {
    let tx = c.unchecked_transaction().expect("begin");
    let t: i64 = tx
        .query_row("SELECT coalesce(max(id) + 1, 0) FROM memories", [], |r| {
            r.get(0)
        })
        .expect("count");
    let t = t as u64;
    let cover = ::somna::cover::cover_all(t, WAKE_LINES)
        .map(|c| c.blocks)
        .unwrap_or_default();
    let mut out = data::wake_begin(t, cover.len());
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
    out.push_str(data::WAKE_END);
    out
}

/// Every row newest first through the regex; the newest matches that fit the budget are kept.
fn recall(c: &Connection, re: &regex::Regex) -> (u64, Vec<String>) {
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

/// A whole-list save: the row created (revision 1) or replaced, its creation time kept and its
/// revision grown.
const SAVE: &str = "INSERT INTO sessions(id, created_us, updated_us, revision, count, messages)
     VALUES (?1, ?2, ?2, 1, ?3, ?4)
     ON CONFLICT(id) DO UPDATE SET updated_us = excluded.updated_us,
         revision = revision + 1, count = excluded.count, messages = excluded.messages";

impl SessionEngine for Sqlite {
    fn name(&self) -> &'static str {
        SQLITE
    }

    fn save(&mut self, id: &str, msgs: &[String]) {
        self.conn
            .prepare_cached(SAVE)
            .expect("prepare")
            .execute(params![
                id,
                now_us(),
                msgs.len() as i64,
                data::json_array(msgs)
            ])
            .expect("save");
    }

    /// One transaction, then a checkpoint.
    fn fill(&mut self, n: usize, msgs_of: &dyn Fn(usize) -> Vec<String>) {
        let tx = self.conn.transaction().expect("begin");
        {
            let mut st = tx.prepare(SAVE).expect("prepare");
            for k in 0..n {
                let msgs = msgs_of(k);
                st.execute(params![
                    data::session_id(k),
                    now_us(),
                    msgs.len() as i64,
                    data::json_array(&msgs)
                ])
                .expect("insert");
            }
        }
        tx.commit().expect("commit");
        checkpoint(&self.conn);
    }

    fn load(&self, id: &str) -> Option<Vec<String>> {
        let msgs = self
            .conn
            .prepare_cached("SELECT messages FROM sessions WHERE id = ?1")
            .expect("prepare")
            .query_row(params![id], |r| {
                Ok(data::parse_array(r.get_ref(0)?.as_str()?))
            })
            .expect("row");
        Some(msgs)
    }

    fn list(&self) -> Vec<Listed> {
        let mut st = self
            .conn
            .prepare_cached(
                "SELECT id, created_us, updated_us, count, revision FROM sessions ORDER BY id",
            )
            .expect("prepare");
        st.query_map([], |r| {
            Ok(Listed {
                id: r.get(0)?,
                created_us: r.get(1)?,
                updated_us: r.get(2)?,
                count: r.get::<_, i64>(3)? as u64,
                revision: r.get::<_, i64>(4)? as u64,
            })
        })
        .expect("query")
        .map(|r| r.expect("row"))
        .collect()
    }

    fn settle(&mut self) {
        checkpoint(&self.conn);
    }

    fn files(&self) -> Vec<PathBuf> {
        files(&self.path)
    }
}
