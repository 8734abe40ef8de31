//! **Layer 3, memory**: one scope's raw log ([`log`]), appends ([`note`]), [`recall`], lifecycle events
//! ([`lifecycle`]),
//! stored summaries ([`summary`]), the summary tree with its merge prompts ([`tree`]), wake ([`wake`]), the form of their
//! next-step hints ([`hints`]), and ranked [`search`] (with the store's embedder). A sibling of
//! [`crate::session`], which it never uses; it may use [`crate::domain`], [`crate::storage`] and
//! [`crate::trust`].

pub mod hints;
pub mod lifecycle;
pub mod log;
pub mod note;
pub mod recall;
pub mod search;
pub mod summary;
pub mod tree;
pub(crate) mod verify;
pub mod wake;
