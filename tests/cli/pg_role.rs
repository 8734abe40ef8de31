//! The least-privilege role of docs/scale-out.md ("A role that can use one schema and nothing
//! else"): a login role without CREATE on the database, owning one schema an administrator made
//! for it. somna makes its tables in that schema and every verb works; another schema is
//! refused (a failure quoting the server's "permission denied"), and nothing is created outside its own.
//! Needs the server `SOMNA_TEST_PG` names, reached as a superuser that may create roles.

use somna_testkit::pg::{fresh_schema_name, test_server_url};

use crate::common::{run_raw, Env, Raw};

fn run(args: &[&str]) -> Raw {
    let e = Env::new();
    let mut c = e.cmd();
    c.env_remove("SOMNA_DB").args(args);
    run_raw(c, None)
}

#[test]
fn a_role_limited_to_its_schema_runs_every_verb_there_and_nothing_else() {
    let Some(base) = test_server_url() else {
        return;
    };
    let Some((_, rest)) = base.split_once('@') else {
        return;
    };
    let schema = fresh_schema_name();
    let role = format!("r_{schema}");
    let mut admin = postgres::Client::connect(&base, postgres::NoTls).expect("connect");
    admin
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN; CREATE SCHEMA {schema} AUTHORIZATION {role}"
        ))
        .expect("the role and its schema");
    let url = format!("postgresql://{role}@{rest}?schema={schema}");
    for verb in [
        &["init"][..],
        &["note", "from the limited role"][..],
        &["search", "limited"][..],
        &["wake"][..],
        &["verify"][..],
    ] {
        let mut args = vec!["--db", url.as_str()];
        args.extend_from_slice(verb);
        let r = run(&args);
        assert_eq!(r.code, 0, "{verb:?}: {r:?}");
    }
    // Another schema: the server refuses, and nothing is made.
    let other = format!("postgresql://{role}@{rest}?schema={schema}_other");
    let r = run(&["--db", &other, "init"]);
    assert_ne!(r.code, 0, "{r:?}");
    assert!(
        String::from_utf8_lossy(&r.err).contains("permission denied"),
        "{r:?}"
    );
    let n: i64 = admin
        .query_one(
            "SELECT count(*) FROM information_schema.schemata WHERE schema_name = $1",
            &[&format!("{schema}_other")],
        )
        .expect("count")
        .get(0);
    assert_eq!(n, 0);
}
