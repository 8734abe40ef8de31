//! Engine errors as the Python exceptions of `somna._errors`, keeping the engine's message.

use pyo3::prelude::*;
use pyo3::types::PyType;
use pyo3::IntoPyObjectExt;
use somna::Error;

// ---------------------------------------------------------------------------------------------
// Errors

/// Raises the `somna._errors` class `name` with `msg`.
pub(crate) fn raise(py: Python<'_>, name: &str, msg: String) -> PyErr {
    match error_class(py, name) {
        Ok(ty) => PyErr::from_type(ty, msg),
        Err(e) => e,
    }
}

pub(crate) fn error_class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyType>> {
    Ok(py
        .import("somna._errors")?
        .getattr(name)?
        .cast_into::<PyType>()?)
}

/// Maps an engine error to its Python exception, keeping the engine's message.
pub(crate) fn to_py(py: Python<'_>, e: Error) -> PyErr {
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
        Error::Storage(_)
        | Error::Io(_)
        | Error::Server(_)
        | Error::Ambiguous(_)
        | Error::Embedder(_) => raise(py, "StorageError", msg),
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
pub(crate) fn with_attrs(
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

pub(crate) trait OrPy<T> {
    fn py(self, py: Python<'_>) -> PyResult<T>;
}

impl<T> OrPy<T> for Result<T, Error> {
    fn py(self, py: Python<'_>) -> PyResult<T> {
        self.map_err(|e| to_py(py, e))
    }
}

pub(crate) fn invalid(py: Python<'_>, msg: impl Into<String>) -> PyErr {
    raise(py, "InvalidError", msg.into())
}

/// What a call on a closed `Store` raises: `somna.ClosedError`, a `RuntimeError` (the
/// input was not at fault, so not an `InvalidError`).
pub(crate) fn closed(py: Python<'_>) -> PyErr {
    raise(py, "ClosedError", "the store is closed".into())
}
