//! The arguments of each MCP tool (their JSON Schemas are derived from these structs; doc
//! comments become descriptions), and how each becomes the CLI command it runs.

use engram::Error;
use schemars::JsonSchema;
use serde::Deserialize;

use crate::commands::{
    inspect, lifecycle, note, recall, search, session, tree, trust, wake, Command,
};

/// A tool call as the CLI command it runs: the command, the scope (`--scope`; several joined
/// with commas) and what `-` reads (text and JSON passed as arguments, never the server's stdin).
pub struct Call {
    /// The command, as clap would have parsed it.
    pub command: Command,
    /// The scope argument, when given.
    pub scope: Option<String>,
    /// What `-` reads.
    pub stdin: Option<String>,
}

impl Call {
    fn new(command: Command, scope: Option<String>) -> Self {
        Call {
            command,
            scope,
            stdin: None,
        }
    }
}

/// Parses a tool's arguments (a missing `arguments` object counts as empty).
pub fn parse<T: for<'de> Deserialize<'de>>(v: serde_json::Value) -> Result<T, Error> {
    let v = if v.is_null() {
        serde_json::json!({})
    } else {
        v
    };
    serde_json::from_value(v).map_err(|e| Error::Invalid {
        what: "arguments",
        reason: e.to_string(),
    })
}

/// Arguments of `wake`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WakeIn {
    /// The scope; the server's scope when omitted.
    pub scope: Option<String>,
    /// Several scopes, one section each, sharing the budget.
    pub scopes: Option<Vec<String>>,
    /// Every scope you may read.
    pub all: Option<bool>,
    /// Budget in lines of memory (default 96).
    pub lines: Option<usize>,
    /// Budget in bytes (default and maximum: the server's result budget, 20,000).
    pub bytes: Option<usize>,
    /// Which part to read (from 1), when the first part said there are several.
    pub part: Option<usize>,
    /// The number of memories the first part reported (pins the snapshot across parts).
    pub total: Option<u64>,
}

/// Builds `wake` (the byte budget is capped at the server's).
pub fn wake(a: WakeIn, max_bytes: usize) -> Result<Call, Error> {
    let scope = scopes(a.scope, a.scopes)?;
    let bytes = Some(a.bytes.unwrap_or(max_bytes).min(max_bytes));
    let args = wake::WakeArgs {
        part: a.part,
        total: a.total,
        lines: a.lines,
        bytes,
        all: a.all.unwrap_or(false),
    };
    Ok(Call::new(Command::Wake(args), scope))
}

/// `scope` or `scopes` (not both) as the `--scope` value.
fn scopes(scope: Option<String>, scopes: Option<Vec<String>>) -> Result<Option<String>, Error> {
    match (scope, scopes) {
        (Some(_), Some(_)) => Err(Error::Invalid {
            what: "arguments",
            reason: "give scope or scopes, not both".into(),
        }),
        (s, None) => Ok(s),
        (None, Some(v)) if v.is_empty() => Ok(None),
        (None, Some(v)) => Ok(Some(v.join(","))),
    }
}

/// Arguments of `note`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoteIn {
    /// The memory: one line that will still matter later, no control characters.
    pub text: String,
    /// The scope; the server's scope when omitted.
    pub scope: Option<String>,
    /// statement, observation (default), inference, decision or task.
    pub kind: Option<String>,
    /// Who or what this came from (the user, a file, a tool).
    pub source: Option<String>,
    /// Where it came from (URL, path).
    pub uri: Option<String>,
    /// When it was observed (YYYY-MM-DD or RFC 3339; default now).
    pub observed: Option<String>,
    /// When it stops being valid (YYYY-MM-DD or RFC 3339).
    pub valid_until: Option<String>,
    /// Ids of earlier memories this one replaces.
    pub supersedes: Option<Vec<u64>>,
    /// Ids of earlier memories this one contradicts.
    pub conflicts_with: Option<Vec<u64>>,
    /// Idempotency key: a retry with the same key and text writes nothing and returns the same
    /// id. Pass one whenever you might retry.
    pub key: Option<String>,
}

/// Builds `note` (the text goes through `-`, so that any text, `-` included, is taken as is).
pub fn note(a: NoteIn) -> Call {
    let args = note::NoteArgs {
        text: "-".into(),
        key: a.key,
        kind: a.kind.unwrap_or_else(|| "observation".into()),
        status: None,
        source: a.source,
        uri: a.uri,
        observed: a.observed,
        valid_until: a.valid_until,
        supersedes: a.supersedes.unwrap_or_default(),
        conflicts_with: a.conflicts_with.unwrap_or_default(),
        force: false,
        vector: None,
    };
    Call {
        command: Command::Note(args),
        scope: a.scope,
        stdin: Some(a.text),
    }
}

