# shellcheck shell=bash
# Sourced by tests/mcp-node/run.sh and tests/web/run.sh.
# npm_once SRC DIR: installs SRC/package.json's packages as SRC/package-lock.json pins them into
# DIR (its node_modules), again only when either file changed since the last install there.
npm_once() {
  local src="$1" dir="$2" key
  key="$(cat "$src/package.json" "$src/package-lock.json" | sha256sum | cut -d' ' -f1)"
  if [ "$(cat "$dir/.installed" 2>/dev/null)" != "$key" ] || [ ! -d "$dir/node_modules" ]; then
    echo "== npm install into $dir" >&2
    cp "$src/package.json" "$src/package-lock.json" "$dir/"
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
    echo "$key" >"$dir/.installed"
  fi
}
