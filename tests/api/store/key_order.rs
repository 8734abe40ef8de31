//! The key encoding of the storage seam (`somna::format::keys`) preserves redb's order: for
//! random keys of every key shape somna stores, inserting the typed keys into a real redb table
//! and reading them back in redb's order gives exactly the encodings sorted bytewise (`memcmp`),
//! with no two distinct keys sharing an encoding; and every encoding decodes back to its key.
//! Strings are drawn from a small alphabet with `00`, `01`, `FF`-adjacent and multi-byte
//! characters, so that prefixes, escapes and the terminator meet often; integers include 0 and
//! the maximum.
//!
//! Case count: `SOMNA_PROPTEST_CASES` (default 256) per shape, 10 shapes.

use proptest::prelude::*;
use redb::{backends::InMemoryBackend, Database, ReadableDatabase, ReadableTable, TableDefinition};
use somna::format::TableId;
use somna::format::{keys, Key};

fn cases() -> u32 {
    std::env::var("SOMNA_PROPTEST_CASES")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(256)
}

fn text() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::sample::select(vec![
            '\0',
            '\u{1}',
            'a',
            'b',
            '\u{7f}',
            'é',
            '\u{ffff}',
            '\u{10000}',
        ]),
        0..5,
    )
    .prop_map(|v| v.into_iter().collect())
}

fn n8() -> impl Strategy<Value = u8> {
    prop_oneof![Just(0u8), Just(u8::MAX), 0u8..3, any::<u8>()]
}

fn n32() -> impl Strategy<Value = u32> {
    prop_oneof![Just(0u32), Just(u32::MAX), 0u32..3, any::<u32>()]
}

fn n64() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), Just(u64::MAX), 0u64..3, any::<u64>()]
}

/// Inserts `$keys` (converted to redb's key type by `$view`) into a redb table of key type `$k`,
/// reads the table back in redb's order and compares with the sorted encodings.
macro_rules! check_shape {
    ($k:ty, $keys:expr, |$v:ident: &$t:ty| $body:expr) => {{
        #[allow(clippy::ptr_arg)]
        fn view<'a>($v: &'a $t) -> <$k as Key>::Enc<'a> {
            $body
        }
        let keys = $keys;
        let db = Database::builder()
            .create_with_backend(InMemoryBackend::new())
            .expect("db");
        let def: TableDefinition<$k, ()> = TableDefinition::new("t");
        let tx = db.begin_write().expect("write");
        {
            let mut t = tx.open_table(def).expect("table");
            for k in &keys {
                t.insert(view(k), ()).expect("insert");
            }
        }
        tx.commit().expect("commit");
        let rtx = db.begin_read().expect("read");
        let t = rtx.open_table(def).expect("table");
        let mut in_redb_order = Vec::new();
        for item in t.iter().expect("iter") {
            let (k, _) = item.expect("item");
            in_redb_order.push(keys::encode::<$k>(k.value()));
        }
        let mut sorted: Vec<Vec<u8>> = keys.iter().map(|k| keys::encode::<$k>(view(k))).collect();
        sorted.sort();
        sorted.dedup();
        prop_assert_eq!(&in_redb_order, &sorted);
        for (k, b) in keys
            .iter()
            .zip(keys.iter().map(|k| keys::encode::<$k>(view(k))))
        {
            let d = keys::decode::<$k>(TableId::Log, &b).expect("decodes");
            prop_assert_eq!(format!("{:?}", d), format!("{:?}", view(k)));
        }
    }};
}

fn config() -> ProptestConfig {
    ProptestConfig::with_cases(cases())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn str_keys(keys in prop::collection::vec(text(), 0..40)) {
        check_shape!(&'static str, keys, |k: &String| k.as_str());
    }

    #[test]
    fn u64_keys(keys in prop::collection::vec(n64(), 0..40)) {
        check_shape!(u64, keys, |k: &u64| *k);
    }

    #[test]
    fn u32_u64_keys(keys in prop::collection::vec((n32(), n64()), 0..40)) {
        check_shape!((u32, u64), keys, |k: &(u32, u64)| *k);
    }

    #[test]
    fn u32_u8_u64_keys(keys in prop::collection::vec((n32(), n8(), n64()), 0..40)) {
        check_shape!((u32, u8, u64), keys, |k: &(u32, u8, u64)| *k);
    }

    #[test]
    fn u32_u64_u32_keys(keys in prop::collection::vec((n32(), n64(), n32()), 0..40)) {
        check_shape!((u32, u64, u32), keys, |k: &(u32, u64, u32)| *k);
    }

    #[test]
    fn u32_str_keys(keys in prop::collection::vec((n32(), text()), 0..40)) {
        check_shape!((u32, &'static str), keys, |k: &(u32, String)| (k.0, k.1.as_str()));
    }

    #[test]
    fn str_u64_keys(keys in prop::collection::vec((text(), n64()), 0..40)) {
        check_shape!((&'static str, u64), keys, |k: &(String, u64)| (k.0.as_str(), k.1));
    }

    #[test]
    fn str_str_keys(keys in prop::collection::vec((text(), text()), 0..40)) {
        check_shape!(
            (&'static str, &'static str),
            keys,
            |k: &(String, String)| (k.0.as_str(), k.1.as_str())
        );
    }

    #[test]
    fn str_u8_str_keys(keys in prop::collection::vec((text(), n8(), text()), 0..40)) {
        check_shape!(
            (&'static str, u8, &'static str),
            keys,
            |k: &(String, u8, String)| (k.0.as_str(), k.1, k.2.as_str())
        );
    }

    #[test]
    fn u32_str_u64_keys(keys in prop::collection::vec((n32(), text(), n64()), 0..40)) {
        check_shape!(
            (u32, &'static str, u64),
            keys,
            |k: &(u32, String, u64)| (k.0, k.1.as_str(), k.2)
        );
    }
}

/// The example of docs/design.md, byte by byte.
#[test]
fn the_documented_example() {
    assert_eq!(
        keys::encode::<(&str, u64)>(("s1", 7)),
        [0x73, 0x31, 0, 0, 0, 0, 0, 0, 0, 0, 0, 7]
    );
    assert_eq!(
        keys::encode::<(&str, u8, &str)>(("a\0b", 1, "x")),
        [0x61, 0, 0xFF, 0x62, 0, 0, 1, 0x78]
    );
    assert_eq!(
        keys::encode::<(u32, u64)>((1, 2)),
        [0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2]
    );
}

/// Bytes that are no encoding of the shape are refused, never a panic.
#[test]
fn malformed_keys_are_refused() {
    assert!(<(u32, u64) as Key>::decode(&[0, 0, 0, 1, 0]).is_none());
    assert!(<(u32, u64) as Key>::decode(&[0; 13]).is_none());
    assert!(<(&str, u64) as Key>::decode(&[0x61, 0, 0x05, 0, 0]).is_none());
    assert!(<(&str, u64) as Key>::decode(&[0x61]).is_none());
    assert!(<&str as Key>::decode(&[0xFF, 0xFE]).is_none());
    assert!(keys::decode::<u64>(TableId::Audit, &[1, 2]).is_err());
}
