"""somna.anthropic: Claude's memory tool (memory_20250818) over a somna store.

Three parts:

- The SDK's own tests of its filesystem tool, ported: the synchronous cases of
  ``TestBetaLocalFilesystemMemoryTool`` in anthropic-sdk-python's
  ``tests/lib/tools/memory_tools/test_filesystem.py`` (read at v0.121.0), run against both
  ``BetaLocalFilesystemMemoryTool`` and ``SomnaMemoryTool`` with the same expected strings. Not
  ported: the umask/mode test and the symlink tests (the store has no files, modes or links),
  and the async class's copies of the same cases (one async test below covers that class).
- The SDK's tool runner, offline: ``client.beta.messages.tool_runner`` with an
  ``httpx2.MockTransport`` answering canned ``tool_use`` turns, so the runner really calls the
  tool; a script of every command and error runs through both tools and what the model is sent
  back must be the same (only a directory's own size differs: the filesystem's, vs ``4K``).
- What the filesystem tool lacks: history, races decided by the store's revision check between
  two tools on one store file, scopes, persistence across reopening.
"""

from __future__ import annotations

import json
import os
import re
import threading
from typing import Any, Callable, Dict, List

import pytest

pytest.importorskip("anthropic")

import somna  # noqa: E402
from anthropic import Anthropic, AsyncAnthropic  # noqa: E402
from anthropic.lib.tools import ToolError  # noqa: E402
from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool  # noqa: E402
from anthropic.types.beta import (  # noqa: E402
    BetaMemoryTool20250818CreateCommand,
    BetaMemoryTool20250818DeleteCommand,
    BetaMemoryTool20250818InsertCommand,
    BetaMemoryTool20250818RenameCommand,
    BetaMemoryTool20250818StrReplaceCommand,
    BetaMemoryTool20250818ViewCommand,
)

from somna.anthropic import SomnaAsyncMemoryTool, SomnaMemoryTool  # noqa: E402

try:  # the SDK's HTTP library: httpx2 from anthropic 2.x, httpx before
    import httpx2 as httpx
except ImportError:  # pragma: no cover
    import httpx  # type: ignore[no-redef]


# ----- the two implementations, side by side --------------------------------------------------


def fs_snapshot(tool: BetaLocalFilesystemMemoryTool) -> Dict[str, str]:
    """The SDK test's get_directory_snapshot: relative path -> content of every file."""
    base = str(tool.base_path)
    out = {}
    for root, _, files in os.walk(base):
        for name in files:
            full = os.path.join(root, name)
            with open(full, "r", newline="") as f:
                out[os.path.relpath(full, base)] = f.read()
    return out


def somna_snapshot(tool: SomnaMemoryTool) -> Dict[str, str]:
    return {path[1:]: content for path, content in tool.files().items()}


@pytest.fixture(params=["filesystem", "somna"])
def impl(request, tmp_path, store):
    """(tool, snapshot) for the SDK's filesystem tool or ours."""
    if request.param == "filesystem":
        tool = BetaLocalFilesystemMemoryTool(base_path=str(tmp_path / "fs"))
        return tool, lambda: fs_snapshot(tool)
    tool = SomnaMemoryTool(store=store)
    return tool, lambda: somna_snapshot(tool)


def Create(path: str, text: str) -> BetaMemoryTool20250818CreateCommand:
    return BetaMemoryTool20250818CreateCommand(command="create", path=path, file_text=text)


def View(path: str, view_range: Any = None) -> BetaMemoryTool20250818ViewCommand:
    if view_range is None:
        return BetaMemoryTool20250818ViewCommand(command="view", path=path)
    return BetaMemoryTool20250818ViewCommand(command="view", path=path, view_range=view_range)


def Replace(path: str, old: str, new: str) -> BetaMemoryTool20250818StrReplaceCommand:
    return BetaMemoryTool20250818StrReplaceCommand(command="str_replace", path=path, old_str=old, new_str=new)


def Insert(path: str, line: int, text: str) -> BetaMemoryTool20250818InsertCommand:
    return BetaMemoryTool20250818InsertCommand(command="insert", path=path, insert_line=line, insert_text=text)


def Delete(path: str) -> BetaMemoryTool20250818DeleteCommand:
    return BetaMemoryTool20250818DeleteCommand(command="delete", path=path)


def Rename(old: str, new: str) -> BetaMemoryTool20250818RenameCommand:
    return BetaMemoryTool20250818RenameCommand(command="rename", old_path=old, new_path=new)


# ----- ported from the SDK's test_filesystem.py (TestBetaLocalFilesystemMemoryTool) -------------


def test_create(impl):
    tool, snap = impl
    assert tool.create(Create("/memories/test_file.txt", "Hello, World!")) == (
        "File created successfully at: /memories/test_file.txt"
    )
    assert snap() == {"memories/test_file.txt": "Hello, World!"}


