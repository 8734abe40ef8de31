//! `engram._engram`: the Python extension over the engram library.
//!
//! One class, `Store`, with the memory verbs (note, wake, zoom, recall, pending, nap, forget,
//! export) and the session verbs, all returning plain Python values. Every call that touches the
//! file runs with the interpreter detached (the GIL released), so Python threads and the asyncio
//! loop keep running while engram waits for a lock or an fsync. A `Store` is `Sync` and can be
//! shared between threads; handles to the same file in one process share one redb database.
//!
//! Errors are the classes of `engram._errors` (a pure Python module, so that they can also be
//! `ValueError`, `FileNotFoundError`, ... subclasses), each carrying the engine's message.

#![deny(unsafe_code)]

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use engram::session::SessionInfo;
use engram::{
    Block, Error, Kind, MergePrompt, NapOutcome, NewMemory, Options, PromptInput, RecallQuery,
    Status, Store, WakeItem, WakeOptions, ZoomEntry,
};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyString, PyTuple, PyType};
use pyo3::IntoPyObjectExt;

// ---------------------------------------------------------------------------------------------
// Errors

/// Raises the `engram._errors` class `name` with `msg`.
fn raise(py: Python<'_>, name: &str, msg: String) -> PyErr {
    match error_class(py, name) {
        Ok(ty) => PyErr::from_type(ty, msg),
        Err(e) => e,
    }
}

fn error_class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyType>> {
    Ok(py
        .import("engram._errors")?
        .getattr(name)?
        .cast_into::<PyType>()?)
}

/// Maps an engine error to its Python exception, keeping the engine's message.
fn to_py(py: Python<'_>, e: Error) -> PyErr {
    let msg = e.to_string();
    match e {
        Error::Busy { waited } => with_attrs(
            py,
            "BusyError",
            msg,
            ("waited", waited.as_secs_f64().into_py_any(py)),
        ),
        Error::Conflict(_) => raise(py, "ConflictError", msg),
        Error::Corrupt { .. } => raise(py, "CorruptError", msg),
        Error::WrongBlock { next, .. } => with_attrs(
            py,
            "WrongBlockError",
            msg,
            ("next_block", next.map(|b| b.to_string()).into_py_any(py)),
        ),
        Error::OutOfRange { .. } => raise(py, "OutOfRangeError", msg),
        Error::Invalid { .. } => raise(py, "InvalidError", msg),
        Error::NotFound { .. } => raise(py, "NotFoundError", msg),
        Error::Unsupported(_) => raise(py, "UnsupportedError", msg),
        Error::Storage(_) | Error::Io(_) => raise(py, "StorageError", msg),
        // The enum is non-exhaustive and still growing: fall back on the CLI's exit codes,
        // which name the kind of failure (2 input, 3 missing, 4 busy, 5 corrupt, 6 denied).
        other => {
            let class = match other.exit_code() {
                2 => "InvalidError",
                3 => "NotFoundError",
                4 => "BusyError",
                5 => "CorruptError",
                6 => "DeniedError",
                _ => "Error",
            };
            raise(py, class, msg)
        }
    }
}

/// Raises `class` with `msg` and one extra attribute.
fn with_attrs(
    py: Python<'_>,
    class: &str,
    msg: String,
    attr: (&str, PyResult<Py<PyAny>>),
) -> PyErr {
    let make = || -> PyResult<PyErr> {
        let exc = error_class(py, class)?.call1((msg,))?;
        exc.setattr(attr.0, attr.1?)?;
        Ok(PyErr::from_value(exc))
    };
    make().unwrap_or_else(|e| e)
}

trait OrPy<T> {
    fn py(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> OrPy<T> for Result<T, Error> {
    fn py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

fn invalid(py: Python<'_>, msg: impl Into<String>) -> PyErr {
    raise(py, "InvalidError", msg.into())
}

// ---------------------------------------------------------------------------------------------
// Handles: one redb database per file and process, reopened after a fork

/// What identifies a shared handle: the file and the options it was opened with.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
struct Key {
    path: PathBuf,
    busy_ms: u128,
    cache_bytes: usize,
    exclusive: bool,
}

struct Entry {
    store: Weak<Store>,
    pid: u32,
}

fn registry() -> MutexGuard<'static, HashMap<Key, Entry>> {
    static REGISTRY: OnceLock<Mutex<HashMap<Key, Entry>>> = OnceLock::new();
    REGISTRY
        .get_or_init(|| Mutex::new(HashMap::new()))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// An absolute, symlink-free spelling of `path`, also for a file that does not exist yet.
fn canonical(path: &Path) -> PathBuf {
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

struct Handle {
    store: Arc<Store>,
    pid: u32,
}

/// Opens (or creates) the store for `key`, sharing a live handle of this process if there is one.
fn acquire(key: &Key, path: &Path, opts: &Options, create: bool) -> Result<Arc<Store>, Error> {
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
/// which redb can still raise on a damaged file) into `engram.InternalError` instead of
/// unwinding into Python, as the CLI does.
fn guarded<T: Send>(py: Python<'_>, f: impl FnOnce() -> Result<T, Error> + Send) -> PyResult<T> {
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
                    "internal error ({}); nothing unacknowledged was written. The file may be damaged: run `engram verify`, and please report this",
                    what.trim_end()
                ),
            ))
        }
    }
}

