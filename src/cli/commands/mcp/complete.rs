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
            ("somna://session/{id}", "id") => Box::new(sessions(server, caller, typed).into_iter()),
            (_, "scope") if t.uri.starts_with("somna://{scope}/") => {
                Box::new(scopes(server, caller).into_iter())
            }
            ("somna://{scope}/memory/{id}", "id") => ids(count(server, caller, &scope), typed),
            ("somna://{scope}/block/{lo}-{hi}", "lo") => los(count(server, caller, &scope), typed),
            ("somna://{scope}/block/{lo}-{hi}", "hi") => {
                let lo = context("lo").and_then(|l| l.parse().ok());
                his(count(server, caller, &scope), lo, typed)
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

/// The ids below `count` whose decimal form starts with `typed`, largest first, made from the
/// prefix (each length's range in turn), so that a completion costs what it returns, not the
/// scope's size: a prefix that is not a number without leading zeros gives nothing.
fn with_prefix(count: u64, typed: &str) -> Box<dyn Iterator<Item = u64> + Send> {
    if typed.is_empty() {
        return Box::new((0..count).rev());
    }
    let canonical =
        typed.bytes().all(|b| b.is_ascii_digit()) && !(typed.len() > 1 && typed.starts_with('0'));
    let Some(p) = typed.parse::<u64>().ok().filter(|_| canonical) else {
        return Box::new(std::iter::empty());
    };
    let mut ranges = Vec::new();
    let mut scale: u64 = 1;
    while let Some(lo) = p.checked_mul(scale).filter(|lo| *lo < count) {
        let hi = p
            .checked_add(1)
            .and_then(|q| q.checked_mul(scale))
            .map_or(count, |h| h.min(count));
        if p != 0 || scale == 1 {
            ranges.push(lo..hi); // "0" is only 0 itself
        }
        let Some(next) = scale.checked_mul(10) else {
            break;
        };
        scale = next;
    }
    Box::new(ranges.into_iter().rev().flat_map(|r| r.rev()))
}

/// Memory ids starting with `typed`, newest first.
fn ids(count: u64, typed: &str) -> Values {
    Box::new(with_prefix(count, typed).map(|i| i.to_string()))
}

/// The `lo` of every whole aligned block starting with `typed`, newest first: the even ids with
/// a successor.
fn los(count: u64, typed: &str) -> Values {
    let ids = with_prefix(count, typed).filter(move |i| i % 2 == 0 && i + 1 < count);
    Box::new(ids.map(|i| i.to_string()))
}

/// The `hi` of the whole aligned blocks starting at `lo` (every odd id below the count when
/// `lo` is not known), newest first.
fn his(count: u64, lo: Option<u64>, typed: &str) -> Values {
    let Some(lo) = lo else {
        let odd = with_prefix(count, typed).filter(|i| i % 2 == 1);
        return Box::new(odd.map(|i| i.to_string()));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixes_give_the_matching_ids_largest_first_without_a_scan() {
        let all = |c, t| with_prefix(c, t).collect::<Vec<u64>>();
        assert_eq!(all(25, "2"), [24, 23, 22, 21, 20, 2]);
        assert_eq!(all(3, ""), [2, 1, 0]);
        assert_eq!(all(100, "0"), [0]);
        assert!(all(100, "05").is_empty() && all(100, "x").is_empty() && all(0, "1").is_empty());
        assert_eq!(
            all(u64::MAX, "18446744073709551614"),
            [18446744073709551614]
        );
        // A scope of 10^12 ids: the first values come at once, whatever the prefix.
        let big: Vec<u64> = with_prefix(1_000_000_000_000, "7").take(3).collect();
        assert_eq!(big, [799_999_999_999, 799_999_999_998, 799_999_999_997]);
        // Every id below a count, for every prefix, is exactly what a scan finds.
        for count in [0u64, 1, 9, 10, 11, 99, 100, 101, 1234] {
            for typed in ["", "0", "1", "12", "9", "10", "123"] {
                let scan: Vec<u64> = (0..count)
                    .rev()
                    .filter(|i| i.to_string().starts_with(typed))
                    .collect();
                let mut got = all(count, typed);
                let mut want = scan.clone();
                got.sort_unstable();
                want.sort_unstable();
                assert_eq!(got, want, "{count} {typed}");
            }
        }
    }
}
