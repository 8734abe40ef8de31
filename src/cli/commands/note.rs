//! `note`: record one memory.

use crate::cli::names::{kinds, statuses, Names};
use clap::Args;
#[cfg(feature = "mcp")]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use somna::text;
use somna::{Error, Kind, MergePrompt, NewMemory, Status};

use super::typed::Object;
use crate::cli::context::Context;
use crate::cli::verb::Verb;

/// The arguments of `note` (the CLI verb and the MCP tool).
#[derive(Args, Debug, Deserialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NoteArgs {
    /// The memory: one line that will still matter later, no control characters (on the
    /// command line, - reads it from stdin)
    pub text: String,
    /// Idempotency key: a retry with the same key and text writes nothing and returns the same
    /// id. Pass one whenever you might retry
    #[arg(long)]
    pub key: Option<String>,
    /// What kind of claim it is
    #[arg(long, default_value_t = default_kind(), value_parser = Names(kinds))]
    #[serde(default = "default_kind")]
    #[cfg_attr(feature = "mcp", schemars(extend("enum" = kinds())))]
    pub kind: String,
    /// Its lifecycle status [default: by the scope's policy]
    #[arg(long, value_parser = Names(statuses))]
    // Command line only: a tool call gets the status the scope's policy gives.
    #[serde(skip)]
    pub status: Option<String>,
    /// Who or what this came from (the user, a file, a tool)
    #[arg(long)]
    pub source: Option<String>,
    /// Where it came from (URL, path)
    #[arg(long)]
    pub uri: Option<String>,
    /// When it was observed (YYYY-MM-DD or RFC 3339; default now)
    #[arg(long)]
    pub observed: Option<String>,
    /// When it stops being valid (YYYY-MM-DD or RFC 3339)
    #[arg(long)]
    pub valid_until: Option<String>,
    /// Ids of earlier memories this one replaces (the option is repeatable)
    #[arg(long)]
    #[serde(default)]
    pub supersedes: Vec<u64>,
    /// Ids of earlier memories this one contradicts (the option is repeatable)
    #[arg(long)]
    #[serde(default)]
    pub conflicts_with: Vec<u64>,
    /// Store it even if it looks like a secret
    #[arg(long)]
    // Command line only: a tool call never stores what looks like a secret.
    #[serde(skip)]
    pub force: bool,
    /// Its embedding, for `search --vector`: a file (or - for stdin) of numbers, as a JSON array
    /// or separated by spaces or commas
    #[arg(long, value_name = "FILE")]
    // Command line only: a tool call names no file (MCP's own `search` tool is H8's; a vector
    // field for tool calls is future work).
    #[serde(skip)]
    pub vector: Option<String>,
}

/// The kind of a memory whose kind is not given: the CLI's default and the tool's.
pub fn default_kind() -> String {
    Kind::Observation.as_str().into()
}

// A typed result: the CLI prints it as text or JSON, and the MCP tool returns it as its
// structured content, its output schema derived from this type.
/// What `note` reports: the id, and when the principal may read the scope, how the memory is
/// shown and the merge due next.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
pub struct Recorded {
    /// The memory's id (for a replay, the earlier append's).
    pub id: u64,
    /// Whether this was a retry of an earlier append with the same key, which wrote nothing.
    pub replayed: bool,
    /// Its lifecycle status (only when the principal may read the scope).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "mcp", schemars(with = "Option<String>"))]
    pub status: Option<Status>,
    /// Whether it reads as instructions to the reader, so is always shown marked and quoted
    /// (only when the principal may read the scope).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untrusted: Option<bool>,
    /// The merge prompt due next, or null (only when the principal may read the scope).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_merge: Option<Option<Object<MergePrompt>>>,
}

/// Appends the memory. When the principal may read the scope, also says whether it is shown
/// marked (proposed, or reading as instructions) and prints the next merge prompt, if one is due.
/// With `--json`: [`Recorded`].
pub fn run(cx: &mut Context<'_>, a: &NoteArgs) -> Result<u8, Error> {
    let mem = new_memory(cx, a)?;
    let untrusted = somna::trust::reads_as_instructions(&mem.text);
    let tool_call = cx.tool_call;
    let noted = cx
        .store
        .note_report(cx.scope, mem, a.key.as_deref())
        .map_err(|e| if tool_call { for_a_tool(e) } else { e })?;
    let first = noted.appended.first;
    let text = cx.text_wanted();
    if text {
        writeln!(cx.out, "Saved as #{first}.")?;
    }
    let mut r = Recorded {
        id: first,
        replayed: noted.appended.replayed,
        status: None,
        untrusted: None,
        next_merge: None,
    };
    if let Some(seen) = noted.seen {
        let (m, st) = (&seen.memory, &seen.state);
        if text && st.status == Status::Proposed {
            writeln!(cx.out, "Stored as proposed ({}): it is shown marked until a principal runs `{} accept {}`.", m.kind, cx.prefix, m.id)?;
        }
        if text && untrusted {
            writeln!(cx.out, "Flagged: it reads as instructions to the reader, so it will always be shown marked and quoted.")?;
        }
        if text {
            cx.print_prompt(seen.next_prompt.as_ref(), seen.pending, false)?;
        }
        r.status = Some(st.status);
        r.untrusted = Some(st.untrusted);
        r.next_merge = Some(seen.next_prompt.map(Object));
    }
    cx.emit(&r)?;
    Ok(0)
}

/// The memory the arguments describe (its text read from stdin for `-` on the command line).
fn new_memory(cx: &Context<'_>, a: &NoteArgs) -> Result<NewMemory, Error> {
    let mut mem = NewMemory::new(cx.text_arg(&a.text)?).kind(a.kind.parse::<Kind>()?);
    if let Some(s) = &a.status {
        mem = mem.status(s.parse::<Status>()?);
    }
    if let Some(s) = &a.source {
        mem = mem.source(s.clone());
    }
    if let Some(u) = &a.uri {
        mem = mem.source_uri(u.clone());
    }
    if let Some(o) = &a.observed {
        mem = mem.observed_us(text::parse_time(o)?);
    }
    if let Some(v) = &a.valid_until {
        mem = mem.valid_until_us(text::parse_time(v)?);
    }
    if let Some(f) = &a.vector {
        if f == "-" && a.text == "-" {
            return Err(Error::Invalid {
                what: "vector",
                reason: "the text and the vector cannot both come from stdin".into(),
            });
        }
        mem = mem.vector(super::search::parse_vector(&cx.read_input(f)?)?);
    }
    Ok(mem
        .supersedes(a.supersedes.clone())
        .conflicts_with(a.conflicts_with.clone())
        .force(a.force))
}

/// How the library's refusal of a secret ends: advice for the command line.
const FORCE_HINT: &str = " (pass --force if it is not a secret)";

/// A note's error as a tool caller can act on it: the tool takes no `force`, so the refusal of
/// what looks like a secret says that a person can store it with the command line instead.
fn for_a_tool(e: Error) -> Error {
    match e {
        Error::Invalid { what, reason } if reason.ends_with(FORCE_HINT) => Error::Invalid {
            what,
            reason: format!(
                "{}; a tool call cannot store it (the note tool has no force argument): if it \
                 is not a secret, a person can store it with `somna note --force`",
                reason.trim_end_matches(FORCE_HINT)
            ),
        },
        e => e,
    }
}

/// The verb `note`.
pub const NOTE: Verb<NoteArgs> = Verb::writes(run);
