//! The ranking by cosine: exact, every vector of the space read from the store
//! ([`nearest_in`]), or through the handle's cache of quantised vectors, the best rescored
//! exactly ([`nearest_cached`], docs/design.md 12.8); both by memory id.

use std::ops::ControlFlow;
use std::sync::Arc;

use super::{dimension_in, norm, validate, Space, DIM_KEY};
use crate::domain::quantised::{Matrix, Segment};
use crate::error::{Error, Result};
use crate::memory::search::vector::fuse::NEIGHBOUR_REACH;
use crate::storage::codec::{payload, wire_error, Wire};
use crate::storage::embeddings::{rewrites, CURSOR_KEY};
use crate::storage::kv::{Dir, KvRead};
use crate::storage::tables::{EMBEDDINGS, VECTORS};
use crate::storage::vector_cache::{Cached, SpaceKey, VectorCache, MAX_BYTES};

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
        let reason = format!(
            "the query has {} numbers; this scope's vectors have {dim}",
            q.len()
        );
        return Err(Error::invalid("vector", reason));
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

#[cfg(test)]
mod tests {
    //! The lane-wise dot product against the plain one, for every length around the lanes.
    use super::*;

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
