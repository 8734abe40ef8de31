//! Guards the session storage contract: messages come back byte-identical (unicode, nesting,
//! numbers beyond f64, unpaired surrogate escapes, 1 MiB strings), ids at their limits work and beyond them are refused,
//! every bad input (not an object, bad JSON, over 16 MiB, bad id) is a typed error with nothing
//! written, a save writes only what changed and archives what it drops (a list over 1 MiB, saved
//! outside group commit, exactly as a small one), and a memory note and a session append made in
//! one transaction are seen together or not at all.

use somna::{Error, NewMemory, Store};

/// The session's archived messages, oldest first.
fn archived_messages(s: &Store, id: &str) -> Vec<String> {
    s.session_archived(id)
        .unwrap()
        .into_iter()
        .map(|a| a.message)
        .collect()
}

fn store() -> (tempfile::TempDir, Store) {
    let dir = tempfile::tempdir().unwrap();
    let s = Store::create(crate::backend::location(dir.path(), "s.redb")).unwrap();
    (dir, s)
}

#[test]
fn messages_round_trip_byte_identical() {
    let (_d, s) = store();
    let big = "é".repeat(1 << 19); // 1 MiB of UTF-8
    let msgs = [
        r#"{"role":"user","content":"héllo 🌍 \u00e9 \"quoted\" \\ back"}"#.to_string(),
        r#"{"n":123456789012345678901234567890,"f":1.0000000000000000001,"e":-1E+400,"z":-0}"#.to_string(),
        r#"{"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{\"x\": [1, {\"y\": null}]}"}}],"deep":{"a":{"b":{"c":[[],{},[[true,false]]]}}}}"#.to_string(),
        format!(r#"{{"content":"{big}"}}"#),
        r#"{"dup":1,"dup":2}"#.to_string(),
        // Unpaired surrogate escapes: valid JSON syntax (Python's json.dumps writes them for a
        // lone surrogate), no Unicode text; kept as written.
        r#"{"content":"\udccc and \ud800 alone","\udfff":1}"#.to_string(),
    ];
    let refs: Vec<&str> = msgs.iter().map(String::as_str).collect();
    s.session_save("rt", &refs, None).unwrap();
    assert_eq!(s.session_load("rt").unwrap().unwrap(), msgs.to_vec());
    s.session_append("rt2", &refs, None, None).unwrap();
    assert_eq!(s.session_items("rt2", None).unwrap(), msgs.to_vec());
}

#[test]
fn whitespace_outside_strings_is_compacted_and_nothing_else() {
    let (_d, s) = store();
    s.session_save(
        "w",
        &["{ \"a\" : \"x  y\\n\" ,\n \"b\" : [ 1 , 2 ] }"],
        None,
    )
    .unwrap();
    assert_eq!(
        s.session_load("w").unwrap().unwrap(),
        vec![r#"{"a":"x  y\n","b":[1,2]}"#.to_string()]
    );
}

#[test]
fn ids_at_the_limits() {
    let (_d, s) = store();
    let longest = "x".repeat(256);
    let multibyte = "é".repeat(128); // 256 bytes
    for id in [
        longest.as_str(),
        multibyte.as_str(),
        "a",
        "with space:colon",
        "with space/and:colon",
        "team/alice",
        "a..b.",
    ] {
        s.session_save(id, &["{}"], None).unwrap();
        assert_eq!(s.session_load(id).unwrap().unwrap(), vec!["{}".to_string()]);
    }
    // A new session's id is also a relative file path (issue 52, point 16): `export-dir` writes
    // `<id>.json`, a `/` making folders, so no part may be empty, `.` or `..`.
    for bad in [
        "",
        &"x".repeat(257),
        "tab\there",
        "nl\n",
        "nul\0",
        "../../etc/passwd",
        "team/../../x",
        "/absolute",
        "trailing/",
        "two//slashes",
        "..",
        ".",
        "back\\slash",
    ] {
        let e = s.session_append(bad, &["{}"], None, None).unwrap_err();
        assert!(matches!(e, Error::Invalid { .. }), "{bad:?}: {e}");
        let e = s.session_save(bad, &["{}"], None).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Invalid {
                    what: "session id",
                    ..
                }
            ),
            "{bad:?}: {e}"
        );
    }
    assert_eq!(s.session_ids().unwrap().len(), 7);
}

