//! Text rules: what a memory or summary may contain, how it is shown, and dates.

use jiff::tz::TimeZone;
use jiff::Timestamp;

use crate::error::{Error, Result};

/// Default limit on a memory's or summary's size in bytes (`ENTRY_BYTES`).
pub const DEFAULT_ENTRY_BYTES: usize = 280;
/// The largest `ENTRY_BYTES` a store may be configured with.
pub const MAX_ENTRY_BYTES: usize = 4096;

/// Characters that could forge or hide output lines, or hide text from the person reading it,
/// besides the control characters: Unicode line and paragraph separators; every bidirectional
/// control (the overrides and isolates, and the marks U+200E, U+200F and U+061C); the
/// deprecated format characters U+206A to U+206F; the interlinear annotation characters U+FFF9
/// to U+FFFB; U+FEFF; and the tag characters U+E0000 to U+E007F, which no terminal shows and
/// which can spell out a whole hidden instruction to a model.
pub(crate) fn is_forbidden_format(c: char) -> bool {
    matches!(
        c,
        '\u{061C}'
            | '\u{200E}'
            | '\u{200F}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{202A}'..='\u{202E}'
            | '\u{2066}'..='\u{2069}'
            | '\u{206A}'..='\u{206F}'
            | '\u{FEFF}'
            | '\u{FFF9}'..='\u{FFFB}'
            | '\u{E0000}'..='\u{E007F}'
    )
}

/// Whether `c` is a variation selector (U+FE00 to U+FE0F, U+E0100 to U+E01EF). One may follow a
/// character to choose its glyph; a run of them shows as nothing and can carry a hidden byte
/// string, so [`validate_line`] refuses two in a row.
fn is_variation_selector(c: char) -> bool {
    matches!(c, '\u{FE00}'..='\u{FE0F}' | '\u{E0100}'..='\u{E01EF}')
}

/// The first character of `text` that a line may not hold, with its byte offset: a control,
/// separator or forbidden format character, or the second of two variation selectors in a row.
fn first_forbidden(text: &str) -> Option<(usize, char)> {
    let mut after_selector = false;
    for (i, c) in text.char_indices() {
        let selector = is_variation_selector(c);
        if c.is_control() || is_forbidden_format(c) || (selector && after_selector) {
            return Some((i, c));
        }
        after_selector = selector;
    }
    None
}

/// Checks that `text` is a valid memory or summary line: non-blank, at most `max_bytes` UTF-8
/// bytes, no control character (C0, DEL, C1 including U+0085), no line or paragraph separator, no
/// bidirectional control, no invisible tag character and no run of variation selectors.
///
/// ```
/// use somna::text::validate_line;
/// assert!(validate_line("the build uses cargo nextest", 280).is_ok());
/// assert!(validate_line("two\nlines", 280).is_err());
/// assert!(validate_line("sep\u{2028}arated", 280).is_err());
/// assert!(validate_line("hidden\u{E0041}\u{E0042}", 280).is_err());
/// assert!(validate_line("a mark\u{200F}", 280).is_err());
/// assert!(validate_line("smuggled\u{FE01}\u{FE02}", 280).is_err());
/// assert!(validate_line("a heart \u{2764}\u{FE0F}", 280).is_ok());
/// assert!(validate_line(&"x".repeat(281), 280).is_err());
/// ```
pub fn validate_line(text: &str, max_bytes: usize) -> Result<()> {
    if text.trim().is_empty() {
        return Err(Error::invalid("text", "it is empty"));
    }
    if text.len() > max_bytes {
        let reason = format!(
            "it is {} bytes; the limit is {max_bytes} (ENTRY_BYTES)",
            text.len()
        );
        return Err(Error::invalid("text", reason));
    }
    if let Some((i, c)) = first_forbidden(text) {
        let reason = format!("it contains the character U+{:04X} at byte {i}; text must be one line without control, separator, bidirectional or invisible format characters", c as u32);
        return Err(Error::invalid("text", reason));
    }
    Ok(())
}

/// Checks a short envelope field (source, URI, idempotency key): 1 to `max_bytes` bytes with no
/// control, separator or override character.
pub fn validate_field(what: &'static str, v: &str, max_bytes: usize) -> Result<()> {
    if v.is_empty() || v.len() > max_bytes {
        return Err(Error::invalid(
            what,
            format!("must be 1 to {max_bytes} bytes"),
        ));
    }
    if let Some((_, c)) = first_forbidden(v) {
        return Err(Error::invalid(
            what,
            format!(
                "contains the character U+{:04X}; control and separator characters are not allowed",
                c as u32
            ),
        ));
    }
    Ok(())
}

