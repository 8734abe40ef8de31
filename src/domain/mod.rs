//! **Layer 0, the domain**: somna's values and pure rules: blocks, records, text rules and
//! dates, claims and citations, the wake cover, the checks of a vector. Nothing here touches storage or a [`crate::Store`];
//! it may use only `crate::error` (the [`crate::Error`] type) (and `block.rs` uses nothing at all). Every other layer
//! builds on it.

pub mod block;
pub mod claims;
pub mod cover;
pub mod json;
pub mod quantised;
pub mod rank;
pub mod record;
#[cfg(feature = "schemars")]
pub mod schema;
#[cfg(test)]
pub(crate) mod test_rng;
pub mod text;
pub mod tokenize;
pub mod vector;
pub mod verbs;
