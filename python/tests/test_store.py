"""somna.Store: the memory verbs, the session verbs and their errors."""

import json
import os

import pytest

import somna


def test_store_creates_missing_file_and_parents(tmp_path):
    p = tmp_path / "a" / "b" / "m.redb"
    s = somna.Store(p)
    assert p.is_file()
    assert s.path == p
    assert s.count() == 0
    # An existing store opens as it is.
    s.note("kept")
    s.close()
    assert somna.Store(p).count() == 1


def test_create_false_requires_a_store(tmp_path):
    with pytest.raises(somna.NotFoundError) as e:
        somna.Store(tmp_path / "missing.redb", create=False)
    assert isinstance(e.value, FileNotFoundError)
    assert "no somna store" in str(e.value)
    assert not (tmp_path / "missing.redb").exists()


def test_accepts_pathlike_and_str(tmp_path):
    somna.Store(str(tmp_path / "s.redb")).note("a")
    assert somna.Store(tmp_path / "s.redb").count() == 1


def test_bad_options(tmp_path):
    with pytest.raises(ValueError):
        somna.Store(tmp_path / "x.redb", busy_timeout=-1)
    with pytest.raises(ValueError):
        somna.Store(tmp_path / "x.redb", busy_timeout=float("nan"))
    with pytest.raises(ValueError):
        somna.Store("")


def test_note_wake_recall(store):
    assert store.note("the user prefers tabs") == 0
    assert store.note("deploys go through staging", kind="decision", source="user:alice") == 1
    text = store.wake()
    assert "#0 " in text and "the user prefers tabs" in text
    # A Python host drives the loop itself: by default no shell command is named.
    assert text.endswith("You are awake.\n1 merge is pending.\n")
    r = store.recall("staging")
    assert r["total"] == 1
    m = r["matches"][0]
    assert m["id"] == 1 and m["kind"] == "decision" and m["source"] == "user:alice"
    assert m["text"] == "deploys go through staging"
    assert r["text"].endswith("1 match.\n")
    assert store.memory(0)["text"] == "the user prefers tabs"
    assert [m["id"] for m in store.memories()] == [0, 1]
    assert store.scopes() == ["default"]
    assert store.stats() == [{"scope": "default", "memories": 2, "summaries": 0, "pending": 1}]


def test_scopes_are_separate(store):
    store.note("a", scope="project:acme")
    store.note("b", scope="user")
    assert store.count("project:acme") == 1
    assert store.recall("b", scope="project:acme")["total"] == 0
    assert store.scopes() == ["project:acme", "user"]
    with pytest.raises(ValueError):
        store.note("x", scope="bad scope!")


def test_note_many_is_one_commit_and_idempotent(store):
    out = store.note_many(
        ["one", {"text": "two", "kind": "task", "status": "proposed", "observed_us": 86_400_000_000}],
        key="batch-1",
    )
    assert out == {"first": 0, "count": 2, "replayed": False}
    again = store.note_many(
        ["one", {"text": "two", "kind": "task", "status": "proposed", "observed_us": 86_400_000_000}],
        key="batch-1",
    )
    assert again == {"first": 0, "count": 2, "replayed": True}
    assert store.count() == 2
    assert store.memory(1)["status"] == "proposed"
    assert store.memory(1)["line"] == "#1 1970-01-02 two"
    with pytest.raises(somna.ConflictError):
        store.note_many(["other"], key="batch-1")
    # All or none: one bad memory and nothing is written.
    with pytest.raises(ValueError):
        store.note_many(["fine", "bad\nline"])
    with pytest.raises(ValueError):
        store.note_many([{"text": "x", "colour": "red"}])
    with pytest.raises(ValueError):
        store.note_many([{"text": "x", "kind": "rumour"}])
    with pytest.raises(TypeError):
        store.note_many("not a list")
    with pytest.raises(ValueError):
        store.note_many([])
    assert store.count() == 2


def test_note_rejects_bad_text(store):
    for bad in ["", "   ", "two\nlines", "x" * 281, "bidi\u202eoverride"]:
        with pytest.raises(somna.InvalidError) as e:
            store.note(bad)
        assert isinstance(e.value, ValueError)
        assert str(e.value).startswith("invalid text")
    with pytest.raises(UnicodeEncodeError):
        store.note("lone \ud800 surrogate")
    with pytest.raises(ValueError):
        store.note("x", supersedes=[5])
    assert store.count() == 0


