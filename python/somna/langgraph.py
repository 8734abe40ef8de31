"""somna under LangGraph: a checkpointer (``SomnaSaver``) and a long-term store
(``SomnaStore``) in one transactional file, or on a PostgreSQL server (a somna URL).

```python
from somna.langgraph import SomnaSaver, SomnaStore

graph = builder.compile(checkpointer=SomnaSaver("graph.redb"), store=SomnaStore("graph.redb"))
graph.invoke({"messages": [...]}, {"configurable": {"thread_id": "t-1"}})
```

``SomnaSaver`` is a ``BaseCheckpointSaver`` with the sync and async methods, and the extended
ones (``delete_for_runs``, ``copy_thread``, ``prune``). What it stores is what changed: a
channel's value is written only at a new version, and a list channel (a message history) only
with the items the channel's previous version lacks, so a history that grows by one message per
step costs one message per step. Values are serialized by LangGraph's own serializer
(``self.serde``); somna stores the bytes and never pickles. Any number of threads and processes
may share one store file.

Both close what they opened on leaving ``with`` or ``async with``; ``from_conn_string`` is
their constructor under SqliteSaver's name. An empty file at the path is a new store.

``SomnaStore`` is a ``BaseStore``: namespaces (LangGraph's label rules), ``filter`` (dotted
keys reach into nested objects), ``limit``/``offset``, TTL (``TTLConfig``: ``default_ttl``
minutes, ``refresh_on_read``, ``sweep_interval_minutes`` for ``start_ttl_sweeper``), and search: ranked by
the vectors of an ``index`` config (``embed``, ``dims``, ``fields``) when given, else by a
lexical score of the query's words: somna's own ranking (``somna::rank_texts``, the
tokenizer, stemmer, BM25 and coverage boost of ``Store.search``) over the items the namespace
and filter select, with their statistics.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import logging
import os
import random
import struct
import threading
from collections.abc import AsyncIterator, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from somna import Store, open_store
from somna._adapters import Closing, require
from somna._somna import LangGraphStorage, best_cosine, rank_texts as _rank_texts

require("langgraph.checkpoint.base", "langgraph", "somna.langgraph")
import orjson  # noqa: E402  (a dependency of langgraph, through langgraph-sdk)
from langchain_core.runnables import RunnableConfig  # noqa: E402
from langgraph.checkpoint.base import (  # noqa: E402
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol  # noqa: E402
from langgraph.store.base import (  # noqa: E402
    NOT_PROVIDED,
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

_MICROS_PER_MINUTE = 60_000_000
# How many items one step of a TTL sweep looks at (one short write transaction).
_SWEEP_BUDGET = 1000
_log = logging.getLogger("somna.langgraph")


def _storage(path: Any, store: Store | None, busy_timeout: float) -> tuple[Store, bool]:
    if store is not None:
        return store, False
    return open_store(path, busy_timeout=busy_timeout), True


def _json_default(o: Any) -> Any:
    """For the checkpointer's metadata index only (what ``list(filter=...)`` matches; the
    metadata itself goes through ``serde``): a value JSON cannot hold, as its ``repr``."""
    return repr(o)


def _integral(v: Any) -> Any:
    """``v`` with each float that holds an integer (``1.0``) as that integer, in dicts, lists
    and tuples; booleans untouched."""
    if isinstance(v, float):
        return int(v) if v.is_integer() else v
    if isinstance(v, dict):
        return {k: _integral(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_integral(x) for x in v]
    return v


def _metadata_json(v: Any) -> str:
    """The checkpointer's metadata index, and a ``list`` filter, as JSON with numbers in one
    form (``1.0`` written ``1``): the engine compares JSON values exactly, so that a filter
    ``{"n": 1}`` matches a stored ``1.0`` and ``{"n": 1.0}`` a stored ``1``, as in SqliteSaver,
    InMemorySaver and PostgresSaver. ``True`` stays ``true``, not ``1``."""
    return json.dumps(_integral(v), default=_json_default)


def _value_json(value: Any) -> str:
    """A store item's value as SqliteStore stores it (``orjson.dumps``): a ``datetime``, a
    ``date``, a ``UUID``, a dataclass serialize as orjson serializes them; a value JSON cannot
    hold (a ``set``, an ``object()``, a non-string key) raises ``TypeError``."""
    return orjson.dumps(dict(value) if isinstance(value, Mapping) else value).decode()


class _Closable:
    """``close()`` (idempotent; closes the somna store only when the adapter opened it), the
    context manager for ``with`` and ``async with``, and ``from_conn_string``, over the
    adapter's ``_closing``."""

    _closing: Closing

    @classmethod
    def from_conn_string(cls, conn_string: str | os.PathLike[str], **kwargs: Any):  # type: ignore[no-untyped-def]
        """The adapter on ``conn_string`` (a store file or a ``postgresql://`` URL), for
        ``with`` or ``async with`` (as SqliteSaver's and AsyncSqliteSaver's): the store it
        opens is closed on exit."""
        return cls(conn_string, **kwargs)

    def close(self) -> None:
        """Closes the adapter (and the somna store, when it opened it). Idempotent."""
        self._closing.close()

    def __enter__(self):  # type: ignore[no-untyped-def]
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def __aenter__(self):  # type: ignore[no-untyped-def]
        return self

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.close)


