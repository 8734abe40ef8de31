//! Opening blocks: `zoom` (a block's two halves, with their markers) and `why` (a summary's
//! claims with the records each cites), and every node of a scope.

use serde::Serialize;

use super::check_block;
use crate::domain::block::Block;
use crate::domain::claims::{parse_claims, Claim};
use crate::domain::record::{Memory, Node, Summary};
use crate::domain::text::display_safe;
use crate::error::{Error, Result};
use crate::memory::log::memory_line;
use crate::memory::summary::{each_node, get_summary, marked_summary_line, summary_line, TreeKey};
use crate::storage::codec::decode;
use crate::storage::store::Store;
use crate::storage::tables::{CLAIMS, STALE};
use crate::storage::txn::ReadTxn;

/// What `why` shows: a summary, its claims and the records behind each.
#[derive(Debug, Clone, Serialize)]
pub struct Why {
    /// The block.
    pub block: Block,
    /// Its summary.
    pub summary: Summary,
    /// Whether an input changed since it was written.
    pub stale: bool,
    /// Whether some claim cites nothing.
    pub uncited: bool,
    /// Each claim with the lines of the records it cites.
    pub claims: Vec<(Claim, Vec<String>)>,
}

impl Why {
    /// Renders `why`'s text.
    pub fn render(&self) -> String {
        let mut out = format!(
            "#{} {}{}\n",
            self.block,
            if self.stale { "[stale] " } else { "" },
            display_safe(&self.summary.text)
        );
        for (c, records) in &self.claims {
            if c.cites.is_empty() {
                out.push_str(&format!("- {} (uncited)\n", display_safe(&c.text)));
            } else {
                out.push_str(&format!("- {}\n", display_safe(&c.text)));
                for r in records {
                    out.push_str(&format!("    {r}\n"));
                }
            }
        }
        if self.uncited {
            out.push_str("Some claims cite nothing: they cannot be traced to a memory.\n");
        }
        out
    }
}

/// One line of `zoom`.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum ZoomEntry {
    /// A raw memory.
    Memory(Memory),
    /// A summarized half.
    Summary {
        /// The half.
        block: Block,
        /// Its summary.
        summary: Summary,
    },
    /// A half that has no summary yet.
    Missing {
        /// The half.
        block: Block,
    },
}

impl ZoomEntry {
    /// The rendered line.
    pub fn line(&self) -> String {
        match self {
            ZoomEntry::Memory(m) => memory_line(m),
            ZoomEntry::Summary { block, summary } => summary_line(*block, summary),
            ZoomEntry::Missing { block } => format!("#{block} not compressed yet"),
        }
    }
}

