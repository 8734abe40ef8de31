"""somna.optillm against optillm's real memory plugin."""

import importlib.util
import json
import subprocess
import sys
import textwrap
from types import SimpleNamespace

import pytest

pytest.importorskip("sklearn")
if importlib.util.find_spec("optillm") is None:
    pytest.skip("optillm is not installed", allow_module_level=True)

import somna  # noqa: E402
import somna.optillm as eo  # noqa: E402

stock = eo._load_stock_plugin()  # a fresh copy of the packaged plugin, unmodified

FACTS = [
    "Ada Lovelace wrote the first program for the Analytical Engine.",
    "The Analytical Engine was designed by Charles Babbage.",
    "Lisbon is the capital of Portugal.",
    "Tea is grown in Darjeeling and Assam.",
    "Babbage also designed the Difference Engine.",
    "Portugal borders Spain.",
    "Ada was the daughter of Lord Byron.",
    "Assam tea is strong and malty.",
]


def test_stock_plugin_is_untouched():
    assert stock.Memory is not eo.SomnaMemory
    assert eo.SLUG == stock.SLUG == "memory"
    assert eo.MEMORY_FILE_ENV == stock.MEMORY_FILE_ENV


@pytest.mark.parametrize("max_size", [1, 3, 100])
def test_same_items_as_the_stock_memory_ranked_by_the_engine(tmp_path, max_size):
    theirs = stock.Memory(max_size=max_size)
    ours = eo.SomnaMemory(max_size=max_size, persist_path=str(tmp_path / "m.redb"))
    for f in FACTS:
        theirs.add(f)
        ours.add(f)
        assert ours.items == theirs.items
    for q in ["Who designed the Analytical Engine?", "tea", "Portugal capital", "nothing matches"]:
        for n in (1, 3, 10):
            got = ours.get_relevant(q, n)
            # As many items as the stock plugin returns, each a live item, once.
            assert len(got) == len(theirs.get_relevant(q, n))
            assert len(set(got)) == len(got) and set(got) <= set(ours.items)


@pytest.mark.parametrize("persist", [True, False])
def test_get_relevant_ranks_through_the_engine(tmp_path, persist):
    m = eo.SomnaMemory(max_size=100, persist_path=str(tmp_path / "m.redb") if persist else None)
    for f in FACTS:
        m.add(f)
    assert m.get_relevant("Who designed the Analytical Engine?", 1) == [FACTS[1]]
    assert m.get_relevant("Portugal capital", 1) == [FACTS[2]]
    assert set(m.get_relevant("tea", 2)) == {FACTS[3], FACTS[7]}
    # Stemmed: "teas" finds "tea".
    assert m.get_relevant("Assam teas", 1)[0] in (FACTS[3], FACTS[7])
    # No word in common: the newest items fill the answer.
    assert m.get_relevant("zebra", 2) == [FACTS[7], FACTS[6]]
    if persist:
        hits = m.store.search("Analytical Engine", m.session)["hits"]
        assert {h["id"] for h in hits[:2]} == {0, 1}


def test_evicted_items_never_rank(tmp_path):
    m = eo.SomnaMemory(max_size=2, persist_path=str(tmp_path / "m.redb"))
    for f in FACTS:
        m.add(f)
    assert m.items == FACTS[-2:]
    # Only evicted items hold these words: only live ones come back.
    assert set(m.get_relevant("Analytical Engine Babbage", 2)) == set(FACTS[-2:])
    assert set(m.get_relevant("tea", 5)) == set(FACTS[-2:])


def test_items_saved_without_a_memory_are_noted_on_first_search(tmp_path):
    p = tmp_path / "m.redb"
    s = somna.Store(p)
    s.session_save(eo.SESSION, [{"text": f} for f in FACTS])  # as a migration or an old store
    s.close()
    m = eo.SomnaMemory(persist_path=str(p))
    assert m.get_relevant("Portugal capital", 1) == [FACTS[2]]
    assert all(isinstance(d["memory"], int) for d in m.store.session_items(eo.SESSION))


