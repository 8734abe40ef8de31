//! The Log page: ranked search over the scope's memories (the default when words are given),
//! or the memories newest first, a page at a time (recall's `before` cursor), matching a regex
//! with `mode=regex`; either filtered by kind and dates. The status and source filters narrow
//! the page the search or recall returned (neither has such a filter): a page may show fewer
//! than 50, and "Older" or "More" goes on.

use somna::text::{date_of, parse_time};
use somna::{Error, Kind, Memory, RecallQuery, SearchQuery};

use super::html::{esc, lines, link, scope_field};
use super::{Cx, Out};

/// Memories per page.
const PAGE: usize = 50;
/// The statuses a memory may have, as its line's first marker names them.
const STATUSES: [&str; 5] = [
    "proposed",
    "accepted",
    "superseded",
    "deprecated",
    "retracted",
];

/// A memory's effective status, read from its marked line (`#id date [proposed] text`; no
/// status marker is accepted).
pub fn status_of(m: &Memory, line: &str) -> &'static str {
    let prefix = format!("#{} {} [", m.id, date_of(m.observed_us));
    marked_status(line.strip_prefix(&prefix).unwrap_or_default())
}

/// The status a ranked hit's line names (`#id date [proposed] text`, or the summary's).
fn status_of_hit(line: &str) -> &'static str {
    let after = line.splitn(3, ' ').nth(2).unwrap_or_default();
    marked_status(after.strip_prefix('[').unwrap_or_default())
}

/// The status `first` (what follows a line's `[`) starts with; none is accepted.
fn marked_status(first: &str) -> &'static str {
    STATUSES
        .iter()
        .find(|s| first.starts_with(**s))
        .copied()
        .unwrap_or("accepted")
}

/// Whether hit `h` came from `source` (a summary comes from no one).
fn hit_from(cx: &Cx, h: &somna::Hit, source: &str) -> bool {
    h.id.and_then(|id| cx.store.show(&cx.scope, id).ok())
        .is_some_and(|(m, _)| m.source.as_deref() == Some(source))
}

/// `GET /ui/log?q=&mode=search|regex&kind=&since=&until=&before=&offset=`: words are ranked
/// (the default: a person types words), a regex is matched exactly (`mode=regex`, recall's);
/// without words, the log's newest memories.
pub fn page(cx: &Cx) -> Result<Out, Error> {
    let mut body = form(cx);
    if ranked(cx) && !cx.param("q").is_empty() {
        body.push_str(&search(cx)?);
    } else {
        body.push_str(&recall(cx)?);
    }
    Ok(Out::Page("Log".into(), body))
}

/// Whether the words are ranked (any mode but `regex`).
fn ranked(cx: &Cx) -> bool {
    cx.param("mode") != "regex"
}

/// The filter form, filled in with the request's values.
fn form(cx: &Cx) -> String {
    let search = ranked(cx);
    let kinds = options(
        cx,
        "kind",
        &["statement", "observation", "inference", "decision", "task"],
    );
    let statuses = options(cx, "status", &STATUSES);
    format!(
        "<form method=\"get\" action=\"/ui/log\" class=\"filters\">{}\
         <label for=\"q\">Find</label><input id=\"q\" name=\"q\" value=\"{}\">\
         <label for=\"mode\">As</label><select id=\"mode\" name=\"mode\">\
         <option value=\"search\"{}>words, best first</option><option value=\"regex\"{}>exact pattern (regex)</option></select>\
         <label for=\"kind\">Kind</label><select id=\"kind\" name=\"kind\">{kinds}</select>\
         <label for=\"status\">Status</label><select id=\"status\" name=\"status\">{statuses}</select>\
         <label for=\"source\">Source</label><input id=\"source\" name=\"source\" value=\"{}\">\
         <label for=\"since\">Since</label><input id=\"since\" name=\"since\" placeholder=\"YYYY-MM-DD\" value=\"{}\">\
         <label for=\"until\">Until</label><input id=\"until\" name=\"until\" placeholder=\"YYYY-MM-DD\" value=\"{}\">\
         <span></span><button type=\"submit\">Show</button></form>",
        scope_field(cx),
        esc(cx.param("q")),
        if search { " selected" } else { "" },
        if search { "" } else { " selected" },
        esc(cx.param("source")),
        esc(cx.param("since")),
        esc(cx.param("until")),
    )
}

