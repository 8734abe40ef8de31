//! Arbitrary text and arguments into the CLI's validation: `text::validate_line`,
//! `Block::from_str`, `validate_scope`, `validate_config`, `text::parse_time` (and the other
//! validators the CLI calls): an error or a value, never a panic; what is accepted obeys the
//! rules it was checked against.
#![no_main]

use libfuzzer_sys::fuzz_target;
use somna::store::CONFIG_NAMES;
use somna::text;
use somna::{Block, Kind, Status};

fuzz_target!(|data: &[u8]| {
    let Some((&sel, rest)) = data.split_first() else {
        return;
    };
    let s = String::from_utf8_lossy(rest);
    let max = 1 + usize::from(sel) * 17;
    if text::validate_line(&s, max).is_ok() {
        assert!(s.len() <= max && !s.trim().is_empty());
        assert!(!s.chars().any(char::is_control));
        assert_eq!(text::display_safe(&s), s);
    }
    let _ = text::display_safe(&s);
    let _ = text::json_safe(&s);
    if let Ok(b) = s.parse::<Block>() {
        assert!(b.size().is_power_of_two() && b.size() >= 2 && b.lo() % b.size() == 0);
        assert_eq!(b.to_string().parse::<Block>().expect("round trip"), b);
        let _ = (b.halves(), b.parent());
    }
    if somna::text::validate_scope(&s).is_ok() {
        assert!(!s.is_empty() && s.len() <= 128);
    }
    let name = CONFIG_NAMES[usize::from(sel) % CONFIG_NAMES.len()];
    let _ = somna::store::validate_config(name, &s);
    if let Some((n, v)) = s.split_once('=') {
        let _ = somna::store::validate_config(n, v);
    }
    if let Ok(t) = text::parse_time(&s) {
        let _ = text::date_of(t);
        let _ = text::rfc3339_of(t);
    }
    let _ = s.parse::<Kind>();
    let _ = s.parse::<Status>();
    let _ = somna::text::validate_key(&s);
    let _ = somna::session::validate_session_id(&s);
    let _ = somna::recall::compile_pattern(&s);
});
