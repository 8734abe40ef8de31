"""somna as the memory of Claude's memory tool (``memory_20250818``) in Anthropic's Python SDK.

```python
import anthropic
from somna.anthropic import SomnaMemoryTool

client = anthropic.Anthropic()
memory = SomnaMemoryTool(scope="user-123")      # was: BetaLocalFilesystemMemoryTool("./memory")
runner = client.beta.messages.tool_runner(
    model="claude-sonnet-4-5", max_tokens=2048, tools=[memory],
    messages=[{"role": "user", "content": "Remember that I like coffee"}],
)
print(runner.until_done().content)
```

The SDK's ``BetaAbstractMemoryTool`` over a somna store. Claude sees exactly what the SDK's own
``BetaLocalFilesystemMemoryTool`` shows it (the same texts for view, view_range, create,
str_replace, insert, delete and rename, and the same error strings, raised as the SDK's
``ToolError`` so the tool runner sends them back with ``is_error``), but:

- **Every edit is kept.** Each file ``/memories/...`` is a session of the store, id
  ``<namespace><scope>:<path>`` (``anthropic_memory:user-123:/memories/notes.txt``), whose items
  are the file's successive versions: ``{"op", "content", "at_us", ...}`` with the whole text
  after each edit. A delete appends a version with ``content`` null; a rename appends one to
  each side (``rename_to`` on the old path, ``rename_from`` on the new). ``history(path)``
  returns them all, across deletes and re-creates.
- **Writes are checked against the store's revision**, not a Python lock: create succeeds only
  if the file is absent at the revision it read (two tools racing on one path: one gets "File
  ... already exists"); str_replace and insert re-read and retry when another writer got in
  between, so no edit is lost; rename claims the destination first and only then retires the
  source. Tools in other threads or processes on the same store file see each other at once.
- **Scopes.** ``scope`` (default ``"default"``) picks a separate ``/memories`` tree in the store.

Paths must be ``/memories`` or under it; ``..``, ``.`` and empty parts, backslashes and control
characters (NUL included) are refused. Directories are not stored: a directory exists while a
file under it does (an empty one vanishes, and its size in a listing is always ``4K``, an ext4 directory's).
"""

from __future__ import annotations

import os
import posixpath
import time
import unicodedata
from typing import Any, Dict, List, Optional, Tuple

from somna import Store, open_store
from somna._adapters import require
from somna._errors import ConflictError, InvalidError
from somna._somna import MAX_SESSION_ID_BYTES

