//! Arbitrary bytes into `Store::import_jsonl` on an in-memory store: an error that writes
//! nothing, or an import after which `verify` finds nothing wrong; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use somna::{Options, Store};
use somna_testkit::simdisk::SimDisk;

fuzz_target!(|data: &[u8]| {
    let disk = SimDisk::new(1);
    let mut store = Store::with_backend(disk.clone(), "fuzz", Options::default().exclusive(true))
        .expect("in-memory store");
    let before = store.read(|r| r.stats()).expect("stats");
    let mut input = data;
    match store.import_jsonl(&mut input) {
        Ok(_) => {
            let report = store.verify().expect("verify runs");
            assert!(report.ok(), "{:?}", report.problems);
        }
        Err(_) => {
            assert_eq!(store.read(|r| r.stats()).expect("stats"), before);
        }
    }
});