def test_create_nested_directories(impl):
    tool, snap = impl
    result = tool.create(Create("/memories/deep/nested/file.txt", "Nested file"))
    assert result == "File created successfully at: /memories/deep/nested/file.txt"
    assert snap() == {"memories/deep/nested/file.txt": "Nested file"}


def test_create_error_if_file_already_exists(impl):
    tool, snap = impl
    tool.create(Create("/memories/existing.txt", "Original"))
    with pytest.raises(ToolError, match="File /memories/existing.txt already exists"):
        tool.create(Create("/memories/existing.txt", "New"))
    assert snap() == {"memories/existing.txt": "Original"}


def test_view_file(impl):
    tool, _ = impl
    tool.create(Create("/memories/view_test.txt", "Line 1\nLine 2\nLine 3"))
    assert tool.view(View("/memories/view_test.txt")) == (
        "Here's the content of /memories/view_test.txt with line numbers:\n"
        "     1\tLine 1\n     2\tLine 2\n     3\tLine 3"
    )


def test_view_directory(impl):
    tool, _ = impl
    tool.create(Create("/memories/dir/file1.txt", "File 1"))
    tool.create(Create("/memories/dir/file2.txt", "File 2"))
    result = tool.view(View("/memories/dir"))
    assert "Here're the files and directories up to 2 levels deep in /memories/dir" in result
    assert "/memories/dir" in result
    assert "/memories/dir/file1.txt" in result
    assert "/memories/dir/file2.txt" in result


def test_view_file_with_range(impl):
    tool, _ = impl
    tool.create(Create("/memories/range_test.txt", "Line 1\nLine 2\nLine 3\nLine 4\nLine 5"))
    assert tool.view(View("/memories/range_test.txt", [2, 4])) == (
        "Here's the content of /memories/range_test.txt with line numbers:\n"
        "     2\tLine 2\n     3\tLine 3\n     4\tLine 4"
    )


def test_view_error_for_non_existent_file(impl):
    tool, _ = impl
    with pytest.raises(ToolError, match="The path /memories/nonexistent.txt does not exist. Please provide a valid path."):
        tool.view(View("/memories/nonexistent.txt"))


def test_view_error_for_files_with_too_many_lines(impl):
    tool, _ = impl
    tool.create(Create("/memories/huge.txt", "\n".join(["line"] * 1000000)))
    with pytest.raises(ToolError, match=r"exceeds maximum line limit of 999,999 lines"):
        tool.view(View("/memories/huge.txt"))


def test_str_replace(impl):
    tool, snap = impl
    tool.create(Create("/memories/replace_test.txt", "Line 1\nOld Text\nLine 3"))
    assert tool.str_replace(Replace("/memories/replace_test.txt", "Old Text", "New Text")) == (
        "The memory file has been edited. Here is the snippet showing the change (with line numbers):\n"
        "     1\tLine 1\n     2\tNew Text\n     3\tLine 3"
    )
    assert snap() == {"memories/replace_test.txt": "Line 1\nNew Text\nLine 3"}


def test_str_replace_error_when_string_not_found(impl):
    tool, _ = impl
    tool.create(Create("/memories/replace_test.txt", "Hello, World!"))
    with pytest.raises(
        ToolError,
        match="No replacement was performed, old_str `NotFound` did not appear verbatim in /memories/replace_test.txt.",
    ):
        tool.str_replace(Replace("/memories/replace_test.txt", "NotFound", "Python"))


def test_str_replace_error_when_string_appears_multiple_times(impl):
    tool, _ = impl
    tool.create(Create("/memories/replace_test.txt", "Hello\nMiddle\nHello"))
    with pytest.raises(
        ToolError,
        match=r"No replacement was performed\. Multiple occurrences of old_str `Hello` in lines: 1, 3\. Please ensure it is unique",
    ):
        tool.str_replace(Replace("/memories/replace_test.txt", "Hello", "Hi"))


def test_str_replace_error_for_non_existent_file(impl):
    tool, _ = impl
    with pytest.raises(ToolError, match="The path /memories/nonexistent.txt does not exist. Please provide a valid path."):
        tool.str_replace(Replace("/memories/nonexistent.txt", "old", "new"))


def test_insert(impl):
    tool, snap = impl
    tool.create(Create("/memories/insert_test.txt", "Line 1\nLine 2"))
    assert tool.insert(Insert("/memories/insert_test.txt", 1, "Inserted Line")) == (
        "The file /memories/insert_test.txt has been edited."
    )
    assert snap() == {"memories/insert_test.txt": "Line 1\nInserted Line\nLine 2\n"}


