//! The items of LangGraph's long-term store (`BaseStore`): per `(namespace, key)` one JSON
//! object with its times and an optional expiry (TTL). A namespace is a tuple of labels, stored
//! joined by U+001F (the unit separator), so that the items of a namespace and of every
//! namespace below it are one range: `("a", "b")` is stored as `a\u{1f}b` and sorts right after
//! `a`. A label may hold any character LangGraph allows (not NUL, not empty): its U+001E and
//! U+001F are stored escaped (U+001E U+001E, U+001E U+001D), so the separator never occurs in a
//! stored label; a label that goes on with a character below U+001F (`"a\n"`) sorts inside its
//! sibling's range (`"a"`), and scans step over it.
//!
//! Access: an item is governed by the scope `store:` + the first label of its namespace.

use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};

use crate::checkpoint::validate_part;
use crate::error::{Error, Result};
use crate::storage::access::Access;
use crate::storage::codec::decode;
use crate::storage::codec::encode;
use crate::storage::kv::{Dir, KvRead};
use crate::storage::tables::STORE_ITEMS;
use crate::storage::txn::{ReadTxn, WriteTxn};

/// The separator of a namespace's labels in the key.
pub const LABEL_SEPARATOR: char = '\u{1f}';

/// One item of the store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoreItem {
    /// The value: a JSON object, as given.
    pub value: String,
    /// When it was first put, in microseconds since the epoch.
    pub created_us: i64,
    /// When it was last put (or its expiry refreshed), in microseconds.
    pub updated_us: i64,
    /// When it expires, in microseconds (`None`: never).
    pub expires_us: Option<i64>,
    /// Its time to live in microseconds, for refreshing the expiry on read.
    pub ttl_us: Option<i64>,
    /// Bytes the host keeps beside the value (the adapter: the vectors of its index).
    pub extra: Vec<u8>,
}

/// An item with its place.
#[derive(Debug, Clone, PartialEq)]
pub struct FoundItem {
    /// Its namespace's labels.
    pub namespace: Vec<String>,
    /// Its key.
    pub key: String,
    /// The item.
    pub item: StoreItem,
}

/// The scope that governs a namespace's items (docs/trust.md).
pub fn store_scope(namespace: &[&str]) -> String {
    format!("store:{}", namespace.first().copied().unwrap_or(""))
}

/// The escape of U+001E and U+001F in a stored label.
const ESCAPE: char = '\u{1e}';

/// The stored form of a namespace: its labels, escaped, joined by [`LABEL_SEPARATOR`]; a label
/// may not be empty or hold NUL (LangGraph's rules).
pub fn join_namespace(namespace: &[&str]) -> Result<String> {
    let mut joined = String::new();
    for (i, l) in namespace.iter().enumerate() {
        if l.is_empty() {
            return Err(Error::invalid("namespace", "a label is empty"));
        }
        if i > 0 {
            joined.push(LABEL_SEPARATOR);
        }
        for c in l.chars() {
            match c {
                ESCAPE => joined.push_str("\u{1e}\u{1e}"),
                LABEL_SEPARATOR => joined.push_str("\u{1e}\u{1d}"),
                c => joined.push(c),
            }
        }
    }
    validate_part("namespace", &joined)?;
    Ok(joined)
}

/// A stored label as given.
fn unescape(label: &str) -> String {
    let mut out = String::with_capacity(label.len());
    let mut chars = label.chars();
    while let Some(c) = chars.next() {
        if c != ESCAPE {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('\u{1d}') => out.push(LABEL_SEPARATOR),
            Some(e) => out.push(e),
            None => {}
        }
    }
    out
}

fn split(ns: &str) -> Vec<String> {
    if ns.is_empty() {
        return Vec::new();
    }
    ns.split(LABEL_SEPARATOR).map(unescape).collect()
}

/// Whether stored namespace `ns` is `prefix` or below it.
fn under(ns: &str, prefix: &str) -> bool {
    prefix.is_empty()
        || ns == prefix
        || ns
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with(LABEL_SEPARATOR))
}

