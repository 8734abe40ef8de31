//! The `somna` command in process: `somna._somna._cli(argv, program)` runs the same command line
//! as the `somna` binary ([`somna::cli::main`]), with the interpreter detached, and returns its
//! exit code. `python/somna/_cli.py` is the console script that calls it, so that `pip install
//! somna` (and `pipx install somna`, `uvx somna mcp`) gives the `somna` command.
//!
//! It is meant for that script alone: like the binary, it installs its own panic hook and may end
//! the process (`--help`, `--version`, an argument clap refuses).

use std::ffi::OsString;
use std::path::PathBuf;

use pyo3::prelude::*;

/// Runs the `somna` command line with `argv` (the program's name first) and returns its exit
/// code; `program` is the script that `Run:` lines name as `somna` when PATH finds it there.
#[pyfunction]
#[pyo3(signature = (argv, program=None))]
pub fn _cli(py: Python<'_>, argv: Vec<OsString>, program: Option<PathBuf>) -> u8 {
    py.detach(move || somna::cli::main(argv, program))
}