thread_local! {
    /// Set while this thread runs engine code under [`guarded`].
    static IN_GUARD: Cell<bool> = const { Cell::new(false) };
    /// The message of the last panic caught on this thread.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// A panic under [`guarded`] becomes an exception carrying its message, so the hook keeps the
/// message instead of printing it on the host program's stderr; any other panic (a helper
/// thread's, say) goes to the previous hook as before.
fn install_panic_hook() {
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

/// What a call on a closed `Store` raises: `engram.ClosedError`, a `RuntimeError` (the
/// input was not at fault, so not an `InvalidError`).
fn closed(py: Python<'_>) -> PyErr {
    raise(py, "ClosedError", "the store is closed".into())
}

// ---------------------------------------------------------------------------------------------
// JSON, through Python's own json module (session items are Python objects)

struct Json {
    dumps: Py<PyAny>,
    loads: Py<PyAny>,
}

fn json(py: Python<'_>) -> PyResult<&Json> {
    static JSON: PyOnceLock<Json> = PyOnceLock::new();
    JSON.get_or_try_init(py, || {
        let m = py.import("json")?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("ensure_ascii", false)?;
        kwargs.set_item("separators", (",", ":"))?;
        kwargs.set_item("allow_nan", false)?;
        let encoder = m.getattr("JSONEncoder")?.call((), Some(&kwargs))?;
        Ok(Json {
            dumps: encoder.getattr("encode")?.unbind(),
            loads: m.getattr("loads")?.unbind(),
        })
    })
}

/// Encodes session items: a `str` is taken as JSON text already, anything else goes through
/// `json` (compact, UTF-8, NaN refused). A value `json` cannot encode is a
/// `NotSerializableError` (a `ValueError` and a `TypeError`) naming its position.
fn encode_items(py: Python<'_>, items: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<String>> {
    if items.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(format!(
            "{what}s must be a list of JSON objects (dicts), not a str"
        )));
    }
    let j = json(py)?;
    let mut out = Vec::new();
    for (i, item) in items.try_iter()?.enumerate() {
        let item = item?;
        if let Ok(s) = item.cast::<PyString>() {
            out.push(s.extract::<String>()?);
            continue;
        }
        match j.dumps.bind(py).call1((&item,)) {
            Ok(s) => out.push(s.extract::<String>()?),
            Err(e) => {
                let msg = format!("{what} {i} is not JSON-serializable: {}", e.value(py));
                let err = raise(py, "NotSerializableError", msg);
                err.set_cause(py, Some(e));
                return Err(err);
            }
        }
    }
    Ok(out)
}

fn decode_item<'py>(py: Python<'py>, text: &str, raw: bool) -> PyResult<Bound<'py, PyAny>> {
    if raw {
        return Ok(PyString::new(py, text).into_any());
    }
    json(py)?.loads.bind(py).call1((text,)).map_err(|e| {
        raise(
            py,
            "CorruptError",
            format!("a stored item is not valid JSON: {e}"),
        )
    })
}

fn decode_items<'py>(py: Python<'py>, texts: &[String], raw: bool) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for t in texts {
        list.append(decode_item(py, t, raw)?)?;
    }
    Ok(list)
}

// ---------------------------------------------------------------------------------------------
// Values to Python

fn memory_dict<'py>(py: Python<'py>, m: &engram::Memory) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("type", "memory")?;
    d.set_item("id", m.id)?;
    d.set_item("text", &m.text)?;
    d.set_item("kind", m.kind.as_str())?;
    d.set_item("status", m.status.as_str())?;
    d.set_item("observed_us", m.observed_us)?;
    d.set_item("recorded_us", m.recorded_us)?;
    d.set_item("source", m.source.as_deref())?;
    d.set_item("source_uri", m.source_uri.as_deref())?;
    d.set_item("supersedes", &m.supersedes)?;
    d.set_item("conflicts_with", &m.conflicts_with)?;
    d.set_item("valid_until_us", m.valid_until_us)?;
    d.set_item("line", engram::memory_line(m))?;
    Ok(d)
}

fn block_dict<'py>(py: Python<'py>, kind: &str, b: Block) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("type", kind)?;
    d.set_item("block", b.to_string())?;
    d.set_item("lo", b.lo())?;
    d.set_item("hi", b.hi())?;
    Ok(d)
}

fn summary_dict<'py>(
    py: Python<'py>,
    b: Block,
    s: &engram::Summary,
) -> PyResult<Bound<'py, PyDict>> {
    let d = block_dict(py, "summary", b)?;
    d.set_item("text", &s.text)?;
    d.set_item("written_us", s.written_us)?;
    d.set_item("line", engram::summary_line(b, s))?;
    Ok(d)
}

fn prompt_dict<'py>(py: Python<'py>, p: &MergePrompt, cmd: &str) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("block", p.block.to_string())?;
    let inputs = PyList::empty(py);
    for i in &p.inputs {
        match i {
            PromptInput::Memory(m) => inputs.append(memory_dict(py, m)?)?,
            PromptInput::Summary { block, summary } => {
                inputs.append(summary_dict(py, *block, summary)?)?
            }
        }
    }
    d.set_item("inputs", inputs)?;
    d.set_item("remaining", p.remaining)?;
    d.set_item("entry_bytes", p.entry_bytes)?;
    d.set_item("text", p.render(cmd))?;
    Ok(d)
}

