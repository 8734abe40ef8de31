//! How the next-step hints in wake's text and in merge prompts name the action: as shell lines
//! (`Run: somna --db PATH nap 0-1 ...`), as MCP tool calls (call `nap` with `block` and
//! `text`), or not at all. A host chooses the form that its agent can act on ([`Hints`]): the
//! CLI prints shell lines carrying its `--db`, `--as` and `--scope`; the MCP server names tool
//! calls; a host that drives the loop itself (a Python program calling `nap`) may have none.

use crate::domain::block::Block;

/// The form of next-step hints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hints {
    /// Shell lines, `Run: CMD VERB ...`: `CMD` is how the agent invokes somna, carrying the
    /// store, the principal and the scope when they are not the defaults
    /// (`/opt/somna --db /srv/team.redb --scope work`); bare `somna` only for the default
    /// store.
    Cli(String),
    /// MCP tool calls: "call `nap` with block `0-1` and text ...". `scope` is named in each call
    /// when set (the scope the hint is about, when the caller's default may be another).
    Tools {
        /// The scope to pass in each call, or None to leave it to the caller's default.
        scope: Option<String>,
    },
    /// No next-step commands: the text says what is due (`1 merge is pending.`) and the host
    /// acts on it itself.
    Off,
}

impl Default for Hints {
    /// Shell lines for the default store: `Run: somna ...`.
    fn default() -> Self {
        Hints::Cli("somna".into())
    }
}

impl Hints {
    /// The same form for another scope: `--scope S` added to a shell prefix, the scope named in
    /// tool calls.
    pub fn for_scope(&self, scope: &str) -> Hints {
        match self {
            Hints::Cli(cmd) => Hints::Cli(format!("{cmd} --scope {scope}")),
            Hints::Tools { .. } => Hints::Tools {
                scope: Some(scope.to_string()),
            },
            Hints::Off => Hints::Off,
        }
    }

    /// A tool call with its arguments: "`nap` with scope `s`, block `0-1` and text `x`".
    fn call(&self, tool: &str, args: &[(&str, &str)]) -> String {
        let scope = match self {
            Hints::Tools { scope: Some(s) } => Some(("scope", s.as_str())),
            _ => None,
        };
        let all: Vec<String> = scope
            .iter()
            .chain(args.iter())
            .map(|(k, v)| format!("{k} `{v}`"))
            .collect();
        match all.split_last() {
            None => format!("`{tool}`"),
            Some((last, [])) => format!("`{tool}` with {last}"),
            Some((last, rest)) => format!("`{tool}` with {} and {last}", rest.join(", ")),
        }
    }

    /// After "No memories yet.": how to record the first.
    pub fn first_note(&self) -> String {
        match self {
            Hints::Cli(cmd) => {
                format!(" Record the first with: {cmd} note \"<something worth keeping>\"")
            }
            Hints::Tools { .. } => format!(" Record the first: call {}.", self.call("note", &[])),
            Hints::Off => String::new(),
        }
    }

    /// "Not awake yet." and how to read part `part` (of `of`) of the snapshot of `total`
    /// memories, with the budget the first part was read with.
    pub fn next_part(
        &self,
        (part, of, total): (usize, usize, u64),
        lines: Option<usize>,
        bytes: Option<usize>,
    ) -> String {
        let (p, t) = (part.to_string(), total.to_string());
        let (l, b) = (lines.map(|l| l.to_string()), bytes.map(|b| b.to_string()));
        let mut args = Vec::new();
        if let Some(l) = &l {
            args.push(("lines", l.as_str()));
        }
        if let Some(b) = &b {
            args.push(("bytes", b.as_str()));
        }
        match self {
            Hints::Cli(cmd) => {
                let extra: String = args.iter().map(|(k, v)| format!(" --{k} {v}")).collect();
                format!("Not awake yet. Run: {cmd} wake{extra} {p} {t}\n")
            }
            Hints::Tools { .. } => {
                let mut all = vec![("part", p.as_str()), ("total", t.as_str())];
                all.extend(args);
                format!("Not awake yet. Call {}.\n", self.call("wake", &all))
            }
            Hints::Off => format!("Not awake yet: part {p} of {of} follows (total {t}).\n"),
        }
    }

    /// The most bytes the frame lines of a wake part take ([`Hints::next_part`] among them),
    /// given the length of the budget options (` --lines N --bytes B`).
    pub fn frame_bytes(&self, extra: usize) -> usize {
        match self {
            Hints::Cli(cmd) => 160 + cmd.len() + extra,
            Hints::Tools { scope } => 240 + scope.as_ref().map_or(0, String::len) + extra,
            Hints::Off => 200 + extra,
        }
    }

    /// After "N merges are pending.": how to get the next prompt.
    pub fn nap_pending(&self) -> String {
        match self {
            Hints::Cli(cmd) => format!(" Run: {cmd} nap"),
            Hints::Tools { .. } => format!(" Call {} for the next one.", self.call("nap", &[])),
            Hints::Off => String::new(),
        }
    }

    /// How to open a left-out block (or one memory, by its id).
    pub fn open(&self, b: Block) -> String {
        let (tool, arg, value) = if b.size() == 1 {
            ("recall", "pattern", format!("^#{} ", b.lo()))
        } else {
            ("zoom", "block", b.to_string())
        };
        match self {
            Hints::Cli(cmd) if tool == "recall" => format!("{cmd} recall '{value}'"),
            Hints::Cli(cmd) => format!("{cmd} zoom {value}"),
            Hints::Tools { .. } => self.call(tool, &[(arg, &value)]),
            Hints::Off => format!("{tool} {value}"),
        }
    }

    /// The end of a merge prompt for `b`: how to answer it.
    pub fn answer(&self, b: Block) -> String {
        match self {
            Hints::Cli(cmd) => format!(
                "Either command saves it; the first needs no shell quoting (the line, then EOF on a line of its own):\nRun: {cmd} nap {b} - <<'EOF'\nRun: {cmd} nap {b} \"<your line>\"\n"
            ),
            Hints::Tools { .. } => format!(
                "Answer with the tool call {}.\n",
                self.call("nap", &[("block", &b.to_string()), ("text", "<your line>")])
            ),
            Hints::Off => String::new(),
        }
    }
}
