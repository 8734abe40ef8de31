//! The redb file at its lowest: the open database (read-write or read-only), redb's builder as
//! the options set it, an open that waits at most the busy timeout, and what a panic of redb
//! becomes. [`super::engine`] builds on these.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redb::{ConcurrencyMode, Database, ReadTransaction, ReadableDatabase};

use crate::error::{Error, Result};
use crate::storage::engine::read_only_handle;
use crate::storage::options::Options;

/// The open file: read-write, or read-only (a handle that cannot change the file at all).
pub(super) enum Db {
    ReadWrite(Database),
    ReadOnly(redb::ReadOnlyDatabase),
}

impl Db {
    pub(super) fn begin_read(&self) -> Result<ReadTransaction> {
        Ok(match self {
            Db::ReadWrite(d) => d.begin_read()?,
            Db::ReadOnly(d) => d.begin_read()?,
        })
    }

    /// The database, for a write; [`Error::ReadOnly`] on a read-only handle.
    pub(super) fn writable(&self) -> Result<&Database> {
        match self {
            Db::ReadWrite(d) => Ok(d),
            Db::ReadOnly(_) => Err(read_only_handle()),
        }
    }

    /// [`Db::writable`], for the operations that need the database to themselves.
    pub(super) fn writable_mut(&mut self) -> Result<&mut Database> {
        match self {
            Db::ReadWrite(d) => Ok(d),
            Db::ReadOnly(_) => Err(read_only_handle()),
        }
    }

    pub(super) fn close(self) -> Result<()> {
        match self {
            Db::ReadWrite(d) => drop(d),
            Db::ReadOnly(d) => d.close()?,
        }
        Ok(())
    }
}

/// A refused read-write open of the file as [`Error::ReadOnly`]; other errors as they are.
pub(super) fn may_not_write(path: &Path, e: Error) -> Error {
    match e {
        Error::Io(io) if io.kind() == std::io::ErrorKind::PermissionDenied => {
            Error::ReadOnly(format!("this user may not write {} ({io})", path.display()))
        }
        e => e,
    }
}

/// redb's builder, as the options set it.
pub(super) fn builder(opts: &Options) -> redb::Builder {
    let mut b = Database::builder();
    b.set_cache_size(opts.cache_bytes);
    b.set_check_integrity_on_open(opts.check_on_open);
    b.set_concurrency_mode(if opts.exclusive {
        ConcurrencyMode::ExclusiveWriter
    } else {
        ConcurrencyMode::MultiWriter
    });
    b
}

/// A panic inside the storage engine, which redb may raise on a damaged file, as a typed error.
pub(crate) fn engine_panic(during: &str, panic: Box<dyn std::any::Any + Send>) -> Error {
    let msg = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into());
    crate::error::damaged_file(format!("the storage engine failed while {during} ({msg})"))
}

/// Whether a store file exists (and is not empty) at `path`.
pub(crate) fn exists(path: &Path) -> bool {
    std::fs::metadata(path)
        .map(|m| m.is_file() && m.len() > 0)
        .unwrap_or(false)
}

/// Puts the store built at `tmp` in the place of an empty regular file at `path` (0 bytes: it
/// holds nothing, and could never be opened); false, keeping `path`, when it holds something
/// (another process made the store first). The empty file is first moved aside, so that only
/// the process that moved it replaces it, and put back when it was written to meanwhile. A
/// symbolic link to an empty file is refused: the file it points to is the user's to remove.
pub(super) fn claim_empty(tmp: &Path, path: &Path) -> Result<bool> {
    let before = std::fs::symlink_metadata(path)?;
    if before.is_symlink() && std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.len() == 0) {
        let reason = format!("{} is a symbolic link to an empty file; remove the empty file (or the link), then run init again", path.display());
        return Err(Error::invalid("store path", reason));
    }
    if !before.is_file() || before.len() > 0 {
        return Ok(false);
    }
    let aside = tmp.with_file_name(format!(
        "{}.empty",
        tmp.file_name().unwrap_or_default().to_string_lossy()
    ));
    match std::fs::rename(path, &aside) {
        Ok(()) => {}
        // Another process moved it first: its store, or ours, goes in its place.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return link_new(tmp, path),
        Err(e) => return Err(e.into()),
    }
    let moved = std::fs::symlink_metadata(&aside)?;
    if moved.len() > 0 || !same_file(&before, &moved) {
        return put_back(&aside, path);
    }
    let linked = link_new(tmp, path);
    let _ = std::fs::remove_file(&aside);
    linked
}

