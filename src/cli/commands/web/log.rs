//! The Log page: the scope's memories newest first, a page at a time (recall's `before`
//! cursor), filtered by kind and dates and by a regex, or ranked search over them. The status
//! and source filters narrow the page recall returned (recall has no such filter): a page may
//! show fewer than 50, and "Older" goes on.

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
    let first = line.strip_prefix(&prefix).unwrap_or_default();
    STATUSES
        .iter()
        .find(|s| first.starts_with(**s))
        .copied()
        .unwrap_or("accepted")
}

/// `GET /ui/log?q=&mode=regex|search&kind=&since=&until=&before=&offset=`.
pub fn page(cx: &Cx) -> Result<Out, Error> {
    let mut body = form(cx);
    if cx.param("mode") == "search" && !cx.param("q").is_empty() {
        body.push_str(&search(cx)?);
    } else {
        body.push_str(&recall(cx)?);
    }
    Ok(Out::Page("Log".into(), body))
}

/// The filter form, filled in with the request's values.
fn form(cx: &Cx) -> String {
    let search = cx.param("mode") == "search";
    let kinds = options(
        cx,
        "kind",
        &["statement", "observation", "inference", "decision", "task"],
    );
    let statuses = options(cx, "status", &STATUSES);
    format!(
        "<form method=\"get\" action=\"/ui/log\">{}\
         <label for=\"q\">Find</label><input id=\"q\" name=\"q\" value=\"{}\">\
         <label for=\"mode\">as</label><select id=\"mode\" name=\"mode\">\
         <option value=\"regex\"{}>regex (recall)</option><option value=\"search\"{}>ranked search</option></select>\
         <label for=\"kind\">Kind</label><select id=\"kind\" name=\"kind\">{kinds}</select>\
         <label for=\"status\">Status</label><select id=\"status\" name=\"status\">{statuses}</select>\
         <label for=\"source\">Source</label><input id=\"source\" name=\"source\" value=\"{}\">\
         <label for=\"since\">Since</label><input id=\"since\" name=\"since\" placeholder=\"YYYY-MM-DD\" value=\"{}\">\
         <label for=\"until\">Until</label><input id=\"until\" name=\"until\" placeholder=\"YYYY-MM-DD\" value=\"{}\">\
         <button type=\"submit\">Show</button></form>",
        scope_field(cx),
        esc(cx.param("q")),
        if search { "" } else { " selected" },
        if search { " selected" } else { "" },
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
    let r = cx.store.search(&cx.scope, &q)?;
    let shown: Vec<String> = r
        .hits
        .iter()
        .map(|h| format!("{:.2}  {}", h.score, h.line))
        .collect();
    let mut out = format!(
        "<p>{} candidates, best first.</p>{}",
        r.candidates,
        lines(&shown)
    );
    if let Some(o) = r.next_offset {
        let o = o.to_string();
        let more = [
            ("q", cx.param("q")),
            ("mode", "search"),
            ("offset", o.as_str()),
        ];
        out.push_str(&format!(
            "<p><a href=\"{}\">More</a></p>",
            esc(&link(cx, "/ui/log", &more))
        ));
    }
    Ok(out)
}
