//! Embeddings: a caller that has one stores it with a memory ([`WriteTxn::set_vector`]); a query
//! that carries one ranks by exact cosine over the scope's vectors, alone or fused with the
//! lexical ranking. One dimension per scope, fixed by its first vector. Table `vectors`:
//! `(scope id, memory id)` -> enveloped `Vec<f32>`; `(scope id, u64::MAX)` -> enveloped `u32`,
//! the dimension. The store's embedder (`embed`, beside this file) keeps its own vectors apart,
//! per model, in table `embeddings` (the same values under `(scope id, model, memory id)`): a
//! [`Space`] names which of the two a query ranks by.

use std::ops::ControlFlow;

use crate::domain::quantised::{Matrix, Segment};
use crate::domain::record::ScopeMeta;
use crate::error::{Error, Result};
use crate::memory::search::score::{Scored, Scores};
use crate::storage::codec::{decode, encode, payload, wire_error, Wire};
use crate::storage::embeddings::{any_at_or_above, count_rewrite, rewrites};
use crate::storage::kv::{Dir, KvRead};
use crate::storage::store::Store;
use crate::storage::tables::{EMBEDDINGS, VECTORS};
use crate::storage::txn::WriteTxn;
use crate::storage::vector_cache::{Cached, SpaceKey, VectorCache, MAX_BYTES};
use std::sync::Arc;

pub use crate::domain::vector::{validate, MAX_DIMENSION};

/// The key of a scope's dimension.
const DIM_KEY: u64 = u64::MAX;
pub(crate) use crate::domain::vector::norm;

/// The little-endian `f32`s of a stored vector of dimension `dim`, read from its value in
/// place: the envelope checked, no allocation and no serde. A value that is not a vector of
/// that dimension is [`Error::Corrupt`].
fn stored_f32s<'v>(
    table: &'static str,
    dim: usize,
    key: &dyn std::fmt::Display,
    v: &'v [u8],
) -> Result<&'v [u8]> {
    let mut w = Wire::new(payload(table, key, v)?);
    let raw = w.f32s().ok_or_else(|| wire_error(table, key, None))?;
    if w.left() != 0 {
        return Err(wire_error(table, key, Some(&w)));
    }
    if raw.len() != dim * 4 {
        return Err(Error::corrupt(
            table,
            key,
            format!(
                "a vector of {} numbers in a scope of dimension {dim}",
                raw.len() / 4
            ),
        ));
    }
    Ok(raw)
}

/// The cosine of `q` (whose norm is `q_norm`) and a stored vector, read from its value in place
/// ([`stored_f32s`]): a query scans every vector of the scope without a cache, and this is its
/// whole per-vector cost.
fn cosine_stored(
    table: &'static str,
    q: &[f32],
    q_norm: f64,
    key: &dyn std::fmt::Display,
    v: &[u8],
) -> Result<f64> {
    let raw = stored_f32s(table, q.len(), key, v)?;
    let (dot, sq) = dot_and_square(raw, q);
    let n = q_norm * sq.sqrt();
    Ok(if n == 0.0 { 0.0 } else { dot / n })
}

/// Lanes of the dot product: eight independent `f32` sums, which the compiler keeps in one
/// SIMD register (one `f64` sum, in order, cannot be vectorised).
const LANES: usize = 8;

/// The dot product of the little-endian `f32`s in `raw` with `q`, and their sum of squares:
/// [`LANES`] partial sums in `f32`, added in `f64` at the end (the rest, under eight numbers,
/// in `f64`). The same order on every machine, so the same scores.
fn dot_and_square(raw: &[u8], q: &[f32]) -> (f64, f64) {
    let mut d = [0f32; LANES];
    let mut s = [0f32; LANES];
    let whole = raw.chunks_exact(4 * LANES).zip(q.chunks_exact(LANES));
    for (bytes, qs) in whole {
        for (((c, x), dl), sl) in bytes.chunks_exact(4).zip(qs).zip(&mut d).zip(&mut s) {
            let y = f32::from_le_bytes(c.try_into().unwrap_or_default());
            *dl += x * y;
            *sl += y * y;
        }
    }
    let (mut dot, mut sq) = (
        d.iter().map(|x| f64::from(*x)).sum::<f64>(),
        s.iter().map(|x| f64::from(*x)).sum::<f64>(),
    );
    let done = q.len() / LANES * LANES;
    let rest = raw.get(done * 4..).unwrap_or_default().chunks_exact(4);
    for (c, x) in rest.zip(q.get(done..).unwrap_or_default()) {
        let y = f64::from(f32::from_le_bytes(c.try_into().unwrap_or_default()));
        dot += f64::from(*x) * y;
        sq += y * y;
    }
    (dot, sq)
}

