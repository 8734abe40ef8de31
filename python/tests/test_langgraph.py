"""somna under LangGraph (somna.langgraph): SomnaSaver passes LangGraph's own conformance
suite (every base capability and every extended one it implements); a real StateGraph runs 500
steps, is interrupted, resumed from another process, listed, copied, pruned and deleted; 8
processes run graphs on one store file at once; SomnaStore behaves as a BaseStore (TTL,
filters, namespaces, search with and without an index). On a file store, and on the test
server when SOMNA_TEST_PG names one."""

import asyncio
import json
import os
import sys
import textwrap
import time
import uuid

import pytest

pytest.importorskip("langgraph")

from langgraph.checkpoint.conformance import checkpointer_test, validate  # noqa: E402
from langgraph.store.base import PutOp  # noqa: E402

from conftest import run_python  # noqa: E402
from somna.langgraph import SomnaSaver, SomnaStore, rank_lexical  # noqa: E402

SERVER = os.environ.get("SOMNA_TEST_PG")


def server_url():
    sep = "&" if "?" in SERVER else "?"
    return f"{SERVER}{sep}schema=lg_{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["file", "server"])
def where(request, tmp_path):
    """A store location: a file, or a fresh schema on the test server."""
    if request.param == "server":
        if not SERVER:
            pytest.skip("SOMNA_TEST_PG names no server")
        return server_url()
    return str(tmp_path / "graph.redb")


# ---------------------------------------------------------------------------------------------
# The conformance suite


def test_the_official_conformance_suite_passes(where, capsys):
    @checkpointer_test(name="SomnaSaver")
    async def saver():
        s = SomnaSaver(where)
        yield s
        s.close()

    report = asyncio.run(validate(saver))
    report.print_report()
    out = capsys.readouterr().out
    with capsys.disabled():
        print("\n" + out)
    assert report.passed_all_base(), out
    for name, result in report.results.items():
        assert result.detected, f"{name} is not implemented"
        assert result.passed, f"{name}: {result.failures}"


# ---------------------------------------------------------------------------------------------
# A real graph, interrupted and resumed from another process

GRAPH = textwrap.dedent(
    """
    import operator, sys
    from typing import Annotated, TypedDict
    from langgraph.graph import StateGraph, START, END
    from langgraph.types import interrupt, Command
    from somna.langgraph import SomnaSaver

    class State(TypedDict):
        messages: Annotated[list, operator.add]
        target: int

    def add(state):
        n = len(state["messages"])
        if n == state["target"] // 2:
            interrupt("half way")
        return {"messages": [{"role": "ai", "content": f"message {n} " + "x" * 64}]}

    def more(state):
        return "add" if len(state["messages"]) < state["target"] else END

    def build(where):
        g = StateGraph(State)
        g.add_node("add", add)
        g.add_edge(START, "add")
        g.add_conditional_edges("add", more)
        return g.compile(checkpointer=SomnaSaver(where))
    """
)


