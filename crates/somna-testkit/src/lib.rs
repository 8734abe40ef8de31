//! # somna-testkit
//!
//! Test support for somna, kept out of the library so that somna's API and docs do not
//! advertise a test tool (as jj's `testutils` and cargo's `cargo-test-support`). It is
//! `publish = false`: a dev-dependency of somna (its tests) and a dependency of the fuzz
//! targets (`fuzz/`), never a normal dependency of anything.
//!
//! - [`simdisk`]: a simulated disk, a [`somna::store::StorageBackend`] (the trait of the redb somna
//!   was built with, re-exported, so the versions cannot diverge) that injects I/O errors, a full disk and
//!   power losses that tear unsynced writes, deterministically from a seed.
//! - [`crash`]: the crash-test harness: a workload over every write path, a reference run, a
//!   replay on the simulated disk with a fault plan, and the oracle that checks a recovered
//!   store (used by the crash tests in `tests/api/crash/` and the `crash_ops` fuzz target).
//! - [`pg`]: throwaway PostgreSQL servers for the server tests (through
//!   `scripts/pg-server.sh`): the `SOMNA_TEST_PG` gate, unique schemas, and private servers
//!   that can be killed, restarted, replicated and promoted.
//!
//! The fault model and the test sweeps that use these are described in docs/reliability.md.
#![deny(unsafe_code)]
#![warn(missing_docs)]

#[cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]
pub mod simdisk;

// Test code moved as it was from tests/: its types carry docs, but the fields and helper methods
// (the arguments of the `Store` call each `Op` names) do not, and panicking is how it reports.
#[allow(missing_docs)]
pub mod crash;

#[cfg_attr(
    not(test),
    deny(
        clippy::unwrap_used,
        clippy::expect_used,
        clippy::indexing_slicing,
        clippy::panic
    )
)]
pub mod pg;