def test_in_ram_without_a_path_as_before():
    m = eo.SomnaMemory(max_size=2)
    assert m.store is None
    for f in FACTS[:3]:
        m.add(f)
    assert m.items == FACTS[1:3]
    assert eo.SomnaMemory().items == []


def test_evicted_items_are_archived_not_lost(tmp_path):
    p = str(tmp_path / "m.redb")
    m = eo.SomnaMemory(max_size=3, persist_path=p)
    for f in FACTS:
        m.add(f)
    assert m.items == FACTS[-3:]
    assert m.archived() == FACTS[:-3]
    # A new Memory (a new request) sees the same.
    again = eo.SomnaMemory(max_size=3, persist_path=p)
    assert again.items == FACTS[-3:]
    # A larger max_size shows what is live; it never resurrects the archive silently.
    assert eo.SomnaMemory(max_size=10, persist_path=p).items == FACTS[-3:]


def test_bad_input(tmp_path):
    with pytest.raises(ValueError):
        eo.SomnaMemory(max_size=0)
    m = eo.SomnaMemory(persist_path=str(tmp_path / "m.redb"))
    with pytest.raises(TypeError):
        m.add(42)
    with pytest.raises(somna.InvalidError):
        m.add("x" * (somna.MAX_MESSAGE_BYTES + 1))
    assert m.items == []


ADDER = textwrap.dedent(
    """
    import sys
    from somna.optillm import SomnaMemory
    path, name = sys.argv[1], sys.argv[2]
    for i in range(40):
        SomnaMemory(max_size=1000, persist_path=path).add(f"{name} {i}")
    """
)


