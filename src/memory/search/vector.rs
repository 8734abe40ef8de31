//! Embeddings: a caller that has one stores it with a memory ([`WriteTxn::set_vector`]); a query
//! that carries one ranks by exact cosine over the scope's vectors, alone or fused with the
//! lexical ranking by reciprocal rank fusion. One dimension per scope, fixed by its first
//! vector. Table `vectors`: `(scope id, memory id)` -> enveloped `Vec<f32>`;
//! `(scope id, u64::MAX)` -> enveloped `u32`, the dimension.

use std::ops::ControlFlow;

use crate::domain::record::ScopeMeta;
use crate::error::{Error, Result};
use crate::memory::search::score::{Scored, Scores};
use crate::storage::codec::{decode, encode, payload, wire_error, Wire};
use crate::storage::kv::{Dir, KvRead};
use crate::storage::store::Store;
use crate::storage::tables::VECTORS;
use crate::storage::txn::WriteTxn;

/// Largest dimension accepted.
pub const MAX_DIMENSION: usize = 4096;

/// The key of a scope's dimension.
const DIM_KEY: u64 = u64::MAX;

/// Checks a vector: 1 to [`MAX_DIMENSION`] finite numbers, not all zero.
pub fn validate(v: &[f32]) -> Result<()> {
    if v.is_empty() || v.len() > MAX_DIMENSION {
        return Err(Error::invalid(
            "vector",
            format!(
                "it has {} numbers; 1 to {MAX_DIMENSION} are accepted",
                v.len()
            ),
        ));
    }
    if v.iter().any(|x| !x.is_finite()) {
        return Err(Error::invalid(
            "vector",
            "it holds a number that is not finite",
        ));
    }
    if norm(v) == 0.0 {
        return Err(Error::invalid("vector", "it is all zeros"));
    }
    Ok(())
}

/// The Euclidean norm of `v`, summed in `f64`.
pub(crate) fn norm(v: &[f32]) -> f64 {
    v.iter()
        .map(|x| f64::from(*x) * f64::from(*x))
        .sum::<f64>()
        .sqrt()
}

/// The cosine of `q` (whose norm is `q_norm`) and a stored vector, read from its value in place:
/// the envelope checked, then the `f32`s multiplied as they lie, with no allocation and no serde
/// (a query scans every vector of the scope: this is its whole per-vector cost). A value that is
/// not a vector of `q`'s dimension is [`Error::Corrupt`].
fn cosine_stored(q: &[f32], q_norm: f64, key: &dyn std::fmt::Display, v: &[u8]) -> Result<f64> {
    let mut w = Wire::new(payload("vectors", key, v)?);
    let raw = w.f32s().ok_or_else(|| wire_error("vectors", key, None))?;
    if w.left() != 0 {
        return Err(wire_error("vectors", key, Some(&w)));
    }
    if raw.len() != q.len() * 4 {
        return Err(Error::corrupt(
            "vectors",
            key,
            format!(
                "a vector of {} numbers in a scope of dimension {}",
                raw.len() / 4,
                q.len()
            ),
        ));
    }
    let (mut dot, mut sq) = (0f64, 0f64);
    for (c, x) in raw.chunks_exact(4).zip(q) {
        let y = f64::from(f32::from_le_bytes(c.try_into().unwrap_or_default()));
        dot += f64::from(*x) * y;
        sq += y * y;
    }
    let n = q_norm * sq.sqrt();
    Ok(if n == 0.0 { 0.0 } else { dot / n })
}

/// Scope `sid`'s dimension, if it has a vector.
pub fn dimension(kv: &(impl KvRead + ?Sized), sid: u32) -> Result<Option<u32>> {
    VECTORS.read(kv, (sid, DIM_KEY), |v| {
        decode("vectors", &format_args!("(scope {sid}, dimension)"), v)
    })
}

/// Memory `id`'s vector in scope `sid`, if it has one.
pub fn get(kv: &(impl KvRead + ?Sized), sid: u32, id: u64) -> Result<Option<Vec<f32>>> {
    VECTORS.read(kv, (sid, id), |v| {
        decode("vectors", &format_args!("(scope {sid}, #{id})"), v)
    })
}

/// Every memory of scope `sid` with a vector, by cosine to `q`, best first. A query of another
/// dimension than the scope's is [`Error::Invalid`]; a scope without vectors gives nothing.
pub fn nearest(kv: &(impl KvRead + ?Sized), sid: u32, q: &[f32]) -> Result<Vec<(u64, f64)>> {
    validate(q)?;
    let Some(dim) = dimension(kv, sid)? else {
        return Ok(Vec::new());
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
    let q_norm = norm(q);
    let mut out = Vec::new();
    VECTORS.scan(kv, (sid, 0)..(sid, DIM_KEY), Dir::Forward, |(_, id), v| {
        let key = format_args!("(scope {sid}, #{id})");
        out.push((id, cosine_stored(q, q_norm, &key, v)?));
        Ok(ControlFlow::Continue(()))
    })?;
    out.sort_by(|a, b| b.1.total_cmp(&a.1).then(b.0.cmp(&a.0)));
    Ok(out)
}

/// The vector ranking as scores (the cosine).
pub fn as_scored(near: &[(u64, f64)]) -> Scores {
    near.iter()
        .map(|&(d, c)| (d, Scored { score: c, mask: 0 }))
        .collect()
}

/// Reciprocal rank fusion of the lexical scores and the vector ranking: each document scores
/// the sum over the rankings it appears in of `1 / (k + rank)`, ranks from 1.
pub fn fuse(lex: &Scores, near: &[(u64, f64)], k: f64) -> Scores {
    let mut order: Vec<(&u64, &Scored)> = lex.iter().collect();
    order.sort_by(|a, b| b.1.score.total_cmp(&a.1.score).then(b.0.cmp(a.0)));
    let mut out = Scores::default();
    for (rank, (doc, s)) in order.into_iter().enumerate() {
        out.insert(
            *doc,
            Scored {
                score: 1.0 / (k + rank as f64 + 1.0),
                mask: s.mask,
            },
        );
    }
    for (rank, (doc, _)) in near.iter().enumerate() {
        let e = out.entry(*doc).or_insert(Scored {
            score: 0.0,
            mask: 0,
        });
        e.score += 1.0 / (k + rank as f64 + 1.0);
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
