//! The typed results of the session verbs the MCP tools run (`session_load`, `session_list`,
//! `session_history`), each the one library call of its verb and its one text, and the texts of
//! `session_save` and `session_append`, which return the library's own outcomes. The CLI prints
//! the text or (`--json`) the JSON; the tool returns the JSON as its structured content, its
//! output schema derived from the type.

#[cfg(feature = "mcp")]
use schemars::JsonSchema;
use serde::{Serialize, Serializer};
use somna::session::{SaveOutcome, SessionAppended, SessionInfo};
use somna::text;
use somna::{Error, Store};

use super::session_args::{IdArgs, ItemsArgs, ListArgs};
use crate::cli::output::{json_array, plural};

/// One session message: the JSON object it was stored as, kept byte for byte.
#[derive(Debug)]
pub struct Message(pub String);

impl Serialize for Message {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let raw: &serde_json::value::RawValue =
            serde_json::from_str(&self.0).map_err(serde::ser::Error::custom)?;
        raw.serialize(s)
    }
}

#[cfg(feature = "mcp")]
impl JsonSchema for Message {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Message".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "One message: the JSON object it was stored as.",
            "type": "object",
        })
    }
}

/// A session's messages, oldest first (`session load`, `session items`).
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(transparent)]
pub struct Messages {
    /// The messages that decoded, oldest first.
    pub items: Vec<Message>,
    /// The sequence numbers of the damaged messages that were skipped (not in the JSON: the
    /// verb names them on stderr).
    #[serde(skip)]
    #[cfg_attr(feature = "mcp", schemars(skip))]
    pub unreadable: Vec<u64>,
}

impl Messages {
    /// The session's messages read past damage, or `None` when it does not exist.
    pub fn load(store: &Store, id: &str) -> Result<Option<Messages>, Error> {
        Ok(store.session_load_lossy(id)?.map(Messages::from))
    }

    /// The session's newest `a.limit` messages (all without one), oldest first.
    pub fn items(store: &Store, a: &ItemsArgs) -> Result<Messages, Error> {
        Ok(Messages::from(store.session_items_lossy(&a.id, a.limit)?))
    }

    /// Its text: the JSON array of the messages, each as stored.
    pub fn render(&self) -> String {
        json_array(self.items.iter().map(|m| &m.0))
    }

    /// The line naming the damaged messages of session `id`, if any.
    pub fn damage_note(&self, id: &str) -> Option<String> {
        let r = somna::session::SessionItems {
            items: Vec::new(),
            unreadable: self.unreadable.clone(),
        };
        r.damage_note(id)
    }
}

impl From<somna::session::SessionItems> for Messages {
    fn from(r: somna::session::SessionItems) -> Self {
        Messages {
            items: r.items.into_iter().map(Message).collect(),
            unreadable: r.unreadable,
        }
    }
}

// `session save` and `session append` return the library's own outcomes (`SaveOutcome`,
// `SessionAppended`, which derive `JsonSchema` with the `schemars` feature): their texts are here.
/// The text of what `session save` did: one line.
pub fn saved_text(o: &SaveOutcome) -> String {
    format!(
        "Saved session at revision {}: {} kept, {} written, {} archived.\n",
        o.revision, o.kept, o.written, o.archived
    )
}

/// The text of what `session append` did: one line, which says when the key was seen before.
pub fn appended_text(o: &SessionAppended) -> String {
    let n = plural(o.count, "item", "items");
    match o.replayed {
        true => format!(
            "Already appended (key seen before): {n} at revision {}.\n",
            o.revision
        ),
        false => format!("Appended {n} at revision {}.\n", o.revision),
    }
}

/// The sessions, sorted by id, with their metadata.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(transparent)]
pub struct SessionList(pub Vec<SessionInfo>);

impl SessionList {
    /// The sessions whose id starts with `a.prefix`, after `a.after`, at most `a.limit`.
    pub fn call(store: &Store, a: &ListArgs) -> Result<SessionList, Error> {
        let l = store.session_list(&a.prefix, a.after.as_deref(), a.limit)?;
        Ok(SessionList(l))
    }

    /// Its text: one id a line.
    pub fn render(&self) -> String {
        let line = |s: &SessionInfo| format!("{}\n", text::display_safe(&s.id));
        self.0.iter().map(line).collect()
    }
}

/// A session's archive: the messages saves have dropped, oldest first.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(transparent)]
pub struct History(pub Vec<ArchivedLine>);

/// One archived message.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
pub struct ArchivedLine {
    /// When a save dropped it (RFC 3339, UTC).
    pub archived_at: String,
    /// The message, as it was stored.
    pub message: Message,
}

impl History {
    /// The archive of session `a.id` (empty when it has none).
    pub fn call(store: &Store, a: &IdArgs) -> Result<History, Error> {
        let lines = store
            .session_archived(&a.id)?
            .into_iter()
            .map(|e| ArchivedLine {
                archived_at: text::rfc3339_of(e.archived_us),
                message: Message(e.message),
            });
        Ok(History(lines.collect()))
    }

    /// Its text: the JSON array, on one line, each message as stored.
    pub fn render(&self) -> String {
        let mut s = String::from("[");
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            s.push_str(&format!(
                "{{\"archived_at\":{},\"message\":{}}}",
                serde_json::to_string(&e.archived_at).unwrap_or_default(),
                e.message.0
            ));
        }
        s.push(']');
        s
    }
}
