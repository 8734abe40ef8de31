//! Retrieval quality on LoCoMo, turn level, every engine in one run: somna (`Store::search`,
//! its parameters chosen by leave-one-conversation-out over a small grid, and the defaults),
//! SQLite FTS5 (unicode61; porter; porter with the neighbours as a second column) and plain
//! BM25 (written here: lowercase words, no stemming, no stop list).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;

use rusqlite::Connection;
use somna::search::RankParams;
use somna::{NewMemory, Options, SearchQuery, Store};

use crate::locomo::{Conversation, Scores, HEADER};

/// Hits asked of every engine (the deepest cut measured).
const DEPTH: usize = 20;

pub fn scope(c: &Conversation) -> String {
    format!("locomo-{}", c.name)
}

/// One store, one scope per conversation, one memory per turn.
pub fn somna_store(dir: &Path, convs: &[Conversation]) -> Store {
    std::fs::create_dir_all(dir).expect("mkdir");
    let store = Store::create_with(dir.join("locomo.redb"), Options::default().exclusive(true))
        .expect("create store");
    // LoCoMo turns reach 462 bytes; the default limit is 280.
    store.set_config("ENTRY_BYTES", "4096").expect("config");
    for c in convs {
        let items = c
            .turns
            .iter()
            .map(|t| {
                let mut m = NewMemory::new(t.as_str());
                m.force = true;
                m
            })
            .collect();
        store.append(&scope(c), items, None).expect("append");
    }
    store
}

fn somna_rank(store: &Store, scope: &str, q: &str, params: RankParams) -> Vec<usize> {
    let mut sq = SearchQuery::new(q);
    sq.params = params;
    sq.params.prune = crate::prune();
    ranked_ids(store, scope, sq)
}

/// The turns `store` ranks for `sq` in `scope`, the deepest cut measured ([`DEPTH`]) at most; none
/// when the search fails.
pub fn ranked_ids(store: &Store, scope: &str, mut sq: SearchQuery) -> Vec<usize> {
    sq.limit = DEPTH;
    sq.max_bytes = 1 << 20;
    match store.search(scope, &sq) {
        Ok(r) => r
            .hits
            .iter()
            .filter_map(|h| h.id)
            .map(|i| i as usize)
            .collect(),
        Err(_) => Vec::new(),
    }
}

/// A common English stop list (articles, pronouns, auxiliaries, question words): the
/// baselines' figures in issue 20 drop these from the query; rows marked "stop list" do too.
const STOP: &str = "a an the and or of to in on at for with by from is are was were be been \
    being do does did what when where who whom which why how that this these those it its i you \
    he she they we his her their our my your as about into than then there here has have had \
    not no yes can could would should will shall may might must s t";

/// The question without the stop list's words (`stop`), or as it is.
fn query_words(q: &str, stop: bool) -> String {
    if !stop {
        return q.to_string();
    }
    q.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty() && !STOP.split_whitespace().any(|s| s.eq_ignore_ascii_case(w)))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The words of a question as an FTS5 query: any of them.
pub fn fts_query(q: &str) -> String {
    q.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| format!("\"{w}\""))
        .collect::<Vec<_>>()
        .join(" OR ")
}

/// The FTS5 variants: table suffix, tokenizer, with the neighbour column.
const FTS: [(&str, &str, bool); 3] = [
    ("u", "unicode61", false),
    ("p", "porter unicode61", false),
    ("n", "porter unicode61", true),
];

/// An in-memory SQLite with, per conversation and variant, an FTS5 table of its turns.
fn fts_db(convs: &[Conversation]) -> Connection {
    let db = Connection::open_in_memory().expect("sqlite");
    for c in convs {
        for (suffix, tok, ctx) in FTS {
            let t = format!("t{}{suffix}", c.name);
            let cols = if ctx { "text, ctx" } else { "text" };
            db.execute_batch(&format!(
                "CREATE VIRTUAL TABLE {t} USING fts5({cols}, tokenize='{tok}')"
            ))
            .expect("fts5");
            let tx = db.unchecked_transaction().expect("tx");
            for (i, text) in c.turns.iter().enumerate() {
                if ctx {
                    let before = i.checked_sub(1).and_then(|j| c.turns.get(j));
                    let near = [before, c.turns.get(i + 1)]
                        .into_iter()
                        .flatten()
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(" ");
                    tx.execute(
                        &format!("INSERT INTO {t}(rowid, text, ctx) VALUES (?1, ?2, ?3)"),
                        rusqlite::params![i as i64 + 1, text, near],
                    )
                } else {
                    tx.execute(
                        &format!("INSERT INTO {t}(rowid, text) VALUES (?1, ?2)"),
                        rusqlite::params![i as i64 + 1, text],
                    )
                }
                .expect("insert");
            }
            tx.commit().expect("commit");
        }
    }
    db
}

