//! `engram._engram`: the Python extension over the engram library.
//!
//! Two classes: `Store`, with the memory verbs (note, wake, zoom, recall, pending, nap, forget,
//! export) and the session verbs, all returning plain Python values; and `LangGraphStorage`, the
//! storage of `engram.langgraph` over a `Store`. Every call that touches the
//! file runs with the interpreter detached (the GIL released), so Python threads and the asyncio
//! loop keep running while engram waits for a lock or an fsync. A `Store` is `Sync` and can be
//! shared between threads; handles to the same file in one process share one redb database.
//!
//! Errors are the classes of `engram._errors` (a pure Python module, so that they can also be
//! `ValueError`, `FileNotFoundError`, ... subclasses), each carrying the engine's message.

#![deny(unsafe_code)]

mod checkpoint;
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
fn _engram(m: &Bound<'_, PyModule>) -> PyResult<()> {
    install_panic_hook();
    m.add_class::<PyStore>()?;
    m.add_class::<checkpoint::PyLangGraph>()?;
    m.add("MAX_MESSAGE_BYTES", engram::MAX_MESSAGE_BYTES)?;
    m.add("MAX_SESSION_ID_BYTES", engram::MAX_SESSION_ID_BYTES)?;
    m.add("DEFAULT_SCOPE", engram::DEFAULT_SCOPE)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
