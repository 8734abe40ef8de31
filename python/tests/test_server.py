"""engram.Store on a PostgreSQL server: the URL form opens a store in its own schema, and the
memory and session verbs give the same answers as on a file. Runs when ENGRAM_TEST_PG names a
server (scripts/pg-server.sh run does); skipped without one, except under CI, where it fails."""

import os
import uuid

import pytest

import engram

SERVER = os.environ.get("ENGRAM_TEST_PG")

if not SERVER and os.environ.get("CI"):
    raise RuntimeError("CI must run the server tests: ENGRAM_TEST_PG is unset (scripts/pg-server.sh run)")

pytestmark = pytest.mark.skipif(not SERVER, reason="ENGRAM_TEST_PG names no server")


def url():
    sep = "&" if "?" in SERVER else "?"
    return f"{SERVER}{sep}schema=py_{uuid.uuid4().hex[:12]}"


def test_a_server_store_answers_like_a_file(tmp_path):
    u = url()
    on_server = engram.Store(u)
    on_file = engram.Store(tmp_path / "m.redb")
    for s in (on_server, on_file):
        for i in range(5):
            s.note(f"memory {i}")
        s.session_save("chat", [{"role": "user", "content": "hi"}])
    assert on_server.count() == on_file.count() == 5
    assert on_server.session_load("chat") == on_file.session_load("chat")
    assert on_server.recall("memory 3")["text"] == on_file.recall("memory 3")["text"]
    assert on_server.wake() == on_file.wake()
    on_server.close()
    # Reopened by URL: everything is there.
    again = engram.Store(u, create=False)
    assert again.count() == 5


def test_a_missing_server_store_is_not_found_and_a_password_is_never_shown():
    with pytest.raises(engram.NotFoundError):
        engram.Store(url(), create=False)
    bad = "postgresql://postgres:s3cret-pw@127.0.0.1:1/postgres"
    with pytest.raises(engram.Error) as e:
        engram.Store(bad, busy_timeout=0.2)
    assert "s3cret-pw" not in str(e.value)
    assert "cannot reach" in str(e.value)