/// Arguments of `recall`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RecallIn {
    /// A regular expression (case-insensitive) matched against each line `#id YYYY-MM-DD text`;
    /// with `words`, plain words instead.
    pub pattern: String,
    /// Take the pattern as plain words: all must occur, in any order, as literals. Use this for
    /// natural-language queries.
    pub words: Option<bool>,
    /// The scope; the server's scope when omitted.
    pub scope: Option<String>,
    /// Several scopes.
    pub scopes: Option<Vec<String>>,
    /// Every scope you may read.
    pub all: Option<bool>,
    /// At most this many matches (the newest).
    pub limit: Option<usize>,
    /// Only memories observed on or after this date.
    pub since: Option<String>,
    /// Only memories observed before this date.
    pub until: Option<String>,
    /// Only memories of this kind.
    pub kind: Option<String>,
    /// Only memories with an id below this one: pass the `next_before` of a cut result to read
    /// older matches.
    pub before: Option<u64>,
}

/// Builds `recall` (its lines within `bytes`).
pub fn recall(a: RecallIn, bytes: usize) -> Result<Call, Error> {
    let scope = scopes(a.scope, a.scopes)?;
    let args = recall::RecallArgs {
        pattern: a.pattern,
        limit: a.limit,
        since: a.since,
        until: a.until,
        kind: a.kind,
        words: a.words.unwrap_or(false),
        before: a.before,
        bytes: Some(bytes),
        all: a.all.unwrap_or(false),
    };
    Ok(Call::new(Command::Recall(args), scope))
}

/// Arguments of `search`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchIn {
    /// What you are looking for, in plain words (any of them; memories holding more, and
    /// rarer, of them rank higher). Not a regular expression.
    pub query: String,
    /// The scope; the server's scope when omitted.
    pub scope: Option<String>,
    /// Several scopes (each ranked with its own statistics, merged by score).
    pub scopes: Option<Vec<String>>,
    /// Every scope you may read.
    pub all: Option<bool>,
    /// At most this many hits (default 10).
    pub limit: Option<usize>,
    /// Skip this many hits: pass the `next_offset` of a cut result for the next page.
    pub offset: Option<usize>,
    /// Only memories observed on or after this date.
    pub since: Option<String>,
    /// Only memories observed before this date.
    pub until: Option<String>,
    /// Only memories of this kind (no summaries).
    pub kind: Option<String>,
    /// Also rank retracted, superseded and deprecated memories (shown marked).
    pub include_inactive: Option<bool>,
    /// The query's embedding, when the memories carry vectors: fused with the words.
    pub vector: Option<Vec<f32>>,
    /// `lexical`, `hybrid` or `vector` (default: lexical, hybrid with a vector).
    pub mode: Option<String>,
}

/// Builds `search` (its lines within `bytes`; a vector is passed as `-`, its JSON as the input).
pub fn search(a: SearchIn, bytes: usize) -> Result<Call, Error> {
    let scope = scopes(a.scope, a.scopes)?;
    let stdin = a.vector.map(|v| serde_json::json!(v).to_string());
    let args = search::SearchArgs {
        query: a.query,
        limit: a.limit,
        offset: a.offset,
        since: a.since,
        until: a.until,
        kind: a.kind,
        bytes: Some(bytes),
        all: a.all.unwrap_or(false),
        include_inactive: a.include_inactive.unwrap_or(false),
        vector: stdin.as_ref().map(|_| "-".to_string()),
        mode: a.mode,
        k1: None,
        b: None,
        neighbour_weight: None,
        neighbours: None,
    };
    Ok(Call {
        command: Command::Search(args),
        scope,
        stdin,
    })
}

/// Arguments of the tools that name a block (`zoom`, `why`, `forget`).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct BlockIn {
    /// The block, as `LO-HI` (e.g. 16-31), as wake and merge prompts print it.
    pub block: String,
    /// The scope; the server's scope when omitted.
    pub scope: Option<String>,
}

/// Builds `zoom`.
pub fn zoom(a: BlockIn) -> Call {
    Call::new(Command::Zoom(tree::ZoomArgs { block: a.block }), a.scope)
}

/// Builds `why`.
pub fn why(a: BlockIn) -> Call {
    Call::new(Command::Why(inspect::WhyArgs { block: a.block }), a.scope)
}

/// Builds `forget`.
pub fn forget(a: BlockIn) -> Call {
    Call::new(
        Command::Forget(tree::ForgetArgs { block: a.block }),
        a.scope,
    )
}

