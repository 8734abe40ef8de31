//! `note`: record one memory.

use crate::cli::{kinds, statuses, Names};
use clap::Args;
use engram::domain::text;
use engram::{Error, Kind, NewMemory, Status};

use crate::cli::Context;
use crate::output::print_next_prompt;

#[derive(Args, Debug)]
pub struct NoteArgs {
    /// The memory (one line), or - to read it from stdin
    pub text: String,
    /// Idempotency key: a retry with the same key returns the same id
    #[arg(long)]
    pub key: Option<String>,
    /// What kind of claim it is
    #[arg(long, default_value = "observation", value_parser = Names(kinds))]
    pub kind: String,
    /// Its lifecycle status [default: by the scope's policy]
    #[arg(long, value_parser = Names(statuses))]
    pub status: Option<String>,
    /// Who or what this came from
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
    /// Id of an earlier memory this one replaces (repeatable)
    #[arg(long)]
    pub supersedes: Vec<u64>,
    /// Id of an earlier memory this one contradicts (repeatable)
    #[arg(long)]
    pub conflicts_with: Vec<u64>,
    /// Store it even if it looks like a secret
    #[arg(long)]
    pub force: bool,
    /// Its embedding, for `search --vector`: a file (or - for stdin) of numbers, as a JSON array
    /// or separated by spaces or commas
    #[arg(long, value_name = "FILE")]
    pub vector: Option<String>,
}

/// Appends the memory. When the principal may read the scope, also says whether it is shown
/// marked (proposed, or reading as instructions) and prints the next merge prompt, if one is due.
/// With `--json`: `{id, replayed}`, and when the principal may read the scope also `status`,
/// `untrusted` and `next_merge` (the merge prompt due, or null).
pub fn run(cx: &mut Context<'_>, a: &NoteArgs) -> Result<u8, Error> {
    let scope = cx.scope;
    let mem = new_memory(cx, a)?;
    let untrusted = engram::trust::policy::reads_as_instructions(&mem.text);
    let appended = cx.store.append(scope, vec![mem], a.key.as_deref())?;
    let mut v = serde_json::json!({"id": appended.first, "replayed": appended.replayed});
    let text = cx.text_wanted();
    if text {
        writeln!(cx.out, "Saved as #{}.", appended.first)?;
    }
    if cx.store.read(|r| r.may(engram::Access::Read, scope))? {
        let (m, st) = cx.store.show(scope, appended.first)?;
        if text && st.status == Status::Proposed {
            writeln!(cx.out, "Stored as proposed ({}): it is shown marked until a principal runs `{} accept {}`.", m.kind, cx.prefix, m.id)?;
        }
        if text && untrusted {
            writeln!(cx.out, "Flagged: it reads as instructions to the reader, so it will always be shown marked and quoted.")?;
        }
        if cx.json_wanted() {
            v["status"] = serde_json::json!(st.status);
            v["untrusted"] = serde_json::json!(st.untrusted);
            v["next_merge"] = serde_json::json!(cx.store.next_prompt(scope)?);
        }
        if text {
            print_next_prompt(cx, false)?;
        }
    }
    cx.emit(&v)?;
    Ok(0)
}

/// The memory the arguments describe (its text read from stdin for `-`).
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
