//! A server URL as engram names it: whether a location is one, and the URL as it may be shown,
//! never with a password. Plain text work, built with or without the `postgres` feature (the
//! CLI shows a URL either way).

use std::path::Path;

/// The server URL that `path` holds, if it is one (`postgresql://...`).
pub fn url_of(path: &Path) -> Option<&str> {
    path.to_str()
        .filter(|s| s.starts_with("postgresql://") || s.starts_with("postgres://"))
}

/// A server URL as it may be shown: without the password of its user info, if it has one.
///
/// ```
/// use engram::storage::store::without_password;
/// assert_eq!(
///     without_password("postgresql://ann:secret@db.example:5432/mem?schema=team"),
///     "postgresql://ann@db.example:5432/mem?schema=team"
/// );
/// assert_eq!(without_password("/home/ann/.engram/memory.redb"), "/home/ann/.engram/memory.redb");
/// ```
pub fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let Some(at) = authority.rfind('@') else {
        return url.to_string();
    };
    let (userinfo, hosts) = authority.split_at(at);
    let user = userinfo.split(':').next().unwrap_or("");
    format!("{scheme}://{user}{hosts}{tail}")
}