def test_merge_cycle(store):
    for i in range(4):
        store.note(f"fact {i}")
    assert store.pending() == ["0-1", "2-3", "0-3"]
    p = store.prompt()
    assert p["block"] == "0-1"
    assert [i["text"] for i in p["inputs"]] == ["fact 0", "fact 1"]
    assert "Run:" not in p["text"]  # a Python host answers with store.nap (issue 22)
    assert "somna --db " in store.prompt(hints="cli")["text"]
    with pytest.raises(somna.WrongBlockError) as e:
        store.nap("2-3", "too early")
    assert e.value.next_block == "0-1"
    assert isinstance(e.value, ValueError)
    assert store.nap("0-1", "facts 0 and 1") == "saved"
    assert store.nap("0-1", "again") == "already_settled"
    assert [p["block"] for p in store.prompts(5)][0] == "2-3"
    assert store.nap_many([("2-3", "facts 2 and 3")]) == [("2-3", "saved")]
    assert store.nap("0-3", "facts 0 to 3") == "saved"
    assert store.pending() == []
    view = store.wake_view(lines=1)
    assert view["total"] == 4
    assert [i["type"] for i in view["items"]] == ["summary"]
    assert view["items"][0]["block"] == "0-3"
    assert view["lines"] == ["#0-3 facts 0 to 3"]
    zoom = store.zoom("0-3")
    assert [(z["type"], z["block"]) for z in zoom] == [("summary", "0-1"), ("summary", "2-3")]
    assert [z["type"] for z in store.zoom("0-1")] == ["memory", "memory"]
    assert store.forget("0-1") == ["0-1", "0-3"]
    assert store.pending() == ["0-1", "0-3"]
    assert [z["type"] for z in store.zoom("0-3")] == ["missing", "summary"]
    with pytest.raises(somna.OutOfRangeError):
        store.zoom("8-15")
    with pytest.raises(ValueError):
        store.zoom("3-4")
    with pytest.raises(ValueError):
        store.nap("0-1", "")


def test_export_import_round_trip(store, tmp_path):
    store.note("a")
    store.note("b", scope="other")
    store.nap("0-1", "x") if store.pending() else None
    text = store.export()
    lines = [json.loads(line) for line in text.splitlines()]
    assert lines[0]["type"] == "store"
    assert {(x.get("scope"), x.get("text")) for x in lines if x["type"] == "memory"} == {
        ("default", "a"),
        ("other", "b"),
    }
    fresh = somna.Store(tmp_path / "copy.redb")
    assert fresh.import_jsonl(text) == {"scopes": 2, "memories": 2, "summaries": 0}
    assert fresh.export() == text
    with pytest.raises(somna.ConflictError):
        fresh.import_jsonl(text)
    with pytest.raises(ValueError):
        fresh.import_jsonl("{not json}\n")


def test_config(store):
    c = store.config()
    assert c["entry_bytes"] == 280 and c["wake_lines"] == 96
    assert store.set_config("ENTRY_BYTES", 400) == 400
    store.note("y" * 400)
    with pytest.raises(ValueError):
        store.set_config("ENTRY_BYTES", "huge")
    with pytest.raises(ValueError):
        store.set_config("NOPE", 1)


def test_verify(store):
    store.note("a")
    store.session_save("s", [{"role": "user", "content": "hi"}])
    r = store.verify()
    assert r["ok"] and r["engine_intact"] and r["problems"] == []
    assert r["memories"] == 1 and r["sessions"] == 1


def test_close_and_context_manager(path):
    with somna.Store(path) as s:
        s.note("a")
        assert not s.closed
    assert s.closed
    with pytest.raises(somna.ClosedError, match="closed"):
        s.count()
    s.close()  # twice is fine
    assert "closed" in repr(s)
    assert somna.Store(path).count() == 1


def test_closed_error_is_an_exported_runtime_error():
    assert somna.ClosedError is somna._errors.ClosedError
    assert "ClosedError" in somna.__all__ and "ClosedError" in somna._errors.__all__
    assert issubclass(somna.ClosedError, somna.Error)
    assert issubclass(somna.ClosedError, RuntimeError)
    assert not issubclass(somna.ClosedError, ValueError)


