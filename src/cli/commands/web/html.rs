//! HTML for the inspector: escaping (every value a page shows passes [`esc`]), the layout with
//! its navigation, forms' hidden fields, query strings both ways, and the security headers every
//! answer carries. The stylesheet is `style.css`, compiled in; the pages use no script.

use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use somna::Error;

use super::{Cx, Params};

/// The headers of every answer: no script, no framing, no sniffing, no caching.
pub const SECURITY_HEADERS: &[(&str, &str)] = &[
    (
        "content-security-policy",
        "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; \
         frame-ancestors 'none'; base-uri 'none'",
    ),
    ("x-content-type-options", "nosniff"),
    ("x-frame-options", "DENY"),
    ("referrer-policy", "same-origin"),
    ("cache-control", "no-store"),
];

/// The stylesheet.
const CSS: &str = include_str!("style.css");

/// Escapes text for an element's content or a quoted attribute.
pub fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// What a query value leaves as it is: the unreserved characters of RFC 3986.
const QUERY_VALUE: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'.')
    .remove(b'_')
    .remove(b'~');

/// `s` percent-encoded for a query value (the percent-encoding crate, which somna already
/// uses for server URLs).
pub fn enc(s: &str) -> String {
    percent_encoding::utf8_percent_encode(s, QUERY_VALUE).to_string()
}

/// A form-encoded key or value decoded: `+` is a space, then `%XX` escapes (so `%2B` stays a
/// `+`); invalid UTF-8 becomes U+FFFD.
fn dec(s: &str) -> String {
    let spaced = s.replace('+', " ");
    percent_encoding::percent_decode_str(&spaced)
        .decode_utf8_lossy()
        .into_owned()
}

/// The pairs of a query string or form body.
pub fn parse_params(s: &str) -> Params {
    s.split('&')
        .filter(|kv| !kv.is_empty())
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            (dec(k), dec(v))
        })
        .collect()
}

/// The first value of `name` ("" when absent).
pub fn param<'a>(p: &'a Params, name: &str) -> &'a str {
    p.iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
        .unwrap_or_default()
}

/// The hidden fields of a POST form: the CSRF token and the scope. Only POST forms carry the
/// token: a GET form would put it in the URL (history, logs, the Referer).
pub fn hidden(cx: &Cx) -> String {
    format!(
        "<input type=\"hidden\" name=\"csrf\" value=\"{}\">{}",
        esc(&cx.csrf),
        scope_field(cx)
    )
}

/// The hidden field of a GET form: the scope.
pub fn scope_field(cx: &Cx) -> String {
    format!(
        "<input type=\"hidden\" name=\"scope\" value=\"{}\">",
        esc(&cx.scope)
    )
}

/// A link to `path` in the page's scope, with more query pairs (values encoded here).
pub fn link(cx: &Cx, path: &str, more: &[(&str, &str)]) -> String {
    link_in(&cx.scope, path, more)
}

/// A link to `path` in `scope` with the query `more`, each value encoded.
pub fn link_in(scope: &str, path: &str, more: &[(&str, &str)]) -> String {
    let mut q = format!("{path}?scope={}", enc(scope));
    for (k, v) in more {
        q.push_str(&format!("&{k}={}", enc(v)));
    }
    q
}

/// Lines (as the CLI prints them) as a list, escaped.
pub fn lines(ls: &[String]) -> String {
    let mut out = String::from("<ul class=\"lines\">");
    for l in ls {
        out.push_str(&format!("<li>{}</li>", esc(l)));
    }
    out.push_str("</ul>");
    out
}

/// The page around `body`: navigation, the scope picker, who is logged in, log out.
pub fn layout(title: &str, cx: &Cx, body: &str) -> Html<String> {
    let mut nav = String::new();
    let mut pages = vec![
        ("/ui/wake", "Wake"),
        ("/ui/scopes", "Scopes"),
        ("/ui/tree", "Tree"),
        ("/ui/log", "Log"),
        ("/ui/review", "Review"),
        ("/ui/sessions", "Sessions"),
    ];
    if cx.admin {
        pages.push(("/ui/admin", "Grants and tokens"));
    }
    for (path, name) in pages {
        nav.push_str(&format!(
            "<a href=\"{}\">{name}</a> ",
            esc(&link(cx, path, &[]))
        ));
    }
    let mut options = String::new();
    for s in &cx.scopes {
        let sel = if *s == cx.scope { " selected" } else { "" };
        options.push_str(&format!("<option{sel}>{}</option>", esc(s)));
    }
    let head = format!(
        "<header><nav aria-label=\"pages\">{nav}</nav>\
         <form method=\"get\" action=\"\" class=\"inline\"><label for=\"scope\">Scope</label>\
         <select id=\"scope\" name=\"scope\">{options}</select><button type=\"submit\">Show</button></form>\
         <form method=\"post\" action=\"/ui/logout\" class=\"inline\">{}\
         <span>{}</span> <button type=\"submit\">Log out</button></form></header>",
        hidden(cx),
        esc(&cx.principal)
    );
    bare(
        title,
        &format!("{head}<main><h1>{}</h1>{body}</main>", esc(title)),
    )
}

/// A whole document around `body`, without navigation.
pub fn bare(title: &str, body: &str) -> Html<String> {
    Html(format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{} - somna</title><link rel=\"stylesheet\" href=\"/ui/style.css\"></head>\
         <body>{body}</body></html>",
        esc(title)
    ))
}

/// `GET /ui/style.css`.
pub fn stylesheet() -> Response {
    ([(header::CONTENT_TYPE, "text/css; charset=utf-8")], CSS).into_response()
}

/// An error page with a status.
pub fn error(status: StatusCode, message: &str) -> Response {
    let body = format!(
        "<main><h1>{}</h1><p role=\"alert\">{}</p><p><a href=\"/ui/wake\">Back</a></p></main>",
        status.as_u16(),
        esc(message)
    );
    (status, bare("Error", &body)).into_response()
}

/// The page for a library error: denied 403, invalid 400, not found 404, else 500.
pub fn failure(e: &Error) -> Response {
    let status = match e {
        Error::Denied(_) => StatusCode::FORBIDDEN,
        Error::Invalid { .. } | Error::WrongBlock { .. } | Error::OutOfRange { .. } => {
            StatusCode::BAD_REQUEST
        }
        Error::NotFound { .. } => StatusCode::NOT_FOUND,
        Error::Conflict(_) => StatusCode::CONFLICT,
        Error::Busy { .. } => StatusCode::SERVICE_UNAVAILABLE,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    error(status, &e.to_string())
}

#[cfg(test)]
mod tests {
    use super::{dec, enc, parse_params};

    #[test]
    fn values_round_trip_and_form_encoding_is_read_as_browsers_send_it() {
        for v in ["plain", "a b&c=d", "100% <x> \"q\" 'é' 日本", "+%2B", ""] {
            assert_eq!(dec(&enc(v)), v);
        }
        assert_eq!(enc("a b~-._"), "a%20b~-._");
        let p = parse_params("q=a+b%2Bc&scope=%E6%97%A5&bad=%zz%&empty");
        let want = [
            ("q", "a b+c"),
            ("scope", "日"),
            ("bad", "%zz%"),
            ("empty", ""),
        ];
        let got: Vec<(&str, &str)> = p.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(got, want);
    }
}
