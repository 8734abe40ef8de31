//! Recall: the log streamed newest first against a linear-time regex, with filters on dates and
//! kinds, a byte budget, and lines marked by their lifecycle state.

use std::borrow::Cow;
use std::ops::ControlFlow;

use serde::Serialize;

use crate::domain::record::{Kind, Memory};
#[cfg(feature = "schemars")]
use crate::domain::schema::Objects;
use crate::domain::text::{date_of, display_safe, printable_ascii};
use crate::error::{Error, Result};
use crate::memory::log::{decode_memory, decode_view, itoa_u64, memory_line};
use crate::storage::kv::Dir;
use crate::storage::store::Store;
use crate::storage::tables::{EVENTS, LOG};
use crate::storage::txn::ReadTxn;

/// A recall query. Only the pattern is required.
#[derive(Debug, Clone)]
pub struct RecallQuery {
    /// The regex, matched case-insensitively against `#id YYYY-MM-DD text`.
    pub pattern: String,
    /// Show at most this many matches (newest first when cut); 0 is refused.
    pub limit: Option<usize>,
    /// Only memories observed at or after this time (microseconds).
    pub since_us: Option<i64>,
    /// Only memories observed before this time (microseconds).
    pub until_us: Option<i64>,
    /// Only memories of this kind.
    pub kind: Option<Kind>,
    /// Byte budget of the shown lines (default 20,000).
    pub max_bytes: usize,
    /// Only memories with an id below this one: the cursor of the next page, as
    /// [`Recall::next_before`] gives it.
    pub before: Option<u64>,
    /// Take the pattern as plain words: each whitespace-separated word must occur in the line, in
    /// any order, as a literal (case-insensitive), instead of as one regex.
    pub words: bool,
    /// Count every match into [`Recall::total`] (the default). `false` stops the scan at the
    /// first match past the page (or the budget), so that a page of a large log costs the page,
    /// not the log: `total` then counts only the matches seen (the page and one more when
    /// [`Recall::next_before`] is set), a lower bound.
    pub count_all: bool,
}

impl RecallQuery {
    /// A query for `pattern` with the default budget.
    pub fn new(pattern: impl Into<String>) -> Self {
        RecallQuery {
            pattern: pattern.into(),
            limit: None,
            since_us: None,
            until_us: None,
            kind: None,
            max_bytes: 20_000,
            before: None,
            words: false,
            count_all: true,
        }
    }
}

/// What recall found.
#[derive(Debug, Clone, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct Recall {
    /// The newest matches that fit the budget, oldest first.
    #[cfg_attr(feature = "schemars", schemars(with = "Objects"))]
    pub matches: Vec<Memory>,
    /// How many memories matched in all (with [`RecallQuery::count_all`] off, how many the scan
    /// saw before it stopped).
    pub total: u64,
    /// The matches as shown, with their markers (proposed, superseded, untrusted...).
    pub lines: Vec<String>,
    /// Ids of records that could not be decoded (damaged); they were skipped, never hiding the
    /// valid matches. Empty in a sound store.
    pub unreadable: Vec<u64>,
    /// When older matches were left out: the cursor that continues with them (the id of the
    /// oldest match shown), for [`RecallQuery::before`].
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_before: Option<u64>,
}

impl Recall {
    /// The match lines as shown: with their markers, or plain when no marked lines were built.
    pub fn shown_lines(&self) -> Vec<String> {
        if self.lines.len() == self.matches.len() {
            self.lines.clone()
        } else {
            self.matches.iter().map(memory_line).collect()
        }
    }

    /// Renders recall's text output: the lines, then `N matches.`, `Newest K of N matches.
    /// Narrow the regex.` or `No match.`
    pub fn render(&self) -> String {
        let mut out = String::new();
        for l in self.shown_lines() {
            out.push_str(&l);
            out.push('\n');
        }
        let shown = self.matches.len() as u64;
        if self.total == 0 {
            out.push_str("No match.\n");
        } else if shown == self.total {
            out.push_str(&format!(
                "{} match{}.\n",
                self.total,
                if self.total == 1 { "" } else { "es" }
            ));
        } else {
            out.push_str(&format!(
                "Newest {shown} of {} matches. Narrow the regex{}.\n",
                self.total,
                self.next_before
                    .map(|b| format!(", or see older ones with --before {b}"))
                    .unwrap_or_default()
            ));
        }
        if !self.unreadable.is_empty() {
            let ids: Vec<String> = self.unreadable.iter().map(|i| format!("#{i}")).collect();
            out.push_str(&crate::domain::text::skipped_damage("record", "", &ids));
            out.push_str(".\n");
        }
        out
    }
}

