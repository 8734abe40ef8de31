//! A damaged session message never hides the valid history, and is never dropped silently (the
//! Agents SDK's contract: "a corrupt record must not hide valid history"). One message's stored
//! bytes are damaged in a real store file, the way bit rot would leave them (redb's page is intact,
//! somna's checksum is not); then the strict reads fail naming it, the lossy reads return every
//! other message in order and name the damaged one, `--limit` windows count it, and the CLI's
//! `session load` / `session items` print the valid messages and exit 5 with the damage on stderr.
//! Store format 3 keeps messages in chunks of up to 3 KB, and a strict read names a damaged
//! chunk by its first sequence number (docs/design.md, section 13.3): each message here is over
//! 3 KB, so that each has a chunk of its own and the damaged value is message 2's. (Damage
//! inside a chunk of several messages is read past message by message: the unit test of
//! `chunk::salvage` and python/tests/test_openai_agents.py.)

use std::path::Path;
use std::process::Command;

use redb::ReadableTable;
use somna::{Error, Store};

const BIN: &str = env!("CARGO_BIN_EXE_somna");

fn msg(i: usize) -> String {
    let pad = "p".repeat(3100);
    format!(r#"{{"role":"user","content":"message {i}","pad":"{pad}"}}"#)
}

/// A store with session "s1" of five messages, the third (seq 2) damaged; returns its path.
fn damaged_store(dir: &Path) -> std::path::PathBuf {
    let path = dir.join("s.redb");
    let store = Store::create(&path).unwrap();
    let msgs: Vec<String> = (0..5).map(msg).collect();
    let refs: Vec<&str> = msgs.iter().map(String::as_str).collect();
    store.session_append("s1", &refs, None, None).unwrap();
    store.session_append("s2", &refs[..1], None, None).unwrap();
    drop(store);
    let db = redb::Database::builder()
        .set_concurrency_mode(redb::ConcurrencyMode::MultiWriter)
        .open(&path)
        .unwrap();
    let tx = db.begin_write().unwrap();
    {
        let mut t = tx.open_table(somna::format::SESSION_CHUNKS).unwrap();
        let mut bytes = t.get(("s1", 2u64)).unwrap().unwrap().value().to_vec();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0x20;
        t.insert(("s1", 2u64), bytes.as_slice()).unwrap();
    }
    tx.commit().unwrap();
    path
}

#[test]
fn a_damaged_message_is_skipped_and_named_never_hiding_the_others() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(damaged_store(dir.path())).unwrap();

    // The strict reads refuse, naming the message.
    match store.session_items("s1", None) {
        Err(Error::Corrupt { table, key, .. }) => {
            assert_eq!(table, "session_chunks");
            assert!(key.contains("s1") && key.contains('2'), "{key}");
        }
        other => panic!("expected Corrupt, got {other:?}"),
    }
    assert!(matches!(
        store.session_load("s1"),
        Err(Error::Corrupt { .. })
    ));

    // The lossy reads return the other four, in order, and name seq 2.
    let want: Vec<String> = [0, 1, 3, 4].into_iter().map(msg).collect();
    let r = store.session_items_lossy("s1", None).unwrap();
    assert_eq!(r.items, want);
    assert_eq!(r.unreadable, vec![2]);
    let note = r.damage_note("s1").unwrap();
    assert!(
        note.contains("1 damaged message") && note.contains("seq 2"),
        "{note}"
    );
    let l = store.session_load_lossy("s1").unwrap().unwrap();
    assert_eq!((l.items, l.unreadable), (want.clone(), vec![2]));

    // A window counts the damaged record: the latest 3 records are seqs 2, 3, 4.
    let w = store.session_items_lossy("s1", Some(3)).unwrap();
    assert_eq!(w.items, vec![msg(3), msg(4)]);
    assert_eq!(w.unreadable, vec![2]);
    let w = store.session_items_lossy("s1", Some(2)).unwrap();
    assert_eq!((w.items, w.unreadable), (vec![msg(3), msg(4)], vec![]));

    // Other sessions and missing ones are unaffected.
    let s2 = store.session_items_lossy("s2", None).unwrap();
    assert_eq!((s2.items, s2.unreadable), (vec![msg(0)], vec![]));
    assert!(store.session_load_lossy("nope").unwrap().is_none());
}

#[test]
fn the_cli_prints_the_valid_messages_and_exits_5() {
    let dir = tempfile::tempdir().unwrap();
    let path = damaged_store(dir.path());
    for args in [&["session", "load", "s1"][..], &["session", "items", "s1"]] {
        let o = Command::new(BIN)
            .arg("--db")
            .arg(&path)
            .args(args)
            .env_remove("SOMNA_DB")
            .output()
            .unwrap();
        let stdout = String::from_utf8(o.stdout).unwrap();
        let stderr = String::from_utf8(o.stderr).unwrap();
        assert_eq!(o.status.code(), Some(5), "{args:?}: {stderr}");
        let items: Vec<serde_json::Value> = serde_json::from_str(stdout.trim()).unwrap();
        let contents: Vec<&str> = items
            .iter()
            .map(|v| v["content"].as_str().unwrap())
            .collect();
        assert_eq!(
            contents,
            ["message 0", "message 1", "message 3", "message 4"],
            "{args:?}"
        );
        assert!(
            stderr.starts_with("somna: 1 damaged message of session \"s1\" was skipped (seq 2)"),
            "{stderr}"
        );
    }
}
