//! Guards the session contract against a plain in-memory model: any sequence of save / append
//! (with and without idempotency keys) / pop / clear / delete / prune over several sessions
//! leaves the same live messages and the same archive as the model, and `load`, `items`, `list`
//! and `info` agree with it after every step. Revisions are per session and time-based (not
//! predictable): the model checks that each change moves a session's revision past every
//! revision that id ever had (deletes included), that what does not change keeps it, and that
//! `expected_revision` accepts exactly the current one.

use std::collections::BTreeMap;

use proptest::prelude::*;
use somna::Store;

#[derive(Debug, Clone)]
enum Op {
    Save(usize, Vec<u8>),
    /// Save the current list with the first `k` messages after the first one dropped and
    /// `extra` new ones appended: the trimming pattern of agent frameworks.
    Trim(usize, usize, u8),
    Append(usize, Vec<u8>, Option<u8>),
    Pop(usize),
    Clear(usize),
    Delete(usize),
    Prune(usize),
    SaveExpecting(usize, Vec<u8>, bool),
}

const IDS: [&str; 3] = ["alpha", "beta/1", "γ session"];

/// Message `n`; every third is about 1.1 KB, so that a session's messages span several chunks
/// of at most 3.8 KB (docs/design.md, section 13.2) and saves, pops and trims cross their bounds.
fn msg(n: u8) -> String {
    let pad = if n.is_multiple_of(3) {
        "x".repeat(1100)
    } else {
        String::new()
    };
    format!("{{\"role\":\"user\",\"content\":\"message {n}{pad}\",\"n\":{n}}}")
}

fn op() -> impl Strategy<Value = Op> {
    let id = 0..IDS.len();
    let list = proptest::collection::vec(0u8..12, 0..8);
    prop_oneof![
        3 => (id.clone(), list.clone()).prop_map(|(i, l)| Op::Save(i, l)),
        2 => (id.clone(), 0usize..4, 0u8..3).prop_map(|(i, k, e)| Op::Trim(i, k, e)),
        3 => (id.clone(), list.clone(), proptest::option::of(0u8..4)).prop_map(|(i, l, k)| Op::Append(i, l, k)),
        1 => id.clone().prop_map(Op::Pop),
        1 => id.clone().prop_map(Op::Clear),
        1 => id.clone().prop_map(Op::Delete),
        1 => id.clone().prop_map(Op::Prune),
        1 => (id, list, any::<bool>()).prop_map(|(i, l, ok)| Op::SaveExpecting(i, l, ok)),
    ]
}

#[derive(Debug, Clone, Default)]
struct Session {
    live: Vec<String>,
    archive: Vec<String>,
    revision: u64,
    keys: BTreeMap<String, (Vec<String>, u64, u64)>,
}

#[derive(Debug, Default)]
struct Model {
    sessions: BTreeMap<String, Session>,
    /// The highest revision each id ever had, surviving deletes.
    highest: BTreeMap<String, u64>,
}

impl Model {
    /// The save rule: keep the longest common prefix, then the longest run of stored messages
    /// that the new list continues with; archive the stored messages in between.
    /// Records a change of `id` the store reported at revision `got`: it must pass every
    /// revision the id had.
    fn changed(&mut self, id: &str, got: u64) -> u64 {
        let floor = self.highest.get(id).copied().unwrap_or(0);
        assert!(got > floor, "revision of {id} went from {floor} to {got}");
        self.highest.insert(id.to_string(), got);
        if let Some(s) = self.sessions.get_mut(id) {
            s.revision = got;
        }
        got
    }

    /// Checks a save's revision: a change moves it on, no change keeps it.
    fn saved(&mut self, id: &str, changed: bool, got: u64) -> u64 {
        if changed {
            self.changed(id, got)
        } else {
            let s = self.sessions.get(id).map(|s| s.revision).unwrap_or(0);
            assert_eq!(got, s, "an unchanged save of {id} kept its revision");
            got
        }
    }

    fn save(&mut self, id: &str, new: Vec<String>) -> (bool, u64) {
        let exists = self.sessions.contains_key(id);
        let s = self.sessions.entry(id.to_string()).or_default();
        let stored = s.live.clone();
        let p = stored.iter().zip(&new).take_while(|(a, b)| a == b).count();
        let mut j = stored.len();
        if p < new.len() {
            for cand in p..stored.len() {
                let run = stored.len() - cand;
                if run <= new.len() - p && stored[cand..] == new[p..p + run] {
                    j = cand;
                    break;
                }
            }
        }
        let archived: Vec<String> = stored[p..j].to_vec();
        let kept = p + (stored.len() - j);
        let changed = !archived.is_empty() || kept < new.len() || !exists;
        s.archive.extend(archived.iter().cloned());
        s.live = new;
        (changed, archived.len() as u64)
    }
}

fn check(store: &Store, model: &Model) {
    let ids = store.session_ids().unwrap();
    let want: Vec<String> = model.sessions.keys().cloned().collect();
    assert_eq!(ids, want);
    for id in IDS {
        let loaded = store.session_load(id).unwrap();
        match model.sessions.get(id) {
            None => {
                assert_eq!(loaded, None);
                assert!(store.session_info(id).unwrap().is_none());
            }
            Some(s) => {
                assert_eq!(loaded.as_ref(), Some(&s.live), "live messages of {id}");
                let info = store.session_info(id).unwrap().unwrap();
                assert_eq!(info.revision, s.revision, "revision of {id}");
                assert_eq!(info.count, s.live.len() as u64);
                assert_eq!(
                    info.bytes,
                    s.live.iter().map(|m| m.len() as u64).sum::<u64>()
                );
                assert_eq!(info.archived, s.archive.len() as u64);
                let archive: Vec<String> = store
                    .session_archived(id)
                    .unwrap()
                    .into_iter()
                    .map(|a| a.message)
                    .collect();
                assert_eq!(archive, s.archive, "archive of {id}");
                for limit in [0usize, 1, 3] {
                    let items = store.session_items(id, Some(limit)).unwrap();
                    let from = s.live.len().saturating_sub(limit);
                    assert_eq!(items, s.live[from..].to_vec());
                }
            }
        }
    }
}

