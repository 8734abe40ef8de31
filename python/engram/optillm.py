"""engram as the store of optillm's memory plugin.

optillm's ``memory`` plugin keeps its margin notes in a ``Memory`` object: ``add(item)`` appends
and evicts the oldest past ``max_size``, ``get_relevant(query, n)`` ranks items by TF-IDF. With
``OPTILLM_MEMORY_FILE`` set it persists them by rewriting a JSON file after every add, and it
treats a file it cannot read as empty (and then overwrites it).

This module is a drop-in plugin with the same ``SLUG`` and ``run``, whose ``Memory`` is
:class:`EngramMemory`. The one-line swap is a local plugin file that overrides the packaged one
(optillm loads ``./optillm/plugins/*.py`` after its own and lets them override a slug)::

    # optillm/plugins/memory_plugin.py
    from engram.optillm import SLUG, run  # noqa: F401

``OPTILLM_MEMORY_FILE`` keeps its meaning: unset, memory lives for one request, as before; set,
it names the engram store that holds the items (created if missing). An existing JSON file of
the stock plugin is migrated into a store at the same path, its original kept beside it as
``<name>.json.bak``. A file that is neither raises ``engram.CorruptError`` and is left
untouched: a damaged file never silently becomes an empty memory.

Items evicted past ``max_size`` are moved to the store's archive, not deleted; adds from many
processes at once are all kept (each add is one transaction, retried on a concurrent change).
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any, List, Optional

from engram import Store
from engram._adapters import await_mutation
from engram._errors import BusyError, ConflictError, CorruptError, InvalidError

SLUG = "memory"
MEMORY_FILE_ENV = "OPTILLM_MEMORY_FILE"
#: The session of the store that holds the items.
SESSION = "optillm:memory"

_REDB_MAGIC = b"redb"


def _load_stock_plugin() -> ModuleType:
    """A private copy of optillm's own memory plugin (its prompts and its ``run``), loaded from
    the installed package's file without importing the optillm server."""
    spec = importlib.util.find_spec("optillm")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            "engram.optillm needs the 'optillm' package, which is not installed: "
            "pip install 'engram[optillm]'",
            name="optillm",
        )
    for base in spec.submodule_search_locations:
        path = Path(base) / "plugins" / "memory_plugin.py"
        if path.is_file():
            break
    else:
        raise ModuleNotFoundError(
            "engram.optillm: this optillm has no plugins/memory_plugin.py", name="optillm"
        )
    mspec = importlib.util.spec_from_file_location("engram._optillm_memory_plugin", path)
    if mspec is None or mspec.loader is None:
        raise ImportError(f"engram.optillm: cannot load {path}")
    module = importlib.util.module_from_spec(mspec)
    mspec.loader.exec_module(module)
    return module


_stock = _load_stock_plugin()
_TfidfVectorizer = _stock.TfidfVectorizer
_cosine_similarity = _stock.cosine_similarity


# ----------------------------------------------------------------------------------------------
# Opening OPTILLM_MEMORY_FILE

_open_lock = threading.Lock()


def _lock_file(path: Path):
    """An exclusive lock on ``<path>.lock`` across processes (a no-op where fcntl is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        return None
    fd = os.open(str(path.with_name(path.name + ".lock")), os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def _unlock_file(fd: Any) -> None:
    if fd is not None:
        os.close(fd)


def _head(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read(len(_REDB_MAGIC))
    except FileNotFoundError:
        return None


def _stock_items(path: Path) -> list[str]:
    """The items of the stock plugin's JSON file, or CorruptError saying what is wrong."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CorruptError(
            f"{path} is neither an engram store nor optillm's JSON memory file ({e}); "
            f"it was left untouched. Move it away or point {MEMORY_FILE_ENV} at another file."
        ) from e
    if not isinstance(data, list) or not all(isinstance(x, str) for x in data):
        raise CorruptError(
            f"{path} is valid JSON but not a list of strings (optillm's memory file); "
            f"it was left untouched. Move it away or point {MEMORY_FILE_ENV} at another file."
        )
    return data


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except OSError:  # pragma: no cover - platforms without directory fds
        return
    try:
        os.fsync(fd)
    except OSError:  # pragma: no cover
        pass
    finally:
        os.close(fd)


def _migrate(path: Path, items: list[str]) -> None:
    """Replaces the stock plugin's JSON file by an engram store with the same items, keeping
    the original as ``<name>.json.bak`` (``.json.bak.1``, ... if that exists)."""
    backup = path.with_name(path.name + ".json.bak")
    n = 0
    while backup.exists():
        n += 1
        backup = path.with_name(f"{path.name}.json.bak.{n}")
    shutil.copy2(path, backup)
    with open(backup, "rb") as f:
        os.fsync(f.fileno())
    tmp = path.with_name(f".{path.name}.{os.getpid()}.engram-migrate")
    tmp.unlink(missing_ok=True)
    try:
        store = Store(tmp)
        try:
            store.session_save(SESSION, [{"text": s} for s in items])
        finally:
            store.close()
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(path.parent)


