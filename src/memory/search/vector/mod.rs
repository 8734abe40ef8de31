//! Embeddings: a caller that has one stores it with a memory ([`WriteTxn::set_vector`]); a query
//! that carries one ranks by cosine over the scope's vectors ([`nearest`]: exact, or through the
//! handle's cache of quantised vectors), alone or fused with the lexical ranking ([`fuse()`]). One
//! dimension per scope, fixed by its first vector. Table `vectors`: `(scope id, memory id)` ->
//! enveloped `Vec<f32>`; `(scope id, u64::MAX)` -> enveloped `u32`, the dimension. The store's
//! embedder (`embed`, beside this folder) keeps its own vectors apart, per model, in table
//! `embeddings` (the same values under `(scope id, model, memory id)`): a [`Space`] names which
//! of the two a query ranks by. This file holds what is stored: the spaces, the dimensions, a
//! memory's vector, and the writes.

mod fuse;
mod nearest;

pub use fuse::{as_scored, fuse, words_top, Ranking, WORDS_WEIGHT};
pub(crate) use nearest::nearest_cached;

use crate::domain::record::ScopeMeta;
use crate::error::{Error, Result};
use crate::storage::codec::{decode, encode};
use crate::storage::embeddings::{any_at_or_above, count_rewrite};
use crate::storage::kv::KvRead;
use crate::storage::tables::VECTORS;
use crate::storage::txn::WriteTxn;

pub use crate::domain::vector::{validate, MAX_DIMENSION};

/// The key of a scope's dimension.
const DIM_KEY: u64 = u64::MAX;
pub(crate) use crate::domain::vector::norm;

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
    match dimension(&*tx.tx, meta.id)? {
        Some(d) if d as usize != v.len() => {
            let reason = format!(
                "it has {} numbers; scope {scope:?} holds vectors of {d}",
                v.len()
            );
            return Err(Error::invalid("vector", reason));
        }
        Some(_) => {}
        None => VECTORS.put(&mut *tx.tx, (meta.id, DIM_KEY), &encode(&(v.len() as u32))?)?,
    }
    if any_at_or_above(&*tx.tx, VECTORS, (meta.id, id), (meta.id, DIM_KEY))? {
        count_rewrite(&mut *tx.tx)?;
    }
    VECTORS.put(&mut *tx.tx, (meta.id, id), &encode(&v)?)
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
        VECTORS.put(&mut *tx.tx, (meta.id, DIM_KEY), &encode(&d)?)?;
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

crate::storage::store::store_calls! {
    /// Stores the embedding of memory `id` of `scope`; see [`WriteTxn::set_vector`].
    write fn set_vector(scope: &str, id: u64, v: &[f32]) -> ();
}
