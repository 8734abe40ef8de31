//! Opening a store as a command needs it: a path that is not a regular file refused by name,
//! the file system's refusal named as such, a torn tail's repair and an insecure connection
//! said on stderr, and the read audit's read-write handle. A leaf: the CLI's start-up and
//! `copy` use it.

use std::path::Path;

use somna::text;
use somna::{Error, Options, Store};

use crate::cli::output;

/// Opens the store at `path` for a command: `init` creates it (or, when it exists, only checks
/// it with a read-only open, which writes nothing); a command that `reads` only opens it
/// read-only; any other opens it read-write.
pub fn for_command(path: &Path, opts: Options, init: bool, reads: bool) -> Result<Store, Error> {
    let server = somna::store::url_of(path).is_some();
    if !server {
        check_store_file(path)?;
    }
    if init && (server || !Store::exists(path)) {
        Store::create_with(path, opts)
    } else {
        open_store(path, opts, init || reads)
    }
    .map_err(|e| refused_by_file_system(path, e))
}

/// Opens the store for `migrate`: read-only when it is at this build's format, so that nothing
/// is written (not even the file's header); read-write, which upgrades it, when it is older.
pub fn for_migrate(path: &Path, opts: Options) -> Result<Store, Error> {
    if somna::store::url_of(path).is_some() {
        return for_command(path, opts, false, false);
    }
    check_store_file(path)?;
    let store =
        open_store(path, opts.clone(), true).map_err(|e| refused_by_file_system(path, e))?;
    if !store.needs_migration()? {
        return Ok(store);
    }
    store.close()?;
    open_store(path, opts, false).map_err(|e| refused_by_file_system(path, e))
}

/// Refuses a store path that is not a regular file (or nothing yet): a directory, a FIFO, a
/// device, a socket or a dangling symbolic link is named as such, never as a missing store.
pub fn check_store_file(path: &Path) -> Result<(), Error> {
    let shown = output::path_shown(path);
    let invalid = |reason: String| Error::Invalid {
        what: "store path",
        reason,
    };
    let link = match std::fs::symlink_metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(unreachable(path, e, false)),
    };
    let target = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && link.is_symlink() => {
            return Err(invalid(format!(
                "{shown} is a symbolic link to a file that does not exist; point it at a store, or remove it"
            )))
        }
        Err(e) => return Err(unreachable(path, e, true)),
    };
    let kind = if target.is_file() {
        return Ok(());
    } else if target.is_dir() {
        "a directory"
    } else {
        "not a regular file (a FIFO, a device or a socket)"
    };
    Err(invalid(format!(
        "{shown} is {kind}; a store is one file: pass --db PATH/memory.redb"
    )))
}

/// The error for a store path the file system cannot follow, naming the path: a loop of symbolic
/// links (the path itself when `is_link`, else a folder on the way) or a file where a folder
/// should be is an invalid path (exit 2); a refusal is [`refused_by_file_system`]; any other
/// error is the I/O error with the path before it.
fn unreachable(path: &Path, e: std::io::Error, is_link: bool) -> Error {
    let shown = output::path_shown(path);
    let reason = match e.raw_os_error() {
        #[cfg(unix)]
        Some(libc::ELOOP) if is_link => format!(
            "{shown} is a symbolic link that never reaches a file: a loop of links, or a chain too long ({e}); fix the link, or name another store"
        ),
        #[cfg(unix)]
        Some(libc::ELOOP) => format!(
            "{shown} cannot be reached: a folder on the way to it is a loop of symbolic links, or a chain too long ({e}); fix the link, or name another store"
        ),
        #[cfg(unix)]
        Some(libc::ENOTDIR) => format!(
            "{shown} cannot be reached: a part of it that should be a folder is a file ({e}); name another store"
        ),
        _ if e.kind() == std::io::ErrorKind::PermissionDenied => {
            return refused_by_file_system(path, Error::Io(e))
        }
        _ => return Error::Io(std::io::Error::new(e.kind(), format!("{shown}: {e}"))),
    };
    Error::Invalid {
        what: "store path",
        reason,
    }
}

/// An I/O error that is the file system refusing this user: [`Error::Denied`] naming the path
/// (exit 6), instead of a bare `Permission denied`.
pub fn refused_by_file_system(path: &Path, e: Error) -> Error {
    match e {
        Error::Io(io) if io.kind() == std::io::ErrorKind::PermissionDenied => Error::Denied(format!(
            "the file system does not let this user open {} ({io}); run as a user who may, or ask its owner",
            output::path_shown(path)
        )),
        e => e,
    }
}

/// Opens the store: read-only for a command that only reads, unless the read audit is on (then
/// the read must record itself, so it needs a read-write handle, and says so when the user may
/// only read the file).
pub fn open_store(path: &Path, opts: Options, read: bool) -> Result<Store, Error> {
    let store = Store::open_with(path, opts.clone().read_only(read))?;
    // The open recovered a torn tail: say so once (the next open finds a sound file).
    if let Some(r) = store.repaired_tail() {
        eprintln!("somna: note: {}", text::display_safe(&r.to_string()));
    }
    if let Some(w) = store.insecure_connection() {
        eprintln!("somna: warning: {}", text::display_safe(w));
    }
    if !read || !store.config()?.audit {
        return Ok(store);
    }
    store.close()?;
    Store::open_with(path, opts).map_err(|e| match e {
        Error::ReadOnly(_) => Error::ReadOnly(format!(
            "the read audit is on (AUDIT=1), so every read records who read what, but this user may only read {}; read it as a user who may write it, or have one run `somna config AUDIT=0`",
            path.display(),
        )),
        e => e,
    })
}
