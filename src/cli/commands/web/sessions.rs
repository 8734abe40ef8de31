//! The Sessions page: the conversation histories the principal may read, and one of them with
//! its messages and what saves archived.

use somna::text::date_of;
use somna::Error;

use super::html::{esc, lines, link};
use super::{bad, Cx, Out};

/// Sessions per page, and messages shown of one.
const PAGE: usize = 100;

/// `GET /ui/sessions?after=ID`.
pub fn page(cx: &Cx) -> Result<Out, Error> {
    let after = Some(cx.param("after")).filter(|a| !a.is_empty());
    let list = cx.store.session_list("", after, Some(PAGE))?;
    let mut body = String::from(
        "<table><thead><tr><th scope=\"col\">Session</th><th scope=\"col\">Messages</th>\
         <th scope=\"col\">Updated</th></tr></thead><tbody>",
    );
    for s in &list {
        let href = link(cx, "/ui/session", &[("id", &s.id)]);
        body.push_str(&format!(
            "<tr><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}</td></tr>",
            esc(&href),
            esc(&s.id),
            s.count,
            esc(&date_of(s.updated_us))
        ));
    }
    body.push_str("</tbody></table>");
    if let (true, Some(last)) = (list.len() == PAGE, list.last()) {
        let href = link(cx, "/ui/sessions", &[("after", &last.id)]);
        body.push_str(&format!("<p><a href=\"{}\">Next</a></p>", esc(&href)));
    }
    Ok(Out::Page("Sessions".into(), body))
}

/// `GET /ui/session?id=ID`: its newest messages, then its archive.
pub fn one(cx: &Cx) -> Result<Out, Error> {
    let id = cx.param("id");
    if id.is_empty() {
        return Err(bad("id", "name a session"));
    }
    let items = cx.store.session_items_lossy(id, Some(PAGE))?;
    let archived = cx.store.session_archived_newest(id, PAGE)?;
    let old: Vec<String> = archived
        .iter()
        .rev()
        .map(|a| format!("{} {}", date_of(a.archived_us), a.message))
        .collect();
    let body = format!(
        "<h2>Messages (the newest {PAGE})</h2>{}<h2>Archived (the newest {PAGE})</h2>{}",
        lines(&items.items),
        lines(&old)
    );
    Ok(Out::Page(format!("Session {id}"), body))
}
