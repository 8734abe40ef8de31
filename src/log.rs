//! The raw log: append-only memories, keyed by (scope id, position), never rewritten.
//! Appends cost O(new memories); reads are point gets and range scans; recall streams the log
//! newest first with a linear-time regex.

use std::fmt;

use redb::ReadableTable;
use serde::Serialize;

use crate::codec::{decode, encode};
use crate::db::{ReadTxn, Store, WriteTxn};
use crate::error::{Error, Result};
use crate::record::{IdemEntry, Kind, Memory, Status};
use crate::schema::{IDEMPOTENCY, LOG, PENDING};
use crate::text::{date_of, display_safe, validate_line};

/// A memory to append. Only the text is required; the rest of the envelope has defaults.
///
/// ```
/// use engram::{Kind, NewMemory};
/// let m = NewMemory::new("deploys go through the staging branch")
///     .kind(Kind::Decision)
///     .source("user:alice");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NewMemory {
    /// The text: one line, at most `ENTRY_BYTES` bytes.
    pub text: String,
    /// Kind of claim (default observation).
    pub kind: Kind,
    /// Status (default accepted).
    pub status: Option<Status>,
    /// When it was observed (microseconds, UTC); default: the commit time.
    pub observed_us: Option<i64>,
    /// Source identity.
    pub source: Option<String>,
    /// Source URI.
    pub source_uri: Option<String>,
    /// Ids it supersedes (must be earlier memories of the same scope).
    pub supersedes: Vec<u64>,
    /// Ids it conflicts with (earlier memories of the same scope).
    pub conflicts_with: Vec<u64>,
    /// Expiry time (microseconds, UTC).
    pub valid_until_us: Option<i64>,
    /// Store it even if it looks like a secret and the scope's policy refuses secrets.
    pub force: bool,
}

impl NewMemory {
    /// A memory with this text and default envelope.
    pub fn new(text: impl Into<String>) -> Self {
        NewMemory {
            text: text.into(),
            ..Default::default()
        }
    }
    /// Sets the kind.
    pub fn kind(mut self, k: Kind) -> Self {
        self.kind = k;
        self
    }
    /// Sets the status.
    pub fn status(mut self, s: Status) -> Self {
        self.status = Some(s);
        self
    }
    /// Sets the observed time (microseconds since the epoch, UTC).
    pub fn observed_us(mut self, t: i64) -> Self {
        self.observed_us = Some(t);
        self
    }
    /// Sets the source identity.
    pub fn source(mut self, s: impl Into<String>) -> Self {
        self.source = Some(s.into());
        self
    }
    /// Sets the source URI.
    pub fn source_uri(mut self, s: impl Into<String>) -> Self {
        self.source_uri = Some(s.into());
        self
    }
    /// Sets the ids this memory supersedes.
    pub fn supersedes(mut self, ids: Vec<u64>) -> Self {
        self.supersedes = ids;
        self
    }
    /// Sets the ids this memory conflicts with.
    pub fn conflicts_with(mut self, ids: Vec<u64>) -> Self {
        self.conflicts_with = ids;
        self
    }
    /// Stores it even if it looks like a secret (see [`crate::policy::Policy`]).
    pub fn force(mut self, yes: bool) -> Self {
        self.force = yes;
        self
    }
    /// Sets the expiry time (microseconds since the epoch, UTC).
    pub fn valid_until_us(mut self, t: i64) -> Self {
        self.valid_until_us = Some(t);
        self
    }
}

/// The outcome of an append.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Appended {
    /// Id of the first memory appended.
    pub first: u64,
    /// How many were appended.
    pub count: u64,
    /// True when the idempotency key had been used already: nothing new was written and these
    /// are the ids of the earlier append.
    pub replayed: bool,
}

pub(crate) struct LogKey(pub u32, pub u64);
impl fmt::Display for LogKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "(scope {}, #{})", self.0, self.1)
    }
}

