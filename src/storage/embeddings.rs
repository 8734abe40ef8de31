//! The write side of table `embeddings` (docs/design.md 12.7): the vectors of the store's
//! embedder, per scope and model, with each (scope, model)'s dimension and backfill cursor, and
//! `meta["embedding_models"]`, the models that have vectors. The backfill writes through here
//! (`memory::search::embed`), a redaction deletes a memory's vectors through here
//! (`memory::lifecycle`), and the search reads the table (`memory::search::vector`).

use crate::error::{Error, Result};
use crate::storage::codec::{decode, encode};
use crate::storage::kv::{KvRead, KvWrite};
use crate::storage::tables::{EMBEDDINGS, META};

/// The `meta` key of the models with vectors in the store.
pub const MODELS_KEY: &str = "embedding_models";
/// The key of a (scope, model)'s dimension.
pub const DIM_KEY: u64 = u64::MAX;
/// The key of a (scope, model)'s backfill cursor: the first memory id it has not looked at.
pub const CURSOR_KEY: u64 = u64::MAX - 1;

/// The models with vectors in the store.
pub fn models(kv: &(impl KvRead + ?Sized)) -> Result<Vec<String>> {
    Ok(META
        .read(kv, MODELS_KEY, |v| {
            decode::<Vec<String>>("meta", &MODELS_KEY, v)
        })?
        .unwrap_or_default())
}

/// Records `model` among the store's models, once.
pub fn register(kv: &mut (impl KvWrite + ?Sized), model: &str) -> Result<()> {
    let mut all = models(kv)?;
    if !all.iter().any(|m| m == model) {
        all.push(model.to_string());
        META.put(kv, MODELS_KEY, &encode(&all)?)?;
    }
    Ok(())
}

/// Scope `sid`'s dimension of `model`, if it has a vector of it.
pub fn dimension(kv: &(impl KvRead + ?Sized), sid: u32, model: &str) -> Result<Option<u32>> {
    EMBEDDINGS.read(kv, (sid, model, DIM_KEY), |v| {
        decode(
            "embeddings",
            &format_args!("(scope {sid}, {model:?}, dimension)"),
            v,
        )
    })
}

/// The backfill cursor of (`sid`, `model`): 0 before its first batch.
pub fn cursor(kv: &(impl KvRead + ?Sized), sid: u32, model: &str) -> Result<u64> {
    Ok(EMBEDDINGS
        .read(kv, (sid, model, CURSOR_KEY), |v| {
            decode::<u64>(
                "embeddings",
                &format_args!("(scope {sid}, {model:?}, cursor)"),
                v,
            )
        })?
        .unwrap_or(0))
}

/// Moves the cursor of (`sid`, `model`) to `to`, never back.
pub fn advance(kv: &mut (impl KvWrite + ?Sized), sid: u32, model: &str, to: u64) -> Result<()> {
    if cursor(kv, sid, model)? < to {
        EMBEDDINGS.put(kv, (sid, model, CURSOR_KEY), &encode(&to)?)?;
    }
    Ok(())
}

/// Stores memory `id`'s vector of `model` in scope `sid` (checked by the caller); the first
/// vector of a (scope, model) fixes its dimension, and one of another is [`Error::Embedder`].
pub fn put(
    kv: &mut (impl KvWrite + ?Sized),
    sid: u32,
    model: &str,
    id: u64,
    v: &[f32],
) -> Result<()> {
    match dimension(kv, sid, model)? {
        Some(d) if d as usize != v.len() => {
            return Err(Error::Embedder(format!(
                "model {model:?} answered {} numbers where its vectors in this store have {d}: drop its vectors first (`somna embedder drop-model`)",
                v.len()
            )));
        }
        Some(_) => {}
        None => EMBEDDINGS.put(kv, (sid, model, DIM_KEY), &encode(&(v.len() as u32))?)?,
    }
    EMBEDDINGS.put(kv, (sid, model, id), &encode(&v)?)
}

/// Deletes memory `id`'s vector of every model in scope `sid` (a redaction).
pub fn delete_memory(kv: &mut (impl KvWrite + ?Sized), sid: u32, id: u64) -> Result<()> {
    for m in models(kv)? {
        EMBEDDINGS.delete(kv, (sid, m.as_str(), id))?;
    }
    Ok(())
}

/// Deletes every vector of `model` (and its dimensions and cursors) in the scopes `sids`, and
/// the model from [`MODELS_KEY`]; how many vectors there were.
pub fn drop_model(kv: &mut (impl KvWrite + ?Sized), sids: &[u32], model: &str) -> Result<u64> {
    let mut n = 0;
    for &sid in sids {
        let had = u64::from(EMBEDDINGS.contains(kv, (sid, model, DIM_KEY))?)
            + u64::from(EMBEDDINGS.contains(kv, (sid, model, CURSOR_KEY))?);
        let all = EMBEDDINGS.delete_range(kv, (sid, model, 0)..=(sid, model, u64::MAX))?;
        n += all.saturating_sub(had);
    }
    let mut all = models(kv)?;
    if all.iter().any(|m| m == model) {
        all.retain(|m| m != model);
        META.put(kv, MODELS_KEY, &encode(&all)?)?;
    }
    Ok(n)
}
