"""Side by side: the reference MCP memory server (`@modelcontextprotocol/server-memory` from npm)
against `somna mcp`, driven by the same official Python client (`mcp` 2.x) and workload.

Not a timed test: a measurement, printed as the Markdown table of docs/mcp.md.

    cd benches/mcp && npm install          # the reference server, into node_modules (gitignored)
    cargo build --release                  # target/release/somna
    target/pyvenv/bin/python benches/mcp/side_by_side.py    # the venv python/test.sh makes

What it measures:
- writes lost when 2 and 8 server processes share one store, 20 writes each, all at once (each
  client spawns its own stdio server, as every MCP host does): the reference server's
  `create_entities` (one entity with one observation) against somna's `note`;
- the median latency of one tool call (a write, and the start-up read) from one client;
- the size of the start-up read, the reference's `read_graph` against somna's `wake`, on a
  store of 10^3 and of 10^4 memories (the reference: one entity with one observation each).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
from mcp import Client, StdioServerParameters

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SOMNA = os.environ.get("SOMNA_BIN", str(ROOT / "target" / "release" / "somna"))
REFERENCE = HERE / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
WRITES = 20


def text_of(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


class Somna:
    name = "somna"

    def __init__(self, folder: Path):
        self.db = folder / "m.redb"
        subprocess.run([SOMNA, "--db", str(self.db), "init"], check=True, capture_output=True)

    def server(self) -> StdioServerParameters:
        return StdioServerParameters(command=SOMNA, args=["--db", str(self.db), "mcp"], env={})

    async def write(self, c, tag: str):
        return await c.call_tool("note", {"text": f"note {tag}"})

    async def startup_read(self, c):
        return await c.call_tool("wake", {})

    def count(self) -> int:
        out = subprocess.run([SOMNA, "--db", str(self.db), "--json", "recall", "^#", "--limit", "1"],
                             check=True, capture_output=True, text=True).stdout
        return json.loads(out)["total"]

    def preload(self, n: int):
        lines = "".join(f"2025-01-01 memory {i}: the user prefers topic {i % 97} done this way\n"
                        for i in range(n))
        subprocess.run([SOMNA, "--db", str(self.db), "import", "-"], input=lines, text=True,
                       check=True, capture_output=True)


class Reference:
    name = "server-memory"

    def __init__(self, folder: Path):
        self.file = folder / "memory.jsonl"

    def server(self) -> StdioServerParameters:
        return StdioServerParameters(command="node", args=[str(REFERENCE)],
                                     env={"MEMORY_FILE_PATH": str(self.file),
                                          "PATH": os.environ.get("PATH", "")})

    async def write(self, c, tag: str):
        entity = {"name": f"note {tag}", "entityType": "note", "observations": [f"note {tag}"]}
        return await c.call_tool("create_entities", {"entities": [entity]})

    async def startup_read(self, c):
        return await c.call_tool("read_graph", {})

    def count(self) -> int:
        if not self.file.exists():
            return 0
        n = 0
        for line in self.file.read_text().splitlines():
            if line.strip() and json.loads(line).get("type") == "entity":
                n += 1
        return n

    def preload(self, n: int):
        with self.file.open("w") as f:
            f.write("\n".join(json.dumps({
                "type": "entity", "name": f"memory {i}", "entityType": "memory",
                "observations": [f"the user prefers topic {i % 97} done this way"]})
                for i in range(n)))


async def lost_writes(kind, processes: int) -> int:
    with tempfile.TemporaryDirectory() as d:
        target = kind(Path(d))

        async def writer(p: int):
            async with Client(target.server()) as c:
                for i in range(WRITES):
                    await target.write(c, f"{p}-{i}")

        async with anyio.create_task_group() as tg:
            for p in range(processes):
                tg.start_soon(writer, p)
        return processes * WRITES - target.count()


async def latencies(kind, calls: int = 50) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as d:
        target = kind(Path(d))
        target.preload(1000)
        writes, reads = [], []
        async with Client(target.server()) as c:
            for i in range(calls):
                t = time.perf_counter()
                await target.write(c, f"lat-{i}")
                writes.append(time.perf_counter() - t)
                t = time.perf_counter()
                await target.startup_read(c)
                reads.append(time.perf_counter() - t)
        return statistics.median(writes) * 1000, statistics.median(reads) * 1000


async def startup_size(kind, n: int) -> int:
    with tempfile.TemporaryDirectory() as d:
        target = kind(Path(d))
        target.preload(n)
        async with Client(target.server()) as c:
            r = await target.startup_read(c)
            size = len(text_of(r).encode())
            if r.structured_content is not None:
                size += len(json.dumps(r.structured_content, ensure_ascii=False).encode())
            return size


async def main():
    if not REFERENCE.exists():
        sys.exit("run `npm install` in benches/mcp first")
    rows = {}
    for kind in (Reference, Somna):
        r = rows[kind.name] = {}
        for p in (2, 8):
            r[f"lost{p}"] = await lost_writes(kind, p)
        r["write_ms"], r["read_ms"] = await latencies(kind)
        for n in (1000, 10_000):
            r[f"size{n}"] = await startup_size(kind, n)
    print(json.dumps(rows, indent=2))
    (HERE / "results.json").write_text(json.dumps(rows, indent=2))
    print("\n| | server-memory | somna |\n|---|---|---|")
    ref, eng = rows["server-memory"], rows["somna"]
    for key, label in [("lost2", f"writes lost, 2 processes x {WRITES}"),
                       ("lost8", f"writes lost, 8 processes x {WRITES}"),
                       ("write_ms", "median write call (ms), 10^3 memories"),
                       ("read_ms", "median start-up read call (ms), 10^3 memories"),
                       ("size1000", "start-up read (bytes, text + structured), 10^3 memories"),
                       ("size10000", "start-up read (bytes, text + structured), 10^4 memories")]:
        fmt = (lambda v: f"{v:.1f}") if key.endswith("_ms") else str
        print(f"| {label} | {fmt(ref[key])} | {fmt(eng[key])} |")


if __name__ == "__main__":
    anyio.run(main)
