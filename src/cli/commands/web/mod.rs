//! The web inspector (`somna mcp --http ADDR --ui`, docs/inspector.md): server-rendered pages
//! at `/ui/` on the MCP server's own listener, for a person to see what the agents remember and
//! to decide on it. [`auth`] logs in with a bearer token once and keeps a session cookie, and
//! checks every POST's Origin and CSRF token; [`html`] escapes and lays out; one file per page
//! ([`wake`], [`tree`], [`log`], [`review`], [`sessions`], [`admin`]) over the thin [`Cx`]. Each
//! page makes the library call the CLI makes, on a store handle acting as the session's
//! principal, so the grants decide what it shows and the lifecycle events name that principal.

mod admin;
mod auth;
mod html;
mod log;
mod review;
mod scopes;
mod sessions;
mod tree;
mod wake;

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use somna::{Error, ReadTxn, Store};

use crate::cli::commands::token::Authenticated;

/// Opens (or hands out) the store the server shares, acting as the admin.
pub type Opener = Arc<dyn Fn() -> Result<Store, Error> + Send + Sync>;

/// What every request of the inspector shares.
pub struct Web {
    /// The server's store.
    open: Opener,
    /// The Origins a POST may carry (the server's own, and `--allow-origin`).
    origins: Vec<String>,
    /// The hosts a request's `Host` may name (loopback and the bound address), as for `/mcp`.
    hosts: Vec<String>,
    /// The server's `--scope`, shown first.
    scope: String,
    /// The logged-in sessions.
    sessions: auth::Sessions,
    /// The failed logins by address.
    logins: auth::Failures,
}

/// The parameters of a query string or a form body, in order.
pub type Params = Vec<(String, String)>;

/// What one page sees: the store as the session's principal and the request's parameters.
pub struct Cx {
    /// The store, acting as the session's principal.
    pub store: Store,
    /// The principal of the session.
    pub principal: String,
    /// Whether the principal is the store's admin (the navigation links the admin page).
    pub admin: bool,
    /// The scope shown (`?scope=`, else the server's, else the first readable).
    pub scope: String,
    /// The scopes the principal may read.
    pub scopes: Vec<String>,
    /// The session's CSRF token, put in every form.
    pub csrf: String,
    /// The query string's parameters, then (for a POST) the form's.
    pub params: Params,
}

impl Cx {
    /// The first value of parameter `name` ("" when absent).
    pub fn param(&self, name: &str) -> &str {
        html::param(&self.params, name)
    }
}

/// What a page answers.
pub enum Out {
    /// A page: its title and its body (already escaped HTML).
    Page(String, String),
    /// After an action: see this location (303).
    SeeOther(String),
}

/// A page: a function of the request's context.
type Handler = fn(&Cx) -> Result<Out, Error>;

/// The routes under `/ui`, to be merged into the server's router.
pub fn router(
    open: Opener,
    origins: Vec<String>,
    hosts: Vec<String>,
    scope: String,
) -> axum::Router {
    let web = Arc::new(Web {
        open,
        origins,
        hosts,
        scope,
        sessions: auth::Sessions::default(),
        logins: auth::Failures::default(),
    });
    axum::Router::new()
        .route("/ui", axum::routing::any(handle))
        .route("/ui/", axum::routing::any(handle))
        .route("/ui/{*rest}", axum::routing::any(handle))
        .with_state(web)
}

/// The page for a method and path.
fn handler(method: &Method, path: &str) -> Option<Handler> {
    let h: Handler = match (method.as_str(), path) {
        ("GET", "/ui" | "/ui/" | "/ui/wake") => wake::page,
        ("GET", "/ui/tree") => tree::page,
        ("GET", "/ui/zoom") => tree::zoom,
        ("GET", "/ui/why") => tree::why,
        ("GET", "/ui/log") => log::page,
        ("GET", "/ui/scopes") => scopes::page,
        ("GET", "/ui/review") => review::page,
        ("GET", "/ui/confirm") => review::confirm,
        ("POST", "/ui/decide") => review::decide,
        ("POST", "/ui/redact") => review::redact,
        ("POST", "/ui/forget") => review::forget,
        ("POST", "/ui/supersede") => review::supersede,
        ("GET", "/ui/sessions") => sessions::page,
        ("GET", "/ui/session") => sessions::one,
        ("GET", "/ui/admin") => admin::page,
        _ => return None,
    };
    Some(h)
}

/// Whether the request's `Host` (or its URI's authority) names one of `hosts`, at any port: the
/// check rmcp applies to `/mcp`, against DNS rebinding (a page of `evil.example` whose name
/// now resolves to loopback).
fn host_ok(hosts: &[String], req: &Request) -> bool {
    let named = req
        .headers()
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .and_then(|h| h.parse::<axum::http::uri::Authority>().ok())
        .or_else(|| req.uri().authority().cloned());
    named.is_some_and(|a| {
        let host = a.host().trim_matches(['[', ']']);
        hosts.iter().any(|h| h.eq_ignore_ascii_case(host))
    })
}

/// The methods a path answers, for a 405's `Allow` (None: no such page).
fn allowed(path: &str) -> Option<&'static str> {
    let get =
        matches!(path, "/ui/style.css" | "/ui/login") || handler(&Method::GET, path).is_some();
    let post = matches!(path, "/ui/login" | "/ui/logout") || handler(&Method::POST, path).is_some();
    match (get, post) {
        (true, true) => Some("GET, HEAD, POST"),
        (true, false) => Some("GET, HEAD"),
        (false, true) => Some("POST"),
        (false, false) => None,
    }
}

