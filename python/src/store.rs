//! The `Store` class: the memory and session verbs, each returning plain Python values.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use crate::convert::{
    block_dict, decode_item, decode_items, duration, encode_items, memory_dict, new_memory,
    outcome_name, parse_block, prompt_dict, session_info_dict, summary_dict,
};
use crate::error::{closed, invalid, OrPy};
use crate::handles::{acquire, canonical, guarded, Handle, Key, IN_GUARD, LAST_PANIC};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple};
use somna::{
    Error, Hints, Kind, NewMemory, Options, RecallQuery, SearchMode, SearchQuery, SearchResult,
    Status, Store, WakeItem, WakeOptions, ZoomEntry,
};

// ---------------------------------------------------------------------------------------------
// The class

/// A somna store: one file holding every scope's memory log and summary tree, and the
/// conversation sessions.
///
/// `Store(path)` opens the store at `path`, creating it (and its parent directories) when the
/// file does not exist; pass `create=False` to require an existing store. Every method is
/// thread-safe and releases the GIL while it works.
#[pyclass(module = "somna._somna", name = "Store", frozen)]
pub(crate) struct PyStore {
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
pub(crate) fn release(h: Handle) {
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

    /// Runs `f` on the store with the GIL released; raises `somna.ClosedError` after
    /// `close()`.
    pub(crate) fn run<T: Send>(
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
        // A Python handle stays open: the library's default cache, sized for a server, unless
        // the call or SOMNA_CACHE_MIB says otherwise.
        let env = somna::store::cache_bytes_from_env().map_err(|e| invalid(py, e.to_string()))?;
        if let Some(n) = cache_bytes.or(env) {
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
    /// Calls after `close()` raise `somna.ClosedError`. Closing twice is harmless.
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
            "somna.Store({:?}{})",
            self.path.display().to_string(),
            if self.closed() { ", closed" } else { "" }
        )
    }

    // ----- memory log ------------------------------------------------------------------------

    /// Appends one memory to `scope` and returns its id. With `key`, a retry with the same key
    /// and text writes nothing and returns the first id. With `vector`, its embedding is stored
    /// with it for hybrid and vector search (the scope's first vector sets its dimension).
    #[pyo3(signature = (text, scope = "default", *, kind = None, status = None, source = None,
        source_uri = None, observed_us = None, supersedes = None, conflicts_with = None,
        valid_until_us = None, key = None, vector = None))]
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
        vector: Option<Vec<f32>>,
    ) -> PyResult<u64> {
        let mut m = NewMemory::new(text);
        if let Some(v) = vector {
            m = m.vector(v);
        }
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
    /// `hints` is how its next-step lines name the action (`PyStore::hints_for`).
    #[pyo3(signature = (scope = "default", *, lines = None, bytes = None, part = 1, snapshot = None, hints = "none", cmd = None))]
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
        hints: &str,
        cmd: Option<&str>,
    ) -> PyResult<String> {
        let mut opts = WakeOptions::default();
        opts.lines = lines;
        opts.bytes = bytes;
        opts.part = part;
        opts.snapshot = snapshot;
        opts.hints = self.hints_for(py, hints, cmd, scope)?;
        self.run(py, |s| s.wake_text(scope, &opts))
    }

    /// Wake as data: `{"scope", "total", "omitted", "pending", "items", "lines"}`, each item a
    /// memory or a summary dict.
    #[pyo3(signature = (scope = "default", *, lines = None, bytes = None, snapshot = None, hints = "none", cmd = None))]
    #[allow(clippy::too_many_arguments, clippy::field_reassign_with_default)]
    fn wake_view<'py>(
        &self,
        py: Python<'py>,
        scope: &str,
        lines: Option<usize>,
        bytes: Option<usize>,
        snapshot: Option<u64>,
        hints: &str,
        cmd: Option<&str>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut opts = WakeOptions::default();
        opts.lines = lines;
        opts.bytes = bytes;
        opts.snapshot = snapshot;
        opts.hints = self.hints_for(py, hints, cmd, scope)?;
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
        d.set_item("lines", v.lines_with(&opts.hints))?;
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

    /// Ranks memories and summaries by how well they match `query`'s words (BM25, each scope
    /// with its own statistics; fused with `vector` when given). Searches `scope`, or `scopes`,
    /// or with `all=True` every scope the principal may read. Returns `{"hits": [{"scope",
    /// "block" (`#id` or `LO-HI`), "id", "line", "score", "terms", "inactive"}, ...best first], "candidates",
    /// "next_offset", "text"}`; `next_offset` (or `None`) is the `offset` of the next page.
    #[pyo3(signature = (query, scope = "default", *, scopes = None, all = false, limit = 10,
        offset = 0, since_us = None, until_us = None, kind = None, max_bytes = 20000,
        include_inactive = false, vector = None, mode = None))]
    #[allow(clippy::too_many_arguments)]
    fn search<'py>(
        &self,
        py: Python<'py>,
        query: String,
        scope: &str,
        scopes: Option<Vec<String>>,
        all: bool,
        limit: usize,
        offset: usize,
        since_us: Option<i64>,
        until_us: Option<i64>,
        kind: Option<&str>,
        max_bytes: usize,
        include_inactive: bool,
        vector: Option<Vec<f32>>,
        mode: Option<&str>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let mut q = SearchQuery::new(query);
        q.limit = limit;
        q.offset = offset;
        q.since_us = since_us;
        q.until_us = until_us;
        q.kind = kind.map(Kind::from_str).transpose().py(py)?;
        q.max_bytes = max_bytes;
        q.include_inactive = include_inactive;
        q.vector = vector;
        q.mode = mode.map(SearchMode::from_str).transpose().py(py)?;
        let several = all || scopes.is_some();
        let r = self.run(py, |s| match (all, scopes) {
            (true, _) => s.search_all(&q),
            (false, Some(v)) => s.search_scopes(&v, &q),
            (false, None) => s.search(scope, &q),
        })?;
        search_dict(py, &r, several)
    }

    /// Blocks waiting for a summary, in the order nap asks for them (`["0-1", "2-3", ...]`).
    #[pyo3(signature = (scope = "default", *, limit = None))]
    fn pending(&self, py: Python<'_>, scope: &str, limit: Option<usize>) -> PyResult<Vec<String>> {
        let bs = self.run(py, |s| s.pending(scope, limit))?;
        Ok(bs.iter().map(|b| b.to_string()).collect())
    }

    /// The next merge prompt, or `None`: `{"block", "inputs", "remaining", "entry_bytes",
    /// "text"}` where `text` is the prompt to give the agent.
    #[pyo3(signature = (scope = "default", *, hints = "none", cmd = None))]
    fn prompt<'py>(
        &self,
        py: Python<'py>,
        scope: &str,
        hints: &str,
        cmd: Option<&str>,
    ) -> PyResult<Option<Bound<'py, PyDict>>> {
        let hints = self.hints_for(py, hints, cmd, scope)?;
        let p = self.run(py, |s| s.next_prompt(scope))?;
        p.map(|p| prompt_dict(py, &p, &hints)).transpose()
    }

    /// Up to `n` merge prompts that can be answered now (for a batch `nap_many`).
    #[pyo3(signature = (n, scope = "default", *, hints = "none", cmd = None))]
    fn prompts<'py>(
        &self,
        py: Python<'py>,
        n: usize,
        scope: &str,
        hints: &str,
        cmd: Option<&str>,
    ) -> PyResult<Bound<'py, PyList>> {
        let hints = self.hints_for(py, hints, cmd, scope)?;
        let ps = self.run(py, |s| s.read(|r| r.prompts(scope, n)))?;
        let out = PyList::empty(py);
        for p in &ps {
            out.append(prompt_dict(py, p, &hints)?)?;
        }
        Ok(out)
    }

    /// Answers the next pending merge with a one-line summary. Returns `"saved"`, or
    /// `"already_settled"` when that block already has one. Another block than the next pending
    /// one raises `somna.WrongBlockError` (its `next_block` names the right one).
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

    /// Sets the store's embedder (admin only), an OpenAI-compatible `/v1/embeddings` endpoint:
    /// searches then rank by meaning and words together, and `backfill` embeds the memories.
    /// The API key is read from the environment variable `key_env` names at each call, never
    /// stored. `None` as `url` removes it.
    #[pyo3(signature = (url, model = None, dimension = None, *, key_env = None,
        query_prefix = "", passage_prefix = "", input_type = false, wait_ms = 2000, batch = 32))]
    #[allow(clippy::too_many_arguments)]
    fn set_embedder(
        &self,
        py: Python<'_>,
        url: Option<String>,
        model: Option<String>,
        dimension: Option<u32>,
        key_env: Option<String>,
        query_prefix: &str,
        passage_prefix: &str,
        input_type: bool,
        wait_ms: u32,
        batch: u32,
    ) -> PyResult<()> {
        let e = match (url, model, dimension) {
            (None, _, _) => None,
            (Some(url), Some(model), Some(dimension)) => {
                let mut e = somna::search::Embedder::new(url, model, dimension);
                e.api_key_env = key_env;
                e.query_prefix = query_prefix.to_string();
                e.passage_prefix = passage_prefix.to_string();
                e.input_type = input_type;
                e.query_wait_ms = wait_ms;
                e.batch = batch;
                Some(e)
            }
            _ => {
                return Err(invalid(
                    py,
                    "invalid embedder: it needs its url, model and dimension",
                ))
            }
        };
        self.run(py, |s| s.set_embedder(e.as_ref()))
    }

    /// The store's embedder as a dict (`url`, `model`, `dimension`, `api_key_env`,
    /// `query_prefix`, `passage_prefix`, `input_type`, `query_wait_ms`, `batch`), or `None`.
    fn embedder<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        let Some(e) = self.run(py, |s| s.embedder())? else {
            return Ok(None);
        };
        let d = PyDict::new(py);
        d.set_item("url", &e.url)?;
        d.set_item("model", &e.model)?;
        d.set_item("dimension", e.dimension)?;
        d.set_item("api_key_env", &e.api_key_env)?;
        d.set_item("query_prefix", &e.query_prefix)?;
        d.set_item("passage_prefix", &e.passage_prefix)?;
        d.set_item("input_type", e.input_type)?;
        d.set_item("query_wait_ms", e.query_wait_ms)?;
        d.set_item("batch", e.batch)?;
        Ok(Some(d))
    }

    /// Embeds up to `max` memories lacking a vector of the embedder's model, in `scope` or
    /// (`None`) every scope; admin only. Returns `{"model", "embedded", "skipped",
    /// "remaining", "scopes"}`; an endpoint that fails raises `StorageError` (what was embedded
    /// before stays, and the next call resumes).
    #[pyo3(signature = (scope = None, max = None))]
    fn backfill<'py>(
        &self,
        py: Python<'py>,
        scope: Option<String>,
        max: Option<u64>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let r = self.run(py, |s| {
            s.backfill(scope.as_deref(), max.unwrap_or(u64::MAX), &mut |_| {})
        })?;
        let d = PyDict::new(py);
        d.set_item("model", &r.model)?;
        d.set_item("embedded", r.embedded)?;
        d.set_item("skipped", r.skipped)?;
        d.set_item("remaining", r.remaining)?;
        d.set_item("scopes", r.scopes)?;
        Ok(d)
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
    /// `somna.ConflictError` unless the session is at that revision. Returns
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
    /// other items raises `somna.ConflictError`. Returns `{"revision", "first_index", "count",
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