def test_insert_at_beginning_of_file(impl):
    tool, snap = impl
    tool.create(Create("/memories/insert_test.txt", "Line 1\nLine 2"))
    tool.insert(Insert("/memories/insert_test.txt", 0, "First Line"))
    assert snap() == {"memories/insert_test.txt": "First Line\nLine 1\nLine 2\n"}


def test_insert_at_end_of_file(impl):
    tool, snap = impl
    tool.create(Create("/memories/insert_test.txt", "Line 1\nLine 2"))
    tool.insert(Insert("/memories/insert_test.txt", 2, "Last Line"))
    assert snap() == {"memories/insert_test.txt": "Line 1\nLine 2\nLast Line\n"}


def test_insert_error_for_non_existent_file(impl):
    tool, _ = impl
    with pytest.raises(ToolError, match="The path /memories/nonexistent.txt does not exist. Please provide a valid path."):
        tool.insert(Insert("/memories/nonexistent.txt", 0, "text"))


def test_insert_error_for_invalid_insert_line(impl):
    tool, _ = impl
    tool.create(Create("/memories/insert_test.txt", "Line 1\nLine 2"))
    with pytest.raises(ToolError, match=r"Invalid `insert_line` parameter: 10. It should be within the range \[0, 2\]"):
        tool.insert(Insert("/memories/insert_test.txt", 10, "text"))


def test_delete(impl):
    tool, snap = impl
    tool.create(Create("/memories/delete_me.txt", "To be deleted"))
    assert tool.delete(Delete("/memories/delete_me.txt")) == "Successfully deleted /memories/delete_me.txt"
    assert snap() == {}


def test_delete_directory(impl):
    tool, snap = impl
    tool.create(Create("/memories/subdir/file.txt", "Content"))
    assert tool.delete(Delete("/memories/subdir")) == "Successfully deleted /memories/subdir"
    assert snap() == {}


def test_delete_error_when_file_not_found(impl):
    tool, _ = impl
    with pytest.raises(ToolError, match="The path /memories/nonexistent.txt does not exist"):
        tool.delete(Delete("/memories/nonexistent.txt"))


def test_delete_not_allow_deleting_memories_directory(impl):
    tool, _ = impl
    with pytest.raises(ToolError, match="Cannot delete the /memories directory itself"):
        tool.delete(Delete("/memories"))


def test_rename(impl):
    tool, snap = impl
    tool.create(Create("/memories/old_name.txt", "Original content"))
    assert tool.rename(Rename("/memories/old_name.txt", "/memories/new_name.txt")) == (
        "Successfully renamed /memories/old_name.txt to /memories/new_name.txt"
    )
    assert snap() == {"memories/new_name.txt": "Original content"}


def test_rename_to_nested_path(impl):
    tool, snap = impl
    tool.create(Create("/memories/file.txt", "Content"))
    assert tool.rename(Rename("/memories/file.txt", "/memories/nested/dir/file.txt")) == (
        "Successfully renamed /memories/file.txt to /memories/nested/dir/file.txt"
    )
    assert snap() == {"memories/nested/dir/file.txt": "Content"}


def test_rename_error_when_source_not_found(impl):
    tool, _ = impl
    with pytest.raises(ToolError, match="The path /memories/nonexistent.txt does not exist"):
        tool.rename(Rename("/memories/nonexistent.txt", "/memories/new.txt"))


def test_rename_error_when_destination_exists(impl):
    tool, snap = impl
    tool.create(Create("/memories/file1.txt", "File 1"))
    tool.create(Create("/memories/file2.txt", "File 2"))
    with pytest.raises(ToolError, match="The destination /memories/file2.txt already exists"):
        tool.rename(Rename("/memories/file1.txt", "/memories/file2.txt"))
    assert snap() == {"memories/file1.txt": "File 1", "memories/file2.txt": "File 2"}


def test_path_validation_reject_paths_not_starting_with_memories(impl):
    tool, _ = impl
    with pytest.raises(ToolError, match="Path must start with /memories"):
        tool.create(Create("/invalid/path.txt", "Invalid"))


def test_path_validation_reject_paths_trying_to_escape_memories(impl):
    tool, snap = impl
    with pytest.raises(ToolError, match="Path /memories/../../../etc/passwd would escape /memories directory"):
        tool.create(Create("/memories/../../../etc/passwd", "Escape attempt"))
    assert snap() == {}


# ----- the SDK's tool runner, offline ----------------------------------------------------------


def tool_use_turn(n: int, input: Dict[str, Any]) -> Dict[str, Any]:
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "tool_use", "id": f"toolu_{n}", "name": "memory", "input": input}],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


