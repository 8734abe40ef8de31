//! What a user sees when a server store is not what they meant: a server that cannot be reached
//! is exit 7 and names the URL **without its password**; a schema holding other tables is
//! refused as not a somna store, and nothing is created in it; a schema with no store is "no
//! somna store" (exit 3) until `init`; a bad schema name is rejected input (exit 2). The
//! unreachable case runs everywhere (a closed port on loopback); the others need the server
//! `SOMNA_TEST_PG` names (skipped without one, failed under CI without one).

use somna_testkit::pg::{fresh_schema_url, test_server_url, with_query};

use crate::common::{run_raw, Env, Raw};

fn run(args: &[&str]) -> Raw {
    let e = Env::new();
    let mut c = e.cmd();
    c.env_remove("SOMNA_DB").args(args);
    run_raw(c, None)
}

fn err(r: &Raw) -> String {
    String::from_utf8_lossy(&r.err).into_owned()
}

#[test]
fn an_unreachable_server_is_exit_7_and_never_shows_the_password() {
    let url = "postgresql://agent:s3cret-pw@127.0.0.1:1/memory?schema=team";
    let r = run(&["--busy-timeout-ms", "200", "--db", url, "wake"]);
    assert_eq!(r.code, 7, "{r:?}");
    let e = err(&r);
    assert!(
        e.contains("cannot reach the PostgreSQL server at postgresql://agent@127.0.0.1:1/memory"),
        "{e}"
    );
    assert!(!e.contains("s3cret-pw"), "the password leaked: {e}");
    // The password from PGPASSWORD is not shown either, and a bad schema name is bad input.
    let r = run(&[
        "--db",
        "postgresql://agent@127.0.0.1:1/memory?schema=Team-A",
        "wake",
    ]);
    assert_eq!(r.code, 2, "{r:?}");
    assert!(err(&r).contains("schema"), "{r:?}");
}

#[test]
fn a_schema_that_is_not_an_somna_store_is_refused_and_left_alone() {
    let Some(base) = test_server_url() else {
        return;
    };
    let url = fresh_schema_url(&base);
    // No store yet: "no somna store", exit 3, nothing created.
    let r = run(&["--db", &url, "wake"]);
    assert_eq!(r.code, 3, "{r:?}");
    assert!(err(&r).contains("no somna store at postgresql://"), "{r:?}");
    // A schema holding someone else's table.
    let schema = url.rsplit("schema=").next().expect("schema").to_string();
    let mut client = postgres::Client::connect(&base, postgres::NoTls).expect("connect");
    client
        .batch_execute(&format!(
            "CREATE SCHEMA {schema}; CREATE TABLE {schema}.orders (id int PRIMARY KEY)"
        ))
        .expect("a foreign table");
    for verb in [&["init"][..], &["note", "x"][..], &["wake"][..]] {
        let mut args = vec!["--db", url.as_str()];
        args.extend_from_slice(verb);
        let r = run(&args);
        assert_eq!(r.code, 1, "{verb:?}: {r:?}");
        assert!(err(&r).contains("not a somna store"), "{verb:?}: {r:?}");
    }
    let n: i64 = client
        .query_one(
            "SELECT count(*) FROM information_schema.tables WHERE table_schema = $1",
            &[&schema],
        )
        .expect("count")
        .get(0);
    assert_eq!(n, 1, "somna created tables in a schema that is not its own");
}

/// A listener on loopback that accepts connections and never answers (a hung server, a
/// black-holing proxy): its port. The connections are held until the test process ends; the
/// accepting thread stops by itself after a minute.
fn silent_listener() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = l.local_addr().expect("addr").port();
    l.set_nonblocking(true).expect("nonblocking");
    std::thread::spawn(move || {
        let mut held = Vec::new();
        let until = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while std::time::Instant::now() < until {
            match l.accept() {
                Ok((s, _)) => held.push(s),
                Err(_) => std::thread::sleep(std::time::Duration::from_millis(20)),
            }
        }
    });
    port
}

#[test]
fn a_server_that_accepts_and_never_answers_is_exit_7_naming_the_host_and_the_timeout() {
    let port = silent_listener();
    let url = format!("postgresql://agent:s3cret-pw@127.0.0.1:{port}/memory?connect_timeout=1");
    for verb in [
        &["wake"][..],
        &["note", "x"][..],
        &["recall", "x"][..],
        &["init"][..],
    ] {
        let mut args = vec!["--busy-timeout-ms", "200", "--db", url.as_str()];
        args.extend_from_slice(verb);
        let r = run(&args);
        assert_eq!(r.code, 7, "{verb:?}: {r:?}");
        let e = err(&r);
        assert!(
            e.contains(&format!("127.0.0.1:{port}: no answer to the connection's start-up within 1000 ms (connect_timeout)")),
            "{verb:?}: {e}"
        );
        assert!(!e.contains("s3cret-pw"), "the password leaked: {e}");
    }
}

#[test]
fn each_host_of_a_url_gets_its_own_connect_timeout_and_the_error_names_each() {
    let port = silent_listener();
    // The hung host first, then a closed port: both are named, with what each met.
    let url = format!("postgresql://agent@127.0.0.1:{port},127.0.0.1:1/memory?connect_timeout=1");
    let r = run(&["--busy-timeout-ms", "200", "--db", &url, "wake"]);
    assert_eq!(r.code, 7, "{r:?}");
    let e = err(&r);
    assert!(e.contains(&format!("127.0.0.1:{port}: no answer")), "{e}");
    assert!(e.contains("127.0.0.1:1: "), "{e}");
    // The hung host first, then a real server: the call goes through to the second.
    let Some(base) = test_server_url() else {
        return;
    };
    let url = with_query(&fresh_schema_url(&base), "connect_timeout", "1");
    // Only for a server on loopback named by address (the test scripts' own).
    let Some((user, rest)) = url.split_once("@127.0.0.1:") else {
        return;
    };
    let two = format!("{user}@127.0.0.1:{port},127.0.0.1:{rest}");
    let r = run(&["--db", &two, "init"]);
    assert_eq!(r.code, 0, "{r:?}");
    let r = run(&["--db", &two, "note", "through the second host"]);
    assert_eq!(r.code, 0, "{r:?}");
    assert!(
        String::from_utf8_lossy(&r.out).contains("Saved as #0."),
        "{r:?}"
    );
}
