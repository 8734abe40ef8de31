//! The Review page and its actions: accept or reject (retract) a memory with a reason,
//! deprecate it, supersede it with a new memory, redact it, forget a block's summary. Each
//! action is the library's lifecycle call the CLI makes (`accept`, `retract`, `deprecate`,
//! `note --supersedes`, `redact`, `forget`), on the store acting as the session's principal,
//! so the event names that principal. Redacting and forgetting first show a confirmation that
//! names what will be purged.

use somna::{Block, Decision, Error, NewMemory, RecallQuery};

use super::html::{esc, hidden, link};
use super::{bad, Cx, Out};

/// Memories per page.
const PAGE: usize = 50;

/// `GET /ui/review?proposed=1&before=N`: the newest memories with their markers and actions.
pub fn page(cx: &Cx) -> Result<Out, Error> {
    let mut q = RecallQuery::new(".");
    q.limit = Some(PAGE);
    q.before = cx.param("before").parse().ok();
    // A page costs the page, not the log (10^6 memories).
    q.count_all = false;
    let r = cx.store.recall(&cx.scope, &q)?;
    let only_proposed = cx.param("proposed") == "1";
    let mut body = notice(cx);
    let filter = if only_proposed {
        format!(
            "<p><a href=\"{}\">Show all</a></p>",
            esc(&link(cx, "/ui/review", &[]))
        )
    } else {
        let href = link(cx, "/ui/review", &[("proposed", "1")]);
        format!("<p><a href=\"{}\">Only proposed</a></p>", esc(&href))
    };
    body.push_str(&filter);
    body.push_str("<table><thead><tr><th scope=\"col\">Memory</th><th scope=\"col\">Actions</th></tr></thead><tbody>");
    let shown = r.shown_lines();
    for (m, line) in r.matches.iter().zip(&shown).rev() {
        if only_proposed && super::log::status_of(m, line) != "proposed" {
            continue;
        }
        body.push_str(&row(cx, m.id, line));
    }
    body.push_str("</tbody></table>");
    if let Some(b) = r.next_before {
        let b = b.to_string();
        let href = link(
            cx,
            "/ui/review",
            &[("proposed", cx.param("proposed")), ("before", &b)],
        );
        body.push_str(&format!("<p><a href=\"{}\">Older</a></p>", esc(&href)));
    }
    Ok(Out::Page("Review".into(), body))
}

/// What the last action did (`?done=`), escaped.
fn notice(cx: &Cx) -> String {
    match cx.param("done") {
        "" => String::new(),
        d => format!("<p role=\"status\">{}</p>", esc(d)),
    }
}

/// One memory's row: its line, the decide form, the supersede form, the redact link.
fn row(cx: &Cx, id: u64, line: &str) -> String {
    let redact = link(cx, "/ui/confirm", &[("id", &id.to_string())]);
    format!(
        "<tr><td class=\"text\">{}</td><td>\
         <form method=\"post\" action=\"/ui/decide\">{h}<input type=\"hidden\" name=\"id\" value=\"{id}\">\
         <label for=\"why{id}\">Reason</label><input id=\"why{id}\" name=\"why\">\
         <button name=\"decision\" value=\"accept\">Accept</button>\
         <button name=\"decision\" value=\"retract\">Reject</button>\
         <button name=\"decision\" value=\"deprecate\">Deprecate</button></form>\
         <form method=\"post\" action=\"/ui/supersede\">{h}<input type=\"hidden\" name=\"id\" value=\"{id}\">\
         <label for=\"new{id}\">Superseding text</label><input id=\"new{id}\" name=\"text\" required>\
         <button>Supersede</button></form>\
         <a href=\"{}\">Redact #{id}…</a></td></tr>",
        esc(line),
        esc(&redact),
        h = hidden(cx),
    )
}

/// The `id` parameter.
fn id(cx: &Cx) -> Result<u64, Error> {
    cx.param("id")
        .parse()
        .map_err(|_| bad("id", "a memory id is a number"))
}

/// After an action: back to the review page with a notice.
fn back(cx: &Cx, done: &str) -> Out {
    Out::SeeOther(link(cx, "/ui/review", &[("done", done)]))
}

/// `POST /ui/decide`: accept, retract or deprecate, with the reason.
pub fn decide(cx: &Cx) -> Result<Out, Error> {
    let id = id(cx)?;
    let (d, word) = match cx.param("decision") {
        "accept" => (Decision::Accept, "accepted"),
        "retract" => (Decision::Retract, "rejected (retracted)"),
        "deprecate" => (Decision::Deprecate, "deprecated"),
        other => return Err(bad("decision", format!("no decision {other:?}"))),
    };
    let why = Some(cx.param("why")).filter(|w| !w.is_empty());
    cx.store.decide(&cx.scope, id, d, why)?;
    Ok(back(cx, &format!("#{id} is {word}.")))
}

/// `POST /ui/supersede`: a new memory that supersedes the one named.
pub fn supersede(cx: &Cx) -> Result<Out, Error> {
    let id = id(cx)?;
    let new = cx.store.note(
        &cx.scope,
        NewMemory::new(cx.param("text")).supersedes(vec![id]),
    )?;
    Ok(back(cx, &format!("#{new} supersedes #{id}.")))
}

/// `GET /ui/confirm?id=N` or `?block=LO-HI`: what redacting or forgetting will purge.
pub fn confirm(cx: &Cx) -> Result<Out, Error> {
    let (action, field, value, what) = if cx.param("block").is_empty() {
        let id = id(cx)?;
        let (m, _) = cx.store.show(&cx.scope, id)?;
        let what = format!(
            "Redacting #{id} replaces its text by a tombstone everywhere (the log, wake, search, \
             export) and drops the summaries built on it. The text that will be purged: {}",
            m.text
        );
        ("/ui/redact", "id", id.to_string(), what)
    } else {
        let b: Block = cx
            .param("block")
            .parse()
            .map_err(|e| bad("block", format!("{e}")))?;
        let what = format!(
            "Forgetting {b} drops its summary and the summaries of every block built on it; they \
             become pending merges. The log is untouched."
        );
        ("/ui/forget", "block", b.to_string(), what)
    };
    let reason = if action == "/ui/redact" {
        "<label for=\"reason\">Reason</label><input id=\"reason\" name=\"reason\" required>"
    } else {
        ""
    };
    let body = format!(
        "<p>{}</p><form method=\"post\" action=\"{action}\">{}<input type=\"hidden\" name=\"{field}\" value=\"{}\">\
         {reason}<button type=\"submit\">Confirm</button></form>",
        esc(&what),
        hidden(cx),
        esc(&value)
    );
    Ok(Out::Page("Confirm".into(), body))
}

/// `POST /ui/redact`: redacts the memory, with the reason.
pub fn redact(cx: &Cx) -> Result<Out, Error> {
    let id = id(cx)?;
    cx.store.redact(&cx.scope, id, cx.param("reason"))?;
    Ok(back(cx, &format!("#{id} is redacted.")))
}

/// `POST /ui/forget`: drops a block's summary and its ancestors'.
pub fn forget(cx: &Cx) -> Result<Out, Error> {
    let b: Block = cx
        .param("block")
        .parse()
        .map_err(|e| bad("block", format!("{e}")))?;
    let dropped = cx.store.forget(&cx.scope, b)?;
    let names: Vec<String> = dropped.iter().map(ToString::to_string).collect();
    Ok(back(cx, &format!("Forgot {}.", names.join(", "))))
}
