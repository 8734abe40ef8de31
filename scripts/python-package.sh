#!/usr/bin/env bash
# The Python package as users install it (docs/python.md, "Installing"): builds the wheel with
# the command the release workflow runs (`maturin build --release --locked -m python/Cargo.toml`)
# and the sdist, installs each into a fresh virtualenv, and there runs `somna --version`,
# `somna init`, a note, a wake and `python -c "import somna"`. The sdist is built from source by
# pip, as on a machine without a wheel for it (it needs a Rust toolchain). Then the README's MCP
# set-ups that start `uvx somna mcp` run against the wheel (python/tests/test_readme_mcp.py, with
# uv pointed at it, offline). Exits non-zero on any failure.
#
# From the repository root: `bash scripts/python-package.sh`. The tools (maturin, uv) live in
# target/package-tools; the artifacts and venvs in target/dist (made anew each run). Every cargo
# build shares target/, so after `cargo test --release` and python/test.sh most of it is cached.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$root/target}"
python="${PYTHON:-python3}"
tools="$root/target/package-tools"
dist="$root/target/dist"
say() { echo "== $(date -u +%T) $*"; }

# Pinned, as python/test.sh pins what it installs.
pins="maturin==1.16.0 uv==0.13.8"
if [ "$(cat "$tools/.pins" 2>/dev/null)" != "$pins" ]; then
  say "installing $pins into $tools"
  rm -rf "$tools"
  "$python" -m venv "$tools"
  # shellcheck disable=SC2086 # the pins are separate words
  "$tools/bin/python" -m pip install --quiet --disable-pip-version-check $pins
  echo "$pins" >"$tools/.pins"
fi

rm -rf "$dist"
mkdir -p "$dist/wheel" "$dist/sdist"
say "the wheel: maturin build --release --locked -m python/Cargo.toml"
"$tools/bin/maturin" build --release --locked -m python/Cargo.toml -o "$dist/wheel" --quiet
say "the sdist: maturin sdist -m python/Cargo.toml"
"$tools/bin/maturin" sdist -m python/Cargo.toml -o "$dist/sdist"
wheel=$(ls "$dist"/wheel/somna-*.whl)
sdist=$(ls "$dist"/sdist/somna-*.tar.gz)
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)

# Installs $2 into a fresh venv $1 and runs the command line and the import there.
smoke() {
  local venv=$1 artifact=$2 home
  say "installing $(basename "$artifact") into a fresh venv"
  "$python" -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$artifact"
  home=$(mktemp -d)
  # A clean environment: the default store under a fresh HOME, only the venv's somna on PATH.
  run() { env -i HOME="$home" PATH="$venv/bin:/usr/bin:/bin" "$@"; }
  local shown
  shown=$(run somna --version)
  [ "${shown%%$'\n'*}" = "somna $version" ] || { echo "somna --version said: $shown" >&2; return 1; }
  run somna init >/dev/null
  run somna note "installed from $(basename "$artifact")" | grep -q '^Saved as #0'
  run somna wake | grep -q "installed from $(basename "$artifact")"
  test -f "$home/.somna/memory.redb"
  run python -c "import somna; assert somna.__version__ == '$version'; print('import somna', somna.__version__)"
  rm -rf "$home"
}
smoke "$dist/venv-wheel" "$wheel"
say "the sdist builds from source"
smoke "$dist/venv-sdist" "$sdist"

# The README's `uvx somna mcp` set-ups, with uv finding the wheel offline.
pyvenv="${SOMNA_PYVENV:-$root/target/pyvenv}"
if [ -x "$pyvenv/bin/pytest" ]; then
  say "the README's uvx set-ups against the wheel"
  SOMNA_WHEEL_DIR="$dist/wheel" PATH="$tools/bin:$PATH" \
    "$pyvenv/bin/pytest" -p no:cacheprovider -q python/tests/test_readme_mcp.py -k uvx -rs
else
  echo "skipped the uvx set-ups: run python/test.sh first (it makes $pyvenv)" >&2
  exit 1
fi
say "done"
