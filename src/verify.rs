//! **Layer 5, the top of the library**: may use every folder.
//!
//! `verify`: redb's integrity check plus engram's own invariants. Every value must decode with a
//! matching checksum; each scope's log must be dense (0..count) with each record naming its own
//! position; every summary must be an aligned block inside the log, built from children that
//! exist when it was built from children; `pending` must hold exactly the complete blocks that
//! have no summary; the counters must match. For sessions: every message decodes and matches
//! its stored hash, every row belongs to a session, and each session's counters match its rows.
//! For LangGraph's checkpoints: every value decodes, every channel version a checkpoint names is
//! stored, and every list value's items are (`crate::checkpoint`).

use std::collections::{BTreeMap, HashSet};

use serde::Serialize;

use crate::domain::block::Block;
use crate::domain::record::{BuiltFrom, IdemEntry, ScopeMeta, Summary};
use crate::error::{Error, Result};
use crate::memory::log::decode_memory;
use crate::memory::tree::TreeKey;
use crate::storage::codec::decode;
use crate::storage::store::Store;
use crate::storage::tables::{
    CLAIMS, CONFIG, IDEMPOTENCY, LOG, META, PENDING, SCOPES, STALE, TREE,
};

/// What `verify` found.
#[derive(Debug, Clone, Default, Serialize)]
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
        self.read(|r| {
            let p = &mut report.problems;
            let mut problem = |s: String| {
                if p.len() < MAX_PROBLEMS {
                    p.push(s);
                }
            };
            let kv = &r.tx;
            match META.get(kv, "format")? {
                Some(v) => {
                    if let Err(e) = decode::<u32>("meta", &"format", &v) {
                        problem(e.to_string());
                    }
                }
                None => problem("meta: the store format is missing".into()),
            }
            CONFIG.each(kv, .., |k, v| {
                if let Err(e) = decode::<u64>("config", &k, v) {
                    problem(e.to_string());
                }
                Ok(())
            })?;
            let mut scopes: BTreeMap<u32, (String, ScopeMeta)> = BTreeMap::new();
            SCOPES.each(kv, .., |k, v| {
                match decode::<ScopeMeta>("scopes", &k, v) {
                    Ok(m) => {
                        if let Some((other, _)) = scopes.get(&m.id) {
                            problem(format!("scopes {other:?} and {k:?} share id {}", m.id));
                        }
                        scopes.insert(m.id, (k.to_string(), m));
                    }
                    Err(e) => problem(e.to_string()),
                }
                Ok(())
            })?;
            report.scopes = scopes.len();
            match META.get(kv, "next_scope_id")? {
                Some(v) => match decode::<u32>("meta", &"next_scope_id", &v) {
                    Ok(next) => {
                        if let Some(max) = scopes.keys().next_back() {
                            if next <= *max {
                                problem(format!("meta: next_scope_id {next} would reuse scope id {max}"));
                            }
                        }
                    }
                    Err(e) => problem(e.to_string()),
                },
                None => problem("meta: next_scope_id is missing".into()),
            }

            // The log: dense, self-identifying, decodable.
            let mut next: BTreeMap<u32, u64> = BTreeMap::new();
            LOG.each(kv, .., |(sid, pos), v| {
                let Some((name, _)) = scopes.get(&sid) else {
                    problem(format!("log: #{pos} belongs to unknown scope id {sid}"));
                    return Ok(());
                };
                let expected = next.entry(sid).or_insert(0);
                if pos != *expected {
                    problem(format!("log of {name:?}: positions jump from #{} to #{pos}", *expected));
                }
                *expected = pos + 1;
                report.memories += 1;
                match decode_memory(sid, pos, v) {
                    Ok(m) => {
                        if m.supersedes.iter().chain(&m.conflicts_with).any(|x| *x >= pos) {
                            problem(format!("log of {name:?}: #{pos} links to a later memory"));
                        }
                    }
                    Err(e) => problem(e.to_string()),
                }
                Ok(())
            })?;
            for (sid, (name, m)) in &scopes {
                let have = next.get(sid).copied().unwrap_or(0);
                if have != m.count {
                    problem(format!("scope {name:?} counts {} memories but its log holds {have}", m.count));
                }
            }

            // The tree.
            let mut built: HashSet<(u32, Block)> = HashSet::new();
            let mut nodes: Vec<(u32, Block, Summary)> = Vec::new();
            let mut per_scope: BTreeMap<u32, u64> = BTreeMap::new();
            TREE.each(kv, .., |(sid, level, lo), v| {
                let b = match Block::new(level, lo) {
                    Ok(b) if level >= 1 => b,
                    _ => {
                        problem(format!("tree: ({sid}, level {level}, {lo}) is not an aligned block of size 2 or more"));
                        return Ok(());
                    }
                };
                let Some((name, m)) = scopes.get(&sid) else {
                    problem(format!("tree: {b} belongs to unknown scope id {sid}"));
                    return Ok(());
                };
                if b.hi() > m.count {
                    problem(format!("tree of {name:?}: {b} reaches past the end of the log ({})", m.count));
                }
                *per_scope.entry(sid).or_insert(0) += 1;
                report.summaries += 1;
                match decode::<Summary>("tree", &TreeKey(sid, b), v) {
                    Ok(s) => {
                        built.insert((sid, b));
                        nodes.push((sid, b, s));
                    }
                    Err(e) => problem(e.to_string()),
                }
                Ok(())
            })?;
            for (sid, b, s) in &nodes {
                if let (BuiltFrom::Children { .. }, Some((l, rr))) = (&s.built_from, b.halves()) {
                    for h in [l, rr] {
                        if !built.contains(&(*sid, h)) {
                            let name = scopes.get(sid).map(|x| x.0.clone()).unwrap_or_default();
                            problem(format!("tree of {name:?}: {b} was built from {h}, which has no summary"));
                        }
                    }
                }
            }

            // Pending: exactly the complete blocks without a summary.
            let mut pending: HashSet<(u32, Block)> = HashSet::new();
            PENDING.each(kv, .., |(sid, level, lo), _| {
                match Block::new(level, lo) {
                    Ok(b) if level >= 1 => {
                        pending.insert((sid, b));
                    }
                    _ => problem(format!("pending: ({sid}, level {level}, {lo}) is not a block")),
                }
                Ok(())
            })?;
            let mut stale: HashSet<(u32, Block)> = HashSet::new();
            STALE.each(kv, .., |(sid, level, lo), _| {
                match Block::new(level, lo) {
                    Ok(b) if built.contains(&(sid, b)) => {
                        if !pending.contains(&(sid, b)) {
                            problem(format!("stale: {b} of scope id {sid} is stale but not pending"));
                        }
                        stale.insert((sid, b));
                    }
                    _ => problem(format!("stale: ({sid}, level {level}, {lo}) has no summary")),
                }
                Ok(())
            })?;
            CLAIMS.each(kv, .., |(sid, level, lo), v| {
                match Block::new(level, lo) {
                    Ok(b) if built.contains(&(sid, b)) => {
                        if let Err(e) = decode::<Vec<crate::domain::claims::Claim>>("claims", &TreeKey(sid, b), v) {
                            problem(e.to_string());
                        }
                    }
                    _ => problem(format!("claims: ({sid}, level {level}, {lo}) has no summary")),
                }
                Ok(())
            })?;
            for (sid, (name, m)) in &scopes {
                let mut want = 0u64;
                let mut level = 1u8;
                while level < 63 && (1u64 << level) <= m.count {
                    let size = 1u64 << level;
                    for k in 0..m.count / size {
                        let b = Block::raw(level, k * size);
                        let has = built.contains(&(*sid, b));
                        let pend = pending.contains(&(*sid, b));
                        if has && pend && !stale.contains(&(*sid, b)) {
                            problem(format!("scope {name:?}: {b} is both summarized and pending, and not stale"));
                        } else if !has && !pend {
                            problem(format!("scope {name:?}: {b} has no summary and is not pending"));
                        }
                        want += u64::from(pend);
                    }
                    level += 1;
                }
                let actual = pending.iter().filter(|(s, _)| s == sid).count() as u64;
                if actual != want {
                    problem(format!("scope {name:?}: {} pending blocks lie outside the log", actual - want.min(actual)));
                }
                if m.pending != actual {
                    problem(format!("scope {name:?} counts {} pending but {actual} are stored", m.pending));
                }
                let summaries = per_scope.get(sid).copied().unwrap_or(0);
                if m.summaries != summaries {
                    problem(format!("scope {name:?} counts {} summaries but {summaries} are stored", m.summaries));
                }
            }
            for (sid, _) in &pending {
                if !scopes.contains_key(sid) {
                    problem(format!("pending: a block belongs to unknown scope id {sid}"));
                }
            }

            crate::session::verify_sessions(r, &mut problem, &mut report.sessions)?;
            crate::checkpoint::check_checkpoints(kv, &mut problem)?;
            IDEMPOTENCY.each(kv, .., |(sid, key), v| {
                match decode::<IdemEntry>("idempotency", &key, v) {
                    Ok(e) => {
                        let count = scopes.get(&sid).map(|s| s.1.count).unwrap_or(0);
                        if e.first.saturating_add(e.count) > count {
                            problem(format!("idempotency key {key:?} names memories past the end of the log"));
                        }
                    }
                    Err(e) => problem(e.to_string()),
                }
                Ok(())
            })?;
            Ok(())
        })?;
        Ok(report)
    }
}
