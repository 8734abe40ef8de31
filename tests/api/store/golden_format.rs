//! Guards the on-disk value format (store format 1, value version 1). Every value somna stores is
//! a version byte, a postcard payload and a little-endian CRC32 of the payload, and the payload's
//! layout is fixed by the field order of the types in `src/record.rs`; docs/design.md specifies
//! it byte by byte. The first tests pin the exact bytes `somna::format::encode` produces for fixed
//! values (and that they decode back), so that reordering a field, changing a field's type,
//! inserting an enum variant or swapping the serializer fails here. The last test opens a copy of
//! `tests/fixtures/format1.redb`, a real store written by the format-1 code and committed, and
//! checks that this build still reads it exactly: counts, texts, envelopes, summaries, pending
//! blocks, wake and recall output, idempotency keys, raw value bytes, and a clean `verify()`.
//!
//! Never regenerate `format1.redb` to make this test pass: a store written by an older somna must
//! stay readable. A new format gets a new fixture (`format2.redb`) next to this one.

use std::path::{Path, PathBuf};

use redb::ReadableDatabase;
use somna::format::{decode, encode, VALUE_VERSION};
use somna::format::{CONFIG, LOG, META, SCOPES, STORE_FORMAT, TREE};
use somna::{
    BuiltFrom, Error, Kind, Memory, NewMemory, RecallQuery, Status, Store, Summary, WakeOptions,
};

/// A memory that exercises every field and both varint widths: a two-byte id, a negative and a
/// zero timestamp (zigzag), multi-byte UTF-8 text, the last enum variants, a `Some` and a `None`,
/// a vector with a two-byte element and an empty one.
fn golden_memory() -> Memory {
    Memory {
        id: 300,
        observed_us: 1_714_521_600_000_000,
        recorded_us: -1,
        text: "h\u{e9}llo w\u{f6}rld".into(),
        kind: Kind::Task,
        status: Status::Retracted,
        source: Some("user:alice".into()),
        source_uri: None,
        supersedes: vec![1, 128],
        conflicts_with: vec![],
        valid_until_us: Some(0),
    }
}

#[rustfmt::skip]
const GOLDEN_MEMORY: [u8; 52] = [
    0x01,                                           // value version 1
    0xac, 0x02,                                     // id 300 (varint)
    0x80, 0x80, 0xec, 0xae, 0xa5, 0xd6, 0x8b, 0x06, // observed_us 1714521600000000 (zigzag varint)
    0x01,                                           // recorded_us -1 (zigzag 1)
    0x0d,                                           // text: 13 bytes
    0x68, 0xc3, 0xa9, 0x6c, 0x6c, 0x6f, 0x20, 0x77, 0xc3, 0xb6, 0x72, 0x6c, 0x64,
    0x04,                                           // kind: Task (variant 4)
    0x04,                                           // status: Retracted (variant 4)
    0x01, 0x0a,                                     // source: Some, 10 bytes
    0x75, 0x73, 0x65, 0x72, 0x3a, 0x61, 0x6c, 0x69, 0x63, 0x65,
    0x00,                                           // source_uri: None
    0x02, 0x01, 0x80, 0x01,                         // supersedes: 2 ids, 1 and 128
    0x00,                                           // conflicts_with: empty
    0x01, 0x00,                                     // valid_until_us: Some(0)
    0x4f, 0xdc, 0x43, 0xad,                         // CRC32 of bytes 1..48, little-endian
];

#[test]
fn a_memory_encodes_to_the_golden_bytes_and_back() {
    let m = golden_memory();
    let bytes = encode(&m).unwrap();
    assert_eq!(bytes, GOLDEN_MEMORY, "the Memory wire format changed");
    let back: Memory = decode("log", &"golden", &GOLDEN_MEMORY).unwrap();
    assert_eq!(back, m);
}

