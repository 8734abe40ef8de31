#!/usr/bin/env bash
# The server tier of the test suite: every backend-independent test (the store, session and
# trust models and properties, the trust scenarios, the CLI command, session, import/export and
# trust tests) run again with their stores on the PostgreSQL server that SOMNA_TEST_PG names,
# then the in-process ones once more with a synthetic serialization failure injected every 7th
# statement (SOMNA_PG_FAULT_EVERY), so that every write path is shown to give the same answers
# when the server makes it run again, and once more with every 13th commit's connection lost
# just before or just after COMMIT reached the server (SOMNA_PG_LOSE_COMMIT), so that an
# ambiguous commit is shown to be resolved (by its commit id) neither twice nor never. (The fault tests of the server, tests/cli/pg_*.rs, run in
# the plain `cargo test` when SOMNA_TEST_PG is set.)
#
# `--plain` runs the first two passes only (the in-process and the CLI tests on the server, no
# injected faults): the README's test command runs them so through PgBouncer
# (scripts/pgbouncer.sh run -- bash scripts/conformance.sh --plain).
#
# Skips when SOMNA_TEST_PG is unset, except under CI, where that is a failure: CI must never
# skip the server tier silently. Start a throwaway server for it with
#   bash scripts/pg-server.sh run --fast -- bash scripts/conformance.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${SOMNA_TEST_PG:-}" ]; then
  if [ -n "${CI:-}" ]; then
    echo "conformance: SOMNA_TEST_PG is unset under CI; the server tier must run (scripts/pg-server.sh run)" >&2
    exit 1
  fi
  echo "conformance: SOMNA_TEST_PG is unset: the server tier is skipped (bash scripts/pg-server.sh run --fast -- bash scripts/conformance.sh runs it)"
  exit 0
fi
plain=0
case ${1:-} in
  --plain) plain=1 ;;
  "") ;;
  *) echo "usage: conformance.sh [--plain]" >&2; exit 2 ;;
esac
export SOMNA_TEST_BACKEND=postgres
api=(store::model store::pending_props store::cover_props store::group_commit session:: trust::)
cli=(commands:: session:: session_processes:: trust:: optmem_import:: hostile:: run_lines:: shell:: web_inspector::)
echo "== $(date -u +%T) conformance: in-process tests on the server"
cargo test --release --test api -- "${api[@]}"
echo "== $(date -u +%T) conformance: CLI tests on the server"
cargo test --release --test cli -- "${cli[@]}"
if [ "$plain" = 1 ]; then
  exit 0
fi
echo "== $(date -u +%T) conformance: in-process tests on the server, a serialization failure every 7th statement"
SOMNA_PG_FAULT_EVERY=7 cargo test --release --test api -- "${api[@]}"
echo "== $(date -u +%T) conformance: in-process tests on the server, every 13th commit's connection lost (before or after COMMIT)"
SOMNA_PG_LOSE_COMMIT=13 cargo test --release --test api -- "${api[@]}"
