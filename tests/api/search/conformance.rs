//! Guards that the same query gives the same top 10 on a file and on PostgreSQL: one generated
//! corpus (a few hundred memories over two scopes, with summaries, a retraction, a superseded
//! memory, proposed inferences and vectors) is noted into a redb file and into a schema on the
//! server `SOMNA_TEST_PG` names, and every query (one scope, both scopes, a kind, a time window,
//! inactive memories shown, vectors fused and alone) must give the same ids, order, lines and
//! scores on both. Without `SOMNA_TEST_PG` the test says so and checks the file store alone
//! (run it with `scripts/pg-server.sh run --fast -- cargo test --test api -- conformance`).

use somna::{Decision, Kind, NewMemory, SearchMode, SearchQuery, Store};

const SCOPES: [&str; 2] = ["team/a", "team/b"];
const PER_SCOPE: u64 = 150;
const DIM: usize = 8;
/// 2026-01-01T00:00:00Z, the first memory's observation time; one hour between memories.
const T0: i64 = 1_767_225_600_000_000;
const HOUR: i64 = 3_600_000_000;

const WORDS: [&str; 24] = [
    "deploy", "cargo", "build", "support", "group", "Caroline", "meeting", "budget", "release",
    "review", "database", "index", "search", "painting", "camping", "school", "running", "kitchen",
    "garden", "music", "friends", "travel", "Paris", "weekend",
];

/// A small deterministic generator (a linear congruential one), so both stores get the same
/// corpus without a dependency.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 33
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn sentence(&mut self) -> String {
        let n = 3 + self.below(8);
        (0..n)
            .map(|_| WORDS[self.below(WORDS.len())])
            .collect::<Vec<_>>()
            .join(" ")
    }
    fn vector(&mut self) -> Vec<f32> {
        (0..DIM)
            .map(|_| (self.next() % 2001) as f32 / 1000.0 - 1.0)
            .collect()
    }
}

/// Notes the corpus into `s`: the same calls, in the same order, for both backends.
fn fill(s: &Store) {
    let mut g = Gen(20);
    for (k, scope) in SCOPES.iter().enumerate() {
        for i in 0..PER_SCOPE {
            let t = T0 + (i as i64) * HOUR + k as i64;
            let kind = if i % 17 == 5 {
                Kind::Inference
            } else {
                Kind::Observation
            };
            let mut m = NewMemory::new(g.sentence()).observed_us(t).kind(kind);
            if i % 3 != 0 {
                m = m.vector(g.vector());
            }
            if i % 41 == 40 {
                m = m.supersedes(vec![i - 1]);
            }
            s.note(scope, m).unwrap();
        }
        s.decide(scope, 7, Decision::Retract, Some("wrong"))
            .unwrap();
        for _ in 0..12 {
            let Some(p) = s.next_prompt(scope).unwrap() else {
                break;
            };
            let text = format!("zeppelin review: {}", g.sentence());
            s.nap(scope, p.block, &text).unwrap();
        }
    }
}

/// The queries compared, each with the scopes it searches.
fn queries() -> Vec<(Vec<String>, SearchQuery)> {
    let one = vec![SCOPES[0].to_string()];
    let both: Vec<String> = SCOPES.iter().map(|s| s.to_string()).collect();
    let mut g = Gen(7);
    let mut out = Vec::new();
    for text in [
        "support group Caroline",
        "deploy",
        "camping Paris weekend",
        "music",
        "zeppelin painting",
    ] {
        out.push((one.clone(), SearchQuery::new(text)));
        out.push((both.clone(), SearchQuery::new(text)));
    }
    let mut kind = SearchQuery::new("budget review");
    kind.kind = Some(Kind::Inference);
    out.push((both.clone(), kind));
    let mut window = SearchQuery::new("database index search");
    window.since_us = Some(T0 + 20 * HOUR);
    window.until_us = Some(T0 + 90 * HOUR);
    out.push((both.clone(), window));
    let mut inactive = SearchQuery::new("garden kitchen friends");
    inactive.include_inactive = true;
    inactive.limit = 20;
    out.push((one.clone(), inactive));
    let mut page = SearchQuery::new("release build");
    page.offset = 10;
    out.push((both.clone(), page));
    let mut fused = SearchQuery::new("school running");
    fused.vector = Some(g.vector());
    out.push((one.clone(), fused.clone()));
    out.push((both.clone(), fused));
    let mut alone = SearchQuery::new("");
    alone.vector = Some(g.vector());
    alone.mode = Some(SearchMode::Vector);
    out.push((both, alone));
    out
}

/// What must agree: per hit its scope, block, id, line, score and terms.
fn answers(s: &Store) -> Vec<Vec<String>> {
    queries()
        .iter()
        .map(|(scopes, q)| {
            let r = s.search_scopes(scopes, q).unwrap();
            assert!(
                !r.hits.is_empty(),
                "{q:?} found nothing: the corpus misses it"
            );
            r.hits
                .iter()
                .map(|h| {
                    format!(
                        "{} #{} {:?} {} score={:e} {:?} inactive={}",
                        h.scope, h.block, h.id, h.line, h.score, h.terms, h.inactive
                    )
                })
                .collect()
        })
        .collect()
}

#[test]
fn the_same_query_gives_the_same_top_10_on_a_file_and_on_the_server() {
    let dir = tempfile::tempdir().unwrap();
    let file = Store::create(dir.path().join("conf.redb")).unwrap();
    fill(&file);
    let on_file = answers(&file);
    let all = on_file.concat().join("\n");
    for shown in ["None #", "inactive=true", "[proposed]", "team/b #"] {
        assert!(
            all.contains(shown),
            "no hit shows {shown:?}: the corpus misses it"
        );
    }
    let Ok(base) = std::env::var("SOMNA_TEST_PG") else {
        eprintln!("SOMNA_TEST_PG is not set: the file store alone was searched");
        return;
    };
    let server = Store::create(crate::backend::schema_url(&base, dir.path(), "conf.redb")).unwrap();
    fill(&server);
    let on_server = answers(&server);
    for (i, (f, p)) in on_file.iter().zip(&on_server).enumerate() {
        assert_eq!(f, p, "query {i}: {:?}", queries()[i].1);
    }
    assert_eq!(on_file.len(), on_server.len());
}