def run_graph(where, thread, action, target=500):
    code = GRAPH + textwrap.dedent(
        f"""
        graph = build({where!r})
        config = {{"configurable": {{"thread_id": {thread!r}}}, "recursion_limit": 10000}}
        if {action!r} == "start":
            out = graph.invoke({{"messages": [], "target": {target}}}, config)
        else:
            out = graph.invoke(Command(resume=True), config)
        print(len(out["messages"]))
        """
    )
    p = run_python(code, timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    return int(p.stdout.split()[-1])


def test_a_graph_of_500_steps_is_interrupted_resumed_elsewhere_listed_copied_pruned(where):
    assert run_graph(where, "t-1", "start") == 250
    assert run_graph(where, "t-1", "resume") == 500
    saver = SomnaSaver(where)
    config = {"configurable": {"thread_id": "t-1"}}
    latest = saver.get_tuple(config)
    msgs = latest.checkpoint["channel_values"]["messages"]
    assert [m["content"].split()[1] for m in msgs] == [str(i) for i in range(500)]
    history = list(saver.list(config))
    assert len(history) >= 500
    assert [h.checkpoint["id"] for h in history] == sorted(
        (h.checkpoint["id"] for h in history), reverse=True
    )
    assert len(list(saver.list(config, limit=7))) == 7
    # What was stored is what changed: each message once, not the whole list per step.
    stats = saver.stats()
    assert stats["items"] == 500, stats
    saver.copy_thread("t-1", "t-2")
    copied = saver.get_tuple({"configurable": {"thread_id": "t-2"}})
    assert copied.checkpoint["channel_values"]["messages"] == msgs
    saver.prune(["t-2"])
    assert len(list(saver.list({"configurable": {"thread_id": "t-2"}}))) == 1
    assert saver.get_tuple({"configurable": {"thread_id": "t-2"}}).checkpoint == copied.checkpoint
    saver.delete_thread("t-1")
    saver.delete_thread("t-2")
    assert saver.get_tuple(config) is None
    assert saver.stats()["items"] == 0
    if not where.startswith("postgres"):
        saver.close()
        import somna

        s = somna.Store(where)
        assert s.verify()["ok"], s.verify()


def test_delta_channel_history_equals_langgraphs_own_walk(where):
    from langgraph.checkpoint.base import BaseCheckpointSaver

    assert run_graph(where, "d-1", "start", target=20) == 10
    assert run_graph(where, "d-1", "resume", target=20) == 20
    saver = SomnaSaver(where)
    config = {"configurable": {"thread_id": "d-1"}}
    history = list(saver.list(config))
    written = {w[1] for h in history for w in (h.pending_writes or [])}
    channels = sorted(written | {"messages", "target", "never-written"})
    seen_writes = seen_seed = False
    for h in history:
        mine = saver.get_delta_channel_history(config=h.config, channels=channels)
        theirs = BaseCheckpointSaver.get_delta_channel_history(
            saver, config=h.config, channels=channels
        )
        assert mine == theirs, h.config
        seen_writes |= any(e["writes"] for e in mine.values())
        seen_seed |= any("seed" in e for e in mine.values())
    assert seen_writes and seen_seed  # both halves of the contract were exercised
    latest = asyncio.run(saver.aget_delta_channel_history(config=config, channels=channels))
    assert latest == BaseCheckpointSaver.get_delta_channel_history(
        saver, config=config, channels=channels
    )
    assert saver.get_delta_channel_history(config=config, channels=[]) == {}
    saver.close()


# ---------------------------------------------------------------------------------------------
# Many processes, one file

WORKER = GRAPH + textwrap.dedent(
    """
    where, thread = sys.argv[1], sys.argv[2]
    graph = build(where)
    config = {"configurable": {"thread_id": thread}, "recursion_limit": 1000}
    out = graph.invoke({"messages": [], "target": 30}, config)
    out = graph.invoke(Command(resume=True), config)
    print(len(out["messages"]))
    """
)


def test_eight_processes_run_graphs_on_one_store_file(tmp_path):
    import subprocess

    where = str(tmp_path / "shared.redb")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, where, f"w-{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(8)
    ]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        assert out.split()[-1] == "30"
    saver = SomnaSaver(where)
    for i in range(8):
        config = {"configurable": {"thread_id": f"w-{i}"}}
        history = list(saver.list(config))
        steps = sorted(h.metadata["step"] for h in history)
        # Every step of the run and of its resumption is there: -1 (input), 0..30.
        assert steps[0] == -1 and set(range(0, 31)) <= set(steps), steps
        assert len(saver.get_tuple(config).checkpoint["channel_values"]["messages"]) == 30


# ---------------------------------------------------------------------------------------------
# SomnaStore


def test_store_puts_gets_filters_pages_and_lists_namespaces(where):
    store = SomnaStore(where)
    store.put(("users", "a"), "prefs", {"theme": "dark", "size": 3})
    store.put(("users", "b"), "prefs", {"theme": "light", "size": 5})
    store.put(("users", "b", "deep"), "x", {"theme": "dark", "size": 9})
    store.put(("docs",), "d1", {"text": "rust storage engines"})
    item = store.get(("users", "a"), "prefs")
    assert item.value == {"theme": "dark", "size": 3}
    assert item.namespace == ("users", "a") and item.key == "prefs"
    first = item.created_at
    store.put(("users", "a"), "prefs", {"theme": "blue", "size": 3})
    again = store.get(("users", "a"), "prefs")
    assert again.created_at == first and again.updated_at >= first

    dark = store.search(("users",), filter={"theme": "dark"})
    assert [(i.namespace, i.key) for i in dark] == [(("users", "b", "deep"), "x")]
    big = store.search(("users",), filter={"size": {"$gte": 5}})
    assert len(big) == 2
    assert len(store.search(("users",), limit=2)) == 2
    assert len(store.search(("users",), offset=2)) == 1

    assert store.list_namespaces() == [("docs",), ("users", "a"), ("users", "b"), ("users", "b", "deep")]
    assert store.list_namespaces(prefix=("users",), max_depth=2) == [("users", "a"), ("users", "b")]
    assert store.list_namespaces(suffix=("deep",)) == [("users", "b", "deep")]
    assert store.list_namespaces(prefix=("users", "*")) == [
        ("users", "a"),
        ("users", "b"),
        ("users", "b", "deep"),
    ]
    assert store.list_namespaces(limit=1, offset=1) == [("users", "a")]

    store.delete(("users", "a"), "prefs")
    assert store.get(("users", "a"), "prefs") is None
    results = store.batch(
        [PutOp(("batch",), "k", {"v": 1}), PutOp(("batch",), "k2", {"v": 2})]
    )
    assert results == [None, None]
    assert len(asyncio.run(store.asearch(("batch",)))) == 2
    store.close()