/// The most distinct words a `words` query may hold (docs/security.md): a longer list is
/// refused, so that one request cannot compile and run an unbounded matcher.
pub const MAX_WORDS: usize = 64;

/// The longest recall pattern, in bytes: a regex, or the distinct words of a words query
/// together (docs/security.md). The regex crate
/// parses a whole pattern before its compiled-size limit applies, and parsing costs hundreds of
/// bytes of memory per pattern byte: a pattern of a few megabytes took over a gigabyte. A
/// pattern of 8 KiB costs at most a few megabytes and is far longer than any recall needs.
pub const MAX_PATTERN_BYTES: usize = 8 << 10;

/// What a line must match: the pattern as one regex, or (`words`) every word of a list, as
/// literals in any order, found in one pass over the line.
#[derive(Debug, Clone)]
///
/// Both match bytes (`regex::bytes`, Unicode on): on UTF-8 text, which every line recall builds
/// is, they match exactly what the `str` regexes of the same pattern match, and the scan builds
/// its lines as bytes without checking UTF-8 a second time.
pub enum Query {
    /// One regex.
    Regex(regex::bytes::Regex),
    /// Each pattern of the set, a literal word, must occur.
    Words(regex::bytes::RegexSet),
}

impl Query {
    /// Whether `line` matches.
    pub fn is_match(&self, line: &str) -> bool {
        self.is_match_bytes(line.as_bytes())
    }

    /// Whether `line`, UTF-8 text as bytes, matches.
    pub fn is_match_bytes(&self, line: &[u8]) -> bool {
        match self {
            Query::Regex(re) => re.is_match(line),
            Query::Words(set) => set.matches(line).matched_all(),
        }
    }
}

/// The limits every recall pattern compiles under (docs/security.md), for a `str` or a `bytes`
/// builder alike: case-insensitive, a bounded program, DFA and nesting.
macro_rules! bounded {
    ($builder:expr) => {
        $builder
            .case_insensitive(true)
            .size_limit(1 << 20)
            .dfa_size_limit(4 << 20)
            .nest_limit(64)
    };
}

/// Compiles what a line must match: the pattern as one regex, or (`words`) each distinct
/// whitespace-separated word as a literal, all of which must occur, in any order. At most
/// [`MAX_WORDS`] distinct words (compared case-insensitively).
pub fn compile_query(p: &str, words: bool) -> Result<Query> {
    if !words {
        check_length(p.len(), "regex")?;
        check_not_empty(p)?;
        return bounded!(regex::bytes::RegexBuilder::new(p))
            .build()
            .map(Query::Regex)
            .map_err(regex_error);
    }
    let mut seen = std::collections::BTreeMap::new();
    for w in p.split_whitespace() {
        seen.entry(w.to_lowercase()).or_insert(w);
        if seen.len() > MAX_WORDS {
            return Err(Error::invalid(
                "words",
                format!("more than {MAX_WORDS} distinct words; narrow the query"),
            ));
        }
    }
    if seen.is_empty() {
        return Err(Error::invalid("words", "there is no word to look for"));
    }
    // Repeats cost nothing past the split: the bound is on the distinct words compiled.
    check_length(seen.values().map(|w| w.len()).sum(), "words")?;
    regex::bytes::RegexSetBuilder::new(seen.values().map(|w| regex::escape(w)))
        .case_insensitive(true)
        .size_limit(4 << 20)
        .dfa_size_limit(4 << 20)
        .build()
        .map(Query::Words)
        .map_err(|e| Error::invalid("words", e.to_string().replace('\n', " ")))
}

/// Compiles a recall pattern: case-insensitive, linear time, with a bound on its compiled size.
pub fn compile_pattern(p: &str) -> Result<regex::Regex> {
    check_length(p.len(), "regex")?;
    check_not_empty(p)?;
    bounded!(regex::RegexBuilder::new(p))
        .build()
        .map_err(regex_error)
}

/// Refuses a pattern of `len` bytes (a regex, or a words query's distinct words together) longer
/// than [`MAX_PATTERN_BYTES`] before anything parses or compiles it.
fn check_length(len: usize, what: &'static str) -> Result<()> {
    if len > MAX_PATTERN_BYTES {
        return Err(Error::invalid(
            what,
            format!("the pattern is {len} bytes; at most {MAX_PATTERN_BYTES}"),
        ));
    }
    Ok(())
}

fn check_not_empty(p: &str) -> Result<()> {
    if p.is_empty() {
        return Err(Error::invalid("regex", "it is empty"));
    }
    Ok(())
}

fn regex_error(e: regex::Error) -> Error {
    Error::invalid("regex", e.to_string().replace('\n', " "))
}

