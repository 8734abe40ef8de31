//! A server URL as somna names it: whether a location is one, and the URL as it may be shown,
//! never with a password. Plain text work, built with or without the `postgres` feature (the
//! CLI shows a URL either way).

use std::path::Path;

use crate::error::{Error, Result};

/// The URL schemes of a store on a server, compared without regard to case (as RFC 3986 says
/// schemes are): `postgresql://` and `postgres://`, as libpq reads them.
const SERVER_SCHEMES: [&str; 2] = ["postgresql", "postgres"];

/// The scheme of a location written as a URL (`scheme://...`, the scheme a letter then letters,
/// digits, `+`, `-` or `.`, as RFC 3986 says), if it is one.
fn scheme_of(s: &str) -> Option<&str> {
    let (scheme, _) = s.split_once("://")?;
    let mut chars = scheme.chars();
    let first = chars.next()?;
    (first.is_ascii_alphabetic() && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c)))
        .then_some(scheme)
}

/// The server URL that `path` holds, if it is one (`postgresql://...` or `postgres://...`, the
/// scheme in any case: `PostgreSQL://` too).
pub fn url_of(path: &Path) -> Option<&str> {
    path.to_str().filter(|s| {
        scheme_of(s).is_some_and(|sc| SERVER_SCHEMES.iter().any(|k| sc.eq_ignore_ascii_case(k)))
    })
}

/// Refuses, before anything is opened or created, a location written as a URL that names no
/// store somna serves (`mysql://`, `http://`, `postgresql+psycopg://`: a path with them would
/// otherwise be a file path, and its folders made), and a server URL without a host (neither
/// after `//` nor as a `host=` parameter), which would only be retried until the busy timeout.
/// The message names the scheme alone: the rest of a URL may hold a password.
///
/// ```
/// use std::path::Path;
/// use somna::store::check_location;
/// assert!(check_location(Path::new("/home/ann/.somna/memory.redb")).is_ok());
/// assert!(check_location(Path::new("PostgreSQL://ann@db.example/mem")).is_ok());
/// let e = check_location(Path::new("mysql://ann:secret@db.example/mem")).unwrap_err();
/// assert!(e.to_string().contains("mysql://") && !e.to_string().contains("secret"));
/// assert!(check_location(Path::new("postgresql://")).is_err());
/// assert!(check_location(Path::new("postgresql:///mem?host=/run/postgresql")).is_ok());
/// ```
pub fn check_location(path: &Path) -> Result<()> {
    let Some(s) = path.to_str() else {
        return Ok(());
    };
    let Some(scheme) = scheme_of(s) else {
        return Ok(());
    };
    let invalid = |reason: String| {
        Err(Error::Invalid {
            what: "store",
            reason,
        })
    };
    if url_of(path).is_none() {
        return invalid(format!(
            "{}:// is not a store somna can open: a store is a file path or a postgresql:// URL",
            crate::domain::text::display_safe(scheme)
        ));
    }
    // The user info ends at the first `@`, as the connection's parser reads it (see
    // [`without_password`]); the host runs to a `:`, `/` or `?`.
    let rest = s.get(scheme.len() + 3..).unwrap_or_default();
    let after = rest.split_once('@').map_or(rest, |(_, a)| a);
    let host = after.split([':', '/', '?']).next().unwrap_or_default();
    let query = after.split_once('?').map_or("", |(_, q)| q);
    let host_param = query
        .split('&')
        .any(|kv| kv.starts_with("host=") || kv.starts_with("hostaddr="));
    if host.is_empty() && !host_param {
        return invalid(format!(
            "{}:// names no server: give its host (postgresql://USER@HOST/DATABASE)",
            crate::domain::text::display_safe(scheme)
        ));
    }
    Ok(())
}

/// `url` with its scheme in lower case, as the connection's parser wants it (`PostgreSQL://`
/// is `postgresql://`).
#[cfg(feature = "postgres")]
pub(crate) fn lower_scheme(url: &str) -> String {
    match scheme_of(url) {
        Some(sc) => format!(
            "{}{}",
            sc.to_ascii_lowercase(),
            url.get(sc.len()..).unwrap_or_default()
        ),
        None => url.to_string(),
    }
}

/// Query parameters that carry a secret, dropped from a shown URL (libpq's names).
const SECRET_PARAMS: [&str; 2] = ["password", "sslpassword"];

/// A server URL as it may be shown: its parts rebuilt one by one, with the password of its user
/// info and every secret query parameter (`password`, `sslpassword`) left out, however the
/// password is written (with `/` or `?` in it).
///
/// ```
/// use somna::store::without_password;
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