def test_store_ttl_expires_refreshes_and_sweeps(where):
    # Expiry is in wall-clock minutes: generous margins, so that a loaded machine is not a
    # failure (every sleep only makes the expected outcome more certain, except the refresh).
    store = SomnaStore(where, ttl={"default_ttl": 0.05, "refresh_on_read": True})  # 3 s
    store.put(("t",), "short", {"v": 1})
    store.put(("t",), "kept", {"v": 2}, ttl=None)
    store.put(("t",), "forever", {"v": 3}, ttl=60)
    time.sleep(1.5)
    assert store.get(("t",), "short") is not None  # refreshed: expires 3 s from now
    time.sleep(2.0)
    assert store.get(("t",), "short", refresh_ttl=False) is not None
    time.sleep(3.5)
    assert store.get(("t",), "short") is None
    assert store.get(("t",), "kept") is not None  # ttl=None: never expires
    assert store.get(("t",), "forever") is not None
    assert sorted(i.key for i in store.search(("t",))) == ["forever", "kept"]
    assert store.sweep() == 1
    assert store.sweep() == 0
    store.close()


def fake_embed(texts):
    """A deterministic embedding: letter counts."""
    out = []
    for t in texts:
        v = [0.0] * 26
        for c in t.lower():
            if "a" <= c <= "z":
                v[ord(c) - 97] += 1.0
        out.append(v)
    return out


def test_store_search_ranks_by_vectors_with_an_index_and_by_words_without(where):
    indexed = SomnaStore(where, index={"embed": fake_embed, "dims": 26, "fields": ["text"]})
    indexed.put(("docs",), "zzz", {"text": "zzz zzz"})
    indexed.put(("docs",), "abc", {"text": "abc abc"})
    indexed.put(("docs",), "plain", {"text": "abc"}, index=False)
    hits = indexed.search(("docs",), query="aabbcc", limit=2)
    assert hits[0].key == "abc" and hits[0].score > 0.99
    assert all(h.score is not None for h in hits)

    plain = SomnaStore(where)
    plain.put(("notes",), "1", {"text": "the redb storage engine"})
    plain.put(("notes",), "2", {"text": "a recipe for bread"})
    plain.put(("notes",), "3", {"text": "storage of bread"})
    hits = plain.search(("notes",), query="storage engine")
    assert [h.key for h in hits][0] == "1"
    assert hits[0].score > hits[-1].score
    assert rank_lexical("", ["x"]) == [0.0]
    # The engine's tokenizer and stemmer rank it: "running" finds "runs", which a word match
    # would not; a stop word alone does not rank a text that lacks it.
    plain.put(("notes",), "4", {"text": "she runs every morning"})
    hits = plain.search(("notes",), query="Running?")
    assert hits[0].key == "4" and hits[0].score > 0
    assert all(h.score == 0 for h in hits[1:])
    assert rank_lexical("support group", ["a support group", "a group", "x"]) == sorted(
        rank_lexical("support group", ["a support group", "a group", "x"]), reverse=True
    )


def test_an_item_value_round_trips_as_json(where):
    store = SomnaStore(where)
    value = {"nested": {"list": [1, 2.5, "three", None, True]}, "ü": "ñ"}
    store.put(("j",), "k", value)
    assert store.get(("j",), "k").value == value
    assert json.loads(json.dumps(store.get(("j",), "k").value)) == value


