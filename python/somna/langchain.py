"""somna as a LangChain chat message history: a one-line swap for any
``BaseChatMessageHistory`` (``FileChatMessageHistory``, ``SQLChatMessageHistory``, ...).

```python
from somna.langchain import SomnaChatMessageHistory

history = SomnaChatMessageHistory("user-123")   # was: FileChatMessageHistory("chat.json")
history.add_messages([HumanMessage("hi"), AIMessage("hello")])
```

Messages are kept with ``message_to_dict`` / ``messages_from_dict``. ``add_messages`` is one
atomic append (not a rewrite of the whole list); the async twins run in a worker thread.
``close()`` is terminal: every later call raises ``somna.ClosedError`` (a ``RuntimeError``).
"""

from __future__ import annotations

import asyncio
import os
from typing import Any, Sequence

from somna import Store, open_store
from somna._adapters import Closing, await_mutation, require, session_key
from somna._errors import CorruptError

require("langchain_core", "langchain", "somna.langchain")
from langchain_core.chat_history import BaseChatMessageHistory  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    BaseMessage,
    message_to_dict,
    messages_from_dict,
)

NAMESPACE = "langchain:"


class SomnaChatMessageHistory(BaseChatMessageHistory):
    """A LangChain ``BaseChatMessageHistory`` kept in a somna store.

    ``path``: the store file, created if missing (default: ``$SOMNA_DB`` or
    ``~/.somna/memory.redb``); or pass an open ``store``. Sessions are kept under the
    ``namespace`` prefix in the store.

    After ``close()`` every method raises ``somna.ClosedError``.
    """

    def __init__(
        self,
        session_id: str,
        path: str | os.PathLike[str] | None = None,
        *,
        store: Store | None = None,
        namespace: str = NAMESPACE,
        busy_timeout: float = 10.0,
    ) -> None:
        self._key = session_key(namespace, session_id)
        self.session_id = session_id
        self.namespace = namespace
        self.store = store if store is not None else open_store(path, busy_timeout=busy_timeout)
        self._closing = Closing(self.store, store is None, f"chat message history {session_id!r}")

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called."""
        return self._closing.closed

    def _decode(self, items: list[Any]) -> list[BaseMessage]:
        try:
            return messages_from_dict(items)
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptError(
                f"session {self.session_id!r} holds an item that is not a LangChain message: {e!r}"
            ) from e

    @staticmethod
    def _encode(messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
        out = []
        for i, m in enumerate(messages):
            if not isinstance(m, BaseMessage):
                raise TypeError(f"message {i} must be a BaseMessage, not {type(m).__name__}")
            out.append(message_to_dict(m))
        return out

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """Every message of the session, oldest first."""
        self._closing.check()
        return self._decode(self.store.session_items(self._key))

    async def aget_messages(self) -> list[BaseMessage]:
        self._closing.check()
        items = await asyncio.to_thread(self.store.session_items, self._key)
        return self._decode(items)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Appends the messages in one transaction (all or none)."""
        self._closing.check()
        items = self._encode(messages)
        if items:
            self.store.session_append(self._key, items)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        self._closing.check()
        items = self._encode(messages)
        if items:
            await await_mutation(asyncio.to_thread(self.store.session_append, self._key, items))

    def clear(self) -> None:
        """Removes every message of the session."""
        self._closing.check()
        self.store.session_clear(self._key)

    async def aclear(self) -> None:
        self._closing.check()
        await await_mutation(asyncio.to_thread(self.store.session_clear, self._key))

    def close(self) -> None:
        """Closes the history: every later call raises ``somna.ClosedError``. Releases the
        store handle this history opened (a ``store`` passed in stays open). Idempotent, and
        safe to call from several threads at once."""
        self._closing.close()

    def __repr__(self) -> str:
        closed = ", closed" if self.closed else ""
        return f"SomnaChatMessageHistory({self.session_id!r}, {str(self.store.path)!r}{closed})"


__all__ = ["SomnaChatMessageHistory"]
