#!/usr/bin/env bash
# The crates as crates.io would take them (vendor/README.md, "Publishing"). `cargo package`
# packs every crate of the workspace, somna-redb (vendor/redb, somna's path dependency) among
# them, and verifies each by building it from its .crate alone (its library and binaries, not its
# tests), with the versions of Cargo.lock and the not yet published crates served from the other
# .crate files; then scripts/vendor-redb-check.sh checks that vendor/redb is redb 4.6.0 plus
# vendor/patches/. The crates land in target/package/. `--allow-dirty` packs the work tree as
# it is (this is a check; publishing itself wants a clean tree).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo package --workspace --locked --allow-dirty "$@"
bash scripts/vendor-redb-check.sh
