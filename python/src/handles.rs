//! Handles: one redb database per file and process, shared by every `Store` on it, reopened after
//! a fork; and `guarded`, which runs engine calls with the interpreter detached and panics caught.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};

use crate::error::{raise, OrPy};
use pyo3::prelude::*;
use somna::{Error, Options, Store};

// ---------------------------------------------------------------------------------------------
// Handles: one redb database per file and process, reopened after a fork

/// What identifies a shared handle: the file and the options it was opened with.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub(crate) struct Key {
    pub(crate) path: PathBuf,
    pub(crate) busy_ms: u128,
    pub(crate) cache_bytes: usize,
    pub(crate) exclusive: bool,
}

pub(crate) struct Entry {
    pub(crate) store: Weak<Store>,
    pub(crate) pid: u32,
}

pub(crate) fn registry() -> MutexGuard<'static, HashMap<Key, Entry>> {
    static REGISTRY: OnceLock<Mutex<HashMap<Key, Entry>>> = OnceLock::new();
    REGISTRY
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// An absolute, symlink-free spelling of `path`, also for a file that does not exist yet.
pub(crate) fn canonical(path: &Path) -> PathBuf {
    if let Ok(p) = path.canonicalize() {
        return p;
    }
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    match (abs.parent(), abs.file_name()) {
        (Some(parent), Some(name)) => match parent.canonicalize() {
            Ok(p) => p.join(name),
            Err(_) => abs,
        },
        _ => abs,
    }
}

pub(crate) struct Handle {
    pub(crate) store: Arc<Store>,
    pub(crate) pid: u32,
}

/// Opens (or creates) the store for `key`, sharing a live handle of this process if there is one.
pub(crate) fn acquire(
    key: &Key,
    path: &Path,
    opts: &Options,
    create: bool,
) -> Result<Arc<Store>, Error> {
    let pid = std::process::id();
    let mut reg = registry();
    if let Some(e) = reg.get(key) {
        if e.pid == pid {
            if let Some(s) = e.store.upgrade() {
                return Ok(s);
            }
        }
    }
    let store = if create {
        Store::create_with(path, opts.clone())?
    } else {
        Store::open_with(path, opts.clone())?
    };
    let store = Arc::new(store);
    reg.retain(|_, e| e.pid == pid && e.store.strong_count() > 0);
    reg.insert(
        key.clone(),
        Entry {
            store: Arc::downgrade(&store),
            pid,
        },
    );
    Ok(store)
}

/// Runs `f` with the GIL released, turning a panic (which the engine means never to have, but
/// which redb can still raise on a damaged file) into `somna.InternalError` instead of
/// unwinding into Python, as the CLI does.
pub(crate) fn guarded<T: Send>(
    py: Python<'_>,
    f: impl FnOnce() -> Result<T, Error> + Send,
) -> PyResult<T> {
    let caught = py.detach(|| {
        let outer = IN_GUARD.with(|g| g.replace(true));
        let r = catch_unwind(AssertUnwindSafe(f));
        IN_GUARD.with(|g| g.set(outer));
        r
    });
    match caught {
        Ok(r) => r.py(py),
        Err(payload) => {
            let what = LAST_PANIC
                .with(|p| p.borrow_mut().take())
                .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown".into());
            Err(raise(
                py,
                "InternalError",
                format!(
                    "internal error ({}); nothing unacknowledged was written. The file may be damaged: run `somna verify`, and please report this",
                    what.trim_end()
                ),
            ))
        }
    }
}

thread_local! {
    /// Set while this thread runs engine code under [`guarded`].
    pub(crate) static IN_GUARD: Cell<bool> = const { Cell::new(false) };
    /// The message of the last panic caught on this thread.
    pub(crate) static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// A panic under [`guarded`] becomes an exception carrying its message, so the hook keeps the
/// message instead of printing it on the host program's stderr; any other panic (a helper
/// thread's, say) goes to the previous hook as before.
pub(crate) fn install_panic_hook() {
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        if IN_GUARD.with(Cell::get) {
            let msg = info.to_string();
            LAST_PANIC.with(|p| *p.borrow_mut() = Some(msg));
        } else {
            previous(info);
        }
    }));
}
