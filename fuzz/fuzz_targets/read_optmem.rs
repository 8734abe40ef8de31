//! Arbitrary bytes as an OptMem directory (`LOG.txt` and one `TREE/<size>` file) into
//! `somna::import::read_optmem`: an error or a validated store, never a panic; what it accepts
//! imports into an empty scope.
#![no_main]

use libfuzzer_sys::fuzz_target;
use somna::{Options, Store};
use somna_testkit::simdisk::SimDisk;

fuzz_target!(|data: &[u8]| {
    if data.len() < 3 {
        return;
    }
    let size_byte = data[0];
    let split = usize::from(u16::from_le_bytes([data[1], data[2]])).min(data.len() - 3);
    let (log, tree) = data[3..].split_at(split);
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("LOG.txt"), log).expect("write LOG.txt");
    if size_byte & 0x80 == 0 {
        std::fs::create_dir(dir.path().join("TREE")).expect("mkdir TREE");
        let name = match size_byte % 8 {
            0 => "3".to_string(),
            1 => "x".to_string(),
            n => (1u64 << n).to_string(),
        };
        std::fs::write(dir.path().join("TREE").join(name), tree).expect("write TREE");
    }
    if let Ok(parsed) = somna::import::read_optmem(dir.path()) {
        assert!(parsed.torn_bytes < 320);
        let store =
            Store::with_backend(SimDisk::new(1), "fuzz", Options::default().exclusive(true))
                .expect("in-memory store");
        if !parsed.memories.is_empty() {
            let r = store.import_optmem("default", dir.path());
            if let Err(e) = &r {
                // Everything was validated by read_optmem: the import itself may only refuse
                // what the store's own rules add (ENTRY_BYTES).
                assert!(matches!(e, somna::Error::Invalid { .. }), "{e}");
            }
        }
    }
});