fn fts_rank(db: &Connection, table: &str, ctx: bool, q: &str) -> Vec<usize> {
    let m = fts_query(q);
    if m.is_empty() {
        return Vec::new();
    }
    let rank = if ctx {
        format!("bm25({table}, 1.0, 0.3)")
    } else {
        format!("bm25({table})")
    };
    let sql =
        format!("SELECT rowid FROM {table} WHERE {table} MATCH ?1 ORDER BY {rank} LIMIT {DEPTH}");
    let mut st = db.prepare_cached(&sql).expect("prepare");
    let rows = st
        .query_map([m], |r| r.get::<_, i64>(0))
        .expect("query")
        .filter_map(|r| r.ok())
        .map(|id| (id - 1) as usize);
    rows.collect()
}

/// Plain BM25 over one conversation (k1 1.2, b 0.75).
struct Bm25 {
    docs: Vec<HashMap<String, u32>>,
    lens: Vec<f64>,
    df: HashMap<String, u32>,
    avg: f64,
}

fn words(s: &str) -> impl Iterator<Item = String> + '_ {
    s.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

impl Bm25 {
    fn new(turns: &[String]) -> Bm25 {
        let mut b = Bm25 {
            docs: Vec::new(),
            lens: Vec::new(),
            df: HashMap::new(),
            avg: 0.0,
        };
        for t in turns {
            let mut tf: HashMap<String, u32> = HashMap::new();
            let mut len = 0.0;
            for w in words(t) {
                *tf.entry(w).or_default() += 1;
                len += 1.0;
            }
            for w in tf.keys() {
                *b.df.entry(w.clone()).or_default() += 1;
            }
            b.docs.push(tf);
            b.lens.push(len);
        }
        b.avg = b.lens.iter().sum::<f64>() / b.lens.len().max(1) as f64;
        b
    }

    fn rank(&self, q: &str) -> Vec<usize> {
        let (k1, b, n) = (1.2, 0.75, self.docs.len() as f64);
        let mut terms: Vec<String> = words(q).collect();
        terms.sort();
        terms.dedup();
        let mut scored: Vec<(f64, usize)> = Vec::new();
        for (i, d) in self.docs.iter().enumerate() {
            let mut s = 0.0;
            for t in &terms {
                if let (Some(&tf), Some(&df)) = (d.get(t), self.df.get(t)) {
                    let idf = (1.0 + (n - f64::from(df) + 0.5) / (f64::from(df) + 0.5)).ln();
                    let tf = f64::from(tf);
                    s +=
                        idf * tf * (k1 + 1.0) / (tf + k1 * (1.0 - b + b * self.lens[i] / self.avg));
                }
            }
            if s > 0.0 {
                scored.push((s, i));
            }
        }
        scored.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        scored.into_iter().take(DEPTH).map(|s| s.1).collect()
    }
}

/// The grid's axes: k1, b, neighbour weight, neighbour radius, coverage.
type Axes = (Vec<f64>, Vec<f64>, Vec<f64>, Vec<u32>, Vec<f64>);

/// The parameter grid somna's held-out figure chooses from: around the defaults (quick: the
/// defaults with and without neighbours, with and without the coverage boost).
fn grid(quick: bool) -> Vec<RankParams> {
    let d = RankParams::default();
    let (k1s, bs, ws, ns, cs): Axes = if quick {
        (
            vec![d.k1],
            vec![d.b],
            vec![0.0, d.neighbour_weight],
            vec![d.neighbours],
            vec![0.0, d.coverage],
        )
    } else {
        (
            vec![0.2, 0.3, 0.4],
            vec![0.5, 0.6, 0.75],
            vec![0.5, 0.7, 0.9],
            vec![1, 2, 3],
            vec![0.2, 0.3, 0.4],
        )
    };
    let mut out = Vec::new();
    for &k1 in &k1s {
        for &b in &bs {
            for &coverage in &cs {
                for &w in &ws {
                    for &n in if w == 0.0 { &ns[..1] } else { &ns[..] } {
                        out.push(RankParams {
                            k1,
                            b,
                            neighbour_weight: w,
                            neighbours: n,
                            coverage,
                            ..d
                        });
                    }
                }
            }
        }
    }
    if !out.contains(&d) {
        out.push(d);
    }
    out
}

