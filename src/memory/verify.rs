//! The memory layer's part of `verify` ([`crate::Store::verify`]). Each scope's log must be
//! dense (0..count) with each record naming its own position and linking only to earlier
//! memories; every summary must be an aligned block inside the log, built from children that
//! exist when it was built from children; `pending` must hold exactly the complete blocks that
//! have no summary (or a stale one); `stale` and `claims` rows need a summary; the scope's
//! counters must match its rows; idempotency keys must name memories inside the log; the
//! embedder's vectors (`embeddings`) must decode, have their (scope, model)'s dimension, belong
//! to a registered model and name memories inside the log, and each backfill cursor must be
//! within the log; the callers' vectors (`vectors`) must decode, have their scope's dimension
//! and name memories inside the log, and the count of vector rewrites must decode.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::domain::block::Block;
use crate::domain::record::{BuiltFrom, IdemEntry, Summary};
use crate::error::Result;
use crate::memory::log::decode_memory;
use crate::memory::summary::TreeKey;
use crate::storage::codec::decode;
use crate::storage::embeddings::{self, CURSOR_KEY, DIM_KEY};
use crate::storage::tables::{CLAIMS, EMBEDDINGS, IDEMPOTENCY, LOG, PENDING, STALE, TREE, VECTORS};
use crate::storage::txn::ReadTxn;
use crate::storage::verify::Scopes;

/// Blocks of a scope (by scope id).
type Blocks = HashSet<(u32, Block)>;

/// What the memory checks counted.
pub(crate) struct Counted {
    /// Memories checked.
    pub memories: u64,
    /// Summaries checked.
    pub summaries: u64,
}

/// The tree as `verify` read it.
#[derive(Default)]
struct Tree {
    /// Blocks with a summary that decoded.
    built: Blocks,
    /// Summary rows per scope id.
    per_scope: BTreeMap<u32, u64>,
    /// Summary rows checked.
    summaries: u64,
}

/// Checks the log, the tree, `pending`, `stale` and `claims` of every scope in `scopes`.
pub(crate) fn verify_memory(
    r: &ReadTxn,
    scopes: &Scopes,
    problem: &mut dyn FnMut(String),
) -> Result<Counted> {
    let memories = verify_log(r, scopes, problem)?;
    let tree = verify_tree(r, scopes, problem)?;
    let (pending, stale) = verify_marks(r, &tree.built, problem)?;
    verify_blocks(scopes, &tree, &pending, &stale, problem);
    verify_embeddings(r, scopes, problem)?;
    verify_vectors(r, scopes, problem)?;
    for (sid, _) in &pending {
        if !scopes.contains_key(sid) {
            problem(format!(
                "pending: a block belongs to unknown scope id {sid}"
            ));
        }
    }
    Ok(Counted {
        memories,
        summaries: tree.summaries,
    })
}

/// `embeddings` (store format 6; a store without the table has nothing to check).
fn verify_embeddings(r: &ReadTxn, scopes: &Scopes, problem: &mut dyn FnMut(String)) -> Result<()> {
    if crate::storage::tables::stored_format(r.tx)?.unwrap_or(0)
        < crate::storage::tables::EMBED_FORMAT
    {
        return Ok(());
    }
    let models = embeddings::models(r.tx)?;
    let mut dims: HashMap<(u32, String), u32> = HashMap::new();
    EMBEDDINGS.each(r.tx, .., |(sid, model, id), v| {
        if id == DIM_KEY {
            let key = format_args!("(scope {sid}, {model:?}, dimension)");
            match decode("embeddings", &key, v) {
                Ok(d) => {
                    dims.insert((sid, model.to_string()), d);
                }
                Err(e) => problem(e.to_string()),
            }
        }
        Ok(())
    })?;
    EMBEDDINGS.each(r.tx, .., |(sid, model, id), v| {
        let Some((name, meta)) = scopes.get(&sid) else {
            problem(format!(
                "embeddings: a row belongs to unknown scope id {sid}"
            ));
            return Ok(());
        };
        if !models.iter().any(|m| *m == model) {
            problem(format!(
                "embeddings of {name:?}: model {model:?} is not in meta.embedding_models"
            ));
        }
        let key = format_args!("(scope {sid}, {model:?}, #{id})");
        if id == CURSOR_KEY {
            let c: u64 = match decode("embeddings", &key, v) {
                Ok(c) => c,
                Err(e) => {
                    problem(e.to_string());
                    return Ok(());
                }
            };
            if c > meta.count {
                problem(format!(
                    "embeddings of {name:?}: {model:?}'s cursor {c} is past the log ({})",
                    meta.count
                ));
            }
        } else if id != DIM_KEY {
            let row = Row {
                table: "embeddings",
                what: format!("embeddings of {name:?}, model {model:?}"),
                id,
                count: meta.count,
                dim: dims.get(&(sid, model.to_string())).copied(),
            };
            check_vector(&row, &key, v, problem);
        }
        Ok(())
    })
}

