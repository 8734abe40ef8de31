//! Values between Python and somna: session items through Python's own `json` module, dicts
//! for memories, blocks, summaries, prompts and session info, and the inputs taken from Python.

use std::str::FromStr;
use std::time::Duration;

use crate::error::{invalid, raise, OrPy};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyString};
use somna::session::SessionInfo;
use somna::{Block, Error, Hints, Kind, MergePrompt, NapOutcome, NewMemory, PromptInput, Status};

// ---------------------------------------------------------------------------------------------
// JSON, through Python's own json module (session items are Python objects)

pub(crate) struct Json {
    dumps: Py<PyAny>,
    loads: Py<PyAny>,
}

pub(crate) fn json(py: Python<'_>) -> PyResult<&Json> {
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
pub(crate) fn encode_items(
    py: Python<'_>,
    items: &Bound<'_, PyAny>,
    what: &str,
) -> PyResult<Vec<String>> {
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

pub(crate) fn decode_item<'py>(
    py: Python<'py>,
    text: &str,
    raw: bool,
) -> PyResult<Bound<'py, PyAny>> {
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

pub(crate) fn decode_items<'py>(
    py: Python<'py>,
    texts: &[String],
    raw: bool,
) -> PyResult<Bound<'py, PyList>> {
    let list = PyList::empty(py);
    for t in texts {
        list.append(decode_item(py, t, raw)?)?;
    }
    Ok(list)
}

// ---------------------------------------------------------------------------------------------
// Values to Python

pub(crate) fn memory_dict<'py>(py: Python<'py>, m: &somna::Memory) -> PyResult<Bound<'py, PyDict>> {
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
    d.set_item("line", somna::text::memory_line(m))?;
    Ok(d)
}

pub(crate) fn block_dict<'py>(
    py: Python<'py>,
    kind: &str,
    b: Block,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("type", kind)?;
    d.set_item("block", b.to_string())?;
    d.set_item("lo", b.lo())?;
    d.set_item("hi", b.hi())?;
    Ok(d)
}

pub(crate) fn summary_dict<'py>(
    py: Python<'py>,
    b: Block,
    s: &somna::Summary,
) -> PyResult<Bound<'py, PyDict>> {
    let d = block_dict(py, "summary", b)?;
    d.set_item("text", &s.text)?;
    d.set_item("written_us", s.written_us)?;
    d.set_item("line", somna::text::summary_line(b, s))?;
    Ok(d)
}

pub(crate) fn prompt_dict<'py>(
    py: Python<'py>,
    p: &MergePrompt,
    hints: &Hints,
) -> PyResult<Bound<'py, PyDict>> {
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
    d.set_item("text", p.render_with(hints))?;
    Ok(d)
}

pub(crate) fn session_info_dict<'py>(
    py: Python<'py>,
    i: &SessionInfo,
) -> PyResult<Bound<'py, PyDict>> {
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

pub(crate) fn outcome_name(o: NapOutcome) -> &'static str {
    match o {
        NapOutcome::Saved => "saved",
        NapOutcome::AlreadySettled => "already_settled",
    }
}

// ---------------------------------------------------------------------------------------------
// Values from Python

pub(crate) fn parse_block(py: Python<'_>, s: &str) -> PyResult<Block> {
    Block::from_str(s).map_err(Error::from).py(py)
}

pub(crate) const MEMORY_FIELDS: &[&str] = &[
    "text",
    "kind",
    "status",
    "source",
    "source_uri",
    "observed_us",
    "supersedes",
    "conflicts_with",
    "valid_until_us",
    "vector",
];

/// A memory from a `str` (its text) or a dict with `text` and any envelope fields.
pub(crate) fn new_memory(py: Python<'_>, item: &Bound<'_, PyAny>, i: usize) -> PyResult<NewMemory> {
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
    if let Some(v) = get("vector")? {
        m = m.vector(v.extract()?);
    }
    Ok(m)
}

pub(crate) fn duration(py: Python<'_>, secs: f64, what: &str) -> PyResult<Duration> {
    Duration::try_from_secs_f64(secs).map_err(|_| {
        invalid(
            py,
            format!("{what} must be a finite number of seconds >= 0, not {secs}"),
        )
    })
}