/// Sums of one ranking function's measures per conversation.
fn per_conv(
    convs: &[Conversation],
    mut rank: impl FnMut(usize, &str) -> Vec<usize>,
) -> Vec<Scores> {
    convs
        .iter()
        .enumerate()
        .map(|(ci, c)| {
            let mut s = Scores::default();
            for q in &c.questions {
                s.add(&Scores::of(&rank(ci, &q.text), &q.evidence));
            }
            s
        })
        .collect()
}

fn total(v: &[Scores]) -> Scores {
    let mut t = Scores::default();
    v.iter().for_each(|s| t.add(s));
    t
}

fn describe(p: &RankParams) -> String {
    format!(
        "k1 {}, b {}, neighbours {}x{}, coverage {}",
        p.k1, p.b, p.neighbours, p.neighbour_weight, p.coverage
    )
}

/// Runs every engine on `convs` and returns the Markdown section.
pub fn quality(dir: &Path, convs: &[Conversation], quick: bool) -> String {
    let store = somna_store(dir, convs);
    let scopes: Vec<String> = convs.iter().map(scope).collect();
    let grid = grid(quick);
    // results[p][c]: the sums of grid point p on conversation c.
    let results: Vec<Vec<Scores>> = grid
        .iter()
        .map(|p| per_conv(convs, |ci, q| somna_rank(&store, &scopes[ci], q, *p)))
        .collect();
    let mut md = String::new();
    let _ = writeln!(md, "Held out (leave one conversation out: parameters chosen on the other four by recall_any@10, then NDCG@10, over {} grid points):\n", grid.len());
    let _ = writeln!(md, "{HEADER}");
    let mut held = Scores::default();
    for (ci, c) in convs.iter().enumerate() {
        let best = (0..grid.len())
            .max_by(|&a, &b| {
                let key = |p: usize| {
                    let mut s = Scores::default();
                    results[p]
                        .iter()
                        .enumerate()
                        .filter(|(j, _)| *j != ci)
                        .for_each(|(_, x)| s.add(x));
                    let m = s.mean();
                    (m.any10, m.ndcg10)
                };
                key(a)
                    .partial_cmp(&key(b))
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
            .unwrap_or(0);
        held.add(&results[best][ci]);
        let _ = writeln!(
            md,
            "{}",
            results[best][ci].row(&format!(
                "somna, conversation {} held out ({})",
                c.name,
                describe(&grid[best])
            ))
        );
    }
    let _ = writeln!(md, "{}", held.row("**somna, held out, all questions**"));
    let _ = writeln!(md, "\nEvery engine on all {} questions (\"stop list\": the query without common English words, as the baselines of issue 20 were measured):\n\n{HEADER}", total(&results[0]).questions);
    let _ = writeln!(md, "{}", held.row("somna, held out (above)"));
    for stop in [false, true] {
        let s = per_conv(convs, |ci, q| {
            somna_rank(
                &store,
                &scopes[ci],
                &query_words(q, stop),
                RankParams::default(),
            )
        });
        let name = format!(
            "somna, default parameters ({}){}",
            describe(&RankParams::default()),
            if stop { ", stop list" } else { "" }
        );
        let _ = writeln!(md, "{}", total(&s).row(&name));
    }
    let db = fts_db(convs);
    let bm: Vec<Bm25> = convs.iter().map(|c| Bm25::new(&c.turns)).collect();
    for stop in [false, true] {
        let tail = if stop { ", stop list" } else { "" };
        for (suffix, tok, ctx) in FTS {
            let s = per_conv(convs, |ci, q| {
                fts_rank(
                    &db,
                    &format!("t{}{suffix}", convs[ci].name),
                    ctx,
                    &query_words(q, stop),
                )
            });
            let name = if ctx {
                format!("SQLite FTS5 {tok}, neighbours column bm25(t, 1.0, 0.3){tail}")
            } else {
                format!("SQLite FTS5 {tok}{tail}")
            };
            let _ = writeln!(md, "{}", total(&s).row(&name));
        }
        let s = per_conv(convs, |ci, q| bm[ci].rank(&query_words(q, stop)));
        let _ = writeln!(
            md,
            "{}",
            total(&s).row(&format!("plain BM25 (k1 1.2, b 0.75, no stemming){tail}"))
        );
    }
    md
}
