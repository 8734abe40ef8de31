//! The arguments of each MCP tool, declared once: a tool takes its CLI verb's own argument struct
//! (in `commands/*.rs`, which derives clap's `Args`, serde's `Deserialize` and schemars'
//! `JsonSchema`, its doc comments both the `--help` lines and the schema's descriptions, its
//! defaults both clap's and the schema's), plus the scope the CLI takes as the global `--scope`.
//! What differs between the two front ends is said where it differs: the fields a tool does not
//! take carry `#[serde(skip)]`, the ones only a tool takes `#[arg(skip)]`, and `-` never reads
//! stdin in a tool call ([`crate::cli::globals::Context::tool_call`]).

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

/// No arguments.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

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

/// Builds `wake` (the byte budget at most the server's, and the server's when not given).
pub fn wake(v: serde_json::Value, max_bytes: usize) -> Result<Call, Error> {
    let (scope, mut a): (_, wake::WakeArgs) = parse::<Scopes<_>>(v)?.split()?;
    a.bytes = Some(a.bytes.unwrap_or(max_bytes).min(max_bytes));
    Ok(Call {
        command: Command::Wake(a),
        scope,
    })
}

/// Builds `recall` (its lines within `bytes`, the server's budget).
pub fn recall(v: serde_json::Value, bytes: usize) -> Result<Call, Error> {
    let (scope, mut a): (_, recall::RecallArgs) = parse::<Scopes<_>>(v)?.split()?;
    a.bytes = Some(bytes);
    Ok(Call {
        command: Command::Recall(a),
        scope,
    })
}