pub(crate) fn decode_memory(scope_id: u32, pos: u64, bytes: &[u8]) -> Result<Memory> {
    let m: Memory = decode("log", &LogKey(scope_id, pos), bytes)?;
    check_position(scope_id, pos, m.id)?;
    Ok(m)
}

/// A record stored at `pos` must say it is `#pos`.
fn check_position(scope_id: u32, pos: u64, id: u64) -> Result<()> {
    if id != pos {
        return Err(Error::corrupt(
            "log",
            LogKey(scope_id, pos),
            format!("the record says it is #{id}"),
        ));
    }
    Ok(())
}

/// The fields of a stored memory that recall filters on, borrowed from the value's bytes. Its
/// fields mirror the start of [`Memory`] in wire order; postcard reads a prefix and the rest of
/// the record is not decoded.
#[derive(serde::Deserialize)]
struct MemoryView<'a> {
    id: u64,
    observed_us: i64,
    _recorded_us: i64,
    text: &'a str,
    kind: Kind,
}

fn decode_view(scope_id: u32, pos: u64, bytes: &[u8]) -> Result<MemoryView<'_>> {
    let body = crate::codec::payload("log", &LogKey(scope_id, pos), bytes)?;
    let m: MemoryView<'_> = postcard::from_bytes(body).map_err(|e| {
        Error::corrupt(
            "log",
            LogKey(scope_id, pos),
            format!("undecodable value: {e}"),
        )
    })?;
    check_position(scope_id, pos, m.id)?;
    Ok(m)
}

