"""somna.Store.search: ranked search through the engine, and note with a vector."""

import pytest

import somna


FACTS = [
    "Caroline went to the LGBTQ support group on Tuesday",
    "the build uses cargo and a vendored redb",
    "Melanie painted a sunset over the lake",
    "the support group meets every week in the community centre",
    "deploys go through the staging branch",
]


def test_search_ranks_by_what_memories_are_about(store):
    for f in FACTS:
        store.note(f)
    r = store.search("when did Caroline go to the support group?")
    ids = [h["id"] for h in r["hits"]]
    assert ids[0] == 0
    # The other memory about the group ranks above its neighbours, which share its score.
    assert ids.index(3) < ids.index(4)
    best = r["hits"][0]
    assert best["scope"] == "default" and best["block"] == "#0"
    assert "Caroline went to the LGBTQ support group" in best["line"]
    assert best["score"] > r["hits"][-1]["score"] >= 0
    assert "support" in best["terms"] or "group" in best["terms"]
    assert best["inactive"] is False
    assert r["candidates"] >= 2 and r["next_offset"] is None
    assert r["text"].startswith(best["line"]) and r["text"].endswith("hits.\n")


def test_search_pages_with_offset(store):
    for i in range(7):
        store.note(f"the build {i} passed")
    first = store.search("build passed", limit=3)
    assert len(first["hits"]) == 3 and first["next_offset"] == 3
    second = store.search("build passed", limit=3, offset=first["next_offset"])
    seen = [h["id"] for h in first["hits"] + second["hits"]]
    assert len(set(seen)) == 6


def test_search_several_scopes_and_all(store):
    store.note("the staging deploy failed", "project:a")
    store.note("the staging server is down", "project:b")
    store.note("unrelated", "project:c")
    both = store.search("staging", scopes=["project:a", "project:b"])
    assert sorted(h["scope"] for h in both["hits"]) == ["project:a", "project:b"]
    everywhere = store.search("staging", all=True)
    assert sorted(h["scope"] for h in everywhere["hits"]) == ["project:a", "project:b"]
    assert everywhere["text"].startswith("project:")


def test_search_bad_input(store):
    store.note("something")
    with pytest.raises(somna.InvalidError):
        store.search("?!")  # no word to look for
    with pytest.raises(somna.InvalidError):
        store.search("something", mode="sideways")
    with pytest.raises(somna.InvalidError):
        store.search("something", kind="rumour")


def test_note_with_a_vector_ranks_by_cosine(store):
    store.note("alpha", vector=[1.0, 0.0, 0.0])
    store.note("beta", vector=[0.0, 1.0, 0.0])
    store.note_many([{"text": "gamma", "vector": [0.0, 0.0, 1.0]}])
    r = store.search("", vector=[0.1, 0.9, 0.0], mode="vector")
    assert r["hits"][0]["id"] == 1
    # Hybrid: the words and the vector fused.
    h = store.search("alpha", vector=[0.0, 0.0, 1.0])
    assert {x["id"] for x in h["hits"][:2]} == {0, 2}
    # One dimension per scope.
    with pytest.raises(somna.InvalidError):
        store.note("delta", vector=[1.0, 0.0])
