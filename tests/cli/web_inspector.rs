//! The web inspector (`somna mcp --http ADDR --ui`, docs/inspector.md, issue 26), spoken to in
//! plain HTTP/1.1 as a browser would: logging in with a token sets an `HttpOnly`,
//! `SameSite=Strict` cookie scoped to `/ui`; no cookie leads to the login page; a POST without
//! the session's CSRF token or from a foreign Origin is refused; a reader sees only its scopes
//! and gets 403 for the admin page; an accept made on the page is recorded with the session's
//! principal; a redaction purges the text from the pages, search and export; a revoked token
//! ends its sessions at once; hostile memory text is escaped; every answer carries the
//! security headers.
//!
//! One token holder cannot log everyone out (issue 52, point 3: 1,024 logins with a read-only
//! token evicted the admin's session): a principal keeps a few sessions, its own oldest ended
//! first, and failed logins are limited per client address. A `Host` that is not the server's
//! is refused as `/mcp` refuses it (issue 52, point 4: DNS rebinding). The CSRF token is in
//! POST forms only, and counts only in a POST's body (issue 52, point 5: GET forms put it in
//! URLs, and a token in the query string was accepted). A HEAD is answered as a GET without
//! its body, another method a page does not take is 405 with `Allow`, and an unknown `?scope=`
//! is refused (issue 52, point 6).

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use crate::common::mcp::{status_of, token, token_and_id, HttpServer};
use crate::common::{run_raw, Env};

/// One answer: status, head and body.
struct Answer {
    status: u16,
    head: String,
    body: String,
}

impl Answer {
    /// The value of header `name` (lower-case), if any.
    fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.trim()
                .eq_ignore_ascii_case(name)
                .then(|| v.trim().to_string())
        })
    }
}

/// Sends one request and reads the whole answer (the connection closes after it).
fn send(s: &HttpServer, method: &str, path: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let mut t = TcpStream::connect(&s.addr).expect("connect");
    t.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let host = headers
        .iter()
        .find(|(k, _)| k.eq_ignore_ascii_case("host"))
        .map_or(s.addr.as_str(), |(_, v)| *v);
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n",
        body.len()
    );
    if method == "POST" {
        req.push_str("Content-Type: application/x-www-form-urlencoded\r\n");
    }
    for (k, v) in headers
        .iter()
        .filter(|(k, _)| !k.eq_ignore_ascii_case("host"))
    {
        req.push_str(&format!("{k}: {v}\r\n"));
    }
    req.push_str("\r\n");
    req.push_str(body);
    t.write_all(req.as_bytes()).expect("send");
    let mut resp = Vec::new();
    let _ = t.read_to_end(&mut resp);
    let text = String::from_utf8_lossy(&resp).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Answer {
        status: status_of(&text),
        head: head.to_string(),
        body: body.to_string(),
    }
}

/// Percent-encodes a form value.
fn enc(v: &str) -> String {
    v.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A logged-in browser: its cookie and its CSRF token.
struct Browser<'a> {
    s: &'a HttpServer,
    cookie: String,
    csrf: String,
}

