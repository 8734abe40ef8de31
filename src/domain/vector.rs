//! Vectors as values: the checks every stored or queried embedding passes, and its norm. Pure:
//! the search ranks with them ([`crate::memory::search::vector`]), the embedder checks what an
//! endpoint answers with them.

use crate::error::{Error, Result};

/// Largest dimension accepted.
pub const MAX_DIMENSION: usize = 4096;

/// Checks a vector: 1 to [`MAX_DIMENSION`] finite numbers, not all zero.
pub fn validate(v: &[f32]) -> Result<()> {
    if v.is_empty() || v.len() > MAX_DIMENSION {
        let reason = format!(
            "it has {} numbers; 1 to {MAX_DIMENSION} are accepted",
            v.len()
        );
        return Err(Error::invalid("vector", reason));
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
pub fn norm(v: &[f32]) -> f64 {
    v.iter()
        .map(|x| f64::from(*x) * f64::from(*x))
        .sum::<f64>()
        .sqrt()
}
