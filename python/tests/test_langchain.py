"""somna.langchain.SomnaChatMessageHistory against the real langchain-core."""

import pytest

pytest.importorskip("langchain_core")
# langchain-core 1.6.4 deprecated BaseChatMessageHistory and RunnableWithMessageHistory; the
# adapter implements the interface users still have.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
from langchain_core.chat_history import BaseChatMessageHistory  # noqa: E402
from langchain_core.language_models.fake_chat_models import FakeListChatModel  # noqa: E402
from langchain_core.messages import (  # noqa: E402
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder  # noqa: E402
from langchain_core.runnables.history import RunnableWithMessageHistory  # noqa: E402

import somna  # noqa: E402
from somna.langchain import SomnaChatMessageHistory  # noqa: E402

MESSAGES = [
    SystemMessage("You are terse."),
    HumanMessage("Wetter in Zürich? 🌦", id="h1", additional_kwargs={"lang": "de"}),
    AIMessage(
        "",
        tool_calls=[{"name": "weather", "args": {"city": "Zürich"}, "id": "call_1", "type": "tool_call"}],
        response_metadata={"model": "fake", "tokens": 12},
    ),
    ToolMessage("12°C, Regen", tool_call_id="call_1", name="weather"),
    AIMessage("12°C und Regen.\n東京: 晴れ"),
]


def test_is_a_chat_message_history(path):
    h = SomnaChatMessageHistory("s", path)
    assert isinstance(h, BaseChatMessageHistory)


def test_round_trip(path):
    h = SomnaChatMessageHistory("s", path)
    h.add_messages(MESSAGES)
    back = SomnaChatMessageHistory("s", path).messages
    assert back == MESSAGES
    assert [message_to_dict(m) for m in back] == [message_to_dict(m) for m in MESSAGES]
    assert back[2].tool_calls[0]["args"] == {"city": "Zürich"}
    assert "Zürich" in str(h)


def test_convenience_methods_and_clear(path):
    h = SomnaChatMessageHistory("s", path)
    h.add_user_message("hi")
    h.add_ai_message("hello")
    h.add_message(HumanMessage("again"))
    assert [m.content for m in h.messages] == ["hi", "hello", "again"]
    h.clear()
    assert h.messages == []
    h.add_messages([])
    assert h.messages == []


async def test_async_twins(path):
    h = SomnaChatMessageHistory("s", path)
    await h.aadd_messages(MESSAGES[:2])
    await h.aadd_messages(MESSAGES[2:])
    assert await h.aget_messages() == MESSAGES
    await h.aclear()
    assert await h.aget_messages() == []


def test_sessions_isolated(path):
    a, b = SomnaChatMessageHistory("a", path), SomnaChatMessageHistory("b", path)
    a.add_messages(MESSAGES[:1])
    assert b.messages == []
    assert somna.Store(path).session_ids() == ["langchain:a"]


def test_bad_input_writes_nothing(path):
    h = SomnaChatMessageHistory("s", path)
    h.add_messages(MESSAGES[:1])
    with pytest.raises(TypeError):
        h.add_messages([HumanMessage("fine"), "not a message"])
    with pytest.raises(somna.NotSerializableError):
        h.add_messages([HumanMessage("fine"), HumanMessage("x", additional_kwargs={"o": object()})])
    with pytest.raises(somna.InvalidError):
        h.add_messages([HumanMessage("x" * (somna.MAX_MESSAGE_BYTES + 1))])
    assert h.messages == MESSAGES[:1]
    for bad in ("", "x" * 300, "a\x00b"):
        with pytest.raises(ValueError):
            SomnaChatMessageHistory(bad, path)


def test_corrupt_item_is_an_error(path):
    store = somna.Store(path)
    store.session_append("langchain:s", [{"not": "a message"}])
    with pytest.raises(somna.CorruptError):
        SomnaChatMessageHistory("s", store=store).messages


def test_runnable_with_message_history(path):
    model = FakeListChatModel(responses=["Hello Ada.", "Your name is Ada."])
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Be brief."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = RunnableWithMessageHistory(
        prompt | model,
        lambda session_id: SomnaChatMessageHistory(session_id, path),
        input_messages_key="question",
        history_messages_key="history",
    )
    cfg = {"configurable": {"session_id": "ada"}}
    assert chain.invoke({"question": "I am Ada."}, cfg).content == "Hello Ada."
    assert chain.invoke({"question": "Who am I?"}, cfg).content == "Your name is Ada."
    stored = SomnaChatMessageHistory("ada", path).messages
    assert [(m.type, m.content) for m in stored] == [
        ("human", "I am Ada."),
        ("ai", "Hello Ada."),
        ("human", "Who am I?"),
        ("ai", "Your name is Ada."),
    ]


# ----- close() is terminal: every later call raises somna.ClosedError ---------------------

HISTORY_CALLS = {
    "messages": lambda h: h.messages,
    "add_messages": lambda h: h.add_messages(MESSAGES[:1]),
    "add_messages([])": lambda h: h.add_messages([]),
    "add_message": lambda h: h.add_message(HumanMessage("x")),
    "add_user_message": lambda h: h.add_user_message("x"),
    "clear": lambda h: h.clear(),
}
ASYNC_HISTORY_CALLS = {
    "aget_messages": lambda h: h.aget_messages(),
    "aadd_messages": lambda h: h.aadd_messages(MESSAGES[:1]),
    "aadd_messages([])": lambda h: h.aadd_messages([]),
    "aclear": lambda h: h.aclear(),
}


@pytest.mark.parametrize("call", list(HISTORY_CALLS))
def test_every_history_method_raises_closed_error_after_close(path, call):
    h = SomnaChatMessageHistory("s", path)
    h.add_messages(MESSAGES[:2])
    h.close()
    assert h.closed
    with pytest.raises(somna.ClosedError) as e:
        HISTORY_CALLS[call](h)
    assert isinstance(e.value, RuntimeError)
    assert SomnaChatMessageHistory("s", path).messages == MESSAGES[:2]


@pytest.mark.parametrize("call", list(ASYNC_HISTORY_CALLS))
async def test_every_async_history_method_raises_closed_error_after_close(path, call):
    h = SomnaChatMessageHistory("s", path)
    h.add_messages(MESSAGES[:2])
    h.close()
    with pytest.raises(somna.ClosedError):
        await ASYNC_HISTORY_CALLS[call](h)
    assert SomnaChatMessageHistory("s", path).messages == MESSAGES[:2]


def test_history_close_twice_and_before_first_use(path):
    h = SomnaChatMessageHistory("s", path)
    h.close()
    h.close()
    assert h.closed and h.store.closed
    assert "closed" in repr(h)
    with pytest.raises(somna.ClosedError):
        h.add_messages([])


def test_history_concurrent_close_from_8_threads_raises_nothing(path):
    import threading

    h = SomnaChatMessageHistory("s", path)
    barrier = threading.Barrier(8)
    errors = []

    def closer():
        try:
            barrier.wait()
            h.close()
        except BaseException as e:  # noqa: BLE001 - any exception fails the test
            errors.append(e)

    threads = [threading.Thread(target=closer) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert h.closed and h.store.closed
    with pytest.raises(somna.ClosedError):
        h.messages


def test_history_store_passed_in_stays_open_after_close(path):
    store = somna.Store(path)
    h = SomnaChatMessageHistory("s", store=store)
    h.add_messages(MESSAGES[:1])
    h.close()
    assert h.closed and not store.closed
    assert store.session_items("langchain:s") == [message_to_dict(MESSAGES[0])]
    with pytest.raises(somna.ClosedError):
        h.messages
    store.close()