/// A stored vector's row as [`check_vector`] checks it.
struct Row {
    table: &'static str,
    /// The table and scope (and model), as each problem names them.
    what: String,
    id: u64,
    /// The scope's memory count.
    count: u64,
    /// The dimension of its scope (and model), if one is stored.
    dim: Option<u32>,
}

/// One stored vector, of `vectors` or `embeddings`: it decodes, names a memory inside the log
/// and has its space's dimension.
fn check_vector(row: &Row, key: &dyn std::fmt::Display, v: &[u8], problem: &mut dyn FnMut(String)) {
    let Row { what, id, .. } = row;
    let vector: Vec<f32> = match decode(row.table, key, v) {
        Ok(v) => v,
        Err(e) => return problem(e.to_string()),
    };
    if *id >= row.count {
        problem(format!("{what}: a vector of #{id}, past the log"));
    }
    match row.dim {
        Some(d) if d as usize == vector.len() => {}
        Some(d) => problem(format!(
            "{what}: #{id}'s vector has {} numbers, not {d}",
            vector.len()
        )),
        None => problem(format!("{what}: vectors and no dimension")),
    }
}

/// `vectors`, the callers' own: each row decodes, names a memory inside its scope's log and has
/// the scope's dimension (`(sid, u64::MAX)`); and `meta["vector_rewrites"]` decodes (format 7).
fn verify_vectors(r: &ReadTxn, scopes: &Scopes, problem: &mut dyn FnMut(String)) -> Result<()> {
    if let Err(e) = embeddings::rewrites(r.tx) {
        problem(e.to_string());
    }
    let mut dims: HashMap<u32, u32> = HashMap::new();
    VECTORS.each(r.tx, .., |(sid, id), v| {
        if id == DIM_KEY {
            match decode("vectors", &format_args!("(scope {sid}, dimension)"), v) {
                Ok(d) => {
                    dims.insert(sid, d);
                }
                Err(e) => problem(e.to_string()),
            }
        }
        Ok(())
    })?;
    VECTORS.each(r.tx, .., |(sid, id), v| {
        let Some((name, meta)) = scopes.get(&sid) else {
            problem(format!("vectors: a row belongs to unknown scope id {sid}"));
            return Ok(());
        };
        if id == DIM_KEY {
            return Ok(());
        }
        let row = Row {
            table: "vectors",
            what: format!("vectors of {name:?}"),
            id,
            count: meta.count,
            dim: dims.get(&sid).copied(),
        };
        check_vector(&row, &format_args!("(scope {sid}, #{id})"), v, problem);
        Ok(())
    })
}

/// The log: dense, self-identifying, decodable, and as long as each scope counts. Returns the
/// number of records.
fn verify_log(r: &ReadTxn, scopes: &Scopes, problem: &mut dyn FnMut(String)) -> Result<u64> {
    let mut next: BTreeMap<u32, u64> = BTreeMap::new();
    let mut memories = 0;
    LOG.each(r.tx, .., |(sid, pos), v| {
        let Some((name, _)) = scopes.get(&sid) else {
            problem(format!("log: #{pos} belongs to unknown scope id {sid}"));
            return Ok(());
        };
        let expected = next.entry(sid).or_insert(0);
        if pos != *expected {
            problem(format!(
                "log of {name:?}: positions jump from #{} to #{pos}",
                *expected
            ));
        }
        *expected = pos + 1;
        memories += 1;
        match decode_memory(sid, pos, v) {
            Ok(m) => {
                if m.supersedes
                    .iter()
                    .chain(&m.conflicts_with)
                    .any(|x| *x >= pos)
                {
                    problem(format!("log of {name:?}: #{pos} links to a later memory"));
                }
            }
            Err(e) => problem(e.to_string()),
        }
        Ok(())
    })?;
    for (sid, (name, m)) in scopes {
        let have = next.get(sid).copied().unwrap_or(0);
        if have != m.count {
            problem(format!(
                "scope {name:?} counts {} memories but its log holds {have}",
                m.count
            ));
        }
    }
    Ok(memories)
}

/// The tree: aligned blocks inside the log, decodable, built from children that exist.
fn verify_tree(r: &ReadTxn, scopes: &Scopes, problem: &mut dyn FnMut(String)) -> Result<Tree> {
    let mut tree = Tree::default();
    let mut nodes: Vec<(u32, Block, Summary)> = Vec::new();
    TREE.each(r.tx, .., |(sid, level, lo), v| {
        let b = match Block::new(level, lo) {
            Ok(b) if level >= 1 => b,
            _ => {
                problem(format!(
                    "tree: ({sid}, level {level}, {lo}) is not an aligned block of size 2 or more"
                ));
                return Ok(());
            }
        };
        let Some((name, m)) = scopes.get(&sid) else {
            problem(format!("tree: {b} belongs to unknown scope id {sid}"));
            return Ok(());
        };
        if b.hi() > m.count {
            problem(format!(
                "tree of {name:?}: {b} reaches past the end of the log ({})",
                m.count
            ));
        }
        *tree.per_scope.entry(sid).or_insert(0) += 1;
        tree.summaries += 1;
        match decode::<Summary>("tree", &TreeKey(sid, b), v) {
            Ok(s) => {
                tree.built.insert((sid, b));
                nodes.push((sid, b, s));
            }
            Err(e) => problem(e.to_string()),
        }
        Ok(())
    })?;
    for (sid, b, s) in &nodes {
        if let (BuiltFrom::Children { .. }, Some((l, rr))) = (&s.built_from, b.halves()) {
            for h in [l, rr] {
                if !tree.built.contains(&(*sid, h)) {
                    let name = scopes.get(sid).map(|x| x.0.clone()).unwrap_or_default();
                    problem(format!(
                        "tree of {name:?}: {b} was built from {h}, which has no summary"
                    ));
                }
            }
        }
    }
    Ok(tree)
}

