"""somna as the store of optillm's memory plugin.

optillm's ``memory`` plugin keeps its margin notes in a ``Memory`` object: ``add(item)`` appends
and evicts the oldest past ``max_size``, ``get_relevant(query, n)`` ranks items by TF-IDF. With
``OPTILLM_MEMORY_FILE`` set it persists them by rewriting a JSON file after every add, and it
treats a file it cannot read as empty (and then overwrites it).

This module is a drop-in plugin with the same ``SLUG`` and ``run``, whose ``Memory`` is
:class:`SomnaMemory`. The one-line swap is a local plugin file that overrides the packaged one
(optillm loads ``./optillm/plugins/*.py`` after its own and lets them override a slug)::

    # optillm/plugins/memory_plugin.py
    from somna.optillm import SLUG, run  # noqa: F401

``OPTILLM_MEMORY_FILE`` keeps its meaning: unset, memory lives for one request, as before; set,
it names the somna store that holds the items (created if missing). An existing JSON file of
the stock plugin is migrated into a store at the same path, its original kept beside it as
``<name>.json.bak``. A file that is neither raises ``somna.CorruptError`` and is left
untouched: a damaged file never silently becomes an empty memory.

Items evicted past ``max_size`` are moved to the store's archive, not deleted; adds from many
processes at once are all kept (each add is one transaction, retried on a concurrent change).

``get_relevant`` ranks through the engine's search (BM25 with stemming, see docs/python.md),
not by loading every item into Python: the items are session messages, so each add also notes
the item as a memory of the scope named like the session (``optillm:memory``; control
characters as spaces, cut at the store's entry limit, which the adapter raises to its maximum)
and the session item records that memory's id (``{"text", "memory"}``). A search maps its hits
back to the live items; evicted items' memories stay in the scope but are never returned. Items
saved without an id (a migrated JSON file, an older store) are noted on the first
``get_relevant``. Without a path, the items are ranked in a private temporary store.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import os
import shutil
import tempfile
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any, List, Optional

from somna import Store
from somna._adapters import await_mutation
from somna._errors import BusyError, ConflictError, CorruptError, InvalidError

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
            "somna.optillm needs the 'optillm' package, which is not installed: "
            "pip install 'somna[optillm]'",
            name="optillm",
        )
    for base in spec.submodule_search_locations:
        path = Path(base) / "plugins" / "memory_plugin.py"
        if path.is_file():
            break
    else:
        raise ModuleNotFoundError(
            "somna.optillm: this optillm has no plugins/memory_plugin.py", name="optillm"
        )
    mspec = importlib.util.spec_from_file_location("somna._optillm_memory_plugin", path)
    if mspec is None or mspec.loader is None:
        raise ImportError(f"somna.optillm: cannot load {path}")
    module = importlib.util.module_from_spec(mspec)
    mspec.loader.exec_module(module)
    return module


_stock = _load_stock_plugin()


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
            f"{path} is neither a somna store nor optillm's JSON memory file ({e}); "
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
    """Replaces the stock plugin's JSON file by a somna store with the same items, keeping
    the original as ``<name>.json.bak`` (``.json.bak.1``, ... if that exists)."""
    backup = path.with_name(path.name + ".json.bak")
    n = 0
    while backup.exists():
        n += 1
        backup = path.with_name(f"{path.name}.json.bak.{n}")
    shutil.copy2(path, backup)
    with open(backup, "rb") as f:
        os.fsync(f.fileno())
    tmp = path.with_name(f".{path.name}.{os.getpid()}.somna-migrate")
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
            if head is not None and head.startswith(_REDB_MAGIC):
                return Store(path, **options)
            if head:
                _migrate(path, _stock_items(path))
            return _made_here(Store(path, **options))
        finally:
            _unlock_file(fd)


# ----------------------------------------------------------------------------------------------
# Items as memories, for search

#: The largest entry a store allows (``ENTRY_BYTES``' maximum).
_ENTRY_MAX = 4096


def _made_here(store: Store) -> Store:
    """A store this adapter created (or migrated) holds only its items: its entries may be as
    long as a store allows, so that an item's memory keeps more of its text. A store the host
    opened keeps its settings."""
    if store.config()["entry_bytes"] < _ENTRY_MAX:
        store.set_config("ENTRY_BYTES", _ENTRY_MAX)
    return store


def _note(store: Store, scope: str, text: str) -> Optional[int]:
    """Notes ``text`` as a memory of ``scope`` for search (control characters as spaces, cut at
    the store's entry limit) and returns its id; ``None`` when the store refuses it (the item is
    then kept, and only listed after the hits)."""
    limit = store.config()["entry_bytes"]
    line = "".join(" " if c.isspace() or ord(c) < 32 or 127 <= ord(c) < 160 else c for c in text)
    line = " ".join(line.split()) or "(empty)"
    data = line.encode("utf-8")[:limit]
    line = data.decode("utf-8", errors="ignore")
    try:
        return store.note(line, scope)
    except InvalidError:
        return None


# ----------------------------------------------------------------------------------------------
# The Memory


class SomnaMemory:
    """optillm's plugin ``Memory`` with the same interface, kept in a somna store.

    ``SomnaMemory(max_size=100, persist_path=None)``: without ``persist_path`` (or ``store``)
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
        self.completion_tokens = 0
        self.session = session
        self._local: List[str] = []
        # Without a store: each local item's memory id in the scratch store (None: not noted).
        self._local_ids: List[Optional[int]] = []
        self._scratch: Store | None = None
        self._scratch_dir: tempfile.TemporaryDirectory[str] | None = None
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
            with self._local_lock:
                self._local = values
                self._local_ids = [None] * len(values)
        else:
            self.store.session_save(
                self.session, [{"text": v, "memory": _note(self.store, self.session, v)} for v in values]
            )

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
        if self.store is None:
            with self._local_lock:
                if len(self._local) >= self.max_size:
                    self._local.pop(0)
                    self._local_ids.pop(0)
                self._local.append(item)
                self._local_ids.append(None)
            return
        # Noted once, before the save (a retry reuses it): the memory is what search ranks.
        memory = _note(self.store, self.session, item)
        pause, deadline = 0.001, time.monotonic() + 60.0
        while True:
            live, revision = self.store.session_load_with_revision(self.session)
            live = list(live or [])
            live.append({"text": item, "memory": memory})
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

    # -- ranking (through the engine's search) ---------------------------------------------

    def get_relevant(self, query: str, n: int = 10) -> List[str]:
        """The ``n`` items that best match ``query`` (the engine's ranked search), best first;
        when fewer items match, the newest of the others follow, as many as ``n`` asks."""
        if n < 1:
            return []
        store, live = self._live()
        if not live:
            return []
        out: List[str] = []
        seen: set[int] = set()
        offset: Optional[int] = 0
        while offset is not None and len(out) < n:
            try:
                r = store.search(query, self.session, limit=max(n, 10), offset=offset)
            except InvalidError:  # no word to look for
                break
            for h in r["hits"]:
                i = h.get("id")
                if i in live and i not in seen and len(out) < n:
                    seen.add(i)
                    out.append(live[i])
            offset = r["next_offset"]
        for i in reversed(list(live)):
            if len(out) >= n:
                break
            if i not in seen:
                seen.add(i)
                out.append(live[i])
        return out

    def _live(self) -> tuple[Store, dict[int, str]]:
        """The store to search and the live items by memory id, oldest first; items without a
        memory yet are noted first."""
        if self.store is None:
            with self._local_lock:
                if self._scratch is None:
                    self._scratch_dir = tempfile.TemporaryDirectory(prefix="somna-optillm-")
                    self._scratch = _made_here(Store(Path(self._scratch_dir.name) / "m.redb"))
                for k, text in enumerate(self._local):
                    if self._local_ids[k] is None:
                        self._local_ids[k] = _note(self._scratch, self.session, text)
                return self._scratch, {
                    (i if i is not None else -1 - k): t
                    for k, (i, t) in enumerate(zip(self._local_ids, self._local))
                }
        live, revision = self.store.session_load_with_revision(self.session)
        live = list(live or [])
        if any(not isinstance(d, dict) or "memory" not in d for d in live):
            live = [
                d if isinstance(d, dict) and "memory" in d
                else {"text": self._text(d), "memory": _note(self.store, self.session, self._text(d))}
                for d in live
            ]
            try:
                self.store.session_save(self.session, live, expected_revision=revision)
            except ConflictError:
                pass  # another writer changed the items: this ranking uses what it read
        items = live[-self.max_size :]
        return self.store, {
            (d["memory"] if isinstance(d["memory"], int) else -1 - k): self._text(d)
            for k, d in enumerate(items)
        }

    async def aget_relevant(self, query: str, n: int = 10) -> List[str]:
        """``get_relevant`` in a worker thread."""
        return await asyncio.to_thread(self.get_relevant, query, n)


#: The name the plugin uses.
Memory = SomnaMemory

# The stock plugin's run(), prompts and helpers, with its Memory replaced by SomnaMemory in
# this private copy only (the packaged plugin is not modified).
_stock.Memory = SomnaMemory
run = _stock.run
extract_query = _stock.extract_query
extract_key_information = _stock.extract_key_information

__all__ = ["SomnaMemory", "MEMORY_FILE_ENV", "Memory", "SLUG", "open_memory_store", "run"]
