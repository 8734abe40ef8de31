//! How a store is opened: [`Options`], which every engine reads (the busy timeout, redb's cache
//! and concurrency mode, the commit journal, the principal, read-only). `crate::storage::store` re-exports it.

use std::sync::Arc;
use std::time::Duration;

/// The default page cache of a handle ([`Options::cache_bytes`]): 128 MiB, for a process that
/// keeps its handle open (a library or Python handle, the MCP server).
pub const SERVER_CACHE_BYTES: usize = 128 << 20;
/// The page cache of the command line's one-shot commands: 32 MiB.
pub const CLI_CACHE_BYTES: usize = 32 << 20;
/// The environment variable that sets the page cache, in MiB, of the command line's handles
/// (every command, `somna mcp` included) and of a Python `Store` opened without `cache_bytes`.
pub const CACHE_ENV: &str = "SOMNA_CACHE_MIB";

/// The page cache [`CACHE_ENV`] asks for, in bytes: `None` when it is unset or empty, an
/// [`crate::Error::Invalid`] when it is not a whole number of MiB from 1 to 1,048,576.
pub fn cache_bytes_from_env() -> crate::error::Result<Option<usize>> {
    let Some(v) = std::env::var_os(CACHE_ENV).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let mib = v
        .to_str()
        .and_then(|t| t.trim().parse::<usize>().ok())
        .filter(|n| (1..=1 << 20).contains(n))
        .ok_or_else(|| {
            crate::error::Error::invalid(
                "environment",
                format!("{CACHE_ENV}={v:?}: not a whole number of MiB from 1 to 1048576"),
            )
        })?;
    Ok(Some(mib << 20))
}

/// How a [`crate::Store`] is opened, on either engine.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// How long a writer waits for another writer (thread or process) before failing with
    /// [`crate::Error::Busy`]. Default 10 s. Zero means "try once": fail only when another
    /// writer holds the store (an open is always given up to a second to finish).
    pub busy_timeout: Duration,
    /// redb's page cache for this handle, an upper bound (pages are cached as they are read).
    /// Default [`SERVER_CACHE_BYTES`] (128 MiB), sized for a handle that stays open (a library
    /// or Python handle, the MCP server): a store larger than the cache pays a page copy per
    /// miss on every read. The `somna` command line's one-shot commands use
    /// [`CLI_CACHE_BYTES`] (32 MiB); [`CACHE_ENV`] sets it for the command line. redb's own
    /// default is 1 GiB.
    pub cache_bytes: usize,
    /// Open with redb's `ExclusiveWriter` mode: one process owns the file, commits cost one
    /// fsync instead of two, and other processes wait (then fail `Busy`) to open it. Default
    /// false: `MultiWriter`, so many agent processes share one store. See docs/design.md.
    pub exclusive: bool,
    /// The principal this handle acts as (see docs/trust.md). `None`: the store's admin.
    pub principal: Option<String>,
    /// Check every page of the file when opening it (redb's `set_check_integrity_on_open`): a
    /// damaged file is then refused with [`crate::Error::Corrupt`] before anything reads it, instead of
    /// possibly making redb panic. Costs a read of the whole file (and a commit) per open; off
    /// by default. See docs/reliability.md.
    pub check_on_open: bool,
    /// Open the file read-only: nothing this handle does can change the file's bytes, so it
    /// works on a file the user may only read, and it never waits for a writer. Writes fail
    /// with [`crate::Error::ReadOnly`]. A file that needs a writer first (a crash left it to recover,
    /// it has a torn tail, or it lacks tables of this somna) is recovered by one read-write
    /// open before the read-only one, when the user may write it. Default false.
    pub read_only: bool,
    /// With [`Options::exclusive`]: commit through the commit journal `<store>-journal`
    /// (docs/design.md, "Commit journal"): each commit appends one record to it and syncs it
    /// once, then commits to redb without a sync; checkpoints make redb durable in batches, and
    /// the next open replays what a crash left in the journal only. Ignored without
    /// `exclusive` (many processes share the file, and redb refuses a commit without a sync
    /// there). Default true; false commits every transaction durably in redb itself (a
    /// journal a crash left behind is still replayed on open).
    pub journal: bool,
    /// Without [`Options::exclusive`] (many processes share the file), with [`Options::journal`]:
    /// commit through the shared commit journal `<store>-journal` (docs/design.md, "The journal
    /// for many processes"): each commit appends one record to it and syncs it once, then
    /// publishes the commit to every process through redb without a sync (redb's journaled
    /// commit, which keeps the last synced commit whole for an open after a power loss to roll
    /// back to); any writer's checkpoint makes redb durable, and the next read-write open after a
    /// power loss replays the records past it. Default true, for a handle that stays open and
    /// writes often (a library or Python handle, the MCP server). The command line's one-shot
    /// commands set it false: a process that writes once and exits would pay a checkpoint at its
    /// close on top of the record's sync, where a durable redb commit costs one.
    pub shared_journal: bool,
    /// The size of a new commit journal, in bytes (tests set it small to force checkpoints).
    #[doc(hidden)]
    pub journal_bytes: u64,
    /// Called while the first read-write open of a format-1 store builds its search index, with
    /// (scopes done, scopes in all): a command line draws a bar with it. Default none.
    pub on_upgrade: Option<UpgradeProgress>,
}

