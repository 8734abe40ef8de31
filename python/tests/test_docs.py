"""Every example in docs/python.md runs (except those marked as needing an API key)."""

import os
import re
import sys
import subprocess
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "python.md"


def examples():
    text = DOC.read_text(encoding="utf-8")
    out = []
    for m in re.finditer(r"(<!-- needs an API key -->\n)?```python\n(.*?)```", text, re.S):
        if m.group(1):
            continue
        line = text[: m.start()].count("\n") + 1
        out.append(pytest.param(m.group(2), id=f"line{line}"))
    return out


@pytest.mark.skipif(not DOC.is_file(), reason="docs/python.md is not beside this checkout")
@pytest.mark.parametrize("code", examples())
def test_example_runs(code, tmp_path):
    code = code.replace("/tmp/somna-doc", str(tmp_path))
    env = dict(os.environ, SOMNA_DB=str(tmp_path / "default.redb"))
    env.pop("OPTILLM_MEMORY_FILE", None)
    p = subprocess.run(
        [sys.executable, "-W", "ignore::DeprecationWarning", "-c", code],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr
