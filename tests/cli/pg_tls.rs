//! TLS to the server, with libpq's `sslmode` meanings (docs/scale-out.md, "TLS"). The test makes
//! two certificate authorities and a server certificate for `localhost` signed by the first,
//! starts its own PostgreSQL with `ssl = on`, and checks: `verify-full` with the right CA
//! connects (and the server's `pg_stat_ssl` shows the session encrypted); the wrong CA, a host
//! name the certificate does not name, and `require` against a server without TLS are each
//! refused with a clear error (exit 7); `verify-ca` accepts the right CA whatever the host name;
//! `disable` is not encrypted. Needs the server binaries (skipped with the server tier, failed
//! under CI without them).

use std::path::Path;
use std::process::Command;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use somna_testkit::pg::{fresh_schema_name, test_server_url, with_query, PgServer};

use crate::common::{run_raw, Env, Raw};

/// A CA: its certificate (PEM) and what signs with it.
fn authority(name: &str) -> (String, Issuer<'static, KeyPair>) {
    let key = KeyPair::generate().expect("a CA key");
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let cert = params.self_signed(&key).expect("the CA certificate");
    (cert.pem(), Issuer::new(params, key))
}

/// Writes `text` to `dir/name`, owned like `dir` (the server runs as its owner), mode 0600.
fn write_owned(dir: &Path, name: &str, text: &str) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).expect("write");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let ok = Command::new("chown")
        .arg("--reference")
        .arg(dir)
        .arg(&path)
        .status()
        .expect("chown")
        .success();
    assert!(ok, "chown {}", path.display());
}

fn run(args: &[&str]) -> Raw {
    let e = Env::new();
    let mut c = e.cmd();
    c.env_remove("SOMNA_DB")
        .env_remove("PGSSLMODE")
        .env_remove("PGSSLROOTCERT")
        .args(args);
    run_raw(c, None)
}

fn err(r: &Raw) -> String {
    String::from_utf8_lossy(&r.err).into_owned()
}

/// Whether the server holds a connection of somna's with `ssl` as given (its `pg_stat_ssl`).
fn somna_session_with_ssl(base: &str, ssl: bool) -> bool {
    let mut client = postgres::Client::connect(base, postgres::NoTls).expect("connect");
    let n: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) \
             WHERE a.application_name = 'somna' AND s.ssl = $1",
            &[&ssl],
        )
        .expect("pg_stat_ssl")
        .get(0);
    n > 0
}

#[test]
fn tls_modes_connect_refuse_and_encrypt_as_libpq_says() {
    // Gated like every server test: skipped without the server tier, failed under CI.
    if test_server_url().is_none() {
        return;
    }
    let server = PgServer::start(true).expect("start a server");
    let (ca_pem, ca) = authority("somna test CA");
    let (other_pem, _) = authority("some other CA");
    let key = KeyPair::generate().expect("a server key");
    let cert = CertificateParams::new(vec!["localhost".to_string()])
        .expect("server params")
        .signed_by(&key, &ca)
        .expect("the server certificate");
    let data = server.dir().join("data");
    write_owned(&data, "server.crt", &cert.pem());
    write_owned(&data, "server.key", &key.serialize_pem());
    let files = tempfile::tempdir().expect("tempdir");
    let right = files.path().join("ca.pem");
    let wrong = files.path().join("other.pem");
    std::fs::write(&right, &ca_pem).expect("write");
    std::fs::write(&wrong, &other_pem).expect("write");
    server.psql("ALTER SYSTEM SET ssl = on").expect("ssl on");
    server.psql("SELECT pg_reload_conf()").expect("reload");

    let schema = fresh_schema_name();
    let port = server.port();
    let url = |host: &str, mode: &str, root: &Path| {
        let u = format!("postgresql://postgres@{host}:{port}/postgres?sslmode={mode}");
        let u = with_query(&u, "sslrootcert", &root.to_string_lossy());
        with_query(&u, "schema", &schema)
    };
    let fast = |u: &str, verb: &[&str]| {
        let mut args = vec!["--busy-timeout-ms", "300", "--db", u];
        args.extend_from_slice(verb);
        run(&args)
    };

    // verify-full with the right CA and the certificate's name: connects.
    let good = url("localhost", "verify-full", &right);
    let r = fast(&good, &["init"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = fast(&good, &["note", "over TLS"]);
    assert_eq!(r.code, 0, "{r:?}");

    // The wrong CA: refused, saying why.
    let r = fast(&url("localhost", "verify-full", &wrong), &["wake"]);
    assert_eq!(r.code, 7, "{r:?}");
    assert!(err(&r).contains("UnknownIssuer"), "{}", err(&r));

    // A name the certificate does not hold (the address, not `localhost`): refused by
    // verify-full, accepted by verify-ca (the chain alone).
    let r = fast(&url("127.0.0.1", "verify-full", &right), &["wake"]);
    assert_eq!(r.code, 7, "{r:?}");
    assert!(err(&r).contains("not valid for name"), "{}", err(&r));
    let r = fast(&url("127.0.0.1", "verify-ca", &right), &["wake"]);
    assert_eq!(r.code, 0, "{r:?}");

    // The session is encrypted: the server says so, for a store held open in this process.
    let store = somna::Store::open(&good).expect("open over TLS");
    assert!(somna_session_with_ssl(server.url(), true));
    drop(store);
    let plain = url("localhost", "disable", &right);
    let store = somna::Store::open(&plain).expect("open without TLS");
    assert!(somna_session_with_ssl(server.url(), false));
    drop(store);

    // `require` against a server without TLS: refused.
    let plain_server = PgServer::start(true).expect("start a plain server");
    let u = with_query(plain_server.url(), "sslmode", "require");
    let r = fast(&u, &["wake"]);
    assert_eq!(r.code, 7, "{r:?}");
    assert!(
        err(&r).contains("server does not support TLS"),
        "{}",
        err(&r)
    );
    // A missing root certificate file is bad input, named.
    let r = fast(
        &url("localhost", "verify-full", &files.path().join("none.pem")),
        &["wake"],
    );
    assert_eq!(r.code, 2, "{r:?}");
    assert!(err(&r).contains("none.pem"), "{}", err(&r));
}
