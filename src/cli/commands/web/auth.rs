//! Logging in to the inspector: a bearer token from `somna token add`, posted once to
//! `/ui/login`, opens a session; the browser then carries only the session's cookie
//! (`HttpOnly`, `SameSite=Strict`, `Path=/ui`). The session table lives in the server's memory
//! and keeps, per random session id, the token's hash, its principal and the session's CSRF
//! token: every request looks the hash up in the store again, so a revoked token ends its
//! sessions at once. A POST must carry an allowed Origin (or none, as MCP's own check) and the
//! session's CSRF token; logging out drops the session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::Request;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

use super::{html, see_other, Params, Web};
use crate::cli::commands::token::{random_hex, token_hash, Authenticated, Revoked};

/// The cookie's name.
const COOKIE: &str = "somna_ui";
/// The most sessions kept at once: a login beyond it ends the oldest.
const MAX_SESSIONS: usize = 1024;
/// The largest form body read.
const MAX_FORM_BYTES: usize = 64 * 1024;

/// One logged-in session.
#[derive(Clone, Debug)]
pub struct Session {
    /// The principal of the token it logged in with.
    pub principal: String,
    /// The hash of that token (checked at every request).
    pub hash: String,
    /// The token every form of the session carries.
    pub csrf: String,
    /// When it opened (a counter), to end the oldest first.
    opened: u64,
}

/// The sessions of the server, by session id.
#[derive(Default)]
pub struct Sessions {
    table: Mutex<(u64, HashMap<String, Session>)>,
}

impl Sessions {
    /// Opens a session; returns its id.
    fn open(&self, principal: String, hash: String) -> Option<(String, Session)> {
        let id = random_hex::<32>().ok()?;
        let mut t = self.table.lock().ok()?;
        t.0 += 1;
        let s = Session {
            principal,
            hash,
            csrf: random_hex::<32>().ok()?,
            opened: t.0,
        };
        if t.1.len() >= MAX_SESSIONS {
            let oldest =
                t.1.iter()
                    .min_by_key(|(_, s)| s.opened)
                    .map(|(k, _)| k.clone());
            if let Some(k) = oldest {
                t.1.remove(&k);
            }
        }
        t.1.insert(id.clone(), s.clone());
        Some((id, s))
    }

    fn get(&self, id: &str) -> Option<Session> {
        self.table.lock().ok()?.1.get(id).cloned()
    }

    fn end(&self, id: &str) {
        if let Ok(mut t) = self.table.lock() {
            t.1.remove(id);
        }
    }
}

/// Equal without an early exit (the CSRF token is a secret).
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// The session id the request's cookie carries.
fn cookie(req: &Request) -> Option<String> {
    req.headers()
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == COOKIE)
        .map(|(_, v)| v.to_string())
}

/// Whether the request's Origin is allowed: none, or one of the server's.
fn origin_ok(web: &Web, req: &Request) -> bool {
    match req.headers().get(header::ORIGIN) {
        None => true,
        Some(o) => o.to_str().is_ok_and(|o| web.origins.iter().any(|a| a == o)),
    }
}

/// The principal of a token hash, looked up in the store now (None: unknown or revoked).
async fn principal_of(web: &Web, hash: String) -> Result<Option<String>, Response> {
    let open = Arc::clone(&web.open);
    let found = tokio::task::spawn_blocking(move || open()?.token_principal(&hash)).await;
    match found {
        Ok(Ok(p)) => Ok(p),
        _ => Err(html::error(
            StatusCode::SERVICE_UNAVAILABLE,
            "The store cannot check tokens now.",
        )),
    }
}

/// The request's query parameters, then its form's (a POST's body, read whole).
async fn params(req: Request) -> Result<Params, Response> {
    let mut p = html::parse_params(req.uri().query().unwrap_or_default());
    if req.method() == Method::POST {
        let Ok(body) = axum::body::to_bytes(req.into_body(), MAX_FORM_BYTES).await else {
            return Err(html::error(
                StatusCode::PAYLOAD_TOO_LARGE,
                "The form is too large.",
            ));
        };
        p.extend(html::parse_params(&String::from_utf8_lossy(&body)));
    }
    Ok(p)
}

/// The request's session and parameters, or the answer that refuses it: no session (or its
/// token revoked) sees the login page; a POST from another Origin or without the session's
/// CSRF token is 403.
pub async fn admit(web: &Web, req: Request) -> Result<(Session, Params), Response> {
    let id = cookie(&req).unwrap_or_default();
    let Some(s) = web.sessions.get(&id) else {
        return Err(see_other("/ui/login"));
    };
    if principal_of(web, s.hash.clone()).await?.as_deref() != Some(s.principal.as_str()) {
        web.sessions.end(&id);
        let mut r = see_other("/ui/login");
        r.extensions_mut().insert(Revoked);
        return Err(r);
    }
    let post = req.method() == Method::POST;
    if post && !origin_ok(web, &req) {
        return Err(html::error(
            StatusCode::FORBIDDEN,
            "This Origin is not allowed.",
        ));
    }
    let p = params(req).await?;
    if post && !same(html::param(&p, "csrf"), &s.csrf) {
        return Err(html::error(
            StatusCode::FORBIDDEN,
            "The form's CSRF token is missing or wrong: reload the page and try again.",
        ));
    }
    Ok((s, p))
}

/// The login form, with a message (escaped) above it.
pub fn login_page(message: &str) -> Response {
    let body = format!(
        "<main><h1>Log in</h1>{}<form method=\"post\" action=\"/ui/login\">\
         <label for=\"token\">Bearer token (from <code>somna token add</code>)</label>\
         <input id=\"token\" name=\"token\" type=\"password\" autocomplete=\"off\" required>\
         <button type=\"submit\">Log in</button></form></main>",
        if message.is_empty() {
            String::new()
        } else {
            format!(
                "<p class=\"error\" role=\"alert\">{}</p>",
                html::esc(message)
            )
        }
    );
    html::bare("Log in", &body).into_response()
}

/// `POST /ui/login`: a known token opens a session and sets its cookie.
pub async fn login(web: Arc<Web>, req: Request) -> Response {
    if !origin_ok(&web, &req) {
        return html::error(StatusCode::FORBIDDEN, "This Origin is not allowed.");
    }
    let p = match params(req).await {
        Ok(p) => p,
        Err(r) => return r,
    };
    let hash = token_hash(html::param(&p, "token").trim());
    let principal = match principal_of(&web, hash.clone()).await {
        Ok(Some(p)) => p,
        Ok(None) => {
            let mut r = login_page("Unknown or revoked token.");
            *r.status_mut() = StatusCode::UNAUTHORIZED;
            return r;
        }
        Err(r) => return r,
    };
    let Some((id, _)) = web.sessions.open(principal, hash.clone()) else {
        return html::error(
            StatusCode::SERVICE_UNAVAILABLE,
            "Cannot open a session now.",
        );
    };
    let mut r = see_other("/ui/wake");
    let c = format!("{COOKIE}={id}; Path=/ui; HttpOnly; SameSite=Strict");
    if let Ok(v) = HeaderValue::from_str(&c) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r.extensions_mut().insert(Authenticated(hash));
    r
}

/// `POST /ui/logout`: ends the session (with its CSRF token) and clears the cookie.
pub async fn logout(web: Arc<Web>, req: Request) -> Response {
    let id = cookie(&req).unwrap_or_default();
    if let Err(r) = admit(&web, req).await {
        return r;
    }
    web.sessions.end(&id);
    let mut r = see_other("/ui/login");
    let c = format!("{COOKIE}=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0");
    if let Ok(v) = HeaderValue::from_str(&c) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}
