"""The README's MCP client set-ups start a working server, exactly as written.

Every configuration in the README's "Attach it to a coding agent (MCP)" section (the `claude mcp
add ... -- COMMAND` lines, the JSON of Claude Code, Claude Desktop, Cursor and VS Code, Codex's
TOML) is read from README.md and started with the official MCP client (`mcp`), its command and
arguments unchanged. `somna` is the console script this package installs (the command line run
in process by the extension), found on PATH as a host would find it. `uvx somna mcp` needs the
package on an index: with `SOMNA_WHEEL_DIR` naming a folder that holds a built wheel
(scripts/python-package.sh sets it) and `uv` installed, uv is pointed at that folder, offline;
otherwise those set-ups are skipped, and say so. Each server initializes, lists the memory tools
and answers `note` and `wake` on a fresh store.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SCRIPTS = Path(sys.executable).parent

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend():
    return "asyncio"


def mcp_section() -> str:
    text = README.read_text(encoding="utf-8")
    start = text.index("## Attach it to a coding agent (MCP)")
    end = text.index("\n## ", start + 1)
    return text[start:end]


def setups() -> list:
    """(client, command, args) for every set-up the section shows."""
    section = mcp_section()
    out = []
    for block in re.findall(r"```json\n(.*?)```", section, re.S):
        config = json.loads(block)
        for key in ("mcpServers", "servers"):
            for name, s in config.get(key, {}).items():
                out.append((f"json {key}.{name}", s["command"], s.get("args", [])))
    import tomllib  # Python 3.11+, which the test environment has

    for block in re.findall(r"```toml\n(.*?)```", section, re.S):
        for name, s in tomllib.loads(block).get("mcp_servers", {}).items():
            out.append((f"toml {name}", s["command"], s.get("args", [])))
    for block in re.findall(r"```sh\n(.*?)```", section, re.S):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if words[:3] == ["claude", "mcp", "add"] and "--" in words:
                cmd = words[words.index("--") + 1 :]
                out.append((" ".join(words[:-len(cmd) - 1]), cmd[0], cmd[1:]))
    return out


SETUPS = setups()


def test_the_section_shows_every_client():
    clients = {c for c, _, _ in SETUPS}
    commands = {cmd for _, cmd, _ in SETUPS}
    assert len(SETUPS) >= 8, SETUPS
    assert any(c.startswith("claude mcp add") for c in clients)
    assert any(c.startswith("toml") for c in clients)
    assert any(c == "json servers.somna" for c in clients)  # VS Code
    assert commands == {"somna", "uvx"}, commands


def environment(store: Path, tmp: Path, command: str) -> dict[str, str]:
    env = {
        "PATH": f"{SCRIPTS}{os.pathsep}{os.environ.get('PATH', '')}",
        "HOME": str(tmp),
        "SOMNA_DB": str(store),
    }
    if command == "uvx":
        wheels = os.environ.get("SOMNA_WHEEL_DIR")
        uv = shutil.which("uvx", path=env["PATH"])
        if not wheels or not uv:
            pytest.skip("uvx set-ups need uv and SOMNA_WHEEL_DIR (scripts/python-package.sh)")
        env.update(
            UV_FIND_LINKS=wheels,
            UV_OFFLINE="1",
            UV_CACHE_DIR=str(tmp / "uv-cache"),
            UV_TOOL_DIR=str(tmp / "uv-tools"),
            UV_PYTHON=sys.executable,
        )
    elif shutil.which("somna", path=env["PATH"]) != str(SCRIPTS / "somna"):
        pytest.skip("the package's somna script is not installed beside this interpreter")
    return env


@pytest.mark.parametrize(
    "client,command,args", SETUPS, ids=[f"{c} -> {cmd}" for c, cmd, _ in SETUPS]
)
async def test_the_setup_serves_the_store(client, command, args, tmp_path):
    store = tmp_path / "memory.redb"
    env = environment(store, tmp_path, command)
    somna = SCRIPTS / "somna"
    if not somna.is_file():
        pytest.skip("the package's somna script is not installed beside this interpreter")
    subprocess.run([str(somna), "--db", str(store), "init"], check=True, capture_output=True)
    params = StdioServerParameters(command=command, args=list(args), env=env)
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            init = await s.initialize()
            assert init.server_info.name == "somna"
            names = [t.name for t in (await s.list_tools()).tools]
            assert "wake" in names and "search" in names
            if "--read-only" in args:
                assert "note" not in names
                return
            r = await s.call_tool("note", {"text": f"set up as {client}"})
            assert not r.is_error, r.content[0].text
            woke = await s.call_tool("wake", {})
            assert not woke.is_error, woke.content[0].text
            assert f"set up as {client}" in woke.content[0].text
    assert store.is_file()
