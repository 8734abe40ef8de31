//! The MCP HTTP sessions, bounded (issue 52, point 1): rmcp's [`LocalSessionManager`] keeps
//! every session an `initialize` opens until it idles out (about 50 KB each), so one token could
//! fill memory. [`Sessions`] wraps it: it knows who opened each session (a request that names a
//! session with another principal's token is answered as if it did not exist), keeps at most
//! [`MAX_SESSIONS_PER_PRINCIPAL`] per principal and [`MAX_SESSIONS`] in all by default ([`Limits`],
//! `--max-sessions-per-principal` and `--max-sessions`), ending the least
//! recently used first, and when a session ends (closed by its client, evicted here, or dropped
//! by rmcp after its idle timeout) ends what the server keeps for it: its owner, its legacy
//! subscriptions and its logging level.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use futures_core::Stream;
use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::session::{
    ServerSseMessage, SessionId, SessionManager,
};

use super::Server;

/// The most sessions one principal keeps open: its next `initialize` ends its least recently
/// used one.
pub const MAX_SESSIONS_PER_PRINCIPAL: usize = 64;
/// The most sessions kept open in all: the next `initialize` ends the least recently used one.
pub const MAX_SESSIONS: usize = 1024;

/// The bounds of the sessions: `--max-sessions-per-principal` and `--max-sessions` (each at
/// least 1).
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// The most sessions one principal keeps open.
    pub per_principal: usize,
    /// The most sessions kept open in all.
    pub in_all: usize,
}

/// What the server knows of one session.
struct Entry {
    /// The principal whose `initialize` opened it.
    principal: String,
    /// When it was last named by a request (a counter).
    used: u64,
}

/// The sessions by id, and the counter that orders their use.
#[derive(Default)]
struct Table {
    clock: u64,
    entries: HashMap<String, Entry>,
}

impl Table {
    /// The least recently used session, of `principal` if given.
    fn lru(&self, principal: Option<&str>) -> Option<String> {
        self.entries
            .iter()
            .filter(|(_, e)| principal.is_none_or(|p| e.principal == p))
            .min_by_key(|(_, e)| e.used)
            .map(|(id, _)| id.clone())
    }

    /// How many sessions `principal` holds.
    fn held_by(&self, principal: &str) -> usize {
        self.entries
            .values()
            .filter(|e| e.principal == principal)
            .count()
    }
}

/// rmcp's session manager with owners and bounds.
pub struct Sessions {
    inner: LocalSessionManager,
    table: Mutex<Table>,
    server: Arc<Server>,
    limits: Limits,
}

impl Sessions {
    /// The sessions of `server`, within `limits`.
    pub fn new(server: Arc<Server>, limits: Limits) -> Sessions {
        let limits = Limits {
            per_principal: limits.per_principal.max(1),
            in_all: limits.in_all.max(1),
        };
        Sessions {
            inner: LocalSessionManager::default(),
            table: Mutex::default(),
            server,
            limits,
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // Plain data: a thread that panicked holding it left it consistent.
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether `principal` may use the session `id` (one not seen opened is rmcp's to refuse);
    /// a use counts as its most recent.
    pub fn may_use(&self, id: &str, principal: &str) -> bool {
        let mut t = self.table();
        t.clock += 1;
        let now = t.clock;
        match t.entries.get_mut(id) {
            Some(e) if e.principal == principal => {
                e.used = now;
                true
            }
            Some(_) => false,
            None => true,
        }
    }

    /// Notes that `principal` opened the session `id`; returns the sessions to end so that the
    /// bounds hold (already forgotten here: [`Sessions::evict`] closes them).
    pub fn opened(&self, id: String, principal: &str) -> Vec<String> {
        let mut t = self.table();
        t.clock += 1;
        let used = t.clock;
        let principal = principal.to_string();
        let mut out = Vec::new();
        while t.held_by(&principal) >= self.limits.per_principal {
            out.extend(
                t.lru(Some(&principal))
                    .and_then(|k| t.entries.remove_entry(&k)),
            );
        }
        while t.entries.len() >= self.limits.in_all {
            out.extend(t.lru(None).and_then(|k| t.entries.remove_entry(&k)));
        }
        t.entries.insert(id, Entry { principal, used });
        out.into_iter().map(|(k, _)| k).collect()
    }

    /// Closes the sessions `ids` in rmcp (which ends their state here through
    /// [`SessionManager::close_session`]).
    pub async fn evict(&self, ids: Vec<String>) {
        for id in ids {
            let _ = self.close_session(&SessionId::from(id)).await;
        }
    }

    /// Forgets the session `id` and ends what the server keeps for it.
    pub fn ended(&self, id: &str) {
        self.table().entries.remove(id);
        self.server.updates.end_session(id);
        self.server.log.end_session(id);
    }
}

impl SessionManager for Sessions {
    type Error = <LocalSessionManager as SessionManager>::Error;
    type Transport = <LocalSessionManager as SessionManager>::Transport;

    async fn create_session(&self) -> Result<(SessionId, Self::Transport), Self::Error> {
        self.inner.create_session().await
    }

    async fn initialize_session(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<ServerJsonRpcMessage, Self::Error> {
        self.inner.initialize_session(id, message).await
    }

    async fn has_session(&self, id: &SessionId) -> Result<bool, Self::Error> {
        self.inner.has_session(id).await
    }

    /// Called by rmcp for a DELETE and whenever a session's worker ends (its idle timeout
    /// included), and here for an eviction.
    async fn close_session(&self, id: &SessionId) -> Result<(), Self::Error> {
        let r = self.inner.close_session(id).await;
        self.ended(id);
        r
    }

    async fn create_stream(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_stream(id, message).await
    }

    async fn accept_message(
        &self,
        id: &SessionId,
        message: ClientJsonRpcMessage,
    ) -> Result<(), Self::Error> {
        self.inner.accept_message(id, message).await
    }

    async fn create_standalone_stream(
        &self,
        id: &SessionId,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.create_standalone_stream(id).await
    }

    async fn resume(
        &self,
        id: &SessionId,
        last_event_id: String,
    ) -> Result<impl Stream<Item = ServerSseMessage> + Send + Sync + 'static, Self::Error> {
        self.inner.resume(id, last_event_id).await
    }
}
