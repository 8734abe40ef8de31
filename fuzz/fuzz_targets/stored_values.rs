//! Arbitrary bytes as a stored value: a real store is opened with raw redb, one value of a
//! chosen table is replaced by the input (or its row removed), and the store is then used
//! through somna: every read and write path and `verify` must return a result, never panic.
//! This reaches the decoders of the crate-private values (scope counters, idempotency entries,
//! session records) that `decode_values` cannot name, and the session chunks of store format 3
//! (the base image is written by this build; its format-2 session tables are empty).
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;
use redb::{self, ReadableTable, ReadableTableMetadata, TableDefinition};
use somna::format as schema;
use somna::{Options, Store};
use somna_testkit::simdisk::SimDisk;

fn change<K: redb::Key + 'static>(
    w: &redb::WriteTransaction,
    def: TableDefinition<K, &'static [u8]>,
    pick: usize,
    remove: bool,
    value: &[u8],
) -> Result<(), redb::Error> {
    let mut t = w.open_table(def)?;
    let n = t.len()? as usize;
    if n == 0 {
        return Ok(());
    }
    let key: Vec<u8> = {
        let Some(item) = t.iter()?.nth(pick % n) else {
            return Ok(());
        };
        let (k, _) = item?;
        let value = k.value();
        let bytes = K::as_bytes(&value).as_ref().to_vec();
        bytes
    };
    if remove {
        t.remove(K::from_bytes(&key))?;
    } else {
        t.insert(K::from_bytes(&key), value)?;
    }
    Ok(())
}

fuzz_target!(|data: &[u8]| {
    if data.len() < 2 {
        return;
    }
    let (table, pick, value) = (data[0], data[1], &data[2..]);
    let remove = pick & 0x80 != 0;
    let pick = usize::from(pick & 0x7f);
    let disk = SimDisk::from_image(common::base_image().to_vec(), 2);
    {
        let mut b = redb::Database::builder();
        b.set_concurrency_mode(redb::ConcurrencyMode::MultiWriter);
        let db = b.create_with_backend(disk.clone()).expect("raw open");
        let w = db.begin_write().expect("write");
        let r = match table % 12 {
            0 => change(&w, schema::META, pick, remove, value),
            1 => change(&w, schema::CONFIG, pick, remove, value),
            2 => change(&w, schema::SCOPES, pick, remove, value),
            3 => change(&w, schema::LOG, pick, remove, value),
            4 => change(&w, schema::TREE, pick, remove, value),
            5 => change(&w, schema::IDEMPOTENCY, pick, remove, value),
            6 => change(&w, schema::SESSIONS, pick, remove, value),
            7 => change(&w, schema::SESSION_MESSAGES, pick, remove, value),
            8 => change(&w, schema::SESSION_HASHES, pick, remove, value),
            9 => change(&w, schema::SESSION_ARCHIVE, pick, remove, value),
            10 => change(&w, schema::SESSION_CHUNKS, pick, remove, value),
            _ => change(&w, schema::SESSION_IDEMPOTENCY, pick, remove, value),
        };
        r.expect("change a value");
        w.commit().expect("commit");
    }
    let image = disk.live_image();
    if let Ok(mut store) =
        Store::with_backend(SimDisk::from_image(image, 3), "fuzz", Options::default())
    {
        common::exercise(&mut store);
    }
});