def final_turn(n: int) -> Dict[str, Any]:
    return {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-5",
        "content": [{"type": "text", "text": "Done."}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }


class FakeModel:
    """Answers /v1/messages with one tool_use per turn from ``script``, then ends the turn;
    records every request body."""

    def __init__(self, script: List[Dict[str, Any]]) -> None:
        self.script = script
        self.requests: List[Dict[str, Any]] = []

    def __call__(self, request: Any) -> Any:
        assert request.url.path == "/v1/messages", request.url
        body = json.loads(request.content)
        self.requests.append(body)
        n = len(self.requests)
        turn = tool_use_turn(n, self.script[n - 1]) if n <= len(self.script) else final_turn(n)
        return httpx.Response(200, json=turn)

    def results(self) -> List[Dict[str, Any]]:
        """The tool_result block sent back after each tool_use, in order."""
        out = []
        for body in self.requests[1:]:
            last = body["messages"][-1]
            assert last["role"] == "user"
            (block,) = [b for b in last["content"] if b["type"] == "tool_result"]
            out.append(block)
        return out


def run_script(tool: Any, script: List[Dict[str, Any]]) -> FakeModel:
    model = FakeModel(script)
    client = Anthropic(
        api_key="test-key",
        base_url="http://anthropic.test",
        http_client=httpx.Client(transport=httpx.MockTransport(model)),
        max_retries=0,
    )
    runner = client.beta.messages.tool_runner(
        model="claude-sonnet-4-5",
        max_tokens=1024,
        tools=[tool],
        messages=[{"role": "user", "content": "Keep notes in your memory."}],
    )
    final = runner.until_done()
    assert final.content[0].text == "Done."
    assert len(model.requests) == len(script) + 1
    return model


SCRIPT: List[Dict[str, Any]] = [
    {"command": "view", "path": "/memories"},
    {"command": "create", "path": "/memories/notes.md", "file_text": "# Notes\nlikes coffee\n"},
    {"command": "create", "path": "/memories/notes.md", "file_text": "again"},
    {"command": "create", "path": "/memories/projects/somna/todo.txt", "file_text": "a\nb\nc\nd\ne\nf\ng"},
    {"command": "create", "path": "/memories/projects/somna/deep/x.txt", "file_text": "hidden by depth"},
    {"command": "create", "path": "/memories/.secret", "file_text": "hidden"},
    {"command": "create", "path": "/memories/big.txt", "file_text": "x" * 3000},
    {"command": "view", "path": "/memories"},
    {"command": "view", "path": "/memories/projects"},
    {"command": "view", "path": "/memories/notes.md"},
    {"command": "view", "path": "/memories/projects/somna/todo.txt", "view_range": [3, 5]},
    {"command": "view", "path": "/memories/projects/somna/todo.txt", "view_range": [6, -1]},
    {"command": "view", "path": "/memories/missing.txt"},
    {"command": "str_replace", "path": "/memories/projects/somna/todo.txt", "old_str": "e", "new_str": "E!"},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "tea", "new_str": "x"},
    {"command": "str_replace", "path": "/memories/notes.md", "old_str": "e", "new_str": "x"},
    {"command": "str_replace", "path": "/memories/projects", "old_str": "a", "new_str": "b"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 2, "insert_text": "prefers small commits\n"},
    {"command": "insert", "path": "/memories/notes.md", "insert_line": 9, "insert_text": "no"},
    {"command": "view", "path": "/memories/notes.md"},
    {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/projects/somna/todo.txt"},
    {"command": "rename", "old_path": "/memories/nothing", "new_path": "/memories/else"},
    {"command": "rename", "old_path": "/memories", "new_path": "/memories/else"},
    {"command": "rename", "old_path": "/memories/notes.md", "new_path": "/memories/archive/notes.md"},
    {"command": "rename", "old_path": "/memories/projects", "new_path": "/memories/work"},
    {"command": "view", "path": "/memories"},
    # A directory is deleted whole, then the file in it is gone. (Deleting the file alone would
    # leave an empty directory on the file system and none in the store: the one difference.)
    {"command": "delete", "path": "/memories/archive"},
    {"command": "delete", "path": "/memories/archive/notes.md"},
    {"command": "delete", "path": "/memories/work"},
    {"command": "delete", "path": "/memories"},
    {"command": "view", "path": "/memories/../etc/passwd"},
    {"command": "create", "path": "/tmp/evil", "file_text": "x"},
    {"command": "view", "path": "/memories"},
]


def normalize_dir_sizes(text: Any) -> Any:
    """A directory's own size is the file system's (4K on ext4, 60B on tmpfs...); ours is 4K.
    Directories are the listed dir itself (the first line after the header) and the lines
    ending in ``/``."""
    if not isinstance(text, str) or not text.startswith("Here're the files"):
        return text
    lines = text.split("\n")
    for i in range(1, len(lines)):
        size, _, path = lines[i].partition("\t")
        if i == 1 or path.endswith("/"):
            lines[i] = f"<dir>\t{path}"
    return "\n".join(lines)


def test_runner_sends_the_same_results_as_the_filesystem_tool(tmp_path, store):
    fs = run_script(BetaLocalFilesystemMemoryTool(base_path=str(tmp_path / "fs")), SCRIPT)
    ours = run_script(SomnaMemoryTool(store=store), SCRIPT)
    # The tool is declared to the model as the SDK declares its own.
    assert ours.requests[0]["tools"] == [{"type": "memory_20250818", "name": "memory"}]
    assert fs.requests[0]["tools"] == ours.requests[0]["tools"]
    fs_results, our_results = fs.results(), ours.results()
    assert len(our_results) == len(SCRIPT)
    for step, (a, b) in enumerate(zip(fs_results, our_results)):
        assert a["tool_use_id"] == b["tool_use_id"] == f"toolu_{step + 1}"
        assert a.get("is_error", False) == b.get("is_error", False), (SCRIPT[step], a, b)
        assert normalize_dir_sizes(a["content"]) == normalize_dir_sizes(b["content"]), SCRIPT[step]
    errors = [SCRIPT[i]["command"] for i, r in enumerate(our_results) if r.get("is_error")]
    assert errors == [
        "create", "view", "str_replace", "str_replace", "str_replace", "insert", "rename",
        "rename", "rename", "delete", "delete", "view", "create",
    ]
    # Spot checks of what the model was actually sent.
    assert our_results[7]["content"] == (
        "Here're the files and directories up to 2 levels deep in /memories, excluding hidden items:\n"
        "4K\t/memories\n"
        "2.9K\t/memories/big.txt\n"
        "21B\t/memories/notes.md\n"
        "4K\t/memories/projects/\n"
        "4K\t/memories/projects/somna/"
    )
    assert our_results[10]["content"] == (
        "Here's the content of /memories/projects/somna/todo.txt with line numbers:\n"
        "     3\tc\n     4\td\n     5\te"
    )
    assert our_results[30] == {
        "type": "tool_result",
        "tool_use_id": "toolu_31",
        "content": "Path /memories/../etc/passwd would escape /memories directory",
        "is_error": True,
    }
    assert our_results[-1]["content"].endswith("4K\t/memories\n2.9K\t/memories/big.txt")


async def test_async_tool_through_the_async_runner(store):
    model = FakeModel(
        [
            {"command": "create", "path": "/memories/a.txt", "file_text": "one\n"},
            {"command": "insert", "path": "/memories/a.txt", "insert_line": 1, "insert_text": "two"},
            {"command": "view", "path": "/memories/a.txt"},
        ]
    )
    client = AsyncAnthropic(
        api_key="test-key",
        base_url="http://anthropic.test",
        http_client=httpx.AsyncClient(transport=httpx.MockTransport(model)),
        max_retries=0,
    )
    tool = SomnaAsyncMemoryTool(store=store, scope="async")
    runner = client.beta.messages.tool_runner(
        model="claude-sonnet-4-5", max_tokens=1024, tools=[tool], messages=[{"role": "user", "content": "hi"}]
    )
    await runner.until_done()
    assert [r["content"] for r in model.results()] == [
        "File created successfully at: /memories/a.txt",
        "The file /memories/a.txt has been edited.",
        "Here's the content of /memories/a.txt with line numbers:\n     1\tone\n     2\ttwo\n     3\t",
    ]
    assert await tool.files() == {"/memories/a.txt": "one\ntwo\n"}
    assert [v["op"] for v in await tool.history("/memories/a.txt")] == ["create", "insert"]


# ----- what the store adds: history ------------------------------------------------------------


def test_history_keeps_every_version(store):
    tool = SomnaMemoryTool(store=store)
    tool.create(Create("/memories/prefs.txt", "coffee\n"))
    tool.str_replace(Replace("/memories/prefs.txt", "coffee", "tea"))
    tool.insert(Insert("/memories/prefs.txt", 0, "drinks:"))
    tool.delete(Delete("/memories/prefs.txt"))
    with pytest.raises(ToolError, match="does not exist"):
        tool.view(View("/memories/prefs.txt"))
    tool.create(Create("/memories/prefs.txt", "water\n"))
    history = tool.history("/memories/prefs.txt")
    assert [(v["op"], v["content"]) for v in history] == [
        ("create", "coffee\n"),
        ("str_replace", "tea\n"),
        ("insert", "drinks:\ntea\n"),
        ("delete", None),
        ("create", "water\n"),
    ]
    assert history[1]["old_str"] == "coffee" and history[1]["new_str"] == "tea"
    assert history[2]["insert_line"] == 0 and history[2]["insert_text"] == "drinks:"
    stamps = [v["at_us"] for v in history]
    assert stamps == sorted(stamps) and stamps[0] > 1_600_000_000_000_000
    # One session per file, under the tool's namespace and scope.
    assert store.session_ids() == ["anthropic_memory:default:/memories/prefs.txt"]
    assert tool.history("/memories/never.txt") == []


def test_rename_keeps_both_histories(store):
    tool = SomnaMemoryTool(store=store)
    tool.create(Create("/memories/a.txt", "v1"))
    tool.str_replace(Replace("/memories/a.txt", "v1", "v2"))
    tool.rename(Rename("/memories/a.txt", "/memories/dir/b.txt"))
    assert [(v["op"], v["content"], v.get("to")) for v in tool.history("/memories/a.txt")] == [
        ("create", "v1", None),
        ("str_replace", "v2", None),
        ("rename_to", None, "/memories/dir/b.txt"),
    ]
    assert [(v["op"], v["content"], v.get("from")) for v in tool.history("/memories/dir/b.txt")] == [
        ("rename_from", "v2", "/memories/a.txt"),
    ]
    # A directory rename moves each file.
    tool.create(Create("/memories/dir/c.txt", "c"))
    tool.rename(Rename("/memories/dir", "/memories/moved"))
    assert tool.files() == {"/memories/moved/b.txt": "v2", "/memories/moved/c.txt": "c"}


# ----- races between two tools on one store file: decided by the revision check -------------


@pytest.fixture
def two_tools(path):
    """Two tools over two separate Store handles to one file: no Python object is shared."""
    a, b = somna.Store(path), somna.Store(path)
    yield SomnaMemoryTool(store=a), SomnaMemoryTool(store=b)
    a.close()
    b.close()


def interleave(tool: SomnaMemoryTool, after_first_read: Callable[[], None]) -> None:
    """Makes ``tool`` run ``after_first_read`` right after its first read of a file's newest
    version and revision: another writer gets in between its read and its write."""
    real = tool._head
    fired = []

    def head(canonical: str):
        out = real(canonical)
        if not fired:
            fired.append(canonical)
            after_first_read()
        return out

    tool._head = head  # type: ignore[method-assign]


def test_create_race_one_wins(two_tools):
    a, b = two_tools
    # a reads "absent at revision 0", then b creates the file, then a writes: the store refuses
    # a's write (its revision is stale) and a reports what the filesystem tool reports.
    interleave(a, lambda: b.create(Create("/memories/race.txt", "from b")))
    with pytest.raises(ToolError, match="^File /memories/race.txt already exists$"):
        a.create(Create("/memories/race.txt", "from a"))
    assert a.view(View("/memories/race.txt")).endswith("1\tfrom b")
    assert [v["content"] for v in a.history("/memories/race.txt")] == ["from b"]


def test_create_race_between_threads(path):
    for round in range(5):
        stores = [somna.Store(path) for _ in range(4)]
        tools = [SomnaMemoryTool(store=s) for s in stores]
        barrier = threading.Barrier(len(tools))
        outcomes: List[str] = [""] * len(tools)

        def run(i: int) -> None:
            barrier.wait()
            try:
                outcomes[i] = tools[i].create(Create(f"/memories/r{round}.txt", f"writer {i}"))
            except ToolError as e:
                outcomes[i] = f"error: {e.content}"

        threads = [threading.Thread(target=run, args=(i,)) for i in range(len(tools))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        won = [i for i, o in enumerate(outcomes) if o.startswith("File created")]
        assert len(won) == 1, outcomes
        assert all(o == f"error: File /memories/r{round}.txt already exists" for i, o in enumerate(outcomes) if i != won[0])
        (version,) = tools[0].history(f"/memories/r{round}.txt")
        assert version["content"] == f"writer {won[0]}"
        for s in stores:
            s.close()


def test_rename_race_to_one_destination(two_tools):
    a, b = two_tools
    a.create(Create("/memories/from_a.txt", "A"))
    a.create(Create("/memories/from_b.txt", "B"))
    # a reads the destination as absent; b's rename to it lands before a's claim.
    interleave(a, lambda: b.rename(Rename("/memories/from_b.txt", "/memories/dest.txt")))
    with pytest.raises(ToolError, match="^The destination /memories/dest.txt already exists$"):
        a.rename(Rename("/memories/from_a.txt", "/memories/dest.txt"))
    assert a.files() == {"/memories/dest.txt": "B", "/memories/from_a.txt": "A"}
    assert [v["op"] for v in a.history("/memories/dest.txt")] == ["rename_from"]


def test_rename_race_between_threads(path):
    stores = [somna.Store(path) for _ in range(4)]
    tools = [SomnaMemoryTool(store=s) for s in stores]
    for i in range(len(tools)):
        tools[0].create(Create(f"/memories/src{i}.txt", f"content {i}"))
    barrier = threading.Barrier(len(tools))
    outcomes: List[str] = [""] * len(tools)

    def run(i: int) -> None:
        barrier.wait()
        try:
            outcomes[i] = tools[i].rename(Rename(f"/memories/src{i}.txt", "/memories/dest.txt"))
        except ToolError as e:
            outcomes[i] = f"error: {e.content}"

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(tools))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    won = [i for i, o in enumerate(outcomes) if o.startswith("Successfully renamed")]
    assert len(won) == 1, outcomes
    for i, o in enumerate(outcomes):
        if i != won[0]:
            assert o == "error: The destination /memories/dest.txt already exists"
    expected = {f"/memories/src{i}.txt": f"content {i}" for i in range(len(tools)) if i != won[0]}
    expected["/memories/dest.txt"] = f"content {won[0]}"
    assert tools[0].files() == expected
    for s in stores:
        s.close()


def test_rename_retries_when_the_source_is_edited_meanwhile(two_tools):
    a, b = two_tools
    a.create(Create("/memories/src.txt", "old"))
    # a reads the source ("old"), then b edits it; a's claim of the destination is taken back
    # and the move retried, so the destination gets the edited text and no edit is lost.
    interleave(a, lambda: b.str_replace(Replace("/memories/src.txt", "old", "edited")))
    assert a.rename(Rename("/memories/src.txt", "/memories/dst.txt")) == (
        "Successfully renamed /memories/src.txt to /memories/dst.txt"
    )
    assert a.files() == {"/memories/dst.txt": "edited"}
    assert [v["content"] for v in a.history("/memories/dst.txt")] == ["edited"]


def test_concurrent_edits_are_not_lost(path):
    stores = [somna.Store(path) for _ in range(3)]
    tools = [SomnaMemoryTool(store=s) for s in stores]
    tools[0].create(Create("/memories/log.txt", ""))
    barrier = threading.Barrier(len(tools))

    def run(i: int) -> None:
        barrier.wait()
        for j in range(15):
            tools[i].insert(Insert("/memories/log.txt", 0, f"w{i}-{j}"))

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(tools))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = tools[0].files()["/memories/log.txt"].split("\n")
    assert sorted(x for x in lines if x) == sorted(f"w{i}-{j}" for i in range(3) for j in range(15))
    assert len(tools[0].history("/memories/log.txt")) == 1 + 45
    for s in stores:
        s.close()


