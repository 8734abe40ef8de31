//! Hostile input never gets into the store and never gets out of it: every C0 control
//! character, DEL, every C1 character (U+0085 included), the Unicode line and paragraph
//! separators, every bidirectional control (overrides, isolates and marks), the tag characters,
//! runs of variation selectors, invalid UTF-8, empty text and text over
//! the byte limit are each refused by every way in (`note`, `note -`, `nap`, `nap --apply`,
//! `import`, `import --jsonl`, envelope fields), with one clear line on stderr, a non-zero exit
//! and nothing written. And no line any command prints carries such a character from stored
//! data, so stored text cannot forge or hide output lines.

use std::process::Command;

use crate::common::{Env, Raw as Run};

/// What these tests run besides [`Env`]'s shared helpers: raw runs, and the refusal check.
trait HostileEnv {
    fn run_with(&self, c: Command, input: Option<&[u8]>) -> Run;
    fn run(&self, args: &[&str], input: Option<&[u8]>) -> Run;
    fn refused(&self, what: &str, r: &Run);
}

impl HostileEnv for Env {
    fn run_with(&self, c: Command, input: Option<&[u8]>) -> Run {
        crate::common::run_raw(c, input)
    }

    fn run(&self, args: &[&str], input: Option<&[u8]>) -> Run {
        let mut c = self.cmd();
        c.args(args);
        self.run_with(c, input)
    }

    /// Asserts that a run was refused cleanly: a non-zero exit (not a crash), nothing on stdout,
    /// exactly one line on stderr, itself free of hostile characters.
    fn refused(&self, what: &str, r: &Run) {
        if let Err(m) = check_refused(what, r) {
            panic!("{m}");
        }
    }
}

/// Whether a run was refused cleanly (see [`Env::refused`]); the problem if not.
fn check_refused(what: &str, r: &Run) -> Result<(), String> {
    if r.code == 0 || r.code == 70 || r.code == 101 || r.code < 0 {
        return Err(format!("{what}: exit {} ({r:?})", r.code));
    }
    if !r.out.is_empty() {
        return Err(format!("{what}: printed {r:?}"));
    }
    let err = String::from_utf8(r.err.clone()).map_err(|_| format!("{what}: stderr not UTF-8"))?;
    if !err.starts_with("somna: ") || !err.ends_with('\n') || err.lines().count() != 1 {
        return Err(format!("{what}: not one `somna: ` line on stderr: {err:?}"));
    }
    if let Some(c) = err.trim_end_matches('\n').chars().find(|c| is_hostile(*c)) {
        return Err(format!("{what}: stderr carries U+{:04X}", c as u32));
    }
    Ok(())
}

/// Every character somna must refuse in a memory or a summary.
fn hostile_chars() -> Vec<char> {
    (0u32..0x20)
        .chain([0x7f])
        .chain(0x80..0xa0)
        .chain([0x2028, 0x2029])
        .chain(0x202a..=0x202e)
        .chain(0x2066..=0x2069)
        // The bidirectional marks, and tag characters (which can spell a hidden instruction).
        .chain([0x200e, 0x200f, 0x061c, 0xfeff, 0xe0001, 0xe0041, 0xe007f])
        .map(|c| char::from_u32(c).expect("char"))
        .collect()
}

fn is_hostile(c: char) -> bool {
    (c.is_control() && c != '\n')
        || matches!(
            c,
            '\u{2028}'
                | '\u{2029}'
                | '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{061C}'
                | '\u{E0000}'..='\u{E007F}'
        )
}

/// The first problem with an output: not UTF-8, or a line that carries a control, separator or
/// override character (only `\n` ends lines).
fn unclean(out: &[u8]) -> Option<String> {
    let s = match std::str::from_utf8(out) {
        Ok(s) => s,
        Err(e) => return Some(format!("output not UTF-8: {e}")),
    };
    for (n, line) in s.split('\n').enumerate() {
        if let Some(c) = line.chars().find(|c| is_hostile(*c)) {
            let shown: String = line.chars().take(120).collect();
            return Some(format!(
                "output line {} carries U+{:04X}: {shown:?}",
                n + 1,
                c as u32
            ));
        }
    }
    None
}

