import os
import sys

import pytest

import somna

# The suite must exercise the installed package (with its compiled extension), never the
# source folder next to this one.
assert os.path.basename(os.path.dirname(somna.__file__)) == "somna"
assert hasattr(somna, "Store"), somna.__file__


@pytest.fixture
def path(tmp_path):
    """A store path that does not exist yet."""
    return tmp_path / "memory.redb"


@pytest.fixture
def store(path):
    s = somna.Store(path)
    yield s
    s.close()


@pytest.fixture(autouse=True)
def _no_default_store(tmp_path, monkeypatch):
    """Adapters default to $SOMNA_DB: never let a test touch ~/.somna."""
    monkeypatch.setenv("SOMNA_DB", str(tmp_path / "default.redb"))
    monkeypatch.delenv("OPTILLM_MEMORY_FILE", raising=False)


def run_python(code: str, *args: str, timeout: float = 120):
    """Runs `code` in a fresh interpreter of this venv; returns the completed process."""
    import subprocess

    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
