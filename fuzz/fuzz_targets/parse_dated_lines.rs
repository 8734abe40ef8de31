//! Arbitrary text into `somna::import::parse_dated_lines`: an error or memories that each pass
//! `validate_line`, in non-decreasing date order; never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&b, rest)) = data.split_first() else {
        return;
    };
    let entry_bytes = 16 + usize::from(b) * 16;
    let text = String::from_utf8_lossy(rest);
    if let Ok(mems) = somna::import::parse_dated_lines(&text, entry_bytes) {
        let mut last = i64::MIN;
        for m in &mems {
            somna::text::validate_line(&m.text, entry_bytes).expect("accepted text is valid");
            let t = m.observed_us.expect("dated");
            assert!(t >= last);
            last = t;
        }
    }
});
