//! The `LangGraphStorage` class: the storage verbs of LangGraph's checkpointer and store over a
//! `Store`, for `somna.langgraph` (which does the serializing: values arrive here as
//! LangGraph's `(type, bytes)` pairs and leave the same way). Tuples in, tuples out: the adapter
//! builds LangGraph's objects.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};
use somna::checkpoint::FoundItem;
use somna::checkpoint::{
    ChannelValue, CheckpointEntry, ListQuery, NewCheckpoint, PendingWrite, Prune, Typed,
};
use std::str::FromStr;

use crate::error::{invalid, OrPy};
use crate::msgpack::{array_header, split_array};
use crate::store::PyStore;

/// A `(type, bytes)` pair.
fn typed(obj: &Bound<'_, PyAny>) -> PyResult<Typed> {
    let (kind, bytes): (String, Bound<'_, PyAny>) = obj.extract()?;
    let bytes = bytes.cast::<PyBytes>()?.as_bytes().to_vec();
    Ok(Typed { kind, bytes })
}

fn typed_py<'py>(py: Python<'py>, t: &Typed) -> PyResult<Bound<'py, PyTuple>> {
    PyTuple::new(
        py,
        [
            t.kind.clone().into_pyobject(py)?.into_any(),
            PyBytes::new(py, &t.bytes).into_any(),
        ],
    )
}

/// The serializer's type of MessagePack values.
const MSGPACK: &str = "msgpack";

/// `None` (empty), a `(type, bytes)` pair, a list of pairs (stored item by item), or a
/// `(type, bytes, True)` triple: a list serialized whole, which is split into its elements when
/// it is a MessagePack array (and stored whole otherwise).
fn channel_value(obj: &Bound<'_, PyAny>) -> PyResult<ChannelValue> {
    if obj.is_none() {
        return Ok(ChannelValue::Empty);
    }
    if let Ok(list) = obj.cast::<PyList>() {
        let items = list
            .iter()
            .map(|i| typed(&i))
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(ChannelValue::List(items));
    }
    if let Ok((kind, bytes, true)) = obj.extract::<(String, Bound<'_, PyBytes>, bool)>() {
        let b = bytes.as_bytes();
        if kind == MSGPACK {
            if let Some(parts) = split_array(b) {
                let items = parts.into_iter().map(|p| Typed::new(MSGPACK, p)).collect();
                return Ok(ChannelValue::List(items));
            }
        }
        return Ok(ChannelValue::Whole(Typed::new(kind, b)));
    }
    Ok(ChannelValue::Whole(typed(obj)?))
}

/// A stored list as one value when every item is MessagePack: the array they were split from.
fn joined(items: &[Typed]) -> Option<Typed> {
    if !items.iter().all(|t| t.kind == MSGPACK) {
        return None;
    }
    let mut b = array_header(items.len());
    b.reserve(items.iter().map(|t| t.bytes.len()).sum());
    for t in items {
        b.extend_from_slice(&t.bytes);
    }
    Some(Typed::new(MSGPACK, b))
}

fn channel_value_py<'py>(py: Python<'py>, v: &ChannelValue) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        ChannelValue::Empty => py.None().into_bound(py),
        ChannelValue::Whole(t) => typed_py(py, t)?.into_any(),
        ChannelValue::List(items) => {
            if let Some(t) = joined(items) {
                return Ok(typed_py(py, &t)?.into_any());
            }
            let l = PyList::empty(py);
            for t in items {
                l.append(typed_py(py, t)?)?;
            }
            l.into_any()
        }
    })
}

/// `(thread, ns, id, parent, checkpoint, metadata, [(channel, value)], [(task_id, channel,
/// value)])`.
fn entry_py<'py>(py: Python<'py>, e: &CheckpointEntry) -> PyResult<Bound<'py, PyTuple>> {
    let values = PyList::empty(py);
    for (ch, v) in &e.values {
        values.append((ch.as_str(), channel_value_py(py, v)?))?;
    }
    let writes = PyList::empty(py);
    for w in &e.writes {
        writes.append((
            w.task_id.as_str(),
            w.channel.as_str(),
            typed_py(py, &w.value)?,
        ))?;
    }
    (
        e.thread.as_str(),
        e.ns.as_str(),
        e.id.as_str(),
        e.parent.as_deref(),
        typed_py(py, &e.checkpoint)?,
        typed_py(py, &e.metadata)?,
        values,
        writes,
    )
        .into_pyobject(py)
}