# Every method of Store that touches the file, called with valid arguments.
STORE_CALLS = {
    "note": lambda s: s.note("x"),
    "note_many": lambda s: s.note_many(["x"]),
    "count": lambda s: s.count(),
    "memory": lambda s: s.memory(0),
    "memories": lambda s: s.memories(),
    "scopes": lambda s: s.scopes(),
    "stats": lambda s: s.stats(),
    "wake": lambda s: s.wake(),
    "wake_view": lambda s: s.wake_view(),
    "zoom": lambda s: s.zoom("0-1"),
    "recall": lambda s: s.recall("x"),
    "pending": lambda s: s.pending(),
    "prompt": lambda s: s.prompt(),
    "prompts": lambda s: s.prompts(1),
    "nap": lambda s: s.nap("0-1", "x"),
    "nap_many": lambda s: s.nap_many([("0-1", "x")]),
    "forget": lambda s: s.forget("0-1"),
    "export": lambda s: s.export(),
    "import_jsonl": lambda s: s.import_jsonl(""),
    "config": lambda s: s.config(),
    "set_config": lambda s: s.set_config("WAKE_LINES", 10),
    "verify": lambda s: s.verify(),
    "session_save": lambda s: s.session_save("s", [{"n": 1}]),
    "session_load": lambda s: s.session_load("s"),
    "session_load_with_revision": lambda s: s.session_load_with_revision("s"),
    "session_append": lambda s: s.session_append("s", [{"n": 1}]),
    "session_items": lambda s: s.session_items("s"),
    "session_items_lossy": lambda s: s.session_items_lossy("s"),
    "session_pop": lambda s: s.session_pop("s"),
    "session_clear": lambda s: s.session_clear("s"),
    "session_delete": lambda s: s.session_delete("s"),
    "session_prune": lambda s: s.session_prune("s"),
    "session_info": lambda s: s.session_info("s"),
    "session_list": lambda s: s.session_list(),
    "session_ids": lambda s: s.session_ids(),
    "session_archived": lambda s: s.session_archived("s"),
}


def test_store_calls_cover_every_method():
    assert set(STORE_CALLS) == set(somna._ASYNC_METHODS)


@pytest.mark.parametrize("name", list(STORE_CALLS))
def test_every_store_method_raises_closed_error_after_close(path, name):
    s = somna.Store(path)
    s.session_append("s", [{"n": 0}])
    s.close()
    with pytest.raises(somna.ClosedError, match="closed") as e:
        STORE_CALLS[name](s)
    assert isinstance(e.value, RuntimeError)
    assert not isinstance(e.value, somna.InvalidError)
    with somna.Store(path) as again:  # the failed call wrote nothing
        assert again.session_items("s") == [{"n": 0}] and again.count() == 0


async def test_async_store_raises_closed_error_after_close(path):
    s = somna.AsyncStore(path)
    await s.close()
    await s.close()  # twice is fine
    assert s.closed
    with pytest.raises(somna.ClosedError):
        await s.session_items("s")
    with pytest.raises(somna.ClosedError):
        await s.note("x")


def test_handles_to_one_file_share_it(path):
    a = somna.Store(path)
    b = somna.Store(path)
    a.note("from a")
    b.note("from b")
    a.close()
    assert b.count() == 2  # closing one handle leaves the other working


def test_busy_error_is_bounded(path):
    owner = somna.Store(path, exclusive=True)
    with pytest.raises(somna.BusyError) as e:
        somna.Store(path, exclusive=True, busy_timeout=0.2)
    assert 0.15 <= e.value.waited < 5
    assert "busy" in str(e.value)
    assert isinstance(e.value, TimeoutError)
    owner.close()
    somna.Store(path, exclusive=True, busy_timeout=0.2).note("now free")


def test_garbage_file_is_an_error_and_left_alone(tmp_path):
    p = tmp_path / "garbage.redb"
    data = os.urandom(8192)
    p.write_bytes(data)
    with pytest.raises(somna.Error):
        somna.Store(p)
    assert p.read_bytes() == data


def test_redb_file_that_is_not_a_store(tmp_path):
    # A JSON file, a text file: never taken for a store nor overwritten.
    p = tmp_path / "notes.txt"
    p.write_text("hello\n")
    with pytest.raises(somna.Error):
        somna.Store(p)
    assert p.read_text() == "hello\n"


# ----- sessions ----------------------------------------------------------------------------


