#!/usr/bin/env bash
# The MCP clients nobody here wrote, from npm (issue 22; docs/mcp.md, "Tests").
#
#   bash tests/mcp-node/run.sh clients SOMNA_BINARY STORE   # the TypeScript SDK's client
#   bash tests/mcp-node/run.sh conformance SOMNA_BINARY     # the official conformance suite
#
# Installs package-lock.json's pinned packages (the SDK, the conformance suite, and Node 22 as the
# npm package `node`, which the suite needs) into target/mcp-node (or $SOMNA_NODE_DIR) once,
# again only when package.json or the lock changes, and runs the script there: failing_calls.mjs with the
# machine's node (20 or later), conformance.mjs with the installed Node 22. Needs node and npm
# on PATH; the callers skip without them (tests/cli/mcp_node.rs, .ci/run).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
dir="${SOMNA_NODE_DIR:-$root/target/mcp-node}"
mkdir -p "$dir"
exec 9>"$dir/.lock"
flock 9
# shellcheck source=../../scripts/npm-once.sh
source "$root/scripts/npm-once.sh"
npm_once "$here" "$dir"
cp "$here"/*.mjs "$here"/*.yml "$dir/"
case "${1:-}" in
  clients) exec node "$dir/failing_calls.mjs" "${@:2}" ;;
  conformance) exec "$dir/node_modules/.bin/node" "$dir/conformance.mjs" "${@:2}" ;;
  *) echo "usage: $0 clients SOMNA_BINARY STORE | conformance SOMNA_BINARY" >&2; exit 2 ;;
esac
