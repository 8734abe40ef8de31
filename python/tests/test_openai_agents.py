"""somna.openai_agents.SomnaSession against the real OpenAI Agents SDK."""

import asyncio
import json

import pytest

agents = pytest.importorskip("agents")
from agents import Agent, RunConfig, Runner, SQLiteSession, function_tool  # noqa: E402
from agents.items import ModelResponse  # noqa: E402
from agents.memory import Session, SessionSettings  # noqa: E402
from agents.models.interface import Model  # noqa: E402
from agents.usage import Usage  # noqa: E402
from openai.types.responses import (  # noqa: E402
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

import somna  # noqa: E402
from somna.openai_agents import SomnaSession  # noqa: E402


def text_message(text, n):
    return ResponseOutputMessage(
        id=f"msg_{n}",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


class FakeModel(Model):
    """A local model: answers from a script, records every input it was given."""

    def __init__(self, script):
        self.script = list(script)
        self.inputs = []

    async def get_response(self, system_instructions, input, model_settings, tools, output_schema,
                           handoffs, tracing, *, previous_response_id=None, conversation_id=None,
                           prompt=None, **kwargs):
        self.inputs.append(json.loads(json.dumps(input, default=str)))
        output = self.script.pop(0)
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):  # pragma: no cover - not used
        raise NotImplementedError


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


RUN = RunConfig(tracing_disabled=True)


def test_is_a_session(path):
    s = SomnaSession("u1", path)
    assert isinstance(s, Session)
    assert s.session_id == "u1"
    assert isinstance(s.session_settings, SessionSettings)
    assert SomnaSession("u1", path, session_settings={"limit": 3}).session_settings.limit == 3


async def test_runner_two_turns_persist(path):
    model = FakeModel(
        [
            [ResponseFunctionToolCall(type="function_call", id="fc_1", call_id="call_1",
                                      name="get_weather", arguments='{"city": "Zürich"}',
                                      status="completed")],
            [text_message("It is sunny in Zürich.", 1)],
            [text_message("You asked about Zürich.", 2)],
        ]
    )
    agent = Agent(name="assistant", instructions="Be brief.", model=model, tools=[get_weather])

    r1 = await Runner.run(agent, "Weather in Zürich?", session=SomnaSession("u1", path), run_config=RUN)
    assert r1.final_output == "It is sunny in Zürich."
    stored = await SomnaSession("u1", path).get_items()
    kinds = [i.get("type", "message") for i in stored]
    assert kinds == ["message", "function_call", "function_call_output", "message"]
    assert stored[0]["content"] == "Weather in Zürich?"
    assert stored[2]["output"] == "sunny in Zürich"

    # Turn two, through a new session object (another process would do the same).
    r2 = await Runner.run(agent, "What did I ask?", session=SomnaSession("u1", path), run_config=RUN)
    assert r2.final_output == "You asked about Zürich."
    second_input = model.inputs[2]
    assert second_input[: len(stored)] == json.loads(json.dumps(stored))
    assert second_input[-1]["content"] == "What did I ask?"
    after = await SomnaSession("u1", path).get_items()
    assert len(after) == 6
    assert after[:4] == stored
    assert after[-1]["content"][0]["text"] == "You asked about Zürich."


def _items(n, start=0):
    return [{"role": "user", "content": f"message {i}"} for i in range(start, start + n)]


async def _exercise(session):
    """The Session contract, run the same way on somna and on the SDK's SQLiteSession."""
    out = {}
    out["empty"] = await session.get_items()
    out["pop_empty"] = await session.pop_item()
    await session.add_items(_items(5))
    await session.add_items([])
    out["all"] = await session.get_items()
    out["limit2"] = await session.get_items(limit=2)
    out["limit0"] = await session.get_items(limit=0)
    out["limit_big"] = await session.get_items(limit=50)
    out["limit_neg"] = await session.get_items(limit=-1)
    out["pop"] = await session.pop_item()
    out["after_pop"] = await session.get_items()
    await session.add_items(_items(2, start=10))
    out["after_add"] = await session.get_items()
    await session.clear_session()
    out["cleared"] = await session.get_items()
    out["pop_cleared"] = await session.pop_item()
    await session.add_items(_items(1, start=20))
    out["after_clear_add"] = await session.get_items()
    return out


async def test_same_semantics_as_sqlite_session(path):
    ours = await _exercise(SomnaSession("contract", path))
    theirs = await _exercise(SQLiteSession("contract"))
    assert ours == theirs
    assert ours["limit2"] == _items(2, start=3)
    assert ours["pop"] == _items(1, start=4)[0]


async def test_session_settings_limit(path):
    s = SomnaSession("lim", path, session_settings=SessionSettings(limit=3))
    await s.add_items(_items(6))
    assert await s.get_items() == _items(3, start=3)
    assert await s.get_items(limit=5) == _items(5, start=1)
    assert await s.get_items(limit=None) == _items(3, start=3)


async def test_items_come_back_unchanged(path):
    items = [
        {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "thinking…"}],
         "encrypted_content": "gAAAA" + "x" * 500},
        {"type": "function_call", "call_id": "c", "name": "f", "arguments": '{"a": [1, 2.0]}', "id": "fc"},
        {"type": "function_call_output", "call_id": "c", "output": "ünïcödé ✓"},
        {"role": "assistant", "content": [{"type": "output_text", "text": "ok", "annotations": []}],
         "type": "message", "id": "m", "status": "completed"},
        {"z_last_key_first": 1, "a": {"nested": [None, True, 1.5e-300, 10**30]}},
    ]
    s = SomnaSession("raw", path)
    await s.add_items(items)
    back = await SomnaSession("raw", path).get_items()
    assert back == items
    assert [list(x) for x in back] == [list(x) for x in items]
    assert "session" not in json.dumps(back)  # no backend fields added


