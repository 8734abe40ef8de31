//! Power loss during the upgrade from store format 2 to the current one (3 then 4, in one
//! transaction; docs/design.md, section 13.4) never
//! leaves a half-migrated store: the format-2 session fixture is opened on the simulated disk
//! (`somna_testkit::simdisk`), which migrates it, and the power is cut at every sync of that
//! open in turn, keeping an arbitrary part of the writes since the last sync, torn at sectors.
//! The store is then reopened from what the disk kept: it opens (migrating it if it had stayed at
//! format 2), holds every session exactly as the fixture does, and passes `verify`.

use std::path::Path;

use somna::{Options, Store};
use somna_testkit::simdisk::{FaultPlan, SimDisk};

const CHAT1: [&str; 3] = [
    r#"{"role":"assistant","content":"hello"}"#,
    r#"{"role":"user","content":"東京 café?"}"#,
    r#"{"role":"assistant","content":"yes"}"#,
];

fn fixture() -> Vec<u8> {
    std::fs::read(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/format2-sessions.redb"),
    )
    .unwrap()
}

/// The sessions of the fixture, read through `s`.
fn check(s: &mut Store) -> Result<(), String> {
    let shape: Vec<(String, u64, u64)> = s
        .session_list("", None, None)
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|i| (i.id, i.count, i.archived))
        .collect();
    let want: Vec<(String, u64, u64)> = [
        ("chat-1", 3, 1),
        ("chat-2", 2, 0),
        ("empty", 0, 0),
        ("tools", 1, 0),
    ]
    .iter()
    .map(|(i, c, a)| (i.to_string(), *c, *a))
    .collect();
    if shape != want {
        return Err(format!("sessions {shape:?}"));
    }
    let chat1 = s.session_load("chat-1").map_err(|e| e.to_string())?;
    if chat1.as_deref() != Some(&CHAT1.map(String::from)[..]) {
        return Err(format!("chat-1 holds {chat1:?}"));
    }
    let report = s.verify().map_err(|e| e.to_string())?;
    if !report.ok() {
        return Err(format!("verify: {:?}", report.problems));
    }
    Ok(())
}

#[test]
fn power_loss_during_the_migration_leaves_format_2_or_3_whole() {
    let image = fixture();
    // How many syncs the migrating open makes, uncut.
    let disk = SimDisk::from_image(image.clone(), 1);
    let mut s = Store::with_backend(disk.clone(), "migrate", Options::default()).unwrap();
    check(&mut s).unwrap();
    drop(s);
    let syncs = disk.syncs_total();
    assert!(syncs >= 2, "the open synced {syncs} times");
    let mut failures = Vec::new();
    let mut formats = Vec::new();
    for k in 1..=syncs {
        for seed in 0..3u64 {
            let disk = SimDisk::from_image(image.clone(), seed * 31 + k);
            disk.set_plan(FaultPlan {
                power_loss_at_sync: Some(k),
                ..FaultPlan::default()
            });
            let _ = Store::with_backend(disk.clone(), "migrate", Options::default());
            let kept = disk.crash_image().unwrap_or_else(|| disk.cut_power());
            let again = SimDisk::from_image(kept, seed + 100 * k);
            match Store::with_backend(again, "migrate", Options::default()) {
                Ok(mut s) => {
                    formats.push(s.migrate().map(|m| m.from).unwrap_or(0));
                    if let Err(e) = check(&mut s) {
                        failures.push(format!("sync {k}, seed {seed}: {e}"));
                    }
                }
                Err(e) => failures.push(format!("sync {k}, seed {seed}: reopen: {e}")),
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
    // Some cuts came before the migration's commit, some after.
    assert!(formats.contains(&2) && formats.contains(&7), "{formats:?}");
}