fn session_info_dict<'py>(py: Python<'py>, i: &SessionInfo) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("id", &i.id)?;
    d.set_item("created_us", i.created_us)?;
    d.set_item("updated_us", i.updated_us)?;
    d.set_item("revision", i.revision)?;
    d.set_item("count", i.count)?;
    d.set_item("bytes", i.bytes)?;
    d.set_item("archived", i.archived)?;
    Ok(d)
}

fn outcome_name(o: NapOutcome) -> &'static str {
    match o {
        NapOutcome::Saved => "saved",
        NapOutcome::AlreadySettled => "already_settled",
    }
}

// ---------------------------------------------------------------------------------------------
// Values from Python

fn parse_block(py: Python<'_>, s: &str) -> PyResult<Block> {
    Block::from_str(s).map_err(Error::from).py(py)
}

const MEMORY_FIELDS: &[&str] = &[
    "text",
    "kind",
    "status",
    "source",
    "source_uri",
    "observed_us",
    "supersedes",
    "conflicts_with",
    "valid_until_us",
];

/// A memory from a `str` (its text) or a dict with `text` and any envelope fields.
fn new_memory(py: Python<'_>, item: &Bound<'_, PyAny>, i: usize) -> PyResult<NewMemory> {
    if let Ok(s) = item.cast::<PyString>() {
        return Ok(NewMemory::new(s.extract::<String>()?));
    }
    let Ok(d) = item.cast::<PyDict>() else {
        return Err(PyTypeError::new_err(format!(
            "memory {i} must be a str or a dict with a \"text\" key"
        )));
    };
    for k in d.keys() {
        let k: String = k.extract()?;
        if !MEMORY_FIELDS.contains(&k.as_str()) {
            return Err(invalid(
                py,
                format!(
                    "memory {i}: unknown field {k:?}; known: {}",
                    MEMORY_FIELDS.join(", ")
                ),
            ));
        }
    }
    let get = |k: &str| -> PyResult<Option<Bound<'_, PyAny>>> {
        Ok(d.get_item(k)?.filter(|v| !v.is_none()))
    };
    let Some(text) = get("text")? else {
        return Err(invalid(py, format!("memory {i} has no \"text\"")));
    };
    let mut m = NewMemory::new(text.extract::<String>()?);
    if let Some(k) = get("kind")? {
        m = m.kind(Kind::from_str(&k.extract::<String>()?).py(py)?);
    }
    if let Some(s) = get("status")? {
        m = m.status(Status::from_str(&s.extract::<String>()?).py(py)?);
    }
    if let Some(s) = get("source")? {
        m = m.source(s.extract::<String>()?);
    }
    if let Some(s) = get("source_uri")? {
        m = m.source_uri(s.extract::<String>()?);
    }
    if let Some(t) = get("observed_us")? {
        m = m.observed_us(t.extract()?);
    }
    if let Some(v) = get("supersedes")? {
        m = m.supersedes(v.extract()?);
    }
    if let Some(v) = get("conflicts_with")? {
        m = m.conflicts_with(v.extract()?);
    }
    if let Some(t) = get("valid_until_us")? {
        m = m.valid_until_us(t.extract()?);
    }
    Ok(m)
}

fn duration(py: Python<'_>, secs: f64, what: &str) -> PyResult<Duration> {
    Duration::try_from_secs_f64(secs).map_err(|_| {
        invalid(
            py,
            format!("{what} must be a finite number of seconds >= 0, not {secs}"),
        )
    })
}

// ---------------------------------------------------------------------------------------------
// The class

/// An engram store: one file holding every scope's memory log and summary tree, and the
/// conversation sessions.
///
/// `Store(path)` opens the store at `path`, creating it (and its parent directories) when the
/// file does not exist; pass `create=False` to require an existing store. Every method is
/// thread-safe and releases the GIL while it works.
#[pyclass(module = "engram._engram", name = "Store", frozen)]
struct PyStore {
    handle: Mutex<Option<Handle>>,
    key: Key,
    path: PathBuf,
    opts: Options,
    create: bool,
}

impl Drop for PyStore {
    fn drop(&mut self) {
        let h = self
            .handle
            .get_mut()
            .unwrap_or_else(|p| p.into_inner())
            .take();
        if let Some(h) = h {
            release(h);
        }
    }
}

/// Drops a handle: the last one of a process closes the database. A panic there (redb can
/// raise one on a damaged file) is swallowed: a destructor has nobody to report to.
fn release(h: Handle) {
    if h.pid != std::process::id() {
        // A handle inherited through fork() shares the parent's open file and locks: letting
        // it close could release or write under the parent's feet.
        std::mem::forget(h.store);
        return;
    }
    let outer = IN_GUARD.with(|g| g.replace(true));
    let _ = catch_unwind(AssertUnwindSafe(move || drop(h)));
    IN_GUARD.with(|g| g.set(outer));
    LAST_PANIC.with(|p| p.borrow_mut().take());
}