require("anthropic", "anthropic", "somna.anthropic")
from anthropic.lib.tools import (  # noqa: E402
    BetaAbstractMemoryTool,
    BetaAsyncAbstractMemoryTool,
    ToolError,
)
from anthropic.types.beta import (  # noqa: E402
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

NAMESPACE = "anthropic_memory:"
ROOT = "/memories"

# As the SDK's filesystem tool (anthropic/lib/tools/_beta_builtin_memory_tool.py).
MAX_LINES = 999999
LINE_NUMBER_WIDTH = len(str(MAX_LINES))
# A directory's size in a listing: what the filesystem tool shows for one on ext4 (4096 bytes).
DIR_SIZE = "4K"
# Attempts of an edit that another writer keeps getting ahead of.
RETRIES = 50


def _format_file_size(bytes_size: int) -> str:
    """The SDK filesystem tool's size column, byte for byte."""
    if bytes_size == 0:
        return "0B"
    k = 1024
    sizes = ["B", "K", "M", "G"]
    i = int(bytes_size.bit_length() - 1) // 10
    i = min(i, len(sizes) - 1)
    size = bytes_size / (k**i)
    if size == int(size):
        return f"{int(size)}{sizes[i]}"
    return f"{size:.1f}{sizes[i]}"


def _split_lines_keeping_cr(content: str) -> List[str]:
    lines = content.split("\n")
    if lines[-1] == "":
        lines.pop()
    return lines


def _numbered(lines: List[str], start: int) -> str:
    return "\n".join(f"{str(i + start).rjust(LINE_NUMBER_WIDTH)}\t{line}" for i, line in enumerate(lines))


def _now_us() -> int:
    return time.time_ns() // 1000


def _live(item: Optional[Dict[str, Any]]) -> bool:
    return item is not None and isinstance(item.get("content"), str)


class SomnaMemoryTool(BetaAbstractMemoryTool):
    """Claude's memory tool (``memory_20250818``) kept in a somna store, with every version.

    ``path``: the store file, created if missing (default: ``$SOMNA_DB`` or
    ``~/.somna/memory.redb``); or pass an open ``store``. ``scope``: which ``/memories`` tree
    of the store this tool sees (1 to 64 characters, no ``:``, ``/``, ``\\`` or control
    character). ``namespace``: the prefix of the tool's session ids. ``cache_control`` as for
    the SDK's tools.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        scope: str = "default",
        store: Store | None = None,
        namespace: str = NAMESPACE,
        busy_timeout: float = 10.0,
        cache_control: Any = None,
    ) -> None:
        super().__init__(cache_control=cache_control)
        if not isinstance(scope, str) or not 1 <= len(scope) <= 64:
            raise InvalidError("invalid scope: must be 1 to 64 characters")
        bad = [c for c in scope if c in ":/\\" or unicodedata.category(c) == "Cc"]
        if bad:
            raise InvalidError(f"invalid scope: {scope!r} holds {bad[0]!r}")
        self.store = store if store is not None else open_store(path, busy_timeout=busy_timeout)
        self.scope = scope
        self.namespace = namespace
        self._prefix = f"{namespace}{scope}:"

    # ----- paths --------------------------------------------------------------------------

    def _check(self, path: str) -> str:
        """The canonical form of a path under /memories (no trailing slash), or ToolError."""
        if not isinstance(path, str) or not path.startswith(ROOT):
            raise ToolError(f"Path must start with /memories, got: {path}")
        for c in path:
            if c == "\0" or unicodedata.category(c) == "Cc":
                raise ToolError(f"Path {path!r} is refused: it holds the control character U+{ord(c):04X}")
        rest = path[len(ROOT) :]
        if rest and not rest.startswith("/"):
            raise ToolError(f"Path {path} is refused: it is not /memories or a path under /memories/")
        if "\\" in path:
            raise ToolError(f"Path {path} is refused: it holds a backslash")
        rest = rest[1:]
        if rest.endswith("/"):
            rest = rest[:-1]
        if not rest:
            return ROOT
        parts = rest.split("/")
        if ".." in parts:
            if posixpath.normpath(rest).split("/")[0] == "..":
                raise ToolError(f"Path {path} would escape /memories directory")
            raise ToolError(f"Path {path} is refused: it has a '..' part")
        if "." in parts:
            raise ToolError(f"Path {path} is refused: it has a '.' part")
        if "" in parts:
            raise ToolError(f"Path {path} is refused: it has an empty part")
        canonical = f"{ROOT}/{rest}"
        if len(self._sid(canonical).encode("utf-8")) > MAX_SESSION_ID_BYTES:
            room = MAX_SESSION_ID_BYTES - len(self._prefix.encode("utf-8"))
            raise ToolError(f"Path {path} is too long: at most {room} bytes of UTF-8 here")
        return canonical

    def _sid(self, canonical: str) -> str:
        return self._prefix + canonical

    # ----- the store ----------------------------------------------------------------------

    def _head(self, canonical: str) -> Tuple[Optional[Dict[str, Any]], int]:
        """The newest version of a file and the revision to expect when writing after it
        (0: never written). Two reads: a write against the revision fails if they straddle
        another writer's commit, and is then retried."""
        info = self.store.session_info(self._sid(canonical))
        if info is None:
            return None, 0
        items = self.store.session_items(self._sid(canonical), 1)
        return (items[0] if items else None), info["revision"]

    def _read(self, canonical: str) -> Optional[str]:
        """The file's current text, or None when it does not exist (or was deleted)."""
        items = self.store.session_items(self._sid(canonical), 1)
        if items and _live(items[0]):
            return items[0]["content"]
        return None

    def _append(self, canonical: str, item: Dict[str, Any], expected: int) -> int:
        """Appends a version if the file is still at revision ``expected``; returns the new
        revision, or raises ConflictError."""
        item = dict(item, at_us=_now_us())
        try:
            out = self.store.session_append(self._sid(canonical), [item], expected_revision=expected)
        except InvalidError as e:  # a version over the store's item limit (16 MiB of JSON)
            raise ToolError(f"File {canonical} cannot be stored: {e}") from e
        return out["revision"]

    def _live_under(self, canonical: str) -> List[Tuple[str, str]]:
        """(path, content) of every live file strictly under the directory ``canonical``,
        sorted by path."""
        prefix = self._sid(canonical) + "/"
        out = []
        for info in self.store.session_list(prefix):
            items = self.store.session_items(info["id"], 1)
            if items and _live(items[0]):
                out.append((info["id"][len(self._prefix) :], items[0]["content"]))
        return out

    def _is_dir(self, canonical: str) -> bool:
        if canonical == ROOT:
            return True
        prefix = self._sid(canonical) + "/"
        for info in self.store.session_list(prefix):
            items = self.store.session_items(info["id"], 1)
            if items and _live(items[0]):
                return True
        return False

    def _file_ancestor(self, canonical: str) -> Optional[str]:
        """The nearest enclosing path that is a file (a file cannot hold files), if any."""
        parent = posixpath.dirname(canonical)
        while parent != ROOT and parent:
            if self._read(parent) is not None:
                return parent
            parent = posixpath.dirname(parent)
        return None

    # ----- the commands -------------------------------------------------------------------

    def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        canonical = self._check(command.path)
        content = self._read(canonical) if canonical != ROOT else None
        if content is not None:
            lines = content.split("\n")
            if len(lines) > MAX_LINES:
                raise ToolError(f"File {command.path} exceeds maximum line limit of 999,999 lines.")
            display, start = lines, 1
            view_range = command.view_range
            if view_range and len(view_range) == 2:
                first = max(1, view_range[0]) - 1
                end = len(lines) if view_range[1] == -1 else view_range[1]
                display, start = lines[first:end], first + 1
            return f"Here's the content of {command.path} with line numbers:\n" + _numbered(display, start)

        files = self._live_under(canonical)
        if not files and canonical != ROOT:
            raise ToolError(f"The path {command.path} does not exist. Please provide a valid path.")
        # The tree below the directory, as the filesystem tool walks it: names sorted in each
        # directory, a directory before what it holds, two levels deep, hidden names skipped.
        tree: Dict[str, Any] = {}
        for path, text in files:
            parts = path[len(canonical) + 1 :].split("/")
            node = tree
            for part in parts[:-1]:
                sub = node.setdefault(part, {})
                if not isinstance(sub, dict):  # a file and a directory of one name (a race)
                    break
                node = sub
            else:
                node.setdefault(parts[-1], len(text.encode("utf-8")))
        items: List[Tuple[str, str]] = []

        def walk(node: Dict[str, Any], relative: str, depth: int) -> None:
            for name in sorted(node):
                if name.startswith("."):
                    continue
                rel = f"{relative}/{name}" if relative else name
                value = node[name]
                if isinstance(value, dict):
                    items.append((DIR_SIZE, f"{rel}/"))
                    if depth < 2:
                        walk(value, rel, depth + 1)
                else:
                    items.append((_format_file_size(value), rel))

        walk(tree, "", 1)
        header = f"Here're the files and directories up to 2 levels deep in {command.path}, excluding hidden items:"
        lines = [f"{DIR_SIZE}\t{command.path}"]
        lines.extend(f"{size}\t{command.path}/{rel}" for size, rel in items)
        return f"{header}\n" + "\n".join(lines)

    def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        canonical = self._check(command.path)
        item = {"op": "create", "content": command.file_text}
        for _ in range(RETRIES):
            if canonical == ROOT or self._is_dir(canonical):
                raise ToolError(f"File {command.path} already exists")
            parent = self._file_ancestor(canonical)
            if parent is not None:
                raise ToolError(f"Cannot create {command.path}: {parent} is a file, not a directory")
            head, revision = self._head(canonical)
            if _live(head):
                raise ToolError(f"File {command.path} already exists")
            try:
                self._append(canonical, item, revision)
            except ConflictError:
                continue  # another writer got in between: look again
            return f"File created successfully at: {command.path}"
        raise ToolError(f"File {command.path} is being changed by another writer; try again")

    def _edit(self, path: str, edit: Any) -> str:
        """Applies ``edit(content) -> (new item, result)`` to the newest version, against its
        revision; re-reads and re-applies when another writer committed meanwhile."""
        canonical = self._check(path)
        for _ in range(RETRIES):
            head, revision = self._head(canonical) if canonical != ROOT else (None, 0)
            if not _live(head):
                if canonical == ROOT or self._is_dir(canonical):
                    raise ToolError(f"The path {path} is not a file.")
                raise ToolError(f"The path {path} does not exist. Please provide a valid path.")
            assert head is not None
            item, result = edit(head["content"])
            try:
                self._append(canonical, item, revision)
            except ConflictError:
                continue
            return result
        raise ToolError(f"The file {path} is being changed by another writer; try again")

    def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        old, new, path = command.old_str, command.new_str, command.path

        def edit(content: str) -> Tuple[Dict[str, Any], str]:
            count = content.count(old)
            if count == 0:
                raise ToolError(f"No replacement was performed, old_str `{old}` did not appear verbatim in {path}.")
            if count > 1:
                matching: List[int] = []
                start = 0
                while True:
                    pos = content.find(old, start)
                    if pos == -1:
                        break
                    matching.append(content[:pos].count("\n") + 1)
                    start = pos + 1
                raise ToolError(
                    f"No replacement was performed. Multiple occurrences of old_str `{old}` in lines: "
                    f"{', '.join(map(str, matching))}. Please ensure it is unique"
                )
            changed = content[: content.find(old)].count("\n")
            text = content.replace(old, new)
            new_lines = text.split("\n")
            first, end = max(0, changed - 2), min(len(new_lines), changed + 3)
            snippet = "\n".join(
                f"{str(n).rjust(LINE_NUMBER_WIDTH)}\t{new_lines[n - 1]}" for n in range(first + 1, end + 1)
            )
            item = {"op": "str_replace", "content": text, "old_str": old, "new_str": new}
            return item, (
                "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
                + snippet
            )

        return self._edit(path, edit)

    def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        at, text, path = command.insert_line, command.insert_text, command.path

        def edit(content: str) -> Tuple[Dict[str, Any], str]:
            lines = _split_lines_keeping_cr(content)
            if at < 0 or at > len(lines):
                raise ToolError(
                    f"Invalid `insert_line` parameter: {at}. It should be within the range [0, {len(lines)}]."
                )
            lines.insert(at, text.rstrip("\n"))
            out = "\n".join(lines)
            if not out.endswith("\n"):
                out += "\n"
            item = {"op": "insert", "content": out, "insert_line": at, "insert_text": text}
            return item, f"The file {path} has been edited."

        return self._edit(path, edit)

    def _retire(self, canonical: str, item: Dict[str, Any]) -> bool:
        """Appends a version with no content (a delete) if the file is live; False if it was
        not. Retries when another writer gets in between."""
        for _ in range(RETRIES):
            head, revision = self._head(canonical)
            if not _live(head):
                return False
            try:
                self._append(canonical, dict(item, content=None), revision)
                return True
            except ConflictError:
                continue
        raise ToolError(f"The file {canonical} is being changed by another writer; try again")

    def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        canonical = self._check(command.path)
        if canonical == ROOT:
            raise ToolError("Cannot delete the /memories directory itself")
        if self._retire(canonical, {"op": "delete"}):
            return f"Successfully deleted {command.path}"
        files = self._live_under(canonical)
        deleted = [p for p, _ in files if self._retire(p, {"op": "delete"})]
        if not deleted:
            raise ToolError(f"The path {command.path} does not exist")
        return f"Successfully deleted {command.path}"

    def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        old = self._check(command.old_path)
        new = self._check(command.new_path)
        if old == ROOT:
            raise ToolError("Cannot rename the /memories directory itself")
        if new == ROOT or self._read(new) is not None or self._is_dir(new):
            raise ToolError(f"The destination {command.new_path} already exists")
        if new.startswith(old + "/"):
            raise ToolError(f"Cannot rename {command.old_path} to a path inside itself: {command.new_path}")
        parent = self._file_ancestor(new)
        if parent is not None:
            raise ToolError(f"Cannot rename to {command.new_path}: {parent} is a file, not a directory")
        if self._read(old) is not None:
            outcome = self._move(old, new)
            if outcome == "moved":
                return f"Successfully renamed {command.old_path} to {command.new_path}"
            if outcome == "taken":
                raise ToolError(f"The destination {command.new_path} already exists")
            raise ToolError(f"The path {command.old_path} does not exist")
        files = self._live_under(old)
        if not files:
            raise ToolError(f"The path {command.old_path} does not exist")
        moved = 0
        for path, _ in files:
            outcome = self._move(path, new + path[len(old) :])
            if outcome == "taken":
                raise ToolError(f"The destination {command.new_path + path[len(old):]} already exists")
            moved += outcome == "moved"
        if not moved:
            raise ToolError(f"The path {command.old_path} does not exist")
        return f"Successfully renamed {command.old_path} to {command.new_path}"

    def _move(self, old: str, new: str) -> str:
        """Moves one file: "moved", "gone" (``old`` is not a live file) or "taken" (``new``
        is). The destination is claimed first, against the revision at which it was absent,
        so of two renames racing to one path exactly one wins; the source is retired next,
        against the revision its content was read at, and if it changed meanwhile the claim
        is taken back (popped) and the move retried. A crash between the two leaves both, the
        new naming the old in its ``from``: never neither."""
        for _ in range(RETRIES):
            head, old_rev = self._head(old)
            if not _live(head):
                return "gone"
            assert head is not None
            dest, new_rev = self._head(new)
            if _live(dest):
                return "taken"
            try:
                claimed = self._append(new, {"op": "rename_from", "from": old, "content": head["content"]}, new_rev)
            except ConflictError:
                if self._read(new) is not None:
                    return "taken"
                continue
            try:
                self._append(old, {"op": "rename_to", "to": new, "content": None}, old_rev)
                return "moved"
            except ConflictError:
                # The source changed after it was read: take the claim back, then try again.
                try:
                    self.store.session_pop(self._sid(new), expected_revision=claimed)
                except ConflictError:
                    raise ToolError(
                        f"The path {old} changed while it was being renamed to {new}, which another "
                        "writer has since edited; both are kept"
                    ) from None
        raise ToolError(f"The path {old} is being changed by another writer; try again")

    def clear_all_memory(self) -> str:
        """Deletes every file of this scope with its whole history (not just a new version)."""
        for info in self.store.session_list(self._prefix):
            self.store.session_delete(info["id"])
        return "All memory cleared"

    # ----- beyond the SDK's interface ------------------------------------------------------

    def history(self, path: str) -> List[Dict[str, Any]]:
        """Every version of the file at ``path``, oldest first: ``{"op", "content", "at_us",
        ...}`` with ``content`` None for a delete or the old side of a rename (``"to"``
        names the new path; ``rename_from`` versions name the old one in ``"from"``). ``[]``
        for a path never written."""
        canonical = self._check(path)
        items = self.store.session_load(self._sid(canonical))
        return list(items or [])

    def files(self) -> Dict[str, str]:
        """Every live file of this scope: ``{path: content}``, sorted by path."""
        return dict(self._live_under(ROOT))


class SomnaAsyncMemoryTool(BetaAsyncAbstractMemoryTool):
    """The async form, for ``AsyncAnthropic``'s tool runner: a :class:`SomnaMemoryTool` whose
    calls run in a worker thread, so the event loop never blocks. Same arguments."""

    def __init__(self, path: str | os.PathLike[str] | None = None, **kwargs: Any) -> None:
        cache_control = kwargs.pop("cache_control", None)
        super().__init__(cache_control=cache_control)
        self.sync = SomnaMemoryTool(path, **kwargs)
        self.store = self.sync.store
        self.scope = self.sync.scope

    async def _run(self, name: str, *args: Any) -> Any:
        from anyio.to_thread import run_sync

        return await run_sync(getattr(self.sync, name), *args)

    async def view(self, command: BetaMemoryTool20250818ViewCommand) -> str:
        return await self._run("view", command)

    async def create(self, command: BetaMemoryTool20250818CreateCommand) -> str:
        return await self._run("create", command)

    async def str_replace(self, command: BetaMemoryTool20250818StrReplaceCommand) -> str:
        return await self._run("str_replace", command)

    async def insert(self, command: BetaMemoryTool20250818InsertCommand) -> str:
        return await self._run("insert", command)

    async def delete(self, command: BetaMemoryTool20250818DeleteCommand) -> str:
        return await self._run("delete", command)

    async def rename(self, command: BetaMemoryTool20250818RenameCommand) -> str:
        return await self._run("rename", command)

    async def clear_all_memory(self) -> str:
        return await self._run("clear_all_memory")

    async def history(self, path: str) -> List[Dict[str, Any]]:
        return await self._run("history", path)

    async def files(self) -> Dict[str, str]:
        return await self._run("files")


__all__ = ["SomnaMemoryTool", "SomnaAsyncMemoryTool", "NAMESPACE"]
