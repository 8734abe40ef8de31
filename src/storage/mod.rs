//! **Layer 1, storage**: the file and everything engram keeps in it: the storage seam every
//! table access goes through ([`kv`], with its key encoding in [`keys`], the typed tables in
//! [`tables`], the redb backend in [`redb_kv`], the server backend in `pg` and `pg_kv`, and
//! [`backend`], which is either), the tables as redb stores them ([`schema`]),
//! the value envelope ([`codec`]), opening and creating a store, read and
//! write transactions with a bounded wait, group commit, who is asking and what their grants
//! allow ([`access`]), and the recovery of a torn tail. It may use [`crate::domain`] and
//! `crate::error` ([`crate::Error`]), never a layer above.

pub mod access;
pub mod backend;
pub mod codec;
pub mod config;
pub(crate) mod group;
pub mod index;
pub mod keys;
pub mod kv;
#[cfg(feature = "postgres")]
pub(crate) mod pg;
#[cfg(feature = "postgres")]
pub mod pg_kv;
pub mod redb_kv;
pub mod schema;
pub mod store;
pub mod tables;
pub(crate) mod tail;
pub mod txn;
