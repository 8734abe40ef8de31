//! Who may read and write what, and what may be written: grants ([`Access`], [`Grant`];
//! [`crate::Store::grant`]), per-scope write policies and the detection of secrets and
//! instruction-like text ([`Policy`]; [`crate::Store::set_policy`]), the read audit
//! ([`AuditEntry`]; [`crate::Store::audit`]) and the bearer tokens of the HTTP server
//! ([`TokenInfo`]; [`crate::Store::tokens`]). docs/trust.md tells the model.
//!
//! **Layer 2, trust**: administering what may be written and who reads what: per-scope write
//! policies and the detection of secrets and instruction-like text ([`policy`]), and the read
//! audit ([`audit`]), and the grants themselves ([`grants`]), and the bearer tokens that authenticate principals over
//! HTTP ([`tokens`]). Enforcement of grants lives below, in [`crate::storage::access`], so that
//! every transaction checks them. May use [`crate::domain`] and [`crate::storage`].

pub(crate) mod audit;
pub(crate) mod grants;
pub(crate) mod policy;
pub(crate) mod tokens;

pub use crate::storage::access::{pattern_matches, validate_principal, Access, DEFAULT_ADMIN};
pub use audit::AuditEntry;
pub use grants::Grant;
pub use policy::{
    looks_like_secret, reads_as_instructions, Policy, INSTRUCTION_PATTERNS, SECRET_PATTERNS,
};
pub use tokens::TokenInfo;
