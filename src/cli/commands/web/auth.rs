//! Logging in to the inspector: a bearer token from `somna token add`, posted once to
//! `/ui/login`, opens a session; the browser then carries only the session's cookie
//! (`HttpOnly`, `SameSite=Strict`, `Path=/ui`). The session table lives in the server's memory
//! and keeps, per random session id, the token's hash, its principal and the session's CSRF
//! token: every request looks the hash up in the store again, so a revoked token ends its
//! sessions at once. A POST must carry an allowed Origin (or none, as MCP's own check) and the
//! session's CSRF token in its body (never read from the URL); logging out drops the session. The table is bounded per principal
//! ([`MAX_SESSIONS_PER_PRINCIPAL`], its oldest ended first) and in all ([`MAX_SESSIONS`]), a
//! session expires when idle ([`IDLE_EXPIRY`]) and after its login ([`ABSOLUTE_EXPIRY`]), and
//! an address with [`MAX_FAILED_LOGINS`] failed logins in a [`LOGIN_WINDOW`] may not log in
//! until it ends.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use axum::extract::Request;
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};

use super::{html, see_other, Params, Web};
use crate::cli::commands::token::{random_hex, token_hash, Authenticated, Peer, Revoked};

/// The cookie's name.
const COOKIE: &str = "somna_ui";
/// The most sessions kept at once: a login beyond it ends the oldest session of the principal
/// that holds the most.
pub const MAX_SESSIONS: usize = 1024;
/// The most sessions one principal keeps: its login beyond it ends its oldest (issue 52, point
/// 3: one token's 1,024 logins logged everyone else out).
pub const MAX_SESSIONS_PER_PRINCIPAL: usize = 8;
/// A session unused this long ends.
pub const IDLE_EXPIRY: Duration = Duration::from_secs(30 * 60);
/// A session ends this long after its login, used or not.
pub const ABSOLUTE_EXPIRY: Duration = Duration::from_secs(12 * 60 * 60);
/// The most failed logins from one address in a [`LOGIN_WINDOW`]; beyond it every login from
/// that address is refused (429) until the window ends.
pub const MAX_FAILED_LOGINS: u32 = 10;
/// The window the failed logins of an address are counted in.
pub const LOGIN_WINDOW: Duration = Duration::from_secs(60);
/// The most addresses whose failed logins are counted (beyond, those of past windows are
/// dropped).
const MAX_COUNTED_PEERS: usize = 4096;
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
    /// When it opened.
    opened: Instant,
    /// When a request last carried it.
    used: Instant,
}

impl Session {
    /// Whether it has not expired at `now`.
    fn live(&self, now: Instant) -> bool {
        now.duration_since(self.used) < IDLE_EXPIRY
            && now.duration_since(self.opened) < ABSOLUTE_EXPIRY
    }
}

/// The sessions of the server, by session id.
#[derive(Default)]
pub struct Sessions {
    table: Mutex<HashMap<String, Session>>,
}

/// The oldest session of `principal`.
fn oldest_of(t: &HashMap<String, Session>, principal: &str) -> Option<String> {
    t.iter()
        .filter(|(_, s)| s.principal == principal)
        .min_by_key(|(_, s)| s.opened)
        .map(|(k, _)| k.clone())
}

/// The principal that holds the most sessions.
fn most_held(t: &HashMap<String, Session>) -> Option<String> {
    let mut held: HashMap<&str, usize> = HashMap::new();
    for s in t.values() {
        *held.entry(&s.principal).or_default() += 1;
    }
    held.into_iter()
        .max_by_key(|(_, n)| *n)
        .map(|(p, _)| p.to_string())
}

impl Sessions {
    fn table(&self) -> MutexGuard<'_, HashMap<String, Session>> {
        // Plain data: a thread that panicked holding it left it consistent.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Opens a session at `now`, within the bounds; returns its id.
    fn open(&self, principal: String, hash: String, now: Instant) -> Option<(String, Session)> {
        let id = random_hex::<32>().ok()?;
        let csrf = random_hex::<32>().ok()?;
        let mut t = self.table();
        t.retain(|_, s| s.live(now));
        let held =
            |t: &HashMap<String, Session>| t.values().filter(|s| s.principal == principal).count();
        while held(&t) >= MAX_SESSIONS_PER_PRINCIPAL {
            let k = oldest_of(&t, &principal)?;
            t.remove(&k);
        }
        if t.len() >= MAX_SESSIONS {
            let k = most_held(&t).and_then(|p| oldest_of(&t, &p))?;
            t.remove(&k);
        }
        let s = Session {
            principal,
            hash,
            csrf,
            opened: now,
            used: now,
        };
        t.insert(id.clone(), s.clone());
        Some((id, s))
    }

