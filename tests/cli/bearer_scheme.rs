//! The bearer scheme of `somna mcp --http` is case-insensitive (issue 27, point 10; RFC 9110,
//! 11.1): `bearer`, `BEARER` and `Bearer` with a valid token are served, while a missing, empty
//! or unknown token, or another scheme, is still refused with 401.

use crate::common::mcp::{initialize_body, token, HttpServer};
use crate::common::Env;

#[test]
fn the_scheme_is_case_insensitive_and_the_token_still_checked() {
    let e = Env::init();
    let tok = token(&e, "user:bob");
    let s = HttpServer::start(&e, &[]);
    let body = initialize_body();
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let auth = format!("{scheme} {tok}");
        let (status, resp) = s.post(&[("Authorization", &auth)], &body);
        assert_eq!(status, 200, "{scheme}: {resp}");
    }
    let unknown = format!("bearer {tok}x");
    let basic = format!("Basic {tok}");
    for auth in [
        unknown.as_str(),
        basic.as_str(),
        "bearer",
        "bearer  ",
        tok.as_str(),
    ] {
        let (status, resp) = s.post(&[("Authorization", auth)], &body);
        assert_eq!(status, 401, "{auth:?}: {resp}");
    }
}
