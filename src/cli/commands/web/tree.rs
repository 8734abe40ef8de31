//! The Tree page (a picture of wake's cover against the log: positions across, levels down,
//! summarized blocks, raw memories, and the pending merges), and the block pages it links to:
//! zoom (a block's summary and what is under it) and why (a summary's claims with the records
//! each cites).

use somna::{Block, Error, Hints, WakeItem, WakeOptions, ZoomEntry};

use super::html::{esc, lines, link};
use super::{Cx, Out};

/// The picture's width in user units.
const WIDTH: f64 = 1000.0;
/// The height of one level's row.
const ROW: f64 = 16.0;
/// The most pending blocks listed.
const PENDING_SHOWN: usize = 64;

/// `GET /ui/tree`.
pub fn page(cx: &Cx) -> Result<Out, Error> {
    let w = WakeOptions {
        hints: Hints::Off,
        ..WakeOptions::default()
    };
    let view = cx.store.wake(&cx.scope, &w)?;
    let pending = cx.store.pending(&cx.scope, Some(PENDING_SHOWN))?;
    let blocks: Vec<(Block, &'static str)> = view
        .items
        .iter()
        .map(|i| match i {
            WakeItem::Memory(m) => (Block::single(m.id), "memory"),
            WakeItem::Summary { block, .. } => (*block, "summary"),
        })
        .chain(pending.iter().map(|b| (*b, "pending")))
        .collect();
    let mut body = format!(
        "<p>{} memories; wake's cover has {} lines ({} left out); {} merges pending.</p>",
        view.total,
        view.items.len(),
        view.omitted,
        view.pending
    );
    body.push_str(&picture(cx, view.total, &blocks));
    body.push_str("<h2>Pending merges</h2><ul>");
    for b in &pending {
        let href = link(cx, "/ui/zoom", &[("block", &b.to_string())]);
        body.push_str(&format!(
            "<li><a href=\"{}\">{}</a></li>",
            esc(&href),
            esc(&b.to_string())
        ));
    }
    body.push_str("</ul>");
    Ok(Out::Page("Tree".into(), body))
}

/// An SVG of the blocks: x is the position in the log, y the level (the largest at the top);
/// each summarized or pending block links to its zoom.
fn picture(cx: &Cx, total: u64, blocks: &[(Block, &str)]) -> String {
    let top = blocks.iter().map(|(b, _)| b.level()).max().unwrap_or(0);
    let scale = WIDTH / (total.max(1) as f64);
    let height = (f64::from(top) + 2.0) * ROW;
    let mut svg = format!(
        "<svg role=\"group\" aria-labelledby=\"tree-title\" viewBox=\"0 0 {WIDTH} {height}\" width=\"100%\">\
         <title id=\"tree-title\">Wake's cover and the pending merges, by position and level</title>"
    );
    for (b, class) in blocks {
        let x = b.lo() as f64 * scale;
        let y = f64::from(top - b.level()) * ROW;
        let w = (b.size() as f64 * scale).max(1.0);
        let rect = format!(
            "<rect class=\"{class}\" x=\"{x:.2}\" y=\"{y:.2}\" width=\"{w:.2}\" height=\"{}\"><title>{} ({class})</title></rect>",
            ROW - 2.0,
            esc(&b.to_string())
        );
        if b.size() > 1 {
            let href = link(cx, "/ui/zoom", &[("block", &b.to_string())]);
            svg.push_str(&format!(
                "<a href=\"{}\" aria-label=\"zoom {} ({class})\">{rect}</a>",
                esc(&href),
                esc(&b.to_string())
            ));
        } else {
            svg.push_str(&rect);
        }
    }
    svg.push_str("</svg><p>Blue: summarized blocks in wake's cover; green: raw memories; orange: pending merges.</p>");
    svg
}

/// The `block` parameter.
fn block(cx: &Cx) -> Result<Block, Error> {
    cx.param("block")
        .parse::<Block>()
        .map_err(|e| super::bad("block", e.to_string()))
}

/// `GET /ui/zoom?block=LO-HI`: the block's two halves, each summarized or pending half a link
/// to its own zoom (down the tree), and the block that holds this one (up the tree) when the
/// log reaches its end.
pub fn zoom(cx: &Cx) -> Result<Out, Error> {
    let b = block(cx)?;
    let (entries, ls) = cx.store.zoom_with_lines(&cx.scope, b)?;
    let mut body = String::from("<ul class=\"lines\">");
    for (e, line) in entries.iter().zip(&ls) {
        let half = match e {
            ZoomEntry::Summary { block, .. } | ZoomEntry::Missing { block } => Some(*block),
            ZoomEntry::Memory(_) => None,
        };
        match half.filter(|h| h.size() > 1) {
            Some(h) => body.push_str(&format!(
                "<li><a href=\"{}\">{}</a></li>",
                esc(&zoom_link(cx, h)),
                esc(line)
            )),
            None => body.push_str(&format!("<li>{}</li>", esc(line))),
        }
    }
    body.push_str("</ul><nav aria-label=\"tree\"><ul>");
    let count = cx.store.read(|r| r.count(&cx.scope))?;
    if let Some(up) = b.parent().filter(|p| p.hi() <= count) {
        body.push_str(&format!(
            "<li><a href=\"{}\">Up: the block {up} that holds this one</a></li>",
            esc(&zoom_link(cx, up))
        ));
    }
    let tree = link(cx, "/ui/tree", &[]);
    let why = link(cx, "/ui/why", &[("block", &b.to_string())]);
    let forget = link(cx, "/ui/confirm", &[("block", &b.to_string())]);
    body.push_str(&format!(
        "<li><a href=\"{}\">The whole tree</a></li>\
         <li><a href=\"{}\">Why: the claims of this block's summary and what they cite</a></li>\
         <li><a href=\"{}\">Forget {b}…</a></li></ul></nav>",
        esc(&tree),
        esc(&why),
        esc(&forget)
    ));
    Ok(Out::Page(format!("Zoom {b}"), body))
}

/// The zoom page of block `b`.
fn zoom_link(cx: &Cx, b: Block) -> String {
    link(cx, "/ui/zoom", &[("block", &b.to_string())])
}

/// `GET /ui/why?block=LO-HI`: the summary's claims with the records each cites.
pub fn why(cx: &Cx) -> Result<Out, Error> {
    let b = block(cx)?;
    let w = cx.store.why(&cx.scope, b)?;
    let ls: Vec<String> = w.render().lines().map(str::to_string).collect();
    Ok(Out::Page(format!("Why {b}"), lines(&ls)))
}