/// Where a scope's vectors come from: the callers' own (table `vectors`), or the store's
/// embedder, one model's (table `embeddings`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Space<'a> {
    /// The vectors callers passed with their memories.
    Caller,
    /// The vectors the store's embedder made with this model.
    Model(&'a str),
}

impl<'a> Space<'a> {
    /// The embedder's model, if any.
    pub fn model(&self) -> Option<&'a str> {
        match self {
            Space::Caller => None,
            Space::Model(m) => Some(m),
        }
    }
}

use crate::storage::embeddings::CURSOR_KEY;

/// Scope `sid`'s dimension, if it has a vector.
pub fn dimension(kv: &(impl KvRead + ?Sized), sid: u32) -> Result<Option<u32>> {
    dimension_in(kv, sid, Space::Caller)
}

/// Scope `sid`'s dimension in `space`, if it has a vector there.
pub fn dimension_in(
    kv: &(impl KvRead + ?Sized),
    sid: u32,
    space: Space<'_>,
) -> Result<Option<u32>> {
    let key = format_args!("(scope {sid}, dimension)");
    match space {
        Space::Caller => VECTORS.read(kv, (sid, DIM_KEY), |v| decode("vectors", &key, v)),
        Space::Model(m) => crate::storage::embeddings::dimension(kv, sid, m),
    }
}

/// Memory `id`'s vector in scope `sid`, if it has one.
pub fn get(kv: &(impl KvRead + ?Sized), sid: u32, id: u64) -> Result<Option<Vec<f32>>> {
    VECTORS.read(kv, (sid, id), |v| {
        decode("vectors", &format_args!("(scope {sid}, #{id})"), v)
    })
}

/// The dimension of scope `sid` in `space`, checked against the query `q`: `None` when the
/// scope has no vector there; a query of another dimension is [`Error::Invalid`].
fn query_dimension(
    kv: &(impl KvRead + ?Sized),
    sid: u32,
    space: Space<'_>,
    q: &[f32],
) -> Result<Option<usize>> {
    validate(q)?;
    let Some(dim) = dimension_in(kv, sid, space)? else {
        return Ok(None);
    };
    if q.len() != dim as usize {
        return Err(Error::invalid(
            "vector",
            format!(
                "the query has {} numbers; this scope's vectors have {dim}",
                q.len()
            ),
        ));
    }
    Ok(Some(q.len()))
}

/// Visits the stored vectors of scope `sid` in `space` with ids from `from`, in id order, as
/// their checked raw `f32` bytes.
fn each_stored(
    kv: &(impl KvRead + ?Sized),
    sid: u32,
    space: Space<'_>,
    dim: usize,
    from: u64,
    mut f: impl FnMut(u64, &[u8]),
) -> Result<()> {
    match space {
        Space::Caller => VECTORS.scan(
            kv,
            (sid, from)..(sid, DIM_KEY),
            Dir::Forward,
            |(_, id), v| {
                f(
                    id,
                    stored_f32s("vectors", dim, &format_args!("(scope {sid}, #{id})"), v)?,
                );
                Ok(ControlFlow::Continue(()))
            },
        ),
        Space::Model(m) => EMBEDDINGS.scan(
            kv,
            (sid, m, from)..(sid, m, CURSOR_KEY),
            Dir::Forward,
            |(_, _, id), v| {
                let key = format_args!("(scope {sid}, {m:?}, #{id})");
                f(id, stored_f32s("embeddings", dim, &key, v)?);
                Ok(ControlFlow::Continue(()))
            },
        ),
    }
}

