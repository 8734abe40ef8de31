//! Query latency and index size at 10^4, 10^5 and 10^6 memories, somna against SQLite FTS5
//! (porter), on generated conversational text: turns of 5 to 40 words drawn from a Zipf
//! distribution (exponent 1.07) over 50,000 words, the 240 commonest being English function and
//! chat words and the rest made of syllables, behind one of 20 speaker names. Queries are 5 to 10
//! words from the same distribution, questions starting with a question word.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use redb::{self, ReadableDatabase, ReadableTableMetadata};
use rusqlite::Connection;
use somna::{NewMemory, Options, SearchQuery, Store};

use crate::quality::fts_query;

const SCOPE: &str = "default";
const VOCAB: usize = 50_000;

const COMMON: &str = "the i to and a you of it that is in my for me was so it's with have on \
    this but be we just what do that's are like i'm really at all your been not about they \
    going great time as from had can would know it was up one out get there how think good \
    when new some thanks more by or he she her his them if also lot love fun what's did much \
    yeah an will you're amazing always people things go make work day family friends life \
    feel see last week year awesome glad hope sounds help yes well something into our awesome \
    loved cool thing been doing oh back never kids dog trip book music art painting school job \
    team game summer weekend house home city beach camping hiking running cooking class group \
    support community project idea plan started recently picture photo went took made felt \
    happy proud excited tough hard easy nice wow definitely totally pretty such other then \
    than because those these could should first next way around over after before again still \
    every even here where who why which being take keep try tell share enjoy remember";

const NAMES: [&str; 20] = [
    "Caroline", "Melanie", "John", "Tim", "Maria", "Joanna", "Nate", "Audrey", "Andrew", "Evan",
    "Sam", "Gina", "Jon", "Deborah", "Jolene", "Calvin", "Dave", "James", "Tasha", "Nina",
];

const SYLLABLES: [&str; 24] = [
    "ka", "ro", "mi", "ten", "sul", "ar", "vo", "li", "den", "pa", "lo", "rin", "mas", "te", "ul",
    "bri", "co", "nel", "fa", "gor", "is", "ven", "tu", "sha",
];

/// splitmix64: a fixed, seeded sequence.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// The word list and the Zipf distribution's cumulative weights.
pub struct Text {
    words: Vec<String>,
    cumulative: Vec<f64>,
    rng: Rng,
}

impl Text {
    pub fn new(seed: u64) -> Text {
        let mut words: Vec<String> = COMMON.split_whitespace().map(str::to_string).collect();
        words.dedup();
        let mut r = Rng(7);
        while words.len() < VOCAB {
            let n = 2 + r.below(3);
            let w: String = (0..n).map(|_| SYLLABLES[r.below(24) as usize]).collect();
            words.push(w);
        }
        let mut acc = 0.0;
        let cumulative = (1..=words.len())
            .map(|rank| {
                acc += 1.0 / (rank as f64).powf(1.07);
                acc
            })
            .collect();
        Text {
            words,
            cumulative,
            rng: Rng(seed),
        }
    }

    fn word(&mut self) -> &str {
        let total = self.cumulative.last().copied().unwrap_or(1.0);
        let x = self.rng.unit() * total;
        let i = self
            .cumulative
            .partition_point(|&c| c < x)
            .min(self.words.len() - 1);
        &self.words[i]
    }

    /// One turn: `Name: words...`, at most 270 bytes.
    pub fn turn(&mut self) -> String {
        let mut s = format!("{}:", NAMES[self.rng.below(20) as usize]);
        let n = 5 + self.rng.below(36);
        for _ in 0..n {
            let w = self.word().to_string();
            if s.len() + w.len() + 2 > 270 {
                break;
            }
            s.push(' ');
            s.push_str(&w);
        }
        s.push('.');
        s
    }

    /// One query: a question word and 4 to 9 words.
    pub fn query(&mut self) -> String {
        let q = ["what", "when", "how", "where", "who", "why"][self.rng.below(6) as usize];
        let mut s = q.to_string();
        for _ in 0..4 + self.rng.below(6) {
            s.push(' ');
            let w = self.word().to_string();
            s.push_str(&w);
        }
        s.push('?');
        s
    }
}

/// Memories appended per commit while building.
pub const BATCH: u64 = 10_000;

fn build_somna(path: &Path, n: u64) -> f64 {
    let store = Store::create_with(path, Options::default().exclusive(true)).expect("store");
    let mut text = Text::new(1);
    let t = Instant::now();
    let mut done = 0;
    while done < n {
        let k = BATCH.min(n - done);
        let items = (0..k).map(|_| NewMemory::new(text.turn())).collect();
        store.append(SCOPE, items, None).expect("append");
        done += k;
    }
    t.elapsed().as_secs_f64()
}

fn build_fts(path: &Path, n: u64) -> (Connection, f64) {
    let db = Connection::open(path).expect("sqlite");
    db.execute_batch("PRAGMA journal_mode=WAL; CREATE VIRTUAL TABLE f USING fts5(text, tokenize='porter unicode61')")
        .expect("fts5");
    let mut text = Text::new(1);
    let t = Instant::now();
    let mut done = 0;
    while done < n {
        let k = BATCH.min(n - done);
        let tx = db.unchecked_transaction().expect("tx");
        {
            let mut st = tx
                .prepare_cached("INSERT INTO f(text) VALUES (?1)")
                .expect("prepare");
            for _ in 0..k {
                st.execute([text.turn()]).expect("insert");
            }
        }
        tx.commit().expect("commit");
        done += k;
    }
    (db, t.elapsed().as_secs_f64())
}

