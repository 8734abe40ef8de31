//! Guards the trust verbs of the real CLI: `grant`/`revoke` change what `--as` principals may
//! read (exit 6 with a message naming only the asked scope when denied), lifecycle verbs append
//! events shown by `show`, and `redact` is refused to anyone but the admin.

use std::path::Path;
use std::process::{Command, Output};

fn run(db: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_somna"))
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("SOMNA_PRINCIPAL")
        .env_remove("SOMNA_SCOPE")
        .output()
        .unwrap()
}

fn out(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

#[test]
fn grants_decide_what_a_principal_reads_at_the_next_call() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("m.redb");
    assert!(run(&db, &["init"]).status.success());
    assert!(run(&db, &["--scope", "team/x", "note", "shared fact"])
        .status
        .success());
    assert!(run(&db, &["--scope", "private", "note", "private fact"])
        .status
        .success());
    // No grants yet: a single-owner store, everyone reads everything.
    assert!(out(&run(
        &db,
        &["--as", "user:bob", "--scope", "private", "wake"]
    ))
    .contains("private fact"));
    let g = run(&db, &["grant", "user:bob", "read", "team/"]);
    assert!(g.status.success(), "{}", String::from_utf8_lossy(&g.stderr));
    assert_eq!(out(&run(&db, &["grants"])), "user:bob read team/\n");
    let denied = run(&db, &["--as", "user:bob", "--scope", "private", "wake"]);
    assert_eq!(denied.status.code(), Some(6));
    let err = String::from_utf8_lossy(&denied.stderr);
    assert!(
        err.contains("may not read scope \"private\"") && !err.contains("private fact"),
        "{err}"
    );
    assert!(out(&run(
        &db,
        &["--as", "user:bob", "--scope", "team/x", "recall", "fact"]
    ))
    .contains("shared fact"));
    let all = out(&run(&db, &["--as", "user:bob", "wake", "--all"]));
    assert!(
        all.contains("shared fact") && !all.contains("private"),
        "{all}"
    );
    // Bob cannot grant himself more.
    assert_eq!(
        run(
            &db,
            &["--as", "user:bob", "grant", "user:bob", "read", "private"]
        )
        .status
        .code(),
        Some(6)
    );
    assert!(run(&db, &["revoke", "user:bob", "read", "team/"])
        .status
        .success());
    assert!(run(&db, &["grant", "user:carol", "read", "private"])
        .status
        .success());
    assert_eq!(
        run(&db, &["--as", "user:bob", "--scope", "team/x", "wake"])
            .status
            .code(),
        Some(6)
    );
}

#[test]
fn lifecycle_verbs_append_events_and_redact_is_admin_only() {
    let d = tempfile::tempdir().unwrap();
    let db = d.path().join("m.redb");
    assert!(run(&db, &["init"]).status.success());
    assert!(run(
        &db,
        &["note", "--kind", "inference", "the user is a night owl"]
    )
    .status
    .success());
    assert!(out(&run(&db, &["wake"])).contains("[proposed] the user is a night owl"));
    assert!(run(&db, &["retract", "0", "--why", "wrong"])
        .status
        .success());
    let show = out(&run(&db, &["show", "0"]));
    assert!(
        show.contains("status: retracted") && show.contains("retract by admin: wrong"),
        "{show}"
    );
    assert!(run(&db, &["grant", "agent:ci", "write", "default"])
        .status
        .success());
    assert_eq!(
        run(&db, &["--as", "agent:ci", "redact", "0", "--reason", "x"])
            .status
            .code(),
        Some(6)
    );
    assert!(run(&db, &["redact", "0", "--reason", "asked"])
        .status
        .success());
    assert!(!out(&run(&db, &["export"])).contains("night owl"));
}