    /// The session `id` if it has not expired at `now` (then used at `now`).
    fn get(&self, id: &str, now: Instant) -> Option<Session> {
        let mut t = self.table();
        let s = t.get_mut(id)?;
        if !s.live(now) {
            t.remove(id);
            return None;
        }
        s.used = now;
        Some(s.clone())
    }

    fn end(&self, id: &str) {
        self.table().remove(id);
    }
}

/// The failed logins of each address: when its window opened, and how many.
#[derive(Default)]
pub struct Failures {
    by_peer: Mutex<HashMap<IpAddr, (Instant, u32)>>,
}

impl Failures {
    fn table(&self) -> MutexGuard<'_, HashMap<IpAddr, (Instant, u32)>> {
        self.by_peer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `peer` may try to log in at `now`; if so, the attempt counts as failed from now
    /// until [`Failures::succeeded`] takes it back. Counted before the token is looked up, so
    /// attempts in flight together count against the limit as well (checked, then counted only
    /// once each had failed, 40 concurrent attempts got 13-31 lookups through a limit of 10).
    fn attempt(&self, peer: IpAddr, now: Instant) -> bool {
        let mut t = self.table();
        if !t.contains_key(&peer) {
            make_room(&mut t, now);
        }
        let e = t.entry(peer).or_insert((now, 0));
        if now.duration_since(e.0) >= LOGIN_WINDOW {
            *e = (now, 0);
        }
        if e.1 >= MAX_FAILED_LOGINS {
            return false;
        }
        e.1 += 1;
        true
    }

    /// Takes back `peer`'s attempt begun at `began`, which did not fail (a login, or an error of
    /// the server's own); nothing when its window has closed since.
    fn succeeded(&self, peer: IpAddr, began: Instant) {
        if let Some(e) = self.table().get_mut(&peer) {
            if began >= e.0 {
                e.1 = e.1.saturating_sub(1);
            }
        }
    }
}

