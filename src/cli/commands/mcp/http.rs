//! `somna mcp --http ADDR`: Streamable HTTP at `/mcp`, where every request must carry a bearer
//! token that `somna token add` made. The token's principal is who the request acts as (its
//! grants decide what it may read and write). No token or an unknown one: 401. A revoked token
//! is unknown from the next request on: each request looks its hash up in the store. A request
//! with an `Origin` header that is not allowed (`--allow-origin`, or the server's own loopback
//! origin): 403, before the token is read.
//! A POST body that is not JSON, or is a batch outside a session of 2025-03-26, is answered
//! 400 with a JSON-RPC error; a batch in such a session is served by [`super::batch`].
//! The listener is [`super::guard`]'s: connections are capped and timed out, and a connection
//! that sent a valid token here is marked so that it is never shed (at most
//! [`super::guard::MAX_CONNECTIONS_PER_TOKEN`] per token), and unmarked and closed once its
//! token is found revoked.

use std::sync::Arc;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use somna::Error;

use super::guard::{ConnSlot, GuardedListener};
use super::sessions::{Limits, Sessions};
use super::Ui;
use super::{batch, stdio, Caller, Server, SomnaMcp};
use crate::cli::commands::token::{token_hash, Authenticated, Peer, Revoked};

/// The hash of the token a request carried, so that a long-lived subscription can check
/// before each notification that the token was not revoked since.
#[derive(Clone, Debug)]
pub struct TokenHash(pub String);

/// What the middleware needs: the store (for token hashes), the allowed origins, and the
/// sessions with who opened each ([`Sessions`]).
struct Gate {
    server: Arc<Server>,
    origins: Vec<String>,
    sessions: Arc<Sessions>,
}

/// The session a request names (`Mcp-Session-Id`), if any.
fn session_of(headers: &axum::http::HeaderMap) -> Option<String> {
    headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

impl Gate {
    /// Notes what a response did to the sessions: opened one (an `initialize` answered with a
    /// new session id), or found that rmcp no longer knows the one named (its 404: the owner's
    /// own request, since another's never reaches rmcp). Returns the sessions the bounds end
    /// ([`Sessions::evict`]). A DELETE ends its session through [`Sessions`]' `close_session`.
    fn record(&self, named: Option<String>, principal: &str, r: &Response) -> Vec<String> {
        match named {
            None => session_of(r.headers())
                .map(|id| self.sessions.opened(id, principal))
                .unwrap_or_default(),
            Some(id) if r.status() == StatusCode::NOT_FOUND => {
                self.sessions.ended(&id);
                Vec::new()
            }
            Some(_) => Vec::new(),
        }
    }
}

/// Serves until interrupted. A bare port (`8765`) means `127.0.0.1:8765`.
/// With `ui`, the web inspector it builds is served at `/ui/` beside it.
pub async fn serve(
    handler: SomnaMcp,
    addr: &str,
    origins: &[String],
    ui: Option<Ui>,
    limits: Limits,
) -> Result<(), Error> {
    let addr = if addr.contains(':') {
        addr.to_string()
    } else {
        format!("127.0.0.1:{addr}")
    };
    let addr = addr.as_str();
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| Error::Invalid {
            what: "address",
            reason: format!("cannot listen on {addr}: {e}"),
        })?;
    let local = listener.local_addr()?;
    let listener = GuardedListener::new(listener);
    let ct = tokio_util::sync::CancellationToken::new();
    tokio::spawn(listener.reaper(ct.child_token()));
    let mut hosts = vec!["localhost".to_string(), "127.0.0.1".into(), "::1".into()];
    hosts.push(local.ip().to_string());
    let mut origins = origins.to_vec();
    origins.extend(own_origins(local));
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts.clone())
        .with_allowed_origins(origins.clone())
        .enforce_origin_validation()
        .with_cancellation_token(ct.child_token());
    let server = Arc::clone(&handler.0);
    let scope = server.scope.clone();
    let sessions = Arc::new(Sessions::new(Arc::clone(&server), limits));
    let gate = Arc::new(Gate {
        server: Arc::clone(&server),
        origins: origins.clone(),
        sessions: Arc::clone(&sessions),
    });
    let service = StreamableHttpService::new(move || Ok(handler.clone()), sessions, config);
    let mut app = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(gate, authenticate));
    let serves_ui = ui.is_some();
    if let Some(ui) = ui {
        let open: super::Opener = Arc::new(move || server.store());
        let pages = ui(open, origins, hosts, scope).layer(axum::middleware::from_fn(mark));
        app = app.merge(pages);
    }
    eprintln!("somna: serving MCP at http://{local}/mcp");
    if serves_ui {
        eprintln!("somna: serving the inspector at http://{local}/ui/");
    }
    axum::serve(
        listener,
        app.into_make_service_with_connect_info::<ConnSlot>(),
    )
    .with_graceful_shutdown(async move {
        let _ = tokio::signal::ctrl_c().await;
        ct.cancel();
    })
    .await?;
    Ok(())
}