def test_store_put_ttl_none_never_expires_under_a_default_ttl(where):
    # BaseStore.put resolves an omitted ttl to the default; an explicit None reaches the
    # adapter as None and means "never expire", as in SqliteStore and PostgresStore.
    store = SomnaStore(where, ttl={"default_ttl": 0.01, "refresh_on_read": False})  # 0.6 s
    store.put(("t",), "default", {"v": 1})
    store.put(("t",), "never", {"v": 2}, ttl=None)
    asyncio.run(store.aput(("t",), "never-async", {"v": 3}, ttl=None))
    time.sleep(2.0)
    assert store.get(("t",), "default") is None
    assert store.get(("t",), "never") is not None
    assert store.get(("t",), "never-async") is not None
    assert store.sweep() == 1
    store.close()


def reference_stores():
    """LangGraph's own stores, each fresh: InMemoryStore and SqliteStore."""
    import sqlite3

    from langgraph.store.memory import InMemoryStore
    from langgraph.store.sqlite import SqliteStore

    sqlite = SqliteStore(sqlite3.connect(":memory:", check_same_thread=False, isolation_level=None))
    sqlite.setup()
    return {"InMemoryStore": InMemoryStore(), "SqliteStore": sqlite}


def project(result):
    """A batch result without its timestamps: items as (namespace, key, value), search hits
    sorted."""
    if isinstance(result, list):
        out = [project(r) for r in result]
        return sorted(out, key=repr) if out and isinstance(out[0], tuple) and len(out[0]) == 3 else out
    if hasattr(result, "value"):
        return (tuple(result.namespace), result.key, result.value)
    return result


def test_store_batch_reads_see_the_state_before_its_writes_as_langgraphs_stores(where):
    from langgraph.store.base import GetOp, ListNamespacesOp, SearchOp

    ops = [
        GetOp(("a",), "k"),
        PutOp(("a",), "k", {"v": 2}),
        PutOp(("b",), "n", {"v": 3}),
        SearchOp(("b",)),
        SearchOp(("a",), filter={"v": 1}),
        ListNamespacesOp(),
        GetOp(("a",), "k"),
        PutOp(("a",), "gone", None),
        GetOp(("a",), "gone"),
        PutOp(("a",), "k", {"v": 4}),  # the last put of a key wins
    ]
    store = SomnaStore(where)
    stores = {"SomnaStore": store, **reference_stores()}
    results, after = {}, {}
    for name, s in stores.items():
        s.put(("a",), "k", {"v": 1})
        s.put(("a",), "gone", {"v": 0})
        results[name] = [project(r) for r in s.batch(ops)]
        after[name] = (project(s.get(("a",), "k")), s.get(("a",), "gone"), project(s.search(("b",))))
    assert results["SomnaStore"][0] == (("a",), "k", {"v": 1})
    assert results["SomnaStore"][3] == []
    assert results["SomnaStore"] == results["InMemoryStore"] == results["SqliteStore"]
    assert after["SomnaStore"] == after["InMemoryStore"] == after["SqliteStore"]
    assert after["SomnaStore"][0] == (("a",), "k", {"v": 4})
    store.close()


def test_store_values_serialize_as_sqlitestore_does_and_non_json_ones_raise(where):
    from datetime import datetime, timezone

    store = SomnaStore(where)
    sqlite = reference_stores()["SqliteStore"]
    value = {"when": datetime(2024, 1, 2, 3, 4, 5, tzinfo=timezone.utc), "n": [1, 2.5]}
    for s in (store, sqlite):
        s.put(("v",), "dt", value)
    assert store.get(("v",), "dt").value == sqlite.get(("v",), "dt").value
    assert store.get(("v",), "dt").value["when"] == "2024-01-02T03:04:05+00:00"
    for s in (store, sqlite):
        with pytest.raises(TypeError):
            s.put(("v",), "set", {"tags": {"a", "b"}})
        with pytest.raises(TypeError):
            s.batch([PutOp(("v",), "ok", {"v": 1}), PutOp(("v",), "bad", {"x": object()})])
        assert s.get(("v",), "set") is None
        assert s.get(("v",), "ok") is None  # nothing of a failed batch is written
    store.close()