fn count(e: &Env) -> u64 {
    let j: serde_json::Value = serde_json::from_str(&e.ok(&["stats", "--json"])).expect("json");
    j["memories"].as_u64().expect("memories")
}

#[test]
fn every_hostile_character_is_refused_by_note_and_note_stdin() {
    let e = Env::init();
    e.ok(&["note", "a harmless first memory"]);
    let before = e.export();
    for c in hostile_chars() {
        let text = format!("before{c}after");
        let what = format!("note with U+{:04X}", c as u32);
        // NUL cannot be passed as an argument; every other character is tried both ways.
        if c != '\0' {
            let r = e.run(&["note", &text], None);
            e.refused(&what, &r);
        }
        let r = e.run(&["note", "-"], Some(format!("{text}\n").as_bytes()));
        e.refused(&format!("{what} on stdin"), &r);
    }
    // The character at the very start and end of the text too.
    for c in ['\u{1b}', '\u{85}', '\u{2028}', '\u{202e}', '\t', '\r'] {
        for text in [format!("{c}start"), format!("end{c}")] {
            let r = e.run(&["note", &text], None);
            e.refused(&format!("note {text:?}"), &r);
        }
    }
    assert_eq!(e.export(), before, "a hostile note was written");
    assert_eq!(count(&e), 1);
}

#[test]
fn invalid_utf8_is_refused() {
    let e = Env::init();
    let before = e.export();
    let cases: &[&[u8]] = &[
        b"bad \xff byte\n",
        b"lone \x80 continuation\n",
        b"overlong \xc0\x80 nul\n",
        b"surrogate \xed\xa0\x80 half\n",
        b"truncated \xe2\x82",
        b"\xfe\xfe\n",
        b"latin-1 caf\xe9\n",
    ];
    for bytes in cases {
        let r = e.run(&["note", "-"], Some(bytes));
        e.refused(&format!("note - {bytes:?}"), &r);
        let err = String::from_utf8_lossy(&r.err);
        assert!(err.contains("UTF-8"), "{err}");
    }
    // Invalid UTF-8 in an argument is refused too (by the argument parser).
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let mut c = e.cmd();
        c.arg("note")
            .arg(std::ffi::OsStr::from_bytes(b"bad \xff argument"));
        let r = e.run_with(c, None);
        assert_ne!(r.code, 0, "{r:?}");
        assert!(r.out.is_empty());
        assert!(String::from_utf8_lossy(&r.err).contains("UTF-8"), "{r:?}");
    }
    assert_eq!(e.export(), before);
    assert_eq!(count(&e), 0);
}

#[test]
fn size_limits_are_enforced_in_bytes() {
    let e = Env::init();
    let before = e.export();
    // 281 bytes is refused by default, whether ASCII or multi-byte, argument or stdin.
    let ascii = "a".repeat(281);
    let multi = format!("{}a", "\u{e9}".repeat(140));
    assert_eq!(multi.len(), 281);
    for t in [&ascii, &multi] {
        let r = e.run(&["note", t], None);
        e.refused("281 bytes", &r);
        assert!(String::from_utf8_lossy(&r.err).contains("281"), "{r:?}");
        let r = e.run(&["note", "-"], Some(t.as_bytes()));
        e.refused("281 bytes on stdin", &r);
    }
    assert_eq!(e.export(), before);
    // 280 bytes is fine.
    e.ok(&["note", &"\u{e9}".repeat(140)]);
    e.ok(&["note", &"b".repeat(280)]);
    // With ENTRY_BYTES=4096, 4096 bytes is accepted and 4097 is not.
    e.ok(&["config", "ENTRY_BYTES=4096"]);
    let before = e.export();
    let r = e.run(&["note", &"c".repeat(4097)], None);
    e.refused("4097 bytes", &r);
    let r = e.run(&["note", "-"], Some("c".repeat(4097).as_bytes()));
    e.refused("4097 bytes on stdin", &r);
    let euros = format!("{}cc", "\u{20ac}".repeat(1365));
    assert_eq!(euros.len(), 4097);
    let r = e.run(&["note", &euros], None);
    e.refused("4097 bytes of euro signs", &r);
    assert_eq!(e.export(), before);
    e.ok(&["note", &"d".repeat(4096)]);
    assert_eq!(count(&e), 3);
    // The limit cannot be raised past 4096.
    let r = e.run(&["config", "ENTRY_BYTES=4097"], None);
    e.refused("ENTRY_BYTES=4097", &r);
}