/// A select's options: any, then `values`, the request's one selected.
fn options(cx: &Cx, name: &str, values: &[&str]) -> String {
    let mut out = String::from("<option value=\"\">any</option>");
    for v in values {
        let sel = if cx.param(name) == *v {
            " selected"
        } else {
            ""
        };
        out.push_str(&format!("<option{sel}>{v}</option>"));
    }
    out
}

/// An optional parameter parsed by `f`.
fn opt<T>(cx: &Cx, name: &str, f: impl Fn(&str) -> Result<T, Error>) -> Result<Option<T>, Error> {
    match cx.param(name) {
        "" => Ok(None),
        v => f(v).map(Some),
    }
}

/// One page of recall, with a link to the older ones.
fn recall(cx: &Cx) -> Result<String, Error> {
    let mut q = RecallQuery::new(match cx.param("q") {
        "" => ".",
        q => q,
    });
    q.limit = Some(PAGE);
    q.kind = opt(cx, "kind", |k| k.parse::<Kind>())?;
    q.since_us = opt(cx, "since", parse_time)?;
    q.until_us = opt(cx, "until", parse_time)?;
    q.before = opt(cx, "before", |b| {
        b.parse::<u64>()
            .map_err(|e| super::bad("before", e.to_string()))
    })?;
    // A page costs the page, not the log (10^6 memories): no count of every match.
    q.count_all = false;
    let r = cx.store.recall(&cx.scope, &q)?;
    let (status, source) = (cx.param("status"), cx.param("source"));
    let mut shown: Vec<String> = r
        .matches
        .iter()
        .zip(r.shown_lines())
        .filter(|(m, l)| status.is_empty() || status_of(m, l) == status)
        .filter(|(m, _)| source.is_empty() || m.source.as_deref() == Some(source))
        .map(|(_, l)| l)
        .collect();
    shown.reverse();
    let mut out = format!("<p>Matches, newest first.</p>{}", lines(&shown));
    if let Some(b) = r.next_before {
        let mut more: Vec<(&str, &str)> = ["q", "kind", "status", "source", "since", "until"]
            .iter()
            .map(|k| (*k, cx.param(k)))
            .collect();
        let before = b.to_string();
        more.push(("before", &before));
        out.push_str(&format!(
            "<p><a href=\"{}\">Older</a></p>",
            esc(&link(cx, "/ui/log", &more))
        ));
    }
    Ok(out)
}

/// One page of ranked search, with a link to the next.
fn search(cx: &Cx) -> Result<String, Error> {
    let mut q = SearchQuery::new(cx.param("q"));
    q.limit = PAGE;
    q.offset = cx.param("offset").parse().unwrap_or(0);
    q.kind = opt(cx, "kind", |k| k.parse::<Kind>())?;
    q.since_us = opt(cx, "since", parse_time)?;
    q.until_us = opt(cx, "until", parse_time)?;
    let r = cx.store.search(&cx.scope, &q)?;
    let (status, source) = (cx.param("status"), cx.param("source"));
    let shown: Vec<String> = r
        .hits
        .iter()
        .filter(|h| status.is_empty() || status_of_hit(&h.line) == status)
        .filter(|h| source.is_empty() || hit_from(cx, h, source))
        .map(|h| format!("{:.2}  {}", h.score, h.line))
        .collect();
    let mut out = format!(
        "<p>{} candidates, best first.</p>{}",
        r.candidates,
        lines(&shown)
    );
    if let Some(o) = r.next_offset {
        let o = o.to_string();
        let mut more: Vec<(&str, &str)> = ["q", "kind", "status", "source", "since", "until"]
            .iter()
            .map(|k| (*k, cx.param(k)))
            .collect();
        more.push(("mode", "search"));
        more.push(("offset", o.as_str()));
        out.push_str(&format!(
            "<p><a href=\"{}\">More</a></p>",
            esc(&link(cx, "/ui/log", &more))
        ));
    }
    Ok(out)
}