def test_metadata_filters_match_numerically_equal_values(where):
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.memory import InMemorySaver

    saver = SomnaSaver(where)
    savers = {"SomnaSaver": saver, "InMemorySaver": InMemorySaver()}
    found = {}
    for name, s in savers.items():
        config = {"configurable": {"thread_id": "f", "checkpoint_ns": ""}}
        for md in ({"n": 1, "tag": "int"}, {"n": 2.0, "tag": "float"}, {"n": 1.5, "tag": "half"}):
            config = s.put(config, empty_checkpoint(), md, {})
        found[name] = {
            repr(f): sorted(t.metadata["tag"] for t in s.list(None, filter=f))
            for f in ({"n": 1.0}, {"n": 1}, {"n": 2}, {"n": 2.0}, {"n": 1.5})
        }
    assert found["SomnaSaver"] == found["InMemorySaver"]
    assert found["SomnaSaver"]["{'n': 1.0}"] == ["int"]
    assert found["SomnaSaver"]["{'n': 2}"] == ["float"]
    # A boolean is not a number in a metadata filter (as in PostgresSaver's jsonb).
    saver.put(
        {"configurable": {"thread_id": "b", "checkpoint_ns": ""}}, empty_checkpoint(), {"flag": True}, {}
    )
    assert [t.metadata for t in saver.list(None, filter={"flag": 1})] == []
    assert [t.metadata["flag"] for t in saver.list(None, filter={"flag": True})] == [True]

    store = SomnaStore(where)
    store.put(("m",), "int", {"n": 1})
    store.put(("m",), "float", {"n": 2.0})
    assert [i.key for i in store.search(("m",), filter={"n": 1.0})] == ["int"]
    assert [i.key for i in store.search(("m",), filter={"n": 2})] == ["float"]
    store.close()
    saver.close()


# ---------------------------------------------------------------------------------------------
# LangGraph in full (issue 53, point 5)


def test_savers_and_stores_open_with_from_conn_string_and_close_on_async_with_exit(where):
    import somna
    from langgraph.checkpoint.base import empty_checkpoint

    config = {"configurable": {"thread_id": "w", "checkpoint_ns": ""}}

    async def main():
        async with SomnaSaver.from_conn_string(where) as saver:
            cfg = await saver.aput(config, empty_checkpoint(), {"step": 1}, {})
            assert (await saver.aget_tuple(cfg)).metadata["step"] == 1
        with pytest.raises(somna.ClosedError):
            saver.get_tuple(cfg)
        async with SomnaStore.from_conn_string(where, ttl={"default_ttl": 60}) as store:
            await store.aput(("a",), "k", {"v": 1})
            store.start_ttl_sweeper(0.01)
        assert store.stop_ttl_sweeper(0) is True  # stopped when the store closed
        with pytest.raises(somna.ClosedError):
            await store.aget(("a",), "k")
        return cfg

    cfg = asyncio.run(main())
    with SomnaSaver.from_conn_string(where) as saver:
        assert saver.get_tuple(cfg).metadata["step"] == 1
    with SomnaStore.from_conn_string(where) as store:
        assert store.get(("a",), "k").value == {"v": 1}
    with pytest.raises(somna.ClosedError):
        store.get(("a",), "k")


def test_the_ttl_sweeper_sweeps_at_its_interval_until_stopped(where):
    # sweep_interval_minutes 0.01: every 0.6 s; items live 0.3 s. What the sweeper took, a
    # manual sweep no longer finds; once it is stopped, a manual sweep finds everything.
    ttl = {"default_ttl": 0.005, "refresh_on_read": False, "sweep_interval_minutes": 0.01}
    store = SomnaStore(where, ttl=ttl)
    assert SomnaStore(where).start_ttl_sweeper().done()  # no TTL config: nothing to sweep
    store.put(("t",), "a", {"v": 1})
    store.put(("t",), "b", {"v": 2})
    store.put(("t",), "kept", {"v": 3}, ttl=None)
    future = store.start_ttl_sweeper()
    assert not future.done()
    time.sleep(4.0)
    assert store.sweep() == 0  # the sweeper took both
    assert store.get(("t",), "kept") is not None
    assert store.stop_ttl_sweeper(timeout=10) is True
    assert future.done()
    store.put(("t",), "c", {"v": 4})
    store.put(("t",), "d", {"v": 5})
    time.sleep(2.0)
    assert store.sweep_ttl() == 2  # stopped: nothing swept them
    store.close()


def test_a_sweep_deletes_in_bounded_steps(where):
    # Key order: ("s", "0") .. ("s", "4"), then ("z",). Each step is one transaction that
    # looks at 2 items at most and says where the next one starts.
    store = SomnaStore(where, ttl={"default_ttl": 0.001, "refresh_on_read": False})  # 60 ms
    for i in range(5):
        store.put(("s", str(i)), "k", {"v": i})
    store.put(("z",), "kept", {"v": 0}, ttl=None)
    time.sleep(0.5)
    steps, start = [], None
    while True:
        n, start = store._lg.store_sweep_step(start, 2)
        steps.append(n)
        if start is None:
            break
    assert steps == [2, 2, 1]
    for i in range(3):
        store.put(("s", str(i)), "k", {"v": i})
    time.sleep(0.5)
    assert store.sweep(budget=1) == 3
    assert store.get(("z",), "kept") is not None
    store.close()


