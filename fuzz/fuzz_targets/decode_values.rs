//! Arbitrary bytes into `somna::format::decode` for every value type a caller can name: never
//! a panic, and a value that decodes re-encodes to the same bytes (the envelope is canonical).
#![no_main]

use libfuzzer_sys::fuzz_target;
use serde::de::DeserializeOwned;
use serde::Serialize;
use somna::format::{decode, encode, Chunk};
use somna::session::{Archived, SessionAppended};
use somna::{BuiltFrom, Kind, Memory, Status, Summary};

fn check<T: DeserializeOwned + Serialize>(bytes: &[u8]) {
    if let Ok(v) = decode::<T>("fuzz", &"key", bytes) {
        let again = encode(&v).expect("a decoded value encodes");
        // postcard varints may be non-canonical on input; the round trip must decode equal.
        let back: T = decode("fuzz", &"key", &again).expect("re-encoded bytes decode");
        assert_eq!(encode(&back).expect("encode"), again);
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&which, bytes)) = data.split_first() else {
        return;
    };
    match which % 14 {
        0 => check::<Memory>(bytes),
        1 => check::<Summary>(bytes),
        2 => check::<BuiltFrom>(bytes),
        3 => check::<Kind>(bytes),
        4 => check::<Status>(bytes),
        5 => check::<Archived>(bytes),
        6 => check::<SessionAppended>(bytes),
        7 => check::<u32>(bytes),
        8 => check::<u64>(bytes),
        9 => check::<i64>(bytes),
        10 => check::<String>(bytes),
        11 => check::<[u8; 16]>(bytes),
        12 => check::<Chunk>(bytes),
        _ => check::<Vec<u64>>(bytes),
    }
});