/// Whether stored namespace `ns`, not under `prefix`, sorts inside its range: a sibling whose
/// last label goes on with a character below the separator (`"a\n"` after `"a"`).
fn inside(ns: &str, prefix: &str) -> bool {
    ns.strip_prefix(prefix)
        .and_then(|rest| rest.chars().next())
        .is_some_and(|c| c < LABEL_SEPARATOR)
}

fn decode_item(ns: &str, key: &str, v: &[u8]) -> Result<StoreItem> {
    decode("store_items", &format_args!("{ns}/{key}"), v)
}

/// Visits the live items under `prefix` (joined), in key order, until `f` breaks.
fn scan_under(
    kv: &(impl KvRead + ?Sized),
    prefix: &str,
    now_us: i64,
    mut f: impl FnMut(&str, &str, StoreItem) -> Result<ControlFlow<()>>,
) -> Result<()> {
    STORE_ITEMS.scan(kv, (prefix, "").., Dir::Forward, |(ns, key), v| {
        if !under(&ns, prefix) {
            if inside(&ns, prefix) {
                return Ok(ControlFlow::Continue(()));
            }
            return Ok(ControlFlow::Break(()));
        }
        let item = decode_item(&ns, key, v)?;
        if item.expires_us.is_some_and(|e| e <= now_us) {
            return Ok(ControlFlow::Continue(()));
        }
        f(&ns, key, item)
    })
}

impl WriteTxn<'_> {
    /// Puts an item (replacing one at the same key, keeping its creation time); `ttl_us` sets
    /// its expiry from now.
    pub fn store_put(
        &mut self,
        namespace: &[&str],
        key: &str,
        value: &str,
        ttl_us: Option<i64>,
        extra: &[u8],
    ) -> Result<()> {
        let ns = join_namespace(namespace)?;
        validate_part("key", key)?;
        self.require(Access::Write, &store_scope(namespace))?;
        let created_us = match STORE_ITEMS.get(&*self.tx, (&ns, key))? {
            Some(v) => decode_item(&ns, key, &v)?.created_us,
            None => self.now,
        };
        let item = StoreItem {
            value: value.to_string(),
            created_us,
            updated_us: self.now,
            expires_us: ttl_us.map(|t| self.now.saturating_add(t)),
            ttl_us,
            extra: extra.to_vec(),
        };
        STORE_ITEMS.put(&mut *self.tx, (&ns, key), &encode(&item)?)
    }

    /// Deletes an item; whether it was there.
    pub fn store_delete(&mut self, namespace: &[&str], key: &str) -> Result<bool> {
        let ns = join_namespace(namespace)?;
        self.require(Access::Write, &store_scope(namespace))?;
        STORE_ITEMS.delete(&mut *self.tx, (&ns, key))
    }

    /// The live item at `key`, its expiry moved to now + its TTL (LangGraph's
    /// `refresh_on_read`).
    pub fn store_get_refreshed(
        &mut self,
        namespace: &[&str],
        key: &str,
    ) -> Result<Option<StoreItem>> {
        let ns = join_namespace(namespace)?;
        self.require(Access::Read, &store_scope(namespace))?;
        let Some(v) = STORE_ITEMS.get(&*self.tx, (&ns, key))? else {
            return Ok(None);
        };
        let mut item = decode_item(&ns, key, &v)?;
        if item.expires_us.is_some_and(|e| e <= self.now) {
            return Ok(None);
        }
        if let Some(ttl) = item.ttl_us {
            item.expires_us = Some(self.now.saturating_add(ttl));
            STORE_ITEMS.put(&mut *self.tx, (&ns, key), &encode(&item)?)?;
        }
        Ok(Some(item))
    }

    /// Deletes every expired item the principal may write; how many.
    pub fn store_sweep(&mut self) -> Result<u64> {
        Ok(self.store_sweep_step(None, usize::MAX)?.0)
    }

    /// One bounded step of a sweep: looks at no more than `budget` items from `from` (a
    /// `(stored namespace, key)` a previous step returned; `None`: the first) and deletes the
    /// expired ones the principal may write. How many, and where the next step starts (`None`:
    /// the sweep is done).
    pub fn store_sweep_step(
        &mut self,
        from: Option<(&str, &str)>,
        budget: usize,
    ) -> Result<(u64, Option<(String, String)>)> {
        let (now, mut seen) = (self.now, 0);
        let (mut dead, mut next) = (Vec::new(), None);
        STORE_ITEMS.scan(
            &*self.tx,
            from.unwrap_or(("", ""))..,
            Dir::Forward,
            |(ns, key), v| {
                if seen == budget {
                    next = Some((ns.to_string(), key.to_string()));
                    return Ok(ControlFlow::Break(()));
                }
                seen += 1;
                if decode_item(&ns, key, v)?
                    .expires_us
                    .is_some_and(|e| e <= now)
                {
                    dead.push((ns.to_string(), key.to_string()));
                }
                Ok(ControlFlow::Continue(()))
            },
        )?;
        let mut writable = std::collections::HashMap::new();
        let mut deleted = 0;
        for (ns, key) in dead {
            let scope = store_scope(&[split(&ns).first().map_or("", String::as_str)]);
            let ok = match writable.get(&scope) {
                Some(&ok) => ok,
                None => {
                    let ok = self.may(Access::Write, &scope)?;
                    writable.insert(scope, ok);
                    ok
                }
            };
            if ok && STORE_ITEMS.delete(&mut *self.tx, (&ns, &key))? {
                deleted += 1;
            }
        }
        Ok((deleted, next))
    }
}

