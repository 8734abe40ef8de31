//! The session calls on [`Store`]: each one transaction (a grouped commit for save and append,
//! an audited read for the message reads) around the [`crate::ReadTxn`] or [`crate::WriteTxn`] method of the
//! same name.

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
    /// Removes and returns the newest item; see [`WriteTxn::session_pop`].
    pub fn session_pop(&self, id: &str, expected_revision: Option<u64>) -> Result<Option<String>> {
        self.write(|tx| tx.session_pop(id, expected_revision))
    }
    /// Removes every live item; see [`WriteTxn::session_clear`].
    pub fn session_clear(&self, id: &str) -> Result<u64> {
        self.write(|tx| tx.session_clear(id))
    }
    /// Deletes a session; see [`WriteTxn::session_delete`].
    pub fn session_delete(&self, id: &str) -> Result<bool> {
        self.write(|tx| tx.session_delete(id))
    }
    /// Removes a session's archive; see [`WriteTxn::session_prune`].
    pub fn session_prune(&self, id: &str) -> Result<u64> {
        self.write(|tx| tx.session_prune(id))
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
    /// A session's metadata; see [`ReadTxn::session_info`].
    pub fn session_info(&self, id: &str) -> Result<Option<SessionInfo>> {
        self.read(|r| r.session_info(id))
    }
    /// Lists sessions; see [`ReadTxn::session_list`].
    pub fn session_list(
        &self,
        prefix: &str,
        after: Option<&str>,
        limit: Option<usize>,
    ) -> Result<Vec<SessionInfo>> {
        self.read(|r| r.session_list(prefix, after, limit))
    }
    /// Every session id, sorted.
    pub fn session_ids(&self) -> Result<Vec<String>> {
        self.read(|r| r.session_ids())
    }
    /// The archive of a session; see [`ReadTxn::session_archived`].
    pub fn session_archived(&self, id: &str) -> Result<Vec<Archived>> {
        self.read(|r| r.session_archived(id))
    }
    /// The newest `limit` archived messages; see [`ReadTxn::session_archived_newest`].
    pub fn session_archived_newest(&self, id: &str, limit: usize) -> Result<Vec<Archived>> {
        self.read(|r| r.session_archived_newest(id, limit))
    }
}