fn item_py<'py>(py: Python<'py>, f: &FoundItem) -> PyResult<Bound<'py, PyTuple>> {
    (
        f.namespace.clone(),
        f.key.as_str(),
        f.item.value.as_str(),
        f.item.created_us,
        f.item.updated_us,
        PyBytes::new(py, &f.item.extra),
    )
        .into_pyobject(py)
}

/// One put of a store batch: namespace, key, value (JSON text; `None` deletes), TTL in
/// microseconds, extra bytes.
type ItemPut = (Vec<String>, String, Option<String>, Option<i64>, Vec<u8>);

/// LangGraph's storage in a somna store: checkpoints (`SomnaSaver`) and store items
/// (`SomnaStore`). `LangGraphStorage(store)`; every method releases the GIL while it works.
#[pyclass(module = "somna._somna", name = "LangGraphStorage", frozen)]
pub(crate) struct PyLangGraph {
    store: Py<PyStore>,
}

#[pymethods]
impl PyLangGraph {
    #[new]
    fn new(store: Py<PyStore>) -> Self {
        PyLangGraph { store }
    }

    /// Stores a checkpoint. `checkpoint` and `metadata` are `(type, bytes)`; `versions` lists
    /// `(channel, version)` for every channel with a value; `changed` lists `(channel, version,
    /// value)` for the new versions, a value being `None` (empty), `(type, bytes)` or a list of
    /// them (stored item by item, only the items the previous version lacks).
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (thread, ns, id, parent, checkpoint, metadata, metadata_json, run_id, versions, changed))]
    fn put(
        &self,
        py: Python<'_>,
        thread: String,
        ns: String,
        id: String,
        parent: Option<String>,
        checkpoint: &Bound<'_, PyAny>,
        metadata: &Bound<'_, PyAny>,
        metadata_json: String,
        run_id: Option<String>,
        versions: Vec<(String, String)>,
        changed: &Bound<'_, PyList>,
    ) -> PyResult<()> {
        let mut ch = Vec::with_capacity(changed.len());
        for c in changed.iter() {
            let (name, ver, value): (String, String, Bound<'_, PyAny>) = c.extract()?;
            ch.push((name, ver, channel_value(&value)?));
        }
        let c = NewCheckpoint {
            thread,
            ns,
            id,
            parent,
            checkpoint: typed(checkpoint)?,
            metadata: typed(metadata)?,
            metadata_json,
            run_id,
            versions,
            changed: ch,
        };
        self.store.get().run(py, |s| s.checkpoint_put(&c))
    }

    /// Stores pending writes: `writes` is a list of `(task_id, idx, channel, (type, bytes),
    /// task_path)`.
    fn put_writes(
        &self,
        py: Python<'_>,
        thread: &str,
        ns: &str,
        id: &str,
        writes: &Bound<'_, PyList>,
    ) -> PyResult<()> {
        let mut ws = Vec::with_capacity(writes.len());
        for w in writes.iter() {
            let (task_id, idx, channel, value, task_path): (
                String,
                i64,
                String,
                Bound<'_, PyAny>,
                String,
            ) = w.extract()?;
            ws.push(PendingWrite {
                task_id,
                idx,
                channel,
                value: typed(&value)?,
                task_path,
            });
        }
        self.store
            .get()
            .run(py, |s| s.checkpoint_put_writes(thread, ns, id, &ws))
    }

    /// The checkpoint `id` (or the latest) of a thread's namespace as an entry tuple, or `None`.
    #[pyo3(signature = (thread, ns, id = None))]
    fn get<'py>(
        &self,
        py: Python<'py>,
        thread: &str,
        ns: &str,
        id: Option<&str>,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let e = self
            .store
            .get()
            .run(py, |s| s.checkpoint_get(thread, ns, id))?;
        e.map(|e| entry_py(py, &e)).transpose()
    }

    /// For each channel, `(channel, [(task_id, channel, value)], seed)`: its pending writes on
    /// the ancestors' path, oldest first, and `(value,)` at the nearest ancestor holding one, or
    /// `None` (LangGraph's `get_delta_channel_history`).
    #[pyo3(signature = (thread, ns, id, channels))]
    fn delta_history<'py>(
        &self,
        py: Python<'py>,
        thread: &str,
        ns: &str,
        id: Option<&str>,
        channels: Vec<String>,
    ) -> PyResult<Bound<'py, PyList>> {
        let hs = self.store.get().run(py, |s| {
            s.checkpoint_delta_history(thread, ns, id, &channels)
        })?;
        let out = PyList::empty(py);
        for h in &hs {
            let writes = PyList::empty(py);
            for w in &h.writes {
                writes.append((
                    w.task_id.as_str(),
                    w.channel.as_str(),
                    typed_py(py, &w.value)?,
                ))?;
            }
            let seed = match &h.seed {
                Some(v) => Some(PyTuple::new(py, [channel_value_py(py, v)?])?),
                None => None,
            };
            out.append((h.channel.as_str(), writes, seed))?;
        }
        Ok(out)
    }

    /// Entry tuples, newest first. `filter_json`: a JSON object every match's metadata agrees
    /// with, key by key.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (thread = None, ns = None, id = None, before = None, filter_json = None, limit = None))]
    fn list<'py>(
        &self,
        py: Python<'py>,
        thread: Option<String>,
        ns: Option<String>,
        id: Option<String>,
        before: Option<String>,
        filter_json: Option<&str>,
        limit: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let filter = match filter_json {
            None => Vec::new(),
            Some(f) => serde_json::from_str::<serde_json::Map<String, serde_json::Value>>(f)
                .map_err(|e| invalid(py, format!("filter: {e}")))?
                .into_iter()
                .collect(),
        };
        let q = ListQuery {
            thread,
            ns,
            id,
            before,
            filter,
            limit,
        };
        let found = self.store.get().run(py, |s| s.checkpoint_list(&q))?;
        let out = PyList::empty(py);
        for e in &found {
            out.append(entry_py(py, e)?)?;
        }
        Ok(out)
    }

    /// Deletes a thread's checkpoints, values and writes; how many checkpoints.
    fn delete_thread(&self, py: Python<'_>, thread: &str) -> PyResult<u64> {
        self.store
            .get()
            .run(py, |s| s.write(|tx| tx.checkpoint_delete_thread(thread)))
    }

    /// Deletes the checkpoints of these runs, in every thread; how many.
    fn delete_for_runs(&self, py: Python<'_>, run_ids: Vec<String>) -> PyResult<u64> {
        let refs: Vec<&str> = run_ids.iter().map(String::as_str).collect();
        self.store
            .get()
            .run(py, |s| s.write(|tx| tx.checkpoint_delete_for_runs(&refs)))
    }

    /// Copies a thread; how many checkpoints.
    fn copy_thread(&self, py: Python<'_>, source: &str, target: &str) -> PyResult<u64> {
        self.store.get().run(py, |s| {
            s.write(|tx| tx.checkpoint_copy_thread(source, target))
        })
    }

    /// Prunes threads (`keep_latest` or `delete`); how many checkpoints were deleted.
    fn prune(&self, py: Python<'_>, threads: Vec<String>, strategy: &str) -> PyResult<u64> {
        let strategy = Prune::from_str(strategy).py(py)?;
        let refs: Vec<&str> = threads.iter().map(String::as_str).collect();
        self.store
            .get()
            .run(py, |s| s.write(|tx| tx.checkpoint_prune(&refs, strategy)))
    }

    /// `{"checkpoints", "channel_values", "items", "writes", "value_bytes"}`.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let s = self
            .store
            .get()
            .run(py, |s| s.read(|r| r.checkpoint_stats()))?;
        let d = PyDict::new(py);
        d.set_item("checkpoints", s.checkpoints)?;
        d.set_item("channel_values", s.channel_values)?;
        d.set_item("items", s.items)?;
        d.set_item("writes", s.writes)?;
        d.set_item("value_bytes", s.value_bytes)?;
        Ok(d)
    }

    // ----- the long-term store ----------------------------------------------------------------

    /// Puts and deletes items in one commit: a list of `(namespace, key, value JSON or None,
    /// ttl_us or None, extra bytes)`.
    fn store_write(&self, py: Python<'_>, puts: Vec<ItemPut>) -> PyResult<()> {
        self.store.get().run(py, |s| {
            s.write(|tx| {
                for (ns, key, value, ttl, extra) in &puts {
                    let labels: Vec<&str> = ns.iter().map(String::as_str).collect();
                    match value {
                        Some(v) => tx.store_put(&labels, key, v, *ttl, extra)?,
                        None => {
                            tx.store_delete(&labels, key)?;
                        }
                    }
                }
                Ok(())
            })
        })
    }

    /// The live item as `(namespace, key, value JSON, created_us, updated_us, extra)`, or
    /// `None`; `refresh` moves its expiry to now + its TTL.
    #[pyo3(signature = (namespace, key, refresh = false))]
    fn store_get<'py>(
        &self,
        py: Python<'py>,
        namespace: Vec<String>,
        key: &str,
        refresh: bool,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let labels: Vec<&str> = namespace.iter().map(String::as_str).collect();
        let item = self.store.get().run(py, |s| {
            if refresh {
                s.write(|tx| tx.store_get_refreshed(&labels, key))
            } else {
                s.read(|r| r.store_get(&labels, key))
            }
        })?;
        item.map(|item| {
            let f = FoundItem {
                namespace: namespace.clone(),
                key: key.to_string(),
                item,
            };
            item_py(py, &f)
        })
        .transpose()
    }

    /// Moves the expiry of each live `(namespace, key)` to now + its TTL, in one transaction
    /// (`refresh_on_read` after a search).
    fn store_refresh(&self, py: Python<'_>, items: Vec<(Vec<String>, String)>) -> PyResult<()> {
        self.store.get().run(py, |s| {
            s.write(|tx| {
                for (namespace, key) in &items {
                    let labels: Vec<&str> = namespace.iter().map(String::as_str).collect();
                    tx.store_get_refreshed(&labels, key)?;
                }
                Ok(())
            })
        })
    }

    /// The live items under `prefix`, in order, as `store_get` tuples.
    #[pyo3(signature = (prefix, offset = 0, limit = None))]
    fn store_items<'py>(
        &self,
        py: Python<'py>,
        prefix: Vec<String>,
        offset: usize,
        limit: Option<usize>,
    ) -> PyResult<Bound<'py, PyList>> {
        let labels: Vec<&str> = prefix.iter().map(String::as_str).collect();
        let found = self
            .store
            .get()
            .run(py, |s| s.read(|r| r.store_items(&labels, offset, limit)))?;
        let out = PyList::empty(py);
        for f in &found {
            out.append(item_py(py, f)?)?;
        }
        Ok(out)
    }

    /// Every namespace with a live item under `prefix`, in order.
    fn store_namespaces(&self, py: Python<'_>, prefix: Vec<String>) -> PyResult<Vec<Vec<String>>> {
        let labels: Vec<&str> = prefix.iter().map(String::as_str).collect();
        self.store
            .get()
            .run(py, |s| s.read(|r| r.store_namespaces(&labels)))
    }

    /// Deletes every expired item; how many.
    fn store_sweep(&self, py: Python<'_>) -> PyResult<u64> {
        self.store.get().run(py, |s| s.write(|tx| tx.store_sweep()))
    }

    /// One bounded sweep step: deletes the expired items among at most `budget` from `start`
    /// (what the previous step returned; `None`: the first), in one short transaction;
    /// `(how many, where the next step starts or None)`.
    #[pyo3(signature = (start = None, budget = 1000))]
    fn store_sweep_step(
        &self,
        py: Python<'_>,
        start: Option<(String, String)>,
        budget: usize,
    ) -> PyResult<(u64, Option<(String, String)>)> {
        let from = start.as_ref().map(|(n, k)| (n.as_str(), k.as_str()));
        self.store
            .get()
            .run(py, |s| s.write(|tx| tx.store_sweep_step(from, budget)))
    }
}
