//! `somna._somna`: the Python extension over the somna library.
//!
//! Two classes: `Store`, with the memory verbs (note, wake, zoom, recall, pending, nap, forget,
//! export) and the session verbs, all returning plain Python values; and `LangGraphStorage`, the
//! storage of `somna.langgraph` over a `Store`. Every call that touches the
//! file runs with the interpreter detached (the GIL released), so Python threads and the asyncio
//! loop keep running while somna waits for a lock or an fsync. A `Store` is `Sync` and can be
//! shared between threads; handles to the same file in one process share one redb database.
//!
//! `_cli` runs the `somna` command line in process (the package's `somna` command; [`cli`]).
//!
//! Errors are the classes of `somna._errors` (a pure Python module, so that they can also be
//! `ValueError`, `FileNotFoundError`, ... subclasses), each carrying the engine's message.

#![deny(unsafe_code)]

mod checkpoint;
mod cli;
mod convert;
mod error;
mod handles;
mod msgpack;
mod store;

use pyo3::prelude::*;

use handles::install_panic_hook;
use store::PyStore;

/// The session id limit and message size limit of the engine, for the adapters.
#[pymodule]
fn _somna(m: &Bound<'_, PyModule>) -> PyResult<()> {
    install_panic_hook();
    m.add_class::<PyStore>()?;
    m.add_class::<checkpoint::PyLangGraph>()?;
    m.add_function(wrap_pyfunction!(rank_texts, m)?)?;
    m.add_function(wrap_pyfunction!(best_cosine, m)?)?;
    m.add_function(wrap_pyfunction!(cli::_cli, m)?)?;
    m.add("MAX_MESSAGE_BYTES", somna::session::MAX_MESSAGE_BYTES)?;
    m.add("MAX_SESSION_ID_BYTES", somna::session::MAX_SESSION_ID_BYTES)?;
    m.add("DEFAULT_SCOPE", somna::DEFAULT_SCOPE)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}

/// The engine's lexical score of each text for `query` (`somna::search::rank_texts`: BM25 with the
/// coverage boost, statistics of the texts given), computed with the GIL released.
#[pyfunction]
fn rank_texts(py: Python<'_>, query: String, texts: Vec<String>) -> Vec<f64> {
    py.detach(move || {
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        somna::search::rank_texts(&query, &refs)
    })
}

/// The best cosine between `query` and the little-endian `f32`s packed one vector after the
/// other in `packed` (`somna::search::best_cosine`), or `None`.
#[pyfunction]
fn best_cosine(query: Vec<f32>, packed: &[u8]) -> Option<f64> {
    let v: Vec<f32> = packed
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap_or_default()))
        .collect();
    somna::search::best_cosine(&query, &v)
}
