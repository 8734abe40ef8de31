//! LangGraph checkpoint storage (`somna::checkpoint`): a checkpoint round-trips with its channel
//! values and pending writes; a channel is stored only at a new version; a list that grows by
//! one item per step stores one item per step (not the whole list again); `list` filters,
//! bounds and limits; delete, copy and prune leave no orphan rows, and `verify` stays clean;
//! the tables' statistics are an admin's, and a TTL sweep deletes only what its principal may
//! write, in steps of a bounded number of items; a dotted filter key reaches into nested
//! metadata; store namespace labels keep control characters.

use somna::checkpoint::{ChannelValue, ListQuery, NewCheckpoint, PendingWrite, Prune, Typed};
use somna::format::TableId;
use somna::Store;

fn t(s: &str) -> Typed {
    Typed::new("msgpack", s.as_bytes())
}

fn ver(n: u32) -> String {
    format!("{n:032}.0")
}

/// Step `n` of a thread whose list channel `messages` has `n + 1` items and whose channel
/// `count` changes every step, while `config` never changes after step 0.
fn step(thread: &str, n: u32) -> NewCheckpoint {
    let items: Vec<Typed> = (0..=n).map(|i| t(&format!("message {i}"))).collect();
    let mut changed = vec![
        ("messages".into(), ver(n + 1), ChannelValue::List(items)),
        (
            "count".into(),
            ver(n + 1),
            ChannelValue::Whole(t(&n.to_string())),
        ),
    ];
    if n == 0 {
        changed.push(("config".into(), ver(1), ChannelValue::Whole(t("fixed"))));
    }
    NewCheckpoint {
        thread: thread.into(),
        ns: String::new(),
        id: format!("cp-{n:05}"),
        parent: n.checked_sub(1).map(|p| format!("cp-{p:05}")),
        checkpoint: t("checkpoint"),
        metadata: t("metadata"),
        metadata_json: format!(r#"{{"step":{n},"source":"loop"}}"#),
        run_id: Some(format!("run-{}", n / 10)),
        versions: vec![
            ("config".into(), ver(1)),
            ("count".into(), ver(n + 1)),
            ("messages".into(), ver(n + 1)),
        ],
        changed,
    }
}

fn rows(store: &Store, table: TableId) -> u64 {
    let s = store.read(|r| r.checkpoint_stats()).unwrap();
    match table {
        TableId::Checkpoints => s.checkpoints,
        TableId::CheckpointChannels => s.channel_values,
        TableId::CheckpointItems => s.items,
        _ => s.writes,
    }
}

/// The ids `q` lists, in order.
fn listed(store: &Store, q: &ListQuery) -> Vec<String> {
    let found = store.checkpoint_list(q).unwrap();
    found.into_iter().map(|e| e.id).collect()
}

/// A new store in `dir` holding `steps` steps of thread `a`.
fn store_with_steps(dir: &tempfile::TempDir, steps: u32) -> Store {
    let store = Store::create(dir.path().join("s.redb")).unwrap();
    for n in 0..steps {
        store.checkpoint_put(&step("a", n)).unwrap();
    }
    store
}

#[test]
fn a_growing_list_stores_one_item_per_step_and_everything_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = store_with_steps(&dir, 50);
    assert_eq!(rows(&store, TableId::CheckpointItems), 50);
    // config once, count and messages once per step.
    assert_eq!(rows(&store, TableId::CheckpointChannels), 1 + 50 + 50);
    let got = store.checkpoint_get("a", "", None).unwrap().unwrap();
    assert_eq!(got.id, "cp-00049");
    assert_eq!(got.parent.as_deref(), Some("cp-00048"));
    let want: Vec<Typed> = (0..50).map(|i| t(&format!("message {i}"))).collect();
    assert_eq!(
        got.values[2],
        ("messages".to_string(), ChannelValue::List(want))
    );
    assert_eq!(
        got.values[0],
        ("config".to_string(), ChannelValue::Whole(t("fixed")))
    );
    let old = store
        .checkpoint_get("a", "", Some("cp-00003"))
        .unwrap()
        .unwrap();
    assert!(matches!(&old.values[2].1, ChannelValue::List(v) if v.len() == 4));

    // An edited list is stored again, whole; the old versions still read back.
    let mut edit = step("a", 50);
    edit.changed[0].2 = ChannelValue::List(vec![t("only")]);
    store.checkpoint_put(&edit).unwrap();
    assert_eq!(rows(&store, TableId::CheckpointItems), 51);
    assert!(store.verify().unwrap().ok());
}

