"""The web inspector in a real browser (issue 26; docs/inspector.md, "Tests").

Run by tests/web/run.sh: python test_web.py SOMNA_BINARY OUTPUT_DIR CHROMIUM AXE_JS.
Makes a store with the CLI, serves it with `somna mcp --http 127.0.0.1:0 --ui`, and drives
Debian's chromium headless through Playwright: the flows of the issue, a screenshot of every page
into OUTPUT_DIR (each checked non-empty), and axe-core on every page with no critical or serious
violation. Exits non-zero at the first failure.
"""

import os
import re
import subprocess
import sys
import tempfile
import time

from playwright.sync_api import sync_playwright

BIN, OUT, CHROMIUM, AXE = sys.argv[1:5]
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
        "--disable-component-update", "--disable-sync", "--no-first-run"]


def somna(env, *args, stdin=None):
    """Runs the CLI; returns its stdout, failing on a non-zero exit."""
    r = subprocess.run([BIN, *args], env=env, input=stdin, capture_output=True, text=True,
                       check=False)
    assert r.returncode == 0, f"somna {args}: {r.stderr}"
    return r.stdout


def store(tmp):
    """The store and the environment of the CLI, with memories, a session, grants, tokens."""
    env = {"PATH": os.environ.get("PATH", ""), "HOME": tmp,
           "SOMNA_DB": os.path.join(tmp, "memory.redb")}
    somna(env, "init")
    somna(env, "note", "the deploy runs on fridays")
    somna(env, "note", "--kind", "inference", "the user is a night owl")
    somna(env, "nap", "0-1", "deploys on fridays [#0]; the user may be a night owl [#1]")
    somna(env, "note", "the door code is 4711 zebra")
    somna(env, "note", "the build uses cargo")
    somna(env, "--scope", "team/x", "note", "the team standup is at nine")
    somna(env, "session", "save", "chat-1",
           stdin='[{"role":"user","content":"hello"},{"role":"assistant","content":"hi"}]')
    somna(env, "grant", "user:bob", "read", "team/")
    admin = somna(env, "token", "add", "admin").strip()
    bob = somna(env, "token", "add", "user:bob").strip()
    return env, admin, bob


def serve(env):
    """Starts the server; returns the process and its base URL."""
    p = subprocess.Popen([BIN, "mcp", "--http", "127.0.0.1:0", "--ui"], env=env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True)
    for line in p.stderr:
        m = re.search(r"serving MCP at (http://[^/]+)/mcp", line)
        if m:
            return p, m.group(1)
    raise AssertionError("the server printed no address")


class Checker:
    """Screenshots and axe-core runs, one per page, recorded for the summary."""

    def __init__(self):
        self.pages = []

    def page(self, page, name):
        """Screenshots `page` as NAME.png (checked non-empty) and runs axe-core on it."""
        path = os.path.join(OUT, f"{name}.png")
        page.screenshot(path=path, full_page=True)
        assert os.path.getsize(path) > 0, path
        page.add_script_tag(path=AXE)
        result = page.evaluate("async () => await axe.run()")
        bad = [(v["id"], v["impact"], len(v["nodes"])) for v in result["violations"]
               if v["impact"] in ("critical", "serious")]
        assert not bad, f"{name}: axe-core: {bad}"
        self.pages.append((name, len(result["violations"])))


def login(context, base, token):
    """Logs in through the form; returns the page."""
    page = context.new_page()
    page.goto(f"{base}/ui/wake")
    assert page.url.endswith("/ui/login"), page.url
    page.fill("#token", token)
    with page.expect_navigation():
        page.click("button[type=submit]")
    assert page.url.startswith(f"{base}/ui/wake"), (page.url, page.content())
    return page


def csrf(page):
    """The session's CSRF token, from a form of the page."""
    return page.get_attribute("input[name=csrf]", "value")