#[test]
fn a_minimal_memory_is_seventeen_bytes() {
    let m = Memory {
        id: 0,
        observed_us: 0,
        recorded_us: 0,
        text: "x".into(),
        kind: Kind::Observation,
        status: Status::Accepted,
        source: None,
        source_uri: None,
        supersedes: vec![],
        conflicts_with: vec![],
        valid_until_us: None,
    };
    #[rustfmt::skip]
    let want = [
        0x01, 0x00, 0x00, 0x00, 0x01, 0x78, 0x01, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x18, 0x80, 0x30, 0x7e,
    ];
    assert_eq!(encode(&m).unwrap(), want);
    assert_eq!(decode::<Memory>("log", &"min", &want).unwrap(), m);
}

#[test]
fn enum_discriminants_follow_declaration_order() {
    for (i, k) in Kind::ALL.iter().enumerate() {
        assert_eq!(postcard::to_allocvec(k).unwrap(), [i as u8], "{k}");
    }
    for (i, s) in Status::ALL.iter().enumerate() {
        assert_eq!(postcard::to_allocvec(s).unwrap(), [i as u8], "{s}");
    }
    let names: Vec<&str> = Kind::ALL.iter().map(|k| k.as_str()).collect();
    assert_eq!(
        names,
        ["statement", "observation", "inference", "decision", "task"]
    );
    let names: Vec<&str> = Status::ALL.iter().map(|s| s.as_str()).collect();
    assert_eq!(
        names,
        [
            "proposed",
            "accepted",
            "superseded",
            "deprecated",
            "retracted"
        ]
    );
}

#[test]
fn summaries_encode_to_the_golden_bytes() {
    let children = Summary {
        text: "two halves".into(),
        written_us: 1_700_000_000_000_000,
        built_from: BuiltFrom::Children {
            left_written_us: 1_690_000_000_000_000,
            right_written_us: -5,
        },
        inputs_crc: u32::MAX,
    };
    #[rustfmt::skip]
    let want = [
        0x01,                                                       // version
        0x0a, 0x74, 0x77, 0x6f, 0x20, 0x68, 0x61, 0x6c, 0x76, 0x65, 0x73, // "two halves"
        0x80, 0x80, 0xf2, 0x81, 0x83, 0x89, 0x85, 0x06,             // written_us
        0x01,                                                       // BuiltFrom::Children
        0x80, 0x80, 0xdd, 0x9a, 0xf9, 0xc2, 0x80, 0x06,             // left_written_us
        0x09,                                                       // right_written_us -5
        0xff, 0xff, 0xff, 0xff, 0x0f,                               // inputs_crc u32::MAX
        0x94, 0x5e, 0x37, 0xec,                                     // CRC32
    ];
    assert_eq!(encode(&children).unwrap(), want);
    assert_eq!(decode::<Summary>("tree", &"s", &want).unwrap(), children);

    let imported = Summary {
        text: "imported".into(),
        written_us: 0,
        built_from: BuiltFrom::Imported,
        inputs_crc: 0,
    };
    #[rustfmt::skip]
    let want = [
        0x01, 0x08, 0x69, 0x6d, 0x70, 0x6f, 0x72, 0x74, 0x65, 0x64, 0x00, 0x02, 0x00,
        0x10, 0x92, 0xd5, 0xb7,
    ];
    assert_eq!(encode(&imported).unwrap(), want);
    let raw = Summary {
        built_from: BuiltFrom::Raw,
        ..imported
    };
    assert_eq!(
        encode(&raw).unwrap()[10],
        0x00,
        "BuiltFrom::Raw is variant 0"
    );
}