/// Every memory of scope `sid` with a vector in `space`, with its exact cosine to `q`, by id
/// ascending: every vector read from the store. A query of another dimension than the space's
/// is [`Error::Invalid`]; a scope without vectors there gives nothing.
pub fn nearest_in(
    kv: &(impl KvRead + ?Sized),
    sid: u32,
    space: Space<'_>,
    q: &[f32],
) -> Result<Vec<(u64, f64)>> {
    let Some(dim) = query_dimension(kv, sid, space, q)? else {
        return Ok(Vec::new());
    };
    let q_norm = norm(q);
    let mut out = Vec::new();
    each_stored(kv, sid, space, dim, 0, |id, raw| {
        let (dot, sq) = dot_and_square(raw, q);
        let n = q_norm * sq.sqrt();
        out.push((id, if n == 0.0 { 0.0 } else { dot / n }));
    })?;
    Ok(out)
}

/// The memories whose cosine a cached search computes exactly: the [`RESCORED`] best by the
/// quantised cosine.
pub const RESCORED: usize = 200;

/// [`nearest_in`] through the handle's cache of quantised vectors (docs/design.md 12.8): the
/// cosine of every vector approximated from the cache, brought up to date from the snapshot
/// first (the vectors appended since read; all of them again after a rewrite), then the exact
/// cosine of the [`RESCORED`] best, of the memories in `exact` (the words' top, which a hybrid
/// rescores) and of the neighbours within [`NEIGHBOUR_REACH`] ids of each, read from the store.
/// By id ascending. A store of a format before 7, or a space whose highest id times a row's
/// bytes exceeds the cache ([`MAX_BYTES`]), takes [`nearest_in`].
pub(crate) fn nearest_cached(
    kv: &(impl KvRead + ?Sized),
    cache: &VectorCache,
    sid: u32,
    space: Space<'_>,
    q: &[f32],
    exact: &[u64],
) -> Result<Vec<(u64, f64)>> {
    let (Some(rewrites), Some(dim)) = (rewrites(kv)?, query_dimension(kv, sid, space, q)?) else {
        return nearest_in(kv, sid, space, q);
    };
    let Some(last) = last_id(kv, sid, space)? else {
        return Ok(Vec::new());
    };
    // At most `last + 1` vectors: a space that may not fit is scanned from the file at once,
    // not read into a matrix that the cache would refuse (and then read again).
    if (last.saturating_add(1) as usize).saturating_mul(Matrix::row_bytes(dim)) > MAX_BYTES {
        return nearest_in(kv, sid, space, q);
    }
    let key: SpaceKey = (sid, space.model().map(str::to_string));
    let known = cache
        .get(&key)
        .filter(|c| c.rewrites == rewrites && c.matrix.dim() == dim)
        .map(|c| c.matrix);
    let matrix = match known {
        Some(m) if m.last_id().is_some_and(|h| h >= last) => m,
        known => {
            let base = known.unwrap_or_else(|| Arc::new(Matrix::new(dim)));
            let from = base.last_id().map_or(0, |h| h.saturating_add(1));
            let mut seg = Segment::default();
            let mut buf = Vec::with_capacity(dim);
            each_stored(kv, sid, space, dim, from, |id, raw| {
                buf.clear();
                buf.extend(
                    raw.chunks_exact(4)
                        .map(|c| f32::from_le_bytes(c.try_into().unwrap_or_default())),
                );
                seg.push(dim, id, &buf);
            })?;
            let m = Arc::new(base.append(seg));
            cache.put(
                key,
                Cached {
                    rewrites,
                    matrix: Arc::clone(&m),
                },
            );
            m
        }
    };
    let mut near = matrix.cosines(q, last);
    rescore(kv, sid, space, q, &mut near, exact)?;
    Ok(near)
}

/// The highest memory id with a vector of scope `sid` in `space`.
fn last_id(kv: &(impl KvRead + ?Sized), sid: u32, space: Space<'_>) -> Result<Option<u64>> {
    match space {
        Space::Caller => VECTORS.edge(kv, (sid, 0)..(sid, DIM_KEY), Dir::Reverse, |(_, id), _| {
            Ok(id)
        }),
        Space::Model(m) => EMBEDDINGS.edge(
            kv,
            (sid, m, 0)..(sid, m, CURSOR_KEY),
            Dir::Reverse,
            |(_, _, id), _| Ok(id),
        ),
    }
}

