//! Arbitrary mutations of a valid database file (byte changes at chosen offsets, and maybe a
//! truncation) into open + verify + wake and every other path: an error or a repaired store,
//! never a panic or a hang (run with `-timeout`).
//!
//! redb panics on some damaged pages (docs/reliability.md, bug 2); somna must catch each such
//! panic at the edge of its transaction and return `Error::Corrupt`. libFuzzer's panic hook
//! aborts on every panic, caught or not, so this target lets panics raised inside redb's source
//! unwind (to somna's guard); any other panic, or one of redb's that escapes somna, still
//! aborts and is reported as a crash. `SOMNA_FUZZ_INTEGRITY_FIRST=1` first opens each image with
//! redb's integrity check on open and skips what it refuses (`Options::check_on_open`).
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use somna::{Options, Store};
use somna_testkit::simdisk::SimDisk;

fn integrity_first() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var("SOMNA_FUZZ_INTEGRITY_FIRST").is_ok_and(|v| v == "1"))
}

/// Lets a panic raised in redb's own source unwind to somna's guard; any other panic goes to
/// libFuzzer's hook, which aborts.
fn let_redb_panics_unwind() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let abort = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_redb = info.location().is_some_and(|l| {
                let f = l.file();
                f.contains("vendor/redb/") || f.contains("/redb-")
            });
            if !in_redb {
                abort(info);
            }
        }));
    });
}

fuzz_target!(|data: &[u8]| {
    let_redb_panics_unwind();
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
        // The check may repair: go on with what it left, as somna would.
        img = disk.live_image();
    }
    if let Ok(mut store) =
        Store::with_backend(SimDisk::from_image(img, 5), "fuzz", Options::default())
    {
        common::exercise(&mut store);
    }
});
