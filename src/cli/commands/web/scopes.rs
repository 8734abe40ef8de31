//! The Scopes page: what each scope the principal may read holds (memories, summaries, merges
//! pending), when its newest memory was recorded, and how many of its newest memories are
//! proposed and wait for a person's review, each scope a link to its pages.

use somna::text::rfc3339_of;
use somna::{Error, RecallQuery};

use super::html::{esc, link_in};
use super::{Cx, Out};

/// The newest memories of a scope read for its proposed count: the page costs at most this
/// many reads a scope, not the log (10^6 memories).
const NEWEST: usize = 1000;

/// Scopes a page shows: with [`NEWEST`], a page reads at most 50,000 memories, whatever the
/// number of scopes.
const PAGE: usize = 50;

/// `GET /ui/scopes?offset=N`: the scopes from the N-th, [`PAGE`] of them.
pub fn page(cx: &Cx) -> Result<Out, Error> {
    let stats = cx.store.read(|r| r.stats())?;
    let offset: usize = cx.param("offset").parse().unwrap_or(0);
    let mut body = format!(
        "<p>{} you may read. Proposed memories are counted among each scope's newest 1,000.</p>",
        match stats.len() {
            1 => "One scope".to_string(),
            n => format!("{n} scopes"),
        }
    );
    body.push_str(
        "<table><thead><tr><th scope=\"col\">Scope</th><th scope=\"col\">Memories</th>\
         <th scope=\"col\">Summaries</th><th scope=\"col\">Merges pending</th>\
         <th scope=\"col\">Newest memory recorded</th><th scope=\"col\">Proposed, to review</th>\
         </tr></thead><tbody>",
    );
    for s in stats.iter().skip(offset).take(PAGE) {
        let (newest, proposed) = newest_and_proposed(cx, &s.scope)?;
        let at = |path: &str, more: &[(&str, &str)]| link_in(&s.scope, path, more);
        let review = if proposed == 0 {
            "0".to_string()
        } else {
            format!(
                "<a href=\"{}\">{proposed}</a>",
                esc(&at("/ui/review", &[("proposed", "1")]))
            )
        };
        body.push_str(&format!(
            "<tr><th scope=\"row\"><a href=\"{}\">{}</a></th><td>{}</td><td>{}</td>\
             <td><a href=\"{}\">{}</a></td><td>{}</td><td>{review}</td></tr>",
            esc(&at("/ui/wake", &[])),
            esc(&s.scope),
            s.memories,
            s.summaries,
            esc(&at("/ui/tree", &[])),
            s.pending,
            esc(&newest.map(rfc3339_of).unwrap_or_else(|| "none".into())),
        ));
    }
    body.push_str("</tbody></table>");
    let next = offset.saturating_add(PAGE);
    if next < stats.len() {
        let href = link_in(&cx.scope, "/ui/scopes", &[("offset", &next.to_string())]);
        body.push_str(&format!(
            "<p><a href=\"{}\">More scopes</a></p>",
            esc(&href)
        ));
    }
    Ok(Out::Page("Scopes".into(), body))
}

/// When the scope's newest memory was recorded, and how many of its newest [`NEWEST`] memories
/// are proposed.
fn newest_and_proposed(cx: &Cx, scope: &str) -> Result<(Option<i64>, usize), Error> {
    let mut q = RecallQuery::new(".");
    q.limit = Some(NEWEST);
    // The lines are counted, never shown: no byte budget binds.
    q.max_bytes = 1 << 30;
    q.count_all = false;
    let r = cx.store.recall(scope, &q)?;
    let newest = r.matches.last().map(|m| m.recorded_us);
    let proposed = r
        .matches
        .iter()
        .zip(r.shown_lines())
        .filter(|(m, line)| super::log::status_of(m, line) == "proposed")
        .count();
    Ok((newest, proposed))
}
