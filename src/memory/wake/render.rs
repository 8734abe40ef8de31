//! Wake's text: each item's line, the line naming left-out memories, and the parts (each at most
//! [`PART_LINES`] lines and [`PART_BYTES`] bytes with its frame), whose hints name the next
//! step in the form [`Hints`] says (shell lines or MCP tool calls).

use std::fmt::Write as _;

use super::{WakeItem, WakeOptions, WakeView, PART_BYTES, PART_LINES};
use crate::domain::block::Block;
use crate::error::{Error, Result};
use crate::memory::hints::Hints;
use crate::memory::log::memory_line;
use crate::memory::summary::summary_line;

impl WakeItem {
    /// The rendered line (`#id date text` or `#lo-hi summary`).
    pub fn line(&self) -> String {
        match self {
            WakeItem::Memory(m) => memory_line(m),
            WakeItem::Summary { block, summary } => summary_line(*block, summary),
        }
    }
}

fn left_out_line(view: &WakeView, hints: &Hints) -> String {
    let mut blocks = Vec::new();
    let mut lo = 0u64;
    while lo < view.omitted && blocks.len() < 3 {
        // The largest aligned block starting at lo that fits in [lo, omitted).
        let mut size = if lo == 0 {
            1u64 << 62
        } else {
            1u64 << lo.trailing_zeros().min(62)
        };
        while size > view.omitted - lo {
            size /= 2;
        }
        blocks.push(Block::raw(size.trailing_zeros() as u8, lo));
        lo += size;
    }
    let opens: Vec<String> = blocks.iter().map(|b| hints.open(*b)).collect();
    format!(
        "({} older memories, #0 to #{}, are left out to fit the budget. Open them with: {}{})",
        view.omitted,
        view.omitted - 1,
        opens.join("; "),
        if lo < view.omitted { "; ..." } else { "" }
    )
}

impl WakeView {
    /// Every body line: the left-out line (if any, naming `cmd` to open the left-out blocks),
    /// then the cover.
    pub fn lines(&self, cmd: &str) -> Vec<String> {
        self.lines_with(&Hints::Cli(cmd.to_string()))
    }

    /// Every body line, the left-out line's hints in the form `hints` says.
    pub fn lines_with(&self, hints: &Hints) -> Vec<String> {
        let mut out = Vec::with_capacity(self.items.len() + 1);
        if self.omitted > 0 {
            out.push(left_out_line(self, hints));
        }
        if self.item_lines.len() == self.items.len() {
            out.extend(self.item_lines.iter().cloned());
        } else {
            out.extend(self.items.iter().map(|i| i.line()));
        }
        out
    }

    /// Part `opts.part` (from 1) of [`WakeView::parts`]; an error names how many there are.
    pub fn part(&self, opts: &WakeOptions) -> Result<String> {
        let parts = self.parts(opts);
        let n = parts.len();
        parts
            .into_iter()
            .nth(opts.part.saturating_sub(1))
            .ok_or_else(|| {
                Error::invalid(
                    "part",
                    format!("part {} does not exist; there are {n}", opts.part),
                )
            })
    }

    /// The lines of the budget this view takes: its items plus the line naming left-out
    /// memories, if any.
    pub fn used(&self) -> usize {
        self.items.len() + usize::from(self.omitted > 0)
    }

    /// The bytes of the whole rendered output, all parts together.
    pub fn size(&self, opts: &WakeOptions) -> usize {
        self.parts(opts).iter().map(|p| p.len()).sum()
    }

    /// Renders every part (each a complete text ending in a newline).
    pub fn parts(&self, opts: &WakeOptions) -> Vec<String> {
        let hints = &opts.hints;
        let t = self.total;
        if t == 0 {
            return vec![format!(
                "No memories yet.{}\nYou are awake.\n",
                hints.first_note()
            )];
        }
        // The body lines, borrowed where they are already rendered (no copy per line).
        let mut lines: Vec<std::borrow::Cow<'_, str>> = Vec::with_capacity(self.items.len() + 1);
        if self.omitted > 0 {
            lines.push(left_out_line(self, hints).into());
        }
        if self.item_lines.len() == self.items.len() {
            lines.extend(self.item_lines.iter().map(|l| l.as_str().into()));
        } else {
            lines.extend(self.items.iter().map(|i| i.line().into()));
        }
        let mut extra = String::new();
        if let Some(l) = opts.lines {
            extra.push_str(&format!(" --lines {l}"));
        }
        if let Some(b) = opts.bytes {
            extra.push_str(&format!(" --bytes {b}"));
        }
        // Split into parts: each at most PART_LINES lines and PART_BYTES bytes with its frame.
        let frame = hints.frame_bytes(extra.len());
        let mut groups: Vec<Vec<&str>> = vec![Vec::new()];
        let mut bytes = frame;
        for l in &lines {
            let n = groups.len();
            let Some(g) = groups.last_mut() else { break };
            if !g.is_empty() && (g.len() + 3 > PART_LINES || bytes + l.len() + 1 > PART_BYTES) {
                groups.push(vec![l.as_ref()]);
                bytes = frame + l.len() + 1;
                let _ = n;
            } else {
                g.push(l.as_ref());
                bytes += l.len() + 1;
            }
        }
        let n = groups.len();
        groups
            .iter()
            .enumerate()
            .map(|(i, g)| {
                let k = i + 1;
                let body: usize = g.iter().map(|l| l.len() + 1).sum();
                let mut s = String::with_capacity(frame + body);
                let _ = writeln!(
                    s,
                    "Your memory, part {k} of {n}, oldest first ({t} {}).",
                    if t == 1 { "memory" } else { "memories" }
                );
                for l in g {
                    s.push_str(l);
                    s.push('\n');
                }
                if k < n {
                    s.push_str(&hints.next_part((k + 1, n, t), opts.lines, opts.bytes));
                } else {
                    s.push_str("You are awake.\n");
                    let nap = hints.nap_pending();
                    match self.pending {
                        0 => {}
                        1 => s.push_str(&format!("1 merge is pending.{nap}\n")),
                        p => s.push_str(&format!("{p} merges are pending.{nap}\n")),
                    }
                }
                s
            })
            .collect()
    }
}
