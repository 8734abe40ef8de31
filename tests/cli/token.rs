//! `somna token`: a bearer token for `somna mcp --http` is printed once and only its SHA-256
//! is stored (the token's bytes appear nowhere in the file); `token list` names each by the start
//! of its hash with its principal; `token revoke` removes it (a second revoke finds nothing, exit
//! 3); only the admin may add, list or revoke; an id shorter than the listed one is refused, so
//! that a short prefix cannot revoke several tokens by accident.

use crate::common::{run_raw, Env};

#[test]
fn a_token_is_shown_once_and_stored_only_as_its_hash() {
    let e = Env::init();
    let token = e.ok(&["token", "add", "alice"]).trim().to_string();
    assert!(
        token.starts_with("somna_") && token.len() == 6 + 64,
        "{token}"
    );
    let other = e.ok(&["token", "add", "bob"]).trim().to_string();
    assert_ne!(token, other);
    let file = std::fs::read(&e.db).expect("store bytes");
    assert!(
        !file.windows(token.len()).any(|w| w == token.as_bytes()),
        "the token itself is in the file"
    );
    let list = e.lines(&["token", "list"]);
    assert_eq!(list.len(), 2, "{list:?}");
    let alice: Vec<&str> = list[..]
        .iter()
        .find(|l| l.contains(" alice "))
        .expect("alice's token")
        .split(' ')
        .collect();
    assert_eq!(alice[0].len(), 12);
    assert!(alice[0].bytes().all(|b| b.is_ascii_hexdigit()));
    assert_eq!(&alice[1..4], ["alice", "added", "by"]);
    assert!(!list.join("\n").contains(&token));
    let json: serde_json::Value =
        serde_json::from_str(&e.ok(&["--json", "token", "list"])).expect("json");
    assert_eq!(json.as_array().map(Vec::len), Some(2));
}

#[test]
fn revoke_removes_the_token_and_only_the_admin_manages_tokens() {
    let e = Env::init();
    e.ok(&["token", "add", "alice"]);
    let id = e.lines(&["token", "list"])[0]
        .split(' ')
        .next()
        .expect("id")
        .to_string();
    let mut short = e.cmd();
    short.args(["token", "revoke", &id[..6]]);
    assert_eq!(run_raw(short, None).code, 2, "a short id is refused");
    for args in [
        vec!["--as", "bob", "token", "add", "bob"],
        vec!["--as", "bob", "token", "list"],
        vec!["--as", "bob", "token", "revoke", id.as_str()],
    ] {
        let mut c = e.cmd();
        c.args(&args);
        let r = run_raw(c, None);
        assert_eq!(r.code, 6, "{args:?}: {r:?}");
    }
    assert_eq!(e.ok(&["token", "revoke", &id]), "Revoked 1 token.\n");
    assert_eq!(
        e.ok(&["token", "list"]),
        "No tokens: `somna mcp --http` refuses every request.\n"
    );
    let mut again = e.cmd();
    again.args(["token", "revoke", &id]);
    assert_eq!(run_raw(again, None).code, 3);
}