#[test]
fn writes_keep_the_first_regular_write_and_list_filters_bounds_and_limits() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = store_with_steps(&dir, 30);
    let w = |task: &str, idx: i64, v: &str| PendingWrite {
        task_id: task.into(),
        idx,
        channel: "ch".into(),
        value: t(v),
        task_path: String::new(),
    };
    store
        .checkpoint_put_writes("a", "", "cp-00029", &[w("t2", 0, "x"), w("t1", 0, "y")])
        .unwrap();
    store
        .checkpoint_put_writes("a", "", "cp-00029", &[w("t1", 0, "again")])
        .unwrap();
    store
        .checkpoint_put_writes("a", "", "cp-00029", &[w("t1", -3, "interrupt")])
        .unwrap();
    store
        .checkpoint_put_writes("a", "", "cp-00029", &[w("t1", -3, "replaced")])
        .unwrap();
    let got = store.checkpoint_get("a", "", None).unwrap().unwrap();
    let vals: Vec<(&str, i64, &[u8])> = got
        .writes
        .iter()
        .map(|w| (w.task_id.as_str(), w.idx, w.value.bytes.as_slice()))
        .collect();
    assert_eq!(
        vals,
        vec![
            ("t1", -3, &b"replaced"[..]),
            ("t1", 0, b"y"),
            ("t2", 0, b"x")
        ]
    );

    let q = ListQuery {
        thread: Some("a".into()),
        ns: Some(String::new()),
        before: Some("cp-00020".into()),
        filter: vec![("source".into(), "loop".into())],
        limit: Some(3),
        ..ListQuery::default()
    };
    let ids = listed(&store, &q);
    assert_eq!(ids, ["cp-00019", "cp-00018", "cp-00017"]);
    let q = ListQuery {
        filter: vec![("step".into(), 7.into())],
        ..ListQuery::default()
    };
    let ids = listed(&store, &q);
    assert_eq!(ids, ["cp-00007"]);
    assert!(store.verify().unwrap().ok());
}

#[test]
fn copy_prune_and_delete_leave_no_orphans() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = store_with_steps(&dir, 20);
    store
        .write(|tx| tx.checkpoint_copy_thread("a", "b"))
        .unwrap();
    assert_eq!(rows(&store, TableId::CheckpointItems), 40);
    store
        .write(|tx| tx.checkpoint_prune(&["b"], Prune::KeepLatest))
        .unwrap();
    let left = store.checkpoint_list(&ListQuery {
        thread: Some("b".into()),
        ..ListQuery::default()
    });
    assert_eq!(left.unwrap().len(), 1);
    // The latest list still needs all 20 items of b.
    assert_eq!(rows(&store, TableId::CheckpointItems), 40);
    assert_eq!(rows(&store, TableId::CheckpointChannels), 41 + 3);
    let gone = store
        .write(|tx| tx.checkpoint_delete_for_runs(&["run-0"]))
        .unwrap();
    assert_eq!(gone, 10);
    assert!(store.verify().unwrap().ok());
    store.write(|tx| tx.checkpoint_delete_thread("a")).unwrap();
    store
        .write(|tx| tx.checkpoint_prune(&["b"], Prune::DeleteAll))
        .unwrap();
    for table in [
        TableId::Checkpoints,
        TableId::CheckpointChannels,
        TableId::CheckpointItems,
        TableId::CheckpointWrites,
    ] {
        assert_eq!(rows(&store, table), 0, "{}", table.name());
    }
    assert!(store.verify().unwrap().ok());
}

#[test]
fn a_typed_value_is_encoded_as_postcard_bytes() {
    // The bytes of `Typed` are a varint length and the raw bytes, as a Vec<u8> would be.
    let v = Typed::new("msgpack", vec![1u8, 2, 200]);
    let enc = somna::format::encode(&v).unwrap();
    assert_eq!(
        &enc[1..enc.len() - 4],
        &[7, b'm', b's', b'g', b'p', b'a', b'c', b'k', 3, 1, 2, 200]
    );
    let back: Typed = somna::format::decode("t", &"k", &enc).unwrap();
    assert_eq!(back, v);
}