impl ReadTxn<'_> {
    /// The summary of `b`, if it has one.
    pub fn summary(&self, scope: &str, b: Block) -> Result<Option<Summary>> {
        let Some(meta) = self.scope_meta(scope)? else {
            return Ok(None);
        };
        get_summary(self.tx, meta.id, b)
    }

    /// The two halves of `b`: raw memories, summaries, or `not compressed yet`. Halves past
    /// the end of the log are left out; a block that starts past the end is an error.
    pub fn zoom(&self, scope: &str, b: Block) -> Result<Vec<ZoomEntry>> {
        check_block(b)?;
        let meta = self.scope_meta(scope)?;
        let count = meta.as_ref().map(|m| m.count).unwrap_or(0);
        let Some(meta) = meta.filter(|_| b.lo() < count) else {
            return Err(Error::OutOfRange {
                asked: b.to_string(),
                count,
            });
        };
        let log = self.tx;
        let tree = self.tx;
        let mut out = Vec::new();
        if let Some((l, r)) = b.halves() {
            for h in [l, r] {
                if h.lo() >= count {
                    continue;
                }
                if h.size() == 1 {
                    out.push(ZoomEntry::Memory(crate::memory::log::get_memory(
                        log,
                        meta.id,
                        h.lo(),
                    )?));
                } else if let Some(s) = get_summary(tree, meta.id, h)? {
                    out.push(ZoomEntry::Summary {
                        block: h,
                        summary: s,
                    });
                } else {
                    out.push(ZoomEntry::Missing { block: h });
                }
            }
        }
        Ok(out)
    }

    /// The lines of `zoom`, with markers (proposed, superseded, stale, untrusted...).
    pub fn zoom_lines(&self, scope: &str, b: Block) -> Result<Vec<String>> {
        self.lines_of(scope, &self.zoom(scope, b)?)
    }

    /// The lines of `entries` (what [`ReadTxn::zoom`] returned for `scope`), with markers.
    fn lines_of(&self, scope: &str, entries: &[ZoomEntry]) -> Result<Vec<String>> {
        let sid = self.scope_meta(scope)?.map(|m| m.id).unwrap_or(0);
        let events = self.tx;
        let mut out = Vec::with_capacity(entries.len());
        for e in entries {
            out.push(match e {
                ZoomEntry::Memory(m) => crate::memory::lifecycle::marked_line(
                    m,
                    &crate::memory::lifecycle::state_of(events, sid, m)?,
                ),
                ZoomEntry::Summary { block, summary } => {
                    let stale_now = STALE.contains(self.tx, (sid, block.level(), block.lo()))?;
                    marked_summary_line(*block, summary, stale_now)
                }
                ZoomEntry::Missing { .. } => e.line(),
            });
        }
        Ok(out)
    }

    /// `why LO-HI`: the summary of `b`, each of its claims, and the records each claim cites
    /// (with their markers).
    pub fn why(&self, scope: &str, b: Block) -> Result<Why> {
        check_block(b)?;
        let meta = self.scope_meta(scope)?;
        let count = meta.as_ref().map(|m| m.count).unwrap_or(0);
        let Some(meta) = meta.filter(|_| b.hi() <= count) else {
            return Err(Error::OutOfRange {
                asked: b.to_string(),
                count,
            });
        };
        let sid = meta.id;
        let Some(summary) = get_summary(self.tx, sid, b)? else {
            return Err(Error::invalid("block", format!("{b} has no summary yet")));
        };
        let key = (sid, b.level(), b.lo());
        let stale = STALE.contains(self.tx, key)?;
        let claims: Vec<Claim> = match CLAIMS.get(self.tx, key)? {
            Some(v) => decode("claims", &TreeKey(sid, b), &v)?,
            None => parse_claims(&summary.text)
                .into_iter()
                .map(|c| Claim {
                    text: c.text,
                    cites: Vec::new(),
                })
                .collect(),
        };
        let log = self.tx;
        let events = self.tx;
        let mut out = Vec::with_capacity(claims.len());
        for c in claims {
            let mut records = Vec::new();
            for &id in &c.cites {
                if id < count {
                    let m = crate::memory::log::get_memory(log, sid, id)?;
                    records.push(crate::memory::lifecycle::marked_line(
                        &m,
                        &crate::memory::lifecycle::state_of(events, sid, &m)?,
                    ));
                }
            }
            out.push((c, records));
        }
        let uncited = out.iter().any(|(c, _)| c.cites.is_empty());
        Ok(Why {
            block: b,
            summary,
            stale,
            uncited,
            claims: out,
        })
    }

    /// Every summary node of `scope`, by level then start.
    pub fn nodes(&self, scope: &str) -> Result<Vec<Node>> {
        let Some(meta) = self.scope_meta(scope)? else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        each_node(self.tx, meta.id, |n| {
            out.push(n);
            Ok(())
        })?;
        Ok(out)
    }
}

impl Store {
    /// The claims behind a summary; see [`ReadTxn::why`].
    pub fn why(&self, scope: &str, b: Block) -> Result<Why> {
        self.audited(
            "why",
            scope,
            |r| r.why(scope, b),
            |w| {
                std::iter::once(w.block.to_string())
                    .chain(
                        w.claims
                            .iter()
                            .flat_map(|(c, _)| c.cites.iter().map(|i| format!("#{i}"))),
                    )
                    .collect()
            },
        )
    }

    /// The lines of `zoom` with markers; see [`ReadTxn::zoom_lines`].
    pub fn zoom_lines(&self, scope: &str, b: Block) -> Result<Vec<String>> {
        self.audited(
            "zoom",
            scope,
            |r| r.zoom_lines(scope, b),
            |_| vec![b.to_string()],
        )
    }

    /// Opens a block; see [`ReadTxn::zoom`].
    pub fn zoom(&self, scope: &str, b: Block) -> Result<Vec<ZoomEntry>> {
        self.audited("zoom", scope, |r| r.zoom(scope, b), |_| vec![b.to_string()])
    }

    /// Opens a block and renders its lines in one read (`zoom` with `--json` and text both).
    pub fn zoom_with_lines(&self, scope: &str, b: Block) -> Result<(Vec<ZoomEntry>, Vec<String>)> {
        self.audited(
            "zoom",
            scope,
            |r| {
                let entries = r.zoom(scope, b)?;
                let lines = r.lines_of(scope, &entries)?;
                Ok((entries, lines))
            },
            |_| vec![b.to_string()],
        )
    }
}
