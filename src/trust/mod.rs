//! **Layer 2, trust**: administering what may be written and who reads what: per-scope write
//! policies and the detection of secrets and instruction-like text ([`policy`]), and the read
//! audit ([`audit`]), and the grants themselves ([`grants`]), and the bearer tokens that authenticate principals over
//! HTTP ([`tokens`]). Enforcement of grants lives below, in [`crate::storage::access`], so that
//! every transaction checks them. May use [`crate::domain`] and [`crate::storage`].

pub mod audit;
pub mod grants;
pub mod policy;
pub mod tokens;
