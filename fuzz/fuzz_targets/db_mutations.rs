//! Arbitrary mutations of a valid database file (byte changes at chosen offsets, and maybe a
//! truncation) into open + verify + wake and every other path: an error or a repaired store,
//! never a panic or a hang (run with `-timeout`).
//!
//! KNOWN BUG (docs/reliability.md): redb panics, or aborts on close, on some damaged pages when
//! a file is opened without its integrity check, which engram does today. This target finds
//! that within seconds. With `ENGRAM_FUZZ_INTEGRITY_FIRST=1` each mutated image is first opened
//! by redb with `set_check_integrity_on_open(true)` and skipped if refused, which is what
//! engram would do with the suggested fix; the rest of engram is fuzzed the same.
#![no_main]

mod common;

use engram::redb;
use engram::simdisk::SimDisk;
use engram::{Options, Store};
use libfuzzer_sys::fuzz_target;

fn integrity_first() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("ENGRAM_FUZZ_INTEGRITY_FIRST").is_ok_and(|v| v == "1"))
}

fuzz_target!(|data: &[u8]| {
    let mut img = common::base_image().to_vec();
    let mut chunks = data.chunks_exact(5);
    for c in chunks.by_ref().take(32) {
        let off = u32::from_le_bytes([c[0], c[1], c[2], c[3]]) as usize;
        let x = c[4];
        if off & 0x8000_0000 != 0 && x == 0xff {
            img.truncate((off & 0x7fff_ffff) % img.len().max(1));
            continue;
        }
        let len = img.len().max(1);
        if let Some(b) = img.get_mut(off % len) {
            *b ^= x.max(1);
        }
    }
    if integrity_first() {
        let mut b = redb::Database::builder();
        b.set_check_integrity_on_open(true);
        b.set_concurrency_mode(redb::ConcurrencyMode::MultiWriter);
        let disk = SimDisk::from_image(img.clone(), 4);
        match b.create_with_backend(disk.clone()) {
            Ok(db) => drop(db),
            Err(_) => return,
        }
        // The check may repair: go on with what it left, as engram would.
        img = disk.live_image();
    }
    if let Ok(mut store) =
        Store::with_backend(SimDisk::from_image(img, 5), "fuzz", Options::default())
    {
        common::exercise(&mut store);
    }
});