#[test]
fn copying_onto_a_thread_with_checkpoints_replaces_them() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = store_with_steps(&dir, 5);
    for n in 0..3 {
        // Ids of its own, so that nothing of b's is overwritten by a key of a's.
        let mut s = step("b", n);
        s.id = format!("own-{n}");
        s.parent = n.checked_sub(1).map(|p| format!("own-{p}"));
        let own: Vec<Typed> = (0..=n).map(|i| t(&format!("b's own {i}"))).collect();
        s.changed[0].2 = ChannelValue::List(own);
        store.checkpoint_put(&s).unwrap();
    }
    let copied = store
        .write(|tx| tx.checkpoint_copy_thread("a", "b"))
        .unwrap();
    assert_eq!(copied, 5);
    let all = |store: &Store, thread: &str| {
        store
            .checkpoint_list(&ListQuery {
                thread: Some(thread.into()),
                ..ListQuery::default()
            })
            .unwrap()
    };
    let (a, b) = (all(&store, "a"), all(&store, "b"));
    assert_eq!(b.len(), 5);
    for (x, y) in a.iter().zip(&b) {
        assert_eq!((&x.id, &x.values), (&y.id, &y.values));
    }
    assert!(store.verify().unwrap().ok());
    // Onto itself: nothing changes.
    assert_eq!(
        store
            .write(|tx| tx.checkpoint_copy_thread("a", "a"))
            .unwrap(),
        5
    );
    assert_eq!(all(&store, "a").len(), 5);
}

#[test]
fn statistics_are_an_admins_and_a_sweep_deletes_only_what_its_principal_may_write() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_steps(&dir, 2);
    store
        .write(|tx| {
            tx.store_put(&["x", "notes"], "k", "{}", Some(1), &[])?;
            tx.store_put(&["y"], "k", "{}", Some(1), &[])
        })
        .unwrap();
    store
        .grant("user:bob", somna::trust::Access::Write, "store:x")
        .unwrap();
    let bob = store.as_principal(Some("user:bob"));
    assert!(matches!(
        bob.read(|r| r.checkpoint_stats()),
        Err(somna::Error::Denied(_))
    ));
    std::thread::sleep(std::time::Duration::from_millis(2));
    assert_eq!(bob.write(|tx| tx.store_sweep()).unwrap(), 1, "store:x only");
    // store:y's expired item was left for someone who may write it.
    assert_eq!(store.write(|tx| tx.store_sweep()).unwrap(), 1);
    assert_eq!(store.write(|tx| tx.store_sweep()).unwrap(), 0);
}

#[test]
fn delta_history_walks_the_parents_back_to_each_channels_seed() {
    let dir = tempfile::tempdir().unwrap();
    let store = store_with_steps(&dir, 5);
    let w = |channel: &str, v: &str| PendingWrite {
        task_id: "task".into(),
        idx: 0,
        channel: channel.into(),
        value: t(v),
        task_path: String::new(),
    };
    for n in 0..5u32 {
        let id = format!("cp-{n:05}");
        store
            .checkpoint_put_writes("a", "", &id, &[w("delta", &n.to_string())])
            .unwrap();
    }
    let channels = ["delta".to_string(), "count".to_string()];
    let h = store
        .checkpoint_delta_history("a", "", Some("cp-00004"), &channels)
        .unwrap();
    // "delta" has no value anywhere: every ancestor's writes, oldest first, and no seed; the
    // target's own writes are pending for the next step and left out.
    assert_eq!(h[0].channel, "delta");
    let got: Vec<&Typed> = h[0].writes.iter().map(|w| &w.value).collect();
    assert_eq!(got, [&t("0"), &t("1"), &t("2"), &t("3")]);
    assert_eq!(h[0].seed, None);
    // "count" has a value at the parent: that is the seed, with no writes after it.
    assert_eq!(h[1].seed, Some(ChannelValue::Whole(t("3"))));
    assert!(h[1].writes.is_empty());
    // The latest checkpoint when no id is given; a missing one has an empty history.
    assert_eq!(
        store
            .checkpoint_delta_history("a", "", None, &channels)
            .unwrap(),
        h
    );
    let none = store
        .checkpoint_delta_history("a", "", Some("nope"), &channels)
        .unwrap();
    assert!(none.iter().all(|h| h.writes.is_empty() && h.seed.is_none()));
}