#[test]
fn settings_and_meta_values_are_enveloped_varints() {
    assert_eq!(VALUE_VERSION, 1);
    // Format 2 added the search index (docs/design.md, section 12), format 3 the session chunks
    // (section 13), format 4 the commit journal beside the file (section "Commit journal"),
    // format 5 commits published without a sync in redb's header (section 14.9), format 6 the
    // embedder's vectors (section 12.7), format 7 the count of vector rewrites (section 12.8);
    // the layouts of the values that were there did not move.
    assert_eq!(STORE_FORMAT, 7);
    // `format` = 1u32, `RAW_MAX` = 32u64: one varint byte each.
    assert_eq!(encode(&1u32).unwrap(), [0x01, 0x01, 0x1b, 0xdf, 0x05, 0xa5]);
    assert_eq!(encode(&2u32).unwrap(), [0x01, 0x02, 0xa1, 0x8e, 0x0c, 0x3c]);
    assert_eq!(encode(&3u32).unwrap(), [0x01, 0x03, 0x37, 0xbe, 0x0b, 0x4b]);
    assert_eq!(encode(&4u32).unwrap(), [0x01, 0x04, 0x94, 0x2b, 0x6f, 0xd5]);
    assert_eq!(encode(&5u32).unwrap(), [0x01, 0x05, 0x02, 0x1b, 0x68, 0xa2]);
    assert_eq!(encode(&6u32).unwrap(), [0x01, 0x06, 0xb8, 0x4a, 0x61, 0x3b]);
    assert_eq!(encode(&7u32).unwrap(), [0x01, 0x07, 0x2e, 0x7a, 0x66, 0x4c]);
    assert_eq!(
        encode(&32u64).unwrap(),
        [0x01, 0x20, 0x45, 0xcf, 0x6c, 0xe9]
    );
    assert_eq!(
        encode(&300u64).unwrap()[..3],
        [0x01, 0xac, 0x02],
        "u64 is a LEB128 varint"
    );
}

