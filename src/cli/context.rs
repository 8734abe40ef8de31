//! The [`Context`] every command receives: the open store, the scope, `--json`, the `Run:`
//! command prefix and stdout (or, for an MCP tool call, a buffer and the captured value). A
//! leaf of the command line: it names no verb and no front end, so that every verb, the CLI and
//! the MCP server can use it without an import cycle.

use std::io::Write;

use somna::{Error, Hints, MergePrompt, Store};

use crate::cli::{input, output};

/// What every command receives (as jj's `CommandHelper`): built once per run (by
/// `Cli::context`, from global options checked there, or by the MCP server for one tool call).
pub struct Context<'a> {
    /// The open store: read-only when the command only reads (`commands::reads_only`).
    pub store: Store,
    /// `--scope`: one scope, or several (`a,b`) for the verbs that take them
    /// (`commands::several_scopes`).
    pub scope: &'a str,
    /// `--json`: print JSON instead of text.
    pub json: bool,
    /// How `Run:` lines invoke somna: [`Context::prefix_without_scope`], plus `--scope` when it
    /// is not the default.
    pub prefix: String,
    /// The program, then `--db` and `--as` when they are not the defaults.
    pub prefix_without_scope: String,
    /// Whether this run created the store (only `init` creates one).
    pub created: bool,
    /// Standard output.
    pub out: &'a mut dyn Write,
    /// Set by the MCP server: render the text to `out` *and* keep the `--json` value in
    /// [`Context::captured`], from one run of the command (one transaction for a write).
    pub both: bool,
    /// The `--json` value of a command run with [`Context::both`].
    pub captured: Option<serde_json::Value>,
    /// Set by the MCP server: the command runs a tool call, whose JSON arguments carry all it
    /// takes (the text of `note`, the messages of `session save`, the answers of `nap`). So `-`
    /// is the text `-`, not a request to read stdin, and no file or stdin is read: on stdio,
    /// stdin is the protocol. This is where the two front ends differ; the arguments are the
    /// same structs.
    pub tool_call: bool,
    /// Set by the MCP server: next-step hints in wake and merge prompts name tool calls, with
    /// this scope when it is not the server's default. The CLI's are `Run:` lines.
    pub tool_scope: Option<String>,
}

impl<'a> Context<'a> {
    #[cfg_attr(not(feature = "mcp"), allow(dead_code))]
    /// A context for one MCP tool call over an open store: text to `out` and the `--json` value
    /// captured, hints naming tool calls (with `tool_scope`, the call's scope when it is not the
    /// server's default) and other commands naming `prefix`, nothing read but the arguments
    /// ([`Context::tool_call`]).
    pub fn for_call(
        store: Store,
        scope: &'a str,
        (prefix, tool_scope): (String, Option<String>),
        out: &'a mut dyn Write,
    ) -> Self {
        Context {
            store,
            scope,
            json: false,
            prefix_without_scope: "somna".into(),
            prefix,
            created: false,
            out,
            both: true,
            captured: None,
            tool_call: true,
            tool_scope,
        }
    }

    /// How wake and merge prompts name the next step: tool calls over MCP, else `Run:` lines
    /// with [`Context::prefix`].
    pub fn hints(&self) -> Hints {
        if self.tool_call {
            Hints::Tools {
                scope: self.tool_scope.clone(),
            }
        } else {
            Hints::Cli(self.prefix.clone())
        }
    }

    /// [`Context::hints`] before a scope is named (a wake of several scopes names each).
    pub fn hints_without_scope(&self) -> Hints {
        if self.tool_call {
            Hints::Tools { scope: None }
        } else {
            Hints::Cli(self.prefix_without_scope.clone())
        }
    }

    /// Whether the command should print its text (not `--json`, or both).
    pub fn text_wanted(&self) -> bool {
        !self.json || self.both
    }

    /// Whether the command should build its `--json` value (`--json`, or both).
    pub fn json_wanted(&self) -> bool {
        self.json || self.both
    }

    /// Prints `v` as JSON (`--json`), or keeps it as the captured value (both).
    pub fn emit(&mut self, v: &impl serde::Serialize) -> Result<(), Error> {
        if self.both {
            self.captured = Some(serde_json::to_value(v).map_err(|e| Error::Io(e.into()))?);
        } else if self.json {
            output::json(self.out, v)?;
        }
        Ok(())
    }

    /// Prints a verb's typed result `v`: as JSON ([`Context::emit`]), as the text `text` makes
    /// of it, or both, as asked. The exit code of a verb that succeeded: 0.
    pub fn show<T: serde::Serialize>(
        &mut self,
        v: &T,
        text: impl FnOnce(&T) -> String,
    ) -> Result<u8, Error> {
        self.emit(v)?;
        if self.text_wanted() {
            write!(self.out, "{}", text(v))?;
        }
        Ok(0)
    }

    /// Keeps `v` as the captured value (both), printing nothing: for the verbs whose text is
    /// their JSON already (`session load`, `session history`). A value that cannot be read back
    /// as JSON (a stored message with an unpaired surrogate escape) is not kept: the text
    /// carries it.
    pub fn capture(&mut self, v: &impl serde::Serialize) {
        if self.both {
            self.captured = serde_json::to_value(v).ok();
        }
    }

    /// The text argument as given, or (`-`) one line of stdin. In a tool call, the text as
    /// given, `-` included, less one trailing newline (as a line from stdin).
    pub fn text_arg(&self, t: &str) -> Result<String, Error> {
        if self.tool_call {
            return Ok(t.strip_suffix('\n').unwrap_or(t).to_string());
        }
        input::text_arg(t)
    }

    /// A whole file, or (`-`) stdin; in a tool call, neither.
    pub fn read_input(&self, file: &str) -> Result<String, Error> {
        if self.tool_call {
            return Err(Error::Invalid {
                what: "file",
                reason: "this server reads no file".into(),
            });
        }
        input::read_input(file)
    }

    /// Closes the store, reporting what dropping it cannot: redb writes its allocator state,
    /// which fails on a damaged file.
    pub fn close(self) -> Result<(), Error> {
        self.store.close()
    }

    /// Prints the scope's next merge prompt. Without one: when merges are pending but the next
    /// cannot be built, the command that finds out why; else, when `nothing`, that nothing is
    /// left.
    pub fn print_next_prompt(&mut self, nothing: bool) -> Result<(), Error> {
        let scope = self.scope;
        let (prompt, pending) = self
            .store
            .read(|r| Ok((r.next_prompt(scope)?, r.pending_count(scope)?)))?;
        self.print_prompt(prompt.as_ref(), pending, nothing)
    }

    /// Prints `prompt`, the merge due next; without one, says when the `pending` merges cannot
    /// be built, or (when `nothing`) that nothing is left to compress.
    pub fn print_prompt(
        &mut self,
        prompt: Option<&MergePrompt>,
        pending: u64,
        nothing: bool,
    ) -> Result<(), Error> {
        match prompt {
            Some(p) => {
                let hints = self.hints();
                write!(self.out, "{}", p.render_with(&hints))?;
            }
            None => {
                if pending > 0 {
                    let cmd = self.prefix.as_str();
                    writeln!(
                        self.out,
                        "The next pending merge cannot be built: run `{cmd} verify`."
                    )?;
                } else if nothing {
                    writeln!(self.out, "Nothing left to compress.")?;
                }
            }
        }
        Ok(())
    }
}
