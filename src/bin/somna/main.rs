//! `somna`: the command line over the somna library. It is [`somna::cli::main`] (src/cli/), so
//! that the Python package's `somna` command runs the very same code; see docs/cli.md.

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(somna::cli::main(std::env::args_os(), None))
}