/// Keeps the counted addresses under [`MAX_COUNTED_PEERS`]: drops those of past windows, then
/// (still full) the one whose window opened first.
fn make_room(t: &mut HashMap<IpAddr, (Instant, u32)>, now: Instant) {
    if t.len() >= MAX_COUNTED_PEERS {
        t.retain(|_, (start, _)| now.duration_since(*start) < LOGIN_WINDOW);
    }
    if t.len() >= MAX_COUNTED_PEERS {
        let first = t
            .iter()
            .min_by_key(|(_, (start, _))| *start)
            .map(|(k, _)| *k);
        if let Some(k) = first {
            t.remove(&k);
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

/// The request's query parameters, and its form's (a POST's body, read whole; none for
/// another method).
async fn params(req: Request) -> Result<(Params, Params), Response> {
    let query = html::parse_params(req.uri().query().unwrap_or_default());
    if req.method() != Method::POST {
        return Ok((query, Params::new()));
    }
    let Ok(body) = axum::body::to_bytes(req.into_body(), MAX_FORM_BYTES).await else {
        return Err(html::error(
            StatusCode::PAYLOAD_TOO_LARGE,
            "The form is too large.",
        ));
    };
    Ok((query, html::parse_params(&String::from_utf8_lossy(&body))))
}

/// The request's session and parameters, or the answer that refuses it: no session (or its
/// token revoked) sees the login page; a POST from another Origin or without the session's
/// CSRF token is 403.
pub async fn admit(web: &Web, req: Request) -> Result<(Session, Params), Response> {
    let id = cookie(&req).unwrap_or_default();
    let Some(s) = web.sessions.get(&id, Instant::now()) else {
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
    let (mut p, form) = params(req).await?;
    // The CSRF token counts only in the body: one in the URL has leaked already.
    if post && !same(html::param(&form, "csrf"), &s.csrf) {
        return Err(html::error(
            StatusCode::FORBIDDEN,
            "The form's CSRF token is missing or wrong: reload the page and try again.",
        ));
    }
    p.extend(form);
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

/// The address a request came from (the unspecified address when the listener did not say).
fn peer_of(req: &Request) -> IpAddr {
    req.extensions()
        .get::<Peer>()
        .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |p| p.0)
}

/// The login page with `message` and `status`.
fn login_refused(status: StatusCode, message: &str) -> Response {
    let mut r = login_page(message);
    *r.status_mut() = status;
    r
}

/// `POST /ui/login`: a known token opens a session and sets its cookie. An address with too many
/// failed logins lately is refused (429) before the token is looked up.
pub async fn login(web: Arc<Web>, req: Request) -> Response {
    if !origin_ok(&web, &req) {
        return html::error(StatusCode::FORBIDDEN, "This Origin is not allowed.");
    }
    let peer = peer_of(&req);
    let began = Instant::now();
    if !web.logins.attempt(peer, began) {
        return login_refused(
            StatusCode::TOO_MANY_REQUESTS,
            "Too many failed logins from this address: wait a minute and try again.",
        );
    }
    // The token counts only in the body, as the CSRF token.
    let p = match params(req).await {
        Ok((_, form)) => form,
        Err(r) => return r,
    };
    let hash = token_hash(html::param(&p, "token").trim());
    let principal = match principal_of(&web, hash.clone()).await {
        Ok(Some(p)) => p,
        Ok(None) => return login_refused(StatusCode::UNAUTHORIZED, "Unknown or revoked token."),
        Err(r) => {
            web.logins.succeeded(peer, began);
            return r;
        }
    };
    web.logins.succeeded(peer, began);
    let Some((id, _)) = web.sessions.open(principal, hash.clone(), Instant::now()) else {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn open(s: &Sessions, who: &str, at: Instant) -> String {
        s.open(who.into(), "h".into(), at).expect("a session").0
    }

    #[test]
    fn sessions_expire_idle_and_absolutely_and_a_principal_keeps_a_few() {
        let s = Sessions::default();
        let t0 = Instant::now();
        let idle = open(&s, "a", t0);
        assert!(s.get(&idle, t0 + IDLE_EXPIRY / 2).is_some());
        assert!(s.get(&idle, t0 + IDLE_EXPIRY).is_some(), "a use renews it");
        assert!(s
            .get(&idle, t0 + IDLE_EXPIRY * 2 + IDLE_EXPIRY / 2)
            .is_none());
        let used = open(&s, "a", t0);
        let mut at = t0;
        while at < t0 + ABSOLUTE_EXPIRY - IDLE_EXPIRY / 2 {
            at += IDLE_EXPIRY / 2;
            assert!(s.get(&used, at).is_some());
        }
        assert!(s.get(&used, t0 + ABSOLUTE_EXPIRY).is_none());
        let admin = open(&s, "admin", t0);
        // Each later than the one before: sessions opened in the same instant have no oldest
        let first = open(&s, "b", t0);
        let mut at = t0;
        for _ in 0..MAX_SESSIONS + 10 {
            at += Duration::from_micros(1);
            open(&s, "b", at);
        }
        assert!(s.get(&first, at).is_none());
        assert!(s.get(&admin, at).is_some());
    }

    #[test]
    fn failed_logins_are_counted_per_address_and_window() {
        let f = Failures::default();
        let (a, b) = (IpAddr::from([10, 0, 0, 1]), IpAddr::from([10, 0, 0, 2]));
        let t0 = Instant::now();
        for _ in 0..MAX_FAILED_LOGINS {
            assert!(f.attempt(a, t0));
        }
        assert!(!f.attempt(a, t0));
        assert!(f.attempt(b, t0));
        f.succeeded(b, t0);
        assert_eq!(
            f.table().get(&b).map(|e| e.1),
            Some(0),
            "a login is taken back"
        );
        assert!(f.attempt(a, t0 + LOGIN_WINDOW));
        for n in 0..MAX_COUNTED_PEERS as u32 + 10 {
            f.attempt(IpAddr::from(n.to_be_bytes()), t0);
        }
        assert_eq!(f.table().len(), MAX_COUNTED_PEERS);
    }

    /// Attempts in flight together count against the limit: of 40 at once from one address,
    /// exactly the limit go on to the token's lookup
    #[test]
    fn concurrent_failed_logins_are_held_to_the_limit() {
        let f = std::sync::Arc::new(Failures::default());
        let peer = IpAddr::from([10, 0, 0, 3]);
        let t0 = Instant::now();
        let threads: Vec<_> = (0..40)
            .map(|_| {
                let f = f.clone();
                std::thread::spawn(move || f.attempt(peer, t0))
            })
            .collect();
        let through = threads
            .into_iter()
            .filter_map(|t| t.join().ok())
            .filter(|went_on| *went_on)
            .count();
        assert_eq!(through, MAX_FAILED_LOGINS as usize);
    }
}
