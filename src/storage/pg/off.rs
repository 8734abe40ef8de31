//! The server engine of a build without the `postgres` feature: an engine that cannot be built,
//! and an open that refuses every URL, so that the rest of the library names one server engine
//! whichever way it was built.

use std::path::Path;

use crate::error::{Error, Result};
use crate::storage::engine::{Engine, Opened, ReadFn, WriteFn};

/// No server engine can be open in this build.
pub(crate) enum PgEngine {}

impl PgEngine {
    /// Refuses the URL: this build has no server engine.
    pub(crate) fn open(
        location: &Path,
        _opts: &crate::storage::options::Options,
        _create: bool,
    ) -> Result<Opened<Self>> {
        let url = location.to_string_lossy();
        Err(Error::Unsupported(format!(
            "{} names a PostgreSQL server, and this somna was built without the `postgres` feature",
            url.split('@').next_back().unwrap_or("the URL")
        )))
    }
}

impl Engine for PgEngine {
    fn read_with(&self, _: Option<&str>, _: &mut ReadFn<'_>) -> Result<()> {
        match *self {}
    }

    fn write_with(&self, _: Option<&str>, _: &mut WriteFn<'_>) -> Result<()> {
        match *self {}
    }

    fn close(&mut self) -> Result<()> {
        match *self {}
    }

    fn check_integrity(&mut self) -> Result<bool> {
        match *self {}
    }

    fn compact(&mut self) -> Result<()> {
        match *self {}
    }

    fn not_alone(&self, _: &str) -> Result<()> {
        match *self {}
    }

    fn scrub(&self) -> Result<u64> {
        match *self {}
    }

    fn is_server(&self) -> bool {
        match *self {}
    }
}