/// A POST body as it was checked.
enum Checked {
    /// One message (or not a POST): hand it on.
    One(Request),
    /// A batch of a session that may send one ([`batch`]).
    Batch(axum::http::request::Parts, Vec<serde_json::Value>),
}

/// A POST body read whole and checked before rmcp sees it: not JSON is 400 with a JSON-RPC
/// parse error (-32700, id null), JSON that is not a message rmcp reads 400 with an
/// invalid-request error (-32600, its id when it has one: [`batch::unreadable`]), a batch outside
/// a 2025-03-26 session 400 with -32600 and id null (rmcp answers all of these 415, which clients
/// read as a content-type problem). Over [`stdio::MAX_MESSAGE_BYTES`] is 413, as rmcp says.
async fn checked_body(req: Request) -> Result<Checked, Response> {
    if req.method() != axum::http::Method::POST {
        return Ok(Checked::One(req));
    }
    let (parts, body) = req.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, stdio::MAX_MESSAGE_BYTES).await else {
        return Err(refuse(
            StatusCode::PAYLOAD_TOO_LARGE,
            "Payload Too Large: the request body exceeds 4194304 bytes\n",
        ));
    };
    let first = bytes.iter().find(|b| !b.is_ascii_whitespace());
    // The JSON-RPC body of a 400, if the request is refused.
    let refusal = if first == Some(&b'[') {
        match serde_json::from_slice::<Vec<serde_json::Value>>(&bytes) {
            Ok(b) if batch::allowed_over_http(&parts) => return Ok(Checked::Batch(parts, b)),
            Ok(_) => Some(batch::refused_batch("request")),
            Err(_) => Some(batch::parse_error("body")),
        }
    } else {
        match serde_json::from_slice::<serde_json::Value>(&bytes) {
            Ok(v) => batch::unreadable(&v),
            Err(_) => Some(batch::parse_error("body")),
        }
    };
    match refusal {
        None => Ok(Checked::One(Request::from_parts(
            parts,
            axum::body::Body::from(bytes),
        ))),
        Some(body) => {
            let json = [(header::CONTENT_TYPE, "application/json")];
            Err((StatusCode::BAD_REQUEST, json, body).into_response())
        }
    }
}

/// The origins of the server's own address, always accepted: a page it served (or a client
/// that sends its target's origin) is not a cross-site request. For a loopback address, every
/// loopback spelling of the port (`localhost`, `127.0.0.1`, `[::1]`).
fn own_origins(local: std::net::SocketAddr) -> Vec<String> {
    let port = local.port();
    let mut own = vec![format!("http://{local}")];
    if local.ip().is_loopback() {
        for host in ["localhost", "127.0.0.1", "[::1]"] {
            let o = format!("http://{host}:{port}");
            if !own.contains(&o) {
                own.push(o);
            }
        }
    }
    own
}

/// A refusal with a one-line reason.
fn refuse(status: StatusCode, why: &'static str) -> Response {
    let mut r = (status, why).into_response();
    if status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(
            header::WWW_AUTHENTICATE,
            HeaderValue::from_static("Bearer realm=\"somna\""),
        );
    }
    r
}

