"""Helpers shared by the framework adapters."""

from __future__ import annotations

import asyncio
import importlib
import threading
import unicodedata
from types import ModuleType
from typing import Awaitable, TypeVar

from somna._somna import MAX_SESSION_ID_BYTES
from somna._errors import ClosedError, InvalidError

T = TypeVar("T")


def require(module: str, extra: str, adapter: str) -> ModuleType:
    """Imports a framework, or says which extra installs it."""
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name != module.split(".")[0]:
            raise
        raise ModuleNotFoundError(
            f"{adapter} needs the {module.split('.')[0]!r} package, which is not installed: "
            f"pip install 'somna[{extra}]'",
            name=e.name,
        ) from e


def session_key(namespace: str, session_id: object) -> str:
    """The engine's session id for a framework's session id: ``namespace + session_id``.

    Each adapter keeps its sessions under its own prefix, so that frameworks sharing one
    store never see (or list, or delete) each other's sessions.
    """
    if not isinstance(session_id, str):
        raise TypeError(f"session_id must be a str, not {type(session_id).__name__}")
    room = MAX_SESSION_ID_BYTES - len(namespace.encode("utf-8"))
    n = len(session_id.encode("utf-8"))
    if n == 0 or n > room:
        raise InvalidError(
            f"invalid session id: must be 1 to {room} bytes of UTF-8 (got {n})"
        )
    for c in session_id:
        if unicodedata.category(c) == "Cc":
            raise InvalidError(
                f"invalid session id: contains the control character U+{ord(c):04X}"
            )
    return namespace + session_id


async def await_mutation(awaitable: Awaitable[T]) -> T:
    """Waits for a write to finish even if the caller is cancelled meanwhile, then re-raises
    the cancellation: the caller never sees a write that is still half-way (the OpenAI Agents
    SDK's own sessions do the same)."""
    task = asyncio.ensure_future(awaitable)
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as e:
            if cancelled is None:
                cancelled = e
    try:
        result = task.result()
    except BaseException:
        if cancelled is not None:
            raise cancelled from None
        raise
    if cancelled is not None:
        raise cancelled
    return result


class Closing:
    """The closed state of an adapter that holds a store (the Agents SDK's contract): once
    ``close()`` ran, ``check()`` raises ``somna.ClosedError`` for every call. ``close()`` is
    idempotent, terminal and safe from several threads; it closes the store only when the
    adapter opened it (``owns``)."""

    def __init__(self, store: object, owns: bool, what: str) -> None:
        self._store = store
        self._owns = owns
        self._what = what
        self._closed = False
        self._lock = threading.Lock()

    @property
    def closed(self) -> bool:
        return self._closed

    def check(self) -> None:
        if self._closed:
            raise ClosedError(f"{self._what} is closed")

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._owns:
            self._store.close()  # type: ignore[attr-defined]