async def test_a_bad_batch_writes_nothing(path):
    s = SomnaSession("atomic", path)
    await s.add_items(_items(2))
    with pytest.raises(somna.NotSerializableError):
        await s.add_items(_items(2, start=5) + [{"content": object()}])
    with pytest.raises(somna.InvalidError):
        await s.add_items(_items(1, start=7) + [{"content": "x" * (somna.MAX_MESSAGE_BYTES + 1)}])
    with pytest.raises(ValueError):
        await s.add_items([["not", "an", "object"]])
    assert await s.get_items() == _items(2)


@pytest.mark.parametrize("bad", ["", "x" * 300, "line\nbreak"])
def test_bad_session_ids(path, bad):
    with pytest.raises(ValueError):
        SomnaSession(bad, path)


async def test_concurrent_runs_do_not_lock(path):
    sessions = [SomnaSession("busy", path) for _ in range(8)]
    await asyncio.gather(*(s.add_items(_items(3, start=10 * i)) for i, s in enumerate(sessions)))
    got = await sessions[0].get_items()
    assert len(got) == 24
    for i in range(8):  # each batch stays whole and in order
        batch = _items(3, start=10 * i)
        j = got.index(batch[0])
        assert got[j : j + 3] == batch


async def test_cancelled_add_still_completes_or_not_at_all(path):
    s = SomnaSession("cancel", path)
    task = asyncio.create_task(s.add_items(_items(50)))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(await s.get_items()) in (0, 50)


async def test_sessions_isolated_by_id_and_namespace(path):
    a, b = SomnaSession("a", path), SomnaSession("b", path)
    await a.add_items(_items(1))
    assert await b.get_items() == []
    store = somna.Store(path)
    assert store.session_ids() == ["openai_agents:a"]
    other_ns = SomnaSession("a", store=store, namespace="tenant-2:")
    assert await other_ns.get_items() == []
    await a.delete_session()
    assert store.session_ids() == []


def test_a_damaged_item_does_not_hide_the_valid_history(path, caplog):
    """The SDK's contract: a corrupt record must not hide valid history. One item's stored
    bytes are damaged in the file; get_items returns the others in order and logs the damage
    (never silently), the strict Store read raises CorruptError naming it, and
    session_items_lossy names its sequence number."""
    import logging

    needle = b"DAMAGE-ME-0123456789"

    async def fill():
        s = SomnaSession("d1", path)
        await s.add_items([{"role": "user", "content": f"item {i}"} for i in range(3)])
        await s.add_items([{"role": "user", "content": needle.decode()}])
        await s.add_items([{"role": "user", "content": "item 4"}])
        s.close()

    asyncio.run(fill())
    data = bytearray(path.read_bytes())
    at = data.find(needle)
    assert at >= 0
    while at >= 0:  # every copy of the page, live or freed
        data[at + 3] ^= 0x01
        at = data.find(needle, at + 1)
    path.write_bytes(bytes(data))

    async def read():
        s = SomnaSession("d1", path)
        try:
            return await s.get_items(), await s.get_items(2)
        finally:
            s.close()

    with caplog.at_level(logging.ERROR, logger="somna"):
        items, last2 = asyncio.run(read())
    assert [i["content"] for i in items] == ["item 0", "item 1", "item 2", "item 4"]
    assert [i["content"] for i in last2] == ["item 4"]  # the window counts the damaged record
    assert "damaged item(s) skipped (seq 3)" in caplog.text

    s = somna.Store(path)
    try:
        with pytest.raises(somna.CorruptError):
            s.session_items("openai_agents:d1")
        valid, unreadable = s.session_items_lossy("openai_agents:d1")
        assert len(valid) == 4 and unreadable == [3]
    finally:
        s.close()


