//! TLS to the server, with libpq's parameters and meanings (docs/scale-out.md, "TLS"):
//! `sslmode` = `disable`, `allow` (taken as `prefer`), `prefer` (the default: TLS when the
//! server offers it, unverified), `require` (TLS or nothing; unverified unless `sslrootcert`
//! names a file, then as `verify-ca`), `verify-ca` (the chain checked against `sslrootcert`),
//! `verify-full` (the chain and the host name); `sslrootcert` a PEM file or `system` (the
//! system's roots), by default `~/.postgresql/root.crt`; `sslcert`/`sslkey` a client certificate
//! and its key. `PGSSLMODE`, `PGSSLROOTCERT`, `PGSSLCERT` and `PGSSLKEY` stand in for the
//! parameters a URL leaves out. Over rustls with its `ring` provider; [`super::client`] connects
//! through [`MakeRustls`].

use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::config::SslMode as ClientSslMode;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};
use tokio_postgres::Socket;

use crate::error::{Error, Result};

/// libpq's `sslmode` values (`allow` is read as `prefer`: the client cannot try plain first).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// Never TLS.
    Disable,
    /// TLS when the server offers it, unverified.
    Prefer,
    /// TLS or nothing, unverified (verified as `VerifyCa` when `sslrootcert` names a file).
    Require,
    /// TLS, the chain checked against the roots, not the host name.
    VerifyCa,
    /// TLS, the chain and the host name checked.
    VerifyFull,
}

/// The TLS parameters of a URL, taken out of it (the client knows only three modes and none of
/// the file parameters).
#[derive(Clone, Debug)]
pub(crate) struct TlsParams {
    pub(crate) mode: SslMode,
    /// `sslrootcert`: a file, or `system`.
    rootcert: Option<String>,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
}

/// The TLS parameter names this module takes out of a URL's query.
const NAMES: [&str; 4] = ["sslmode", "sslrootcert", "sslcert", "sslkey"];

/// Whether a query parameter is one this module reads.
pub(crate) fn is_tls_param(name: &str) -> bool {
    NAMES.contains(&name)
}

fn parse_mode(v: &str) -> Result<SslMode> {
    Ok(match v {
        "disable" => SslMode::Disable,
        "allow" | "prefer" => SslMode::Prefer,
        "require" => SslMode::Require,
        "verify-ca" => SslMode::VerifyCa,
        "verify-full" => SslMode::VerifyFull,
        _ => {
            return Err(Error::invalid(
                "sslmode",
                format!("{v:?}: one of disable, allow, prefer, require, verify-ca, verify-full"),
            ))
        }
    })
}