/// The token of an `Authorization` value: the scheme `Bearer` in any case (RFC 9110, 11.1),
/// then blanks, then the token.
fn bearer(value: &str) -> Option<&str> {
    let (scheme, token) = value.trim_start().split_once([' ', '\t'])?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// Checks the Origin, then the bearer token; serves a known one ([`admitted`]). An unknown or
/// revoked token is 401, and its connection is closed after the answer and unmarked (it was
/// never shed while it held the token).
async fn authenticate(State(gate): State<Arc<Gate>>, req: Request, next: Next) -> Response {
    if let Some(origin) = req.headers().get(header::ORIGIN) {
        let ok = origin
            .to_str()
            .is_ok_and(|o| gate.origins.iter().any(|a| a == o));
        if !ok {
            return refuse(StatusCode::FORBIDDEN, "this Origin is not allowed\n");
        }
    }
    let token = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(bearer)
        .map(str::to_string);
    let Some(token) = token else {
        return refuse(StatusCode::UNAUTHORIZED, "a bearer token is required\n");
    };
    let server = Arc::clone(&gate.server);
    let hash = token_hash(&token);
    let looked_up = hash.clone();
    let found =
        tokio::task::spawn_blocking(move || server.store()?.token_principal(&looked_up)).await;
    match found {
        Ok(Ok(Some(principal))) => admitted(&gate, req, next, principal, hash).await,
        Ok(Ok(None)) => {
            if let Some(conn) = conn_of(&req) {
                conn.revoked();
            }
            closing(refuse(
                StatusCode::UNAUTHORIZED,
                "unknown or revoked token\n",
            ))
        }
        _ => refuse(
            StatusCode::SERVICE_UNAVAILABLE,
            "the store cannot check tokens now\n",
        ),
    }
}

/// The connection a request came on.
fn conn_of(req: &Request) -> Option<ConnSlot> {
    req.extensions()
        .get::<ConnectInfo<ConnSlot>>()
        .map(|ConnectInfo(c)| c.clone())
}

/// `r`, with the connection closed after it.
fn closing(mut r: Response) -> Response {
    r.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    r
}

/// The refusal of a connection beyond its token's connection cap.
fn too_many_connections() -> Response {
    closing(refuse(
        StatusCode::TOO_MANY_REQUESTS,
        "this token holds too many connections: reuse one, or close some\n",
    ))
}

/// Serves a request whose token names `principal`: marks its connection authenticated (429 when
/// the token holds its cap of connections), keeps each session to its opener, attaches the
/// [`Caller`], and notes what the answer did to the sessions.
async fn admitted(
    gate: &Gate,
    mut req: Request,
    next: Next,
    principal: String,
    hash: String,
) -> Response {
    if conn_of(&req).is_some_and(|conn| !conn.authenticated(&hash)) {
        return too_many_connections();
    }
    let named = session_of(req.headers());
    if named
        .as_deref()
        .is_some_and(|id| !gate.sessions.may_use(id, &principal))
    {
        return refuse(StatusCode::NOT_FOUND, "Not Found: Session not found\n");
    }
    req.extensions_mut().insert(Caller(Some(principal.clone())));
    req.extensions_mut().insert(TokenHash(hash));
    let r = match checked_body(req).await {
        Ok(Checked::One(req)) => next.run(req).await,
        Ok(Checked::Batch(parts, b)) => batch::serve_http(parts, b, next).await,
        Err(refused) => refused,
    };
    let evicted = gate.record(named, &principal, &r);
    gate.sessions.evict(evicted).await;
    r
}

/// Marks the connection of an inspector request that carried a valid session (or logged in)
/// as authenticated by its token, as a valid token does for `/mcp`, so that the listener never
/// sheds it (429 beyond the token's connection cap); a request whose session's token was found
/// revoked unmarks it. Tells the pages the peer's address ([`Peer`]).
async fn mark(mut req: Request, next: Next) -> Response {
    let conn = conn_of(&req);
    if let Some(c) = &conn {
        req.extensions_mut().insert(Peer(c.peer()));
    }
    let r = next.run(req).await;
    let Some(conn) = conn else {
        return r;
    };
    if r.extensions().get::<Revoked>().is_some() {
        conn.revoked();
        return closing(r);
    }
    match r.extensions().get::<Authenticated>() {
        Some(Authenticated(hash)) if !conn.authenticated(hash) => too_many_connections(),
        _ => r,
    }
}
