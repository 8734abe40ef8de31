//! A server URL as connection settings: each host's own URL (a URL may name several, libpq's
//! failover list), the schema it names (`?schema=`, else [`DEFAULT_SCHEMA`]), the
//! TLS parameters, and the timeouts of a connection's start-up and of its statements.

use std::time::Duration;

use tokio_postgres::Config;

use crate::error::{Error, Result};
use crate::storage::pg::client::Client;
use crate::storage::pg::tls::{is_tls_param, MakeRustls, SslMode, TlsParams};
use crate::storage::pg::url::without_password;

/// The schema a URL names when it names none.
pub const DEFAULT_SCHEMA: &str = "somna";

/// How long a connection's start-up may take per host when the URL sets no `connect_timeout`.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The shortest `statement_timeout` a transaction sets (it is four busy timeouts otherwise).
pub(super) const MIN_STATEMENT_TIMEOUT: Duration = Duration::from_secs(30);

/// A parsed server URL: the connection settings of each host, the schema, and the URL as it may
/// be shown (never with a password).
pub(crate) struct ServerUrl {
    /// Each host the URL names, in order, with its settings and its name as it may be shown
    /// (one entry when the URL names one host, or names its hosts in its query).
    pub(super) hosts: Vec<(Config, String)>,
    /// How long one host's start-up may take (`connect_timeout`).
    pub(super) connect_timeout: Duration,
    /// The TLS parameters, and the connector they make.
    tls: TlsParams,
    pub(super) rustls: MakeRustls,
    /// The schema, a plain identifier (`[a-z_][a-z0-9_]*`, at most 63 bytes).
    pub(crate) schema: String,
    /// Whether the URL named the schema (`?schema=`), or it is [`DEFAULT_SCHEMA`].
    pub(crate) schema_named: bool,
    /// The URL without its password: what messages and `Store::path` show.
    pub(crate) shown: String,
}

/// Parses `url`: somna's own `schema` parameter is taken out, the rest goes to the client,
/// once per host (each host is tried in turn, each within `connect_timeout`, as libpq does).
/// A password may come from the URL or from `PGPASSWORD`; neither is ever shown.
pub(crate) fn parse_url(url: &str) -> Result<ServerUrl> {
    let lowered = super::url::lower_scheme(url);
    let url = lowered.as_str();
    let (client_url, schema, tls) = split_params(url)?;
    let schema_named = schema_param(url).is_some();
    let shown = without_password(url);
    let hosts = host_urls(&client_url)
        .into_iter()
        .map(|(u, host)| {
            let name = if host.is_empty() { shown.clone() } else { host };
            let mut config = configure(&u, &shown)?;
            config.ssl_mode(tls.client_mode());
            Ok((config, name))
        })
        .collect::<Result<Vec<_>>>()?;
    let connect_timeout = hosts
        .first()
        .and_then(|(c, _)| c.get_connect_timeout().copied())
        .unwrap_or(DEFAULT_CONNECT_TIMEOUT);
    Ok(ServerUrl {
        rustls: MakeRustls::new(tls.client_config()?),
        tls,
        hosts,
        connect_timeout,
        schema,
        schema_named,
        shown,
    })
}

/// The value of the URL's `schema` parameter, if it has one.
fn schema_param(url: &str) -> Option<&str> {
    let (_, query) = url.split_once('?')?;
    query
        .split('&')
        .filter_map(|kv| kv.split_once('='))
        .rfind(|(k, _)| *k == "schema")
        .map(|(_, v)| v)
}

/// `url` naming `schema` (a plain identifier) in place of the schema it names, if any.
pub(crate) fn with_schema(url: &str, schema: &str) -> String {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut parts: Vec<String> = query
        .split('&')
        .filter(|kv| !kv.is_empty() && !kv.starts_with("schema="))
        .map(str::to_string)
        .collect();
    parts.push(format!("schema={schema}"));
    format!("{base}?{}", parts.join("&"))
}

impl ServerUrl {
    /// The warning a connection calls for: a password sent in clear to a host other than
    /// loopback (a Unix socket counts as loopback).
    pub(super) fn insecure(&self, client: &Client) -> Option<String> {
        let password = self
            .hosts
            .first()
            .is_some_and(|(c, _)| c.get_password().is_some());
        if client.encrypted() || !password || is_loopback(client.host()) {
            return None;
        }
        let why = match self.tls.mode {
            SslMode::Disable => "sslmode=disable",
            _ => "the server declined TLS and sslmode is prefer",
        };
        Some(format!(
            "the password for {} went to {} without TLS ({why}); set sslmode=verify-full (or require) in the URL",
            self.shown,
            client.host()
        ))
    }
}