/// Replaces the approximate cosines in `near` (by id) of the [`RESCORED`] best, of `exact`
/// and of their neighbours by the exact ones, read from the store.
fn rescore(
    kv: &(impl KvRead + ?Sized),
    sid: u32,
    space: Space<'_>,
    q: &[f32],
    near: &mut [(u64, f64)],
    exact: &[u64],
) -> Result<()> {
    let mut places: Vec<usize> = (0..near.len()).collect();
    if places.len() > RESCORED {
        places.select_nth_unstable_by(RESCORED, |&a, &b| {
            let (x, y) = (near.get(a), near.get(b));
            y.map(|p| p.1)
                .unwrap_or(0.0)
                .total_cmp(&x.map(|p| p.1).unwrap_or(0.0))
        });
        places.truncate(RESCORED);
    }
    places.extend(
        exact
            .iter()
            .filter_map(|d| near.binary_search_by_key(d, |&(id, _)| id).ok()),
    );
    let reach = NEIGHBOUR_REACH as usize;
    let mut all: Vec<usize> = places
        .iter()
        .flat_map(|&i| i.saturating_sub(reach)..(i + reach + 1).min(near.len()))
        .collect();
    all.sort_unstable();
    all.dedup();
    let ids: Vec<u64> = all
        .iter()
        .filter_map(|&i| near.get(i).map(|p| p.0))
        .collect();
    let q_norm = norm(q);
    match space {
        Space::Caller => VECTORS.prefetch(kv, ids.iter().map(|&id| (sid, id)))?,
        Space::Model(m) => EMBEDDINGS.prefetch(kv, ids.iter().map(|&id| (sid, m, id)))?,
    }
    for i in all {
        let Some(slot) = near.get_mut(i) else {
            continue;
        };
        let id = slot.0;
        let c = match space {
            Space::Caller => VECTORS.read(kv, (sid, id), |v| {
                cosine_stored(
                    "vectors",
                    q,
                    q_norm,
                    &format_args!("(scope {sid}, #{id})"),
                    v,
                )
            })?,
            Space::Model(m) => EMBEDDINGS.read(kv, (sid, m, id), |v| {
                let key = format_args!("(scope {sid}, {m:?}, #{id})");
                cosine_stored("embeddings", q, q_norm, &key, v)
            })?,
        };
        if let Some(c) = c {
            slot.1 = c;
        }
    }
    Ok(())
}

/// The ids of the words' top [`WORDS_DEPTH`] (by score, then id), which a hybrid search
/// rescores exactly ([`nearest_cached`]).
pub fn words_top(lex: &Scores) -> Vec<u64> {
    let mut order: Vec<(u64, f64)> = lex.iter().map(|(d, s)| (*d, s.score)).collect();
    let by = |a: &(u64, f64), b: &(u64, f64)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if order.len() > WORDS_DEPTH {
        order.select_nth_unstable_by(WORDS_DEPTH, by);
        order.truncate(WORDS_DEPTH);
    }
    order.into_iter().map(|(d, _)| d).collect()
}

/// The vector ranking as scores (the cosine).
pub fn as_scored(near: &[(u64, f64)]) -> Ranking {
    near.iter()
        .map(|&(d, c)| (d, Scored { score: c, mask: 0 }))
        .collect()
}

/// A scope's candidates with their scores, each memory once, in no order.
pub type Ranking = Vec<(u64, Scored)>;

/// The words' share of a hybrid score by default ([`fuse`]).
pub const WORDS_WEIGHT: f64 = 0.6;
/// How much of its best neighbour's cosine a memory takes ([`smoothed`]).
const NEIGHBOUR_SHARE: f64 = 0.85;
/// The neighbours on each side a memory takes from.
const NEIGHBOUR_REACH: u64 = 2;
/// The lexical ranking's top that the vectors rescore.
const WORDS_DEPTH: usize = 50;
/// Both rankings are normalised between their best and their 20th best score.
const NORM_DEPTH: usize = 20;

