//! [`Verb`]: what the command line knows of one verb, declared once beside it (in the file of
//! its group, as a `const`), so that the registry in `commands/mod.rs` is one line per verb and
//! nothing else matches on the verbs. A leaf: it names only the [`Context`].

use clap::Args;
#[cfg(feature = "mcp")]
use schemars::JsonSchema;
use serde::Deserialize;
use somna::Error;

use crate::cli::context::Context;

/// One verb taking the arguments `A`: how it runs, and the facts the command line and the MCP
/// server need before it runs.
pub struct Verb<A> {
    /// Runs it on the context's store; returns the exit code.
    pub run: fn(&mut Context<'_>, &A) -> Result<u8, Error>,
    /// Whether it only reads with these arguments: the store then opens read-only and the file
    /// stays as it was, byte for byte (docs/cli.md, "Reads never write").
    pub reads_only: fn(&A) -> bool,
    /// Whether it takes several scopes (`--scope a,b`).
    pub several_scopes: bool,
}

impl<A> Verb<A> {
    /// A verb that only reads, in one scope.
    pub const fn reads(run: fn(&mut Context<'_>, &A) -> Result<u8, Error>) -> Self {
        Verb {
            run,
            reads_only: always,
            several_scopes: false,
        }
    }

    /// A verb that writes, in one scope.
    pub const fn writes(run: fn(&mut Context<'_>, &A) -> Result<u8, Error>) -> Self {
        Verb {
            run,
            reads_only: never,
            several_scopes: false,
        }
    }

    /// A verb that reads or writes depending on its arguments (`config` without a setting
    /// reads), in one scope.
    pub const fn reads_when(
        run: fn(&mut Context<'_>, &A) -> Result<u8, Error>,
        reads_only: fn(&A) -> bool,
    ) -> Self {
        Verb {
            run,
            reads_only,
            several_scopes: false,
        }
    }

    /// The same verb, taking several scopes (`--scope a,b`).
    pub const fn several_scopes(self) -> Self {
        Verb {
            several_scopes: true,
            ..self
        }
    }
}

// The arguments of a verb that takes none (`stats`, `verify`, `export`...); its doc comment is
// also the description in the schema of the MCP tools that take none.
/// No arguments.
#[derive(Args, Debug, Default, Clone, Copy, Deserialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

/// A verb that runs without a store opened through `--db` (`copy`, `completions`, `man`,
/// `mcp`): `somna::cli` runs it before any store opens, so this is never called.
pub fn outside_store<A>(_: &mut Context<'_>, _: &A) -> Result<u8, Error> {
    Err(Error::Invalid {
        what: "command",
        reason: "this command opens no store through --db".into(),
    })
}

/// Always true.
fn always<A>(_: &A) -> bool {
    true
}

/// Always false.
fn never<A>(_: &A) -> bool {
    false
}