/// Puts the file moved aside to `aside` back at `path` (it changed after it was found empty);
/// false, as another process's store. When `path` was taken meanwhile the file stays at `aside`,
/// never removed, and the error names both.
fn put_back(aside: &Path, path: &Path) -> Result<bool> {
    match std::fs::hard_link(aside, path) {
        Ok(()) => {
            let _ = std::fs::remove_file(aside);
            Ok(false)
        }
        Err(e) => Err(Error::invalid(
            "store path",
            format!(
                "{} changed while init replaced it as an empty file, and could not be put back ({e}); it is kept at {}",
                path.display(),
                aside.display()
            ),
        )),
    }
}

/// Links `tmp` to `path`; false when `path` exists (another process made the store first).
fn link_new(tmp: &Path, path: &Path) -> Result<bool> {
    match std::fs::hard_link(tmp, path) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(e.into()),
    }
}

/// Whether two metadata name one file (device and inode; the length elsewhere).
fn same_file(a: &std::fs::Metadata, b: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        a.dev() == b.dev() && a.ino() == b.ino()
    }
    #[cfg(not(unix))]
    {
        a.len() == b.len()
    }
}

/// Makes the parent directories of `path` (mode 0700) that do not exist.
pub(super) fn make_parent(path: &Path) -> Result<()> {
    if let Some(parent) = path.parent() {
        if !parent.as_os_str().is_empty() && !parent.exists() {
            let mut b = std::fs::DirBuilder::new();
            b.recursive(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::DirBuilderExt;
                b.mode(0o700);
            }
            b.create(parent)?;
        }
    }
    Ok(())
}

/// How long one attempt at opening the file may take, however short the busy timeout: the open
/// of an idle store is not a wait for another writer.
const MIN_OPEN_WAIT: Duration = Duration::from_secs(1);

/// Opens the file, waiting at most `busy_timeout`: in multi-writer mode redb's open waits for a
/// writer in another process to finish, so the open runs on a helper thread and the caller stops
/// waiting after the timeout (the thread then closes the handle it gets), or after
/// [`MIN_OPEN_WAIT`] when the timeout is shorter: a timeout of 0 means "try once" (fail as busy
/// only when another writer holds the file), never "fail before the open could finish".
///
/// Also returns whether redb's crash recovery dropped the newest commit, whose checksums failed,
/// for the one before it (vendor/README.md, "one sync per multi-writer commit"): a one-phase
/// commit cut by a power loss, which is what it is unless the file was also damaged.
pub(super) fn open_bounded(opts: &Options, path: &Path) -> Result<(Db, bool)> {
    let (tx, rx) = std::sync::mpsc::channel();
    let o = opts.clone();
    let p = path.to_path_buf();
    let start = Instant::now();
    let fell_back = Arc::new(AtomicBool::new(false));
    let seen = fell_back.clone();
    std::thread::Builder::new()
        .name("somna-open".into())
        .spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                retry_busy(&o, || open_db(&o, &p, &seen))
            }));
            let _ = tx.send(r.unwrap_or_else(|panic| Err(engine_panic("opening the file", panic))));
        })?;
    let with_fell_back = move |db| (db, fell_back.load(Ordering::Acquire));
    match rx.recv_timeout(opts.busy_timeout.max(MIN_OPEN_WAIT)) {
        Ok(r) => r.map(with_fell_back),
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(Error::Busy {
            waited: start.elapsed(),
        }),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(crate::error::damaged_file(
            "the storage engine stopped while opening the file".into(),
        )),
    }
}

/// One open of the file, read-write or read-only as the options say; `fell_back` is set if its
/// recovery drops the newest commit (see [`open_bounded`]).
fn open_db(
    opts: &Options,
    path: &Path,
    fell_back: &Arc<AtomicBool>,
) -> Result<Db, redb::DatabaseError> {
    let mut b = builder(opts);
    let seen = fell_back.clone();
    b.set_repair_callback(move |session| {
        if session.falls_back() {
            seen.store(true, Ordering::Release);
        }
    });
    if opts.read_only {
        b.open_read_only(path).map(Db::ReadOnly)
    } else {
        b.open(path).map(Db::ReadWrite)
    }
}

fn retry_busy(
    opts: &Options,
    mut f: impl FnMut() -> Result<Db, redb::DatabaseError>,
) -> Result<Db> {
    let start = Instant::now();
    loop {
        match f() {
            Ok(db) => return Ok(db),
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                let waited = start.elapsed();
                if waited >= opts.busy_timeout {
                    return Err(Error::Busy { waited });
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            // A read-only open of a file that a crashed writer left to recover.
            Err(redb::DatabaseError::RepairAborted) if opts.read_only => {
                return Err(Error::ReadOnly(
                    "a crash left it to be recovered by a writer".into(),
                ))
            }
            Err(e) => return Err(e.into()),
        }
    }
}