/// A callback for [`Options::on_upgrade`].
#[derive(Clone)]
pub struct UpgradeProgress(pub Arc<dyn Fn(u64, u64) + Send + Sync>);

impl std::fmt::Debug for UpgradeProgress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("UpgradeProgress")
    }
}

impl Default for Options {
    fn default() -> Self {
        Options {
            busy_timeout: Duration::from_secs(10),
            cache_bytes: SERVER_CACHE_BYTES,
            exclusive: false,
            principal: None,
            check_on_open: false,
            read_only: false,
            journal: true,
            shared_journal: true,
            journal_bytes: crate::storage::redb::journal::DEFAULT_SIZE,
            on_upgrade: None,
        }
    }
}

impl Options {
    /// Sets [`Options::busy_timeout`].
    pub fn busy_timeout(mut self, d: Duration) -> Self {
        self.busy_timeout = d;
        self
    }
    /// Sets [`Options::exclusive`].
    pub fn exclusive(mut self, yes: bool) -> Self {
        self.exclusive = yes;
        self
    }
    /// Sets [`Options::principal`].
    pub fn principal(mut self, p: Option<&str>) -> Self {
        self.principal = p.map(str::to_string);
        self
    }
    /// Sets [`Options::check_on_open`].
    pub fn check_on_open(mut self, yes: bool) -> Self {
        self.check_on_open = yes;
        self
    }
    /// Sets [`Options::read_only`].
    pub fn read_only(mut self, yes: bool) -> Self {
        self.read_only = yes;
        self
    }
    /// Sets [`Options::on_upgrade`].
    pub fn on_upgrade(mut self, f: impl Fn(u64, u64) + Send + Sync + 'static) -> Self {
        self.on_upgrade = Some(UpgradeProgress(Arc::new(f)));
        self
    }
    /// Sets [`Options::journal`].
    pub fn journal(mut self, yes: bool) -> Self {
        self.journal = yes;
        self
    }
    /// Sets [`Options::shared_journal`].
    pub fn shared_journal(mut self, yes: bool) -> Self {
        self.shared_journal = yes;
        self
    }
    /// Sets [`Options::journal_bytes`].
    #[doc(hidden)]
    pub fn journal_bytes(mut self, n: u64) -> Self {
        self.journal_bytes = n;
        self
    }
    /// Sets [`Options::cache_bytes`].
    pub fn cache_bytes(mut self, n: usize) -> Self {
        self.cache_bytes = n;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The only test that touches [`CACHE_ENV`] (the environment is the process's).
    #[test]
    fn the_cache_size_from_the_environment() {
        assert_eq!(Options::default().cache_bytes, 128 << 20);
        std::env::set_var(CACHE_ENV, "");
        assert_eq!(cache_bytes_from_env().unwrap(), None);
        std::env::set_var(CACHE_ENV, " 256 ");
        assert_eq!(cache_bytes_from_env().unwrap(), Some(256 << 20));
        for bad in ["0", "-1", "1.5", "many", "1048577"] {
            std::env::set_var(CACHE_ENV, bad);
            assert!(cache_bytes_from_env().is_err(), "{bad}");
        }
        std::env::remove_var(CACHE_ENV);
        assert_eq!(cache_bytes_from_env().unwrap(), None);
    }
}