# ----- paths, scopes, persistence ----------------------------------------------------------------


@pytest.mark.parametrize(
    "bad, message",
    [
        ("/memories/../secret", "Path /memories/../secret would escape /memories directory"),
        ("/memories/a/../../etc/passwd", "Path /memories/a/../../etc/passwd would escape /memories directory"),
        ("/memories/..", "Path /memories/.. would escape /memories directory"),
        ("/memories/a/../b.txt", "Path /memories/a/../b.txt is refused: it has a '..' part"),
        ("/etc/passwd", "Path must start with /memories, got: /etc/passwd"),
        ("memories/a.txt", "Path must start with /memories, got: memories/a.txt"),
        ("", "Path must start with /memories, got: "),
        ("/memoriesX/a.txt", "Path /memoriesX/a.txt is refused: it is not /memories or a path under /memories/"),
        ("/memories/a\\..\\b", "Path /memories/a\\..\\b is refused: it holds a backslash"),
        ("/memories/a\0.txt", "Path '/memories/a\\x00.txt' is refused: it holds the control character U+0000"),
        ("/memories/a\n.txt", "Path '/memories/a\\n.txt' is refused: it holds the control character U+000A"),
        ("/memories//a.txt", "Path /memories//a.txt is refused: it has an empty part"),
        ("/memories/./a.txt", "Path /memories/./a.txt is refused: it has a '.' part"),
        ("/memories/" + "x" * 300, None),
    ],
)
def test_traversal_and_malformed_paths_are_refused(store, bad, message):
    tool = SomnaMemoryTool(store=store)
    tool.create(Create("/memories/ok.txt", "ok"))
    commands = [
        Create(bad, "x"),
        View(bad),
        Replace(bad, "ok", "x"),
        Insert(bad, 0, "x"),
        Delete(bad),
        Rename(bad, "/memories/elsewhere.txt"),
        Rename("/memories/ok.txt", bad),
    ]
    for command in commands:
        with pytest.raises(ToolError) as e:
            tool.execute(command)
        if message is None:
            assert "is too long" in str(e.value.content)
        else:
            assert e.value.content == message
    # Nothing was written, and the file that was there is untouched.
    assert store.session_ids() == ["anthropic_memory:default:/memories/ok.txt"]
    assert tool.files() == {"/memories/ok.txt": "ok"}