/// The session's revision as the store reports it.
fn revision(store: &Store, id: &str) -> u64 {
    store.session_info(id).unwrap().map_or(0, |i| i.revision)
}

fn cases() -> u32 {
    std::env::var("SOMNA_PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn sessions_agree_with_the_model(ops in proptest::collection::vec(op(), 1..30)) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::create(crate::backend::location(dir.path(), "s.redb")).unwrap();
        let mut model = Model::default();
        for op in ops {
            match op {
                Op::Save(i, l) => {
                    let msgs: Vec<String> = l.into_iter().map(msg).collect();
                    let refs: Vec<&str> = msgs.iter().map(String::as_str).collect();
                    let out = store.session_save(IDS[i], &refs, None).unwrap();
                    let (changed, archived) = model.save(IDS[i], msgs);
                    model.saved(IDS[i], changed, out.revision);
                    prop_assert_eq!(out.archived, archived);
                }
                Op::Trim(i, k, extra) => {
                    let mut msgs = model.sessions.get(IDS[i]).map(|s| s.live.clone()).unwrap_or_default();
                    if msgs.len() > 1 {
                        let end = (1 + k).min(msgs.len());
                        msgs.drain(1..end);
                    }
                    msgs.extend((0..extra).map(|e| msg(100 + e)));
                    let refs: Vec<&str> = msgs.iter().map(String::as_str).collect();
                    let out = store.session_save(IDS[i], &refs, None).unwrap();
                    let (changed, archived) = model.save(IDS[i], msgs);
                    model.saved(IDS[i], changed, out.revision);
                    prop_assert_eq!(out.archived, archived);
                }
                Op::Append(i, l, key) => {
                    let msgs: Vec<String> = l.into_iter().map(msg).collect();
                    let refs: Vec<&str> = msgs.iter().map(String::as_str).collect();
                    let key = key.map(|k| format!("key-{k}"));
                    let got = store.session_append(IDS[i], &refs, key.as_deref(), None);
                    let s = model.sessions.entry(IDS[i].to_string()).or_default();
                    let earlier = key.as_ref().and_then(|k| s.keys.get(k).cloned());
                    match earlier {
                        Some((items, rev, first)) if items == msgs => {
                            let got = got.unwrap();
                            prop_assert!(got.replayed);
                            prop_assert_eq!((got.revision, got.first_index), (rev, first));
                        }
                        Some(_) => prop_assert!(matches!(got, Err(somna::Error::Conflict(_)))),
                        None => {
                            let got = got.unwrap();
                            let first = s.live.len() as u64;
                            s.live.extend(msgs.iter().cloned());
                            let rev = model.changed(IDS[i], got.revision);
                            if let Some(k) = key {
                                if let Some(s) = model.sessions.get_mut(IDS[i]) {
                                    s.keys.insert(k, (msgs, rev, first));
                                }
                            }
                            prop_assert!(!got.replayed);
                            prop_assert_eq!(got.first_index, first);
                        }
                    }
                }
                Op::Pop(i) => {
                    let got = store.session_pop(IDS[i], None).unwrap();
                    let want = model.sessions.get_mut(IDS[i]).and_then(|s| s.live.pop());
                    if want.is_some() {
                        model.changed(IDS[i], revision(&store, IDS[i]));
                    }
                    prop_assert_eq!(got, want);
                }
                Op::Clear(i) => {
                    let n = store.session_clear(IDS[i]).unwrap();
                    if let Some(s) = model.sessions.get_mut(IDS[i]) {
                        prop_assert_eq!(n, s.live.len() as u64);
                        s.live.clear();
                        model.changed(IDS[i], revision(&store, IDS[i]));
                    } else {
                        prop_assert_eq!(n, 0);
                    }
                }
                Op::Delete(i) => {
                    let existed = store.session_delete(IDS[i]).unwrap();
                    prop_assert_eq!(existed, model.sessions.remove(IDS[i]).is_some());
                }
                Op::Prune(i) => {
                    let n = store.session_prune(IDS[i]).unwrap();
                    match model.sessions.get_mut(IDS[i]) {
                        Some(s) if !s.archive.is_empty() => {
                            prop_assert_eq!(n, s.archive.len() as u64);
                            s.archive.clear();
                            model.changed(IDS[i], revision(&store, IDS[i]));
                        }
                        _ => prop_assert_eq!(n, 0),
                    }
                }
                Op::SaveExpecting(i, l, right) => {
                    let current = model.sessions.get(IDS[i]).map(|s| s.revision).unwrap_or(0);
                    let expected = if right { current } else { current + 1000 };
                    let msgs: Vec<String> = l.into_iter().map(msg).collect();
                    let refs: Vec<&str> = msgs.iter().map(String::as_str).collect();
                    let got = store.session_save(IDS[i], &refs, Some(expected));
                    if right {
                        let (changed, _) = model.save(IDS[i], msgs);
                        model.saved(IDS[i], changed, got.unwrap().revision);
                    } else {
                        prop_assert!(matches!(got, Err(somna::Error::Conflict(_))));
                    }
                }
            }
            check(&store, &model);
        }
        let mut store = store;
        let report = store.verify().unwrap();
        prop_assert!(report.ok(), "{:?}", report.problems);
    }
}
