//! Guards recall's bounded pages (`RecallQuery::count_all = false`, what the web inspector's Log
//! and Review pages use so that a page of 10^6 memories costs the page): walking the pages by
//! their cursors gives exactly the matches and cursors of the counting recall, page for page,
//! with and without a pattern that skips memories; `total` is then the page and one more when
//! there are older matches.

use somna::{NewMemory, RecallQuery, Store};

fn pages(s: &Store, pattern: &str, count_all: bool) -> Vec<(Vec<u64>, Option<u64>, u64)> {
    let mut out = Vec::new();
    let mut before = None;
    loop {
        let mut q = RecallQuery::new(pattern);
        q.limit = Some(7);
        q.before = before;
        q.count_all = count_all;
        let r = s.recall("u", &q).unwrap();
        let ids: Vec<u64> = r.matches.iter().map(|m| m.id).collect();
        out.push((ids, r.next_before, r.total));
        match r.next_before {
            Some(b) => before = Some(b),
            None => return out,
        }
    }
}

#[test]
fn bounded_pages_walk_the_same_matches_as_counted_ones() {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::create(crate::backend::location(dir.path(), "t.redb")).unwrap();
    let notes: Vec<NewMemory> = (0..100)
        .map(|i| {
            NewMemory::new(format!(
                "memory {i} {}",
                if i % 3 == 0 { "third" } else { "other" }
            ))
        })
        .collect();
    s.append("u", notes, None).unwrap();
    for pattern in [".", "third"] {
        let counted = pages(&s, pattern, true);
        let bounded = pages(&s, pattern, false);
        assert_eq!(counted.len(), bounded.len(), "{pattern}");
        let all: u64 = if pattern == "." { 100 } else { 34 };
        for ((c_ids, c_next, c_total), (b_ids, b_next, b_total)) in counted.iter().zip(&bounded) {
            assert_eq!(c_ids, b_ids, "{pattern}");
            assert_eq!(c_next, b_next, "{pattern}");
            // The counting recall counts every match below the cursor; the bounded one the
            // page and, when older matches remain, one more.
            assert!(*c_total <= all && *b_total <= *c_total, "{pattern}");
            let more = u64::from(b_next.is_some());
            assert_eq!(*b_total, b_ids.len() as u64 + more, "{pattern}");
        }
        let walked: usize = bounded.iter().map(|(ids, _, _)| ids.len()).sum();
        assert_eq!(walked as u64, all, "{pattern}");
    }
}
