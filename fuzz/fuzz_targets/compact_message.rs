//! Arbitrary text into `somna::session::compact_message`: an error, or compact JSON that is
//! one object and its own compaction; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(c) = somna::session::compact_message(text) {
        assert!(c.starts_with('{'));
        assert_eq!(
            somna::session::compact_message(&c).expect("compact is valid"),
            c
        );
    }
});