impl TlsParams {
    /// The parameters from the URL's `(name, value)` pairs (percent-decoded), the environment
    /// filling in what they leave out.
    pub(crate) fn from_pairs(pairs: &[(String, String)]) -> Result<TlsParams> {
        let get = |n: &str, env: &str| {
            pairs
                .iter()
                .rev()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.clone())
                .or_else(|| std::env::var(env).ok().filter(|v| !v.is_empty()))
        };
        let rootcert = get("sslrootcert", "PGSSLROOTCERT");
        let system = rootcert.as_deref() == Some("system");
        let mode = match get("sslmode", "PGSSLMODE") {
            Some(m) => parse_mode(&m)?,
            // libpq: `sslrootcert=system` makes verify-full the default.
            None if system => SslMode::VerifyFull,
            None => SslMode::Prefer,
        };
        if system && mode != SslMode::VerifyFull {
            // libpq refuses it too: any public CA signs some certificate for some name, so
            // only the name check makes the system's roots mean anything.
            return Err(Error::invalid(
                "sslmode",
                "sslrootcert=system needs sslmode=verify-full (the default with it)",
            ));
        }
        Ok(TlsParams {
            mode,
            rootcert,
            cert: get("sslcert", "PGSSLCERT").map(PathBuf::from),
            key: get("sslkey", "PGSSLKEY").map(PathBuf::from),
        })
    }

    /// The mode the client itself runs: whether it asks for TLS, and whether it must have it.
    pub(crate) fn client_mode(&self) -> ClientSslMode {
        match self.mode {
            SslMode::Disable => ClientSslMode::Disable,
            SslMode::Prefer => ClientSslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => ClientSslMode::Require,
        }
    }

    /// The rustls configuration these parameters ask for (files read now, so that a missing one
    /// is reported at the open).
    pub(crate) fn client_config(&self) -> Result<Arc<ClientConfig>> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let default_root = home_file("root.crt");
        let rootcert = self.rootcert.clone().or_else(|| {
            default_root
                .filter(|p| p.exists())
                .map(|p| p.to_string_lossy().into_owned())
        });
        let verify = match (self.mode, &rootcert) {
            (SslMode::VerifyFull, _) => Some(true),
            (SslMode::VerifyCa, _) => Some(false),
            // libpq: with a root certificate, `require` verifies the chain.
            (SslMode::Require, Some(_)) => Some(false),
            _ => None,
        };
        let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_error(format!("no TLS version to offer: {e}")))?;
        let checked = match verify {
            None => None,
            Some(_) => Some(
                WebPkiServerVerifier::builder_with_provider(
                    Arc::new(roots(rootcert.as_deref())?),
                    Arc::clone(&provider),
                )
                .build()
                .map_err(|e| tls_error(format!("the root certificates: {e}")))?,
            ),
        };
        let verifier = Arc::new(Verifier {
            roots: checked,
            full: verify == Some(true),
            provider,
        });
        let builder = builder
            .dangerous()
            .with_custom_certificate_verifier(verifier);
        let config = match (&self.cert, &self.key) {
            (Some(c), Some(k)) => builder
                .with_client_auth_cert(certs(c)?, key(k)?)
                .map_err(|e| tls_error(format!("the client certificate: {e}")))?,
            (None, None) => builder.with_no_client_auth(),
            _ => {
                return Err(Error::invalid(
                    "sslcert",
                    "a client certificate needs both sslcert and sslkey",
                ))
            }
        };
        Ok(Arc::new(config))
    }
}

fn tls_error(m: String) -> Error {
    Error::invalid("TLS settings", m)
}

/// `~/.postgresql/NAME`, libpq's default place for its TLS files.
fn home_file(name: &str) -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| Path::new(&h).join(".postgresql").join(name))
}

/// The certificates of a PEM file.
fn certs(path: &Path) -> Result<Vec<CertificateDer<'static>>> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| {
            tls_error(format!(
                "cannot read certificates from {}: {e}",
                path.display()
            ))
        })?;
    if certs.is_empty() {
        return Err(tls_error(format!("no certificate in {}", path.display())));
    }
    Ok(certs)
}

fn key(path: &Path) -> Result<PrivateKeyDer<'static>> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| {
        tls_error(format!(
            "cannot read a private key from {}: {e}",
            path.display()
        ))
    })
}

/// The roots to verify against: a PEM file, or the system's (`system`).
fn roots(rootcert: Option<&str>) -> Result<RootCertStore> {
    let mut store = RootCertStore::empty();
    match rootcert {
        Some("system") => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                return Err(tls_error(
                    "sslrootcert=system: no root certificate found on this system".into(),
                ));
            }
        }
        Some(file) => {
            for c in certs(Path::new(file))? {
                store.add(c).map_err(|e| {
                    tls_error(format!("a root certificate in {file} is not usable: {e}"))
                })?;
            }
        }
        None => {
            return Err(tls_error(
                "verifying the server needs root certificates: name them with sslrootcert=FILE (or sslrootcert=system), or put them in ~/.postgresql/root.crt".into(),
            ))
        }
    }
    Ok(store)
}

