//! The `completions` capability: `completion/complete` suggests the values of the arguments of
//! the prompts (`wake` and `merge`: `scope`) and of the resource templates (`scope`, a memory's
//! `id`, a block's `lo` and `hi`, a session's `id`) that start with what the user typed, at most
//! [`CompletionInfo::MAX_VALUES`] (with `hasMore` when there are more). Only what the caller may
//! read is suggested: the scopes it may read (and the server's), ids and blocks of such a scope
//! (the one in the request's context, else the server's), the sessions it may list. A block is
//! aligned (`lo` a multiple of its size, a power of two from 2) and whole (`hi` below the
//! scope's count); ids and blocks come newest first.

use std::collections::BTreeSet;

use rmcp::model::{CompleteRequestParams, CompletionInfo, Reference};

use super::{Caller, Server};

/// Suggestions, made as they are taken (a scope may hold millions of ids).
type Values = Box<dyn Iterator<Item = String>>;

/// The values for one `completion/complete` request.
pub fn complete(server: &Server, caller: &Caller, r: &CompleteRequestParams) -> CompletionInfo {
    let typed = r.argument.value.as_str();
    let context = |name: &str| {
        r.context
            .as_ref()
            .and_then(|c| c.arguments.as_ref())
            .and_then(|a| a.get(name))
            .cloned()
    };
    let scope = context("scope").unwrap_or_else(|| server.scope.clone());
    let values: Values = match (&r.r#ref, r.argument.name.as_str()) {
        (Reference::Prompt(p), "scope") if p.name == "wake" || p.name == "merge" => {
            Box::new(scopes(server, caller).into_iter())
        }
        (Reference::Resource(t), arg) => match (t.uri.as_str(), arg) {
            ("engram://session/{id}", "id") => {
                Box::new(sessions(server, caller, typed).into_iter())
            }
            (_, "scope") if t.uri.starts_with("engram://{scope}/") => {
                Box::new(scopes(server, caller).into_iter())
            }
            ("engram://{scope}/memory/{id}", "id") => ids(count(server, caller, &scope)),
            ("engram://{scope}/block/{lo}-{hi}", "lo") => los(count(server, caller, &scope)),
            ("engram://{scope}/block/{lo}-{hi}", "hi") => {
                let lo = context("lo").and_then(|l| l.parse().ok());
                his(count(server, caller, &scope), lo)
            }
            _ => Box::new(std::iter::empty()),
        },
        _ => Box::new(std::iter::empty()),
    };
    let mut matching: Vec<String> = values
        .filter(|v| v.starts_with(typed))
        .take(CompletionInfo::MAX_VALUES + 1)
        .collect();
    let more = matching.len() > CompletionInfo::MAX_VALUES;
    matching.truncate(CompletionInfo::MAX_VALUES);
    CompletionInfo::with_pagination(matching, None, more).unwrap_or_default()
}

/// The server's scope and every scope the caller may read.
fn scopes(server: &Server, caller: &Caller) -> Vec<String> {
    let mut all = BTreeSet::from([server.scope.clone()]);
    if let Ok(store) = server.store() {
        let store = store.as_principal(caller.0.as_deref());
        if let Ok(readable) = store.read(|r| r.scopes()) {
            all.extend(readable);
        }
    }
    all.into_iter().collect()
}

/// The ids of the caller's sessions that start with `typed`.
fn sessions(server: &Server, caller: &Caller, typed: &str) -> Vec<String> {
    let Ok(store) = server.store() else {
        return Vec::new();
    };
    let store = store.as_principal(caller.0.as_deref());
    let listed = store.session_list(typed, None, Some(CompletionInfo::MAX_VALUES + 1));
    listed
        .map(|l| l.into_iter().map(|s| s.id).collect())
        .unwrap_or_default()
}

/// How many memories `scope` holds, 0 when the caller may not read it.
fn count(server: &Server, caller: &Caller, scope: &str) -> u64 {
    let Ok(store) = server.store() else {
        return 0;
    };
    let store = store.as_principal(caller.0.as_deref());
    store.read(|r| r.count(scope)).unwrap_or(0)
}

/// Memory ids, newest first.
fn ids(count: u64) -> Values {
    Box::new((0..count).rev().map(|i| i.to_string()))
}

/// The `lo` of every whole aligned block, newest first: the even ids with a successor.
fn los(count: u64) -> Values {
    let ids = (0..count.saturating_sub(1)).rev();
    Box::new(ids.filter(|i| i % 2 == 0).map(|i| i.to_string()))
}

/// The `hi` of the whole aligned blocks starting at `lo` (every odd id below the count when
/// `lo` is not known), newest first.
fn his(count: u64, lo: Option<u64>) -> Values {
    let Some(lo) = lo else {
        return Box::new(
            (0..count)
                .rev()
                .filter(|i| i % 2 == 1)
                .map(|i| i.to_string()),
        );
    };
    let mut out = Vec::new();
    let mut size: u64 = 2;
    while lo % size == 0 && lo.checked_add(size).is_some_and(|end| end <= count) {
        out.push((lo + size - 1).to_string());
        match size.checked_mul(2) {
            Some(s) => size = s,
            None => break,
        }
    }
    out.reverse();
    Box::new(out.into_iter())
}