def open_memory_store(persist_path: str | os.PathLike[str], **options: Any) -> Store:
    """The store at ``persist_path`` (see the module's documentation): created if missing,
    migrated from the stock plugin's JSON file, or ``CorruptError`` with the file untouched."""
    path = Path(persist_path).expanduser()
    head = _head(path)
    if head is not None and head.startswith(_REDB_MAGIC):
        return Store(path, **options)
    # Creating or migrating: one process at a time, so that nobody mistakes a store being
    # created by another process (its first bytes not written yet) for a damaged file.
    path.parent.mkdir(parents=True, exist_ok=True)
    with _open_lock:
        fd = _lock_file(path)
        try:
            head = _head(path)
            if head is None or head == b"" or head.startswith(_REDB_MAGIC):
                return Store(path, **options)
            _migrate(path, _stock_items(path))
            return Store(path, **options)
        finally:
            _unlock_file(fd)


# ----------------------------------------------------------------------------------------------
# The Memory


class EngramMemory:
    """optillm's plugin ``Memory`` with the same interface, kept in an engram store.

    ``EngramMemory(max_size=100, persist_path=None)``: without ``persist_path`` (or ``store``)
    the items live in this object only, exactly as in the stock plugin. With one, they live in
    the store's ``optillm:memory`` session: ``items`` is the newest ``max_size`` of them, and
    an add evicts the oldest into the archive.
    """

    def __init__(
        self,
        max_size: int = 100,
        persist_path: Optional[str] = None,
        *,
        store: Store | None = None,
        session: str = SESSION,
    ) -> None:
        if not isinstance(max_size, int) or isinstance(max_size, bool) or max_size < 1:
            raise InvalidError(f"max_size must be a whole number >= 1, not {max_size!r}")
        self.max_size = max_size
        self.persist_path = persist_path
        self.vectorizer = _TfidfVectorizer()
        self.vectors = None
        self.completion_tokens = 0
        self.session = session
        self._local: List[str] = []
        self._fitted: list[str] | None = None
        self._rank_lock = threading.Lock()
        self._local_lock = threading.Lock()
        if store is None and persist_path:
            store = open_memory_store(persist_path)
        self.store = store

    # -- items ------------------------------------------------------------------------------

    @property
    def items(self) -> List[str]:
        """The items, oldest first (at most ``max_size``)."""
        if self.store is None:
            return self._local
        return [self._text(d) for d in self.store.session_items(self.session, self.max_size)]

    @items.setter
    def items(self, values: List[str]) -> None:
        values = [self._check(v) for v in values]
        if self.store is None:
            self._local = values
        else:
            self.store.session_save(self.session, [{"text": v} for v in values])
        self.vectors = None

    def _text(self, d: Any) -> str:
        if isinstance(d, dict) and isinstance(d.get("text"), str):
            return d["text"]
        raise CorruptError(f"session {self.session!r} holds an item that is not a memory: {d!r}")

    @staticmethod
    def _check(item: Any) -> str:
        if not isinstance(item, str):
            raise TypeError(f"a memory item must be a str, not {type(item).__name__}")
        return item

    def add(self, item: str) -> None:
        """Appends ``item``; past ``max_size`` the oldest is evicted (to the archive)."""
        item = self._check(item)
        self.vectors = None
        if self.store is None:
            with self._local_lock:
                if len(self._local) >= self.max_size:
                    self._local.pop(0)
                self._local.append(item)
            return
        pause, deadline = 0.001, time.monotonic() + 60.0
        while True:
            live, revision = self.store.session_load_with_revision(self.session)
            live = list(live or [])
            live.append({"text": item})
            # Items past max_size are archived by the save (the engine never drops them).
            live = live[-self.max_size :]
            try:
                self.store.session_save(self.session, live, expected_revision=revision)
                return
            except ConflictError:
                # Another writer added meanwhile: read again and retry.
                if time.monotonic() > deadline:
                    raise BusyError(
                        f"{self.session!r} kept changing under this add for 60 s; try again"
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.05)

    def archived(self) -> List[str]:
        """The items evicted past ``max_size``, oldest first."""
        if self.store is None:
            return []
        return [self._text(a["message"]) for a in self.store.session_archived(self.session)]

    async def aadd(self, item: str) -> None:
        """``add`` in a worker thread."""
        await await_mutation(asyncio.to_thread(self.add, item))

    # -- ranking (the stock plugin's, unchanged) ---------------------------------------------

    def get_relevant(self, query: str, n: int = 10) -> List[str]:
        """The ``n`` items most similar to ``query`` (TF-IDF cosine), best first."""
        items = self.items
        if not items:
            return []
        with self._rank_lock:  # the vectorizer is fitted in place: one thread at a time
            if self.vectors is None or self._fitted != items:
                self.vectors = self.vectorizer.fit_transform(items)
                self._fitted = list(items)
            query_vector = self.vectorizer.transform([query])
            similarities = _cosine_similarity(query_vector, self.vectors).flatten()
        top_indices = similarities.argsort()[-n:][::-1]
        return [items[i] for i in top_indices]

    async def aget_relevant(self, query: str, n: int = 10) -> List[str]:
        """``get_relevant`` in a worker thread."""
        return await asyncio.to_thread(self.get_relevant, query, n)


#: The name the plugin uses.
Memory = EngramMemory

# The stock plugin's run(), prompts and helpers, with its Memory replaced by EngramMemory in
# this private copy only (the packaged plugin is not modified).
_stock.Memory = EngramMemory
run = _stock.run
extract_query = _stock.extract_query
extract_key_information = _stock.extract_key_information

__all__ = ["EngramMemory", "MEMORY_FILE_ENV", "Memory", "SLUG", "open_memory_store", "run"]
