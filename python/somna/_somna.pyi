"""Type stubs for the compiled extension (python/src/lib.rs)."""

import os
from pathlib import Path
from typing import Any, Iterable, Literal, Optional, Sequence, Union

MAX_MESSAGE_BYTES: int
MAX_SESSION_ID_BYTES: int
DEFAULT_SCOPE: str
__version__: str

_Item = Union[dict[str, Any], str]
_Memory = Union[str, dict[str, Any]]

class Store:
    """A somna store; ``Store(path)`` creates it when missing (``create=False`` to refuse)."""

    def __init__(
        self,
        path: Union[str, os.PathLike[str]],
        *,
        create: bool = True,
        busy_timeout: float = 10.0,
        exclusive: bool = False,
        cache_bytes: Optional[int] = None,
    ) -> None: ...
    @property
    def path(self) -> Path: ...
    @property
    def closed(self) -> bool: ...
    def close(self) -> None: ...
    def __enter__(self) -> "Store": ...
    def __exit__(self, *args: object) -> bool: ...

    # memory log and tree
    def note(
        self,
        text: str,
        scope: str = "default",
        *,
        kind: Optional[str] = None,
        status: Optional[str] = None,
        source: Optional[str] = None,
        source_uri: Optional[str] = None,
        observed_us: Optional[int] = None,
        supersedes: Optional[Sequence[int]] = None,
        conflicts_with: Optional[Sequence[int]] = None,
        valid_until_us: Optional[int] = None,
        key: Optional[str] = None,
        vector: Optional[Sequence[float]] = None,
    ) -> int: ...
    def note_many(
        self, items: Iterable[_Memory], scope: str = "default", *, key: Optional[str] = None
    ) -> dict[str, Any]: ...
    def count(self, scope: str = "default") -> int: ...
    def memory(self, id: int, scope: str = "default") -> dict[str, Any]: ...
    def memories(self, lo: int = 0, hi: int = ..., scope: str = "default") -> list[dict[str, Any]]: ...
    def scopes(self) -> list[str]: ...
    def stats(self) -> list[dict[str, Any]]: ...
    def wake(
        self,
        scope: str = "default",
        *,
        lines: Optional[int] = None,
        bytes: Optional[int] = None,
        part: int = 1,
        snapshot: Optional[int] = None,
        hints: str = "none",
        cmd: Optional[str] = None,
    ) -> str: ...
    def wake_view(
        self,
        scope: str = "default",
        *,
        lines: Optional[int] = None,
        bytes: Optional[int] = None,
        snapshot: Optional[int] = None,
        hints: str = "none",
        cmd: Optional[str] = None,
    ) -> dict[str, Any]: ...
    def zoom(self, block: str, scope: str = "default") -> list[dict[str, Any]]: ...
    def recall(
        self,
        pattern: str,
        scope: str = "default",
        *,
        limit: Optional[int] = None,
        since_us: Optional[int] = None,
        until_us: Optional[int] = None,
        kind: Optional[str] = None,
        max_bytes: int = 20000,
    ) -> dict[str, Any]: ...
    def set_embedder(
        self,
        url: Optional[str],
        model: Optional[str] = None,
        dimension: Optional[int] = None,
        *,
        key_env: Optional[str] = None,
        query_prefix: str = "",
        passage_prefix: str = "",
        input_type: bool = False,
        wait_ms: int = 2000,
        batch: int = 32,
    ) -> None: ...
    def embedder(self) -> Optional[dict[str, Any]]: ...
    def backfill(self, scope: Optional[str] = None, max: Optional[int] = None) -> dict[str, Any]: ...
    def search(
        self,
        query: str,
        scope: str = "default",
        *,
        scopes: Optional[Sequence[str]] = None,
        all: bool = False,
        limit: int = 10,
        offset: int = 0,
        since_us: Optional[int] = None,
        until_us: Optional[int] = None,
        kind: Optional[str] = None,
        max_bytes: int = 20000,
        include_inactive: bool = False,
        vector: Optional[Sequence[float]] = None,
        mode: Optional[Literal["lexical", "hybrid", "vector"]] = None,
    ) -> dict[str, Any]: ...
    def pending(self, scope: str = "default", *, limit: Optional[int] = None) -> list[str]: ...
    def prompt(self, scope: str = "default", *, hints: str = "none", cmd: Optional[str] = None) -> Optional[dict[str, Any]]: ...
    def prompts(
        self, n: int, scope: str = "default", *, hints: str = "none", cmd: Optional[str] = None
    ) -> list[dict[str, Any]]: ...
    def nap(
        self, block: str, text: str, scope: str = "default"
    ) -> Literal["saved", "already_settled"]: ...
    def nap_many(
        self, entries: Sequence[tuple[str, str]], scope: str = "default"
    ) -> list[tuple[str, str]]: ...
    def forget(self, block: str, scope: str = "default") -> list[str]: ...
    def export(self) -> str: ...
    def import_jsonl(self, text: str) -> dict[str, int]: ...
    def config(self) -> dict[str, int]: ...
    def set_config(self, name: str, value: Union[int, str]) -> int: ...
    def verify(self) -> dict[str, Any]: ...

    # sessions
    def session_save(
        self, id: str, messages: Sequence[_Item], *, expected_revision: Optional[int] = None
    ) -> dict[str, int]: ...
    def session_load(self, id: str, *, raw: bool = False) -> Optional[list[Any]]: ...
    def session_load_with_revision(
        self, id: str, *, raw: bool = False
    ) -> tuple[Optional[list[Any]], int]: ...
    def session_append(
        self,
        id: str,
        items: Sequence[_Item],
        *,
        key: Optional[str] = None,
        expected_revision: Optional[int] = None,
    ) -> dict[str, Any]: ...
    def session_items(self, id: str, limit: Optional[int] = None, *, raw: bool = False) -> list[Any]: ...
    def session_items_lossy(
        self, id: str, limit: Optional[int] = None, *, raw: bool = False
    ) -> tuple[list[Any], list[int]]: ...
    def session_pop(
        self, id: str, *, expected_revision: Optional[int] = None, raw: bool = False
    ) -> Optional[Any]: ...
    def session_clear(self, id: str) -> int: ...
    def session_delete(self, id: str) -> bool: ...
    def session_prune(self, id: str) -> int: ...
    def session_info(self, id: str) -> Optional[dict[str, Any]]: ...
    def session_list(
        self, prefix: str = "", *, after: Optional[str] = None, limit: Optional[int] = None
    ) -> list[dict[str, Any]]: ...
    def session_ids(self) -> list[str]: ...
    def session_archived(self, id: str, *, raw: bool = False) -> list[dict[str, Any]]: ...