#[test]
fn a_damaged_envelope_is_a_typed_error() {
    let mut bad = GOLDEN_MEMORY;
    bad[0] = 2;
    let e = decode::<Memory>("log", &"k", &bad).unwrap_err();
    assert!(e.to_string().contains("unknown value version 2"), "{e}");
    let mut bad = GOLDEN_MEMORY;
    bad[20] ^= 0x20;
    assert!(matches!(
        decode::<Memory>("log", &"k", &bad),
        Err(Error::Corrupt { table: "log", .. })
    ));
    // A valid envelope around bytes that are not a Memory.
    let not_a_memory = encode(&(1u8, 2u8)).unwrap();
    assert!(matches!(
        decode::<Memory>("log", &"k", &not_a_memory),
        Err(Error::Corrupt { .. })
    ));
    // Trailing bytes inside the envelope are refused too.
    let longer = encode(&(golden_memory(), 7u8)).unwrap();
    let e = decode::<Memory>("log", &"k", &longer).unwrap_err();
    assert!(e.to_string().contains("1 trailing bytes"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// The committed store.

const FIXTURE: &str = "tests/fixtures/format1.redb";
const ACME: &str = "project:acme";

const DEFAULT_TEXTS: [&str; 14] = [
    "the user prefers small commits",
    "deploys go through the staging branch",
    "ci runs cargo nextest, not cargo test",
    "the api server lives in crates/api",
    "use jiff for dates, never chrono",
    "the release checklist is RELEASING.md",
    "flaky test: net::retry under load",
    "fixed net::retry by raising its timeout to 5 s",
    "postgres 16 in production, 15 in staging",
    "the user wants answers without preamble",
    "benchmarks run on the quiet machine only",
    "no unsafe code outside the ffi crate",
    "migrate the ci cache to the new bucket",
    "staging runs postgres 16 too now",
];

const ACME_TEXTS: [&str; 6] = [
    "acme uses postgres 16",
    "acme forbids deploys on fridays",
    "acme api keys rotate monthly",
    "acme wants weekly status reports",
    "acme billing runs through stripe",
    "acme contact: dana, the cto",
];

/// Microseconds of midnight UTC on `2024-MM-DD`.
fn day(month: u32, d: u32) -> i64 {
    somna::text::parse_time(&format!("2024-{month:02}-{d:02}")).unwrap()
}

/// How `tests/fixtures/format1.redb` was written, kept to document its content. It runs only when
/// `SOMNA_WRITE_FIXTURE` names a file that does not exist yet; it never replaces the fixture.
#[test]
#[ignore = "writes a fixture; set SOMNA_WRITE_FIXTURE=PATH (a new file)"]
fn write_format1_fixture() {
    let Some(path) = std::env::var_os("SOMNA_WRITE_FIXTURE") else {
        return;
    };
    let path = PathBuf::from(path);
    assert!(
        !path.exists(),
        "{} exists; not replacing it",
        path.display()
    );
    let mut store = Store::create(&path).unwrap();
    store.set_config("RAW_MAX", "4").unwrap();
    let mut default_notes: Vec<NewMemory> = DEFAULT_TEXTS
        .iter()
        .enumerate()
        .map(|(i, t)| NewMemory::new(*t).observed_us(day(3, 1 + i as u32)))
        .collect();
    default_notes[2] = default_notes[2].clone().kind(Kind::Decision);
    default_notes[7] = default_notes[7]
        .clone()
        .supersedes(vec![6])
        .source("user:alice");
    default_notes[11] = default_notes[11].clone().kind(Kind::Decision);
    default_notes[12] = default_notes[12]
        .clone()
        .kind(Kind::Task)
        .status(Status::Proposed)
        .valid_until_us(day(12, 31));
    default_notes[13] = default_notes[13]
        .clone()
        .conflicts_with(vec![8])
        .source_uri("https://wiki.example/db");
    let later = default_notes.split_off(8);
    for m in default_notes {
        store.note("default", m).unwrap();
    }
    for (b, text) in [
        ("0-1", "small commits; deploys via staging"),
        ("2-3", "ci uses nextest; api in crates/api"),
        ("4-5", "jiff for dates; checklist in RELEASING.md"),
        ("6-7", "net::retry flake fixed with a 5 s timeout"),
        ("0-3", "small commits, staging deploys, nextest, crates/api"),
        ("4-7", "jiff, RELEASING.md, net::retry timeout fix"),
        (
            "0-7",
            "workflow: small commits, staging, nextest; jiff; retry fix",
        ),
    ] {
        store.nap("default", b.parse().unwrap(), text).unwrap();
    }
    for m in later {
        store.note("default", m).unwrap();
    }
    store
        .nap(
            "default",
            "8-9".parse().unwrap(),
            "pg 16 prod / 15 staging; no preamble",
        )
        .unwrap();

    let mut acme: Vec<NewMemory> = ACME_TEXTS
        .iter()
        .enumerate()
        .map(|(i, t)| NewMemory::new(*t).observed_us(day(4, 1 + i as u32)))
        .collect();
    let batch = acme.split_off(4);
    for m in acme {
        store.note(ACME, m).unwrap();
    }
    store.append(ACME, batch, Some("acme-import-1")).unwrap();
    let batch = |v: &[(&str, &str)]| -> Vec<(somna::Block, String)> {
        v.iter()
            .map(|(b, t)| (b.parse().unwrap(), t.to_string()))
            .collect()
    };
    // A batch (`nap --apply`), then a forget of 2-3 (which drops 0-3 with it) and a rebuild.
    store
        .nap_many(
            ACME,
            batch(&[
                ("0-3", "acme: pg 16, no fridays"),
                ("0-1", "acme: pg 16, no friday deploys"),
                ("2-3", "acme: rotate keys"),
            ]),
        )
        .unwrap();
    assert_eq!(store.forget(ACME, "2-3".parse().unwrap()).unwrap().len(), 2);
    store
        .nap_many(
            ACME,
            batch(&[
                ("2-3", "acme: monthly key rotation, weekly reports"),
                (
                    "0-3",
                    "acme: pg 16, no friday deploys, key rotation, weekly reports",
                ),
            ]),
        )
        .unwrap();
    assert!(store.verify().unwrap().ok());
    store.compact().unwrap();
}

fn fixture_copy() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(FIXTURE);
    let dst = dir.path().join("format1.redb");
    std::fs::copy(&src, &dst).unwrap_or_else(|e| panic!("cannot copy {}: {e}", src.display()));
    (dir, dst)
}

fn lines(s: &[&str]) -> String {
    s.iter().map(|l| format!("{l}\n")).collect()
}

#[test]
fn the_format1_fixture_still_reads_exactly() {
    let (_dir, path) = fixture_copy();
    let mut store = Store::open(&path).unwrap();

    // Settings and counters.
    let cfg = store.config().unwrap();
    assert_eq!(
        (cfg.entry_bytes, cfg.raw_max, cfg.wake_lines, cfg.wake_bytes),
        (280, 4, 96, 0)
    );
    let stats: Vec<(String, u64, u64, u64)> = store
        .read(|r| r.stats())
        .unwrap()
        .into_iter()
        .map(|s| (s.scope, s.memories, s.summaries, s.pending))
        .collect();
    assert_eq!(
        stats,
        [
            ("default".to_string(), 14, 8, 3),
            (ACME.to_string(), 6, 3, 1)
        ]
    );

    // Every text, in order, and the envelopes that were set.
    let texts = |scope: &str, n: u64| -> Vec<String> {
        store
            .read(|r| r.memories(scope, 0, n))
            .unwrap()
            .into_iter()
            .map(|m| m.text)
            .collect()
    };
    assert_eq!(texts("default", 100), DEFAULT_TEXTS);
    assert_eq!(texts(ACME, 100), ACME_TEXTS);
    let m7 = store.memory("default", 7).unwrap();
    assert_eq!(
        (m7.id, m7.observed_us, m7.kind, m7.status),
        (7, day(3, 8), Kind::Observation, Status::Accepted)
    );
    assert_eq!(
        (m7.source.as_deref(), m7.supersedes.as_slice()),
        (Some("user:alice"), &[6u64][..])
    );
    let m12 = store.memory("default", 12).unwrap();
    assert_eq!(
        (m12.kind, m12.status, m12.valid_until_us),
        (Kind::Task, Status::Proposed, Some(day(12, 31)))
    );
    let m13 = store.memory("default", 13).unwrap();
    assert_eq!(
        (m13.source_uri.as_deref(), m13.conflicts_with.as_slice()),
        (Some("https://wiki.example/db"), &[8u64][..])
    );
    assert_eq!(store.memory(ACME, 5).unwrap().observed_us, day(4, 6));

    // Summaries: by level, then start, with what each was built from.
    let nodes = |scope: &str| -> Vec<(String, String, &'static str)> {
        store
            .read(|r| r.nodes(scope))
            .unwrap()
            .into_iter()
            .map(|n| {
                let from = match n.summary.built_from {
                    BuiltFrom::Raw => "raw",
                    BuiltFrom::Children { .. } => "children",
                    BuiltFrom::Imported => "imported",
                };
                (n.block.to_string(), n.summary.text, from)
            })
            .collect()
    };
    let owned = |v: &[(&str, &str, &'static str)]| -> Vec<(String, String, &'static str)> {
        v.iter()
            .map(|(b, t, f)| (b.to_string(), t.to_string(), *f))
            .collect()
    };
    assert_eq!(
        nodes("default"),
        owned(&[
            ("0-1", "small commits; deploys via staging", "raw"),
            ("2-3", "ci uses nextest; api in crates/api", "raw"),
            ("4-5", "jiff for dates; checklist in RELEASING.md", "raw"),
            ("6-7", "net::retry flake fixed with a 5 s timeout", "raw"),
            ("8-9", "pg 16 prod / 15 staging; no preamble", "raw"),
            (
                "0-3",
                "small commits, staging deploys, nextest, crates/api",
                "raw"
            ),
            ("4-7", "jiff, RELEASING.md, net::retry timeout fix", "raw"),
            (
                "0-7",
                "workflow: small commits, staging, nextest; jiff; retry fix",
                "children"
            ),
        ])
    );
    assert_eq!(
        nodes(ACME),
        owned(&[
            ("0-1", "acme: pg 16, no friday deploys", "raw"),
            ("2-3", "acme: monthly key rotation, weekly reports", "raw"),
            (
                "0-3",
                "acme: pg 16, no friday deploys, key rotation, weekly reports",
                "raw"
            ),
        ])
    );
    let pending = |scope: &str| -> Vec<String> {
        store
            .pending(scope, None)
            .unwrap()
            .iter()
            .map(|b| b.to_string())
            .collect()
    };
    assert_eq!(pending("default"), ["10-11", "12-13", "8-11"]);
    assert_eq!(pending(ACME), ["4-5"]);

    // Wake, exactly as an agent reads it.
    let wake = |scope: &str, lines: Option<usize>| {
        let opts = WakeOptions {
            lines,
            ..WakeOptions::default()
        };
        store.wake_text(scope, &opts).unwrap()
    };
    assert_eq!(
        wake("default", Some(6)),
        lines(&[
            "Your memory, part 1 of 1, oldest first (14 memories).",
            "#0-7 workflow: small commits, staging, nextest; jiff; retry fix",
            "#8-9 pg 16 prod / 15 staging; no preamble",
            "#10 2024-03-11 benchmarks run on the quiet machine only",
            "#11 2024-03-12 no unsafe code outside the ffi crate",
            "#12 2024-03-13 [proposed; expired] migrate the ci cache to the new bucket",
            "#13 2024-03-14 [conflicts with #8] staging runs postgres 16 too now",
            "You are awake.",
            "3 merges are pending. Run: somna nap",
        ])
    );
    // 10-11 and 12-13 have no summary yet, so 5 lines cannot tile the log: the oldest memories
    // are left out and named in one line.
    assert_eq!(
        wake("default", Some(5)),
        lines(&[
            "Your memory, part 1 of 1, oldest first (14 memories).",
            "(10 older memories, #0 to #9, are left out to fit the budget. Open them with: somna zoom 0-7; somna zoom 8-9)",
            "#10 2024-03-11 benchmarks run on the quiet machine only",
            "#11 2024-03-12 no unsafe code outside the ffi crate",
            "#12 2024-03-13 [proposed; expired] migrate the ci cache to the new bucket",
            "#13 2024-03-14 [conflicts with #8] staging runs postgres 16 too now",
            "You are awake.",
            "3 merges are pending. Run: somna nap",
        ])
    );
    assert_eq!(
        wake(ACME, Some(3)),
        lines(&[
            "Your memory, part 1 of 1, oldest first (6 memories).",
            "#0-3 acme: pg 16, no friday deploys, key rotation, weekly reports",
            "#4 2024-04-05 acme billing runs through stripe",
            "#5 2024-04-06 acme contact: dana, the cto",
            "You are awake.",
            "1 merge is pending. Run: somna nap",
        ])
    );
    let full = wake("default", None);
    assert!(full.starts_with("Your memory, part 1 of 1, oldest first (14 memories).\n#0 2024-03-01 the user prefers small commits\n"));
    assert_eq!(full.lines().count(), 14 + 3);

    // Recall streams the log and renders `#id date text`, with the trust markers of each record
    // (the fixture predates the events table, so #8 carries no reverse link).
    let r = store
        .recall("default", &RecallQuery::new("postgres|staging"))
        .unwrap();
    assert_eq!(
        r.render(),
        lines(&[
            "#1 2024-03-02 deploys go through the staging branch",
            "#8 2024-03-09 postgres 16 in production, 15 in staging",
            "#13 2024-03-14 [conflicts with #8] staging runs postgres 16 too now",
            "3 matches.",
        ])
    );

    // The idempotency key stored by the fixture still replays.
    let again = store
        .append(
            ACME,
            ACME_TEXTS[4..].iter().map(|t| NewMemory::new(*t)).collect(),
            Some("acme-import-1"),
        )
        .unwrap();
    assert_eq!((again.first, again.count, again.replayed), (4, 2, true));

    let report = store.verify().unwrap();
    assert!(report.ok(), "{:?}", report.problems);
    assert!(report.engine_intact);
    assert_eq!(
        (report.scopes, report.memories, report.summaries),
        (2, 20, 11)
    );
    drop(store);

    // The raw bytes under the engine: the envelope and the postcard layout, read back unchanged.
    let db = redb::Database::builder()
        .set_concurrency_mode(redb::ConcurrencyMode::MultiWriter)
        .open(&path)
        .unwrap();
    let rtx = db.begin_read().unwrap();
    let meta = rtx.open_table(META).unwrap();
    assert_eq!(
        meta.get("format").unwrap().unwrap().value(),
        // The first read-write open upgraded it to the current format, 7 (its search index
        // built, its sessions, none, in chunks).
        [0x01, 0x07, 0x2e, 0x7a, 0x66, 0x4c]
    );
    assert_eq!(
        meta.get("next_scope_id").unwrap().unwrap().value(),
        [0x01, 0x02, 0xa1, 0x8e, 0x0c, 0x3c]
    );
    let config = rtx.open_table(CONFIG).unwrap();
    assert_eq!(
        config.get("RAW_MAX").unwrap().unwrap().value(),
        [0x01, 0x04, 0x94, 0x2b, 0x6f, 0xd5]
    );
    let scopes = rtx.open_table(SCOPES).unwrap();
    let acme = scopes.get(ACME).unwrap().unwrap();
    let acme = acme.value();
    // id 1, created_us (8 bytes), count 6, summaries 3, pending 1, CRC.
    assert_eq!((acme.len(), acme[0], acme[1]), (17, 0x01, 0x01));
    assert_eq!(acme[10..13], [0x06, 0x03, 0x01]);
    let log = rtx.open_table(LOG).unwrap();
    let rec = log.get((1u32, 5u64)).unwrap().unwrap();
    let m: Memory = decode("log", &"(1, #5)", rec.value()).unwrap();
    assert_eq!(m.text, ACME_TEXTS[5]);
    assert_eq!(
        encode(&m).unwrap(),
        rec.value(),
        "re-encoding is byte-identical"
    );
    #[rustfmt::skip]
    let want: [u8; 57] = [
        0x01,                                           // version
        0x05,                                           // id 5
        0x80, 0x80, 0xa9, 0x8e, 0xc8, 0xd8, 0x8a, 0x06, // observed_us: 2024-04-06
        0xaa, 0xc6, 0xb9, 0xab, 0xe9, 0xdb, 0xb0, 0x06, // recorded_us: when the fixture was made
        0x1b,                                           // text: 27 bytes
        0x61, 0x63, 0x6d, 0x65, 0x20, 0x63, 0x6f, 0x6e, 0x74, 0x61, 0x63, 0x74, 0x3a, 0x20,
        0x64, 0x61, 0x6e, 0x61, 0x2c, 0x20, 0x74, 0x68, 0x65, 0x20, 0x63, 0x74, 0x6f,
        0x01, 0x01,                                     // Observation, Accepted
        0x00, 0x00, 0x00, 0x00, 0x00,                   // no source, uri, links, expiry
        0xda, 0x0e, 0x10, 0x2b,                         // CRC32
    ];
    assert_eq!(rec.value(), want);
    let tree = rtx.open_table(TREE).unwrap();
    let s = tree.get((0u32, 3u8, 0u64)).unwrap().unwrap();
    let s: Summary = decode("tree", &"(0, 0-7)", s.value()).unwrap();
    assert!(matches!(s.built_from, BuiltFrom::Children { .. }));
}
