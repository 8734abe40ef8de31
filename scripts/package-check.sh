#!/usr/bin/env bash
# The crates as crates.io would take them (vendor/README.md, "Publishing"). `cargo package`
# packs every crate of the workspace, somna-redb (vendor/redb, somna's path dependency) among
# them, and verifies each by building it from its .crate alone (its library and binaries, not its
# tests), with the versions of Cargo.lock and the not yet published crates served from the other
# .crate files; then scripts/vendor-redb-check.sh checks that vendor/redb is redb 4.6.0 plus
# vendor/patches/. The crates land in target/package-verify/package/. `--allow-dirty` packs the work tree as
# it is (this is a check; publishing itself wants a clean tree).
set -euo pipefail
cd "$(dirname "$0")/.."
# Cargo takes the not yet published somna and somna-redb as registry crates (served from
# target/package-verify/package/tmp-registry), which it believes never change: it unpacks each into
# $CARGO_HOME/registry/src/-<hash of that path>/ once, and reuses their builds by version. A second
# run in the same checkout would verify the members against the first run's somna (it did: a
# function added since was "not found"). So the unpacked copies go first (only local
# registries' folders start with "-"; crates.io's are kept) and the verification builds in a
# target directory of its own, emptied each run (a cold build, as CI's always is).
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/somna-* target/package-verify
cargo package --workspace --locked --allow-dirty --target-dir target/package-verify "$@"
bash scripts/vendor-redb-check.sh
