//! The Wake page: exactly the text an agent gets from `somna wake` at start-up, within the
//! budget shown (lines of memory, and bytes when set), without the next-step commands.

use somna::{Error, Hints, WakeOptions};

use super::html::{esc, scope_field};
use super::{Cx, Out};

/// `GET /ui/wake?lines=N&bytes=N`.
pub fn page(cx: &Cx) -> Result<Out, Error> {
    let lines = cx.param("lines").parse::<usize>().ok();
    let bytes = cx.param("bytes").parse::<usize>().ok();
    let w = WakeOptions {
        lines,
        bytes,
        hints: Hints::Off,
        ..WakeOptions::default()
    };
    let text = cx.store.wake_text(&cx.scope, &w)?;
    let budget = match (lines, bytes) {
        (None, None) => "the default budget (96 lines of memory)".to_string(),
        (l, b) => format!(
            "a budget of {} lines{}",
            l.map_or_else(|| "96".to_string(), |n| n.to_string()),
            b.map(|n| format!(" and {n} bytes")).unwrap_or_default()
        ),
    };
    let form = format!(
        "<form method=\"get\" action=\"/ui/wake\" class=\"inline\">{}\
         <label for=\"lines\">Lines</label><input id=\"lines\" name=\"lines\" inputmode=\"numeric\" value=\"{}\">\
         <label for=\"bytes\">Bytes</label><input id=\"bytes\" name=\"bytes\" inputmode=\"numeric\" value=\"{}\">\
         <button type=\"submit\">Wake</button></form>",
        scope_field(cx),
        esc(cx.param("lines")),
        esc(cx.param("bytes"))
    );
    let body = format!(
        "<p>What an agent sees at start-up in scope <code>{}</code>, with {}.</p>{form}<pre class=\"wake\">{}</pre>",
        esc(&cx.scope),
        esc(&budget),
        esc(&text)
    );
    Ok(Out::Page("Wake".into(), body))
}
