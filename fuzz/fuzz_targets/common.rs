//! A small real store, built once on the simulated disk, for the targets that damage one.
#![allow(dead_code)]

use std::sync::OnceLock;

use somna::{Block, NewMemory, Options, Store, WakeOptions};
use somna_testkit::simdisk::SimDisk;

/// The bytes of a store holding two scopes of notes (some keyed), summaries from raw memories
/// and from children, a forget, settings, and sessions with an archive and idempotency keys.
pub fn base_image() -> &'static [u8] {
    static IMAGE: OnceLock<Vec<u8>> = OnceLock::new();
    IMAGE.get_or_init(|| {
        let disk = SimDisk::new(1);
        let store = Store::with_backend(disk.clone(), "base", Options::default()).expect("store");
        store.set_config("RAW_MAX", "2").expect("config");
        store
            .set_config("SESSION_ARCHIVE_MAX", "3")
            .expect("config");
        for i in 0..12 {
            let scope = if i % 4 == 3 {
                "project:acme"
            } else {
                "default"
            };
            let key = format!("k{i}");
            store
                .append(
                    scope,
                    vec![NewMemory::new(format!("note {i}")).source("user:alice")],
                    (i % 3 == 0).then_some(key.as_str()),
                )
                .expect("append");
        }
        while let Some(p) = store.next_prompt("default").expect("prompt") {
            store
                .nap("default", p.block, &format!("summary of {}", p.block))
                .expect("nap");
        }
        store
            .forget("default", Block::new(1, 2).expect("block"))
            .expect("forget");
        store
            .session_append(
                "s1",
                &[r#"{"role":"user","content":"hi"}"#],
                Some("sk"),
                None,
            )
            .expect("append");
        store
            .session_save("s2", &[r#"{"a":1}"#, r#"{"b":2}"#], None)
            .expect("save");
        store
            .session_save("s2", &[r#"{"b":2}"#, r#"{"c":3}"#], None)
            .expect("save");
        drop(store);
        disk.live_image()
    })
}

/// Every read and write path, each result ignored: what matters is that none panics or hangs.
pub fn exercise(store: &mut Store) {
    let _ = store.verify();
    for scope in ["default", "project:acme"] {
        let _ = store.wake_text(scope, &WakeOptions::default());
        let _ = store.recall(scope, &somna::RecallQuery::new("note"));
        let _ = store.read(|r| r.nodes(scope));
        let _ = store.read(|r| r.prompts(scope, 4));
        let _ = store.pending(scope, None);
        let _ = store.read(|r| r.memories(scope, 0, 64));
        if let Ok(b) = Block::new(2, 0) {
            let _ = store.zoom(scope, b);
        }
    }
    let _ = store.read(|r| r.stats());
    let _ = store.config();
    let _ = store.export(&mut std::io::sink());
    for id in ["s1", "s2"] {
        let _ = store.session_load(id);
        let _ = store.session_items(id, None);
        let _ = store.session_info(id);
        let _ = store.session_archived(id);
    }
    let _ = store.session_list("", None, None);
    let _ = store.append(
        "default",
        vec![NewMemory::new("note 0").source("user:alice")],
        Some("k0"),
    );
    let _ = store.note("default", NewMemory::new("a new note"));
    if let Ok(Some(p)) = store.next_prompt("default") {
        let _ = store.nap("default", p.block, "a new summary");
    }
    if let Ok(b) = Block::new(1, 0) {
        let _ = store.forget("default", b);
    }
    let _ = store.session_append(
        "s1",
        &[r#"{"role":"user","content":"hi"}"#],
        Some("sk"),
        None,
    );
    let _ = store.session_save("s2", &[r#"{"d":4}"#], None);
    let _ = store.session_pop("s1", None);
    let _ = store.session_delete("s2");
    let _ = store.verify();
}