/// The cosines as the fusion reads them: each minus the scope's median (a query's cosines sit
/// high and close together with small models), then raised to `0.85` times the best of the
/// two neighbours on each side when that is more (memories noted together share context, as
/// the words' ranking already uses). By memory id, ascending: ids are unique, so a memory's
/// neighbours within [`NEIGHBOUR_REACH`] ids are within as many places of it (no hashing: at
/// 10^5 vectors the map's lookups were a visible part of a hybrid query).
fn smoothed(near: &[(u64, f64)]) -> Vec<(u64, f64)> {
    let mut c: Vec<f64> = near.iter().map(|&(_, x)| x).collect();
    let median = match c.len() {
        0 => 0.0,
        n => *c.select_nth_unstable_by(n / 2, f64::total_cmp).1,
    };
    let mut z: Vec<(u64, f64)> = near.iter().map(|&(d, x)| (d, x - median)).collect();
    z.sort_unstable_by_key(|&(d, _)| d);
    let reach = NEIGHBOUR_REACH as usize;
    z.iter()
        .enumerate()
        .map(|(i, &(d, own))| {
            let around = z
                .get(i.saturating_sub(reach)..(i + reach + 1).min(z.len()))
                .unwrap_or_default();
            let best = around
                .iter()
                .filter(|&&(n, _)| n != d && n.abs_diff(d) <= NEIGHBOUR_REACH)
                .fold(f64::NEG_INFINITY, |a, &(_, b)| a.max(b));
            (d, own.max(NEIGHBOUR_SHARE * best))
        })
        .collect()
}

/// The smoothed cosine of memory `doc` in `v` (by id, ascending), if it has a vector.
fn smoothed_of(v: &[(u64, f64)], doc: u64) -> Option<f64> {
    let i = v.binary_search_by_key(&doc, |&(d, _)| d).ok()?;
    v.get(i).map(|&(_, s)| s)
}

/// `x` on a 0-to-1 scale between `lo` (the 20th best, or the last) and `hi` (the best).
fn normalised(x: f64, lo: f64, hi: f64) -> f64 {
    ((x - lo) / (hi - lo).max(1e-9)).clamp(0.0, 1.0)
}

/// The 20th best of `xs` (or its last, when it has fewer), and the best: selected, not sorted
/// (a hybrid query has a smoothed cosine for every vector of the scope).
fn span(mut xs: Vec<f64>) -> (f64, f64) {
    let hi = xs.iter().copied().max_by(f64::total_cmp).unwrap_or(0.0);
    let Some(k) = NORM_DEPTH.min(xs.len()).checked_sub(1) else {
        return (0.0, 0.0);
    };
    let lo = *xs.select_nth_unstable_by(k, |a, b| b.total_cmp(a)).1;
    (lo, hi)
}

/// The hybrid ranking: the lexical top 50 rescored by `words * l + (1 - words) * v`, where `l`
/// is the lexical score and `v` the [`smoothed`] cosine, each normalised between its 20th best
/// and its best; those 50 rank first (their score is one more than the blend), then every other
/// memory with words or a vector by the same blend. Measured on the five LoCoMo conversations
/// with multilingual-e5-small (docs/performance.md, "Hybrid search"): recall_any@10 0.826
/// held out against the words' 0.804, never below them on a conversation, where reciprocal
/// rank fusion lost (0.755); the parameters were chosen by leaving each conversation out.
/// As a list (each memory once), not a map: a hybrid query has a candidate for every vector of
/// the scope, and hashing 10^5 of them was a tenth of its time.
pub fn fuse(lex: &Scores, near: &[(u64, f64)], words: f64) -> Ranking {
    let mut order: Vec<(&u64, &Scored)> = lex.iter().collect();
    order.sort_by(|a, b| b.1.score.total_cmp(&a.1.score).then(a.0.cmp(b.0)));
    let (l_lo, l_hi) = span(
        order
            .iter()
            .take(WORDS_DEPTH)
            .map(|(_, s)| s.score)
            .collect(),
    );
    let v = smoothed(near);
    let (v_lo, v_hi) = span(v.iter().map(|&(_, s)| s).collect());
    let mix = |l: f64, vv: f64| words * l + (1.0 - words) * vv;
    let blend = |doc: u64, l: f64| {
        mix(
            l,
            smoothed_of(&v, doc).map_or(0.0, |s| normalised(s, v_lo, v_hi)),
        )
    };
    let mut out = Vec::with_capacity(order.len() + v.len());
    for (rank, (doc, s)) in order.iter().enumerate() {
        let l = normalised(s.score, l_lo, l_hi);
        let top = if rank < WORDS_DEPTH { 1.0 } else { 0.0 };
        out.push((
            **doc,
            Scored {
                score: top + blend(**doc, l),
                mask: s.mask,
            },
        ));
    }
    // The memories with a vector and no word, found by walking both id orders together.
    let mut worded: Vec<u64> = lex.keys().copied().collect();
    worded.sort_unstable();
    let mut w = worded.iter().peekable();
    for &(doc, s) in &v {
        while w.next_if(|&&x| x < doc).is_some() {}
        if w.peek().is_some_and(|&&x| x == doc) {
            continue;
        }
        out.push((
            doc,
            Scored {
                score: mix(0.0, normalised(s, v_lo, v_hi)),
                mask: 0,
            },
        ));
    }
    out
}

