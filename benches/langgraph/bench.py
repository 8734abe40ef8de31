"""SomnaSaver against LangGraph's SqliteSaver and PostgresSaver (docs/performance.md,
"LangGraph checkpointers").

Each saver stores the checkpoints of one thread whose message list grows by one 1 KB message per
step, as a LangGraph graph with an `add_messages`-style channel does: at step n the checkpoint
holds n messages and a step counter, both channels at a new version. Per step, one `put` and one
`get_tuple` of the latest checkpoint are timed together; the bytes the saver keeps are read
after 100, 500 and 2,000 steps (a file's size on disk; on the server the total size of the
saver's tables).

Run with the venv of python/test.sh (it has somna, langgraph and the two savers):

    target/pyvenv/bin/python benches/langgraph/bench.py [--steps 2000] [--pg URL] [--json OUT]

The savers run in lockstep: one step of each in turn, the order rotated every step.

`--pg` (default: $SOMNA_TEST_PG) adds PostgresSaver and SomnaSaver on that server;
scripts/pg-server.sh run -- ... gives a throwaway one.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
import uuid
from datetime import datetime, timezone

from langgraph.checkpoint.base import empty_checkpoint

MARKS = (100, 500, 2000)


def message(i: int) -> dict:
    """About 1 KB of text that compresses as prose does, not better: random words of random
    letters (PostgreSQL compresses large values, SQLite and somna do not)."""
    rng = random.Random(i)
    words = []
    while sum(len(w) + 1 for w in words) < 1000:
        words.append("".join(rng.choice("etaoinshrdlucmfwypvbgkjqxz") for _ in range(rng.randint(2, 9))))
    body = f"message {i}: " + " ".join(words)
    return {"role": "ai" if i % 2 else "user", "content": body[:1000], "id": f"m-{i}"}


def drive(saver, steps: int, size_of):
    """Runs the steps against `saver`, yielding after each one (so that main() can run every
    saver in lockstep); returns the step times and the sizes at the marks."""
    thread = f"bench-{uuid.uuid4().hex[:8]}"
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    ck = empty_checkpoint()
    msgs: list[dict] = []
    times: list[float] = []
    sizes: dict[int, int] = {}
    version = None
    for n in range(1, steps + 1):
        msgs = msgs + [message(n)]
        version = saver.get_next_version(version, None)
        ck = {
            **ck,
            "id": _next_id(),
            "ts": datetime.now(timezone.utc).isoformat(),
            "channel_values": {"messages": msgs, "step": n},
            "channel_versions": {"messages": version, "step": version},
        }
        meta = {"source": "loop", "step": n, "parents": {}}
        t0 = time.perf_counter()
        config = saver.put(config, ck, meta, {"messages": version, "step": version})
        got = saver.get_tuple(config)
        times.append(time.perf_counter() - t0)
        assert len(got.checkpoint["channel_values"]["messages"]) == n
        if n in MARKS:
            sizes[n] = size_of()
        yield
    return {"times": times, "sizes": sizes}


_counter = [0]


def _next_id() -> str:
    # Time-ordered ids, as LangGraph's uuid6: sortable as strings.
    _counter[0] += 1
    return f"1ef{_counter[0]:013x}-0000-6000-8000-000000000000"


def pct(xs: list[float], p: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(p * len(s)))] * 1e6


def windows(times: list[float]) -> dict:
    out = {}
    lo = 0
    for hi in MARKS:
        part = times[lo:hi]
        if part:
            out[f"{lo + 1}-{hi}"] = {"p50_us": pct(part, 0.5), "p95_us": pct(part, 0.95)}
        lo = hi
    out["all"] = {"p50_us": pct(times, 0.5), "p95_us": pct(times, 0.95)}
    return out


def file_size(path: str):
    def size() -> int:
        total = 0
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                total += os.path.getsize(path + suffix)
        return total

    return size


def pg_size(url: str, schema: str, tables: list[str]):
    import psycopg

    def size() -> int:
        with psycopg.connect(url, autocommit=True) as c:
            c.execute("CHECKPOINT")
            row = c.execute(
                "SELECT coalesce(sum(pg_total_relation_size(format('%%I.%%I', schemaname, tablename)::regclass)), 0)"
                " FROM pg_tables WHERE schemaname = %s AND tablename = ANY(%s)",
                (schema, tables),
            ).fetchone()
            return int(row[0])

    return size


def run_somna_file(steps: int, tmp: str) -> dict:
    from somna.langgraph import SomnaSaver

    path = os.path.join(tmp, "somna.redb")
    with SomnaSaver(path) as saver:
        r = yield from drive(saver, steps, file_size(path))
        r["stats"] = saver.stats()
    return r


def run_sqlite(steps: int, tmp: str) -> dict:
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    path = os.path.join(tmp, "sqlite.db")
    conn = sqlite3.connect(path, check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    r = yield from drive(saver, steps, file_size(path))
    conn.close()
    return r


def run_postgres(steps: int, url: str) -> dict:
    import psycopg
    from langgraph.checkpoint.postgres import PostgresSaver

    schema = f"lgbench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as c:
        c.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in url else "?"
    conn_url = f"{url}{sep}options=-csearch_path%3D{schema}"
    with PostgresSaver.from_conn_string(conn_url) as saver:
        saver.setup()
        tables = ["checkpoints", "checkpoint_blobs", "checkpoint_writes", "checkpoint_migrations"]
        return (yield from drive(saver, steps, pg_size(url, schema, tables)))


def run_somna_server(steps: int, url: str) -> dict:
    from somna.langgraph import SomnaSaver

    schema = f"lgsomna_{uuid.uuid4().hex[:8]}"
    sep = "&" if "?" in url else "?"
    with SomnaSaver(f"{url}{sep}schema={schema}") as saver:
        tables = ["checkpoints", "checkpoint_channels", "checkpoint_items", "checkpoint_writes"]
        r = yield from drive(saver, steps, pg_size(url, schema, tables))
        r["stats"] = saver.stats()
    return r


def lockstep(running: list) -> dict:
    """Runs the savers' steps in turn, one step of each, the order rotated every step: a load
    that comes and goes on a shared machine then falls on every saver alike, where running them
    one after another gave the later ones a different machine."""
    results, seconds, turn = {}, {name: 0.0 for name, _ in running}, 0
    while running:
        order = running[turn % len(running):] + running[:turn % len(running)]
        turn += 1
        for name, gen in order:
            t0 = time.time()
            try:
                next(gen)
            except StopIteration as done:
                r = done.value
                results[name] = {
                    "latency": windows(r["times"]),
                    "bytes": r["sizes"],
                    "stats": r.get("stats"),
                    "seconds": round(seconds[name] + time.time() - t0, 1),
                }
                running = [(n, g) for n, g in running if n != name]
            seconds[name] += time.time() - t0
    return results


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--pg", default=os.environ.get("SOMNA_TEST_PG"))
    ap.add_argument("--only", default="", help="comma-separated: somna,sqlite,postgres,somna-pg")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    only = set(filter(None, args.only.split(",")))
    results = {}
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as tmp:
        plan = [("somna", lambda: run_somna_file(args.steps, tmp)),
                ("sqlite", lambda: run_sqlite(args.steps, tmp))]
        if args.pg:
            plan += [("postgres", lambda: run_postgres(args.steps, args.pg)),
                     ("somna-pg", lambda: run_somna_server(args.steps, args.pg))]
        running = [(name, fn()) for name, fn in plan if not only or name in only]
        results = lockstep(running)
    for name, r in results.items():
        print(name, json.dumps(r), file=sys.stderr, flush=True)
    report = {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "load": os.getloadavg(),
        "python": platform.python_version(),
        "steps": args.steps,
        "results": results,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
