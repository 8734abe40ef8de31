//! The tests that run the real `somna` binary, one file per invariant (each opens with a `//!`
//! paragraph saying what it guards), sharing `common` (a temp store, a clean environment, runs
//! that feed stdin). Kept apart from the CPU-heavy in-process tests of `tests/api/`, so that
//! their watchdogs (`race`) do not compete with property tests.
//!
//! Run one file with `cargo test --release --test cli commands::`.

mod common;

#[cfg(feature = "mcp")]
mod bearer_scheme;
mod commands;
mod copy;
mod corrupt_files;
mod forged_lines;
mod hostile;
#[cfg(feature = "mcp")]
mod http_limits;
#[cfg(feature = "mcp")]
mod http_sessions;
mod input_edges;
mod input_limits;
mod json_nesting;
#[cfg(feature = "mcp")]
mod mcp_clients;
#[cfg(feature = "mcp")]
mod mcp_error_bounds;
#[cfg(feature = "mcp")]
mod mcp_message_limit;
#[cfg(feature = "mcp")]
mod mcp_node;
mod messages;
mod optmem_import;
mod pg_errors;
mod pg_failover;
mod pg_hosts;
mod pg_kill;
#[cfg(feature = "mcp")]
mod pg_patroni;
mod pg_reconnect;
mod pg_renamed;
mod pg_role;
mod pg_tls;
mod planted_links;
mod race;
mod readme_tour;
mod reads;
mod recall_paging;
mod run_lines;
mod search;
mod session;
mod session_damage;
mod session_migrate;
mod session_processes;
mod shell;
mod sigkill;
mod sigkill_journal;
#[cfg(feature = "mcp")]
mod subscriptions;
#[cfg(feature = "mcp")]
mod token;
mod trust;
mod url_secrets;
#[cfg(feature = "mcp")]
mod web_inspector;