impl<'a> Browser<'a> {
    /// Logs in with `tok`; panics unless it succeeds.
    fn login(s: &'a HttpServer, tok: &str) -> Browser<'a> {
        let a = send(s, "POST", "/ui/login", &[], &format!("token={}", enc(tok)));
        assert_eq!(a.status, 303, "{}{}", a.head, a.body);
        let set = a.header("set-cookie").expect("a cookie");
        let cookie = set.split(';').next().unwrap_or_default().to_string();
        let mut b = Browser {
            s,
            cookie,
            csrf: String::new(),
        };
        let page = b.get("/ui/wake");
        assert_eq!(page.status, 200, "{}", page.body);
        let at = page
            .body
            .find("name=\"csrf\" value=\"")
            .expect("a CSRF field")
            + 19;
        b.csrf = page.body[at..at + 64].to_string();
        b
    }

    fn get(&self, path: &str) -> Answer {
        send(self.s, "GET", path, &[("Cookie", &self.cookie)], "")
    }

    /// POSTs a form with the session's CSRF token and the server's own Origin.
    fn post(&self, path: &str, form: &str) -> Answer {
        let origin = format!("http://{}", self.s.addr);
        let body = format!("csrf={}&{form}", self.csrf);
        send(
            self.s,
            "POST",
            path,
            &[("Cookie", &self.cookie), ("Origin", &origin)],
            &body,
        )
    }
}

fn start(e: &Env) -> HttpServer {
    HttpServer::start(e, &["--ui"])
}

#[test]
fn login_sets_a_strict_cookie_and_no_cookie_sees_the_login_page() {
    let e = Env::init();
    let tok = token(&e, "admin");
    let s = start(&e);
    let none = send(&s, "GET", "/ui/wake", &[], "");
    assert_eq!(none.status, 303);
    assert_eq!(none.header("location").as_deref(), Some("/ui/login"));
    let login = send(&s, "GET", "/ui/login", &[], "");
    assert_eq!(login.status, 200);
    assert!(login.body.contains("name=\"token\""), "{}", login.body);
    let csp = login.header("content-security-policy").expect("a CSP");
    assert!(
        csp.contains("frame-ancestors 'none'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert_eq!(
        login.header("x-content-type-options").as_deref(),
        Some("nosniff")
    );
    let wrong = send(&s, "POST", "/ui/login", &[], "token=somna_nottoken");
    assert_eq!(wrong.status, 401);
    assert!(wrong.header("set-cookie").is_none());
    let ok = send(
        &s,
        "POST",
        "/ui/login",
        &[],
        &format!("token={}", enc(&tok)),
    );
    assert_eq!(ok.status, 303);
    let set = ok.header("set-cookie").expect("a cookie");
    for flag in ["HttpOnly", "SameSite=Strict", "Path=/ui"] {
        assert!(set.contains(flag), "{set}");
    }
    // A forged cookie is no session.
    let forged = send(&s, "GET", "/ui/wake", &[("Cookie", "somna_ui=00")], "");
    assert_eq!(forged.status, 303);
}

#[test]
fn a_post_without_the_csrf_token_or_from_another_origin_is_refused() {
    let e = Env::init();
    e.ok(&["note", "--kind", "inference", "the user likes tea"]);
    let tok = token(&e, "admin");
    let s = start(&e);
    let b = Browser::login(&s, &tok);
    let cookie = [("Cookie", b.cookie.as_str())];
    let no_token = send(&s, "POST", "/ui/decide", &cookie, "id=0&decision=accept");
    assert_eq!(no_token.status, 403, "{}", no_token.body);
    let wrong = send(
        &s,
        "POST",
        "/ui/decide",
        &cookie,
        "csrf=00&id=0&decision=accept",
    );
    assert_eq!(wrong.status, 403);
    let body = format!("csrf={}&id=0&decision=accept", b.csrf);
    let foreign = [
        ("Cookie", b.cookie.as_str()),
        ("Origin", "https://evil.example"),
    ];
    let cross = send(&s, "POST", "/ui/decide", &foreign, &body);
    assert_eq!(cross.status, 403);
    let cross_login = send(
        &s,
        "POST",
        "/ui/login",
        &[("Origin", "https://evil.example")],
        &format!("token={}", enc(&tok)),
    );
    assert_eq!(cross_login.status, 403);
    assert!(e.ok(&["show", "0"]).contains("status: proposed"));
    // Logging out needs the token too, and then the cookie is no session.
    assert_eq!(send(&s, "POST", "/ui/logout", &cookie, "").status, 403);
    assert_eq!(b.post("/ui/logout", "").status, 303);
    assert_eq!(b.get("/ui/wake").status, 303);
}

#[test]
fn accepting_on_the_page_is_recorded_with_the_sessions_principal() {
    let e = Env::init();
    e.ok(&["note", "--kind", "inference", "the user is a night owl"]);
    e.ok(&["grant", "user:carol", "read", "default"]);
    e.ok(&["grant", "user:carol", "write", "default"]);
    let tok = token(&e, "user:carol");
    let s = start(&e);
    let b = Browser::login(&s, &tok);
    let review = b.get("/ui/review?proposed=1");
    assert_eq!(review.status, 200);
    assert!(
        review.body.contains("[proposed] the user is a night owl"),
        "{}",
        review.body
    );
    let r = b.post(
        "/ui/decide",
        "scope=default&id=0&decision=accept&why=checked+with+her",
    );
    assert_eq!(r.status, 303, "{}", r.body);
    let show = e.ok(&["show", "0"]);
    assert!(
        show.contains("status: accepted")
            && show.contains("accept by user:carol: checked with her"),
        "{show}"
    );
    assert!(b.get("/ui/wake").body.contains("the user is a night owl"));
    assert!(b.get("/ui/log?status=accepted").body.contains("night owl"));
    assert!(!b.get("/ui/log?status=proposed").body.contains("night owl"));
}

#[test]
fn a_reader_sees_only_its_scopes_and_not_the_admin_page() {
    let e = Env::init();
    e.ok(&["--scope", "team/x", "note", "shared fact"]);
    e.ok(&["--scope", "private", "note", "private diary"]);
    e.ok(&["grant", "user:bob", "read", "team/"]);
    let admin = token(&e, "admin");
    let bob = token(&e, "user:bob");
    let s = start(&e);
    let a = Browser::login(&s, &admin);
    assert!(a.get("/ui/wake").body.contains("Grants and tokens"));
    assert!(!Browser::login(&s, &bob)
        .get("/ui/wake")
        .body
        .contains("Grants and tokens"));
    let grants = a.get("/ui/admin");
    assert_eq!(grants.status, 200);
    assert!(grants.body.contains("user:bob"), "{}", grants.body);
    let b = Browser::login(&s, &bob);
    assert_eq!(b.get("/ui/admin").status, 403);
    let wake = b.get("/ui/wake");
    assert!(wake.body.contains("shared fact"), "{}", wake.body);
    assert!(!wake.body.contains("private"), "{}", wake.body);
    let denied = b.get("/ui/log?scope=private");
    assert_eq!(denied.status, 403);
    assert!(!denied.body.contains("private diary"));
    // A forged POST (the reader may not write) is refused by the library.
    let forged = b.post("/ui/decide", "scope=team%2Fx&id=0&decision=retract");
    assert_eq!(forged.status, 403, "{}", forged.body);
}

#[test]
fn redacting_purges_the_text_from_pages_search_and_export() {
    let e = Env::init();
    e.ok(&["note", "the door code is 4711 zebra"]);
    e.ok(&["note", "an ordinary note"]);
    let tok = token(&e, "admin");
    let s = start(&e);
    let b = Browser::login(&s, &tok);
    let confirm = b.get("/ui/confirm?scope=default&id=0");
    assert!(
        confirm.body.contains("the door code is 4711 zebra"),
        "{}",
        confirm.body
    );
    let r = b.post("/ui/redact", "scope=default&id=0&reason=a+secret");
    assert_eq!(r.status, 303, "{}", r.body);
    for page in [
        "/ui/wake",
        "/ui/log",
        "/ui/review",
        "/ui/log?mode=search&q=zebra",
    ] {
        let a = b.get(page);
        assert_eq!(a.status, 200, "{page}");
        assert!(!a.body.contains("door code"), "{page}: {}", a.body);
    }
    assert!(!e.export().contains("zebra"));
    assert!(!e.ok(&["search", "zebra"]).contains("zebra"));
}

#[test]
fn a_revoked_token_ends_its_sessions_at_once() {
    let e = Env::init();
    let (tok, id) = token_and_id(&e, "admin");
    let s = start(&e);
    let b = Browser::login(&s, &tok);
    assert_eq!(b.get("/ui/log").status, 200);
    e.ok(&["token", "revoke", &id]);
    let after = b.get("/ui/log");
    assert_eq!(after.status, 303);
    assert_eq!(after.header("location").as_deref(), Some("/ui/login"));
}

#[test]
fn hostile_memory_text_is_escaped_on_every_page() {
    let e = Env::init();
    let hostile = "<script>alert(1)</script> \"><img src=x onerror=alert(2)>";
    e.ok(&["note", hostile]);
    e.ok(&["note", hostile]);
    let mut c = e.cmd();
    c.args(["session", "save", "s1"]);
    let msg = br#"[{"role":"user","content":"<script>alert(3)</script>"}]"#;
    assert_eq!(run_raw(c, Some(msg)).code, 0);
    let tok = token(&e, "admin");
    let s = start(&e);
    let b = Browser::login(&s, &tok);
    for page in [
        "/ui/wake",
        "/ui/log",
        "/ui/log?q=script",
        "/ui/review",
        "/ui/tree",
        "/ui/scopes",
        "/ui/zoom?block=0-1",
        "/ui/confirm?id=0",
        "/ui/sessions",
        "/ui/session?id=s1",
        "/ui/log?q=%3Cscript%3E&mode=search",
        "/ui/wake?scope=%3Cscript%3E",
    ] {
        let a = b.get(page);
        assert!(
            !a.body.contains("<script>") && !a.body.contains("<img"),
            "{page}: {}",
            a.body
        );
    }
    assert!(b
        .get("/ui/log")
        .body
        .contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
}

#[test]
fn one_principals_logins_end_only_its_own_oldest_sessions() {
    let e = Env::init();
    let (admin, reader) = (token(&e, "admin"), token(&e, "user:reader"));
    let s = start(&e);
    let a = Browser::login(&s, &admin);
    let first = Browser::login(&s, &reader);
    for _ in 0..1_100 {
        let r = send(
            &s,
            "POST",
            "/ui/login",
            &[],
            &format!("token={}", enc(&reader)),
        );
        assert_eq!(r.status, 303, "{}{}", r.head, r.body);
    }
    assert_eq!(a.get("/ui/wake").status, 200, "the admin was logged out");
    let gone = first.get("/ui/wake");
    assert_eq!(gone.status, 303, "the reader's oldest session was kept");
    assert_eq!(gone.header("location").as_deref(), Some("/ui/login"));
}

#[test]
fn failed_logins_are_limited_per_address() {
    let e = Env::init();
    let tok = token(&e, "admin");
    let s = start(&e);
    let a = Browser::login(&s, &tok);
    let mut statuses = Vec::new();
    for n in 0..20 {
        let r = send(
            &s,
            "POST",
            "/ui/login",
            &[],
            &format!("token=somna_wrong{n}"),
        );
        statuses.push(r.status);
    }
    assert_eq!(statuses[..10], [401; 10], "{statuses:?}");
    assert_eq!(statuses[10..], [429; 10], "{statuses:?}");
    // Now even a good token is refused from this address, before it is looked up; a session
    // already open is not touched.
    let r = send(
        &s,
        "POST",
        "/ui/login",
        &[],
        &format!("token={}", enc(&tok)),
    );
    assert_eq!(r.status, 429, "{}", r.body);
    assert_eq!(a.get("/ui/wake").status, 200);
}

#[test]
fn a_foreign_host_is_refused_as_mcp_refuses_it() {
    let e = Env::init();
    let tok = token(&e, "admin");
    let s = start(&e);
    let b = Browser::login(&s, &tok);
    let port = s.addr.rsplit(':').next().expect("a port");
    let evil = format!("evil.example:{port}");
    let cookie = b.cookie.as_str();
    let page = send(
        &s,
        "GET",
        "/ui/wake",
        &[("Host", &evil), ("Cookie", cookie)],
        "",
    );
    assert_eq!(page.status, 403, "{}", page.body);
    assert!(!page.body.contains("name=\"csrf\""), "{}", page.body);
    let form = format!("token={}", enc(&tok));
    let login = send(&s, "POST", "/ui/login", &[("Host", &evil)], &form);
    assert_eq!(login.status, 403, "{}", login.body);
    assert!(login.header("set-cookie").is_none(), "{}", login.head);
    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}")] {
        let ok = send(
            &s,
            "GET",
            "/ui/wake",
            &[("Host", &host), ("Cookie", cookie)],
            "",
        );
        assert_eq!(ok.status, 200, "{host}: {}", ok.body);
    }
}

#[test]
fn the_csrf_token_is_only_in_post_forms_and_counts_only_in_the_body() {
    let e = Env::init();
    e.ok(&["note", "--kind", "inference", "the user is a night owl"]);
    let tok = token(&e, "admin");
    let s = start(&e);
    let b = Browser::login(&s, &tok);
    for path in [
        "/ui/wake",
        "/ui/log",
        "/ui/review",
        "/ui/tree",
        "/ui/confirm?id=0",
    ] {
        let page = b.get(path);
        assert_eq!(page.status, 200, "{path}: {}", page.body);
        for form in page.body.split("<form").skip(1) {
            let form = form.split("</form>").next().unwrap_or_default();
            let post = form.starts_with(" method=\"post\"");
            assert_eq!(post, form.contains("name=\"csrf\""), "{path}: {form}");
        }
    }
    let origin = format!("http://{}", s.addr);
    let headers = [("Cookie", b.cookie.as_str()), ("Origin", origin.as_str())];
    let action = "scope=default&id=0&decision=accept";
    let in_url = format!("/ui/decide?csrf={}&{action}", b.csrf);
    let r = send(&s, "POST", &in_url, &headers, "");
    assert_eq!(r.status, 403, "{}", r.body);
    let r = send(
        &s,
        "POST",
        &format!("/ui/decide?{action}"),
        &headers,
        &format!("csrf={}", b.csrf),
    );
    assert_eq!(r.status, 303, "{}", r.body);
    // A token in the URL of a login is not read either.
    let r = send(
        &s,
        "POST",
        &format!("/ui/login?token={}", enc(&tok)),
        &[],
        "",
    );
    assert_eq!(r.status, 401, "{}", r.body);
}

#[test]
fn head_is_answered_as_get_without_a_body_and_other_methods_are_405() {
    let e = Env::init();
    let tok = token(&e, "admin");
    let s = start(&e);
    let b = Browser::login(&s, &tok);
    let cookie = [("Cookie", b.cookie.as_str())];
    let get = b.get("/ui/wake");
    let head = send(&s, "HEAD", "/ui/wake", &cookie, "");
    assert_eq!(head.status, 200, "{}", head.head);
    assert!(head.body.is_empty(), "{}", head.body);
    assert_eq!(head.header("content-type"), get.header("content-type"));
    let length = get.body.len().to_string();
    assert_eq!(head.header("content-length"), Some(length), "{}", head.head);
    assert!(
        head.header("content-security-policy").is_some(),
        "{}",
        head.head
    );
    let css = send(&s, "HEAD", "/ui/style.css", &[], "");
    assert_eq!((css.status, css.body.as_str()), (200, ""));
    for (method, path, allow) in [
        ("PUT", "/ui/wake", "GET, HEAD"),
        ("DELETE", "/ui/decide", "POST"),
        ("GET", "/ui/decide", "POST"),
        ("PATCH", "/ui/login", "GET, HEAD, POST"),
        ("GET", "/ui/logout", "POST"),
    ] {
        let r = send(&s, method, path, &cookie, "");
        assert_eq!(r.status, 405, "{method} {path}: {}", r.body);
        assert_eq!(r.header("allow").as_deref(), Some(allow), "{method} {path}");
    }
    for method in ["GET", "HEAD", "PUT"] {
        assert_eq!(send(&s, method, "/ui/nowhere", &cookie, "").status, 404);
    }
}

#[test]
fn an_unknown_scope_is_refused() {
    let e = Env::init();
    e.ok(&["note", "the deploy runs on fridays"]);
    let tok = token(&e, "admin");
    let s = start(&e);
    let b = Browser::login(&s, &tok);
    for path in ["/ui/wake", "/ui/log", "/ui/review", "/ui/tree", "/ui/admin"] {
        let r = b.get(&format!("{path}?scope=no-such-scope"));
        assert_eq!(r.status, 400, "{path}: {}", r.body);
        assert!(r.body.contains("no-such-scope"), "{path}: {}", r.body);
        assert_eq!(
            b.get(&format!("{path}?scope=default")).status,
            200,
            "{path}"
        );
    }
    let r = b.post("/ui/decide", "scope=no-such-scope&id=0&decision=accept");
    assert_eq!(r.status, 400, "{}", r.body);
}

/// The Log page's box ranks words by default (a person types words, not a regex), applies the
/// kind and status filters to the ranking too, and matches a regex only when asked
#[test]
fn the_log_box_ranks_words_by_default_and_matches_a_regex_when_asked() {
    let e = Env::init();
    e.ok(&["note", "we deploy the billing service on fridays"]);
    e.ok(&[
        "note",
        "--kind",
        "decision",
        "the billing service moves to postgres",
    ]);
    e.ok(&["note", "lunch is at noon"]);
    let tok = token(&e, "admin");
    let s = start(&e);
    let b = Browser::login(&s, &tok);
    // Words in another order than stored: no regex matches them, ranked search does
    let ranked = b.get("/ui/log?q=service+billing");
    assert_eq!(ranked.status, 200);
    assert!(ranked.body.contains("best first"), "{}", ranked.body);
    let at = |what: &str| ranked.body.find(what).unwrap_or(usize::MAX);
    // Both matches, ranked above any neighbour shown for context
    assert!(
        at("deploy the billing service") < at("lunch")
            && at("moves to postgres") < at("lunch")
            && at("deploy the billing service") != usize::MAX
            && at("moves to postgres") != usize::MAX,
        "{}",
        ranked.body
    );
    assert!(
        ranked.body.contains("<option value=\"search\" selected>"),
        "{}",
        ranked.body
    );
    let decisions = b.get("/ui/log?q=billing+service&kind=decision");
    assert!(
        decisions.body.contains("moves to postgres")
            && !decisions.body.contains("deploy the billing"),
        "{}",
        decisions.body
    );
    let regex = b.get("/ui/log?q=service+billing&mode=regex");
    assert!(regex.body.contains("newest first"), "{}", regex.body);
    assert!(!regex.body.contains("moves to postgres"), "{}", regex.body);
    let regex = b.get("/ui/log?q=billing.*fridays&mode=regex");
    assert!(regex.body.contains("deploy the billing"), "{}", regex.body);
}

#[test]
fn the_scopes_page_reads_a_bounded_page_of_scopes() {
    // Each scope shown reads up to 1,000 memories: a page shows 50 scopes, then links to more.
    let e = Env::init();
    for n in 0..51 {
        e.ok(&["--scope", &format!("s{n:02}"), "note", "x"]);
    }
    let tok = token(&e, "admin");
    let s = start(&e);
    let b = Browser::login(&s, &tok);
    let first = b.get("/ui/scopes");
    assert_eq!(first.status, 200);
    let rows = |body: &str| body.matches("<th scope=\"row\">").count();
    assert_eq!(rows(&first.body), 50, "{}", first.body);
    assert!(
        first.body.contains("51 scopes you may read"),
        "{}",
        first.body
    );
    assert!(
        first.body.contains("offset=50\">More scopes"),
        "{}",
        first.body
    );
    let rest = b.get("/ui/scopes?offset=50");
    assert_eq!(rows(&rest.body), 1, "{}", rest.body);
    assert!(rest.body.contains(">s50</a>") && !rest.body.contains("More scopes"));
}
