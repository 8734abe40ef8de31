"""somna.Store on a PostgreSQL server: the URL form opens a store in its own schema, and the
memory and session verbs give the same answers as on a file. Runs when SOMNA_TEST_PG names a
server (scripts/pg-server.sh run does); skipped without one, except under CI, where it fails."""

import os
import uuid

import pytest

import somna

SERVER = os.environ.get("SOMNA_TEST_PG")

if not SERVER and os.environ.get("CI"):
    raise RuntimeError("CI must run the server tests: SOMNA_TEST_PG is unset (scripts/pg-server.sh run)")

pytestmark = pytest.mark.skipif(not SERVER, reason="SOMNA_TEST_PG names no server")


def url():
    sep = "&" if "?" in SERVER else "?"
    return f"{SERVER}{sep}schema=py_{uuid.uuid4().hex[:12]}"


def test_a_server_store_answers_like_a_file(tmp_path):
    u = url()
    on_server = somna.Store(u)
    on_file = somna.Store(tmp_path / "m.redb")
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
    again = somna.Store(u, create=False)
    assert again.count() == 5


def test_a_missing_server_store_is_not_found_and_a_password_is_never_shown():
    with pytest.raises(somna.NotFoundError):
        somna.Store(url(), create=False)
    bad = "postgresql://postgres:s3cret-pw@127.0.0.1:1/postgres"
    with pytest.raises(somna.Error) as e:
        somna.Store(bad, busy_timeout=0.2)
    assert "s3cret-pw" not in str(e.value)
    assert "cannot reach" in str(e.value)


def pg_script(*args):
    """scripts/pg-server.sh ARGS; its stdout."""
    import subprocess

    script = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "pg-server.sh")
    return subprocess.run(["bash", script, *args], check=True, capture_output=True, text=True).stdout.strip()


def test_a_store_held_open_goes_on_after_its_server_restarts():
    """Issue 23: a long-lived Python Store (as an agent process holds one) reconnects by itself
    after a server restart; a write issued while the server is down waits (within the busy
    timeout) and lands once, and a read then sees it."""
    import tempfile
    import threading

    # A private server (the shared one must not restart under other tests), under pg-server.sh
    # run's TMPDIR, which the postgres user can enter.
    d = tempfile.mkdtemp(prefix="py-restart-", dir=os.environ.get("TMPDIR"))
    base = pg_script("start", d, "--fast")
    try:
        s = somna.Store(f"{base}?schema=restart", busy_timeout=20)
        s.note("before the restart")
        s.session_append("chat", [{"role": "user", "content": "one"}])
        pg_script("stop", d)
        later = threading.Timer(1.0, pg_script, args=("restart", d))
        later.start()
        # Issued while the server is down: waits for it within the busy timeout.
        s.note("while it was down")
        later.join()
        s.session_append("chat", [{"role": "user", "content": "two"}])
        assert s.count() == 2
        assert [m["content"] for m in s.session_load("chat")] == ["one", "two"]
        assert "while it was down" in s.recall("down")["text"]
        s.close()
    finally:
        pg_script("stop", d)