def test_session_save_load_archive(store):
    msgs = [{"role": "system", "content": "be brief"}] + [
        {"role": "user", "content": f"q{i}"} for i in range(5)
    ]
    out = store.session_save("s1", msgs)
    assert out == {"revision": out["revision"], "kept": 0, "written": 6, "archived": 0}
    assert store.session_load("s1") == msgs
    assert store.session_load("nope") is None
    # Appending one: only it is written.
    out = store.session_save("s1", msgs + [{"role": "assistant", "content": "a"}])
    assert (out["kept"], out["written"], out["archived"]) == (6, 1, 0)
    # Trimming the front keeps the system message: the dropped ones go to the archive.
    trimmed = [msgs[0]] + msgs[4:] + [{"role": "assistant", "content": "a"}]
    out = store.session_save("s1", trimmed)
    assert (out["written"], out["archived"]) == (0, 3)
    assert store.session_load("s1") == trimmed
    assert [a["message"] for a in store.session_archived("s1")] == msgs[1:4]
    info = store.session_info("s1")
    assert info["count"] == 4 and info["archived"] == 3
    assert store.session_prune("s1") == 3
    assert store.session_archived("s1") == []


def test_session_expected_revision(store):
    items, rev = store.session_load_with_revision("s")
    assert items is None and rev == 0
    r1 = store.session_save("s", [{"a": 1}], expected_revision=0)["revision"]
    with pytest.raises(somna.ConflictError):
        store.session_save("s", [{"a": 2}], expected_revision=0)
    items, rev = store.session_load_with_revision("s")
    assert items == [{"a": 1}] and rev == r1
    store.session_save("s", [{"a": 3}], expected_revision=rev)
    assert store.session_load("s") == [{"a": 3}]


def test_session_append_items_pop_clear_delete(store):
    assert store.session_items("s") == []
    out = store.session_append("s", [{"n": 1}, {"n": 2}], key="k1")
    assert (out["first_index"], out["count"], out["replayed"]) == (0, 2, False)
    assert store.session_append("s", [{"n": 1}, {"n": 2}], key="k1")["replayed"] is True
    with pytest.raises(somna.ConflictError):
        store.session_append("s", [{"n": 9}], key="k1")
    store.session_append("s", [{"n": 3}])
    assert store.session_items("s") == [{"n": 1}, {"n": 2}, {"n": 3}]
    assert store.session_items("s", 2) == [{"n": 2}, {"n": 3}]
    assert store.session_items("s", 0) == []
    assert store.session_items("s", raw=True) == ['{"n":1}', '{"n":2}', '{"n":3}']
    assert store.session_pop("s") == {"n": 3}
    assert store.session_clear("s") == 2
    assert store.session_pop("s") is None
    assert store.session_pop("never") is None
    assert store.session_delete("s") is True
    assert store.session_delete("s") is False
    assert store.session_info("s") is None


def test_session_list_and_ids(store):
    for sid in ["b:2", "a:1", "b:1", "c"]:
        store.session_append(sid, [{"x": sid}])
    assert store.session_ids() == ["a:1", "b:1", "b:2", "c"]
    assert [i["id"] for i in store.session_list("b:")] == ["b:1", "b:2"]
    assert [i["id"] for i in store.session_list("", after="b:1", limit=1)] == ["b:2"]


def test_items_round_trip_unchanged(store):
    item = {
        "type": "function_call",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city": "Z\\u00fcrich"}',
        "nested": {"z": [1, 2.5, -0.0, 1e300, None, True], "a": "ünïcödé 🎉", "": {}},
        "big": 2**70,
    }
    store.session_append("s", [item])
    (back,) = store.session_items("s")
    assert back == item
    assert list(back) == list(item)  # key order kept
    assert list(back["nested"]) == ["z", "a", ""]
    # A str is taken as JSON text and kept byte for byte (after removing whitespace).
    store.session_append("raw", ['{"b": 1, "a": 2.50}'])
    assert store.session_items("raw", raw=True) == ['{"b":1,"a":2.50}']


@pytest.mark.parametrize(
    "bad",
    [
        [{"x": object()}],
        [{"x": float("nan")}],
        [{"x": b"bytes"}],
        [{("tuple", "key"): 1}],
        [object()],
    ],
)
def test_unserializable_items_write_nothing(store, bad):
    store.session_append("s", [{"ok": 1}])
    before = store.session_info("s")
    with pytest.raises(somna.NotSerializableError) as e:
        store.session_append("s", [{"fine": 2}] + bad)
    assert isinstance(e.value, ValueError) and isinstance(e.value, TypeError)
    assert "item 1 is not JSON-serializable" in str(e.value)
    with pytest.raises(somna.NotSerializableError):
        store.session_save("s", [{"ok": 1}] + bad)
    assert store.session_info("s") == before
    assert store.session_items("s") == [{"ok": 1}]