def _checkpoint_tags(saver, filters):
    from langgraph.checkpoint.base import empty_checkpoint

    config = {"configurable": {"thread_id": "d", "checkpoint_ns": ""}}
    for md in (
        {"user": {"access-level": "admin", "n": 1}, "tag": "a"},
        {"user": {"access-level": "guest", "n": 2.0}, "tag": "b"},
        {"user": "flat", "tag": "c"},
    ):
        config = saver.put(config, empty_checkpoint(), md, {})
    return [sorted(t.metadata["tag"] for t in saver.list(None, filter=f)) for f in filters]


def test_dotted_filters_reach_into_nested_metadata_and_values_as_sqlite_does(where):
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    filters = [
        {"user.access-level": "admin"},
        {"user.n": 1.0},
        {"user.n": 2},
        {"user.access-level": "guest", "tag": "b"},
        {"user.missing": "x"},
        {"user": {"access-level": "admin", "n": 1}},
    ]
    saver = SomnaSaver(where)
    reference = SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))
    found = _checkpoint_tags(saver, filters)
    assert found == _checkpoint_tags(reference, filters)
    assert found[:3] == [["a"], ["a"], ["b"]]
    saver.close()

    store = SomnaStore(where)
    sqlite = reference_stores()["SqliteStore"]
    item_filters = [
        {"user.access-level": "admin"},
        {"user.n": {"$gte": 2}},
        {"user.n": 1.0},
        {"user.access-level": {"$ne": "admin"}},
    ]
    hits = {}
    for name, s in (("somna", store), ("sqlite", sqlite)):
        s.put(("u",), "a", {"user": {"access-level": "admin", "n": 1}})
        s.put(("u",), "b", {"user": {"access-level": "guest", "n": 3}})
        hits[name] = [sorted(i.key for i in s.search(("u",), filter=f)) for f in item_filters]
    assert hits["somna"] == hits["sqlite"]
    assert hits["somna"][:3] == [["a"], ["b"], ["a"]]
    store.close()


def test_namespace_labels_follow_langgraphs_rules(where):
    from langgraph.store.base import InvalidNamespaceError

    odd = [("a\n", "x"), ("a",), ("a", "b"), ("a\x1f", "c"), ("a\x1e",), ("tab\tlabel", "\x1f\x1e")]
    store = SomnaStore(where)
    stores = {"SomnaStore": store, **reference_stores()}
    seen = {}
    for name, s in stores.items():
        for ns in odd:
            s.put(ns, "k", {"ns": list(ns)})
        seen[name] = (
            [project(s.get(ns, "k")) for ns in odd],
            project(s.search(("a",))),
            project(s.search(("a\n",))),
            sorted(s.list_namespaces()),
            sorted(s.list_namespaces(prefix=("a",))),
        )
        for bad in (("a.b",), ("a", ""), ("nul\x00",)):
            with pytest.raises(InvalidNamespaceError):
                s.put(bad, "k", {"v": 1})
            if name != "InMemoryStore":  # which does not check the ops given to batch
                with pytest.raises(InvalidNamespaceError):
                    s.batch([PutOp(bad, "k", {"v": 1})])
    assert seen["SomnaStore"] == seen["SqliteStore"] == seen["InMemoryStore"]
    assert seen["SomnaStore"][0] == [(ns, "k", {"ns": list(ns)}) for ns in odd]
    assert sorted(seen["SomnaStore"][3]) == sorted(odd)
    store.close()


def test_an_empty_file_at_the_path_is_adopted_as_a_new_store(tmp_path):
    from langgraph.checkpoint.base import empty_checkpoint

    for name, make in (("saver", SomnaSaver), ("store", SomnaStore)):
        path = tmp_path / f"{name}.redb"
        path.touch()
        with make(path) as adapter:
            if name == "saver":
                config = {"configurable": {"thread_id": "e", "checkpoint_ns": ""}}
                cfg = adapter.put(config, empty_checkpoint(), {}, {})
                assert adapter.get_tuple(cfg) is not None
            else:
                adapter.put(("e",), "k", {"v": 1})
                assert adapter.get(("e",), "k").value == {"v": 1}
        assert path.stat().st_size > 0