impl ReadTxn<'_> {
    /// Finds memories whose line matches the query, streaming the log newest first.
    pub fn recall(&self, scope: &str, q: &RecallQuery) -> Result<Recall> {
        if q.limit == Some(0) {
            return Err(Error::invalid("limit", "it must be at least 1"));
        }
        let query = compile_query(&q.pattern, q.words)?;
        let mut found = Vec::new();
        let mut total = 0u64;
        let Some(meta) = self.scope_meta(scope)? else {
            return Ok(Recall {
                matches: found,
                total,
                lines: Vec::new(),
                unreadable: Vec::new(),
                next_before: None,
            });
        };
        let limit = q.limit.unwrap_or(usize::MAX);
        let mut bytes = 0usize;
        let mut collecting = true;
        let mut day_cache: (Option<i64>, String) = (None, String::new());
        let mut num = [0u8; 20];
        let mut unreadable = Vec::new();
        let mut line: Vec<u8> = Vec::new();
        let end = q.before.map_or(meta.count, |b| b.min(meta.count));
        let range = (meta.id, 0)..(meta.id, end);
        LOG.scan(self.tx, range, Dir::Reverse, |(_, pos), v| {
            // A borrowed view: no allocation per record; only matches are decoded whole.
            let m = match decode_view(meta.id, pos, v) {
                Ok(m) => m,
                Err(Error::Corrupt { .. }) => {
                    unreadable.push(pos);
                    return Ok(ControlFlow::Continue(()));
                }
                Err(e) => return Err(e),
            };
            // Printable ASCII (the common case) is UTF-8 and shown as it is: one pass. Other
            // text is checked as UTF-8 (not UTF-8: an unreadable record, as a failed decode).
            let safe = if printable_ascii(m.text) {
                Cow::Borrowed(m.text)
            } else {
                match std::str::from_utf8(m.text) {
                    Ok(t) => match display_safe(t) {
                        Cow::Borrowed(t) => Cow::Borrowed(t.as_bytes()),
                        Cow::Owned(t) => Cow::Owned(t.into_bytes()),
                    },
                    Err(_) => {
                        unreadable.push(pos);
                        return Ok(ControlFlow::Continue(()));
                    }
                }
            };
            if q.kind.is_some_and(|k| k != m.kind)
                || q.since_us.is_some_and(|s| m.observed_us < s)
                || q.until_us.is_some_and(|u| m.observed_us >= u)
            {
                return Ok(ControlFlow::Continue(()));
            }
            let day = m.observed_us.div_euclid(86_400_000_000);
            if day_cache.0 != Some(day) {
                day_cache = (Some(day), date_of(m.observed_us));
            }
            line.clear();
            line.push(b'#');
            line.extend_from_slice(itoa_u64(pos, &mut num).as_bytes());
            line.push(b' ');
            line.extend_from_slice(day_cache.1.as_bytes());
            line.push(b' ');
            line.extend_from_slice(&safe);
            if !query.is_match_bytes(&line) {
                return Ok(ControlFlow::Continue(()));
            }
            total += 1;
            if collecting {
                if found.len() < limit && bytes + line.len() < q.max_bytes {
                    match decode_memory(meta.id, pos, v) {
                        Ok(full) => {
                            bytes += line.len() + 1;
                            found.push(full);
                        }
                        Err(Error::Corrupt { .. }) => unreadable.push(pos),
                        Err(e) => return Err(e),
                    }
                } else {
                    collecting = false;
                }
            }
            if !collecting && !q.count_all {
                return Ok(ControlFlow::Break(()));
            }
            Ok(ControlFlow::Continue(()))
        })?;
        found.reverse();
        unreadable.reverse();
        let events = self.tx;
        if let (Some(first), Some(last)) = (found.first(), found.last()) {
            // One statement for the events of every match on a server, not one per match.
            EVENTS.prefetch_range(
                events,
                (meta.id, first.id, 0)..=(meta.id, last.id, u32::MAX),
            )?;
        }
        let mut lines = Vec::with_capacity(found.len());
        for m in &found {
            lines.push(crate::memory::lifecycle::marked_line(
                m,
                &crate::memory::lifecycle::state_of(events, meta.id, m)?,
            ));
        }
        let next_before = match found.first() {
            Some(oldest) if total > found.len() as u64 => Some(oldest.id),
            _ => None,
        };
        Ok(Recall {
            matches: found,
            total,
            lines,
            unreadable,
            next_before,
        })
    }
}
impl Store {
    /// [`Store::recall`] over several scopes, in the order given, in one snapshot: one
    /// `(scope, Recall)` each, audited as one read naming the scopes (items `scope #id`). A
    /// scope the principal may not read is [`Error::Denied`], as for one scope.
    pub fn recall_scopes(
        &self,
        scopes: &[String],
        q: &RecallQuery,
    ) -> Result<Vec<(String, Recall)>> {
        crate::domain::text::check_scope_count(scopes.len())?;
        self.audited_as("recall", |r| recall_each(r, scopes, q), |f| recall_audit(f))
    }

