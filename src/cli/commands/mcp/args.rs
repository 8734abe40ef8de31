//! The arguments of each MCP tool, declared once: a tool takes its CLI verb's own argument struct
//! (in `commands/*.rs`, which derives clap's `Args`, serde's `Deserialize` and schemars'
//! `JsonSchema`, its doc comments both the `--help` lines and the schema's descriptions, its
//! defaults both clap's and the schema's), plus the scope the CLI takes as the global `--scope`.
//! What differs between the two front ends is said where it differs: the fields a tool does not
//! take carry `#[serde(skip)]`, the ones only a tool takes `#[arg(skip)]`, and `-` never reads
//! stdin in a tool call ([`crate::cli::context::Context::tool_call`]).

use schemars::JsonSchema;
use serde::Deserialize;
use somna::Error;

use crate::cli::commands::session::{self, SessionCmd};
use crate::cli::commands::{lifecycle, recall, search, wake, Command};

/// A tool call as the CLI command it runs, and its scope (`--scope`; several joined with commas).
pub struct Call {
    /// The command, with the arguments the tool was given.
    pub command: Command,
    /// The scope argument, when given.
    pub scope: Option<String>,
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

/// A verb's arguments with the scope it runs in.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "{T}")]
pub struct Scoped<T> {
    /// The scope; the server's scope when omitted.
    pub scope: Option<String>,
    /// The verb's own arguments.
    #[serde(flatten)]
    pub args: T,
}

/// A verb's arguments with the scope or scopes it reads (`wake`, `recall`).
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
#[schemars(rename = "{T}")]
pub struct Scopes<T> {
    /// The scope; the server's scope when omitted.
    pub scope: Option<String>,
    /// Several scopes instead: one section each, sharing the budget.
    pub scopes: Option<Vec<String>>,
    /// The verb's own arguments.
    #[serde(flatten)]
    pub args: T,
}

impl<T> Scopes<T> {
    /// `scope` or `scopes` (not both) as the `--scope` value, and the verb's arguments.
    fn split(self) -> Result<(Option<String>, T), Error> {
        let scope = match (self.scope, self.scopes) {
            (Some(_), Some(_)) => {
                return Err(Error::Invalid {
                    what: "arguments",
                    reason: "give scope or scopes, not both".into(),
                })
            }
            (s, None) => s,
            (None, Some(v)) if v.is_empty() => None,
            (None, Some(v)) => Some(v.join(",")),
        };
        Ok((scope, self.args))
    }
}

/// No arguments: the verbs' own empty argument struct.
pub use crate::cli::verb::NoArgs;

/// Builds a verb that runs in a scope: `command` of the arguments, in the scope given.
pub fn scoped<T>(v: serde_json::Value, command: fn(T) -> Command) -> Result<Call, Error>
where
    T: for<'de> Deserialize<'de>,
{
    let a: Scoped<T> = parse(v)?;
    Ok(Call {
        command: command(a.args),
        scope: a.scope,
    })
}

/// Builds a verb that takes no scope (the sessions, the grants, the store's checks).
pub fn unscoped<T>(v: serde_json::Value, command: fn(T) -> Command) -> Result<Call, Error>
where
    T: for<'de> Deserialize<'de>,
{
    Ok(Call {
        command: command(parse(v)?),
        scope: None,
    })
}

/// Builds a verb that reads a scope or several (`scope` or `scopes`): `command` of the
/// arguments, in the scopes given.
fn in_scopes<T>(v: serde_json::Value, command: impl FnOnce(T) -> Command) -> Result<Call, Error>
where
    T: for<'de> Deserialize<'de>,
{
    let (scope, a) = parse::<Scopes<T>>(v)?.split()?;
    Ok(Call {
        command: command(a),
        scope,
    })
}

/// Builds `wake` (the byte budget at most the server's, and the server's when not given).
pub fn wake(v: serde_json::Value, max_bytes: usize) -> Result<Call, Error> {
    in_scopes(v, |mut a: wake::WakeArgs| {
        a.bytes = Some(a.bytes.unwrap_or(max_bytes).min(max_bytes));
        Command::Wake(a)
    })
}

/// Builds `recall` (its lines within `bytes`, the server's budget).
pub fn recall(v: serde_json::Value, bytes: usize) -> Result<Call, Error> {
    in_scopes(v, |mut a: recall::RecallArgs| {
        a.bytes = Some(bytes);
        Command::Recall(a)
    })
}

/// Builds `search` (its lines within `bytes`, the server's budget; the vector arrives as
/// numbers, not as a file).
pub fn search(v: serde_json::Value, bytes: usize) -> Result<Call, Error> {
    in_scopes(v, |mut a: search::SearchArgs| {
        a.bytes = Some(bytes);
        Command::Search(a)
    })
}

/// What `decide` records: one tool for the CLI's three verbs.
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

/// The arguments of `decide`: the scope and the action, then those of `accept`, `deprecate` and
/// `retract`.
// Not `Scoped<Decide>`: serde refuses the fields of a struct flattened twice as unknown.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Decide {
    /// The scope; the server's scope when omitted.
    pub scope: Option<String>,
    /// accept (it is true), deprecate (no longer current) or retract (it was wrong).
    pub action: Action,
    /// The arguments of the verb.
    #[serde(flatten)]
    pub args: lifecycle::DecideArgs,
}

/// Builds `accept`, `deprecate` or `retract`.
pub fn decide(v: serde_json::Value, _: usize) -> Result<Call, Error> {
    let d: Decide = parse(v)?;
    let command = match d.action {
        Action::Accept => Command::Accept(d.args),
        Action::Deprecate => Command::Deprecate(d.args),
        Action::Retract => Command::Retract(d.args),
    };
    Ok(Call {
        command,
        scope: d.scope,
    })
}

/// A `session` verb.
pub fn session(cmd: SessionCmd) -> Command {
    Command::Session(session::SessionArgs { cmd })
}

/// `session_load`: `session load`, or with a limit `session items --limit N`.
pub fn session_load(a: session::ItemsArgs) -> Command {
    session(match a.limit {
        Some(_) => SessionCmd::Items(a),
        None => SessionCmd::Load(session::IdArgs { id: a.id }),
    })
}