def admin_flows(browser, base, env, token, check):
    """As the admin: every page, accept, redact."""
    context = browser.new_context(bypass_csp=True)
    anon = context.new_page()
    anon.goto(f"{base}/ui/log")
    assert anon.url.endswith("/ui/login"), "no cookie leads to the login page"
    check.page(anon, "login")
    page = login(context, base, token)
    assert "the deploy runs on fridays" in page.content()
    check.page(page, "wake")
    scopes_page(page, base, check)
    page.goto(f"{base}/ui/review?scope=default&proposed=1")
    check.page(page, "review")
    page.fill("#why1", "she said so")
    with page.expect_navigation():
        page.click("button[value=accept]")
    show = somna(env, "show", "1")
    assert "status: accepted" in show and "accept by admin: she said so" in show, show
    page.goto(f"{base}/ui/confirm?scope=default&id=2")
    assert "the door code is 4711 zebra" in page.content()
    check.page(page, "confirm-redact")
    page.fill("#reason", "a secret")
    with page.expect_navigation():
        page.click("main button[type=submit]")
    for path in ["/ui/wake", "/ui/log", "/ui/log?mode=search&q=zebra", "/ui/review"]:
        page.goto(base + path)
        assert "door code" not in page.content(), path
    assert "door code" not in somna(env, "export")
    for name, path in [("tree", "/ui/tree"), ("log", "/ui/log"),
                       ("search", "/ui/log?mode=search&q=deploy"), ("sessions", "/ui/sessions"),
                       ("session", "/ui/session?id=chat-1"), ("admin", "/ui/admin"),
                       ("zoom", "/ui/zoom?block=0-1"), ("why", "/ui/why?block=0-1")]:
        r = page.goto(base + path)
        assert r.status == 200, (path, r.status)
        check.page(page, name)
    zoom_up_and_down(page, base)
    page.goto(f"{base}/ui/wake")
    with page.expect_navigation():
        page.click("text=Log out")
    assert page.url.endswith("/ui/login"), page.url
    context.close()


def row_cells(page, scope):
    """The cells of the Scopes page's row of `scope`: [memories, summaries, pending, newest,
    proposed]."""
    row = page.locator("tbody tr").filter(has=page.locator("th", has_text=scope))
    assert row.count() == 1, (scope, page.content())
    return row.locator("td").all_inner_texts()


def scopes_page(page, base, check):
    """The Scopes page: each scope's counts, and its proposed memory a link to the review."""
    page.goto(f"{base}/ui/scopes")
    check.page(page, "scopes")
    memories, summaries, _, newest, proposed = row_cells(page, "default")
    assert (memories, summaries, proposed) == ("4", "1", "1"), row_cells(page, "default")
    assert newest.startswith("20"), newest
    assert row_cells(page, "team/x")[0] == "1"
    row = page.locator("tbody tr").filter(has=page.locator("th", has_text="default"))
    with page.expect_navigation():
        row.locator("td").last.locator("a").click()
    assert "/ui/review?scope=default&proposed=1" in page.url, page.url
    assert "night owl" in page.content() and "fridays" not in page.content()


def zoom_up_and_down(page, base):
    """A zoom links up to the block holding it and down to its summarized or pending halves."""
    page.goto(f"{base}/ui/zoom?scope=default&block=0-1")
    with page.expect_navigation():
        page.click("text=Up: the block 0-3")
    assert "block=0-3" in page.url, page.url
    halves = page.locator("main ul.lines li a")
    assert halves.count() == 2, page.content()
    with page.expect_navigation():
        halves.first.click()
    assert page.url.endswith("block=0-1"), page.url
    assert "the deploy runs on fridays" in page.content()


def reader_flows(browser, base):
    """As a reader: its scopes only, 403 for the admin page and a forged POST; a cross-site POST
    without the CSRF token is refused."""
    context = browser.new_context()
    page = login(context, base, BOB)
    text = page.content()
    assert "standup" in text and "fridays" not in text and "night owl" not in text, text
    assert page.goto(f"{base}/ui/admin").status == 403
    page.goto(f"{base}/ui/scopes")
    assert row_cells(page, "team/x")[0] == "1"
    assert page.locator("tbody tr").count() == 1, "bob sees only the scopes he may read"
    assert page.goto(f"{base}/ui/log?scope=default").status == 403
    page.goto(f"{base}/ui/wake")
    token = csrf(page)
    forged = context.request.post(f"{base}/ui/decide", headers={"Origin": base}, form={
        "csrf": token, "scope": "team/x", "id": "0", "decision": "retract"})
    assert forged.status == 403, forged.status
    cross = context.request.post(f"{base}/ui/decide",
                                 headers={"Origin": "https://evil.example"},
                                 form={"scope": "team/x", "id": "0", "decision": "retract"})
    assert cross.status == 403, cross.status
    context.close()


def main():
    os.makedirs(OUT, exist_ok=True)
    global BOB
    with tempfile.TemporaryDirectory() as tmp:
        env, admin, BOB = store(tmp)
        server, base = serve(env)
        started = time.monotonic()
        try:
            check = Checker()
            with sync_playwright() as pw:
                browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
                admin_flows(browser, base, env, admin, check)
                reader_flows(browser, base)
                browser.close()
        finally:
            server.kill()
            server.wait()
        for name, minor in check.pages:
            print(f"ok {name}: screenshot {name}.png, axe-core: no critical or serious "
                  f"violation ({minor} minor or moderate)")
        print(f"web inspector browser flows passed in {time.monotonic() - started:.1f} s; "
              f"screenshots in {OUT}")


BOB = ""

if __name__ == "__main__":
    main()
