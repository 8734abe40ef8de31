"""somna as the memory of pure_agents: a one-line swap for ``JSONMemory``.

```python
from pure_agents import Agent
from somna.pure_agents import SomnaMemory

agent = Agent(session="alice", memory=SomnaMemory())   # was: memory=JSONMemory()
```

Every ``save`` is one transaction that writes only the messages that changed. Messages a save
drops (``Agent(max_messages=...)`` trims history from the front) are moved to the session's
archive instead of being lost; ``archived(session_id)`` returns them. Two processes saving one
session never corrupt it, and the messages one of them drops land in the archive too.
"""

from __future__ import annotations

import asyncio
import os
import threading
from typing import Any

from somna import Store, open_store
from somna._adapters import await_mutation, require, session_key
from somna._errors import CorruptError, InvalidError

_pa = require("pure_agents", "pure-agents", "somna.pure_agents")
Memory = _pa.Memory
Message = _pa.Message

NAMESPACE = "pure_agents:"


def _to_dict(m: Any, i: int) -> dict[str, Any]:
    if isinstance(m, Message):
        return m.to_dict()
    if isinstance(m, dict):
        try:
            return Message.from_dict(m).to_dict()
        except KeyError as e:
            raise InvalidError(f"message {i} has no {e.args[0]!r}") from e
    raise TypeError(f"message {i} must be a pure_agents.Message, not {type(m).__name__}")


def _from_dict(session_id: str, i: int, d: Any) -> Message:
    try:
        return Message.from_dict(d)
    except (KeyError, TypeError, AttributeError) as e:
        raise CorruptError(
            f"session {session_id!r} item {i} is not a pure_agents message: {e!r}"
        ) from e


class SomnaMemory(Memory):
    """A ``pure_agents.Memory`` kept in a somna store.

    ``path``: the store file, created if missing (default: ``$SOMNA_DB`` or
    ``~/.somna/memory.redb``); or pass an open ``store``. Sessions are kept under the
    ``namespace`` prefix in the store, so other adapters sharing the file are not listed.

    With ``strict=True``, a ``save`` after a ``load`` by this object raises
    ``somna.ConflictError`` (writing nothing) if another writer changed the session in
    between, instead of letting the last writer win.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        store: Store | None = None,
        namespace: str = NAMESPACE,
        strict: bool = False,
        busy_timeout: float = 10.0,
    ) -> None:
        self.store = store if store is not None else open_store(path, busy_timeout=busy_timeout)
        self.namespace = namespace
        self.strict = strict
        self._revisions: dict[str, int] = {}
        self._lock = threading.Lock()

    def _key(self, session_id: str) -> str:
        return session_key(self.namespace, session_id)

    def save(self, session_id: str, messages: list[Message]) -> None:
        """Replaces the session's messages, in one transaction, writing only what changed;
        messages left out are archived, not lost."""
        key = self._key(session_id)
        items = [_to_dict(m, i) for i, m in enumerate(messages)]
        with self._lock:
            expected = self._revisions.get(session_id) if self.strict else None
        out = self.store.session_save(key, items, expected_revision=expected)
        if self.strict:
            with self._lock:
                self._revisions[session_id] = out["revision"]

    def load(self, session_id: str) -> list[Message] | None:
        """The session's messages, or ``None`` when it does not exist."""
        key = self._key(session_id)
        items, revision = self.store.session_load_with_revision(key)
        if self.strict:
            with self._lock:
                self._revisions[session_id] = revision
        if items is None:
            return None
        return [_from_dict(session_id, i, d) for i, d in enumerate(items)]

    def delete(self, session_id: str) -> None:
        """Deletes the session with its archive. Deleting a missing session is no error."""
        self.store.session_delete(self._key(session_id))
        with self._lock:
            self._revisions.pop(session_id, None)

    def list_sessions(self) -> list[str]:
        """Every session id of this namespace, sorted."""
        n = len(self.namespace)
        return [info["id"][n:] for info in self.store.session_list(self.namespace)]

    def archived(self, session_id: str) -> list[Message]:
        """The messages saves have dropped from the session, in the order they were dropped."""
        items = self.store.session_archived(self._key(session_id))
        return [_from_dict(session_id, i, a["message"]) for i, a in enumerate(items)]

    def prune(self, session_id: str) -> int:
        """Deletes the session's archive; returns how many messages it held."""
        return self.store.session_prune(self._key(session_id))

    # pure_agents calls the four methods above synchronously (the Agent saves from inside its
    # async run); these twins are for callers on an event loop.

    async def asave(self, session_id: str, messages: list[Message]) -> None:
        await await_mutation(asyncio.to_thread(self.save, session_id, messages))

    async def aload(self, session_id: str) -> list[Message] | None:
        return await asyncio.to_thread(self.load, session_id)

    async def adelete(self, session_id: str) -> None:
        await await_mutation(asyncio.to_thread(self.delete, session_id))

    async def alist_sessions(self) -> list[str]:
        return await asyncio.to_thread(self.list_sessions)

    async def aarchived(self, session_id: str) -> list[Message]:
        return await asyncio.to_thread(self.archived, session_id)

    def __repr__(self) -> str:
        return f"SomnaMemory({str(self.store.path)!r}, namespace={self.namespace!r})"


__all__ = ["SomnaMemory"]