# ---------------------------------------------------------------------------------------------
# The checkpointer


class SomnaSaver(_Closable, BaseCheckpointSaver[str]):
    """A LangGraph checkpointer kept in a somna store.

    ``path``: the store file (created if missing) or a ``postgresql://`` URL, default
    ``$SOMNA_DB`` or ``~/.somna/memory.redb``; or pass an open ``store``. ``serde``: LangGraph's
    serializer (default ``JsonPlusSerializer``). After ``close()`` every method raises
    ``somna.ClosedError``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        store: Store | None = None,
        serde: SerializerProtocol | None = None,
        busy_timeout: float = 10.0,
    ) -> None:
        super().__init__(serde=serde)
        self.store, owns = _storage(path, store, busy_timeout)
        self._lg = LangGraphStorage(self.store)
        self._closing = Closing(self.store, owns, "SomnaSaver")

    # ----- helpers -------------------------------------------------------------------------

    def _encode(self, value: Any) -> Any:
        """A channel value for the engine: a list as a `(type, bytes, True)` triple (stored
        element by element), anything else as `(type, bytes)`."""
        kind, data = self.serde.dumps_typed(value)
        if type(value) is list:
            return (kind, data, True)
        return (kind, data)

    def _tuple(self, e: tuple) -> CheckpointTuple:
        thread, ns, cid, parent, ck, md, values, writes = e
        checkpoint = self.serde.loads_typed(ck)
        checkpoint["channel_values"] = {
            ch: self._decode(v) for ch, v in values if v is not None
        }
        return CheckpointTuple(
            config={"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": cid}},
            checkpoint=checkpoint,
            metadata=self.serde.loads_typed(md),
            parent_config=(
                {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": parent}}
                if parent
                else None
            ),
            pending_writes=[(task, ch, self.serde.loads_typed(v)) for task, ch, v in writes],
        )

    def _decode(self, v: Any) -> Any:
        if isinstance(v, list):
            return [self.serde.loads_typed(t) for t in v]
        return self.serde.loads_typed(v)

    # ----- BaseCheckpointSaver -------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        """The checkpoint of ``config`` (its ``checkpoint_id``, else the thread's latest)."""
        self._closing.check()
        c = config["configurable"]
        e = self._lg.get(str(c["thread_id"]), c.get("checkpoint_ns", ""), get_checkpoint_id(config))
        return self._tuple(e) if e is not None else None

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Checkpoints newest first: of ``config``'s thread (and namespace, when it names one),
        whose metadata matches ``filter``, older than ``before``, at most ``limit``. One range
        scan for the checkpoints and one for their pending writes."""
        self._closing.check()
        c = (config or {}).get("configurable", {})
        thread = c.get("thread_id")
        found = self._lg.list(
            str(thread) if thread is not None else None,
            c.get("checkpoint_ns"),
            c.get("checkpoint_id"),
            get_checkpoint_id(before) if before else None,
            _metadata_json(filter) if filter else None,
            limit,
        )
        for e in found:
            yield self._tuple(e)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        """Stores a checkpoint and the channels of ``new_versions`` (only those)."""
        self._closing.check()
        c = config["configurable"]
        thread, ns = str(c["thread_id"]), c.get("checkpoint_ns", "")
        ck = checkpoint.copy()
        values = ck.pop("channel_values")  # type: ignore[misc]
        changed = [
            (k, str(v), self._encode(values[k]) if k in values else None)
            for k, v in new_versions.items()
        ]
        versions = [(k, str(v)) for k, v in ck["channel_versions"].items()]
        meta = get_checkpoint_metadata(config, metadata)
        run_id = meta.get("run_id")
        self._lg.put(
            thread,
            ns,
            checkpoint["id"],
            c.get("checkpoint_id"),
            self.serde.dumps_typed(ck),
            self.serde.dumps_typed(meta),
            _metadata_json(meta),
            str(run_id) if run_id is not None else None,
            versions,
            changed,
        )
        return {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint["id"]}}

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        """Stores a task's pending writes against the checkpoint of ``config``."""
        self._closing.check()
        c = config["configurable"]
        rows = [
            (task_id, WRITES_IDX_MAP.get(ch, idx), ch, self.serde.dumps_typed(v), task_path)
            for idx, (ch, v) in enumerate(writes)
        ]
        self._lg.put_writes(str(c["thread_id"]), c.get("checkpoint_ns", ""), c["checkpoint_id"], rows)

    def delete_thread(self, thread_id: str) -> None:
        """Deletes every checkpoint and write of a thread."""
        self._closing.check()
        self._lg.delete_thread(str(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Deletes the checkpoints (and their writes) that these runs made."""
        self._closing.check()
        self._lg.delete_for_runs([str(r) for r in run_ids])

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copies every checkpoint, value and write of a thread to another thread."""
        self._closing.check()
        self._lg.copy_thread(str(source_thread_id), str(target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``keep_latest``: keeps the latest checkpoint of each namespace; ``delete``: deletes
        the threads."""
        self._closing.check()
        self._lg.prune([str(t) for t in thread_ids], strategy)

    def get_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> dict[str, Any]:
        """For each channel, its writes on the parent chain of ``config``'s checkpoint, oldest
        first, back to the nearest ancestor holding a value of it (``seed``): LangGraph's
        contract, read by the engine a record, its writes and the sought values per ancestor
        instead of a whole ``get_tuple`` per ancestor."""
        self._closing.check()
        if not channels:
            return {}
        c = config["configurable"]
        rows = self._lg.delta_history(
            str(c["thread_id"]), c.get("checkpoint_ns", ""), get_checkpoint_id(config), list(channels)
        )
        out: dict[str, Any] = {}
        for ch, writes, seed in rows:
            entry: dict[str, Any] = {
                "writes": [(task, wch, self.serde.loads_typed(v)) for task, wch, v in writes]
            }
            if seed is not None:
                entry["seed"] = self._decode(seed[0])
            out[ch] = entry
        return out

    async def aget_delta_channel_history(
        self, *, config: RunnableConfig, channels: Sequence[str]
    ) -> dict[str, Any]:
        return await asyncio.to_thread(
            lambda: self.get_delta_channel_history(config=config, channels=channels)
        )

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        found = await asyncio.to_thread(
            lambda: list(self.list(config, filter=filter, before=before, limit=limit))
        )
        for t in found:
            yield t

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    def get_next_version(self, current: str | int | None, channel: None = None) -> str:
        """Zero-padded, so that versions sort as strings (the engine finds a channel's previous
        version by order)."""
        if current is None:
            n = 0
        elif isinstance(current, int):
            n = current
        else:
            n = int(current.split(".")[0])
        return f"{n + 1:032}.{random.random():016}"

    def stats(self) -> dict[str, int]:
        """Rows and value bytes of the checkpoint tables of the store."""
        self._closing.check()
        return self._lg.stats()


# ---------------------------------------------------------------------------------------------
# The long-term store


def _us_to_dt(us: int) -> datetime:
    return datetime.fromtimestamp(us / 1_000_000, tz=timezone.utc)


def _compare(value: Any, cond: Any) -> bool:
    """LangGraph's filter semantics: equality, or a dict of ``$eq``, ``$ne``, ``$gt``, ``$gte``,
    ``$lt``, ``$lte``."""
    if isinstance(cond, dict) and cond and all(k.startswith("$") for k in cond):
        ops = {
            "$eq": lambda a, b: a == b,
            "$ne": lambda a, b: a != b,
            "$gt": lambda a, b: a is not None and a > b,
            "$gte": lambda a, b: a is not None and a >= b,
            "$lt": lambda a, b: a is not None and a < b,
            "$lte": lambda a, b: a is not None and a <= b,
        }
        for op, arg in cond.items():
            if op not in ops:
                raise ValueError(f"unsupported filter operator {op}")
            if not ops[op](value, arg):
                return False
        return True
    if isinstance(cond, dict):
        return isinstance(value, dict) and all(_compare(_at(value, k), v) for k, v in cond.items())
    return value == cond


def _at(value: Any, key: str) -> Any:
    """The value at a filter's key: the key itself, else its dotted path into nested objects
    (``"user.level"``: ``{"user": {"level": ...}}``), as SqliteStore's ``json_extract`` reads
    it; ``None`` when absent."""
    if not isinstance(value, dict):
        return None
    if key in value or "." not in key:
        return value.get(key)
    head, rest = key.split(".", 1)
    return _at(value.get(head), rest)


def rank_lexical(query: str, texts: list[str]) -> list[float]:
    """The engine's lexical score of each text for ``query`` (``somna::rank_texts``: its
    tokenizer and stemmer, BM25 with the coverage boost, the statistics of the texts given)."""
    return _rank_texts(query, list(texts))


class SomnaStore(_Closable, BaseStore):
    """A LangGraph ``BaseStore`` kept in a somna store.

    ``index``: LangGraph's ``IndexConfig`` (``embed``, ``dims``, ``fields``) for vector search;
    without it, ``search(query=...)`` ranks by the query's words. ``ttl``: a ``TTLConfig``
    (``default_ttl`` in minutes, ``refresh_on_read``, ``sweep_interval_minutes``); expired
    items are never returned, ``sweep()`` deletes them, and ``start_ttl_sweeper()`` sweeps in
    the background until ``stop_ttl_sweeper()`` or ``close()``.
    """

    supports_ttl = True

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        store: Store | None = None,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        busy_timeout: float = 10.0,
    ) -> None:
        self.store, owns = _storage(path, store, busy_timeout)
        self._lg = LangGraphStorage(self.store)
        self._closing = Closing(self.store, owns, "SomnaStore")
        self.ttl_config = ttl
        self._sweeper = _Sweeper()
        self.index_config = index
        self.embeddings = None
        self._fields: list[tuple[str, Any]] = []
        if index:
            from langgraph.store.base.embed import ensure_embeddings, tokenize_path

            self.embeddings = ensure_embeddings(index.get("embed"))
            self._fields = [
                (p, tokenize_path(p) if p != "$" else p) for p in (index.get("fields") or ["$"])
            ]

    # ----- batch ---------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Answers the reads of the batch (gets, searches, namespace lists) from the state
        before it, then writes its puts in one commit, the last put of a key winning: the
        order of InMemoryStore, SqliteStore and PostgresStore. The puts are prepared (values
        serialized, embedded) before any read, so that a put that cannot be stored fails the
        batch before anything happens."""
        self._closing.check()
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        puts = self._puts(ops, self._embed_puts(ops))
        queries = self._embed_queries(ops)
        results = [self._run(op, queries) for op in ops]
        if puts:
            self._lg.store_write(puts)
        return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        return await asyncio.to_thread(self.batch, list(ops))

    def _run(self, op: Op, queries: dict[str, list[float]]) -> Result:
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, SearchOp):
            return self._search(op, queries)
        if isinstance(op, ListNamespacesOp):
            return self._namespaces(op)
        if isinstance(op, PutOp):
            return None
        raise ValueError(f"unknown operation {type(op).__name__}")

    def _refresh(self, flag: bool | None) -> bool:
        if flag is not None:
            return flag
        return bool(self.ttl_config and self.ttl_config.get("refresh_on_read", True))

    def _get(self, op: GetOp) -> Item | None:
        row = self._lg.store_get(list(op.namespace), op.key, self._refresh(op.refresh_ttl))
        return self._item(row) if row is not None else None

    @staticmethod
    def _item(row: tuple) -> Item:
        ns, key, value, created, updated, _extra = row
        return Item(
            value=json.loads(value),
            key=key,
            namespace=tuple(ns),
            created_at=_us_to_dt(created),
            updated_at=_us_to_dt(updated),
        )

    # ----- puts ----------------------------------------------------------------------------

    def _ttl_us(self, op: PutOp) -> int | None:
        """The put's TTL in microseconds; ``None``: never expires. ``BaseStore.put`` has
        already put the default in place of an omitted ttl, so an explicit ``None`` stays
        ``None`` (as in SqliteStore and PostgresStore); only a ``PutOp`` built with
        ``NOT_PROVIDED`` takes the default here."""
        ttl = op.ttl
        if ttl is NOT_PROVIDED:
            ttl = (self.ttl_config or {}).get("default_ttl")
        return int(ttl * _MICROS_PER_MINUTE) if ttl is not None else None

    def _texts(self, op: PutOp) -> list[str]:
        from langgraph.store.base.embed import get_text_at_path, tokenize_path

        if op.value is None or op.index is False or not self.embeddings:
            return []
        fields = (
            [(p, tokenize_path(p)) for p in op.index] if isinstance(op.index, list) else self._fields
        )
        texts: list[str] = []
        for path, tokens in fields:
            texts.extend(get_text_at_path(op.value, tokens))
        return texts

    def _embed_puts(self, ops: list[Op]) -> dict[int, bytes]:
        """The packed vectors (float32, one after the other) of each put that is indexed."""
        todo = {i: self._texts(op) for i, op in enumerate(ops) if isinstance(op, PutOp)}
        todo = {i: t for i, t in todo.items() if t}
        if not todo or self.embeddings is None:
            return {}
        flat = [t for texts in todo.values() for t in texts]
        vectors = iter(self.embeddings.embed_documents(flat))
        out = {}
        for i, texts in todo.items():
            vs = [next(vectors) for _ in texts]
            out[i] = b"".join(struct.pack(f"<{len(v)}f", *v) for v in vs)
        return out

    def _puts(self, ops: list[Op], vectors: dict[int, bytes]) -> list[tuple]:
        puts = []
        for i, op in enumerate(ops):
            if not isinstance(op, PutOp):
                continue
            value = _value_json(op.value) if op.value is not None else None
            ttl = self._ttl_us(op) if op.value is not None else None
            puts.append((list(op.namespace), op.key, value, ttl, vectors.get(i, b"")))
        return puts

    # ----- search --------------------------------------------------------------------------

    def _embed_queries(self, ops: list[Op]) -> dict[str, list[float]]:
        if self.embeddings is None:
            return {}
        qs = {op.query for op in ops if isinstance(op, SearchOp) and op.query}
        return {q: self.embeddings.embed_query(q) for q in qs}

    def _search(self, op: SearchOp, queries: dict[str, list[float]]) -> list[SearchItem]:
        plain = not op.filter and not op.query
        rows = self._lg.store_items(
            list(op.namespace_prefix),
            op.offset if plain else 0,
            op.limit if plain else None,
        )
        found = [(self._item(r), r[5]) for r in rows]
        if op.filter:
            found = [
                (it, x) for it, x in found if all(_compare(_at(it.value, k), v) for k, v in op.filter.items())
            ]
        scores: list[float | None] = [None] * len(found)
        if op.query:
            scores = self._scores(op.query, found, queries)
            # Scored items by score, then those without a vector (as InMemoryStore does).
            order = sorted(
                range(len(found)), key=lambda i: (scores[i] is None, -(scores[i] or 0.0))
            )
            found = [found[i] for i in order]
            scores = [scores[i] for i in order]
        if not plain:
            found = found[op.offset : op.offset + op.limit]
            scores = scores[op.offset : op.offset + op.limit]
        if found and (op.refresh_ttl if op.refresh_ttl is not None else self._refresh(None)):
            self._lg.store_refresh([(list(it.namespace), it.key) for it, _ in found])
        return [
            SearchItem(
                namespace=it.namespace,
                key=it.key,
                value=it.value,
                created_at=it.created_at,
                updated_at=it.updated_at,
                score=s,
            )
            for (it, _), s in zip(found, scores)
        ]

    def _scores(
        self, query: str, found: list[tuple[Item, bytes]], queries: dict[str, list[float]]
    ) -> list[float | None]:
        if query in queries:
            q = queries[query]
            return [best_cosine(q, packed) for _, packed in found]
        texts = [json.dumps(it.value, ensure_ascii=False) for it, _ in found]
        return list(rank_lexical(query, texts))

    # ----- namespaces and TTL --------------------------------------------------------------

    def _namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        prefix: list[str] = []
        conds = op.match_conditions or ()
        for c in conds:
            if c.match_type == "prefix" and "*" not in c.path:
                prefix = list(c.path)
        out: dict[tuple[str, ...], None] = {}  # insertion-ordered, each namespace once
        for ns in self._lg.store_namespaces(prefix):
            t = tuple(ns)
            if not all(_matches(c.match_type, c.path, t) for c in conds):
                continue
            if op.max_depth is not None:
                t = t[: op.max_depth]
            out.setdefault(t, None)
        return list(out)[op.offset : op.offset + op.limit]

    def sweep(self, budget: int = _SWEEP_BUDGET) -> int:
        """Deletes every expired item; how many (LangGraph's TTL sweep). In steps of one
        short transaction each looking at ``budget`` items at most, so that writers wait for
        one step, never for the whole sweep."""
        return self._sweep(budget, lambda: False)

    def _sweep(self, budget: int, stop: Any) -> int:
        """``sweep``, ending between two steps once ``stop()`` (a stopping sweeper)."""
        start, total = None, 0
        while True:
            self._closing.check()
            n, start = self._lg.store_sweep_step(start, budget)
            total += n
            if start is None or stop():
                return total

    sweep_ttl = sweep  # SqliteStore's and PostgresStore's name

    async def asweep(self) -> int:
        return await asyncio.to_thread(self.sweep)

    def start_ttl_sweeper(
        self, sweep_interval_minutes: float | None = None
    ) -> concurrent.futures.Future[None]:
        """Sweeps every ``sweep_interval_minutes`` (else ``TTLConfig.sweep_interval_minutes``,
        else 5) in a background thread until ``stop_ttl_sweeper`` or ``close``, as
        SqliteStore's; without a TTL config, a done future and no thread. Cancelling the
        future stops the sweeper."""
        minutes = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        sweep = lambda: self._sweep(_SWEEP_BUDGET, self._sweeper.stopping)  # noqa: E731
        return self._sweeper.start(sweep, float(minutes) * 60, bool(self.ttl_config))

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stops the sweeper and waits for it (``timeout`` seconds at most; ``None``: until it
        stops); whether it stopped (or was not running)."""
        return self._sweeper.stop(timeout)

    def close(self) -> None:
        """Stops the TTL sweeper, then closes the adapter (and the somna store, when it
        opened it). Idempotent."""
        self._sweeper.stop(None)
        self._closing.close()


class _Sweeper:
    """A store's background TTL sweeper: a daemon thread that runs ``sweep`` every
    ``interval`` seconds until stopped."""

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def stopping(self) -> bool:
        return self._stop.is_set()

    def start(self, sweep: Any, interval: float, enabled: bool) -> concurrent.futures.Future[None]:
        future: concurrent.futures.Future[None] = concurrent.futures.Future()
        if not enabled:
            future.set_result(None)
            return future
        future.add_done_callback(lambda f: self._stop.set() if f.cancelled() else None)
        if self._thread is not None and self._thread.is_alive():
            return future
        self._stop.clear()
        self._thread = threading.Thread(
            target=self._loop, args=(sweep, interval, future), daemon=True, name="somna-ttl-sweeper"
        )
        self._thread.start()
        return future

    def _loop(self, sweep: Any, interval: float, future: concurrent.futures.Future[None]) -> None:
        while not self._stop.wait(interval):
            try:
                n = sweep()
                if n:
                    _log.info("store swept %d expired items", n)
            except Exception:
                if self._stop.is_set():
                    break
                _log.exception("store TTL sweep failed")
        if future.set_running_or_notify_cancel():
            future.set_result(None)

    def stop(self, timeout: float | None) -> bool:
        thread = self._thread
        if thread is None or not thread.is_alive():
            return True
        self._stop.set()
        if thread is not threading.current_thread():
            thread.join(timeout)
        return not thread.is_alive()


def _matches(kind: str, path: Sequence[str], ns: tuple[str, ...]) -> bool:
    """LangGraph's namespace match: ``path`` (with ``*`` wildcards) is a prefix or a suffix."""
    if len(path) > len(ns):
        return False
    part = ns[: len(path)] if kind == "prefix" else ns[len(ns) - len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part))


__all__ = ["SomnaSaver", "SomnaStore", "rank_lexical"]