/// An embedding as [`crate::NewMemory`] carries it: compared bit for bit, so that it is `Eq`.
#[derive(Debug, Clone, Default)]
pub struct Embedding(pub Vec<f32>);

impl PartialEq for Embedding {
    fn eq(&self, other: &Self) -> bool {
        self.0.len() == other.0.len()
            && self
                .0
                .iter()
                .zip(&other.0)
                .all(|(a, b)| a.to_bits() == b.to_bits())
    }
}

impl Eq for Embedding {}

/// Stores `v` as memory `id`'s vector in scope `meta` (named `scope`), checking it and the
/// scope's dimension (fixed by its first vector).
pub(crate) fn put(
    tx: &mut WriteTxn<'_>,
    meta: &ScopeMeta,
    scope: &str,
    id: u64,
    v: &[f32],
) -> Result<()> {
    validate(v)?;
    match dimension(&tx.tx, meta.id)? {
        Some(d) if d as usize != v.len() => {
            return Err(Error::invalid(
                "vector",
                format!(
                    "it has {} numbers; scope {scope:?} holds vectors of {d}",
                    v.len()
                ),
            ));
        }
        Some(_) => {}
        None => VECTORS.put(&mut tx.tx, (meta.id, DIM_KEY), &encode(&(v.len() as u32))?)?,
    }
    if any_at_or_above(&tx.tx, VECTORS, (meta.id, id), (meta.id, DIM_KEY))? {
        count_rewrite(&mut tx.tx)?;
    }
    VECTORS.put(&mut tx.tx, (meta.id, id), &encode(&v)?)
}

/// Restores the vectors of `scope` (which holds its memories already) as an import gives them:
/// its declared dimension, if any, then each memory's vector, every one checked against it.
pub(crate) fn restore(
    tx: &mut WriteTxn<'_>,
    scope: &str,
    dimension: Option<u32>,
    vectors: &[(u64, Vec<f32>)],
) -> Result<()> {
    if dimension.is_none() && vectors.is_empty() {
        return Ok(());
    }
    let meta = tx
        .scope_meta(scope)?
        .ok_or_else(|| Error::invalid("import", format!("scope {scope:?} holds no memory")))?;
    if let Some(d) = dimension {
        VECTORS.put(&mut tx.tx, (meta.id, DIM_KEY), &encode(&d)?)?;
    }
    for (id, v) in vectors {
        put(tx, &meta, scope, *id, v)?;
    }
    Ok(())
}

impl WriteTxn<'_> {
    /// Stores the embedding of memory `id` of `scope`, replacing any. The scope's first vector
    /// fixes its dimension; another dimension is [`Error::Invalid`].
    pub fn set_vector(&mut self, scope: &str, id: u64, v: &[f32]) -> Result<()> {
        self.require(crate::storage::access::Access::Write, scope)?;
        let meta = crate::storage::txn::holding(self.scope_meta(scope)?, id)?;
        put(self, &meta, scope, id, v)
    }
}

impl Store {
    /// Stores the embedding of memory `id` of `scope`; see [`WriteTxn::set_vector`].
    pub fn set_vector(&self, scope: &str, id: u64, v: &[f32]) -> Result<()> {
        self.write(|tx| tx.set_vector(scope, id, v))
    }
}

#[cfg(test)]
mod tests {
    //! The lane-wise dot product against the plain one, for every length around the lanes; the
    //! smoothing by neighbouring ids against the map it replaced.
    use super::*;

