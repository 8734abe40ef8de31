#!/usr/bin/env python3
"""Floods a real `somna mcp --http --ui` server on loopback the way the review of issue 52 did
(points 1-3) and checks that the bounds hold. Python 3 standard library only.

    scripts/flood-check.py PATH/TO/somna

1. MCP HTTP sessions: the server's RSS (VmRSS) before, after 10,000 `initialize` calls from one
   read-only token, and after another 10,000; the token's oldest session answers 404, at most
   64 of its sessions answer, and the admin's session is untouched.
2. Connections: 512 keep-alive connections with one read-only token, each sending one valid
   `ping`: how many are served (at most 32) and how many refused (429); whether the admin can
   still connect and call a tool; after `somna token revoke`, whether the hog's next request on
   each held connection is refused (401) and the connection closed.
3. Inspector: the admin logs in, then 1,024 logins with a read-only token; whether the admin's
   session still works and how many of the reader's answer (at most 8); failed logins from one
   address before 429 (one at a time, and a burst of concurrent ones from another address).

The store is in a temporary directory, the server binds 127.0.0.1:0, every client address is
on loopback (127.0.0.2 and 127.0.0.3 stand for other clients), the whole run is bounded by a
watchdog, and the server is killed at the end. Exits 0 when every bound held, 1 when one did
not (each is printed as FAIL), 2 on a usage or setup error, 3 when the watchdog fired.
"""

import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

DEADLINE_S = 300  # the whole run; the watchdog kills the server and exits 3 past it
IO_TIMEOUT_S = 20  # one socket operation

FLOOD = 10_000
FLOOD_THREADS = 4  # keep-alive connections for the initialize flood (under 32 per token)
PER_PRINCIPAL = 64  # MCP sessions per principal (src/cli/commands/mcp/sessions.rs)
HOG_CONNS = 512
PER_TOKEN_CONNS = 32  # src/cli/commands/mcp/guard.rs
UI_LOGINS = 1024
UI_PER_PRINCIPAL = 8  # src/cli/commands/web/auth.rs
MAX_FAILED_LOGINS = 10
BURST = 40  # concurrent failed logins from one address

# RSS bounds (bytes of VmRSS): the unbounded server grew about 51 KB a session (10,000
# initialize calls: 16.7 MB -> 529 MB, another 10,000: 750 MB).
RSS_FIRST_GROWTH_MAX = 64 << 20
RSS_SECOND_GROWTH_MAX = 16 << 20

PROTO = "2025-06-18"
SERVER = None  # the server's Popen, for cleanup
TMP = None  # the temporary directory of the store, for cleanup
FAILURES = []


def log(msg=""):
    print(msg, flush=True)


def check(ok, what):
    log(("  ok    " if ok else "  FAIL  ") + what)
    if not ok:
        FAILURES.append(what)
    return ok


# ---------------------------------------------------------------- plain HTTP/1.1 over a socket


class Closed(Exception):
    """The server closed (or reset) the connection before a whole response."""


