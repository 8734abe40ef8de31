//! The `logging` capability: `logging/setLevel` sets, per session, the least severe level the
//! client hears; what the server has to say comes as `notifications/message` (logger `somna`)
//! after the tool call it concerns. What is said: a store repaired when this process opened it
//! (a torn tail cut back, `warning`), and a call that ended `busy` (a writer held the store past
//! the busy timeout, `warning`), `corrupt` (`error`), `server` or `ambiguous` (`error`). A
//! session that never set a level hears `warning` and above. The logging capability is
//! deprecated by the 2026-07-28 specification (SEP-2577), hence the `allow(deprecated)`.
#![allow(deprecated)]

use std::collections::HashMap;
use std::sync::Mutex;

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::service::Peer;
use rmcp::RoleServer;

/// The level a session hears until it sets one.
const DEFAULT: LoggingLevel = LoggingLevel::Warning;

/// The most sessions whose levels are kept (over HTTP sessions come and go unannounced).
const MAX_SESSIONS: usize = 4096;

/// The levels the sessions set, and what is waiting to be said.
#[derive(Default)]
pub struct Log {
    /// By session id (`""` on stdio).
    levels: Mutex<HashMap<String, LoggingLevel>>,
    /// Said by the store, for whoever calls next (a repair at open).
    waiting: Mutex<Vec<(LoggingLevel, String)>>,
}

impl Log {
    /// `logging/setLevel` of `session`.
    pub fn set(&self, session: &str, level: LoggingLevel) {
        if let Ok(mut l) = self.levels.lock() {
            if l.len() >= MAX_SESSIONS && !l.contains_key(session) {
                l.clear(); // sessions long gone: they fall back to the default level
            }
            l.insert(session.to_string(), level);
        }
    }

    /// Forgets the level of the HTTP session `session` (it ended).
    pub fn end_session(&self, session: &str) {
        if let Ok(mut l) = self.levels.lock() {
            l.remove(session);
        }
    }

    /// Keeps `message` for the next call's caller.
    pub fn later(&self, level: LoggingLevel, message: String) {
        if let Ok(mut w) = self.waiting.lock() {
            w.push((level, message));
        }
    }

    /// Sends `session` what waits and what the result of its call says, at its level or above.
    /// `result_text` is the text of an error result (`class: message`), None for a success.
    pub async fn after_call(
        &self,
        session: &str,
        peer: &Peer<RoleServer>,
        result_text: Option<&str>,
    ) {
        let mut said = self
            .waiting
            .lock()
            .map(|mut w| std::mem::take(&mut *w))
            .unwrap_or_default();
        if let Some(m) = result_text.and_then(of_error) {
            said.push(m);
        }
        let least = self
            .levels
            .lock()
            .ok()
            .and_then(|l| l.get(session).copied())
            .unwrap_or(DEFAULT);
        for (level, message) in said {
            if rank(level) < rank(least) {
                continue;
            }
            let p = LoggingMessageNotificationParam::new(level, serde_json::json!(message))
                .with_logger("somna");
            let _ = peer.notify_logging_message(p).await;
        }
    }
}

/// What an error result is worth logging, by its class: None for the caller's own mistakes
/// (`invalid`, `not_found`, `conflict`, `denied`), which the result says well enough.
fn of_error(text: &str) -> Option<(LoggingLevel, String)> {
    let (class, message) = text.split_once(": ")?;
    let level = match class {
        "busy" => LoggingLevel::Warning,
        "corrupt" | "server" | "ambiguous" => LoggingLevel::Error,
        _ => return None,
    };
    Some((
        level,
        format!("a call ended {class}: {}", message.trim_end()),
    ))
}

/// A level's severity, least first (RFC 5424's order, as the specification lists them).
fn rank(level: LoggingLevel) -> u8 {
    match level {
        LoggingLevel::Debug => 0,
        LoggingLevel::Info => 1,
        LoggingLevel::Notice => 2,
        LoggingLevel::Warning => 3,
        LoggingLevel::Error => 4,
        LoggingLevel::Critical => 5,
        LoggingLevel::Alert => 6,
        LoggingLevel::Emergency => 7,
    }
}