/// Formats `n` in decimal into `buf` without allocating.
fn itoa_u64(mut n: u64, buf: &mut [u8; 20]) -> &str {
    let mut i = buf.len();
    loop {
        i -= 1;
        if let Some(b) = buf.get_mut(i) {
            *b = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 || i == 0 {
            break;
        }
    }
    std::str::from_utf8(buf.get(i..).unwrap_or_default()).unwrap_or("0")
}

/// Renders a memory as its wake/recall line: `#id YYYY-MM-DD text`.
pub fn memory_line(m: &Memory) -> String {
    format!(
        "#{} {} {}",
        m.id,
        date_of(m.observed_us),
        display_safe(&m.text)
    )
}

const MAX_FIELD_BYTES: usize = 1024;

pub(crate) fn validate_field(what: &'static str, v: &Option<String>) -> Result<()> {
    match v {
        Some(s) => crate::text::validate_field(what, s, MAX_FIELD_BYTES),
        None => Ok(()),
    }
}

/// Checks an idempotency key: 1 to 256 bytes, no control characters.
pub fn validate_key(key: &str) -> Result<()> {
    crate::text::validate_field("idempotency key", key, 256)
}

impl WriteTxn<'_> {
    /// Appends one memory to `scope` (created if new) and returns its id.
    pub fn note(&mut self, scope: &str, m: NewMemory) -> Result<u64> {
        Ok(self.append(scope, vec![m], None)?.first)
    }

    /// Appends memories to `scope` in this transaction. With `key`, a second append with the same
    /// key and the same texts writes nothing and returns the first one's ids (`replayed`); the
    /// same key with other texts is a [`Error::Conflict`].
    pub fn append(
        &mut self,
        scope: &str,
        items: Vec<NewMemory>,
        key: Option<&str>,
    ) -> Result<Appended> {
        if items.is_empty() {
            return Err(Error::invalid("append", "nothing to append"));
        }
        let cfg = self.config()?;
        self.require(crate::auth::Access::Write, scope)?;
        let policy = self.policy(scope)?;
        let mut crc = crc32fast::Hasher::new();
        // Keys written before the whole envelope was hashed hold a checksum of the texts alone.
        let mut legacy = crc32fast::Hasher::new();
        for m in &items {
            validate_line(&m.text, cfg.entry_bytes)?;
            validate_field("source", &m.source)?;
            validate_field("source URI", &m.source_uri)?;
            if m.source.is_none() && policy.require_source.contains(&m.kind) {
                return Err(Error::invalid(
                    "source",
                    format!("the policy of scope {scope:?} requires a source for {} memories (--source ID)", m.kind),
                ));
            }
            if policy.refuse_secrets && !m.force {
                if let Some(what) = crate::policy::looks_like_secret(&m.text) {
                    return Err(Error::invalid(
                        "text",
                        format!("it looks like it contains {what}; secrets are not stored (pass --force if it is not a secret)"),
                    ));
                }
            }
            legacy.update(m.text.as_bytes());
            legacy.update(b"\n");
            // The whole envelope the caller gave, so that a retry is recognised only when it
            // asks for exactly the same memories. (The postcard bytes, not the enveloped value:
            // the CRC of bytes followed by their own CRC is a constant.)
            crc.update(
                &postcard::to_allocvec(&(
                    &m.text,
                    m.kind,
                    m.status,
                    m.observed_us,
                    &m.source,
                    &m.source_uri,
                    &m.supersedes,
                    &m.conflicts_with,
                    m.valid_until_us,
                ))
                .map_err(|e| Error::Storage(format!("could not encode a value: {e}")))?,
            );
        }
        let texts_crc = crc.finalize();
        let legacy_crc = legacy.finalize();
        if let Some(k) = key {
            validate_key(k)?;
        }
        let mut meta = self.scope_or_create(scope)?;
        if let Some(k) = key {
            let t = self.tx.open_table(IDEMPOTENCY)?;
            let found = match t.get((meta.id, k))? {
                Some(v) => Some(decode::<IdemEntry>("idempotency", &k, v.value())?),
                None => None,
            };
            drop(t);
            if let Some(e) = found {
                if (e.texts_crc == texts_crc || e.texts_crc == legacy_crc)
                    && e.count == items.len() as u64
                {
                    return Ok(Appended {
                        first: e.first,
                        count: e.count,
                        replayed: true,
                    });
                }
                return Err(Error::Conflict(format!(
                    "idempotency key {k:?} was used for a different append (#{} and {} more)",
                    e.first,
                    e.count.saturating_sub(1)
                )));
            }
        }
        let first = meta.count;
        let mut log = self.tx.open_table(LOG)?;
        let mut pending = self.tx.open_table(PENDING)?;
        let mut added_pending = 0u64;
        for (i, m) in items.iter().enumerate() {
            let id = first + i as u64;
            for r in m.supersedes.iter().chain(&m.conflicts_with) {
                if *r >= id {
                    return Err(Error::invalid(
                        "link",
                        format!("#{id} can only refer to earlier memories, not #{r}"),
                    ));
                }
            }
            let rec = Memory {
                id,
                observed_us: m.observed_us.unwrap_or(self.now),
                recorded_us: self.now,
                text: m.text.clone(),
                kind: m.kind,
                status: m.status.unwrap_or(if m.kind == Kind::Inference {
                    policy.inference_status
                } else {
                    Status::Accepted
                }),
                source: m.source.clone(),
                source_uri: m.source_uri.clone(),
                supersedes: m.supersedes.clone(),
                conflicts_with: m.conflicts_with.clone(),
                valid_until_us: m.valid_until_us,
            };
            log.insert((meta.id, id), encode(&rec)?.as_slice())?;
            // Every block that this memory completes becomes pending.
            let t = id + 1;
            let mut level = 1u8;
            while level < 63 && t % (1u64 << level) == 0 {
                pending.insert((meta.id, level, t - (1u64 << level)), ())?;
                added_pending += 1;
                level += 1;
            }
        }
        drop(log);
        drop(pending);
        let count = items.len() as u64;
        meta.count += count;
        meta.pending += added_pending;
        for (i, m) in items.iter().enumerate() {
            let id = first + i as u64;
            for &r in &m.supersedes {
                self.add_event(
                    &mut meta,
                    r,
                    crate::lifecycle::EventKind::SupersededBy(id),
                    None,
                )?;
            }
            for &r in &m.conflicts_with {
                self.add_event(
                    &mut meta,
                    r,
                    crate::lifecycle::EventKind::ConflictedBy(id),
                    None,
                )?;
            }
        }
        self.put_scope(scope, &meta)?;
        if let Some(k) = key {
            let mut t = self.tx.open_table(IDEMPOTENCY)?;
            let e = IdemEntry {
                first,
                count,
                texts_crc,
            };
            t.insert((meta.id, k), encode(&e)?.as_slice())?;
        }
        Ok(Appended {
            first,
            count,
            replayed: false,
        })
    }

    /// Reads one memory as of this transaction.
    pub fn memory(&self, scope: &str, id: u64) -> Result<Memory> {
        let meta = crate::db::holding(self.scope_meta(scope)?, id)?;
        let t = self.tx.open_table(LOG)?;
        get_memory(&t, meta.id, id)
    }
}