def test_an_emptied_directory_vanishes(store):
    """The one difference from the file system: directories are not stored, so one whose last
    file went is gone (the filesystem tool keeps it, empty)."""
    tool = SomnaMemoryTool(store=store)
    tool.create(Create("/memories/dir/a.txt", "a"))
    tool.delete(Delete("/memories/dir/a.txt"))
    with pytest.raises(ToolError, match="^The path /memories/dir does not exist. Please provide a valid path.$"):
        tool.view(View("/memories/dir"))
    assert tool.view(View("/memories")).splitlines()[1:] == ["4K\t/memories"]


def test_trailing_slash_names_the_same_path(store):
    tool = SomnaMemoryTool(store=store)
    tool.create(Create("/memories/dir/a.txt", "a"))
    assert tool.view(View("/memories/")).splitlines()[1:] == ["4K\t/memories/", "4K\t/memories//dir/", "1B\t/memories//dir/a.txt"]
    assert "1\ta" in tool.view(View("/memories/dir/a.txt/"))


def test_scopes_are_kept_apart(store):
    alice = SomnaMemoryTool(store=store, scope="alice")
    bob = SomnaMemoryTool(store=store, scope="bob")
    alice.create(Create("/memories/notes.txt", "alice's"))
    bob.create(Create("/memories/notes.txt", "bob's"))
    bob.create(Create("/memories/only-bob.txt", "b"))
    assert alice.files() == {"/memories/notes.txt": "alice's"}
    assert bob.files() == {"/memories/notes.txt": "bob's", "/memories/only-bob.txt": "b"}
    with pytest.raises(ToolError, match="does not exist"):
        alice.view(View("/memories/only-bob.txt"))
    alice.delete(Delete("/memories/notes.txt"))
    assert bob.view(View("/memories/notes.txt")).endswith("1\tbob's")
    assert alice.clear_all_memory() == "All memory cleared"
    assert alice.history("/memories/notes.txt") == []
    assert bob.files() == {"/memories/notes.txt": "bob's", "/memories/only-bob.txt": "b"}
    assert sorted(store.session_ids()) == [
        "anthropic_memory:bob:/memories/notes.txt",
        "anthropic_memory:bob:/memories/only-bob.txt",
    ]
    for bad in ["", "a:b", "a/b", "a\\b", "a\nb", "x" * 65]:
        with pytest.raises(somna.InvalidError):
            SomnaMemoryTool(store=store, scope=bad)


