"""somna.pure_agents.SomnaMemory against the real pure_agents package."""

import copy
import json

import pytest

pure_agents = pytest.importorskip("pure_agents")
from pure_agents import Agent, JSONMemory, Memory, Message, tool  # noqa: E402

import somna  # noqa: E402
from somna.pure_agents import SomnaMemory  # noqa: E402


def weather_call(call_id="call_1", city="Zürich"):
    return {
        "id": call_id,
        "type": "function",
        "function": {"name": "weather", "arguments": json.dumps({"city": city})},
    }


CONVERSATION = [
    Message(role="system", content="You are terse."),
    Message(role="user", content="Wie ist das Wetter in Zürich? 🌦"),
    Message(role="assistant", content="", tool_calls=[weather_call(), weather_call("call_2", "東京")]),
    Message(role="tool", content="12°C, Regen", tool_call_id="call_1", name="weather"),
    Message(role="tool", content='{"temp": 18, "sky": "晴れ"}', tool_call_id="call_2", name="weather"),
    Message(role="assistant", content="Zürich: 12°C, rain.\nTokyo: 18°C, clear."),
]


def test_is_a_pure_agents_memory(path):
    m = SomnaMemory(path)
    assert isinstance(m, Memory)
    assert not getattr(SomnaMemory, "__abstractmethods__", None)


def test_message_round_trip(path):
    m = SomnaMemory(path)
    m.save("s1", CONVERSATION)
    back = m.load("s1")
    assert back == CONVERSATION
    assert [x.to_dict() for x in back] == [x.to_dict() for x in CONVERSATION]
    # Empty optional fields stay empty (to_dict leaves them out; from_dict restores defaults).
    assert back[0].tool_calls == [] and back[0].tool_call_id is None and back[0].name is None
    assert back[2].tool_calls[1]["function"]["arguments"] == '{"city": "\\u6771\\u4eac"}'
    # A new object (another process) sees the same.
    assert SomnaMemory(path).load("s1") == CONVERSATION


def test_same_results_as_json_memory(path, tmp_path):
    ours, theirs = SomnaMemory(path), JSONMemory(tmp_path / "json")
    for mem in (ours, theirs):
        mem.save("b", CONVERSATION[:2])
        mem.save("a", CONVERSATION)
        mem.save("a", CONVERSATION[:1] + CONVERSATION[3:])
        mem.delete("missing")
    assert ours.load("a") == theirs.load("a")
    assert ours.load("b") == theirs.load("b")
    assert ours.load("missing") is None and theirs.load("missing") is None
    assert ours.list_sessions() == sorted(theirs.list_sessions()) == ["a", "b"]
    ours.delete("a")
    theirs.delete("a")
    assert ours.load("a") is None and theirs.load("a") is None
    assert ours.list_sessions() == ["b"]


def test_empty_session_is_not_missing(path):
    m = SomnaMemory(path)
    m.save("empty", [])
    assert m.load("empty") == []
    assert m.list_sessions() == ["empty"]


def test_sessions_are_isolated_from_other_adapters(path):
    store = somna.Store(path)
    store.session_append("openai_agents:x", [{"role": "user", "content": "hi"}])
    store.session_append("plain", [{"a": 1}])
    m = SomnaMemory(store=store)
    m.save("mine", CONVERSATION[:1])
    assert m.list_sessions() == ["mine"]
    other = SomnaMemory(store=store, namespace="team-b:")
    assert other.list_sessions() == []
    assert other.load("mine") is None


def test_trimmed_history_is_archived_not_lost(path):
    m = SomnaMemory(path)
    history = CONVERSATION[:2]
    m.save("s", history)
    for i in range(10):
        history = history + [Message(role="user", content=f"q{i}"), Message(role="assistant", content=f"a{i}")]
        # What Agent(max_messages=6) does: keep the system message and the newest 5.
        trimmed = [history[0]] + history[-5:]
        m.save("s", trimmed)
        history = trimmed
    assert m.load("s") == history
    live = m.load("s")
    archived = m.archived("s")
    every = {(x.role, x.content) for x in live + archived}
    assert ("user", CONVERSATION[1].content) in every
    for i in range(10):
        assert ("user", f"q{i}") in every and ("assistant", f"a{i}") in every
    assert m.prune("s") == len(archived)
    assert m.archived("s") == []


class FakeClient:
    """Stands in for pure_agents' LLM client: answers from a script, records what it saw."""

    def __init__(self, replies):
        self.replies = list(replies)
        self.seen = []
        self.last_input_tokens = 0
        self.last_output_tokens = 0

    async def chat(self, model, messages, tools=None, tool_choice=None, images=None):
        self.seen.append(copy.deepcopy([m.to_dict() for m in messages]))
        self.last_input_tokens, self.last_output_tokens = 10, 5
        return self.replies.pop(0)


@tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def make_agent(memory, replies, **kw):
    agent = Agent(api_key="not-used", tools=[weather], session="trip", memory=memory, **kw)
    agent.client = FakeClient(replies)
    return agent