# ----- the closed-session contract: after close(), every call raises RuntimeError ----------

# Every method of SomnaSession, called with valid arguments.
CALLS = {
    "get_items": lambda s: s.get_items(),
    "get_items(limit)": lambda s: s.get_items(limit=2),
    "add_items": lambda s: s.add_items(_items(1)),
    "add_items([])": lambda s: s.add_items([]),
    "pop_item": lambda s: s.pop_item(),
    "clear_session": lambda s: s.clear_session(),
    "delete_session": lambda s: s.delete_session(),
}
# The SDK's Session protocol: SQLiteSession has these (no delete_session).
SDK_CALLS = {k: v for k, v in CALLS.items() if k != "delete_session"}


@pytest.mark.parametrize("call", list(SDK_CALLS))
async def test_sqlite_session_raises_runtime_error_after_close(call):
    """The contract SomnaSession follows, checked on the installed SDK itself."""
    s = SQLiteSession("closed")
    await s.add_items(_items(2))
    s.close()
    with pytest.raises(RuntimeError):
        await SDK_CALLS[call](s)


@pytest.mark.parametrize("call", list(CALLS))
async def test_every_method_raises_closed_error_after_close(path, call):
    s = SomnaSession("closed", path)
    await s.add_items(_items(2))
    s.close()
    assert s.closed
    with pytest.raises(somna.ClosedError, match="closed") as e:
        await CALLS[call](s)
    assert isinstance(e.value, RuntimeError)
    assert isinstance(e.value, somna.Error)
    assert not isinstance(e.value, ValueError)
    # The failed call changed nothing.
    assert await SomnaSession("closed", path).get_items() == _items(2)


async def test_add_items_empty_list_after_close_raises(path):
    s = SomnaSession("empty", path)
    await s.add_items([])  # open: the empty batch is a no-op
    s.close()
    with pytest.raises(RuntimeError):
        await s.add_items([])
    with pytest.raises(somna.ClosedError):
        await s.add_items(iter(()))


async def test_close_twice_is_harmless_and_stays_closed(path):
    s = SomnaSession("twice", path)
    await s.add_items(_items(1))
    s.close()
    s.close()
    assert s.closed and s.store.closed
    assert "closed" in repr(s)
    with pytest.raises(somna.ClosedError):
        await s.get_items()
    s.close()
    with pytest.raises(somna.ClosedError):
        await s.pop_item()


async def test_close_before_first_use_then_use_raises(path):
    s = SomnaSession("unused", path)
    s.close()
    assert s.closed
    for call in CALLS.values():
        with pytest.raises(somna.ClosedError):
            await call(s)
    assert not path.exists() or somna.Store(path).session_ids() == []


def test_concurrent_close_from_8_threads_raises_nothing_and_leaves_it_closed(path):
    import threading

    for round_ in range(20):
        s = SomnaSession(f"race-{round_}", path)
        asyncio.run(s.add_items(_items(1)))
        barrier = threading.Barrier(8)
        errors = []

        def closer():
            try:
                barrier.wait()
                s.close()
            except BaseException as e:  # noqa: BLE001 - any exception fails the test
                errors.append(e)

        threads = [threading.Thread(target=closer) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert s.closed and s.store.closed
        with pytest.raises(somna.ClosedError):
            asyncio.run(s.get_items())
        with pytest.raises(somna.ClosedError):
            asyncio.run(s.add_items([]))
    assert somna.Store(path).session_ids() == sorted(f"openai_agents:race-{i}" for i in range(20))


async def test_a_store_passed_in_stays_open_after_the_session_closes(path):
    store = somna.Store(path)
    s = SomnaSession("shared", store=store)
    await s.add_items(_items(2))
    s.close()
    assert s.closed
    assert not store.closed
    assert store.session_items("openai_agents:shared") == _items(2)
    with pytest.raises(somna.ClosedError):
        await s.get_items()
    # Another session on the same store still works.
    other = SomnaSession("shared", store=store)
    await other.add_items(_items(1, start=2))
    assert await other.get_items() == _items(3)
    store.close()


async def test_the_store_a_session_opened_is_closed_with_it(path):
    s = SomnaSession("owned", path)
    await s.add_items(_items(1))
    s.close()
    assert s.store.closed
    with pytest.raises(somna.ClosedError):
        s.store.session_items("openai_agents:owned")
