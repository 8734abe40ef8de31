"""Threads, processes and asyncio sharing one store."""

import asyncio
import json
import multiprocessing
import sys
import textwrap
import threading
import time

import pytest

import somna
from conftest import run_python


def _max_gap_while(thread: threading.Thread) -> tuple[float, int]:
    """Spins in Python while `thread` runs; returns the longest stall and the iterations."""
    last = time.perf_counter()
    gap, n = 0.0, 0
    while thread.is_alive():
        now = time.perf_counter()
        gap = max(gap, now - last)
        last = now
        n += 1
    return gap, n


def test_threads_share_one_store(store):
    per, threads = 50, 8
    errors = []

    def work(t):
        try:
            for i in range(per):
                store.note(f"thread {t} note {i}")
                store.session_append("shared", [{"t": t, "i": i}])
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []
    assert store.count() == per * threads
    ids = [m["id"] for m in store.memories()]
    assert ids == list(range(per * threads))  # dense, no id given twice
    items = store.session_items("shared")
    assert len(items) == per * threads
    for t in range(threads):
        assert [x["i"] for x in items if x["t"] == t] == list(range(per))


def test_threads_with_their_own_handles(path):
    def work(t):
        s = somna.Store(path)
        for i in range(30):
            s.note(f"handle {t} note {i}")
        s.close()

    ts = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert somna.Store(path).count() == 120


WRITER = textwrap.dedent(
    """
    import sys, somna
    path, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    s = somna.Store(path)
    for i in range(n):
        s.note(f"{name} {i}")
        s.session_append("shared", [{"w": name, "i": i}])
    print("done")
    """
)


def test_two_processes_write_one_store(path):
    somna.Store(path).close()
    import subprocess

    n = 60
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(path), name, str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        assert out.strip() == "done"
    s = somna.Store(path)
    assert s.count() == 2 * n
    items = s.session_items("shared")
    assert len(items) == 2 * n
    for w in ("a", "b"):
        assert [x["i"] for x in items if x["w"] == w] == list(range(n))
        assert s.recall(f"^#\\d+ \\S+ {w} ")["total"] == n
    assert s.verify()["ok"]


def _child_writes(store, q):
    try:
        for i in range(20):
            store.note(f"child {i}")
        q.put("ok")
    except Exception as e:  # pragma: no cover
        q.put(repr(e))


@pytest.mark.skipif(sys.platform != "linux", reason="fork start method")
def test_handle_inherited_through_fork_is_reopened(path):
    store = somna.Store(path)
    store.note("before fork")
    ctx = multiprocessing.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_child_writes, args=(store, q))
    p.start()
    for i in range(20):
        store.note(f"parent {i}")
    assert q.get(timeout=60) == "ok"
    p.join(60)
    assert p.exitcode == 0
    assert store.count() == 41
    assert store.verify()["ok"]


def test_gil_released_while_waiting_for_the_file(path):
    owner = somna.Store(path, exclusive=True)
    caught = []

    def blocked():
        try:
            somna.Store(path, exclusive=True, busy_timeout=1.0)
        except somna.BusyError as e:
            caught.append(e)

    t = threading.Thread(target=blocked)
    t.start()
    gap, n = _max_gap_while(t)
    t.join()
    owner.close()
    assert len(caught) == 1
    assert gap < 0.3, f"the main thread stalled {gap:.3f}s while another waited in somna"
    assert n > 1000


def test_gil_released_during_long_calls(store):
    one = 0.0
    for _ in range(4):  # grow the log until one recall takes long enough to measure
        store.note_many([f"memory number {i} about things" for i in range(100_000)])
        start = time.perf_counter()
        store.recall("zzz")
        one = time.perf_counter() - start
        if one >= 0.08:
            break
    if one < 0.05:
        pytest.skip(f"recall too fast to measure ({one:.3f}s)")

    t = threading.Thread(target=lambda: [store.recall("zzz") for _ in range(3)])
    t.start()
    gap, n = _max_gap_while(t)
    t.join()
    # Holding the GIL would stall the main thread for a whole recall; allow for scheduling noise.
    assert gap < 0.75 * one, f"main thread stalled {gap:.3f}s during a {one:.3f}s recall"
    assert n > 100


async def test_async_store_does_not_block_the_loop(path):
    s = somna.AsyncStore(path)
    await s.note_many([f"memory number {i} about things" for i in range(100_000)])
    ticks = 0
    stop = asyncio.Event()

    async def ticker():
        nonlocal ticks
        while not stop.is_set():
            ticks += 1
            await asyncio.sleep(0.001)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0.01)
    before = ticks
    start = time.perf_counter()
    r = await s.recall("zzz")
    elapsed = time.perf_counter() - start
    during = ticks - before
    stop.set()
    await task
    assert r["total"] == 0
    # The loop kept ticking (about once a millisecond) during the call.
    assert during >= max(3, int(elapsed * 1000) // 10), (during, elapsed)
    await s.close()


async def test_async_twins_cover_the_verbs(path):
    async with await somna.AsyncStore.open(path) as s:
        assert await s.note("async memory") == 0
        assert "async memory" in await s.wake()
        assert (await s.recall("async"))["total"] == 1
        await s.session_append("a", [{"n": 1}])
        await s.session_save("b", [{"n": 2}])
        got = await asyncio.gather(*(s.session_items("a") for _ in range(10)))
        assert got == [[{"n": 1}]] * 10
        assert await s.session_load("b") == [{"n": 2}]
        assert await s.session_pop("a") == {"n": 1}
        with pytest.raises(somna.InvalidError):
            await s.note("")
        for name in somna._ASYNC_METHODS:
            assert asyncio.iscoroutinefunction(getattr(somna.AsyncStore, name)), name
    assert s.closed


async def test_concurrent_async_appends_all_land(path):
    s = somna.AsyncStore(path)
    await asyncio.gather(*(s.session_append("c", [{"i": i}, {"i": i, "second": True}]) for i in range(40)))
    items = await s.session_items("c")
    assert len(items) == 80
    # Each batch is atomic: its two items are adjacent.
    for a, b in zip(items[::2], items[1::2]):
        assert a["i"] == b["i"] and b.get("second")