def test_agent_saves_and_reloads_through_somna(path):
    first = make_agent(
        SomnaMemory(path),
        [
            Message(role="assistant", content="", tool_calls=[weather_call("c1", "Lisboa")]),
            Message(role="assistant", content="It is sunny in Lisboa."),
        ],
    )
    assert first.run_sync("Weather in Lisboa?") == "It is sunny in Lisboa."
    saved = SomnaMemory(path).load("trip")
    assert [m.role for m in saved] == ["system", "user", "assistant", "tool", "assistant"]
    assert saved[3].content == "sunny in Lisboa" and saved[3].tool_call_id == "c1"
    assert saved == first.messages

    # A new agent (a restarted process) picks the conversation up where it was.
    second = make_agent(SomnaMemory(path), [Message(role="assistant", content="You asked about Lisboa.")])
    assert second.messages == saved
    assert second.run_sync("What did I ask?") == "You asked about Lisboa."
    sent = second.client.seen[0]
    assert sent[:5] == [m.to_dict() for m in saved]
    assert sent[-1] == {"role": "user", "content": "What did I ask?"}
    assert len(SomnaMemory(path).load("trip")) == 7

    second.clear()
    assert SomnaMemory(path).load("trip") is None


def test_agent_with_max_messages_loses_nothing(path):
    memory = SomnaMemory(path)
    replies = [Message(role="assistant", content=f"answer {i}") for i in range(8)]
    agent = make_agent(memory, replies, max_messages=4)
    for i in range(8):
        agent.run_sync(f"question {i}")
    live = memory.load("trip")
    assert live == agent.messages
    assert live[0].role == "system" and len(live) <= 5
    kept = {m.content for m in live} | {m.content for m in memory.archived("trip")}
    for i in range(8):
        assert f"question {i}" in kept and f"answer {i}" in kept


def test_strict_mode_detects_a_concurrent_writer(path):
    a, b = SomnaMemory(path, strict=True), SomnaMemory(path, strict=True)
    a.save("s", CONVERSATION[:1])
    a.load("s")
    b.load("s")
    b.save("s", CONVERSATION[:2])
    with pytest.raises(somna.ConflictError):
        a.save("s", CONVERSATION[:1] + [Message(role="user", content="lost?")])
    assert a.load("s") == CONVERSATION[:2]
    a.save("s", CONVERSATION[:3])  # after a fresh load it goes through
    assert b.load("s") == CONVERSATION[:3]


def test_last_writer_wins_but_the_other_is_archived(path):
    a, b = SomnaMemory(path), SomnaMemory(path)
    base = CONVERSATION[:2]
    a.save("s", base)
    a.save("s", base + [Message(role="user", content="from a")])
    b.save("s", base + [Message(role="user", content="from b")])
    assert [m.content for m in a.load("s")][-1] == "from b"
    assert [m.content for m in a.archived("s")] == ["from a"]


def test_bad_messages_write_nothing(path):
    m = SomnaMemory(path)
    m.save("s", CONVERSATION[:2])
    for bad in (
        [Message(role="user", content=object())],
        [Message(role="user", content="x", tool_calls=[{"id": object()}])],
        [Message(role="user", content=float("nan"))],
    ):
        with pytest.raises(somna.NotSerializableError):
            m.save("s", CONVERSATION[:2] + bad)
    with pytest.raises(TypeError):
        m.save("s", CONVERSATION[:2] + ["not a message"])
    with pytest.raises(ValueError):
        m.save("s", [{"content": "no role"}])
    huge = Message(role="user", content="x" * (somna.MAX_MESSAGE_BYTES + 1))
    with pytest.raises(somna.InvalidError):
        m.save("s", CONVERSATION[:2] + [huge])
    assert m.load("s") == CONVERSATION[:2]
    assert m.archived("s") == []


@pytest.mark.parametrize("bad", ["", "x" * 300, "a\nb", "nul\0"])
def test_bad_session_ids(path, bad):
    m = SomnaMemory(path)
    with pytest.raises(ValueError):
        m.save(bad, CONVERSATION)
    with pytest.raises(ValueError):
        m.load(bad)
    assert m.list_sessions() == []


def test_non_str_session_id(path):
    with pytest.raises(TypeError):
        SomnaMemory(path).save(7, CONVERSATION)


def test_corrupt_item_is_an_error_not_none(path):
    store = somna.Store(path)
    store.session_append("pure_agents:s", [{"role": "user", "content": "ok"}, {"no": "role"}])
    with pytest.raises(somna.CorruptError):
        SomnaMemory(store=store).load("s")


def test_default_path_is_somna_db(tmp_path, monkeypatch):
    monkeypatch.setenv("SOMNA_DB", str(tmp_path / "env.redb"))
    SomnaMemory().save("s", CONVERSATION[:1])
    assert (tmp_path / "env.redb").is_file()


async def test_async_twins(path):
    m = SomnaMemory(path)
    await m.asave("s", CONVERSATION)
    assert await m.aload("s") == CONVERSATION
    await m.asave("s", CONVERSATION[:1])
    assert await m.aarchived("s") == CONVERSATION[1:]
    assert await m.alist_sessions() == ["s"]
    await m.adelete("s")
    assert await m.aload("s") is None


def test_shared_between_threads(path):
    import threading

    m = SomnaMemory(path)

    def work(t):
        for i in range(20):
            m.save(f"t{t}", CONVERSATION[: 1 + i % len(CONVERSATION)])

    ts = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert m.list_sessions() == ["t0", "t1", "t2", "t3"]
    assert all(m.load(f"t{t}") == CONVERSATION[: 1 + 19 % len(CONVERSATION)] for t in range(4))