/// `pending`, `stale` and `claims`: blocks, and (but pending) blocks with a summary. Returns the
/// pending and the stale blocks.
fn verify_marks(
    r: &ReadTxn,
    built: &Blocks,
    problem: &mut dyn FnMut(String),
) -> Result<(Blocks, Blocks)> {
    let kv = r.tx;
    let mut pending = Blocks::new();
    PENDING.each(kv, .., |(sid, level, lo), _| {
        match Block::new(level, lo) {
            Ok(b) if level >= 1 => {
                pending.insert((sid, b));
            }
            _ => problem(format!(
                "pending: ({sid}, level {level}, {lo}) is not a block"
            )),
        }
        Ok(())
    })?;
    let mut stale = Blocks::new();
    STALE.each(kv, .., |(sid, level, lo), _| {
        match Block::new(level, lo) {
            Ok(b) if built.contains(&(sid, b)) => {
                if !pending.contains(&(sid, b)) {
                    problem(format!(
                        "stale: {b} of scope id {sid} is stale but not pending"
                    ));
                }
                stale.insert((sid, b));
            }
            _ => problem(format!(
                "stale: ({sid}, level {level}, {lo}) has no summary"
            )),
        }
        Ok(())
    })?;
    CLAIMS.each(kv, .., |(sid, level, lo), v| {
        match Block::new(level, lo) {
            Ok(b) if built.contains(&(sid, b)) => {
                if let Err(e) =
                    decode::<Vec<crate::domain::claims::Claim>>("claims", &TreeKey(sid, b), v)
                {
                    problem(e.to_string());
                }
            }
            _ => problem(format!(
                "claims: ({sid}, level {level}, {lo}) has no summary"
            )),
        }
        Ok(())
    })?;
    Ok((pending, stale))
}

/// Per scope: every complete block is summarized or pending (both only when stale), no pending
/// block lies outside the log, and the pending and summary counters match the rows.
fn verify_blocks(
    scopes: &Scopes,
    tree: &Tree,
    pending: &Blocks,
    stale: &Blocks,
    problem: &mut dyn FnMut(String),
) {
    for (sid, (name, m)) in scopes {
        let mut want = 0u64;
        let mut level = 1u8;
        while level < 63 && (1u64 << level) <= m.count {
            let size = 1u64 << level;
            for k in 0..m.count / size {
                let b = Block::raw(level, k * size);
                let has = tree.built.contains(&(*sid, b));
                let pend = pending.contains(&(*sid, b));
                if has && pend && !stale.contains(&(*sid, b)) {
                    problem(format!(
                        "scope {name:?}: {b} is both summarized and pending, and not stale"
                    ));
                } else if !has && !pend {
                    problem(format!(
                        "scope {name:?}: {b} has no summary and is not pending"
                    ));
                }
                want += u64::from(pend);
            }
            level += 1;
        }
        let actual = pending.iter().filter(|(s, _)| s == sid).count() as u64;
        if actual != want {
            problem(format!(
                "scope {name:?}: {} pending blocks lie outside the log",
                actual - want.min(actual)
            ));
        }
        if m.pending != actual {
            problem(format!(
                "scope {name:?} counts {} pending but {actual} are stored",
                m.pending
            ));
        }
        let summaries = tree.per_scope.get(sid).copied().unwrap_or(0);
        if m.summaries != summaries {
            problem(format!(
                "scope {name:?} counts {} summaries but {summaries} are stored",
                m.summaries
            ));
        }
    }
}

/// Idempotency keys: decodable, naming memories inside their scope's log.
pub(crate) fn verify_idempotency(
    r: &ReadTxn,
    scopes: &Scopes,
    problem: &mut dyn FnMut(String),
) -> Result<()> {
    IDEMPOTENCY.each(r.tx, .., |(sid, key), v| {
        match decode::<IdemEntry>("idempotency", &key, v) {
            Ok(e) => {
                let count = scopes.get(&sid).map(|s| s.1.count).unwrap_or(0);
                if e.first.saturating_add(e.count) > count {
                    problem(format!(
                        "idempotency key {key:?} names memories past the end of the log"
                    ));
                }
            }
            Err(e) => problem(e.to_string()),
        }
        Ok(())
    })
}
