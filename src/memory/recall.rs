//! Recall: the log streamed newest first against a linear-time regex, with filters on dates and
//! kinds, a byte budget, and lines marked by their lifecycle state.

use std::ops::ControlFlow;

use serde::Serialize;

use crate::domain::record::{Kind, Memory};
use crate::domain::text::{date_of, display_safe};
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
pub struct Recall {
    /// The newest matches that fit the budget, oldest first.
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

/// What a line must match: the pattern as one regex, or (`words`) every word of a list, as
/// literals in any order, found in one pass over the line.
#[derive(Debug, Clone)]
pub enum Query {
    /// One regex.
    Regex(regex::Regex),
    /// Each pattern of the set, a literal word, must occur.
    Words(regex::RegexSet),
}

impl Query {
    /// Whether `line` matches.
    pub fn is_match(&self, line: &str) -> bool {
        match self {
            Query::Regex(re) => re.is_match(line),
            Query::Words(set) => set.matches(line).matched_all(),
        }
    }
}

/// Compiles what a line must match: the pattern as one regex, or (`words`) each distinct
/// whitespace-separated word as a literal, all of which must occur, in any order. At most
/// [`MAX_WORDS`] distinct words (compared case-insensitively).
pub fn compile_query(p: &str, words: bool) -> Result<Query> {
    if !words {
        return Ok(Query::Regex(compile_pattern(p)?));
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
    regex::RegexSetBuilder::new(seen.values().map(|w| regex::escape(w)))
        .case_insensitive(true)
        .size_limit(4 << 20)
        .dfa_size_limit(4 << 20)
        .build()
        .map(Query::Words)
        .map_err(|e| Error::invalid("words", e.to_string().replace('\n', " ")))
}

/// Compiles a recall pattern: case-insensitive, linear time, with a bound on its compiled size.
pub fn compile_pattern(p: &str) -> Result<regex::Regex> {
    if p.is_empty() {
        return Err(Error::invalid("regex", "it is empty"));
    }
    regex::RegexBuilder::new(p)
        .case_insensitive(true)
        .size_limit(1 << 20)
        .dfa_size_limit(4 << 20)
        .nest_limit(64)
        .build()
        .map_err(|e| Error::invalid("regex", e.to_string().replace('\n', " ")))
}

impl ReadTxn {
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
        let mut line = String::new();
        let end = q.before.map_or(meta.count, |b| b.min(meta.count));
        let range = (meta.id, 0)..(meta.id, end);
        LOG.scan(&self.tx, range, Dir::Reverse, |(_, pos), v| {
            // A borrowed view: no allocation per record; only matches are decoded whole.
            let m = match decode_view(meta.id, pos, v) {
                Ok(m) => m,
                Err(Error::Corrupt { .. }) => {
                    unreadable.push(pos);
                    return Ok(ControlFlow::Continue(()));
                }
                Err(e) => return Err(e),
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
            line.push('#');
            line.push_str(itoa_u64(pos, &mut num));
            line.push(' ');
            line.push_str(&day_cache.1);
            line.push(' ');
            line.push_str(&display_safe(m.text));
            if !query.is_match(&line) {
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
        let events = &self.tx;
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
                &crate::memory::lifecycle::state_of(&events, meta.id, m)?,
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