/// Arguments of `show`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ShowIn {
    /// The memory id (the `#N` of a line).
    pub id: u64,
    /// The scope; the server's scope when omitted.
    pub scope: Option<String>,
}

/// Builds `show`.
pub fn show(a: ShowIn) -> Call {
    Call::new(Command::Show(inspect::ShowArgs { id: a.id }), a.scope)
}

/// Arguments of `pending`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PendingIn {
    /// The scope; the server's scope when omitted.
    pub scope: Option<String>,
    /// At most this many blocks.
    pub limit: Option<usize>,
}

/// Builds `pending`.
pub fn pending(a: PendingIn) -> Call {
    Call::new(
        Command::Pending(tree::PendingArgs { limit: a.limit }),
        a.scope,
    )
}

/// One answer to a merge prompt.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Answer {
    /// The block answered, as the prompt names it (`LO-HI`).
    pub block: String,
    /// The one-line summary; cite the memories each claim rests on: `claim [#3, #7]`.
    pub summary: String,
}

/// Arguments of `nap`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NapIn {
    /// The answers to store, in one transaction. Without any, the next merge prompt is returned.
    pub answers: Option<Vec<Answer>>,
    /// Instead: up to this many independent merge prompts, to answer together.
    pub batch: Option<usize>,
    /// The scope; the server's scope when omitted.
    pub scope: Option<String>,
}

/// Builds `nap`: the next prompt, a batch of prompts, or the answers as `nap --apply -`.
pub fn nap(a: NapIn) -> Result<Call, Error> {
    let answers = a.answers.unwrap_or_default();
    let mut args = tree::NapArgs {
        block: None,
        text: None,
        batch: a.batch,
        apply: None,
    };
    if answers.is_empty() {
        return Ok(Call::new(Command::Nap(args), a.scope));
    }
    if a.batch.is_some() {
        return Err(Error::Invalid {
            what: "arguments",
            reason: "give answers or batch, not both".into(),
        });
    }
    let mut lines = String::new();
    for x in answers {
        if x.block.contains(['\t', '\n']) || x.summary.contains(['\t', '\n']) {
            return Err(Error::Invalid {
                what: "summary",
                reason: "a block and its summary are one line each, without tabs".into(),
            });
        }
        lines.push_str(&format!("{}\t{}\n", x.block, x.summary));
    }
    args.apply = Some("-".into());
    Ok(Call {
        command: Command::Nap(args),
        scope: a.scope,
        stdin: Some(lines),
    })
}

/// What `decide` records.
#[derive(Deserialize, JsonSchema, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// It is true.
    Accept,
    /// It is no longer current.
    Deprecate,
    /// It was wrong.
    Retract,
}

/// Arguments of `decide`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DecideIn {
    /// The memory id.
    pub id: u64,
    /// accept (it is true), deprecate (no longer current) or retract (it was wrong).
    pub action: Action,
    /// Why, recorded in the event.
    pub why: Option<String>,
    /// The scope; the server's scope when omitted.
    pub scope: Option<String>,
}

/// Builds `accept`, `deprecate` or `retract`.
pub fn decide(a: DecideIn) -> Call {
    let args = lifecycle::DecideArgs {
        id: a.id,
        why: a.why,
    };
    let command = match a.action {
        Action::Accept => Command::Accept(args),
        Action::Deprecate => Command::Deprecate(args),
        Action::Retract => Command::Retract(args),
    };
    Call::new(command, a.scope)
}

/// Arguments of `redact`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RedactIn {
    /// The memory id.
    pub id: u64,
    /// Why (recorded in the event).
    pub reason: String,
    /// The scope; the server's scope when omitted.
    pub scope: Option<String>,
}

/// Builds `redact`.
pub fn redact(a: RedactIn) -> Call {
    let args = lifecycle::RedactArgs {
        id: a.id,
        reason: a.reason,
    };
    Call::new(Command::Redact(args), a.scope)
}

/// What a grant allows.
#[derive(Deserialize, JsonSchema, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum Right {
    /// Reading the scope.
    Read,
    /// Writing the scope.
    Write,
}

impl Right {
    /// The CLI's word for it.
    fn word(self) -> String {
        match self {
            Right::Read => "read".into(),
            Right::Write => "write".into(),
        }
    }
}

/// Arguments of `grant` and `revoke`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GrantIn {
    /// The principal.
    pub principal: String,
    /// read or write.
    pub access: Right,
    /// A scope, or a prefix ending in `/` or `:`.
    pub scope: String,
}

