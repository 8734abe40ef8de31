"""somna as an OpenAI Agents SDK session: a one-line swap for ``SQLiteSession``.

```python
from agents import Agent, Runner
from somna.openai_agents import SomnaSession

session = SomnaSession("user-123")            # was: SQLiteSession("user-123", "db.sqlite")
result = await Runner.run(agent, "Hello", session=session)
```

Items are stored exactly as given (compact JSON) and returned unchanged. ``add_items`` is one
atomic batch; concurrent writers (threads or processes) wait up to ``busy_timeout`` for each
other instead of failing with "database is locked"; a failing batch writes nothing. Every call
runs in a worker thread, so the event loop never blocks.

As with the SDK's own sessions, ``close()`` is terminal: every call after it raises
``somna.ClosedError`` (a ``RuntimeError``), ``add_items([])`` included; closing again, or
before first use, or from several threads at once, is harmless.
"""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from somna import Store, open_store
from somna._adapters import Closing, await_mutation, require, session_key

require("agents", "openai-agents", "somna.openai_agents")
from agents.memory.session_settings import (  # noqa: E402
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)

NAMESPACE = "openai_agents:"

_log = logging.getLogger("somna")


class SomnaSession:
    """An Agents SDK ``Session`` kept in a somna store.

    ``path``: the store file, created if missing (default: ``$SOMNA_DB`` or
    ``~/.somna/memory.redb``); or pass an open ``store``. ``session_settings`` as for the
    SDK's own sessions (its ``limit`` is the default for ``get_items``). Sessions are kept
    under the ``namespace`` prefix in the store.

    After ``close()`` every method raises ``somna.ClosedError``.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        path: str | os.PathLike[str] | None = None,
        *,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        store: Store | None = None,
        namespace: str = NAMESPACE,
        busy_timeout: float = 10.0,
    ) -> None:
        self._key = session_key(namespace, session_id)
        self.session_id = session_id
        self.session_settings = (
            coerce_session_settings(session_settings)
            if session_settings is not None
            else SessionSettings()
        )
        self.store = store if store is not None else open_store(path, busy_timeout=busy_timeout)
        self.namespace = namespace
        self._closing = Closing(self.store, store is None, f"session {session_id!r}")

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closing.closed

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """The latest ``limit`` items in chronological order (all when ``None``; the
        default comes from ``session_settings.limit``)."""
        self._closing.check()
        n = resolve_session_limit(limit, self.session_settings)
        if n is not None and n < 0:
            n = None  # as SQLiteSession: a negative limit is no limit
        # A damaged item must not hide the valid history (the SDK's contract): the others are
        # returned, and the damage is logged, never dropped silently.
        items, unreadable = await asyncio.to_thread(
            self.store.session_items_lossy, self._key, n
        )
        if unreadable:
            _log.error(
                "somna: session %r: %d damaged item(s) skipped (seq %s); run `somna verify`",
                self.session_id,
                len(unreadable),
                ", ".join(str(s) for s in unreadable[:10]),
            )
        return items

    async def add_items(self, items: list[Any]) -> None:
        """Appends the items as one atomic batch, in order."""
        self._closing.check()
        items = list(items)
        if not items:
            return
        await await_mutation(asyncio.to_thread(self.store.session_append, self._key, items))

    async def pop_item(self) -> Any | None:
        """Removes and returns the newest item, or ``None`` when the session is empty."""
        self._closing.check()
        return await await_mutation(asyncio.to_thread(self.store.session_pop, self._key))

    async def clear_session(self) -> None:
        """Removes every item of the session."""
        self._closing.check()
        await await_mutation(asyncio.to_thread(self.store.session_clear, self._key))

    async def delete_session(self) -> None:
        """Deletes the session wholly (items, archive, idempotency keys)."""
        self._closing.check()
        await await_mutation(asyncio.to_thread(self.store.session_delete, self._key))

    def close(self) -> None:
        """Closes the session: every later call raises ``somna.ClosedError``. Releases the
        store handle this session opened (a ``store`` passed in stays open). Idempotent, and
        safe to call from several threads at once."""
        self._closing.close()

    def __repr__(self) -> str:
        closed = ", closed" if self.closed else ""
        return f"SomnaSession({self.session_id!r}, {str(self.store.path)!r}{closed})"


__all__ = ["SomnaSession"]