/// The server's certificate as `sslmode` asks: with `roots`, the chain checked against them
/// (and with `full`, the host name too: `verify-full`); without, accepted as it is (`prefer`,
/// `require`: encrypted, the server not authenticated). The handshake's signatures are checked
/// either way, so the session is encrypted to whoever holds the certificate's key.
#[derive(Debug)]
struct Verifier {
    roots: Option<Arc<WebPkiServerVerifier>>,
    full: bool,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        let Some(roots) = &self.roots else {
            return Ok(ServerCertVerified::assertion());
        };
        match roots.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            // The name is checked after the chain: a name error means the chain held.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.full => Ok(ServerCertVerified::assertion()),
            r => r,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// What the client connects through: rustls with one configuration, remembering whether the
/// last connection it made was encrypted (the server may decline TLS under `prefer`).
#[derive(Clone)]
pub(crate) struct MakeRustls {
    config: Arc<ClientConfig>,
    encrypted: Arc<AtomicBool>,
}

impl MakeRustls {
    pub(crate) fn new(config: Arc<ClientConfig>) -> MakeRustls {
        MakeRustls {
            config,
            encrypted: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Whether a TLS session was set up since the last call (and forgets it).
    pub(crate) fn take_encrypted(&self) -> bool {
        self.encrypted.swap(false, Ordering::Relaxed)
    }
}

/// One connection's TLS set-up: the configuration and the server's name.
pub(crate) struct RustlsConnect {
    config: Arc<ClientConfig>,
    name: ServerName<'static>,
    encrypted: Arc<AtomicBool>,
}

impl MakeTlsConnect<Socket> for MakeRustls {
    type Stream = RustlsStream;
    type TlsConnect = RustlsConnect;
    type Error = rustls::Error;

    fn make_tls_connect(
        &mut self,
        domain: &str,
    ) -> std::result::Result<RustlsConnect, rustls::Error> {
        // A Unix socket has no name (the client never asks for TLS over one).
        let domain = if domain.is_empty() {
            "localhost"
        } else {
            domain
        };
        let name = ServerName::try_from(domain.to_string())
            .map_err(|e| rustls::Error::General(format!("{domain:?} is not a host name: {e}")))?;
        Ok(RustlsConnect {
            config: Arc::clone(&self.config),
            name,
            encrypted: Arc::clone(&self.encrypted),
        })
    }
}

impl TlsConnect<Socket> for RustlsConnect {
    type Stream = RustlsStream;
    type Error = std::io::Error;
    type Future = Pin<Box<dyn Future<Output = std::io::Result<RustlsStream>> + Send>>;

    fn connect(self, stream: Socket) -> Self::Future {
        Box::pin(async move {
            let s = tokio_rustls::TlsConnector::from(self.config)
                .connect(self.name, stream)
                .await?;
            self.encrypted.store(true, Ordering::Relaxed);
            Ok(RustlsStream(Box::new(s)))
        })
    }
}

/// An encrypted connection to the server.
pub(crate) struct RustlsStream(Box<tokio_rustls::client::TlsStream<Socket>>);

impl AsyncRead for RustlsStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for RustlsStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut *self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut *self.0).poll_shutdown(cx)
    }
}

impl TlsStream for RustlsStream {
    /// No channel binding (SCRAM's `-PLUS` variant is not offered; `channel_binding=require`
    /// is refused by the client).
    fn channel_binding(&self) -> ChannelBinding {
        ChannelBinding::none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
        p.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn system_roots_mean_verify_full_as_in_libpq() {
        let strong = pairs(&[("sslrootcert", "system"), ("sslmode", "verify-full")]);
        assert_eq!(
            TlsParams::from_pairs(&strong).unwrap().mode,
            SslMode::VerifyFull
        );
        if std::env::var_os("PGSSLMODE").is_none() {
            let bare = pairs(&[("sslrootcert", "system")]);
            assert_eq!(
                TlsParams::from_pairs(&bare).unwrap().mode,
                SslMode::VerifyFull
            );
        }
        for weak in ["disable", "prefer", "require", "verify-ca"] {
            let p = pairs(&[("sslrootcert", "system"), ("sslmode", weak)]);
            let e = TlsParams::from_pairs(&p).unwrap_err().to_string();
            assert!(e.contains("verify-full"), "{weak}: {e}");
        }
        // A file keeps libpq's default, prefer.
        if std::env::var_os("PGSSLMODE").is_none() {
            let file = pairs(&[("sslrootcert", "/etc/ca.pem")]);
            assert_eq!(TlsParams::from_pairs(&file).unwrap().mode, SslMode::Prefer);
        }
    }
}
