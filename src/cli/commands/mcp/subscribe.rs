//! Subscriptions to the wake resources (`somna://{scope}/wake`): after a write tool of this
//! process changes a scope, each subscriber to that scope's wake gets
//! `notifications/resources/updated`. Both eras: `resources/subscribe` (before 2026-07-28) and
//! `subscriptions/listen` (2026-07-28). Writes of other processes are not seen (no polling).
//! Only a caller who may read the scope may subscribe to it, and before every notification the
//! subscriber is checked again: a revoked token ends the subscription, a revoked grant stops the
//! notifications of that scope. A legacy subscription belongs to its session and principal: an
//! `unsubscribe` ends only the caller's own.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rmcp::model::{ResourceUpdatedNotificationParam, SubscriptionFilter};
use rmcp::service::{Peer, SubscriptionContext};
use rmcp::RoleServer;
use somna::trust::Access;
use somna::Error;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::{Caller, Server};

/// Who subscribes: the caller, the hash of the token it used (HTTP) and its session
/// (`Mcp-Session-Id`; empty over stdio, where one process serves one client).
#[derive(Clone, Debug)]
pub struct Subscriber {
    /// Who the subscriber acts as.
    pub caller: Caller,
    /// The hash of its bearer token, checked again before each notification.
    pub token: Option<String>,
    /// Its MCP session.
    pub session: String,
}

/// What a legacy subscription is keyed by: session, principal, URI.
type Key = (String, Option<String>, String);

/// The scopes written by this process, as they are written, and the open legacy subscriptions.
pub struct Updates {
    written: broadcast::Sender<String>,
    legacy: Mutex<HashMap<Key, CancellationToken>>,
}

impl Default for Updates {
    fn default() -> Self {
        Updates {
            written: broadcast::channel(256).0,
            legacy: Mutex::new(HashMap::new()),
        }
    }
}

/// The wake resource of a scope.
pub fn wake_uri(scope: &str) -> String {
    format!("somna://{scope}/wake")
}

/// The scope of a wake resource URI.
fn scope_of(uri: &str) -> Option<&str> {
    uri.strip_prefix("somna://")?.strip_suffix("/wake")
}

impl Updates {
    /// Tells the subscribers of `scope`'s wake that it changed.
    pub fn written(&self, scope: &str) {
        // No receiver is not an error: nobody subscribed.
        let _ = self.written.send(wake_uri(scope));
    }

    /// Ends every legacy subscription of the HTTP session `session` (it ended).
    pub fn end_session(&self, session: &str) {
        if let Ok(mut m) = self.legacy.lock() {
            m.retain(|(s, _, _), t| {
                let keep = s != session;
                if !keep {
                    t.cancel();
                }
                keep
            });
        }
    }

    /// Ends the subscriber's own legacy subscription to `uri` (no one else's).
    pub fn unsubscribe(&self, who: &Subscriber, uri: &str) {
        if let Ok(mut m) = self.legacy.lock() {
            if let Some(t) = m.remove(&key(who, uri)) {
                t.cancel();
            }
        }
    }
}

/// The key of a legacy subscription.
fn key(who: &Subscriber, uri: &str) -> Key {
    (who.session.clone(), who.caller.0.clone(), uri.to_string())
}

/// Whether the subscriber may still hear of `uri`: its token (if any) still names its principal,
/// and that principal may still read the scope.
async fn still_allowed(server: &Arc<Server>, who: &Subscriber, uri: &str) -> bool {
    let (server, who, uri) = (Arc::clone(server), who.clone(), uri.to_string());
    tokio::task::spawn_blocking(move || {
        if let Some(hash) = &who.token {
            let now = server.store().and_then(|s| s.token_principal(hash));
            if !matches!(now, Ok(Some(p)) if Some(&p) == who.caller.0.as_ref()) {
                return false;
            }
        }
        matches!(may_subscribe(&server, &who.caller, &uri), Ok(true))
    })
    .await
    .unwrap_or(false)
}

/// Whether the caller may subscribe to `uri`: a wake resource of a scope it may read.
pub fn may_subscribe(server: &Server, caller: &Caller, uri: &str) -> Result<bool, Error> {
    let Some(scope) = scope_of(uri) else {
        return Ok(false);
    };
    somna::text::validate_scope(scope)?;
    let store = server.store()?.as_principal(caller.0.as_deref());
    store.read(|r| r.may(Access::Read, scope))
}

/// A legacy subscription (`resources/subscribe`): notifies `peer` until it is gone,
/// unsubscribes, or may no longer read the scope.
pub fn subscribe_legacy(
    server: &Arc<Server>,
    who: Subscriber,
    uri: String,
    peer: Peer<RoleServer>,
) {
    let updates = &server.updates;
    // Cancelled with the (caller, uri) entry's token by `unsubscribe`.
    let stop = match updates.legacy.lock() {
        Ok(mut m) => {
            let token = m.entry(key(&who, &uri)).or_default();
            if token.is_cancelled() {
                *token = CancellationToken::new();
            }
            token.child_token()
        }
        Err(_) => CancellationToken::new(),
    };
    let mut rx = updates.written.subscribe();
    let server = Arc::clone(server);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                got = rx.recv() => match got {
                    Ok(u) if u == uri => {
                        if !still_allowed(&server, &who, &uri).await {
                            break;
                        }
                        let p = ResourceUpdatedNotificationParam::new(uri.clone());
                        if peer.notify_resource_updated(p).await.is_err() {
                            break;
                        }
                    }
                    Ok(_) | Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => break,
                },
            }
        }
    });
}

/// The part of a `subscriptions/listen` filter this server serves: wake resources.
pub fn accepted(requested: &SubscriptionFilter) -> Option<SubscriptionFilter> {
    let uris: Vec<String> = requested
        .resource_subscriptions
        .iter()
        .flatten()
        .filter(|u| scope_of(u).is_some())
        .cloned()
        .collect();
    let mut f = SubscriptionFilter::new();
    f.resource_subscriptions = Some(uris);
    Some(f)
}

/// Runs one `subscriptions/listen` stream until the client cancels it; `readable` are the
/// accepted URIs the caller may read (the others are never notified). Each notification is
/// checked again first: a URI the subscriber may no longer read is dropped from the stream.
pub async fn listen(
    server: &Arc<Server>,
    who: Subscriber,
    context: SubscriptionContext,
    mut readable: Vec<String>,
) {
    let mut rx = server.updates.written.subscribe();
    loop {
        tokio::select! {
            _ = context.cancelled() => break,
            got = rx.recv() => match got {
                Ok(uri) if readable.contains(&uri) => {
                    if !still_allowed(server, &who, &uri).await {
                        readable.retain(|u| *u != uri);
                        continue;
                    }
                    if context.sink().notify_resource_updated(uri).await.is_err() {
                        break;
                    }
                }
                Ok(_) => {}
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => break,
            },
        }
    }
}
