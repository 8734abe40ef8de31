//! **Layer 5, the top of the library**: may use every folder.
//!
//! `verify`: redb's integrity check, then each layer's own checks in turn, lowest first: the
//! store's rows ([`crate::storage`]: format, settings, scopes), each scope's memory
//! ([`crate::memory`]: the log, the tree, pending blocks, counters), the sessions
//! ([`crate::session`]: every message decodes and matches its stored hash, every row belongs to
//! a session, each session's counters match its rows), LangGraph's checkpoints
//! ([`crate::checkpoint`]: every value decodes, every channel version a checkpoint names is
//! stored), and the memory's idempotency keys. Every
//! problem found is one sentence in the [`Report`], in that order.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::memory;
use crate::storage;
use crate::storage::store::Store;

// The CLI prints it and the MCP tool returns it as it is, its output schema derived from this
// type (the `schemars` feature).
/// What `verify` found.
#[derive(Debug, Clone, Default, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct Report {
    /// Whether redb's own check found the file intact (false: it repaired it).
    pub engine_intact: bool,
    /// Scopes checked.
    pub scopes: usize,
    /// Memories checked.
    pub memories: u64,
    /// Summaries checked.
    pub summaries: u64,
    /// Sessions checked.
    pub sessions: u64,
    /// Everything that is wrong, one sentence each. Empty: the store is sound.
    pub problems: Vec<String>,
}

impl Report {
    /// True when nothing is wrong.
    pub fn ok(&self) -> bool {
        self.problems.is_empty()
    }
}

const MAX_PROBLEMS: usize = 1000;

impl Store {
    /// Checks the whole store. Needs exclusive use of this handle (`&mut`), because redb's check
    /// may repair the allocator state.
    pub fn verify(&mut self) -> Result<Report> {
        self.read(|r| r.require_admin("verify the store"))?;
        let mut report = Report::default();
        match self.check_engine_integrity() {
            Ok(intact) => report.engine_intact = intact,
            Err(Error::Corrupt { reason, .. }) => {
                report.problems.push(format!(
                    "the file is damaged: redb's integrity check failed: {reason}"
                ));
                return Ok(report);
            }
            Err(e) => return Err(e),
        }
        // A server may run the read again (a lost connection): each attempt starts afresh.
        let before = report.problems.len();
        let (server, path) = (self.is_server(), self.path().to_path_buf());
        self.read(|r| {
            report.problems.truncate(before);
            report.sessions = 0;
            let p = &mut report.problems;
            let mut problem = |s: String| {
                if p.len() < MAX_PROBLEMS {
                    p.push(s);
                }
            };
            let scopes = storage::verify::verify_rows(r, &mut problem)?;
            if !server {
                storage::verify::verify_journal(r, &path, &mut problem)?;
            }
            report.scopes = scopes.len();
            let counted = memory::verify::verify_memory(r, &scopes, &mut problem)?;
            report.memories = counted.memories;
            report.summaries = counted.summaries;
            crate::session::verify_sessions(r, &mut problem, &mut report.sessions)?;
            // The search index equals the one rebuilt from the log and the tree (section 12).
            let indexed = scopes.values().map(|(n, m)| (n.as_str(), m.id, m.count));
            crate::storage::index::build::check_all(r.tx, indexed, &mut problem)?;
            crate::checkpoint::check_checkpoints(r.tx, &mut problem)?;
            memory::verify::verify_idempotency(r, &scopes, &mut problem)
        })?;
        Ok(report)
    }
}