/// Builds `grant`.
pub fn grant(a: GrantIn) -> Call {
    let args = trust::GrantArgs {
        who: a.principal,
        access: a.access.word(),
        target: a.scope,
    };
    Call::new(Command::Grant(args), None)
}

/// Builds `revoke`.
pub fn revoke(a: GrantIn) -> Call {
    let args = trust::RevokeArgs {
        who: a.principal,
        access: a.access.word(),
        target: a.scope,
    };
    Call::new(Command::Revoke(args), None)
}

/// No arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoneIn {}

/// Builds `grants`, `stats` or `verify`.
pub fn bare(command: Command) -> Call {
    Call::new(command, None)
}

/// Arguments of `policy`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PolicyIn {
    /// The scope; the server's scope when omitted.
    pub scope: Option<String>,
    /// Settings to change: inference=proposed|accepted, require-source=KIND,...|none,
    /// secrets=refuse|allow, citations=required|optional. None: only show the policy.
    pub settings: Option<Vec<String>>,
}

/// Builds `policy`.
pub fn policy(a: PolicyIn) -> Call {
    let args = trust::PolicyArgs {
        settings: a.settings.unwrap_or_default(),
    };
    Call::new(Command::Policy(args), a.scope)
}

/// Arguments of `session_load`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionIn {
    /// The session id.
    pub id: String,
    /// Only the newest N messages.
    pub limit: Option<usize>,
}

/// Arguments of `session_history`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionIdIn {
    /// The session id.
    pub id: String,
}

/// Builds `session_load` (`session items --limit N` with a limit).
pub fn session_load(a: SessionIn) -> Call {
    let cmd = match a.limit {
        Some(limit) => session::SessionCmd::Items(session::ItemsArgs {
            id: a.id,
            limit: Some(limit),
        }),
        None => session::SessionCmd::Load(session::IdArgs { id: a.id }),
    };
    Call::new(Command::Session(session::SessionArgs { cmd }), None)
}

/// Builds `session_history`.
pub fn session_history(a: SessionIdIn) -> Call {
    let cmd = session::SessionCmd::History(session::IdArgs { id: a.id });
    Call::new(Command::Session(session::SessionArgs { cmd }), None)
}

/// Arguments of `session_save`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionSaveIn {
    /// The session id.
    pub id: String,
    /// The whole list of messages (JSON objects); what it drops goes to the archive.
    pub messages: Vec<serde_json::Value>,
    /// Fail with conflict unless the session is at this revision.
    pub expect_revision: Option<u64>,
}

/// Builds `session_save`.
pub fn session_save(a: SessionSaveIn) -> Result<Call, Error> {
    let cmd = session::SessionCmd::Save(session::SaveArgs {
        id: a.id,
        expect_revision: a.expect_revision,
    });
    let mut call = Call::new(Command::Session(session::SessionArgs { cmd }), None);
    call.stdin = Some(json_text(&a.messages)?);
    Ok(call)
}

/// Arguments of `session_append`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionAppendIn {
    /// The session id (created if new).
    pub id: String,
    /// The messages to add at the end (JSON objects).
    pub items: Vec<serde_json::Value>,
    /// Idempotency key: a retry with the same key appends nothing.
    pub key: Option<String>,
    /// Fail with conflict unless the session is at this revision.
    pub expect_revision: Option<u64>,
}

/// Builds `session_append`.
pub fn session_append(a: SessionAppendIn) -> Result<Call, Error> {
    let cmd = session::SessionCmd::Append(session::AppendArgs {
        id: a.id,
        key: a.key,
        expect_revision: a.expect_revision,
    });
    let mut call = Call::new(Command::Session(session::SessionArgs { cmd }), None);
    call.stdin = Some(json_text(&a.items)?);
    Ok(call)
}

/// Arguments of `session_list`.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionListIn {
    /// Only ids starting with this.
    pub prefix: Option<String>,
    /// At most this many.
    pub limit: Option<usize>,
    /// Only ids after this one (the cursor: the last id of the previous page).
    pub after: Option<String>,
}

/// Builds `session_list`.
pub fn session_list(a: SessionListIn) -> Call {
    let cmd = session::SessionCmd::List(session::ListArgs {
        prefix: a.prefix.unwrap_or_default(),
        limit: a.limit,
        after: a.after,
    });
    Call::new(Command::Session(session::SessionArgs { cmd }), None)
}

/// A JSON array of messages as text, for `-`.
fn json_text(v: &[serde_json::Value]) -> Result<String, Error> {
    serde_json::to_string(v).map_err(|e| Error::Invalid {
        what: "JSON",
        reason: e.to_string(),
    })
}