pub(crate) fn get_memory<T: ReadableTable<(u32, u64), &'static [u8]>>(
    t: &T,
    scope_id: u32,
    id: u64,
) -> Result<Memory> {
    match t.get((scope_id, id))? {
        Some(v) => decode_memory(scope_id, id, v.value()),
        None => Err(Error::corrupt(
            "log",
            LogKey(scope_id, id),
            "missing: the log is not dense",
        )),
    }
}

/// A recall query. Only the pattern is required.
#[derive(Debug, Clone)]
pub struct RecallQuery {
    /// The regex, matched case-insensitively against `#id YYYY-MM-DD text`.
    pub pattern: String,
    /// Show at most this many matches (newest first when cut).
    pub limit: Option<usize>,
    /// Only memories observed at or after this time (microseconds).
    pub since_us: Option<i64>,
    /// Only memories observed before this time (microseconds).
    pub until_us: Option<i64>,
    /// Only memories of this kind.
    pub kind: Option<Kind>,
    /// Byte budget of the shown lines (default 20,000).
    pub max_bytes: usize,
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
        }
    }
}

/// What recall found.
#[derive(Debug, Clone, Serialize)]
pub struct Recall {
    /// The newest matches that fit the budget, oldest first.
    pub matches: Vec<Memory>,
    /// How many memories matched in all.
    pub total: u64,
    /// The matches as shown, with their markers (proposed, superseded, untrusted...).
    pub lines: Vec<String>,
    /// Ids of records that could not be decoded (damaged); they were skipped, never hiding the
    /// valid matches. Empty in a sound store.
    pub unreadable: Vec<u64>,
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
                "Newest {shown} of {} matches. Narrow the regex.\n",
                self.total
            ));
        }
        if !self.unreadable.is_empty() {
            let ids: Vec<String> = self.unreadable.iter().map(|i| format!("#{i}")).collect();
            out.push_str(&crate::text::skipped_damage("record", "", &ids));
            out.push_str(".\n");
        }
        out
    }
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
    /// Reads one memory.
    pub fn memory(&self, scope: &str, id: u64) -> Result<Memory> {
        let meta = crate::db::holding(self.scope_meta(scope)?, id)?;
        get_memory(&self.open(LOG)?, meta.id, id)
    }

    /// Reads the memories with ids in `[lo, hi)` (clipped to the log).
    pub fn memories(&self, scope: &str, lo: u64, hi: u64) -> Result<Vec<Memory>> {
        let Some(meta) = self.scope_meta(scope)? else {
            return Ok(Vec::new());
        };
        let hi = hi.min(meta.count);
        let mut out = Vec::new();
        if lo >= hi {
            return Ok(out);
        }
        for item in self.open(LOG)?.range((meta.id, lo)..(meta.id, hi))? {
            let (k, v) = item?;
            let (_, pos) = k.value();
            out.push(decode_memory(meta.id, pos, v.value())?);
        }
        Ok(out)
    }

    /// Finds memories whose line matches the query, streaming the log newest first.
    pub fn recall(&self, scope: &str, q: &RecallQuery) -> Result<Recall> {
        let re = compile_pattern(&q.pattern)?;
        let mut found = Vec::new();
        let mut total = 0u64;
        let Some(meta) = self.scope_meta(scope)? else {
            return Ok(Recall {
                matches: found,
                total,
                lines: Vec::new(),
                unreadable: Vec::new(),
            });
        };
        let limit = q.limit.unwrap_or(usize::MAX);
        let mut bytes = 0usize;
        let mut collecting = true;
        let mut day_cache: (Option<i64>, String) = (None, String::new());
        let mut num = [0u8; 20];
        let mut unreadable = Vec::new();
        let mut line = String::new();
        for item in self
            .open(LOG)?
            .range((meta.id, 0)..(meta.id, meta.count))?
            .rev()
        {
            let (k, v) = item?;
            let (_, pos) = k.value();
            // A borrowed view: no allocation per record; only matches are decoded whole.
            let m = match decode_view(meta.id, pos, v.value()) {
                Ok(m) => m,
                Err(Error::Corrupt { .. }) => {
                    unreadable.push(pos);
                    continue;
                }
                Err(e) => return Err(e),
            };
            if q.kind.is_some_and(|k| k != m.kind)
                || q.since_us.is_some_and(|s| m.observed_us < s)
                || q.until_us.is_some_and(|u| m.observed_us >= u)
            {
                continue;
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
            if !re.is_match(&line) {
                continue;
            }
            total += 1;
            if collecting {
                if found.len() < limit && bytes + line.len() < q.max_bytes {
                    match decode_memory(meta.id, pos, v.value()) {
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
        }
        found.reverse();
        unreadable.reverse();
        let events = self.open(crate::schema::EVENTS)?;
        let mut lines = Vec::with_capacity(found.len());
        for m in &found {
            lines.push(crate::lifecycle::marked_line(
                m,
                &crate::lifecycle::state_of(&events, meta.id, m)?,
            ));
        }
        Ok(Recall {
            matches: found,
            total,
            lines,
            unreadable,
        })
    }
}

impl Store {
    /// Appends one memory; see [`WriteTxn::note`].
    ///
    /// Concurrent calls from several threads share one commit (group commit; see
    /// [`Store::write_grouped`]).
    pub fn note(&self, scope: &str, m: NewMemory) -> Result<u64> {
        let scope = scope.to_string();
        self.write_grouped(move |tx| tx.note(&scope, m.clone()))
    }

    /// Appends many memories in one commit; see [`WriteTxn::append`].
    pub fn append(
        &self,
        scope: &str,
        items: Vec<NewMemory>,
        key: Option<&str>,
    ) -> Result<Appended> {
        let scope = scope.to_string();
        let key = key.map(str::to_string);
        self.write_grouped(move |tx| tx.append(&scope, items.clone(), key.as_deref()))
    }

    /// Number of memories in `scope`.
    pub fn count(&self, scope: &str) -> Result<u64> {
        self.read(|r| r.count(scope))
    }

    /// Reads one memory.
    pub fn memory(&self, scope: &str, id: u64) -> Result<Memory> {
        self.read(|r| r.memory(scope, id))
    }

    /// [`Store::recall`] over several scopes, in the order given: one `(scope, Recall)` each.
    /// Each scope is its own audited read (its own snapshot); a scope the principal may not
    /// read is [`Error::Denied`], as for one scope.
    pub fn recall_scopes(
        &self,
        scopes: &[String],
        q: &RecallQuery,
    ) -> Result<Vec<(String, Recall)>> {
        scopes
            .iter()
            .map(|s| Ok((s.clone(), self.recall(s, q)?)))
            .collect()
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