impl ReadTxn<'_> {
    /// The live item at `key`.
    pub fn store_get(&self, namespace: &[&str], key: &str) -> Result<Option<StoreItem>> {
        let ns = join_namespace(namespace)?;
        self.require(Access::Read, &store_scope(namespace))?;
        let Some(v) = STORE_ITEMS.get(self.tx, (&ns, key))? else {
            return Ok(None);
        };
        let item = decode_item(&ns, key, &v)?;
        Ok(item
            .expires_us
            .is_none_or(|e| e > crate::domain::text::now_us())
            .then_some(item))
    }

    /// The live items of `prefix` and the namespaces below it, in (namespace, key) order,
    /// skipping `offset` and returning at most `limit` (the host filters and ranks; it passes
    /// no limit when it does).
    pub fn store_items(
        &self,
        prefix: &[&str],
        offset: usize,
        limit: Option<usize>,
    ) -> Result<Vec<FoundItem>> {
        let p = join_namespace(prefix)?;
        if !prefix.is_empty() {
            self.require(Access::Read, &store_scope(prefix))?;
        }
        let (mut out, mut skipped) = (Vec::new(), 0);
        let limit = limit.unwrap_or(usize::MAX);
        scan_under(
            self.tx,
            &p,
            crate::domain::text::now_us(),
            |ns, key, item| {
                if out.len() >= limit {
                    return Ok(ControlFlow::Break(()));
                }
                let labels = split(ns);
                let first: Vec<&str> = labels.iter().take(1).map(String::as_str).collect();
                if prefix.is_empty() && !self.may(Access::Read, &store_scope(&first))? {
                    return Ok(ControlFlow::Continue(()));
                }
                if skipped < offset {
                    skipped += 1;
                    return Ok(ControlFlow::Continue(()));
                }
                out.push(FoundItem {
                    namespace: labels,
                    key: key.to_string(),
                    item,
                });
                Ok(ControlFlow::Continue(()))
            },
        )?;
        Ok(out)
    }

    /// Every namespace that holds a live item under `prefix`, in order (the host applies
    /// LangGraph's suffix, depth, limit and offset), found in one scan.
    pub fn store_namespaces(&self, prefix: &[&str]) -> Result<Vec<Vec<String>>> {
        let p = join_namespace(prefix)?;
        let mut out: Vec<Vec<String>> = Vec::new();
        let mut last: Option<String> = None;
        let now = crate::domain::text::now_us();
        scan_under(self.tx, &p, now, |ns, _, _| {
            if last.as_deref() != Some(ns) {
                last = Some(ns.to_string());
                let labels = split(ns);
                let first: Vec<&str> = labels.iter().take(1).map(String::as_str).collect();
                if self.may(Access::Read, &store_scope(&first))? {
                    out.push(labels);
                }
            }
            Ok(ControlFlow::Continue(()))
        })?;
        Ok(out)
    }
}