    /// The smoothing as it was first written, over a map by id: the reference.
    fn smoothed_by_map(near: &[(u64, f64)]) -> std::collections::HashMap<u64, f64> {
        let mut c: Vec<f64> = near.iter().map(|&(_, x)| x).collect();
        let median = match c.len() {
            0 => 0.0,
            n => *c.select_nth_unstable_by(n / 2, f64::total_cmp).1,
        };
        let z: std::collections::HashMap<u64, f64> =
            near.iter().map(|&(d, x)| (d, x - median)).collect();
        z.iter()
            .map(|(&d, &own)| {
                let best = (1..=NEIGHBOUR_REACH)
                    .flat_map(|k| [d.checked_sub(k), d.checked_add(k)])
                    .flatten()
                    .filter_map(|n| z.get(&n))
                    .fold(f64::NEG_INFINITY, |a, &b| a.max(b));
                (d, own.max(NEIGHBOUR_SHARE * best))
            })
            .collect()
    }

    #[test]
    fn the_fusion_lists_each_memory_once_the_worded_first() {
        let mut lex = Scores::default();
        lex.insert(
            1,
            Scored {
                score: 2.0,
                mask: 1,
            },
        );
        lex.insert(
            5,
            Scored {
                score: 1.0,
                mask: 2,
            },
        );
        lex.insert(
            9,
            Scored {
                score: 0.5,
                mask: 4,
            },
        );
        let near = [(0, 0.1), (1, 0.9), (3, 0.5), (5, 0.2), (7, 0.8)];
        let out = fuse(&lex, &near, WORDS_WEIGHT);
        let mut ids: Vec<u64> = out.iter().map(|p| p.0).collect();
        ids.sort_unstable();
        assert_eq!(ids, [0, 1, 3, 5, 7, 9]);
        for (doc, s) in &out {
            let worded = lex.get(doc);
            assert_eq!(s.mask, worded.map_or(0, |w| w.mask), "#{doc}");
            // The words' top 50 rank above every memory found by its vector alone.
            assert_eq!(s.score >= 1.0, worded.is_some(), "#{doc}: {}", s.score);
        }
    }

    #[test]
    fn the_smoothing_by_places_equals_the_smoothing_by_map_bit_for_bit() {
        let mut rng = crate::domain::test_rng::xorshift(0x5eed);
        for case in 0..300 {
            // Ids with gaps of 1 to 4 (and some runs), from 0 or near u64::MAX, in the order a
            // scan by cosine gives them (not by id).
            let n = (rng() % 60) as usize;
            let start = if case % 7 == 0 {
                u64::MAX - 200
            } else {
                rng() % 5
            };
            let mut id = start;
            let mut near: Vec<(u64, f64)> = (0..n)
                .map(|_| {
                    let x = (rng() % 2001) as f64 / 1000.0 - 1.0;
                    let here = id;
                    id = id.saturating_add(1 + rng() % 4);
                    (here, x)
                })
                .collect();
            near.dedup_by_key(|p| p.0);
            near.sort_by(|a, b| b.1.total_cmp(&a.1));
            let want = smoothed_by_map(&near);
            let got = smoothed(&near);
            assert_eq!(got.len(), want.len());
            assert!(got.windows(2).all(|w| matches!(w, [a, b] if a.0 < b.0)));
            for (d, s) in got {
                assert_eq!(want.get(&d).map(|w| w.to_bits()), Some(s.to_bits()), "#{d}");
            }
        }
    }

    #[test]
    fn dot_and_square_match_the_plain_sums() {
        for n in (1..=40).chain([383, 384, 385]) {
            let q: Vec<f32> = (0..n).map(|i| ((i * 7 % 13) as f32 - 6.0) / 5.0).collect();
            let v: Vec<f32> = (0..n).map(|i| ((i * 5 % 11) as f32 - 4.0) / 3.0).collect();
            let raw: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            let (dot, sq) = dot_and_square(&raw, &q);
            let want_dot: f64 = q
                .iter()
                .zip(&v)
                .map(|(a, b)| f64::from(*a) * f64::from(*b))
                .sum();
            let want_sq: f64 = v.iter().map(|b| f64::from(*b) * f64::from(*b)).sum();
            assert!(
                (dot - want_dot).abs() <= 1e-4 * want_dot.abs().max(1.0),
                "{n}: {dot} {want_dot}"
            );
            assert!(
                (sq - want_sq).abs() <= 1e-4 * want_sq.max(1.0),
                "{n}: {sq} {want_sq}"
            );
        }
    }
}