impl PyStore {
    /// The live database handle, reopened in a child process after a fork; `None` once
    /// `close()` was called. Called detached.
    fn store(&self) -> Result<Option<Arc<Store>>, Error> {
        let pid = std::process::id();
        let mut g = self.handle.lock().unwrap_or_else(|p| p.into_inner());
        match g.as_ref() {
            None => return Ok(None),
            Some(h) if h.pid == pid => return Ok(Some(Arc::clone(&h.store))),
            Some(_) => {}
        }
        if let Some(old) = g.take() {
            std::mem::forget(old.store);
        }
        let store = acquire(&self.key, &self.key.path, &self.opts, self.create)?;
        *g = Some(Handle {
            store: Arc::clone(&store),
            pid,
        });
        Ok(Some(store))
    }

    /// Runs `f` on the store with the GIL released; raises `engram.ClosedError` after
    /// `close()`.
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&Store) -> Result<T, Error> + Send,
    ) -> PyResult<T> {
        let r = guarded(py, || match self.store()? {
            Some(s) => f(&s).map(Some),
            None => Ok(None),
        })?;
        r.ok_or_else(|| closed(py))
    }
}

#[pymethods]
impl PyStore {
    #[new]
    #[pyo3(signature = (path, *, create = true, busy_timeout = 10.0, exclusive = false, cache_bytes = None))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        create: bool,
        busy_timeout: f64,
        exclusive: bool,
        cache_bytes: Option<usize>,
    ) -> PyResult<Self> {
        let mut opts = Options::default()
            .busy_timeout(duration(py, busy_timeout, "busy_timeout")?)
            .exclusive(exclusive);
        if let Some(n) = cache_bytes {
            opts = opts.cache_bytes(n);
        }
        if path.as_os_str().is_empty() {
            return Err(invalid(py, "the store path is empty"));
        }
        let key = Key {
            path: canonical(&path),
            busy_ms: opts.busy_timeout.as_millis(),
            cache_bytes: opts.cache_bytes,
            exclusive,
        };
        let store = guarded(py, || acquire(&key, &path, &opts, create))?;
        Ok(PyStore {
            handle: Mutex::new(Some(Handle {
                store,
                pid: std::process::id(),
            })),
            key,
            path,
            opts,
            create,
        })
    }

    /// The path the store was opened with.
    #[getter]
    fn path(&self) -> PathBuf {
        self.path.clone()
    }

    /// Whether `close()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.handle
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }

    /// Releases this handle. The file is closed when the last handle of this process to it is.
    /// Calls after `close()` raise `engram.ClosedError`. Closing twice is harmless.
    fn close(&self, py: Python<'_>) {
        let h = self.handle.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = h {
            py.detach(move || release(h));
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, PyTuple>) -> bool {
        self.close(py);
        false
    }

    fn __repr__(&self) -> String {
        format!(
            "engram.Store({:?}{})",
            self.path.display().to_string(),
            if self.closed() { ", closed" } else { "" }
        )
    }

    // ----- memory log ------------------------------------------------------------------------

    /// Appends one memory to `scope` and returns its id. With `key`, a retry with the same key
    /// and text writes nothing and returns the first id.
    #[pyo3(signature = (text, scope = "default", *, kind = None, status = None, source = None,
        source_uri = None, observed_us = None, supersedes = None, conflicts_with = None,
        valid_until_us = None, key = None))]
    #[allow(clippy::too_many_arguments)]
    fn note(
        &self,
        py: Python<'_>,
        text: String,
        scope: &str,
        kind: Option<&str>,
        status: Option<&str>,
        source: Option<String>,
        source_uri: Option<String>,
        observed_us: Option<i64>,
        supersedes: Option<Vec<u64>>,
        conflicts_with: Option<Vec<u64>>,
        valid_until_us: Option<i64>,
        key: Option<String>,
    ) -> PyResult<u64> {
        let mut m = NewMemory::new(text);
        if let Some(k) = kind {
            m = m.kind(Kind::from_str(k).py(py)?);
        }
        if let Some(s) = status {
            m = m.status(Status::from_str(s).py(py)?);
        }
        m.source = source;
        m.source_uri = source_uri;
        m.observed_us = observed_us;
        m.supersedes = supersedes.unwrap_or_default();
        m.conflicts_with = conflicts_with.unwrap_or_default();
        m.valid_until_us = valid_until_us;
        self.run(py, |s| {
            s.append(scope, vec![m], key.as_deref()).map(|a| a.first)
        })
    }

    /// Appends memories in one commit (all or none). Each is a `str` or a dict with `text` and
    /// any of kind, status, source, source_uri, observed_us, supersedes, conflicts_with,
    /// valid_until_us. Returns `{"first", "count", "replayed"}`.
    #[pyo3(signature = (items, scope = "default", *, key = None))]
    fn note_many<'py>(
        &self,
        py: Python<'py>,
        items: &Bound<'py, PyAny>,
        scope: &str,
        key: Option<String>,
    ) -> PyResult<Bound<'py, PyDict>> {
        if items.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(
                "note_many takes a list of memories, not a str; use note() for one",
            ));
        }
        let mut ms = Vec::new();
        for (i, item) in items.try_iter()?.enumerate() {
            ms.push(new_memory(py, &item?, i)?);
        }
        let a = self.run(py, |s| s.append(scope, ms, key.as_deref()))?;
        let d = PyDict::new(py);
        d.set_item("first", a.first)?;
        d.set_item("count", a.count)?;
        d.set_item("replayed", a.replayed)?;
        Ok(d)
    }

    /// Number of memories in `scope`.
    #[pyo3(signature = (scope = "default"))]
    fn count(&self, py: Python<'_>, scope: &str) -> PyResult<u64> {
        self.run(py, |s| s.count(scope))
    }

    /// One memory, as a dict.
    #[pyo3(signature = (id, scope = "default"))]
    fn memory<'py>(&self, py: Python<'py>, id: u64, scope: &str) -> PyResult<Bound<'py, PyDict>> {
        let m = self.run(py, |s| s.memory(scope, id))?;
        memory_dict(py, &m)
    }

    /// The memories with ids in `[lo, hi)` (clipped to the log), oldest first.
    #[pyo3(signature = (lo = 0, hi = u64::MAX, scope = "default"))]
    fn memories<'py>(
        &self,
        py: Python<'py>,
        lo: u64,
        hi: u64,
        scope: &str,
    ) -> PyResult<Bound<'py, PyList>> {
        let ms = self.run(py, |s| s.read(|r| r.memories(scope, lo, hi)))?;
        let out = PyList::empty(py);
        for m in &ms {
            out.append(memory_dict(py, m)?)?;
        }
        Ok(out)
    }

    /// The names of every scope, sorted.
    fn scopes(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.run(py, |s| s.read(|r| r.scopes()))
    }

    /// Counters of every scope: `[{"scope", "memories", "summaries", "pending"}]`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let stats = self.run(py, |s| s.read(|r| r.stats()))?;
        let out = PyList::empty(py);
        for st in stats {
            let d = PyDict::new(py);
            d.set_item("scope", st.scope)?;
            d.set_item("memories", st.memories)?;
            d.set_item("summaries", st.summaries)?;
            d.set_item("pending", st.pending)?;
            out.append(d)?;
        }
        Ok(out)
    }

    /// Start-up context: wake's text (part `part`), within `lines` lines and `bytes` bytes
    /// (defaults: the store's WAKE_LINES and WAKE_BYTES).
    #[pyo3(signature = (scope = "default", *, lines = None, bytes = None, part = 1, snapshot = None, cmd = "engram"))]
    // Field by field, so that a field the engine adds keeps its default.
    #[allow(clippy::too_many_arguments, clippy::field_reassign_with_default)]
    fn wake(
        &self,
        py: Python<'_>,
        scope: &str,
        lines: Option<usize>,
        bytes: Option<usize>,
        part: usize,
        snapshot: Option<u64>,
        cmd: &str,
    ) -> PyResult<String> {
        let mut opts = WakeOptions::default();
        opts.lines = lines;
        opts.bytes = bytes;
        opts.part = part;
        opts.snapshot = snapshot;
        opts.cmd = cmd.to_string();
        self.run(py, |s| s.wake_text(scope, &opts))
    }

    /// Wake as data: `{"scope", "total", "omitted", "pending", "items", "lines"}`, each item a
    /// memory or a summary dict.
    #[pyo3(signature = (scope = "default", *, lines = None, bytes = None, snapshot = None, cmd = "engram"))]
    #[allow(clippy::field_reassign_with_default)]
    fn wake_view<'py>(
        &self,
        py: Python<'py>,
        scope: &str,
        lines: Option<usize>,
        bytes: Option<usize>,
        snapshot: Option<u64>,
        cmd: &str,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut opts = WakeOptions::default();
        opts.lines = lines;
        opts.bytes = bytes;
        opts.snapshot = snapshot;
        opts.cmd = cmd.to_string();
        let v = self.run(py, |s| s.wake(scope, &opts))?;
        let d = PyDict::new(py);
        d.set_item("scope", &v.scope)?;
        d.set_item("total", v.total)?;
        d.set_item("omitted", v.omitted)?;
        d.set_item("pending", v.pending)?;
        let items = PyList::empty(py);
        for i in &v.items {
            match i {
                WakeItem::Memory(m) => items.append(memory_dict(py, m)?)?,
                WakeItem::Summary { block, summary } => {
                    items.append(summary_dict(py, *block, summary)?)?
                }
            }
        }
        d.set_item("items", items)?;
        d.set_item("lines", v.lines(cmd))?;
        Ok(d)
    }

    /// Opens a block (`"16-31"`): its two halves, each a memory, a summary, or
    /// `{"type": "missing"}` when not summarized yet.
    #[pyo3(signature = (block, scope = "default"))]
    fn zoom<'py>(&self, py: Python<'py>, block: &str, scope: &str) -> PyResult<Bound<'py, PyList>> {
        let b = parse_block(py, block)?;
        let entries = self.run(py, |s| s.zoom(scope, b))?;
        let out = PyList::empty(py);
        for e in &entries {
            match e {
                ZoomEntry::Memory(m) => out.append(memory_dict(py, m)?)?,
                ZoomEntry::Summary { block, summary } => {
                    out.append(summary_dict(py, *block, summary)?)?
                }
                ZoomEntry::Missing { block } => {
                    let d = block_dict(py, "missing", *block)?;
                    d.set_item("line", e.line())?;
                    out.append(d)?
                }
            }
        }
        Ok(out)
    }

    /// Finds memories by regex (case-insensitive, over `#id YYYY-MM-DD text`), newest matches
    /// first when cut. Returns `{"matches": [...oldest first], "total", "text"}`.
    #[pyo3(signature = (pattern, scope = "default", *, limit = None, since_us = None, until_us = None, kind = None, max_bytes = 20000))]
    #[allow(clippy::too_many_arguments)]
    fn recall<'py>(
        &self,
        py: Python<'py>,
        pattern: String,
        scope: &str,
        limit: Option<usize>,
        since_us: Option<i64>,
        until_us: Option<i64>,
        kind: Option<&str>,
        max_bytes: usize,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut q = RecallQuery::new(pattern);
        q.limit = limit;
        q.since_us = since_us;
        q.until_us = until_us;
        q.kind = kind.map(Kind::from_str).transpose().py(py)?;
        q.max_bytes = max_bytes;
        let r = self.run(py, |s| s.recall(scope, &q))?;
        let d = PyDict::new(py);
        let matches = PyList::empty(py);
        for m in &r.matches {
            matches.append(memory_dict(py, m)?)?;
        }
        d.set_item("matches", matches)?;
        d.set_item("total", r.total)?;
        d.set_item("text", r.render())?;
        Ok(d)
    }

    /// Blocks waiting for a summary, in the order nap asks for them (`["0-1", "2-3", ...]`).
    #[pyo3(signature = (scope = "default", *, limit = None))]
    fn pending(&self, py: Python<'_>, scope: &str, limit: Option<usize>) -> PyResult<Vec<String>> {
        let bs = self.run(py, |s| s.pending(scope, limit))?;
        Ok(bs.iter().map(|b| b.to_string()).collect())
    }

    /// The next merge prompt, or `None`: `{"block", "inputs", "remaining", "entry_bytes",
    /// "text"}` where `text` is the prompt to give the agent.
    #[pyo3(signature = (scope = "default", *, cmd = "engram"))]
    fn prompt<'py>(
        &self,
        py: Python<'py>,
        scope: &str,
        cmd: &str,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let p = self.run(py, |s| s.next_prompt(scope))?;
        p.map(|p| prompt_dict(py, &p, cmd)).transpose()
    }

    /// Up to `n` merge prompts that can be answered now (for a batch `nap_many`).
    #[pyo3(signature = (n, scope = "default", *, cmd = "engram"))]
    fn prompts<'py>(
        &self,
        py: Python<'py>,
        n: usize,
        scope: &str,
        cmd: &str,
    ) -> PyResult<Bound<'py, PyList>> {
        let ps = self.run(py, |s| s.read(|r| r.prompts(scope, n)))?;
        let out = PyList::empty(py);
        for p in &ps {
            out.append(prompt_dict(py, p, cmd)?)?;
        }
        Ok(out)
    }

    /// Answers the next pending merge with a one-line summary. Returns `"saved"`, or
    /// `"already_settled"` when that block already has one. Another block than the next pending
    /// one raises `engram.WrongBlockError` (its `next_block` names the right one).
    #[pyo3(signature = (block, text, scope = "default"))]
    fn nap(&self, py: Python<'_>, block: &str, text: &str, scope: &str) -> PyResult<&'static str> {
        let b = parse_block(py, block)?;
        self.run(py, |s| s.nap(scope, b, text)).map(outcome_name)
    }

    /// Applies many merges in one commit: `[(block, text), ...]`, in any order.
    #[pyo3(signature = (entries, scope = "default"))]
    fn nap_many(
        &self,
        py: Python<'_>,
        entries: Vec<(String, String)>,
        scope: &str,
    ) -> PyResult<Vec<(String, &'static str)>> {
        let mut es = Vec::with_capacity(entries.len());
        for (b, t) in entries {
            es.push((parse_block(py, &b)?, t));
        }
        let out = self.run(py, |s| s.nap_many(scope, es))?;
        Ok(out
            .into_iter()
            .map(|(b, o)| (b.to_string(), outcome_name(o)))
            .collect())
    }

    /// Drops the summary of `block` and those built on it (they become pending again).
    /// Returns the blocks dropped.
    #[pyo3(signature = (block, scope = "default"))]
    fn forget(&self, py: Python<'_>, block: &str, scope: &str) -> PyResult<Vec<String>> {
        let b = parse_block(py, block)?;
        let out = self.run(py, |s| s.forget(scope, b))?;
        Ok(out.iter().map(|b| b.to_string()).collect())
    }

    /// Every setting, scope, memory and summary as JSON Lines text (the CLI's `export`).
    fn export(&self, py: Python<'_>) -> PyResult<String> {
        let bytes = self.run(py, |s| {
            let mut out = Vec::new();
            s.export(&mut out)?;
            Ok(out)
        })?;
        String::from_utf8(bytes).map_err(|e| invalid(py, e.to_string()))
    }

    /// Imports a JSON Lines export into scopes that are empty here, in one commit.
    /// Returns `{"scopes", "memories", "summaries"}`.
    fn import_jsonl<'py>(&self, py: Python<'py>, text: String) -> PyResult<Bound<'py, PyDict>> {
        let r = self.run(py, |s| s.import_jsonl(&mut text.as_bytes()))?;
        let d = PyDict::new(py);
        d.set_item("scopes", r.scopes)?;
        d.set_item("memories", r.memories)?;
        d.set_item("summaries", r.summaries)?;
        Ok(d)
    }

    /// The store's settings: `{"entry_bytes", "raw_max", "wake_lines", "wake_bytes",
    /// "session_archive_max"}`.
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let c = self.run(py, |s| s.config())?;
        let d = PyDict::new(py);
        d.set_item("entry_bytes", c.entry_bytes)?;
        d.set_item("raw_max", c.raw_max)?;
        d.set_item("wake_lines", c.wake_lines)?;
        d.set_item("wake_bytes", c.wake_bytes)?;
        d.set_item("session_archive_max", c.session_archive_max)?;
        Ok(d)
    }

    /// Stores a setting (`ENTRY_BYTES`, `RAW_MAX`, `WAKE_LINES`, `WAKE_BYTES`,
    /// `SESSION_ARCHIVE_MAX`) and returns its value.
    fn set_config(&self, py: Python<'_>, name: &str, value: &Bound<'_, PyAny>) -> PyResult<u64> {
        let value: String = value.str()?.extract()?;
        self.run(py, |s| s.set_config(name, &value))
    }

    /// Checks the whole file (redb's page checksums, then every value and counter) through a
    /// private handle. Returns `{"ok", "engine_intact", "scopes", "memories", "summaries",
    /// "sessions", "problems"}`.
    fn verify<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        if self.closed() {
            return Err(closed(py));
        }
        let (path, opts) = (self.path.clone(), self.opts.clone());
        let r = guarded(py, move || {
            let mut s = Store::open_with(&path, opts)?;
            s.verify()
        })?;
        let d = PyDict::new(py);
        d.set_item("ok", r.ok())?;
        d.set_item("engine_intact", r.engine_intact)?;
        d.set_item("scopes", r.scopes)?;
        d.set_item("memories", r.memories)?;
        d.set_item("summaries", r.summaries)?;
        d.set_item("sessions", r.sessions)?;
        d.set_item("problems", &r.problems)?;
        Ok(d)
    }

    // ----- sessions --------------------------------------------------------------------------

    /// Replaces session `id`'s items with `messages` (JSON objects: dicts, or str of JSON) in
    /// one commit, writing only what changed; items the new list drops are moved to the
    /// session's archive. With `expected_revision` (0: the session must not exist) raises
    /// `engram.ConflictError` unless the session is at that revision. Returns
    /// `{"revision", "kept", "written", "archived"}`.
    #[pyo3(signature = (id, messages, *, expected_revision = None))]
    fn session_save<'py>(
        &self,
        py: Python<'py>,
        id: &str,
        messages: &Bound<'py, PyAny>,
        expected_revision: Option<u64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let texts = encode_items(py, messages, "message")?;
        let o = self.run(py, |s| {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            s.session_save(id, &refs, expected_revision)
        })?;
        let d = PyDict::new(py);
        d.set_item("revision", o.revision)?;
        d.set_item("kept", o.kept)?;
        d.set_item("written", o.written)?;
        d.set_item("archived", o.archived)?;
        Ok(d)
    }

    /// The session's items, or `None` when it does not exist. `raw=True` returns the stored
    /// JSON text of each item instead of decoding it.
    #[pyo3(signature = (id, *, raw = false))]
    fn session_load<'py>(
        &self,
        py: Python<'py>,
        id: &str,
        raw: bool,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        let items = self.run(py, |s| s.session_load(id))?;
        items.map(|v| decode_items(py, &v, raw)).transpose()
    }

    /// `(items or None, revision)` read from one snapshot: the revision to pass as
    /// `expected_revision` to a later save (0 when the session does not exist).
    #[pyo3(signature = (id, *, raw = false))]
    fn session_load_with_revision<'py>(
        &self,
        py: Python<'py>,
        id: &str,
        raw: bool,
    ) -> PyResult<(Option<Bound<'py, PyList>>, u64)> {
        let (items, rev) = self.run(py, |s| {
            s.read(|r| {
                let info = r.session_info(id)?;
                let items = r.session_load(id)?;
                Ok((items, info.map(|i| i.revision).unwrap_or(0)))
            })
        })?;
        Ok((items.map(|v| decode_items(py, &v, raw)).transpose()?, rev))
    }

    /// Appends items (JSON objects) to the session, created if absent, as one atomic batch.
    /// With `key`, a retry of the same batch writes nothing (`replayed`); the same key with
    /// other items raises `engram.ConflictError`. Returns `{"revision", "first_index", "count",
    /// "replayed"}`.
    #[pyo3(signature = (id, items, *, key = None, expected_revision = None))]
    fn session_append<'py>(
        &self,
        py: Python<'py>,
        id: &str,
        items: &Bound<'py, PyAny>,
        key: Option<String>,
        expected_revision: Option<u64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let texts = encode_items(py, items, "item")?;
        let o = self.run(py, |s| {
            let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
            s.session_append(id, &refs, key.as_deref(), expected_revision)
        })?;
        let d = PyDict::new(py);
        d.set_item("revision", o.revision)?;
        d.set_item("first_index", o.first_index)?;
        d.set_item("count", o.count)?;
        d.set_item("replayed", o.replayed)?;
        Ok(d)
    }

    /// The latest `limit` items (all when `None`), oldest first; `[]` for a missing session.
    #[pyo3(signature = (id, limit = None, *, raw = false))]
    fn session_items<'py>(
        &self,
        py: Python<'py>,
        id: &str,
        limit: Option<usize>,
        raw: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let items = self.run(py, |s| s.session_items(id, limit))?;
        decode_items(py, &items, raw)
    }

    /// `(items, unreadable)`: the latest `limit` items (all when `None`), oldest first, reading
    /// past damaged ones, and the sequence numbers of the damaged items that were skipped (they
    /// count toward `limit`). A corrupt record never hides the valid history.
    #[pyo3(signature = (id, limit = None, *, raw = false))]
    fn session_items_lossy<'py>(
        &self,
        py: Python<'py>,
        id: &str,
        limit: Option<usize>,
        raw: bool,
    ) -> PyResult<(Bound<'py, PyList>, Vec<u64>)> {
        let r = self.run(py, |s| s.session_items_lossy(id, limit))?;
        Ok((decode_items(py, &r.items, raw)?, r.unreadable))
    }

    /// Removes and returns the newest item, or `None` when the session is empty or absent.
    #[pyo3(signature = (id, *, expected_revision = None, raw = false))]
    fn session_pop<'py>(
        &self,
        py: Python<'py>,
        id: &str,
        expected_revision: Option<u64>,
        raw: bool,
    ) -> PyResult<Option<Bound<'py, PyAny>>> {
        let item = self.run(py, |s| s.session_pop(id, expected_revision))?;
        item.map(|t| decode_item(py, &t, raw)).transpose()
    }

    /// Removes every live item (the archive stays). Returns how many were removed.
    fn session_clear(&self, py: Python<'_>, id: &str) -> PyResult<u64> {
        self.run(py, |s| s.session_clear(id))
    }

    /// Deletes the session with its archive and idempotency keys. Returns whether it existed;
    /// deleting a missing session is not an error.
    fn session_delete(&self, py: Python<'_>, id: &str) -> PyResult<bool> {
        self.run(py, |s| s.session_delete(id))
    }

    /// Removes the session's archive. Returns how many archived items were removed.
    fn session_prune(&self, py: Python<'_>, id: &str) -> PyResult<u64> {
        self.run(py, |s| s.session_prune(id))
    }

    /// `{"id", "created_us", "updated_us", "revision", "count", "bytes", "archived"}`, or
    /// `None` when the session does not exist.
    fn session_info<'py>(&self, py: Python<'py>, id: &str) -> PyResult<Option<Bound<'py, PyDict>>> {
        let info = self.run(py, |s| s.session_info(id))?;
        info.map(|i| session_info_dict(py, &i)).transpose()
    }

    /// Sessions whose id starts with `prefix`, sorted, strictly after the cursor `after`, at
    /// most `limit`: a list of `session_info` dicts.
    #[pyo3(signature = (prefix = "", *, after = None, limit = None))]
    fn session_list<'py>(
        &self,
        py: Python<'py>,
        prefix: &str,
        after: Option<&str>,
        limit: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let infos = self.run(py, |s| s.session_list(prefix, after, limit))?;
        let out = PyList::empty(py);
        for i in &infos {
            out.append(session_info_dict(py, i)?)?;
        }
        Ok(out)
    }

    /// Every session id, sorted.
    fn session_ids(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.run(py, |s| s.session_ids())
    }

    /// The items saves have dropped from the session, oldest first:
    /// `[{"archived_us", "message"}]`.
    #[pyo3(signature = (id, *, raw = false))]
    fn session_archived<'py>(
        &self,
        py: Python<'py>,
        id: &str,
        raw: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let items = self.run(py, |s| s.session_archived(id))?;
        let out = PyList::empty(py);
        for a in &items {
            let d = PyDict::new(py);
            d.set_item("archived_us", a.archived_us)?;
            d.set_item("message", decode_item(py, &a.message, raw)?)?;
            out.append(d)?;
        }
        Ok(out)
    }
}

/// The session id limit and message size limit of the engine, for the adapters.
#[pymodule]
fn _engram(m: &Bound<'_, PyModule>) -> PyResult<()> {
    install_panic_hook();
    m.add_class::<PyStore>()?;
    m.add("MAX_MESSAGE_BYTES", engram::session::MAX_MESSAGE_BYTES)?;
    m.add(
        "MAX_SESSION_ID_BYTES",
        engram::session::MAX_SESSION_ID_BYTES,
    )?;
    m.add("DEFAULT_SCOPE", engram::DEFAULT_SCOPE)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