/// A search mode by name.
/// A search result as a dict (the text prefixes each line with its scope when `several`).
fn search_dict<'py>(
    py: Python<'py>,
    r: &SearchResult,
    several: bool,
) -> PyResult<Bound<'py, PyDict>> {
    let hits = PyList::empty(py);
    for h in &r.hits {
        let d = PyDict::new(py);
        d.set_item("scope", &h.scope)?;
        d.set_item("block", h.block.to_string())?;
        d.set_item("id", h.id)?;
        d.set_item("line", &h.line)?;
        d.set_item("score", h.score)?;
        d.set_item("terms", &h.terms)?;
        d.set_item("inactive", h.inactive)?;
        hits.append(d)?;
    }
    let d = PyDict::new(py);
    d.set_item("hits", hits)?;
    d.set_item("candidates", r.candidates)?;
    d.set_item("next_offset", r.next_offset)?;
    d.set_item("embedded_by", &r.embedded_by)?;
    d.set_item("fallback", &r.fallback)?;
    d.set_item("text", r.render(several))?;
    Ok(d)
}

impl PyStore {
    /// The form of next-step hints a call asked for: `"none"` (the default: a Python host
    /// drives the loop itself, with `prompt` and `nap`), `"tools"` (the host offers somna's MCP
    /// tool names to its agent), `"cli"` (`Run:` lines carrying this store's path and the scope,
    /// for an agent with a shell and the `somna` binary), or `cmd` given: `Run:` lines with
    /// exactly that prefix.
    fn hints_for(
        &self,
        py: Python<'_>,
        hints: &str,
        cmd: Option<&str>,
        scope: &str,
    ) -> PyResult<Hints> {
        let named = (scope != somna::DEFAULT_SCOPE).then(|| scope.to_string());
        match (cmd, hints) {
            (Some(cmd), _) => Ok(Hints::Cli(cmd.to_string())),
            (None, "none") => Ok(Hints::Off),
            (None, "tools") => Ok(Hints::Tools { scope: named }),
            (None, "cli") => {
                let path = std::path::absolute(&self.path).unwrap_or_else(|_| self.path.clone());
                let mut prefix = format!("somna --db {}", shell_word(&path.to_string_lossy()));
                if let Some(s) = named {
                    prefix.push_str(&format!(" --scope {}", shell_word(&s)));
                }
                Ok(Hints::Cli(prefix))
            }
            (None, other) => Err(invalid(
                py,
                format!("invalid hints {other:?}: expected \"none\", \"tools\" or \"cli\""),
            )),
        }
    }
}

/// `w` as one shell word: bare when it holds only safe characters, else single-quoted.
fn shell_word(w: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "/._-:+@%=,".contains(c);
    if !w.is_empty() && w.chars().all(safe) {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
}
