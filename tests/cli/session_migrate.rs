//! `somna migrate` on a format-2 store (docs/cli.md, "migrate"; docs/design.md, section 13.4):
//! a read command before it reads the format-2 sessions read-only and leaves the file byte for
//! byte; `migrate` upgrades it to the current format (7) and says so, a second run says there is nothing to do,
//! the sessions read the same after, and the store verifies.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_somna");

fn somna(db: &Path, args: &[&str]) -> (i32, String, String) {
    let o = Command::new(BIN)
        .arg("--db")
        .arg(db)
        .args(args)
        .env_remove("SOMNA_DB")
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8(o.stdout).unwrap(),
        String::from_utf8(o.stderr).unwrap(),
    )
}

#[test]
fn migrate_upgrades_a_format2_store_once_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("s.redb");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format2-sessions.redb");
    std::fs::copy(src, &db).unwrap();
    let before = std::fs::read(&db).unwrap();
    let (code, load2, err) = somna(&db, &["session", "load", "chat-1"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(std::fs::read(&db).unwrap(), before, "a read wrote");

    let (code, out, err) = somna(&db, &["migrate"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, "Upgraded the store from format 2 to 7.\n");
    let (code, out, _) = somna(&db, &["migrate", "--json"]);
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!((v["from"].as_u64(), v["to"].as_u64()), (Some(7), Some(7)));
    let (_, out, _) = somna(&db, &["migrate"]);
    assert_eq!(out, "The store is at format 7: nothing to migrate.\n");

    let (code, load3, _) = somna(&db, &["session", "load", "chat-1"]);
    assert_eq!((code, load3), (0, load2));
    let (code, out, err) = somna(&db, &["verify"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.starts_with("OK: "), "{out}");
}