#[test]
fn a_parent_chain_that_loops_is_refused_not_walked_forever() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().join("s.redb")).unwrap();
    // The host names each parent: x's parent is y and y's is x.
    for (id, parent) in [("x", "y"), ("y", "x")] {
        let mut c = step("a", 1);
        c.id = id.into();
        c.parent = Some(parent.into());
        store.checkpoint_put(&c).unwrap();
    }
    let err = store
        .checkpoint_delta_history("a", "", Some("x"), &["never-written".to_string()])
        .unwrap_err();
    assert!(
        matches!(
            err,
            somna::Error::Invalid {
                what: "checkpoint",
                ..
            }
        ),
        "{err:?}"
    );
}

#[test]
fn a_dotted_filter_key_reaches_into_nested_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().join("s.redb")).unwrap();
    let mut c = step("d", 0);
    c.metadata_json = r#"{"user":{"access-level":"admin","n":1},"a.b":2}"#.into();
    store.checkpoint_put(&c).unwrap();
    let found = |k: &str, v: serde_json::Value| {
        let q = ListQuery {
            filter: vec![(k.into(), v)],
            ..ListQuery::default()
        };
        listed(&store, &q).len()
    };
    assert_eq!(found("user.access-level", "admin".into()), 1);
    assert_eq!(found("user.n", 1.into()), 1);
    assert_eq!(found("user.access-level", "guest".into()), 0);
    assert_eq!(found("user.missing", "admin".into()), 0);
    assert_eq!(found("a.b", 2.into()), 1, "a key held as written");
}

#[test]
fn namespace_labels_keep_control_characters_and_ranges_stay_whole() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().join("s.redb")).unwrap();
    let spaces: [&[&str]; 5] = [
        &["a"],
        &["a\n"],
        &["a", "b"],
        &["a\u{1f}"],
        &["a\u{1e}", "\u{1f}"],
    ];
    store
        .write(|tx| {
            for ns in spaces {
                tx.store_put(ns, "k", "{}", None, &[])?;
            }
            Ok(())
        })
        .unwrap();
    let listed = store.read(|r| r.store_namespaces(&[])).unwrap();
    assert_eq!(listed.len(), 5);
    for ns in spaces {
        let owned: Vec<String> = ns.iter().map(|s| s.to_string()).collect();
        assert!(listed.contains(&owned), "{ns:?}");
        assert!(store.read(|r| r.store_get(ns, "k")).unwrap().is_some());
    }
    let under_a = store.read(|r| r.store_namespaces(&["a"])).unwrap();
    assert_eq!(
        under_a,
        [vec!["a".to_string()], vec!["a".into(), "b".into()]]
    );
    assert!(store
        .write(|tx| tx.store_put(&["nul\0"], "k", "{}", None, &[]))
        .is_err());
}

#[test]
fn a_sweep_step_looks_at_its_budget_of_items_and_says_where_to_go_on() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::create(dir.path().join("s.redb")).unwrap();
    store
        .write(|tx| {
            for k in ["1", "2", "3"] {
                tx.store_put(&["s"], k, "{}", Some(1), &[])?;
            }
            tx.store_put(&["z"], "kept", "{}", None, &[])
        })
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(2));
    let (n, next) = store.write(|tx| tx.store_sweep_step(None, 2)).unwrap();
    assert_eq!((n, next.clone()), (2, Some(("s".into(), "3".into()))));
    let from = next.as_ref().map(|(n, k)| (n.as_str(), k.as_str()));
    let (n, next) = store.write(|tx| tx.store_sweep_step(from, 2)).unwrap();
    assert_eq!((n, next), (1, None));
    assert!(store
        .read(|r| r.store_get(&["z"], "kept"))
        .unwrap()
        .is_some());
}