def test_two_processes_adding_lose_nothing(tmp_path):
    p = str(tmp_path / "m.redb")
    procs = [
        subprocess.Popen([sys.executable, "-c", ADDER, p, name], stderr=subprocess.PIPE, text=True)
        for name in ("a", "b")
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    items = eo.SomnaMemory(max_size=1000, persist_path=p).items
    assert len(items) == 80
    for name in ("a", "b"):
        assert [x for x in items if x.startswith(name)] == [f"{name} {i}" for i in range(40)]


def test_corrupt_file_is_an_error_and_left_untouched(tmp_path):
    p = tmp_path / "memory.json"
    for garbage in (b'["half a list", ', b"\x00\x01\x02 not json", b'{"a": "dict"}', b"[1, 2]"):
        p.write_bytes(garbage)
        with pytest.raises(somna.CorruptError) as e:
            eo.SomnaMemory(persist_path=str(p))
        assert "left untouched" in str(e.value)
        assert p.read_bytes() == garbage
    assert sorted(x.name for x in tmp_path.iterdir()) == ["memory.json", "memory.json.lock"]


def test_damaged_store_is_an_error_not_an_empty_memory(tmp_path):
    p = tmp_path / "m.redb"
    eo.SomnaMemory(persist_path=str(p)).add("kept")
    data = bytearray(p.read_bytes())
    data[len(data) // 2 :] = b"\xff" * (len(data) - len(data) // 2)
    p.write_bytes(bytes(data))
    for _ in range(2):  # an error each time, never an empty memory that overwrites it
        with pytest.raises(somna.Error):
            eo.SomnaMemory(persist_path=str(p)).add("new")
    after = p.read_bytes()
    # redb's recovery attempt may rewrite its allocator metadata and drop or add pages at the
    # end of the damaged file; it stays a redb file (a known limitation, see
    # docs/reliability.md section 6).
    assert after[:4] == b"redb"


def test_stock_json_file_is_migrated_with_a_backup(tmp_path):
    p = tmp_path / "memory.json"
    theirs = stock.Memory(max_size=5, persist_path=str(p))
    for f in FACTS:
        theirs.add(f)
    original = p.read_bytes()
    assert json.loads(original) == FACTS[-5:]

    ours = eo.SomnaMemory(max_size=5, persist_path=str(p))
    assert ours.items == FACTS[-5:]
    assert (tmp_path / "memory.json.json.bak").read_bytes() == original
    assert p.read_bytes()[:4] == b"redb"
    ours.add("a new fact")
    assert eo.SomnaMemory(max_size=5, persist_path=str(p)).items == FACTS[-4:] + ["a new fact"]
    assert ours.archived() == [FACTS[-5]]


class FakeClient:
    """An OpenAI-style client for the plugin: marks every context as relevant."""

    def __init__(self):
        self.prompts = []
        self.chat = SimpleNamespace(completions=SimpleNamespace(create=self.create))

    def create(self, model, messages, **kwargs):
        user = messages[-1]["content"]
        self.prompts.append(user)
        if "Copy over all context relevant to the query" in user:
            context = user.split("'''text", 1)[1].split("'''", 1)[0].strip()
            content = f"YES#{context}"
        else:
            content = "the answer"
        return SimpleNamespace(
            choices=[SimpleNamespace(message=SimpleNamespace(content=content))],
            usage=SimpleNamespace(completion_tokens=3),
        )


def test_plugin_run_persists_across_requests(tmp_path, monkeypatch):
    monkeypatch.setenv("OPTILLM_MEMORY_FILE", str(tmp_path / "memory.redb"))
    client = FakeClient()
    answer, tokens = eo.run("sys", "Ada wrote the first program. Query: Who wrote it?", client, "m")
    assert (answer, tokens) == ("the answer", 6)
    eo.run("sys", "Tea grows in Assam. Query: Where does tea grow?", client, "m")
    final_prompt = client.prompts[-1]
    assert "Ada wrote the first program." in final_prompt  # remembered from request one
    assert "Tea grows in Assam." in final_prompt
    assert eo.SomnaMemory(persist_path=str(tmp_path / "memory.redb")).items == [
        "Ada wrote the first program.",
        "Tea grows in Assam.",
    ]


def test_plugin_run_without_the_env_var_is_per_request(monkeypatch):
    monkeypatch.delenv("OPTILLM_MEMORY_FILE", raising=False)
    client = FakeClient()
    eo.run("sys", "Ada wrote the first program. Query: Who?", client, "m")
    eo.run("sys", "Tea grows in Assam. Query: Where?", client, "m")
    assert "Ada" not in client.prompts[-1]


def test_plugin_run_on_a_corrupt_file_fails_clearly(tmp_path, monkeypatch):
    p = tmp_path / "memory.json"
    p.write_text("not json at all")
    monkeypatch.setenv("OPTILLM_MEMORY_FILE", str(p))
    with pytest.raises(somna.CorruptError):
        eo.run("sys", "Some context. Query: q?", FakeClient(), "m")
    assert p.read_text() == "not json at all"


def test_one_line_plugin_file_overrides_the_slug(tmp_path):
    """What optillm's load_plugins does with ./optillm/plugins/*.py."""
    plugin = tmp_path / "optillm" / "plugins" / "memory_plugin.py"
    plugin.parent.mkdir(parents=True)
    plugin.write_text("from somna.optillm import SLUG, run  # noqa: F401\n")
    spec = importlib.util.spec_from_file_location("memory_plugin", plugin)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.SLUG == "memory"
    assert module.run is eo.run


async def test_async_twins_and_threads(tmp_path):
    import threading

    m = eo.SomnaMemory(max_size=1000, persist_path=str(tmp_path / "m.redb"))
    await m.aadd(FACTS[0])
    assert await m.aget_relevant("Ada", 1) == [FACTS[0]]

    def work(t):
        for i in range(10):
            m.add(f"thread {t} fact {i}")
            m.get_relevant("fact", 3)

    ts = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert len(m.items) == 41
