//! **Layer 2, trust**: administering what may be written and who reads what: per-scope write
//! policies and the detection of secrets and instruction-like text ([`policy`]), and the read
//! audit ([`audit`]), and the grants themselves ([`grants`]). Enforcement of grants lives below, in [`crate::storage::access`], so that
//! every transaction checks them. May use [`crate::domain`] and [`crate::storage`].

pub mod audit;
pub mod grants;
pub mod policy;