class Conn:
    """One keep-alive HTTP/1.1 connection to the server, from `source` (a loopback address)."""

    def __init__(self, port, source="127.0.0.1"):
        self.port = port
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.settimeout(IO_TIMEOUT_S)
        if source != "127.0.0.1":
            self.sock.bind((source, 0))
        self.sock.connect(("127.0.0.1", port))
        self.rfile = self.sock.makefile("rb")

    def close(self):
        for f in (self.rfile, self.sock):
            try:
                f.close()
            except OSError:
                pass

    def send(self, method, path, headers=(), body=b""):
        if isinstance(body, str):
            body = body.encode()
        head = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{self.port}"]
        head += [f"{k}: {v}" for k, v in headers]
        if body or method == "POST":
            head.append(f"Content-Length: {len(body)}")
        data = ("\r\n".join(head) + "\r\n\r\n").encode() + body
        try:
            self.sock.sendall(data)
        except OSError as e:
            raise Closed(f"send: {e}") from e

    def _line(self):
        try:
            line = self.rfile.readline(65536)
        except (OSError, ValueError) as e:
            raise Closed(f"recv: {e}") from e
        if not line:
            raise Closed("EOF")
        return line

    def response(self, method="POST"):
        """(status, headers with lower-case names, body bytes)."""
        status_line = self._line().decode("latin-1")
        m = re.match(r"HTTP/1\.[01] (\d{3})", status_line)
        if not m:
            raise Closed(f"bad status line {status_line!r}")
        status = int(m.group(1))
        headers = {}
        while True:
            line = self._line().decode("latin-1").rstrip("\r\n")
            if not line:
                break
            k, _, v = line.partition(":")
            k = k.strip().lower()
            headers[k] = (headers[k] + ", " + v.strip()) if k in headers else v.strip()
        body = b""
        if method == "HEAD" or status in (204, 304) or 100 <= status < 200:
            return status, headers, body
        try:
            if "chunked" in headers.get("transfer-encoding", "").lower():
                parts = []
                while True:
                    size = int(self._line().split(b";")[0].strip(), 16)
                    if size == 0:
                        while self._line() not in (b"\r\n", b"\n"):
                            pass
                        break
                    parts.append(self.rfile.read(size))
                    self.rfile.read(2)
                body = b"".join(parts)
            elif "content-length" in headers:
                body = self.rfile.read(int(headers["content-length"]))
            elif "close" in headers.get("connection", "").lower():
                body = self.rfile.read()
        except (OSError, ValueError) as e:
            raise Closed(f"body: {e}") from e
        return status, headers, body

    def request(self, method, path, headers=(), body=b""):
        self.send(method, path, headers, body)
        return self.response(method)

    def closed_by_server(self, wait=3.0):
        """Whether the server closed the connection (EOF or reset) within `wait` seconds."""
        self.sock.settimeout(wait)
        try:
            return self.rfile.read(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except (socket.timeout, TimeoutError):
            return False
        except (OSError, ValueError):
            return True
        finally:
            self.sock.settimeout(IO_TIMEOUT_S)


# ---------------------------------------------------------------- MCP over Streamable HTTP


def mcp_headers(token, session=None):
    h = [
        ("Authorization", f"Bearer {token}"),
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("MCP-Protocol-Version", PROTO),
    ]
    if session:
        h.append(("Mcp-Session-Id", session))
    return h


INITIALIZE = json.dumps(
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": PROTO,
            "capabilities": {},
            "clientInfo": {"name": "flood-check", "version": "0"},
        },
    }
)
INITIALIZED = json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"})
PING = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"})
WAKE_CALL = json.dumps(
    {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "wake", "arguments": {}}}
)


def messages(body):
    """The JSON-RPC messages of a response body (plain JSON, or the data lines of SSE)."""
    text = body.decode("utf-8", "replace").strip()
    if text.startswith("{"):
        return [json.loads(text)]
    out = []
    for line in text.splitlines():
        if line.startswith("data:"):
            data = line[5:].strip()
            if data.startswith("{"):
                out.append(json.loads(data))
    return out


def initialize(c, token):
    """(status, session id or None)."""
    status, h, _ = c.request("POST", "/mcp", mcp_headers(token), INITIALIZE)
    return status, h.get("mcp-session-id")


def open_session(c, token):
    status, sid = initialize(c, token)
    if status != 200 or not sid:
        raise RuntimeError(f"initialize answered {status}")
    status, _, _ = c.request("POST", "/mcp", mcp_headers(token, sid), INITIALIZED)
    if not 200 <= status < 300:
        raise RuntimeError(f"notifications/initialized answered {status}")
    return sid


def ping(c, token, sid):
    """(status, whether the body holds a result)."""
    status, _, body = c.request("POST", "/mcp", mcp_headers(token, sid), PING)
    ok = status == 200 and any("result" in m for m in messages(body))
    return status, ok


# ---------------------------------------------------------------- the inspector


def ui_login(c, token):
    """(status, session cookie value or None)."""
    body = "token=" + token
    status, h, _ = c.request(
        "POST", "/ui/login", [("Content-Type", "application/x-www-form-urlencoded")], body
    )
    m = re.search(r"somna_ui=([0-9a-f]+)", h.get("set-cookie", ""))
    return status, (m.group(1) if m else None)