/// 405 with the methods the path answers, or 404 when there is no such page.
fn no_such(path: &str) -> Response {
    let Some(allow) = allowed(path) else {
        return html::error(StatusCode::NOT_FOUND, "No such page.");
    };
    let mut r = html::error(
        StatusCode::METHOD_NOT_ALLOWED,
        &format!("This page answers {allow} only."),
    );
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    r
}

/// Drops a HEAD's body, keeping its length (a GET's).
fn without_body(r: &mut Response) {
    use axum::body::HttpBody;
    if let Some(n) = r.body().size_hint().exact() {
        r.headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(n));
    }
    *r.body_mut() = axum::body::Body::empty();
}

/// Serves one request, with the security headers on every answer. A `Host` that is not the
/// server's is 403 before anything else. A HEAD is answered as a GET, without the body.
async fn handle(State(web): State<Arc<Web>>, mut req: Request) -> Response {
    let head = req.method() == Method::HEAD;
    if head {
        *req.method_mut() = Method::GET;
    }
    let mut r = if host_ok(&web.hosts, &req) {
        route(web, req).await
    } else {
        html::error(StatusCode::FORBIDDEN, "This Host is not allowed.")
    };
    if head {
        without_body(&mut r);
    }
    let h = r.headers_mut();
    for (name, value) in html::SECURITY_HEADERS {
        h.insert(*name, HeaderValue::from_static(value));
    }
    r
}

/// Login, logout and the stylesheet need no session; every other page does.
async fn route(web: Arc<Web>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    match (req.method().as_str(), path.as_str()) {
        ("GET", "/ui/style.css") => return html::stylesheet(),
        ("GET", "/ui/login") => return auth::login_page(""),
        ("POST", "/ui/login") => return auth::login(web, req).await,
        ("POST", "/ui/logout") => return auth::logout(web, req).await,
        _ => {}
    }
    let Some(page) = handler(req.method(), &path) else {
        return no_such(&path);
    };
    let (session, params) = match auth::admit(&web, req).await {
        Ok(s) => s,
        Err(refused) => return refused,
    };
    let hash = session.hash.clone();
    let default_scope = web.scope.clone();
    let open = Arc::clone(&web.open);
    let done = tokio::task::spawn_blocking(move || {
        let cx = context(&open, &session, default_scope, params)?;
        Ok::<_, Error>((page(&cx)?, cx))
    })
    .await;
    let mut r = match done {
        Ok(Ok((out, cx))) => respond(out, &cx),
        Ok(Err(e)) => html::failure(&e),
        Err(_) => html::error(StatusCode::INTERNAL_SERVER_ERROR, "The page failed."),
    };
    r.extensions_mut().insert(Authenticated(hash));
    r
}

/// The page's context: the store as the principal, what it may read, the scope shown.
fn context(
    open: &Opener,
    s: &auth::Session,
    default_scope: String,
    params: Params,
) -> Result<Cx, Error> {
    let store = open()?.as_principal(Some(&s.principal));
    let asked = html::param(&params, "scope");
    // The admin, as the library decides it (a store without grants knows its admin's name
    // only where a check reads it): whoever may list the grants.
    let (scopes, admin) = store.read(|r| {
        let scopes = r.scopes()?;
        known_scope(r, asked, &default_scope, &scopes)?;
        Ok((scopes, r.grants().is_ok()))
    })?;
    let scope = if !asked.is_empty() {
        asked.to_string()
    } else if scopes.contains(&default_scope) || scopes.is_empty() {
        default_scope
    } else {
        scopes.first().cloned().unwrap_or(default_scope)
    };
    Ok(Cx {
        store,
        principal: s.principal.clone(),
        admin,
        scope,
        scopes,
        csrf: s.csrf.clone(),
        params,
    })
}

/// Refuses a scope asked (`?scope=`, a form's `scope`) that the store does not hold: 400, not
/// an empty page. One the principal may not read is the library's to refuse (403); the
/// server's own scope is always accepted (a new store holds no scope yet).
fn known_scope(r: &ReadTxn, asked: &str, default: &str, scopes: &[String]) -> Result<(), Error> {
    if asked.is_empty() || asked == default || scopes.iter().any(|s| s == asked) {
        return Ok(());
    }
    r.count(asked)?;
    Err(bad("scope", format!("the store holds no scope {asked:?}")))
}

/// A page laid out, or a redirect.
fn respond(out: Out, cx: &Cx) -> Response {
    match out {
        Out::Page(title, body) => html::layout(&title, cx, &body).into_response(),
        Out::SeeOther(to) => see_other(&to),
    }
}

/// A 303 to `to` (a path under `/ui`).
pub fn see_other(to: &str) -> Response {
    let mut r = StatusCode::SEE_OTHER.into_response();
    if let Ok(v) = HeaderValue::from_str(to) {
        r.headers_mut().insert(header::LOCATION, v);
    }
    r
}

/// An invalid-parameter error (400).
pub fn bad(what: &'static str, reason: impl Into<String>) -> Error {
    Error::Invalid {
        what,
        reason: reason.into(),
    }
}