def test_circular_item_is_refused(store):
    a = {}
    a["self"] = a
    with pytest.raises(somna.NotSerializableError):
        store.session_append("s", [a])
    assert store.session_info("s") is None


def test_non_object_items_are_refused(store):
    for bad in [[[1, 2]], ["[1]"], ["{not json"], [1], ["null"]]:
        with pytest.raises(ValueError):
            store.session_append("s", bad)
    with pytest.raises(TypeError):
        store.session_append("s", '{"a": 1}')  # a str, not a list of items
    assert store.session_info("s") is None


def test_huge_item_is_refused_and_nothing_written(store):
    store.session_append("s", [{"ok": 1}])
    huge = {"content": "x" * (somna.MAX_MESSAGE_BYTES + 1)}
    with pytest.raises(somna.InvalidError, match="limit"):
        store.session_append("s", [{"fine": 1}, huge])
    with pytest.raises(somna.InvalidError, match="limit"):
        store.session_save("s", [{"ok": 1}, huge])
    assert store.session_items("s") == [{"ok": 1}]
    # Just under the limit is fine.
    big = {"content": "y" * (somna.MAX_MESSAGE_BYTES - 100)}
    store.session_append("s", [big])
    assert store.session_items("s", 1) == [big]


@pytest.mark.parametrize("bad", ["", "x" * 257, "tab\tid", "nul\0id", "new\nline"])
def test_bad_session_ids(store, bad):
    with pytest.raises(somna.InvalidError):
        store.session_append(bad, [{"a": 1}])
    with pytest.raises(somna.InvalidError):
        store.session_save(bad, [{"a": 1}])
    with pytest.raises(somna.InvalidError):
        store.session_items(bad)
    assert store.session_ids() == []


def test_non_str_session_id(store):
    with pytest.raises(TypeError):
        store.session_append(42, [{"a": 1}])
    with pytest.raises(UnicodeEncodeError):
        store.session_append("bad\ud800", [{"a": 1}])
    assert store.session_ids() == []


def test_damaged_store_raises_not_panics(path):
    s = somna.Store(path)
    s.session_save("s", [{"text": "kept"}])
    s.note("kept")
    s.close()
    data = bytearray(path.read_bytes())
    data[len(data) // 2 :] = b"\xff" * (len(data) - len(data) // 2)
    path.write_bytes(bytes(data))
    for _ in range(2):  # a somna error (not a panic), and never a silently empty store
        with pytest.raises(somna.Error):
            somna.Store(path, busy_timeout=1.0).session_items("s")
    after = path.read_bytes()
    # redb's recovery attempt may rewrite its allocator metadata and drop or add pages at the
    # end of the damaged file; it stays a redb file (a known limitation, see
    # docs/reliability.md section 6).
    assert after[:4] == b"redb"


def test_hints_name_the_store_the_tool_or_nothing(tmp_path):
    """Issue 22, point 6: a store at team/memory.redb never tells its agent to run a bare
    `somna nap` (which would act on the default store)."""
    path = tmp_path / "team" / "memory.redb"
    s = somna.Store(path)
    s.note("one", scope="work")
    s.note("two", scope="work")
    assert s.wake("work").endswith("You are awake.\n1 merge is pending.\n")
    assert "Run:" not in s.prompt("work")["text"]
    cli = s.wake("work", hints="cli")
    assert cli.endswith(f"1 merge is pending. Run: somna --db {path} --scope work nap\n")
    assert f"Run: somna --db {path} --scope work nap 0-1 - <<'EOF'" in s.prompt("work", hints="cli")["text"]
    tools = s.prompt("work", hints="tools")["text"]
    assert "Run:" not in tools
    assert tools.endswith("Answer with the tool call `nap` with scope `work`, block `0-1` and text `<your line>`.\n")
    assert s.wake(hints="cli").startswith(f"No memories yet. Record the first with: somna --db {path} note")
    assert s.wake("work", cmd="./somna").endswith("Run: ./somna nap\n")
    with pytest.raises(ValueError):
        s.wake(hints="shell")
    s.close()