def ui_alive(port, cookie):
    """Whether the inspector session `cookie` is still served (Wake answers 200, not a 303)."""
    c = Conn(port)
    try:
        status, h, body = c.request("GET", "/ui/wake", [("Cookie", f"somna_ui={cookie}"), ("Connection", "close")], b"")
        return status == 200
    finally:
        c.close()


# ---------------------------------------------------------------- the server


def vmrss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def mb(n):
    return f"{n / (1 << 20):.1f} MB"


def somna(binary, db, env, *args):
    r = subprocess.run(
        [binary, "--db", db, *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if r.returncode != 0:
        raise RuntimeError(f"somna {' '.join(args)} exited {r.returncode}: {r.stderr.strip()}")
    return r.stdout


def start_server(binary, db, env):
    global SERVER
    SERVER = subprocess.Popen(
        [binary, "--db", db, "mcp", "--http", "127.0.0.1:0", "--ui"],
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    port = None
    lines = []
    end = time.monotonic() + 30
    while time.monotonic() < end:
        line = SERVER.stderr.readline().decode("utf-8", "replace")
        if not line:
            break
        lines.append(line)
        m = re.search(r"serving MCP at http://127\.0\.0\.1:(\d+)/mcp", line)
        if m:
            port = int(m.group(1))
            break
    if port is None:
        raise RuntimeError("the server did not say its address: " + "".join(lines))

    def drain():  # keeps the pipe from filling; the last lines are kept for a report
        for line in SERVER.stderr:
            lines.append(line.decode("utf-8", "replace"))
            del lines[:-50]

    threading.Thread(target=drain, daemon=True).start()
    return port, lines


def stop_server():
    if SERVER is None or SERVER.poll() is not None:
        return
    SERVER.send_signal(signal.SIGINT)
    try:
        SERVER.wait(timeout=5)
    except subprocess.TimeoutExpired:
        SERVER.kill()
        SERVER.wait(timeout=5)


def watchdog():
    time.sleep(DEADLINE_S)
    log(f"\nwatchdog: the run took over {DEADLINE_S} s; killing the server")
    if SERVER is not None and SERVER.poll() is None:
        SERVER.kill()
    if TMP:
        shutil.rmtree(TMP, ignore_errors=True)
    os._exit(3)


# ---------------------------------------------------------------- the floods


def flood_initialize(port, token, n):
    """`n` initialize calls over FLOOD_THREADS keep-alive connections; returns (statuses,
    session ids in the order their answers came)."""
    statuses = {}
    ids = []
    lock = threading.Lock()
    per = [n // FLOOD_THREADS + (1 if i < n % FLOOD_THREADS else 0) for i in range(FLOOD_THREADS)]

    def run(k):
        c = Conn(port)
        try:
            for _ in range(k):
                try:
                    status, sid = initialize(c, token)
                except Closed as e:
                    status, sid = f"closed ({e})", None
                    c.close()
                    c = Conn(port)
                with lock:
                    statuses[status] = statuses.get(status, 0) + 1
                    if sid:
                        ids.append(sid)
        finally:
            c.close()

    threads = [threading.Thread(target=run, args=(k,)) for k in per]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return statuses, ids


def part1(port, pid, admin, reader):
    log("\n== 1. MCP HTTP sessions: 2 x 10,000 initialize calls from one read-only token")
    c = Conn(port)
    admin_sid = open_session(c, admin)
    first_sid = open_session(c, reader)
    c.close()
    time.sleep(1)
    rss0 = vmrss(pid)
    log(f"  RSS before:                    {mb(rss0)}")
    t0 = time.monotonic()
    st1, ids1 = flood_initialize(port, reader, FLOOD)
    t1 = time.monotonic() - t0
    time.sleep(1)
    rss1 = vmrss(pid)
    log(f"  RSS after 10,000 initialize:   {mb(rss1)}  ({t1:.1f} s; answers {st1})")
    t0 = time.monotonic()
    st2, ids2 = flood_initialize(port, reader, FLOOD)
    t2 = time.monotonic() - t0
    time.sleep(1)
    rss2 = vmrss(pid)
    log(f"  RSS after 20,000 initialize:   {mb(rss2)}  ({t2:.1f} s; answers {st2})")
    log(f"  peak (VmHWM):                  {mb(peak(pid))}")

    c = Conn(port)
    first_status, _ = ping(c, reader, first_sid)
    first_of_flood, _ = ping(c, reader, ids1[0]) if ids1 else (None, None)
    # The newest sessions in the order their answers came: at most 64 may answer.
    recent = ids2[-(PER_PRINCIPAL + 16):]
    live = sum(1 for sid in recent if ping(c, reader, sid)[0] == 200)
    newest_status, _ = ping(c, reader, ids2[-1]) if ids2 else (None, None)
    admin_status, admin_ok = ping(c, admin, admin_sid)
    c.close()
    log(f"  the reader's session opened before the flood: ping answers {first_status}")
    log(f"  the flood's first session: ping answers {first_of_flood}")
    log(f"  of the reader's {len(recent)} newest sessions, {live} answer a ping (newest: {newest_status})")
    log(f"  the admin's session opened before the flood: ping answers {admin_status}")
    check(st1.get(200, 0) == FLOOD and st2.get(200, 0) == FLOOD, "every initialize was answered 200")
    check(rss1 - rss0 <= RSS_FIRST_GROWTH_MAX,
          f"RSS grew {mb(rss1 - rss0)} over the first 10,000 (bound {mb(RSS_FIRST_GROWTH_MAX)})")
    check(rss2 - rss1 <= RSS_SECOND_GROWTH_MAX,
          f"RSS grew {mb(rss2 - rss1)} over the second 10,000 (bound {mb(RSS_SECOND_GROWTH_MAX)})")
    check(first_status == 404 and first_of_flood == 404, "the reader's oldest sessions answer 404")
    check(live <= PER_PRINCIPAL and newest_status == 200,
          f"the reader keeps at most {PER_PRINCIPAL} sessions ({live} answered) and its newest works")
    check(admin_status == 200 and admin_ok, "the admin's session survived the flood")
    return admin_sid


def peak(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def count_open(conns, wait=3.0):
    """How many of `conns` the server has not closed within `wait` seconds (all together)."""
    end = time.monotonic() + wait
    still = 0
    for c in conns:
        if not c.closed_by_server(wait=max(0.01, end - time.monotonic())):
            still += 1
    return still


def part2(port, pid, binary, db, env, admin, admin_sid, hog, hog_id):
    log(f"\n== 2. Connections: {HOG_CONNS} keep-alive connections of one read-only token, one ping each")
    c = Conn(port)
    hog_sid = open_session(c, hog)
    c.close()
    conns = []
    served, refused, other = [], 0, {}
    for _ in range(HOG_CONNS):
        try:
            c = Conn(port)
        except OSError as e:
            other[f"connect: {e}"] = other.get(f"connect: {e}", 0) + 1
            continue
        conns.append(c)
        try:
            status, ok = ping(c, hog, hog_sid)
        except Closed as e:
            key = f"closed ({e})"
            other[key] = other.get(key, 0) + 1
            continue
        if status == 200 and ok:
            served.append(c)
        elif status == 429:
            refused += 1
        else:
            other[status] = other.get(status, 0) + 1
    # Every refused connection should have been closed by the server.
    served_set = set(map(id, served))
    refused_still_open = count_open([c for c in conns if id(c) not in served_set])
    log(f"  served (200 with a result): {len(served)}")
    log(f"  refused (429):              {refused}")
    log(f"  other:                      {other or 'none'}")
    log(f"  refused connections the server left open: {refused_still_open}")
    log(f"  server RSS with them held:  {mb(vmrss(pid))}")

    # The admin, while the hog holds its connections (the hog's are all still open client-side).
    admin_new = admin_call = admin_old = None
    try:
        a = Conn(port)
        sid = open_session(a, admin)
        status, _, body = a.request("POST", "/mcp", mcp_headers(admin, sid), WAKE_CALL)
        ok = status == 200 and any("result" in m and not m["result"].get("isError") for m in messages(body))
        admin_new = "a new session opened"
        admin_call = f"tools/call wake answered {status}{' with a result' if ok else ''}"
        admin_old = ping(a, admin, admin_sid)[0]
        a.close()
    except (Closed, RuntimeError, OSError) as e:
        admin_new, ok = f"failed: {e}", False
    log(f"  the admin's new connection: {admin_new}; {admin_call}; its older session's ping: {admin_old}")

    check(len(served) <= PER_TOKEN_CONNS, f"at most {PER_TOKEN_CONNS} connections served for one token ({len(served)})")
    check(refused == HOG_CONNS - len(served), f"every other connection refused with 429 ({refused})")
    check(refused_still_open == 0, "the refused connections were closed by the server")
    check(bool(ok), "the admin could connect and call a tool")

    # Revoke the hog's token; its next request on each held connection.
    somna(binary, db, env, "token", "revoke", hog_id)
    answers = {}
    for c in served:
        try:
            status, _ = ping(c, hog, hog_sid)
        except Closed:
            status = "closed before an answer"
        answers[status] = answers.get(status, 0) + 1
    closed = len(served) - count_open(served)
    log(f"  after `token revoke {hog_id}`, the next ping on each of the {len(served)} held connections: {answers}")
    log(f"  ... and the server closed {closed} of them")
    check(answers.get(200, 0) == 0, "no held connection is served after the revocation")
    check(closed == len(served), "every held connection is closed after the revocation")
    for c in conns:
        c.close()


def part3(port, admin, reader, reader_principal):
    log(f"\n== 3. Inspector: the admin logs in, then {UI_LOGINS:,} logins with a read-only token")
    c = Conn(port)
    status, admin_cookie = ui_login(c, admin)
    c.close()
    if status != 303 or not admin_cookie:
        raise RuntimeError(f"the admin's login answered {status}")
    log(f"  the admin's login: {status}; its session works: {ui_alive(port, admin_cookie)}")

    statuses, cookies = {}, []
    lock = threading.Lock()

    def run(k):
        c = Conn(port)
        try:
            for _ in range(k):
                try:
                    s, ck = ui_login(c, reader)
                except Closed as e:
                    s, ck = f"closed ({e})", None
                    c.close()
                    c = Conn(port)
                with lock:
                    statuses[s] = statuses.get(s, 0) + 1
                    if ck:
                        cookies.append(ck)
        finally:
            c.close()

    t0 = time.monotonic()
    threads = [threading.Thread(target=run, args=(UI_LOGINS // 2,)) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    took = time.monotonic() - t0
    log(f"  {UI_LOGINS:,} logins in {took:.1f} s: answers {statuses}")
    admin_alive = ui_alive(port, admin_cookie)
    first_alive = ui_alive(port, cookies[0]) if cookies else None
    recent = cookies[-(UI_PER_PRINCIPAL + 8):]
    live = sum(1 for ck in recent if ui_alive(port, ck))
    log(f"  the admin's earlier session still works: {admin_alive}")
    log(f"  the reader's first session works: {first_alive}; of its {len(recent)} newest, {live} work")
    check(statuses.get(303, 0) == UI_LOGINS, "every login of the valid token was answered 303")
    check(admin_alive, "the admin's inspector session survived the flood")
    check(first_alive is False and 0 < live <= UI_PER_PRINCIPAL,
          f"the reader keeps at most {UI_PER_PRINCIPAL} inspector sessions ({live} work)")

    # Failed logins, one at a time, from 127.0.0.2 (another client address on loopback).
    log("\n   failed logins from one address (127.0.0.2), one at a time:")
    bad = "somna_" + "0" * 64
    c = Conn(port, "127.0.0.2")
    seq = []
    for _ in range(MAX_FAILED_LOGINS + 5):
        try:
            s, _ = ui_login(c, bad)
        except Closed:
            c.close()
            c = Conn(port, "127.0.0.2")
            s, _ = ui_login(c, bad)
        seq.append(s)
    before_429 = seq.index(429) if 429 in seq else len(seq)
    good_status, _ = ui_login(c, reader)
    c.close()
    c = Conn(port)
    own_status, _ = ui_login(c, admin)
    c.close()
    log(f"  answers: {seq}")
    log(f"  failed logins before the first 429: {before_429}")
    log(f"  then a valid token from that address: {good_status}; the admin from 127.0.0.1: {own_status}")
    check(before_429 == MAX_FAILED_LOGINS and all(s == 429 for s in seq[before_429:]),
          f"{MAX_FAILED_LOGINS} failed logins, then 429")
    check(good_status == 429, "a valid token from the refused address is refused too (429)")
    check(own_status == 303, "another address still logs in")

    # A burst of concurrent failed logins from 127.0.0.3: the bound is per address and minute.
    log(f"\n   {BURST} concurrent failed logins from one fresh address (127.0.0.3):")
    conns = [Conn(port, "127.0.0.3") for _ in range(BURST)]
    body = "token=" + bad
    for c in conns:
        c.send("POST", "/ui/login", [("Content-Type", "application/x-www-form-urlencoded")], body)
    burst = {}
    for c in conns:
        try:
            s = c.response()[0]
        except Closed as e:
            s = "closed"
        burst[s] = burst.get(s, 0) + 1
        c.close()
    log(f"  answers: {burst}")
    check(burst.get(401, 0) <= MAX_FAILED_LOGINS,
          f"at most {MAX_FAILED_LOGINS} failed logins looked up from one address in a minute "
          f"({burst.get(401, 0)} answered 401)")


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    binary = os.path.abspath(sys.argv[1])
    if not os.access(binary, os.X_OK):
        print(f"not an executable: {binary}", file=sys.stderr)
        return 2
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = HOG_CONNS + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    threading.Thread(target=watchdog, daemon=True).start()
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOMNA_")}
    global TMP
    tmp = TMP = tempfile.mkdtemp(prefix="somna-flood-")
    env["HOME"] = tmp
    db = os.path.join(tmp, "store.redb")
    started = time.monotonic()
    try:
        log(f"somna: {binary} ({subprocess.run([binary, '--version'], capture_output=True, text=True).stdout.strip()})")
        somna(binary, db, env, "init")
        somna(binary, db, env, "note", "The flood check runs against this store.")
        somna(binary, db, env, "grant", "user:reader", "read", "default")
        tokens = {}
        for name, principal in [("admin", "admin"), ("reader", "user:reader"),
                                ("hog", "user:reader"), ("ui", "user:reader")]:
            t = json.loads(somna(binary, db, env, "--json", "token", "add", principal))
            tokens[name] = t
        port, server_log = start_server(binary, db, env)
        pid = SERVER.pid
        log(f"server: pid {pid}, http://127.0.0.1:{port}/mcp and /ui/ (store {db})")
        log("tokens: admin; three of user:reader, who may only read scope `default`")
        admin_sid = part1(port, pid, tokens["admin"]["token"], tokens["reader"]["token"])
        part2(port, pid, binary, db, env, tokens["admin"]["token"], admin_sid,
              tokens["hog"]["token"], tokens["hog"]["id"])
        part3(port, tokens["admin"]["token"], tokens["ui"]["token"], "user:reader")
        alive = SERVER.poll() is None
        log(f"\nserver still running at the end: {alive}; RSS {mb(vmrss(pid)) if alive else '-'}")
        check(alive, "the server survived")
    except Exception as e:  # a setup error or an unexpected answer: report it as a failure
        log(f"\nerror: {type(e).__name__}: {e}")
        if SERVER is not None and SERVER.poll() is not None:
            log(f"the server exited {SERVER.returncode}")
        FAILURES.append(f"error: {e}")
    finally:
        stop_server()
        shutil.rmtree(tmp, ignore_errors=True)
    log(f"\n{time.monotonic() - started:.0f} s; "
        + ("every bound held" if not FAILURES else f"{len(FAILURES)} did not hold:"))
    for f in FAILURES:
        log(f"  - {f}")
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(main())