#[test]
fn empty_and_blank_text_is_refused() {
    let e = Env::init();
    let before = e.export();
    for t in ["", " ", "   "] {
        let r = e.run(&["note", t], None);
        e.refused(&format!("note {t:?}"), &r);
    }
    for input in [&b""[..], b"\n", b"\r\n", b"   \n"] {
        let r = e.run(&["note", "-"], Some(input));
        e.refused(&format!("note - {input:?}"), &r);
    }
    assert_eq!(e.export(), before);
    assert_eq!(count(&e), 0);
}

#[test]
fn hostile_summaries_and_imports_are_refused_and_write_nothing() {
    let e = Env::init();
    for i in 0..4 {
        e.ok(&["note", &format!("plain memory {i}")]);
    }
    let before = e.export();
    let sample = [
        '\0', '\n', '\r', '\t', '\u{1b}', '\u{7f}', '\u{85}', '\u{9b}', '\u{2028}', '\u{2029}',
        '\u{202e}', '\u{2067}',
    ];
    for c in sample {
        let text = format!("sum{c}mary");
        let what = format!("U+{:04X}", c as u32);
        if c != '\0' {
            let r = e.run(&["nap", "0-1", &text], None);
            e.refused(&format!("nap with {what}"), &r);
        }
        let r = e.run(&["nap", "0-1", "-"], Some(format!("{text}\n").as_bytes()));
        e.refused(&format!("nap - with {what}"), &r);
        let f = e.file("batch.tsv", format!("0-1\tclean\n2-3\t{text}\n").as_bytes());
        let r = e.run(&["nap", "--apply", &f], None);
        e.refused(&format!("nap --apply with {what}"), &r);
        let f = e.file(
            "lines.txt",
            format!("2024-01-01 clean\n2024-01-02 {text}\n").as_bytes(),
        );
        let r = e.run(&["import", &f], None);
        e.refused(&format!("import with {what}"), &r);
        let esc = format!("\\u{:04x}", c as u32);
        let jsonl = format!(
            "{{\"type\":\"memory\",\"scope\":\"j\",\"id\":0,\"observed_us\":0,\"recorded_us\":0,\"text\":\"a{esc}b\",\"kind\":\"Observation\",\"status\":\"Accepted\",\"source\":null,\"source_uri\":null,\"supersedes\":[],\"conflicts_with\":[],\"valid_until_us\":null}}\n"
        );
        let f = e.file("import.jsonl", jsonl.as_bytes());
        let r = e.run(&["import", "--jsonl", &f], None);
        e.refused(&format!("import --jsonl with {what}"), &r);
    }
    let r = e.run(&["nap", "0-1", &"s".repeat(281)], None);
    e.refused("281-byte summary", &r);
    let r = e.run(&["nap", "0-1", ""], None);
    e.refused("empty summary", &r);
    assert_eq!(e.export(), before, "something hostile was written");
}