class LangGraphStorage:
    """The storage of ``somna.langgraph`` over a ``Store``: checkpoints and store items, as
    tuples of LangGraph's ``(type, bytes)`` pairs (see python/src/checkpoint.rs)."""

    def __init__(self, store: Store) -> None: ...
    def put(
        self,
        thread: str,
        ns: str,
        id: str,
        parent: Optional[str],
        checkpoint: tuple[str, bytes],
        metadata: tuple[str, bytes],
        metadata_json: str,
        run_id: Optional[str],
        versions: list[tuple[str, str]],
        changed: list[tuple[str, str, Any]],
    ) -> None: ...
    def put_writes(
        self, thread: str, ns: str, id: str, writes: list[tuple[str, int, str, tuple[str, bytes], str]]
    ) -> None: ...
    def get(self, thread: str, ns: str, id: Optional[str] = None) -> Optional[tuple[Any, ...]]: ...
    def list(
        self,
        thread: Optional[str] = None,
        ns: Optional[str] = None,
        id: Optional[str] = None,
        before: Optional[str] = None,
        filter_json: Optional[str] = None,
        limit: Optional[int] = None,
    ) -> list[tuple[Any, ...]]: ...
    def delete_thread(self, thread: str) -> int: ...
    def delete_for_runs(self, run_ids: list[str]) -> int: ...
    def copy_thread(self, source: str, target: str) -> int: ...
    def prune(self, threads: list[str], strategy: str) -> int: ...
    def stats(self) -> dict[str, int]: ...
    def store_write(
        self, puts: list[tuple[list[str], str, Optional[str], Optional[int], bytes]]
    ) -> None: ...
    def store_get(
        self, namespace: list[str], key: str, refresh: bool = False
    ) -> Optional[tuple[Any, ...]]: ...
    def store_refresh(self, items: list[tuple[list[str], str]]) -> None: ...
    def delta_history(
        self, thread: str, ns: str, id: Optional[str], channels: list[str]
    ) -> list[tuple[str, list[tuple[str, str, Any]], Optional[tuple[Any]]]]: ...
    def store_items(
        self, prefix: list[str], offset: int = 0, limit: Optional[int] = None
    ) -> list[tuple[Any, ...]]: ...
    def store_namespaces(self, prefix: list[str]) -> list[list[str]]: ...
    def store_sweep(self) -> int: ...
    def store_sweep_step(
        self, start: Optional[tuple[str, str]] = None, budget: int = 1000
    ) -> tuple[int, Optional[tuple[str, str]]]: ...

def rank_texts(query: str, texts: list[str]) -> list[float]: ...
def best_cosine(query: list[float], packed: bytes) -> Optional[float]: ...

def _cli(argv: list[str], program: Optional[str] = None) -> int:
    """Runs the ``somna`` command line in process (``somna._cli``, the console script)."""
    ...
