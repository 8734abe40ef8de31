//! The write side of table `embeddings` (docs/design.md 12.7): the vectors of the store's
//! embedder, per scope and model, with each (scope, model)'s dimension and backfill cursor, and
//! `meta["embedding_models"]`, the models that have vectors; and `meta["vector_rewrites"]`
//! (format 7, docs/design.md 12.8), the count of writes that replaced, inserted below a scope's
//! highest id, or deleted a vector of either table, which a handle's cache of quantised vectors
//! ([`crate::storage::vector_cache`]) checks. The backfill writes through here
//! (`memory::search::embed`), a redaction deletes a memory's vectors through here
//! (`memory::lifecycle`), and the search reads the table (`memory::search::vector`).

use std::ops::ControlFlow;

use crate::error::{Error, Result};
use crate::storage::codec::{decode, encode};
use crate::storage::kv::{Dir, KvRead, KvWrite};
use crate::storage::tables::{stored_format, EMBEDDINGS, META, REWRITES_FORMAT};

/// The `meta` key of the models with vectors in the store.
pub const MODELS_KEY: &str = "embedding_models";
/// The key of a (scope, model)'s dimension.
pub const DIM_KEY: u64 = u64::MAX;
/// The key of a (scope, model)'s backfill cursor: the first memory id it has not looked at.
pub const CURSOR_KEY: u64 = u64::MAX - 1;

/// The `meta` key of the count of vector rewrites.
pub const REWRITES_KEY: &str = "vector_rewrites";

/// The count of vector rewrites in the store: `None` before format 7, where it is not kept
/// (an older somna may be writing), so no cache may trust it.
pub fn rewrites(kv: &(impl KvRead + ?Sized)) -> Result<Option<u64>> {
    if stored_format(kv)?.unwrap_or(0) < REWRITES_FORMAT {
        return Ok(None);
    }
    Ok(Some(
        META.read(kv, REWRITES_KEY, |v| {
            decode::<u64>("meta", &REWRITES_KEY, v)
        })?
        .unwrap_or(0),
    ))
}

/// Raises the count of vector rewrites by one.
pub fn count_rewrite(kv: &mut (impl KvWrite + ?Sized)) -> Result<()> {
    let n = META
        .read(kv, REWRITES_KEY, |v| {
            decode::<u64>("meta", &REWRITES_KEY, v)
        })?
        .unwrap_or(0);
    META.put(kv, REWRITES_KEY, &encode(&n.saturating_add(1))?)
}

/// Whether the (scope, space) range `from..below` holds a key: a vector put at `from` is then
/// not an append ([`count_rewrite`]).
pub(crate) fn any_at_or_above<'a, K: crate::storage::keys::Key>(
    kv: &(impl KvRead + ?Sized),
    table: crate::storage::keys::Table<K>,
    from: K::Enc<'a>,
    below: K::Enc<'a>,
) -> Result<bool> {
    let mut found = false;
    table.scan(kv, from..below, Dir::Forward, |_, _| {
        found = true;
        Ok(ControlFlow::Break(()))
    })?;
    Ok(found)
}

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
    if any_at_or_above(kv, EMBEDDINGS, (sid, model, id), (sid, model, CURSOR_KEY))? {
        count_rewrite(kv)?;
    }
    EMBEDDINGS.put(kv, (sid, model, id), &encode(&v)?)
}

/// Deletes memory `id`'s vector of every model in scope `sid` (a redaction).
pub fn delete_memory(kv: &mut (impl KvWrite + ?Sized), sid: u32, id: u64) -> Result<()> {
    let mut any = false;
    for m in models(kv)? {
        any |= EMBEDDINGS.delete(kv, (sid, m.as_str(), id))?;
    }
    if any {
        count_rewrite(kv)?;
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
    if n > 0 {
        count_rewrite(kv)?;
    }
    let mut all = models(kv)?;
    if all.iter().any(|m| m == model) {
        all.retain(|m| m != model);
        META.put(kv, MODELS_KEY, &encode(&all)?)?;
    }
    Ok(n)
}