#[test]
fn hostile_envelope_fields_are_refused_by_every_way_in() {
    let e = Env::init();
    let before = e.export();
    let mut problems = Vec::new();
    let chars = [
        '\u{1}', '\u{1b}', '\u{7f}', '\u{85}', '\u{2028}', '\u{2029}', '\u{202e}', '\u{2066}',
    ];
    for (n, c) in chars.into_iter().enumerate() {
        let v = format!("x{c}y");
        let what = format!("U+{:04X}", c as u32);
        // An idempotency key is never printed raw, so only control characters are refused there.
        let flags: &[&str] = if c.is_control() {
            &["--source", "--uri", "--key"]
        } else {
            &["--source", "--uri"]
        };
        for flag in flags {
            let r = e.run(&["note", flag, &v, "plain text"], None);
            problems.extend(check_refused(&format!("note {flag} with {what}"), &r).err());
        }
        let esc = format!("\\u{:04x}", c as u32);
        for (field, other) in [("source", "source_uri"), ("source_uri", "source")] {
            // A scope of its own each time, so that one wrongly accepted import cannot make
            // the next one fail for another reason.
            let jsonl = format!(
                "{{\"type\":\"memory\",\"scope\":\"j{n}{field}\",\"id\":0,\"observed_us\":0,\"recorded_us\":0,\"text\":\"plain\",\"kind\":\"Observation\",\"status\":\"Accepted\",\"{field}\":\"a{esc}b\",\"{other}\":null,\"supersedes\":[],\"conflicts_with\":[],\"valid_until_us\":null}}\n"
            );
            let f = e.file("env.jsonl", jsonl.as_bytes());
            let r = e.run(&["import", "--jsonl", &f], None);
            problems
                .extend(check_refused(&format!("import --jsonl {field} with {what}"), &r).err());
        }
    }
    assert!(
        problems.is_empty(),
        "{} hostile envelopes accepted:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert_eq!(e.export(), before, "a hostile envelope was written");
}

#[test]
fn hostile_scope_names_are_refused() {
    let e = Env::init();
    let before = e.export();
    for c in ['\u{1b}', '\n', '\u{85}', '\u{2028}', '\u{202e}', ' '] {
        let scope = format!("s{c}x");
        let r = e.run(&["--scope", &scope, "note", "plain"], None);
        e.refused(&format!("scope with U+{:04X}", c as u32), &r);
        let mut cmd = e.cmd();
        cmd.env("SOMNA_SCOPE", &scope).args(["note", "plain"]);
        let r = e.run_with(cmd, None);
        e.refused(&format!("SOMNA_SCOPE with U+{:04X}", c as u32), &r);
    }
    assert_eq!(e.export(), before);
}

#[test]
fn no_output_line_carries_a_hostile_character() {
    let e = Env::init();
    // Try every way in with hostile bytes, then some clean data beside them.
    let hostile: String = hostile_chars().into_iter().filter(|c| *c != '\0').collect();
    let _ = e.run(&["note", &format!("h{hostile}h")], None);
    let _ = e.run(
        &["note", "--source", &hostile, "--uri", &hostile, "src"],
        None,
    );
    let _ = e.run(&["note", "-"], Some(format!("h{hostile}\0h").as_bytes()));
    let esc: String = hostile_chars()
        .into_iter()
        .map(|c| format!("\\u{:04x}", c as u32))
        .collect();
    // Hostile text in an export line; hostile envelope fields beside clean text.
    let line = |scope: &str, text: &str, source: &str| {
        format!(
            "{{\"type\":\"memory\",\"scope\":\"{scope}\",\"id\":0,\"observed_us\":0,\"recorded_us\":0,\"text\":\"{text}\",\"kind\":\"Observation\",\"status\":\"Accepted\",\"source\":\"{source}\",\"source_uri\":\"{source}\",\"supersedes\":[],\"conflicts_with\":[],\"valid_until_us\":null}}\n"
        )
    };
    let f = e.file(
        "h1.jsonl",
        line("default", &format!("j{esc}"), "s").as_bytes(),
    );
    let _ = e.run(&["import", "--jsonl", &f], None);
    let f = e.file("h2.jsonl", line("env", "clean text", &esc).as_bytes());
    let _ = e.run(&["import", "--jsonl", &f], None);
    // Separators and overrides are not control characters, but forge lines just the same.
    let seps = "\u{2028}\u{2029}\u{202e}\u{2066}";
    let _ = e.run(
        &[
            "--scope", "seps", "note", "--source", seps, "--uri", seps, "src",
        ],
        None,
    );
    for i in 0..6 {
        e.ok(&["note", &format!("clean memory {i} caf\u{e9} \u{1F600}")]);
    }
    let _ = e.run(&["nap", "0-1", &format!("s{hostile}s")], None);
    e.ok(&["nap", "0-1", "clean summary"]);
    let f = e.file("b.tsv", format!("2-3\tx{hostile}\n").as_bytes());
    let _ = e.run(&["nap", "--apply", &f], None);
    let f = e.file("l.txt", format!("2024-01-01 l{hostile}\n").as_bytes());
    let _ = e.run(&["import", &f], None);

    let commands: &[&[&str]] = &[
        &["wake"],
        &["wake", "--lines", "2"],
        &["wake", "--json"],
        &["--scope", "env", "wake", "--json"],
        &["zoom", "0-3"],
        &["zoom", "0-3", "--json"],
        &["recall", "."],
        &["recall", ".", "--json"],
        &["--scope", "env", "recall", ".", "--json"],
        &["--scope", "seps", "wake", "--json"],
        &["--scope", "seps", "recall", ".", "--json"],
        &["pending"],
        &["nap"],
        &["nap", "--batch", "4"],
        &["nap", "--batch", "4", "--json"],
        &["stats"],
        &["stats", "--json"],
        &["verify"],
        &["verify", "--json"],
        &["config"],
        &["export"],
    ];
    let mut problems = Vec::new();
    for args in commands {
        let r = e.run(args, None);
        assert_eq!(r.code, 0, "somna {args:?}: {r:?}");
        for (stream, bytes) in [("stdout", &r.out), ("stderr", &r.err)] {
            if let Some(p) = unclean(bytes) {
                problems.push(format!("somna {args:?} {stream}: {p}"));
            }
        }
    }
    // Errors that echo what the user typed are clean too.
    for args in [
        &["recall", &format!("({hostile}")][..],
        &["zoom", &format!("0-{hostile}")],
        &["config", &format!("X{hostile}=1")],
        &["config", &format!("RAW_MAX={hostile}")],
        &["recall", "a", "--since", &format!("2024{hostile}")],
        &["recall", "a", "--kind", &hostile],
        &["note", "--kind", &hostile, "text"],
        &["--scope", &hostile, "wake"],
    ] {
        let r = e.run(args, None);
        assert_ne!(r.code, 0);
        if let Some(p) = unclean(&r.err) {
            problems.push(format!("somna {args:?} stderr: {p}"));
        }
    }
    assert!(
        problems.is_empty(),
        "{} outputs carry hostile characters:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

/// A run of variation selectors (a hidden byte string: each selector shows as nothing) is
/// refused, while one selector after a character, as in an emoji, is kept (issue 52, point 9).
#[test]
fn a_run_of_variation_selectors_is_refused_and_one_is_kept() {
    let e = Env::init();
    for text in ["hidden\u{FE00}\u{FE01}", "x\u{E0100}\u{E0101}\u{E0102}"] {
        let r = e.run(&["note", text], None);
        e.refused(&format!("note {text:?}"), &r);
    }
    e.ok(&["note", "the deploy went fine \u{2764}\u{FE0F}"]);
    assert_eq!(count(&e), 1);
}

/// A key split by a zero-width space reads whole to a person: the secret check refuses it as
/// it refuses the plain key (issue 52, point 9).
#[test]
fn a_key_split_by_an_invisible_character_is_refused_as_a_secret() {
    let e = Env::init();
    for text in [
        "key AKIA\u{200B}IOSFODNN7EXAMPLE",
        "key \u{FF21}KIAIOSFODNN7EXAMPLE",
    ] {
        let r = e.run(&["note", text], None);
        e.refused(&format!("note {text:?}"), &r);
        let err = String::from_utf8_lossy(&r.err);
        assert!(err.contains("AWS access key"), "{err}");
    }
    assert_eq!(count(&e), 0);
}
