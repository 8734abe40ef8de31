//! Guards the multi-writer commit in one phase (vendor/README.md, "one sync per multi-writer
//! commit"; docs/design.md, "Durability"): a default-mode commit syncs the file once, and a power
//! loss that keeps the commit's header but not every page it names is caught by the next open,
//! which verifies the new primary and falls back to the commit before it. The power-loss sweep
//! (`power_loss.rs`) covers every sync of a mixed workload with random survivals; this test makes
//! sure the header-without-pages case is reached, and that a commit costs one sync, not two.

use engram::{NewMemory, Options, Store};
use engram_testkit::simdisk::{FaultPlan, SimDisk, Survival};

/// The bytes of the header sector (redb's header lies within the file's first 512 bytes).
const HEADER: usize = 512;

fn open(disk: SimDisk) -> Store {
    Store::with_backend(disk, "sim", Options::default().cache_bytes(4 << 20)).expect("open")
}

fn note(store: &Store, text: String) -> engram::Result<u64> {
    store.note("default", NewMemory::new(text))
}

#[test]
fn a_multi_writer_commit_syncs_once() {
    let disk = SimDisk::new(1);
    let store = open(disk.clone());
    // The first writes create tables and the scope; count the steady state after them.
    for i in 0..3 {
        note(&store, format!("warm-up {i}")).expect("note");
    }
    let before = disk.syncs_total();
    for i in 0..10 {
        note(&store, format!("note {i}")).expect("note");
    }
    assert_eq!(
        disk.syncs_total() - before,
        10,
        "syncs for 10 durable notes"
    );
    let before = disk.syncs_total();
    store
        .session_save("s", &[r#"{"role":"user","content":"hi"}"#], None)
        .expect("save");
    assert_eq!(disk.syncs_total() - before, 1, "syncs for one session save");
}

#[test]
fn a_header_that_landed_without_its_pages_is_verified_and_dropped() {
    let disk = SimDisk::new(2);
    let store = open(disk.clone());
    for i in 0..6 {
        note(&store, format!("acknowledged {i}")).expect("note");
    }
    // The next sync never completes: the seventh note is in flight when the power fails.
    disk.set_plan(FaultPlan {
        power_loss_at_sync: Some(1),
        ..FaultPlan::default()
    });
    assert!(note(&store, "in flight".to_string()).is_err());
    drop(store);
    let (live, durable) = (disk.live_image(), disk.durable_image());
    assert_ne!(
        live[..HEADER],
        durable[..HEADER],
        "the commit wrote its header"
    );
    let mut torn = 0;
    for seed in 0..48u64 {
        let survival = match seed % 3 {
            0 => Survival::WholeWrites { percent: 50 },
            1 => Survival::WholeWrites { percent: 90 },
            _ => Survival::Sectors { percent: 80 },
        };
        let image = disk.power_loss_image(survival, seed);
        let header_landed = image.len() >= HEADER && image[..HEADER] == live[..HEADER];
        let whole = image.len() >= live.len() && image[..live.len()] == live[..];
        let store = open(SimDisk::from_image(image, seed));
        let texts: Vec<String> = store
            .read(|r| r.memories("default", 0, 100))
            .expect("read")
            .into_iter()
            .map(|m| m.text)
            .collect();
        let acknowledged: Vec<String> = (0..6).map(|i| format!("acknowledged {i}")).collect();
        assert_eq!(texts[..6], acknowledged[..], "seed {seed}: {texts:?}");
        assert!(
            texts.len() == 6 || texts[6] == "in flight",
            "seed {seed}: {texts:?}"
        );
        if header_landed && !whole {
            // The primary the header names is missing pages: the open dropped it.
            torn += 1;
            assert_eq!(texts.len(), 6, "seed {seed}: a torn primary was served");
        }
        let mut store = store;
        let report = store.verify().expect("verify");
        assert!(report.ok(), "seed {seed}: {:?}", report.problems);
        let id = note(&store, "after recovery".to_string()).expect("note after recovery");
        assert_eq!(id, texts.len() as u64, "seed {seed}");
    }
    assert!(torn > 0, "no image kept the header without every page");
}
