#!/usr/bin/env bash
# The web inspector in a real browser (issue 26; docs/inspector.md, "Tests").
#
#   bash tests/web/run.sh SOMNA_BINARY [OUTPUT_DIR]
#
# Drives Debian's chromium (/usr/bin/chromium; `.ci/run` installs it when run as root) headless
# with Playwright for Python, which is installed into target/web-venv (or $SOMNA_WEB_VENV)
# once; axe-core comes from npm (package-lock.json) into target/web-node (or $SOMNA_WEB_NODE).
# Nothing downloads a browser (never `playwright install`). The screenshots go to OUTPUT_DIR
# (default target/web-shots). Skips, exit 0, without chromium, node or npm (fails instead under CI).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/../.." && pwd)"
bin="${1:?usage: $0 SOMNA_BINARY [OUTPUT_DIR]}"
out="${2:-$root/target/web-shots}"
chromium="${SOMNA_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$chromium" ] || ! command -v npm >/dev/null; then
  if [ -n "${CI:-}" ]; then
    echo "no $chromium or no npm under CI: the browser test must run (.ci/run installs chromium as root)" >&2
    exit 1
  fi
  echo "skipped: no $chromium or no npm" >&2
  exit 0
fi
venv="${SOMNA_WEB_VENV:-$root/target/web-venv}"
node_dir="${SOMNA_WEB_NODE:-$root/target/web-node}"
mkdir -p "$node_dir"
exec 9>"$node_dir/.lock"
flock 9
if [ ! -x "$venv/bin/python" ] || ! "$venv/bin/python" -c 'import playwright' 2>/dev/null; then
  echo "== Playwright for Python into $venv" >&2
  python3 -m venv "$venv"
  "$venv/bin/pip" --disable-pip-version-check install --quiet playwright==1.65.2
fi
# shellcheck source=../../scripts/npm-once.sh
source "$root/scripts/npm-once.sh"
npm_once "$here" "$node_dir"
exec "$venv/bin/python" "$here/test_web.py" "$bin" "$out" "$chromium" \
  "$node_dir/node_modules/axe-core/axe.min.js"