/// The bytes of a redb table (stored, metadata, fragmented).
pub fn table_bytes<K: redb::Key + 'static>(
    rx: &redb::ReadTransaction,
    def: redb::TableDefinition<K, &[u8]>,
) -> u64 {
    let s = rx.open_table(def).expect("table").stats().expect("stats");
    s.stored_bytes() + s.metadata_bytes() + s.fragmented_bytes()
}

/// The bytes of the somna store's search tables.
fn somna_index_bytes(path: &Path) -> u64 {
    let db = redb::Database::open(path).expect("redb open");
    let rx = db.begin_read().expect("read");
    table_bytes(&rx, somna::format::SEARCH_TAIL) + table_bytes(&rx, somna::format::SEARCH_POSTINGS)
}

/// The pages of the FTS5 index's shadow tables (its text, `f_content`, left out).
fn fts_index_bytes(db: &Connection) -> u64 {
    db.query_row(
        "SELECT SUM(pgsize) FROM dbstat WHERE name IN ('f_data', 'f_idx', 'f_docsize', 'f_config')",
        [],
        |r| r.get::<_, i64>(0),
    )
    .expect("dbstat") as u64
}

pub fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// Queries timed per engine and size: fewer at the sizes where one takes long.
fn timed(n: u64) -> usize {
    if n <= 10_000 {
        600
    } else if n <= 100_000 {
        200
    } else {
        60
    }
}

/// Queries run once, untimed, before the timed ones.
const WARM_UP: usize = 10;

/// One size: builds both, then times the queries, the engines alternating per query.
fn size(dir: &Path, n: u64, md: &mut String) {
    let epath = dir.join(format!("speed-{n}.redb"));
    let ebuild = build_somna(&epath, n);
    let ebytes = somna_index_bytes(&epath);
    let (db, fbuild) = build_fts(&dir.join(format!("speed-{n}.sqlite")), n);
    let fbytes = fts_index_bytes(&db);
    let store = Store::open_with(&epath, Options::default().exclusive(true)).expect("open");
    let mut text = Text::new(99);
    let queries: Vec<String> = (0..timed(n)).map(|_| text.query()).collect();
    let (mut et, mut ft) = (Vec::new(), Vec::new());
    let mut st = db
        .prepare("SELECT rowid, text FROM f WHERE f MATCH ?1 ORDER BY rank LIMIT 10")
        .expect("prepare");
    let mut fts = |q: &str| {
        let rows: Vec<(i64, String)> = st
            .query_map([fts_query(q)], |r| Ok((r.get(0)?, r.get(1)?)))
            .expect("query")
            .filter_map(|r| r.ok())
            .collect();
        std::hint::black_box(rows);
    };
    let eng = |q: &str| {
        let mut sq = SearchQuery::new(q);
        sq.params.prune = crate::prune();
        std::hint::black_box(store.search(SCOPE, &sq).expect("search"));
    };
    for q in queries.iter().take(WARM_UP) {
        eng(q);
        fts(q);
    }
    for (i, q) in queries.iter().enumerate() {
        for side in 0..2 {
            let t = Instant::now();
            if (side + i) % 2 == 0 {
                eng(q);
                et.push(t.elapsed().as_secs_f64() * 1e3);
            } else {
                fts(q);
                ft.push(t.elapsed().as_secs_f64() * 1e3);
            }
        }
    }
    let (e50, e95) = (percentile(&mut et, 0.5), percentile(&mut et, 0.95));
    let (f50, f95) = (percentile(&mut ft, 0.5), percentile(&mut ft, 0.95));
    let _ = writeln!(
        md,
        "| {n} | {e50:.3} | {e95:.3} | {f50:.3} | {f95:.3} | {:.2} / {:.2} | {:.0} | {:.0} | {ebuild:.1} | {fbuild:.1} |",
        e50 / f50,
        e95 / f95,
        ebytes as f64 / n as f64,
        fbytes as f64 / n as f64,
    );
    println!("  {n} memories done");
}

/// The latency and size table for `sizes`.
pub fn speed(dir: &Path, sizes: &[u64]) -> String {
    let mut md = String::new();
    let _ = writeln!(md, "Distinct generated queries per size (600 up to 10^4, 200 at 10^5, 60 at 10^6) after {WARM_UP} untimed ones, top 10, the engines alternating (which goes first alternates too); somna `Store::search` (exclusive store, default parameters), FTS5 `SELECT rowid, text ... ORDER BY rank LIMIT 10` (porter unicode61, WAL, a file beside the store); build = appending the memories in commits of {BATCH}.\n");
    let _ = writeln!(md, "| memories | somna p50 ms | somna p95 ms | FTS5 p50 ms | FTS5 p95 ms | somna / FTS5 (p50 / p95) | somna index bytes / memory | FTS5 index bytes / memory | somna build s | FTS5 build s |\n|---|---|---|---|---|---|---|---|---|---|");
    for &n in sizes {
        size(dir, n, &mut md);
    }
    md
}
