"""The ``somna`` command: the same command line as the ``somna`` binary, run in process.

``pip install somna`` installs this as the ``somna`` console script (``[project.scripts]`` in
pyproject.toml), so that ``pipx install somna`` and ``uvx somna mcp`` work without a Rust
toolchain. ``python -m somna`` runs it too. See docs/python.md.
"""

from __future__ import annotations

import os
import shutil
import sys


def main() -> None:
    """Runs ``somna`` with this process's arguments and exits with its exit code."""
    from somna._somna import _cli

    script = sys.argv[0] if sys.argv and os.path.isfile(sys.argv[0]) else None
    if script is not None and script.endswith("__main__.py"):
        # ``python -m somna``: `Run:` lines name the ``somna`` that PATH finds, if any.
        script = shutil.which("somna")
    argv = ["somna", *sys.argv[1:]]
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(_cli(argv, script))


if __name__ == "__main__":
    main()