/// Builds `search` (its lines within `bytes`, the server's budget; the vector arrives as
/// numbers, not as a file).
pub fn search(v: serde_json::Value, bytes: usize) -> Result<Call, Error> {
    let (scope, mut a): (_, search::SearchArgs) = parse::<Scopes<_>>(v)?.split()?;
    a.bytes = Some(bytes);
    Ok(Call {
        command: Command::Search(a),
        scope,
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

#[cfg(test)]
mod tests {
    use clap::{CommandFactory, Parser};
    use rmcp::handler::server::common::schema_for_type;
    use serde_json::{json, Value};

    use super::super::tools::TOOLS;
    use super::Scoped;
    use crate::cli::commands::note::NoteArgs;
    use crate::cli::globals::Cli;

    /// The command and scope a tool call builds, as text (budget 20,000 bytes).
    fn tool(name: &str, arguments: Value) -> Result<String, String> {
        let spec = TOOLS
            .iter()
            .find(|t| t.name == name)
            .ok_or("no such tool")?;
        let c = (spec.build)(arguments, 20_000).map_err(|e| e.to_string())?;
        Ok(format!("{:?} in {:?}", c.command, c.scope))
    }

    /// The command and scope a command line parses to, as text.
    fn cli(words: &[&str]) -> String {
        let argv = ["somna", "--scope", "s"].iter().chain(words);
        let c = Cli::try_parse_from(argv).unwrap();
        format!("{:?} in {:?}", c.command, Some(c.scope))
    }

    /// A tool call and the command line of its verb give the same arguments, defaults included
    /// (each pair: the tool, its JSON without the scope, the command line).
    #[test]
    fn a_tool_call_and_its_command_line_give_the_same_arguments() {
        let cases: &[(&str, Value, &[&str])] = &[
            ("wake", json!({}), &["wake", "--bytes", "20000"]),
            (
                "wake",
                json!({"part": 2, "total": 7, "lines": 5}),
                &["wake", "2", "7", "--lines", "5", "--bytes", "20000"],
            ),
            ("note", json!({"text": "x"}), &["note", "x"]),
            (
                "note",
                json!({"text": "x", "kind": "decision", "supersedes": [3, 4], "key": "k", "source": "me"}),
                &[
                    "note",
                    "x",
                    "--kind",
                    "decision",
                    "--supersedes",
                    "3",
                    "--supersedes",
                    "4",
                    "--key",
                    "k",
                    "--source",
                    "me",
                ],
            ),
            (
                "recall",
                json!({"pattern": "a b", "words": true, "limit": 2}),
                &[
                    "recall", "a b", "--words", "--limit", "2", "--bytes", "20000",
                ],
            ),
            ("zoom", json!({"block": "0-1"}), &["zoom", "0-1"]),
            ("show", json!({"id": 3}), &["show", "3"]),
            ("why", json!({"block": "0-1"}), &["why", "0-1"]),
            ("pending", json!({}), &["pending"]),
            ("nap", json!({}), &["nap"]),
            ("nap", json!({"batch": 3}), &["nap", "--batch", "3"]),
            ("forget", json!({"block": "2-3"}), &["forget", "2-3"]),
            (
                "decide",
                json!({"id": 3, "action": "retract", "why": "w"}),
                &["retract", "3", "--why", "w"],
            ),
            (
                "redact",
                json!({"id": 3, "reason": "r"}),
                &["redact", "3", "--reason", "r"],
            ),
            ("policy", json!({}), &["policy"]),
            (
                "policy",
                json!({"settings": ["inference=accepted"]}),
                &["policy", "inference=accepted"],
            ),
        ];
        for (name, arguments, words) in cases {
            let mut scoped = arguments.clone();
            scoped["scope"] = json!("s");
            assert_eq!(tool(name, scoped), Ok(cli(words)), "{name} {arguments}");
        }
    }

    /// The same for the tools that take no scope.
    #[test]
    fn an_unscoped_tool_call_and_its_command_line_give_the_same_arguments() {
        let unscoped: &[(&str, Value, &[&str])] = &[
            (
                "session_load",
                json!({"id": "i"}),
                &["session", "load", "i"],
            ),
            (
                "session_load",
                json!({"id": "i", "limit": 2}),
                &["session", "items", "i", "--limit", "2"],
            ),
            (
                "session_save",
                json!({"id": "i", "messages": []}),
                &["session", "save", "i"],
            ),
            (
                "session_append",
                json!({"id": "i", "items": [], "key": "k"}),
                &["session", "append", "i", "--key", "k"],
            ),
            ("session_list", json!({}), &["session", "list"]),
            (
                "session_history",
                json!({"id": "i"}),
                &["session", "history", "i"],
            ),
            (
                "grant",
                json!({"principal": "bob", "access": "read", "scope": "t/"}),
                &["grant", "bob", "read", "t/"],
            ),
            (
                "revoke",
                json!({"principal": "bob", "access": "read", "scope": "t/"}),
                &["revoke", "bob", "read", "t/"],
            ),
            ("grants", json!({}), &["grants"]),
            ("stats", json!({}), &["stats"]),
            ("verify", json!({}), &["verify"]),
        ];
        for (name, arguments, words) in unscoped {
            let same = cli(words).replace("in Some(\"s\")", "in None");
            assert_eq!(
                tool(name, arguments.clone()),
                Ok(same),
                "{name} {arguments}"
            );
        }
    }

    /// The kind of a note given none is one default, in `--help` and in the tool's schema.
    #[test]
    fn the_note_kind_default_is_declared_once() {
        let cmd = Cli::command();
        let note = cmd.find_subcommand("note").unwrap();
        let kind = note.get_arguments().find(|a| a.get_id() == "kind").unwrap();
        let clap_default: Vec<_> = kind
            .get_default_values()
            .iter()
            .map(|v| v.to_str())
            .collect();
        let schema = schema_for_type::<Scoped<NoteArgs>>();
        let tool_default = &schema["properties"]["kind"]["default"];
        assert_eq!(clap_default, [tool_default.as_str()]);
        assert_eq!(tool_default, "observation");
        assert!(schema["required"] == json!(["text"]), "{schema:?}");
    }

    /// Unknown arguments, those only the command line takes, and a scope given twice are
    /// refused.
    #[test]
    fn arguments_a_tool_does_not_take_are_refused() {
        for (name, arguments) in [
            ("note", json!({"text": "x", "bogus": 1})),
            ("note", json!({"text": "x", "force": true})),
            ("note", json!({"text": "x", "status": "accepted"})),
            ("recall", json!({"pattern": "x", "bytes": 5})),
            ("nap", json!({"apply": "/etc/passwd"})),
            ("decide", json!({"id": 1, "action": "accept", "bogus": 1})),
            ("wake", json!({"scope": "a", "scopes": ["b"]})),
            ("grants", json!({"x": 1})),
        ] {
            assert!(tool(name, arguments.clone()).is_err(), "{name} {arguments}");
        }
    }
}
