//! A server URL as somna names it: whether a location is one, and the URL as it may be shown,
//! never with a password. Plain text work, built with or without the `postgres` feature (the
//! CLI shows a URL either way).

use std::path::Path;

/// The server URL that `path` holds, if it is one (`postgresql://...`).
pub fn url_of(path: &Path) -> Option<&str> {
    path.to_str()
        .filter(|s| s.starts_with("postgresql://") || s.starts_with("postgres://"))
}

/// Query parameters that carry a secret, dropped from a shown URL (libpq's names).
const SECRET_PARAMS: [&str; 2] = ["password", "sslpassword"];

/// A server URL as it may be shown: its parts rebuilt one by one, with the password of its user
/// info and every secret query parameter (`password`, `sslpassword`) left out, however the
/// password is written (with `/` or `?` in it).
///
/// ```
/// use somna::without_password;
/// assert_eq!(
///     without_password("postgresql://ann:secret@db.example:5432/mem?schema=team"),
///     "postgresql://ann@db.example:5432/mem?schema=team"
/// );
/// assert_eq!(
///     without_password("postgresql://adv:pa/ss@127.0.0.1:5432/postgres?schema=s"),
///     "postgresql://adv@127.0.0.1:5432/postgres?schema=s"
/// );
/// assert_eq!(
///     without_password("postgresql://postgres@h/db?schema=q&password=S3cret!&sslpassword=k"),
///     "postgresql://postgres@h/db?schema=q"
/// );
/// assert_eq!(
///     without_password("postgresql://h/db?pass%77ord=S3cret&schema=q"),
///     "postgresql://h/db?schema=q"
/// );
/// assert_eq!(without_password("postgresql://h/db?password=p@ss"), "postgresql://ss");
/// assert_eq!(without_password("/home/ann/.somna/memory.redb"), "/home/ann/.somna/memory.redb");
/// ```
pub fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    // The user info ends at the first `@`, as the connection's own parser (tokio-postgres)
    // reads it: a password may hold `/`, `?` or `:`, and an `@` in it must be percent-encoded.
    // A user name holding `/`, `?` or `=` is a host, path or query cut at an `@` in the query
    // (`h/db?password=p@ss`): none of it is shown.
    let (user, after) = match rest.split_once('@') {
        Some((info, after)) => match info.split(':').next().unwrap_or("") {
            name if name.contains(['/', '?', '=']) => (String::new(), after),
            name => (format!("{name}@"), after),
        },
        None => (String::new(), rest),
    };
    let (head, query) = match after.split_once('?') {
        Some((h, q)) => (h, Some(q)),
        None => (after, None),
    };
    let mut out = format!("{scheme}://{user}{head}");
    if let Some(q) = query {
        let kept: Vec<&str> = q
            .split('&')
            .filter(|kv| {
                // Compared as the connection's parser reads it: percent-decoded.
                let raw = kv.split('=').next().unwrap_or("");
                let key = percent_encoding::percent_decode_str(raw).decode_utf8_lossy();
                !SECRET_PARAMS.iter().any(|s| key.eq_ignore_ascii_case(s))
            })
            .collect();
        if !kept.is_empty() {
            out.push('?');
            out.push_str(&kept.join("&"));
        }
    }
    out
}