/// Whether every byte is printable ASCII (0x20..=0x7E): such bytes are valid UTF-8 and
/// [`display_safe`] leaves them as they are. One unsigned compare per byte, folded without an
/// early exit so that the compiler vectorizes it.
pub(crate) fn printable_ascii(b: &[u8]) -> bool {
    b.iter()
        .fold(true, |ok, b| ok & (b.wrapping_sub(0x20) < 0x5f))
}

/// Makes stored text safe to print on one line: every control, separator or override character
/// becomes U+FFFD. Valid text is returned unchanged (borrowed).
pub fn display_safe(text: &str) -> std::borrow::Cow<'_, str> {
    // Printable ASCII, the common case, needs no per-character Unicode checks.
    if printable_ascii(text.as_bytes()) {
        return std::borrow::Cow::Borrowed(text);
    }
    if text
        .chars()
        .any(|c| c.is_control() || is_forbidden_format(c))
    {
        std::borrow::Cow::Owned(
            text.chars()
                .map(|c| {
                    if c.is_control() || is_forbidden_format(c) {
                        '\u{FFFD}'
                    } else {
                        c
                    }
                })
                .collect(),
        )
    } else {
        std::borrow::Cow::Borrowed(text)
    }
}

/// Escapes, in serialized JSON, every character that JSON allows raw but that could forge or hide
/// a line on a terminal (DEL, C1 controls, separators, overrides), as `\uXXXX`. The JSON value
/// is unchanged.
pub fn json_safe(json: &str) -> std::borrow::Cow<'_, str> {
    let bad = |c: char| (c.is_control() && c != '\n') || is_forbidden_format(c);
    if !json.chars().any(bad) {
        return std::borrow::Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 16);
    for c in json.chars() {
        if bad(c) {
            let mut buf = [0u16; 2];
            for unit in c.encode_utf16(&mut buf) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// Now, in microseconds since the epoch.
pub fn now_us() -> i64 {
    Timestamp::now().as_microsecond()
}

/// The UTC date `YYYY-MM-DD` of a timestamp in microseconds.
pub fn date_of(us: i64) -> String {
    let mut out = String::with_capacity(10);
    push_date(us, &mut out);
    out
}

/// Appends [`date_of`]`(us)` to `out` without allocating: years 1 to 9999 by the civil-from-days
/// arithmetic of the proleptic Gregorian calendar (jiff's timestamps end on 9999-12-30, before
/// the last day [`parse_time`] takes), the rest through jiff as before. A wake or recall
/// renders a date per raw line; `tests` check both paths agree on every day they share.
pub fn push_date(us: i64, out: &mut String) {
    let days = us.div_euclid(86_400_000_000);
    // 0001-01-01 and 9999-12-31, in days from 1970-01-01.
    if !(-719_162..=LAST_DAY).contains(&days) {
        out.push_str(&date_by_jiff(us));
        return;
    }
    // Howard Hinnant's civil_from_days: eras of 400 years from 0000-03-01.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let digit = |n: i64| char::from(b'0' + (n % 10) as u8);
    for n in [year / 1000, year / 100, year / 10, year] {
        out.push(digit(n));
    }
    out.push('-');
    out.push(digit(month / 10));
    out.push(digit(month));
    out.push('-');
    out.push(digit(day / 10));
    out.push(digit(day));
}

/// [`date_of`] through jiff: the dates [`push_date`]'s arithmetic leaves out, and its tests'
/// reference.
fn date_by_jiff(us: i64) -> String {
    match Timestamp::from_microsecond(us) {
        Ok(ts) => ts.to_zoned_datetime(TimeZone::UTC).date().to_string(),
        Err(_) => "????-??-??".to_string(),
    }
}

/// 9999-12-31, the last day a date may name, in days from 1970-01-01.
const LAST_DAY: i64 = 2_932_896;

/// Microseconds in a day.
const DAY_US: i64 = 86_400_000_000;

/// The RFC 3339 UTC form of a timestamp in microseconds (the end of year 9999, past jiff's
/// timestamps, too).
pub fn rfc3339_of(us: i64) -> String {
    match Timestamp::from_microsecond(us) {
        Ok(ts) => ts.to_string(),
        Err(_) if (0..=LAST_DAY).contains(&us.div_euclid(DAY_US)) => late_rfc3339(us),
        Err(_) => format!("@{us}us"),
    }
}

/// [`rfc3339_of`] for a time jiff cannot hold: `YYYY-MM-DDTHH:MM:SS[.ffffff]Z`.
fn late_rfc3339(us: i64) -> String {
    let t = us.rem_euclid(DAY_US);
    let (s, frac) = (t / 1_000_000, t % 1_000_000);
    let mut out = format!(
        "{}T{:02}:{:02}:{:02}",
        date_of(us),
        s / 3600,
        s / 60 % 60,
        s % 60
    );
    if frac > 0 {
        out.push_str(format!(".{frac:06}").trim_end_matches('0'));
    }
    out.push('Z');
    out
}

/// Midnight UTC of `date`, in microseconds (Howard Hinnant's days_from_civil): every date jiff
/// takes, the last day of year 9999 among them, which jiff's timestamps end before.
fn midnight_us(date: jiff::civil::Date) -> i64 {
    let (m, d) = (i64::from(date.month()), i64::from(date.day()));
    let y = i64::from(date.year()) - i64::from(m <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    (era * 146_097 + doe - 719_468) * DAY_US
}

/// An RFC 3339 time with an offset on a day of year 9999 that jiff's timestamps end before
/// (9999-12-30T22:00Z); `None` for anything else, or a time past the end of 9999.
fn late_time(s: &str) -> Option<i64> {
    let p = jiff::fmt::temporal::Pieces::parse(s).ok()?;
    let (date, time, offset) = (p.date(), p.time()?, p.to_numeric_offset()?);
    if date.year() != 9999 || p.time_zone_annotation().is_some() {
        return None;
    }
    let in_day = ((i64::from(time.hour()) * 60 + i64::from(time.minute())) * 60
        + i64::from(time.second()))
        * 1_000_000
        + i64::from(time.subsec_nanosecond()) / 1_000;
    let us = midnight_us(date) + in_day - i64::from(offset.seconds()) * 1_000_000;
    (us < (LAST_DAY + 1) * DAY_US).then_some(us)
}

/// Parses `YYYY-MM-DD` (midnight UTC) or an RFC 3339 timestamp into microseconds.
///
/// ```
/// use somna::text::parse_time;
/// assert_eq!(parse_time("1970-01-02").unwrap(), 86_400_000_000);
/// assert!(parse_time("2024-02-30").is_err());
/// ```
pub fn parse_time(s: &str) -> Result<i64> {
    let s = s.trim();
    if s.len() == 10 {
        let date: jiff::civil::Date = s.parse().map_err(|e| {
            Error::invalid("date", format!("{s:?} is not a real date YYYY-MM-DD: {e}"))
        })?;
        return Ok(midnight_us(date));
    }
    match s.parse::<Timestamp>() {
        Ok(ts) => Ok(ts.as_microsecond()),
        Err(e) => late_time(s).ok_or_else(|| {
            Error::invalid(
                "date",
                format!("{s:?} is neither YYYY-MM-DD nor an RFC 3339 time: {e}"),
            )
        }),
    }
}

/// `N damaged NOUNs WHOSE were skipped (L1, L2, ...); run `somna verify``, for the reads that
/// skip damaged records (recall, lossy session reads). At most 10 labels are listed.
pub(crate) fn skipped_damage(noun: &str, whose: &str, labels: &[String]) -> String {
    let n = labels.len();
    let shown: Vec<&str> = labels.iter().take(10).map(String::as_str).collect();
    format!(
        "{n} damaged {noun}{}{whose} {} skipped ({}{}); run `somna verify`",
        if n == 1 { "" } else { "s" },
        if n == 1 { "was" } else { "were" },
        shown.join(", "),
        if n > 10 { ", ..." } else { "" }
    )
}

const MAX_FIELD_BYTES: usize = 1024;

/// Checks an optional envelope field (a source, a URI): at most 1 KiB, no control characters.
pub(crate) fn validate_optional_field(what: &'static str, v: &Option<String>) -> Result<()> {
    match v {
        Some(s) => validate_field(what, s, MAX_FIELD_BYTES),
        None => Ok(()),
    }
}

/// Checks an idempotency key: 1 to 256 bytes, no control characters.
pub fn validate_key(key: &str) -> Result<()> {
    validate_field("idempotency key", key, 256)
}

/// The most scopes one request may name (`--scope a,b,...`, MCP `scopes`); `--all` is not
/// bounded by it.
pub const MAX_SCOPES: usize = 64;

/// Checks a comma-separated list of scopes: each valid, at most [`MAX_SCOPES`] of them.
pub fn validate_scopes(list: &str) -> Result<()> {
    check_scope_count(list.split(',').count())?;
    list.split(',').try_for_each(validate_scope)
}

/// Checks the scopes one request names (the library's reads over several scopes): at most
/// [`MAX_SCOPES`] of them.
pub fn check_scope_count(n: usize) -> Result<()> {
    if n > MAX_SCOPES {
        return Err(Error::invalid(
            "scope",
            format!("more than {MAX_SCOPES} scopes named; use --all, or fewer"),
        ));
    }
    Ok(())
}

/// Checks a scope name: 1 to 128 bytes of ASCII letters, digits and `_ . : / @ -`.
pub fn validate_scope(name: &str) -> Result<()> {
    if name.is_empty() || name.len() > 128 {
        return Err(Error::invalid(
            "scope",
            format!("{name:?}: must be 1 to 128 bytes"),
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "_.:/@-".contains(*c)))
    {
        let reason = format!(
            "{:?}: the character {c:?} is not allowed (use letters, digits, _ . : / @ -)",
            name.escape_debug().to_string()
        );
        return Err(Error::invalid("scope", reason));
    }
    Ok(())
}

/// The longest prefix of `s` of at most `max` bytes that ends on a character boundary (`""` when
/// the first character alone is longer).
pub fn prefix_within(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let end = (0..=max)
        .rev()
        .find(|&i| s.is_char_boundary(i))
        .unwrap_or(0);
    s.get(..end).unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_date_arithmetic_agrees_with_jiff() {
        const DAY: i64 = 86_400_000_000;
        // Every day at both ends of the fast path and across the years most stores hold (with
        // 1900, 2000 and 2100 for the century rules), then every 13th day of the whole range, at
        // midnight, a microsecond either side of it and midday; then past the range.
        let days = (-719_200..-700_000)
            .chain(-30_000..60_000)
            .chain(2_900_000..2_932_600)
            .chain((-719_162..=2_932_531).step_by(13));
        for d in days {
            for us in [d * DAY, d * DAY - 1, d * DAY + 1, d * DAY + DAY / 2] {
                assert_eq!(date_of(us), date_by_jiff(us), "{us} us");
            }
        }
        for us in [
            i64::MIN,
            i64::MAX,
            -377_705_116_800_000_001,
            253_402_300_800_000_000,
        ] {
            assert_eq!(date_of(us), date_by_jiff(us), "{us} us");
        }
        let mut s = String::from("x ");
        push_date(0, &mut s);
        assert_eq!(s, "x 1970-01-01");
    }

    #[test]
    fn every_control_and_separator_is_refused() {
        for c in (0u32..0x20)
            .chain(0x7f..0xa0)
            .chain([0x2028, 0x2029, 0x202e, 0x2066, 0xfeff])
        {
            let ch = char::from_u32(c).unwrap();
            let t = format!("a{ch}b");
            assert!(validate_line(&t, 280).is_err(), "U+{c:04X} accepted");
            assert!(!display_safe(&t).contains(ch));
        }
        assert!(validate_line("caf\u{e9} \u{1F600} ok", 280).is_ok());
        assert!(validate_line("   ", 280).is_err());
        assert!(validate_line(&"é".repeat(140), 280).is_ok());
        assert!(validate_line(&"é".repeat(141), 280).is_err());
    }

    #[test]
    fn dates() {
        assert_eq!(date_of(0), "1970-01-01");
        assert_eq!(date_of(parse_time("2024-02-29").unwrap()), "2024-02-29");
        assert!(parse_time("2023-02-29").is_err());
        assert!(parse_time("2024-01-01T10:00:00Z").is_ok());
        assert!(parse_time("yesterday").is_err());
        assert_eq!(date_of(i64::MAX), "????-??-??");
    }

    #[test]
    fn the_last_day_of_9999_parses_and_prints() {
        for d in [
            "0001-01-01",
            "1969-12-31",
            "2000-02-29",
            "9999-12-30",
            "9999-12-31",
        ] {
            let us = parse_time(d).unwrap();
            assert_eq!(date_of(us), d);
            assert_eq!(rfc3339_of(us), format!("{d}T00:00:00Z"));
        }
        let end = parse_time("9999-12-31T23:59:59.999999Z").unwrap();
        assert_eq!(end + 1, (LAST_DAY + 1) * DAY_US);
        assert_eq!(rfc3339_of(end), "9999-12-31T23:59:59.999999Z");
        assert_eq!(
            parse_time("9999-12-31T01:00:00+02:00").unwrap(),
            parse_time("9999-12-30T23:00:00Z").unwrap()
        );
        assert!(parse_time("9999-12-31T23:00:00-02:00").is_err());
        assert!(parse_time("9999-12-31T10:00:00").is_err());
        assert!(parse_time("9999-12-32").is_err());
    }

    #[test]
    fn prefix_within_never_splits_a_character() {
        assert_eq!(prefix_within("abc", 2), "ab");
        assert_eq!(prefix_within("aé", 2), "a");
        assert_eq!(prefix_within("東", 2), "");
        assert_eq!(prefix_within("東", 3), "東");
    }
}