/// Whether a host (`name:port`, `[v6]:port`, a URL, or a socket path) is on this machine.
fn is_loopback(host: &str) -> bool {
    let name = host.split_once("://").map_or(host, |(_, rest)| {
        rest.rsplit_once('@').map_or(rest, |(_, h)| h)
    });
    let name = match name.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => name.split([':', '/', '?']).next().unwrap_or(""),
    };
    name.is_empty()
        || name.starts_with('/')
        || name.to_ascii_lowercase().starts_with("%2f")
        || name == "localhost"
        || name
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// The URL once per host it names, with the host as it may be shown: `postgresql://u@h1,h2/db`
/// gives `postgresql://u@h1/db` and `postgresql://u@h2/db`. A URL with one host, or with its
/// hosts in its query (`?host=`), is given whole, with no name.
fn host_urls(url: &str) -> Vec<(String, String)> {
    let whole = || vec![(url.to_string(), String::new())];
    let Some((scheme, rest)) = url.split_once("://") else {
        return whole();
    };
    // The user info ends at the first `@`, as the client's parser reads it (url.rs).
    let (user, after) = match rest.split_once('@') {
        Some((info, after))
            if !info
                .split(':')
                .next()
                .unwrap_or("")
                .contains(['/', '?', '=']) =>
        {
            (format!("{info}@"), after)
        }
        _ => (String::new(), rest),
    };
    let end = after.find(['/', '?']).unwrap_or(after.len());
    let Some((hosts, tail)) = after.split_at_checked(end) else {
        return whole();
    };
    if hosts.is_empty() {
        return whole();
    }
    hosts
        .split(',')
        .map(|h| (format!("{scheme}://{user}{h}{tail}"), h.to_string()))
        .collect()
}

/// The client's settings for one URL, with somna's defaults where the URL and the environment
/// say nothing: the user, the password, `application_name`, `connect_timeout` (10 s), TCP
/// keepalives after 30 s idle, and `tcp_user_timeout` (30 s).
fn configure(client_url: &str, shown: &str) -> Result<Config> {
    let mut config: Config = client_url.parse().map_err(|e| {
        Error::invalid(
            "database URL",
            format!("{shown} is not a PostgreSQL URL the client understands ({e})"),
        )
    })?;
    if config.get_password().is_none() {
        if let Ok(p) = std::env::var("PGPASSWORD") {
            config.password(p);
        }
    }
    if config.get_user().is_none() {
        if let Ok(u) = std::env::var("PGUSER").or_else(|_| std::env::var("USER")) {
            config.user(&u);
        }
    }
    if config.get_application_name().is_none() {
        config.application_name("somna");
    }
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(DEFAULT_CONNECT_TIMEOUT);
    }
    // The client's default is the system's (two hours); an idle pooled connection to a host
    // that vanished is found out sooner.
    if config.get_keepalives_idle() == Duration::from_secs(2 * 60 * 60) {
        config.keepalives_idle(Duration::from_secs(30));
    }
    if config.get_keepalives_interval().is_none() {
        config.keepalives_interval(Duration::from_secs(10));
    }
    if config.get_keepalives_retries().is_none() {
        config.keepalives_retries(3);
    }
    if config.get_tcp_user_timeout().is_none() {
        config.tcp_user_timeout(Duration::from_secs(30));
    }
    Ok(config)
}

/// Splits `url` into the URL for the client (without somna's `schema` parameter and the TLS
/// parameters [`super::tls`] reads), the schema, checked (the default when it names none), and
/// the TLS parameters (percent-decoded).
pub(crate) fn split_params(url: &str) -> Result<(String, String, TlsParams)> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let mut schema = DEFAULT_SCHEMA.to_string();
    let mut kept = Vec::new();
    let mut tls = Vec::new();
    for kv in query.split('&').filter(|p| !p.is_empty()) {
        match kv.split_once('=') {
            Some(("schema", v)) => schema = v.to_string(),
            Some((k, v)) if is_tls_param(k) => {
                let v = percent_encoding::percent_decode_str(v).decode_utf8_lossy();
                tls.push((k.to_string(), v.into_owned()));
            }
            _ => kept.push(kv),
        }
    }
    validate_schema(&schema)?;
    let client_url = if kept.is_empty() {
        base.to_string()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok((client_url, schema, TlsParams::from_pairs(&tls)?))
}

fn validate_schema(s: &str) -> Result<()> {
    let ok = !s.is_empty()
        && s.len() <= 63
        && s.bytes()
            .enumerate()
            .all(|(i, b)| b == b'_' || b.is_ascii_lowercase() || (i > 0 && b.is_ascii_digit()));
    if ok {
        Ok(())
    } else {
        Err(Error::invalid(
            "schema",
            format!("{s:?}: a schema name is lowercase letters, digits and _, at most 63 bytes, not starting with a digit"),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_split_per_host_keeping_user_path_and_query() {
        let hosts =
            host_urls("postgresql://u:p/w@h1:5432,h2:5433/db?target_session_attrs=read-write");
        let got: Vec<(&str, &str)> = hosts
            .iter()
            .map(|(u, h)| (u.as_str(), h.as_str()))
            .collect();
        assert_eq!(
            got,
            [
                (
                    "postgresql://u:p/w@h1:5432/db?target_session_attrs=read-write",
                    "h1:5432"
                ),
                (
                    "postgresql://u:p/w@h2:5433/db?target_session_attrs=read-write",
                    "h2:5433"
                ),
            ]
        );
        assert_eq!(
            host_urls("postgresql://h/db"),
            [("postgresql://h/db".to_string(), "h".to_string())]
        );
        assert_eq!(host_urls("postgresql:///db?host=a,b")[0].1, "");
    }

    #[test]
    fn loopback_hosts_are_told_from_remote_ones() {
        for h in [
            "127.0.0.1:5432",
            "localhost",
            "[::1]:5432",
            "/run/postgresql",
            "%2Frun%2Fpg",
            "127.9.9.9",
        ] {
            assert!(is_loopback(h), "{h}");
        }
        for h in [
            "db.example:5432",
            "10.0.0.1",
            "[2001:db8::1]:5432",
            "postgresql://u@db.example/x",
        ] {
            assert!(!is_loopback(h), "{h}");
        }
    }
}
