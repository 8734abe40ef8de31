//! The session calls on [`Store`]: each one transaction (a grouped commit for save and append,
//! an audited read for the message reads, a plain one for the rest, declared in one line each)
//! around the [`crate::ReadTxn`] or [`crate::WriteTxn`] method of the same name.

use super::record::{
    session_scope, Archived, Packed, SaveOutcome, SessionAppended, SessionInfo, SessionItems,
};
use crate::error::Result;
use crate::storage::store::Store;
#[cfg(doc)]
use crate::storage::txn::{ReadTxn, WriteTxn};

/// The size of a list (bytes of messages) above which [`Store::session_save`] runs in a
/// transaction of its own instead of group commit's shared one.
const GROUPED_SAVE_BYTES: usize = 1 << 20;

impl Store {
    /// Replaces a session's messages; see [`WriteTxn::session_save`].
    pub fn session_save(
        &self,
        id: &str,
        messages: &[&str],
        expected_revision: Option<u64>,
    ) -> Result<SaveOutcome> {
        if messages.iter().map(|m| m.len()).sum::<usize>() > GROUPED_SAVE_BYTES {
            // A large list is saved in a transaction of the caller's own, from the caller's
            // strings: group commit would need its own copy of them (another thread may run the
            // operation), 0.28-0.39 ms for 4 MB (2,000 messages of 2 KB) with the fresh pages'
            // faults, a quarter of such a save; sharing a sync pays for many small writes at
            // once, not for these.
            return self.write(|tx| tx.session_save(id, messages, expected_revision));
        }
        let id = id.to_string();
        // The operation owns its input (group commit may run it on another thread): one copy
        // into one buffer, not one allocation per message (a long session holds thousands).
        let all = Packed::of(messages);
        self.write_grouped(move |tx| {
            let refs = all.refs();
            tx.session_save(&id, &refs, expected_revision)
        })
    }
    /// Appends items; see [`WriteTxn::session_append`].
    pub fn session_append(
        &self,
        id: &str,
        items: &[&str],
        key: Option<&str>,
        expected_revision: Option<u64>,
    ) -> Result<SessionAppended> {
        let id = id.to_string();
        let key = key.map(str::to_string);
        let items: Vec<String> = items.iter().map(|m| m.to_string()).collect();
        self.write_grouped(move |tx| {
            let refs: Vec<&str> = items.iter().map(String::as_str).collect();
            tx.session_append(&id, &refs, key.as_deref(), expected_revision)
        })
    }
    /// Loads a session; see [`ReadTxn::session_load`].
    pub fn session_load(&self, id: &str) -> Result<Option<Vec<String>>> {
        self.audited_as(
            "session load",
            |r| r.session_load(id),
            |m| {
                let n = m.as_ref().map(|v| v.len()).unwrap_or(0);
                (session_scope(id), vec![format!("{n} messages")])
            },
        )
    }
    /// The latest items; see [`ReadTxn::session_items`].
    pub fn session_items(&self, id: &str, limit: Option<usize>) -> Result<Vec<String>> {
        self.audited_as(
            "session items",
            |r| r.session_items(id, limit),
            |m| (session_scope(id), vec![format!("{} items", m.len())]),
        )
    }
    /// The latest items, reading past damaged ones; see [`ReadTxn::session_items_lossy`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = somna::Store::create(dir.path().join("m.redb")).unwrap();
    /// store.session_append("chat", &[r#"{"role":"user","content":"hi"}"#], None, None).unwrap();
    /// let r = store.session_items_lossy("chat", None).unwrap();
    /// assert_eq!(r.items.len(), 1);
    /// assert!(r.unreadable.is_empty() && r.damage_note("chat").is_none());
    /// ```
    pub fn session_items_lossy(&self, id: &str, limit: Option<usize>) -> Result<SessionItems> {
        self.audited_as(
            "session items",
            |r| r.session_items_lossy(id, limit),
            |m| (session_scope(id), vec![format!("{} items", m.items.len())]),
        )
    }
    /// Loads a session, reading past damaged messages; see [`ReadTxn::session_load_lossy`].
    pub fn session_load_lossy(&self, id: &str) -> Result<Option<SessionItems>> {
        self.audited_as(
            "session load",
            |r| r.session_load_lossy(id),
            |m| {
                let n = m.as_ref().map(|v| v.items.len()).unwrap_or(0);
                (session_scope(id), vec![format!("{n} messages")])
            },
        )
    }
}

crate::storage::store::store_calls! {
    /// Removes and returns the newest item; see [`WriteTxn::session_pop`].
    write fn session_pop(id: &str, expected_revision: Option<u64>) -> Option<String>;
    /// Removes every live item; see [`WriteTxn::session_clear`].
    write fn session_clear(id: &str) -> u64;
    /// Deletes a session; see [`WriteTxn::session_delete`].
    write fn session_delete(id: &str) -> bool;
    /// Removes a session's archive; see [`WriteTxn::session_prune`].
    write fn session_prune(id: &str) -> u64;
    /// A session's metadata; see [`ReadTxn::session_info`].
    read fn session_info(id: &str) -> Option<SessionInfo>;
    /// Lists sessions; see [`ReadTxn::session_list`].
    read fn session_list(prefix: &str, after: Option<&str>, limit: Option<usize>)
        -> Vec<SessionInfo>;
    /// Every session id, sorted.
    read fn session_ids() -> Vec<String>;
    /// The archive of a session; see [`ReadTxn::session_archived`].
    read fn session_archived(id: &str) -> Vec<Archived>;
    /// The newest `limit` archived messages; see [`ReadTxn::session_archived_newest`].
    read fn session_archived_newest(id: &str, limit: usize) -> Vec<Archived>;
}
