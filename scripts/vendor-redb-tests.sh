#!/usr/bin/env bash
# The vendored redb's own unit tests (vendor/README.md, "Testing the vendored crate"). Its
# manifest, as published, drops the dev-dependencies they need, so they run in a scratch copy
# with those added, pinned by the workspace's Cargo.lock (which already holds them). About 30 s
# of build and 2 s of tests on a 2-core machine.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
scratch="$root/target/vendor-redb-tests"
rm -rf "$scratch/crate"
mkdir -p "$scratch/crate"
cp -r vendor/redb/src vendor/redb/build.rs vendor/redb/Cargo.toml vendor/redb/README.md \
  vendor/redb/LICENSE-APACHE vendor/redb/LICENSE-MIT "$scratch/crate/"
cp Cargo.lock "$scratch/crate/Cargo.lock"
cat >>"$scratch/crate/Cargo.toml" <<'TOML'

[dev-dependencies]
tempfile = "3"
rand = "0.10"

[workspace]
TOML
CARGO_TARGET_DIR="$scratch/target" cargo test --release --lib \
  --manifest-path "$scratch/crate/Cargo.toml" "$@"