def test_persists_across_reopening(path):
    with somna.Store(path) as s:
        tool = SomnaMemoryTool(store=s, scope="p")
        tool.create(Create("/memories/keep.txt", "one\n"))
        tool.insert(Insert("/memories/keep.txt", 1, "two"))
        tool.rename(Rename("/memories/keep.txt", "/memories/kept/keep.txt"))
        listing = tool.view(View("/memories"))
    # A new handle, and a tool given only the path: the same files, listing and history.
    tool = SomnaMemoryTool(path, scope="p")
    try:
        assert tool.view(View("/memories")) == listing
        assert tool.view(View("/memories/kept/keep.txt")) == (
            "Here's the content of /memories/kept/keep.txt with line numbers:\n     1\tone\n     2\ttwo\n     3\t"
        )
        assert [v["op"] for v in tool.history("/memories/keep.txt")] == ["create", "insert", "rename_to"]
        assert [v["op"] for v in tool.history("/memories/kept/keep.txt")] == ["rename_from"]
    finally:
        tool.store.close()


def test_file_and_directory_clashes(store):
    tool = SomnaMemoryTool(store=store)
    tool.create(Create("/memories/a.txt", "a"))
    tool.create(Create("/memories/d/x.txt", "x"))
    with pytest.raises(ToolError, match="^File /memories/d already exists$"):
        tool.create(Create("/memories/d", "clash"))
    with pytest.raises(ToolError, match="^File /memories already exists$"):
        tool.create(Create("/memories", "clash"))
    with pytest.raises(ToolError, match="/memories/a.txt is a file, not a directory"):
        tool.create(Create("/memories/a.txt/inner", "clash"))
    with pytest.raises(ToolError, match="^The path /memories/d is not a file.$"):
        tool.str_replace(Replace("/memories/d", "x", "y"))
    with pytest.raises(ToolError, match="^The destination /memories/d already exists$"):
        tool.rename(Rename("/memories/a.txt", "/memories/d"))
    with pytest.raises(ToolError, match="inside itself"):
        tool.rename(Rename("/memories/d", "/memories/d/e"))
    assert tool.files() == {"/memories/a.txt": "a", "/memories/d/x.txt": "x"}