    /// [`Store::recall_scopes`] over every scope the principal may read (`recall --all`),
    /// resolved in the same read.
    pub fn recall_all(&self, q: &RecallQuery) -> Result<Vec<(String, Recall)>> {
        self.audited_as(
            "recall",
            |r| recall_each(r, &r.scopes()?, q),
            |f| recall_audit(f),
        )
    }

    /// Runs a recall query.
    pub fn recall(&self, scope: &str, q: &RecallQuery) -> Result<Recall> {
        self.audited(
            "recall",
            scope,
            |r| r.recall(scope, q),
            |r| r.matches.iter().map(|m| format!("#{}", m.id)).collect(),
        )
    }
}

fn recall_each(r: &ReadTxn, scopes: &[String], q: &RecallQuery) -> Result<Vec<(String, Recall)>> {
    scopes
        .iter()
        .map(|s| Ok((s.clone(), r.recall(s, q)?)))
        .collect()
}

/// The scopes and the items an audit record of a recall over several scopes names.
fn recall_audit(found: &[(String, Recall)]) -> (String, Vec<String>) {
    let scopes: Vec<&str> = found.iter().map(|(s, _)| s.as_str()).collect();
    let items = found
        .iter()
        .flat_map(|(s, r)| r.matches.iter().map(move |m| format!("{s} #{}", m.id)))
        .collect();
    (scopes.join(","), items)
}

#[cfg(test)]
mod tests {
    //! The scan's two text paths: printable ASCII shown as it is, other text checked as UTF-8
    //! (case folding across Unicode kept by the bytes regex), and text that is not UTF-8 under a
    //! good checksum reported unreadable, never matched.
    use super::*;
    use crate::memory::note::NewMemory;
    use crate::storage::codec::encode;

    #[test]
    fn ascii_unicode_and_text_that_is_not_utf8() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(dir.path().join("s.redb")).unwrap();
        for t in ["plain words 0", "Café ünïcode 1", "soon damaged 2"] {
            store.note("default", NewMemory::new(t)).unwrap();
        }
        store
            .write(|tx| {
                let sid = crate::storage::txn::holding(tx.scope_meta("default")?, 2)?.id;
                let mut m = tx.memory("default", 2)?;
                m.text = "XXXX damaged 2".into();
                let mut v = encode(&m)?;
                let at = v.windows(4).position(|w| w == b"XXXX").unwrap();
                v[at..at + 4].copy_from_slice(&[0xff, 0xfe, 0xc3, 0x28]);
                let n = v.len();
                let crc = crc32fast::hash(&v[1..n - 4]);
                v[n - 4..].copy_from_slice(&crc.to_le_bytes());
                LOG.put(&mut *tx.tx, (sid, 2), &v)
            })
            .unwrap();
        let r = store.recall("default", &RecallQuery::new(".")).unwrap();
        assert_eq!(r.matches.iter().map(|m| m.id).collect::<Vec<_>>(), [0, 1]);
        assert_eq!(r.unreadable, [2]);
        let r = store
            .recall("default", &RecallQuery::new("CAFÉ ÜNÏCODE"))
            .unwrap();
        assert_eq!(r.matches.iter().map(|m| m.id).collect::<Vec<_>>(), [1]);
        let r = store
            .recall(
                "default",
                &RecallQuery::new(r"^#0 \d{4}-\d\d-\d\d plain words 0$"),
            )
            .unwrap();
        assert_eq!(r.total, 1);
    }

    /// A pattern over the bound is refused before the regex crate parses it (parsing a few
    /// megabytes took over a gigabyte of memory); one at the bound still compiles.
    #[test]
    fn a_pattern_longer_than_the_bound_is_refused_before_it_is_parsed() {
        let at = "q".repeat(MAX_PATTERN_BYTES);
        assert!(compile_query(&at, false).is_ok());
        assert!(compile_pattern(&at).is_ok());
        let over = "q".repeat(MAX_PATTERN_BYTES + 1);
        for (r, what) in [
            (compile_query(&over, false).map(|_| ()), "regex"),
            (compile_pattern(&over).map(|_| ()), "regex"),
        ] {
            match r {
                Err(Error::Invalid { what: w, reason }) => {
                    assert_eq!(w, what);
                    assert!(reason.contains("8193 bytes"), "{reason}");
                }
                other => panic!("expected invalid, got {other:?}"),
            }
        }
        let words = format!("{} tail", "w".repeat(MAX_PATTERN_BYTES));
        assert!(matches!(
            compile_query(&words, true),
            Err(Error::Invalid { what, .. }) if what == "words"
        ));
    }
}
