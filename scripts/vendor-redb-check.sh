#!/usr/bin/env bash
# vendor/redb is redb 4.6.0 as published on crates.io plus vendor/patches/*.patch, applied in the
# order of their names (vendor/README.md). This fetches pristine redb 4.6.0 through cargo (from
# crates.io, checked against the registry's checksum), copies the files vendor/redb keeps into a
# scratch directory under target/, applies every patch there with `patch -p1` (no fuzz), and
# fails on any difference from vendor/redb. A few seconds once the crate is in cargo's cache.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
scratch="$root/target/vendor-redb-check"
rm -rf "$scratch"
mkdir -p "$scratch/fetch/src" "$scratch/redb"

# A throwaway crate whose only dependency is the release, so that cargo downloads and unpacks it.
cat >"$scratch/fetch/Cargo.toml" <<'TOML'
[package]
name = "vendor-redb-fetch"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
redb = "=4.6.0"

[workspace]
TOML
: >"$scratch/fetch/src/lib.rs"
cargo fetch --quiet --manifest-path "$scratch/fetch/Cargo.toml"
manifest=$(cargo metadata --format-version 1 --manifest-path "$scratch/fetch/Cargo.toml" |
  grep -o '"manifest_path":"[^"]*/redb-4\.6\.0/Cargo\.toml"' | head -n 1 | cut -d'"' -f4)
pristine=$(dirname "$manifest")
if [ -z "$manifest" ] || [ ! -f "$pristine/src/lib.rs" ]; then
  echo "vendor-redb-check: cargo did not unpack redb 4.6.0" >&2
  exit 1
fi

# The files vendor/redb keeps (the release's examples, tests, docs and changelog are not copied).
cp -r "$pristine/Cargo.toml" "$pristine/build.rs" "$pristine/src" "$pristine/README.md" \
  "$pristine/LICENSE-APACHE" "$pristine/LICENSE-MIT" "$scratch/redb/"
patches=(vendor/patches/*.patch)
if [ ! -f "${patches[0]}" ]; then
  echo "vendor-redb-check: no patches in vendor/patches/" >&2
  exit 1
fi
for p in "${patches[@]}"; do
  if ! patch -p1 -F0 -N -s --no-backup-if-mismatch -d "$scratch/redb" <"$p"; then
    echo "vendor-redb-check: $p does not apply onto redb 4.6.0 and the patches before it" >&2
    exit 1
  fi
done
if ! diff -r "$scratch/redb" vendor/redb; then
  echo "vendor-redb-check: vendor/redb differs from redb 4.6.0 plus vendor/patches/ (above)" >&2
  exit 1
fi
echo "vendor-redb-check: vendor/redb is redb 4.6.0 plus ${#patches[@]} patches"
