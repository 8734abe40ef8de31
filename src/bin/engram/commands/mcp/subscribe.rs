//! Subscriptions to the wake resources (`engram://{scope}/wake`): after a write tool of this
//! process changes a scope, each subscriber to that scope's wake gets
//! `notifications/resources/updated`. Both eras: `resources/subscribe` (before 2026-07-28) and
//! `subscriptions/listen` (2026-07-28). Writes of other processes are not seen (no polling).
//! Only a caller who may read the scope may subscribe to it.

use std::collections::HashMap;
use std::sync::Mutex;

use engram::{Access, Error};
use rmcp::model::{ResourceUpdatedNotificationParam, SubscriptionFilter};
use rmcp::service::{Peer, SubscriptionContext};
use rmcp::RoleServer;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use super::{Caller, Server};

/// The scopes written by this process, as they are written, and the open legacy subscriptions.
pub struct Updates {
    written: broadcast::Sender<String>,
    legacy: Mutex<HashMap<String, CancellationToken>>,
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
    format!("engram://{scope}/wake")
}

/// The scope of a wake resource URI.
fn scope_of(uri: &str) -> Option<&str> {
    uri.strip_prefix("engram://")?.strip_suffix("/wake")
}

impl Updates {
    /// Tells the subscribers of `scope`'s wake that it changed.
    pub fn written(&self, scope: &str) {
        // No receiver is not an error: nobody subscribed.
        let _ = self.written.send(wake_uri(scope));
    }

    /// Ends the legacy subscriptions of this process to `uri`.
    pub fn unsubscribe(&self, uri: &str) {
        if let Ok(mut m) = self.legacy.lock() {
            if let Some(t) = m.remove(uri) {
                t.cancel();
            }
        }
    }
}

/// Whether the caller may subscribe to `uri`: a wake resource of a scope it may read.
pub fn may_subscribe(server: &Server, caller: &Caller, uri: &str) -> Result<bool, Error> {
    let Some(scope) = scope_of(uri) else {
        return Ok(false);
    };
    engram::validate_scope(scope)?;
    let store = server.store()?.as_principal(caller.0.as_deref());
    store.read(|r| r.may(Access::Read, scope))
}

/// A legacy subscription (`resources/subscribe`): notifies `peer` until it is gone or
/// unsubscribes.
pub fn subscribe_legacy(updates: &Updates, uri: String, peer: Peer<RoleServer>) {
    let stop = CancellationToken::new();
    if let Ok(mut m) = updates.legacy.lock() {
        let token = m.entry(uri.clone()).or_default();
        if token.is_cancelled() {
            *token = CancellationToken::new();
        }
        let parent = token.clone();
        let child = stop.clone();
        tokio::spawn(async move {
            parent.cancelled().await;
            child.cancel();
        });
    }
    let mut rx = updates.written.subscribe();
    tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = stop.cancelled() => break,
                got = rx.recv() => match got {
                    Ok(u) if u == uri => {
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
/// accepted URIs the caller may read (the others are never notified).
pub async fn listen(updates: &Updates, context: SubscriptionContext, readable: Vec<String>) {
    let mut rx = updates.written.subscribe();
    loop {
        tokio::select! {
            _ = context.cancelled() => break,
            got = rx.recv() => match got {
                Ok(uri) => {
                    if readable.contains(&uri)
                        && context.sink().notify_resource_updated(uri).await.is_err()
                    {
                        break;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {}
                Err(broadcast::error::RecvError::Closed) => break,
            },
        }
    }
}