#[test]
fn bad_input_writes_nothing() {
    let (_d, s) = store();
    s.session_save("keep", &[r#"{"a":1}"#], None).unwrap();
    let before = s.session_info("keep").unwrap().unwrap();
    let huge = format!(r#"{{"c":"{}"}}"#, "a".repeat(16 << 20));
    for bad in [
        vec!["[1]"],
        vec!["{\"a\":"],
        vec!["42"],
        vec!["\"str\""],
        vec![r#"{"ok":1}"#, "nope"],
        vec![huge.as_str()],
    ] {
        let e = s.session_save("keep", &bad, None).unwrap_err();
        assert!(matches!(e, Error::Invalid { .. }), "{e}");
        let e = s.session_append("keep", &bad, Some("k"), None).unwrap_err();
        assert!(matches!(e, Error::Invalid { .. }), "{e}");
        let e = s.session_save("new", &bad, None).unwrap_err();
        assert!(matches!(e, Error::Invalid { .. }), "{e}");
    }
    assert_eq!(s.session_info("keep").unwrap().unwrap(), before);
    assert_eq!(
        s.session_load("keep").unwrap().unwrap(),
        vec![r#"{"a":1}"#.to_string()]
    );
    assert!(s.session_load("new").unwrap().is_none());
    assert_eq!(s.session_ids().unwrap(), vec!["keep".to_string()]);
}

#[test]
fn trimming_history_archives_instead_of_losing() {
    let (_d, s) = store();
    let msgs: Vec<String> = (0..100)
        .map(|i| format!(r#"{{"role":"user","content":"m{i}"}}"#))
        .collect();
    let mut all = vec![r#"{"role":"system","content":"sys"}"#.to_string()];
    all.extend(msgs.iter().cloned());
    let refs: Vec<&str> = all.iter().map(String::as_str).collect();
    s.session_save("t", &refs, None).unwrap();
    // Keep the system message and the last 20, add one: 80 archived, 1 written, 21 kept.
    let mut trimmed = vec![all[0].clone()];
    trimmed.extend(all[81..].iter().cloned());
    trimmed.push(r#"{"role":"assistant","content":"new"}"#.to_string());
    let refs: Vec<&str> = trimmed.iter().map(String::as_str).collect();
    let out = s.session_save("t", &refs, None).unwrap();
    assert_eq!((out.kept, out.written, out.archived), (21, 1, 80));
    assert_eq!(s.session_load("t").unwrap().unwrap(), trimmed);
    let archived = archived_messages(&s, "t");
    assert_eq!(archived, all[1..81].to_vec());
    // The newest n of the archive, oldest first, by a bounded reverse scan.
    for n in [0, 1, 7, 80, 200] {
        let newest: Vec<String> = s
            .session_archived_newest("t", n)
            .unwrap()
            .into_iter()
            .map(|a| a.message)
            .collect();
        assert_eq!(newest, archived[80 - n.min(80)..].to_vec(), "newest {n}");
    }
    // Saving the same list again changes nothing, not even the revision.
    let again = s.session_save("t", &refs, None).unwrap();
    assert_eq!(
        (again.revision, again.written, again.archived),
        (out.revision, 0, 0)
    );
    assert_eq!(s.session_prune("t").unwrap(), 80);
    assert!(s.session_archived("t").unwrap().is_empty());
}

/// A list of more than 1 MiB is saved in a transaction of its own (no copy for group commit),
/// a smaller one through group commit: the same saves give the same outcomes, loads, archive and
/// conflicts either way (a long history extended, then trimmed, then saved again unchanged, then
/// saved at a stale revision).
#[test]
fn large_and_small_lists_save_alike() {
    fn refs(v: &[String]) -> Vec<&str> {
        v.iter().map(String::as_str).collect()
    }
    let run = |pad: usize| {
        let (_d, s) = store();
        let msg = |i: usize| format!(r#"{{"i":{i},"pad":"{}"}}"#, "p".repeat(pad));
        let all: Vec<String> = (0..600).map(msg).collect();
        let mut outcomes = Vec::new();
        let first = s.session_save("big", &refs(&all[..500]), None).unwrap();
        outcomes.push((first.kept, first.written, first.archived));
        let grown = s.session_save("big", &refs(&all), None).unwrap();
        outcomes.push((grown.kept, grown.written, grown.archived));
        assert!(grown.revision > first.revision);
        let trimmed: Vec<String> = all[100..].to_vec();
        let cut = s.session_save("big", &refs(&trimmed), None).unwrap();
        outcomes.push((cut.kept, cut.written, cut.archived));
        let same = s.session_save("big", &refs(&trimmed), None).unwrap();
        assert_eq!(same.revision, cut.revision);
        outcomes.push((same.kept, same.written, same.archived));
        let stale = s.session_save("big", &refs(&all), Some(grown.revision));
        assert!(matches!(stale, Err(Error::Conflict(_))), "{stale:?}");
        assert_eq!(s.session_load("big").unwrap().unwrap(), trimmed);
        let archived = archived_messages(&s, "big");
        assert_eq!(archived, all[..100].to_vec());
        outcomes
    };
    // Messages of about 2.2 KB (every list here over 1 MiB: transactions of their own) and of
    // about 20 bytes (group commit).
    let large = run(2_200);
    let small = run(10);
    assert_eq!(large, small);
    assert_eq!(
        large,
        vec![(0, 500, 0), (500, 100, 0), (500, 0, 100), (500, 0, 0)]
    );
}

#[test]
fn archive_retention_keeps_the_newest() {
    let (_d, s) = store();
    s.set_config("SESSION_ARCHIVE_MAX", "3").unwrap();
    for i in 0..6 {
        let m = format!(r#"{{"i":{i}}}"#);
        s.session_save("r", &[m.as_str()], None).unwrap();
    }
    let archived = archived_messages(&s, "r");
    assert_eq!(archived, vec![r#"{"i":2}"#, r#"{"i":3}"#, r#"{"i":4}"#]);
}

#[test]
fn optimistic_concurrency_conflicts_write_nothing() {
    let (_d, s) = store();
    let r1 = s
        .session_save("c", &[r#"{"a":1}"#], Some(0))
        .unwrap()
        .revision;
    let e = s.session_save("c", &[r#"{"a":2}"#], Some(0)).unwrap_err();
    assert!(matches!(e, Error::Conflict(_)));
    let e = s
        .session_append("c", &[r#"{"a":3}"#], None, Some(r1 + 7))
        .unwrap_err();
    assert!(matches!(e, Error::Conflict(_)));
    assert_eq!(
        s.session_load("c").unwrap().unwrap(),
        vec![r#"{"a":1}"#.to_string()]
    );
    let r2 = s
        .session_append("c", &[r#"{"a":3}"#], None, Some(r1))
        .unwrap()
        .revision;
    assert!(r2 > r1);
    // Revisions never repeat, even across delete and re-create.
    s.session_delete("c").unwrap();
    let r3 = s.session_save("c", &["{}"], Some(0)).unwrap().revision;
    assert!(r3 > r2);
}

#[test]
fn a_note_and_a_session_append_commit_together_or_not_at_all() {
    let (_d, s) = store();
    s.write(|tx| {
        tx.session_append(
            "conv",
            &[r#"{"role":"user","content":"I moved to Lyon"}"#],
            None,
            None,
        )?;
        tx.note("user", NewMemory::new("the user lives in Lyon"))?;
        Ok(())
    })
    .unwrap();
    assert_eq!(s.count("user").unwrap(), 1);
    assert_eq!(s.session_items("conv", None).unwrap().len(), 1);
    // A failure after the append rolls both back.
    let e = s
        .write(|tx| {
            tx.session_append(
                "conv",
                &[r#"{"role":"user","content":"second"}"#],
                None,
                None,
            )?;
            tx.note("user", NewMemory::new("bad\nline"))?;
            Ok(())
        })
        .unwrap_err();
    assert!(matches!(e, Error::Invalid { .. }));
    assert_eq!(s.count("user").unwrap(), 1);
    assert_eq!(s.session_items("conv", None).unwrap().len(), 1);
}

#[test]
fn listing_pages_with_prefix_and_cursor() {
    let (_d, s) = store();
    for i in 0..25 {
        s.session_save(&format!("user:{i:03}"), &["{}"], None)
            .unwrap();
    }
    s.session_save("other", &["{}"], None).unwrap();
    let mut seen = Vec::new();
    let mut after: Option<String> = None;
    loop {
        let page = s.session_list("user:", after.as_deref(), Some(10)).unwrap();
        if page.is_empty() {
            break;
        }
        after = page.last().map(|p| p.id.clone());
        seen.extend(page.into_iter().map(|p| p.id));
    }
    let want: Vec<String> = (0..25).map(|i| format!("user:{i:03}")).collect();
    assert_eq!(seen, want);
    assert_eq!(s.session_list("", None, None).unwrap().len(), 26);
}
