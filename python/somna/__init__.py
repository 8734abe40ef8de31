"""somna: agent memory and conversation sessions in one transactional file.

``somna.Store(path)`` opens the store at ``path``, creating it when the file does not exist.
Its methods release the GIL while they work and are safe to call from many threads;
``somna.AsyncStore`` has the same methods as coroutines that run in a worker thread, so the
event loop never blocks. Adapters for agent frameworks live in submodules:

- ``somna.pure_agents.SomnaMemory``: a ``pure_agents.Memory``
- ``somna.openai_agents.SomnaSession``: an OpenAI Agents SDK ``Session``
- ``somna.langchain.SomnaChatMessageHistory``: a LangChain ``BaseChatMessageHistory``
- ``somna.langgraph.SomnaSaver`` and ``SomnaStore``: LangGraph's checkpointer and store
- ``somna.optillm``: a persistent store for optillm's memory plugin
- ``somna.anthropic.SomnaMemoryTool``: Claude's memory tool (Anthropic SDK), every edit kept

See docs/python.md.
"""

from __future__ import annotations

import asyncio
import functools
import os
from pathlib import Path
from typing import Any

from somna._somna import (
    DEFAULT_SCOPE,
    MAX_MESSAGE_BYTES,
    MAX_SESSION_ID_BYTES,
    Store,
    __version__,
)
from somna._errors import (
    BusyError,
    ClosedError,
    ConflictError,
    CorruptError,
    DeniedError,
    Error,
    InternalError,
    InvalidError,
    NotFoundError,
    NotSerializableError,
    OutOfRangeError,
    StorageError,
    UnsupportedError,
    WrongBlockError,
)


def default_path() -> Path:
    """The store the ``somna`` CLI uses: ``$SOMNA_DB``, else ``~/.somna/memory.redb``."""
    env = os.environ.get("SOMNA_DB")
    if env:
        return Path(env)
    return Path.home() / ".somna" / "memory.redb"


def open_store(path: str | os.PathLike[str] | Store | None = None, **options: Any) -> Store:
    """A ``Store`` for ``path`` (default: :func:`default_path`); a ``Store`` passes through."""
    if isinstance(path, Store):
        return path
    return Store(default_path() if path is None else path, **options)


# Every Store method that touches the file, in the order of the Rust class.
_ASYNC_METHODS = (
    "note",
    "note_many",
    "count",
    "memory",
    "memories",
    "scopes",
    "stats",
    "wake",
    "wake_view",
    "zoom",
    "recall",
    "pending",
    "prompt",
    "prompts",
    "nap",
    "nap_many",
    "forget",
    "export",
    "import_jsonl",
    "config",
    "set_config",
    "verify",
    "session_save",
    "session_load",
    "session_load_with_revision",
    "session_append",
    "session_items",
    "session_items_lossy",
    "session_pop",
    "session_clear",
    "session_delete",
    "session_prune",
    "session_info",
    "session_list",
    "session_ids",
    "session_archived",
)


class AsyncStore:
    """The asyncio twin of :class:`Store`: every method is a coroutine that runs the
    synchronous call in a worker thread (``asyncio.to_thread``), so the event loop keeps
    running while somna waits for a lock or the disk.

    ``AsyncStore(path)`` opens the file at once (as ``Store(path)`` does);
    ``await AsyncStore.open(path)`` opens it in a worker thread. ``AsyncStore(store)`` wraps
    an existing ``Store``; ``.sync`` is the underlying ``Store``.

    A cancelled call is cancelled for the caller only: the write it started still commits
    or fails as a whole in its thread.
    """

    def __init__(self, path: str | os.PathLike[str] | Store | None = None, **options: Any):
        self.sync: Store = open_store(path, **options)

    @classmethod
    async def open(
        cls, path: str | os.PathLike[str] | None = None, **options: Any
    ) -> AsyncStore:
        store = await asyncio.to_thread(open_store, path, **options)
        return cls(store)

    @property
    def path(self) -> Path:
        return Path(self.sync.path)

    @property
    def closed(self) -> bool:
        return self.sync.closed

    async def close(self) -> None:
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncStore:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"somna.AsyncStore({str(self.sync.path)!r})"


def _make_async(name: str):
    sync = getattr(Store, name)

    @functools.wraps(sync)
    async def method(self: AsyncStore, *args: Any, **kwargs: Any) -> Any:
        return await asyncio.to_thread(getattr(self.sync, name), *args, **kwargs)

    method.__name__ = name
    method.__qualname__ = f"AsyncStore.{name}"
    return method


for _name in _ASYNC_METHODS:
    setattr(AsyncStore, _name, _make_async(_name))
del _name


__all__ = [
    "AsyncStore",
    "BusyError",
    "ClosedError",
    "ConflictError",
    "CorruptError",
    "DEFAULT_SCOPE",
    "DeniedError",
    "Error",
    "InternalError",
    "InvalidError",
    "MAX_MESSAGE_BYTES",
    "MAX_SESSION_ID_BYTES",
    "NotFoundError",
    "NotSerializableError",
    "OutOfRangeError",
    "StorageError",
    "Store",
    "UnsupportedError",
    "WrongBlockError",
    "__version__",
    "default_path",
    "open_store",
]
