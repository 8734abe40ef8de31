//! The crash-test harness shared by the crash tests (`tests/api/crash/`) and the `crash_ops`
//! fuzz target: a workload that mixes every write path of somna, a reference run that records
//! what each operation returns and the store's logical state after it, a replay of the workload
//! over a [`SimDisk`] with a fault plan, and the oracle that checks a recovered store against
//! the reference.
//!
//! The oracle: the operations that returned are acknowledged; after a crash, the recovered
//! store must hold every acknowledged operation, and the one in flight either wholly or not at
//! all: its logical state must equal the reference state after the acknowledged operations, or
//! after the one in flight too. Then `verify` must find nothing wrong, every log must be dense
//! (read back in `state`), and the store must keep working (a note, a session append and a
//! wake succeed and read back).
use std::collections::BTreeSet;

use crate::simdisk::{FaultPlan, SimDisk, SimRng, Survival};
use somna::{Block, Error, Kind, NewMemory, Options, SearchQuery, Store, WakeOptions};

/// Where the workload's random choices come from: a seeded generator (the tests) or the bytes
/// of a fuzz input (the fuzz target), so that a mutation of the input changes a few choices.
pub enum Choices<'a> {
    Rng(SimRng),
    Bytes(&'a [u8], usize),
}

impl Choices<'_> {
    pub fn below(&mut self, n: u64) -> u64 {
        if n <= 1 {
            return 0;
        }
        match self {
            Choices::Rng(r) => r.below(n),
            Choices::Bytes(b, at) => {
                let mut v = 0u64;
                for _ in 0..2 {
                    let x = b.get(*at).copied().unwrap_or(0);
                    *at += 1;
                    v = v << 8 | u64::from(x);
                }
                v % n
            }
        }
    }
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    pub fn exhausted(&self) -> bool {
        match self {
            Choices::Rng(_) => false,
            Choices::Bytes(b, at) => *at >= b.len(),
        }
    }
}

/// One memory, with every field that makes its stored bytes deterministic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub text: String,
    pub observed_us: i64,
    pub kind: Kind,
    pub source: Option<String>,
    pub supersedes: Vec<u64>,
}

impl Item {
    pub fn to_new(&self) -> NewMemory {
        let mut m = NewMemory::new(self.text.clone())
            .observed_us(self.observed_us)
            .kind(self.kind)
            .supersedes(self.supersedes.clone());
        if let Some(s) = &self.source {
            m = m.source(s.clone());
        }
        m
    }
}

/// One operation of the workload.
#[derive(Debug, Clone)]
pub enum Op {
    /// `Store::append` of one memory (a note), with an optional idempotency key.
    Note {
        scope: String,
        item: Item,
        key: Option<String>,
    },
    /// `Store::append` of several memories in one commit.
    Append {
        scope: String,
        items: Vec<Item>,
        key: Option<String>,
    },
    Nap {
        scope: String,
        block: Block,
        text: String,
    },
    NapMany {
        scope: String,
        entries: Vec<(Block, String)>,
    },
    Forget {
        scope: String,
        block: Block,
    },
    Config {
        name: &'static str,
        value: String,
    },
    SessionSave {
        id: String,
        msgs: Vec<String>,
    },
    SessionAppend {
        id: String,
        items: Vec<String>,
        key: Option<String>,
        expect: Option<u64>,
    },
    SessionPop {
        id: String,
    },
    SessionClear {
        id: String,
    },
    SessionDelete {
        id: String,
    },
    /// A read: wake's text (observed times are fixed, so it is deterministic).
    Wake {
        scope: String,
    },
    /// `Store::redact` of one memory: its text leaves the log and the search index.
    Redact {
        scope: String,
        id: u64,
    },
    /// A read: a ranked search's text.
    Search {
        scope: String,
        query: String,
    },
}

impl Op {
    pub fn name(&self) -> &'static str {
        match self {
            Op::Note { .. } => "note",
            Op::Append { .. } => "append",
            Op::Nap { .. } => "nap",
            Op::NapMany { .. } => "nap_many",
            Op::Forget { .. } => "forget",
            Op::Config { .. } => "set_config",
            Op::SessionSave { .. } => "session_save",
            Op::SessionAppend { .. } => "session_append",
            Op::SessionPop { .. } => "session_pop",
            Op::SessionClear { .. } => "session_clear",
            Op::SessionDelete { .. } => "session_delete",
            Op::Wake { .. } => "wake",
            Op::Redact { .. } => "redact",
            Op::Search { .. } => "search",
        }
    }
}

/// What an operation returned, rendered; errors by their message.
pub type Outcome = Result<String, String>;

/// Runs one operation.
pub fn apply(store: &Store, op: &Op) -> Result<String, Error> {
    Ok(match op {
        Op::Note { scope, item, key } => {
            format!(
                "{:?}",
                store.append(scope, vec![item.to_new()], key.as_deref())?
            )
        }
        Op::Append { scope, items, key } => format!(
            "{:?}",
            store.append(
                scope,
                items.iter().map(Item::to_new).collect(),
                key.as_deref()
            )?
        ),
        Op::Nap { scope, block, text } => format!("{:?}", store.nap(scope, *block, text)?),
        Op::NapMany { scope, entries } => format!("{:?}", store.nap_many(scope, entries.clone())?),
        Op::Forget { scope, block } => format!("{:?}", store.forget(scope, *block)?),
        Op::Config { name, value } => format!("{:?}", store.set_config(name, value)?),
        Op::SessionSave { id, msgs } => {
            let refs: Vec<&str> = msgs.iter().map(String::as_str).collect();
            format!("{:?}", store.session_save(id, &refs, None)?)
        }
        Op::SessionAppend {
            id,
            items,
            key,
            expect,
        } => {
            let refs: Vec<&str> = items.iter().map(String::as_str).collect();
            format!(
                "{:?}",
                store.session_append(id, &refs, key.as_deref(), *expect)?
            )
        }
        Op::SessionPop { id } => format!("{:?}", store.session_pop(id, None)?),
        Op::SessionClear { id } => format!("{:?}", store.session_clear(id)?),
        Op::SessionDelete { id } => format!("{:?}", store.session_delete(id)?),
        Op::Wake { scope } => store.wake_text(scope, &WakeOptions::default())?,
        Op::Redact { scope, id } => format!("{:?}", store.redact(scope, *id, "crash test")?),
        Op::Search { scope, query } => store.search(scope, &SearchQuery::new(query))?.render(false),
    })
}

fn outcome(r: Result<String, Error>) -> Outcome {
    r.map(|o| mask_revisions(&o))
        .map_err(|e| mask_revisions(&e.to_string()))
}

const SCOPES: &[&str] = &["default", "project:acme"];
const SESSIONS: &[&str] = &["s1", "chat/2"];
const BASE_US: i64 = 1_714_521_600_000_000;

/// Generates operations one at a time, looking at the reference store to choose valid ones
/// (the next pending merge, a summarized block to forget, the current session).
pub struct Gen<'a> {
    pub c: Choices<'a>,
    n: u64,
    note_keys: Vec<(String, Vec<Item>, String)>,
    session_keys: Vec<(String, Vec<String>, String)>,
}

impl<'a> Gen<'a> {
    pub fn new(c: Choices<'a>) -> Self {
        Gen {
            c,
            n: 0,
            note_keys: Vec::new(),
            session_keys: Vec::new(),
        }
    }

    fn pick<'b>(&mut self, xs: &'b [&'b str]) -> &'b str {
        xs[self.c.below(xs.len() as u64) as usize]
    }

    fn text(&mut self, what: &str) -> String {
        self.n += 1;
        let pad = match self.c.below(4) {
            0 => 0,
            1 => 20,
            2 => 90,
            _ => 200,
        };
        let mut t = format!("{what} {} about the build", self.n);
        while t.len() < pad {
            t.push_str(" and more detail");
        }
        t.truncate(260);
        t
    }

    fn item(&mut self, count: u64) -> Item {
        let text = self.text("memory");
        let kind = Kind::ALL[self.c.below(Kind::ALL.len() as u64) as usize];
        let source = self.c.chance(20).then(|| "user:alice".to_string());
        let supersedes = if count > 0 && self.c.chance(10) {
            vec![self.c.below(count)]
        } else {
            Vec::new()
        };
        Item {
            text,
            observed_us: BASE_US + self.n as i64 * 3_600_000_000,
            kind,
            source,
            supersedes,
        }
    }

    fn message(&mut self) -> String {
        self.n += 1;
        let big = self.c.chance(15);
        let body = if big {
            "x".repeat(1000 + self.c.below(6000) as usize)
        } else {
            format!("message {}", self.n)
        };
        let role = if self.c.chance(50) {
            "user"
        } else {
            "assistant"
        };
        if self.c.chance(20) {
            // Not compact: the store keeps it compact.
            format!("{{ \"role\" : \"{role}\", \"content\" : \"{body}\" }}")
        } else {
            format!("{{\"role\":\"{role}\",\"content\":\"{body}\"}}")
        }
    }

    /// The next operation, chosen against the reference `store`.
    pub fn next(&mut self, store: &Store) -> Op {
        let scope = self.pick(SCOPES).to_string();
        let id = self.pick(SESSIONS).to_string();
        let count = store.count(&scope).unwrap_or(0);
        let roll = self.c.below(100);
        match roll {
            0..=21 => {
                let key = match self.c.below(10) {
                    0..=2 => Some(format!("k{}", self.n)),
                    3 if !self.note_keys.is_empty() => {
                        // A retry: same key, same memory (replayed), or another (a conflict).
                        let i = self.c.below(self.note_keys.len() as u64) as usize;
                        let (s, items, k) = self.note_keys[i].clone();
                        if items.len() == 1 && self.c.chance(70) {
                            return Op::Note {
                                scope: s,
                                item: items[0].clone(),
                                key: Some(k),
                            };
                        }
                        let item = self.item(count);
                        return Op::Note {
                            scope: s,
                            item,
                            key: Some(k),
                        };
                    }
                    _ => None,
                };
                let item = self.item(count);
                if let Some(k) = &key {
                    self.note_keys
                        .push((scope.clone(), vec![item.clone()], k.clone()));
                }
                Op::Note { scope, item, key }
            }
            22..=33 => {
                let n = if self.c.chance(20) {
                    10 + self.c.below(30)
                } else {
                    2 + self.c.below(4)
                };
                let items: Vec<Item> = (0..n).map(|_| self.item(count)).collect();
                let key = if self.c.chance(50) {
                    let k = format!("batch{}", self.n);
                    self.note_keys
                        .push((scope.clone(), items.clone(), k.clone()));
                    Some(k)
                } else if !self.note_keys.is_empty() && self.c.chance(20) {
                    let i = self.c.below(self.note_keys.len() as u64) as usize;
                    let (s, items, k) = self.note_keys[i].clone();
                    return Op::Append {
                        scope: s,
                        items,
                        key: Some(k),
                    };
                } else {
                    None
                };
                Op::Append { scope, items, key }
            }
            34..=47 => match store.next_prompt(&scope).ok().flatten() {
                Some(p) if !self.c.chance(8) => {
                    let text = self.text(&format!("summary of {}", p.block));
                    Op::Nap {
                        scope,
                        block: p.block,
                        text,
                    }
                }
                _ => {
                    // A wrong or settled block: rejected or a no-op, writing nothing.
                    let level = 1 + self.c.below(3) as u8;
                    let lo = self.c.below(8) << level;
                    let block = Block::new(level, lo).unwrap();
                    let text = self.text("summary");
                    Op::Nap { scope, block, text }
                }
            },
            48..=55 => {
                let n = 1 + self.c.below(4) as usize;
                let prompts = store.read(|r| r.prompts(&scope, n)).unwrap_or_default();
                if prompts.is_empty() {
                    return Op::Wake { scope };
                }
                let entries = prompts
                    .iter()
                    .map(|p| (p.block, self.text(&format!("batch summary of {}", p.block))))
                    .collect();
                Op::NapMany { scope, entries }
            }
            56..=61 => {
                let nodes = store.read(|r| r.nodes(&scope)).unwrap_or_default();
                let block = if nodes.is_empty() {
                    Block::new(1, 0).unwrap()
                } else {
                    nodes[self.c.below(nodes.len() as u64) as usize].block
                };
                Op::Forget { scope, block }
            }
            62..=65 => {
                let (name, value) = match self.c.below(5) {
                    0 => ("SESSION_ARCHIVE_MAX", self.c.below(4).to_string()),
                    1 => ("WAKE_LINES", (8 + self.c.below(90)).to_string()),
                    2 => ("RAW_MAX", (2u64 << self.c.below(4)).to_string()),
                    3 => ("ENTRY_BYTES", (250 + self.c.below(200)).to_string()),
                    _ => ("WAKE_LINES", "0".to_string()), // refused
                };
                Op::Config {
                    name,
                    value: value.to_string(),
                }
            }
            66..=75 => {
                let n = 1 + self.c.below(3);
                let items: Vec<String> = (0..n).map(|_| self.message()).collect();
                let expect = if self.c.chance(15) {
                    let cur = store
                        .session_info(&id)
                        .ok()
                        .flatten()
                        .map(|i| i.revision)
                        .unwrap_or(0);
                    // Sometimes stale: a conflict that writes nothing.
                    Some(if self.c.chance(30) { cur + 7 } else { cur })
                } else {
                    None
                };
                let key = match self.c.below(10) {
                    0..=3 => {
                        let k = format!("sk{}", self.n);
                        self.session_keys
                            .push((id.clone(), items.clone(), k.clone()));
                        Some(k)
                    }
                    4 if !self.session_keys.is_empty() => {
                        let i = self.c.below(self.session_keys.len() as u64) as usize;
                        let (sid, items, k) = self.session_keys[i].clone();
                        return Op::SessionAppend {
                            id: sid,
                            items,
                            key: Some(k),
                            expect: None,
                        };
                    }
                    _ => None,
                };
                Op::SessionAppend {
                    id,
                    items,
                    key,
                    expect,
                }
            }
            76..=83 => {
                let mut msgs = store.session_load(&id).ok().flatten().unwrap_or_default();
                // Trim from the front, edit one, add a few: what frameworks do.
                let drop = self.c.below(msgs.len() as u64 + 1) as usize;
                let drop = drop.min(if self.c.chance(50) { 0 } else { drop });
                msgs.drain(..drop);
                if !msgs.is_empty() && self.c.chance(20) {
                    let i = self.c.below(msgs.len() as u64) as usize;
                    msgs[i] = self.message();
                }
                for _ in 0..self.c.below(4) {
                    msgs.push(self.message());
                }
                Op::SessionSave { id, msgs }
            }
            84..=88 => Op::SessionPop { id },
            89..=90 => Op::SessionClear { id },
            91..=93 => Op::SessionDelete { id },
            94 if count > 0 => Op::Redact {
                id: self.c.below(count),
                scope,
            },
            95..=96 => Op::Search {
                scope,
                query: "summary of the build 7".into(),
            },
            _ => Op::Wake { scope },
        }
    }
}

/// The keys whose effect `state` probes, in the order they first appear in the script.
#[derive(Debug, Clone, Default)]
pub struct Probes {
    notes: Vec<(String, Vec<Item>, String)>,
    sessions: Vec<(String, Vec<String>, String)>,
}

impl Probes {
    fn of(ops: &[Op]) -> Probes {
        let mut p = Probes::default();
        let mut seen = BTreeSet::new();
        for op in ops {
            match op {
                Op::Note {
                    scope,
                    item,
                    key: Some(k),
                } if seen.insert(("n", scope.clone(), k.clone())) => {
                    p.notes.push((scope.clone(), vec![item.clone()], k.clone()))
                }
                Op::Append {
                    scope,
                    items,
                    key: Some(k),
                } if seen.insert(("n", scope.clone(), k.clone())) => {
                    p.notes.push((scope.clone(), items.clone(), k.clone()))
                }
                Op::SessionAppend {
                    id,
                    items,
                    key: Some(k),
                    ..
                } if seen.insert(("s", id.clone(), k.clone())) => {
                    p.sessions.push((id.clone(), items.clone(), k.clone()))
                }
                _ => {}
            }
        }
        p
    }
}

/// A stable 64-bit digest of `s` (FNV-1a), to keep a large value out of a rendered state.
fn digest(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The logical content of a store, rendered as text, without wall-clock times: every setting,
/// scope counter, memory, summary, pending block, session (live messages, archive; revisions
/// masked, see `mask_revisions`) and what each idempotency key of the script does now (probed in transactions that are
/// rolled back). Fails if a log is not dense or a read fails.
pub fn state(store: &Store, probes: &Probes) -> Result<String, String> {
    use std::fmt::Write;
    let mut out = String::new();
    let r = store.read(|r| {
        let mut o = String::new();
        let _ = writeln!(o, "config {:?}", r.config()?);
        for s in r.stats()? {
            let _ = writeln!(
                o,
                "scope {} memories={} summaries={} pending={}",
                s.scope, s.memories, s.summaries, s.pending
            );
            let mems = r.memories(&s.scope, 0, s.memories)?;
            if mems.len() as u64 != s.memories {
                return Err(Error::Storage(format!(
                    "scope {} counts {} memories but {} read back",
                    s.scope,
                    s.memories,
                    mems.len()
                )));
            }
            for (i, m) in mems.iter().enumerate() {
                if m.id != i as u64 {
                    return Err(Error::Storage(format!(
                        "scope {}: position {i} holds #{}",
                        s.scope, m.id
                    )));
                }
                let _ = writeln!(
                    o,
                    "  #{} {} {:?} {:?} {:?} {:?} {:?} {:?} {:?} {}",
                    m.id,
                    m.observed_us,
                    m.kind,
                    m.status,
                    m.source,
                    m.source_uri,
                    m.supersedes,
                    m.conflicts_with,
                    m.valid_until_us,
                    m.text
                );
            }
            for n in r.nodes(&s.scope)? {
                if n.block.hi() > s.memories {
                    return Err(Error::Storage(format!(
                        "scope {}: summary {} past the end of the log",
                        s.scope, n.block
                    )));
                }
                let from = match n.summary.built_from {
                    somna::BuiltFrom::Raw => "raw",
                    somna::BuiltFrom::Children { .. } => "children",
                    somna::BuiltFrom::Imported => "imported",
                    #[allow(unreachable_patterns)]
                    _ => "other",
                };
                let _ = writeln!(
                    o,
                    "  node {} {from} {:08x} {}",
                    n.block, n.summary.inputs_crc, n.summary.text
                );
            }
            let pending: Vec<String> = r
                .pending(&s.scope, None)?
                .iter()
                .map(|b| b.to_string())
                .collect();
            let _ = writeln!(o, "  pending {}", pending.join(" "));
            // The search index, logically: equal to the reference's means the recovered index
            // holds exactly the acknowledged writes (and `verify` checks it against a rebuild).
            let index = r.search_index(&s.scope)?;
            let _ = writeln!(
                o,
                "  index docs={} postings={} {:016x}",
                index.docs.len(),
                index.postings.len(),
                digest(&format!("{index:?}"))
            );
        }
        for id in r.session_ids()? {
            let Some(info) = r.session_info(&id)? else {
                return Err(Error::Storage(format!("session {id} listed but absent")));
            };
            let _ = writeln!(
                o,
                "session {id} revision={} count={} bytes={} archived={}",
                info.revision, info.count, info.bytes, info.archived
            );
            for m in r.session_load(&id)?.unwrap_or_default() {
                let _ = writeln!(o, "  msg {m}");
            }
            for a in r.session_archived(&id)? {
                let _ = writeln!(o, "  archived {}", a.message);
            }
        }
        Ok(o)
    });
    out.push_str(&r.map_err(|e| format!("reading the store failed: {e}"))?);
    for (scope, items, key) in &probes.notes {
        let mut got = None;
        let _ = store.write(|tx| {
            got = Some(outcome(
                tx.append(scope, items.iter().map(Item::to_new).collect(), Some(key))
                    .map(|a| format!("{a:?}")),
            ));
            Err::<(), _>(Error::Conflict("probe: roll back".into()))
        });
        let _ = writeln!(out, "probe note key {scope} {key}: {got:?}");
    }
    for (id, items, key) in &probes.sessions {
        let mut got = None;
        let _ = store.write(|tx| {
            let refs: Vec<&str> = items.iter().map(String::as_str).collect();
            got = Some(outcome(
                tx.session_append(id, &refs, Some(key), None)
                    .map(|a| format!("{a:?}")),
            ));
            Err::<(), _>(Error::Conflict("probe: roll back".into()))
        });
        let _ = writeln!(out, "probe session key {id} {key}: {got:?}");
    }
    Ok(mask_revisions(&out))
}

/// `s` with every session revision replaced by `_`: revisions derive from commit times (at
/// least the commit's microsecond), so two runs of one script give different numbers. What the
/// revision rules promise is checked by the session model test (`tests/api/session/model.rs`).
/// A conflict names two ("the session is at revision N, not M"): both are masked.
pub fn mask_revisions(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(at) = rest.find("revision") {
        let (head, tail) = rest.split_at(at + "revision".len());
        out.push_str(head);
        rest = mask_number(tail, [':', '=', ' '].as_slice(), &mut out);
        if let Some(after) = rest.strip_prefix(", not") {
            out.push_str(", not");
            rest = mask_number(after, [' '].as_slice(), &mut out);
        }
    }
    out.push_str(rest);
    out
}

/// Copies the separators `seps` at the start of `s` to `out`, then a `_` for the number that
/// follows them, if one does; returns what is left of `s`.
fn mask_number<'a>(s: &'a str, seps: &[char], out: &mut String) -> &'a str {
    let sep = s.len() - s.trim_start_matches(seps).len();
    let (sep_s, after) = s.split_at(sep);
    out.push_str(sep_s);
    let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
    if digits > 0 {
        out.push('_');
    }
    after.get(digits..).unwrap_or("")
}

/// A workload and what it did on a disk without faults.
pub struct Script {
    pub seed: u64,
    /// redb's `ExclusiveWriter` mode (1PC+C) instead of the default `MultiWriter` (one phase, the
    /// primary marked unflushed until its sync returns).
    pub exclusive: bool,
    pub ops: Vec<Op>,
    pub outcomes: Vec<Outcome>,
    /// `states[k]`: the store after initialization and the first `k` operations.
    pub states: Vec<String>,
    pub probes: Probes,
    /// Syncs and I/O operations of the whole clean run (opening included).
    pub syncs: u64,
    pub io_ops: u64,
    /// File length after initialization and at the end.
    pub len_after_init: u64,
    pub len_at_end: u64,
}

pub fn options(exclusive: bool) -> Options {
    Options::default().exclusive(exclusive).cache_bytes(4 << 20)
}

impl Script {
    /// A workload of `n` operations drawn from `choices`.
    pub fn generate(seed: u64, exclusive: bool, n: usize, choices: Choices<'_>) -> Script {
        let disk = SimDisk::new(seed);
        let store = Store::with_backend(disk, "reference", options(exclusive))
            .expect("the reference store opens");
        let mut g = Gen::new(choices);
        let mut ops = Vec::with_capacity(n);
        for _ in 0..n {
            if g.c.exhausted() && !ops.is_empty() {
                break;
            }
            let op = g.next(&store);
            let _ = apply(&store, &op);
            ops.push(op);
        }
        drop(store);
        Self::record(seed, exclusive, ops)
    }

    /// Runs `ops` on a fault-free disk, recording outcomes and states.
    pub fn record(seed: u64, exclusive: bool, ops: Vec<Op>) -> Script {
        let probes = Probes::of(&ops);
        let disk = SimDisk::new(seed);
        let store = Store::with_backend(disk.clone(), "reference", options(exclusive))
            .expect("the reference store opens");
        let len_after_init = disk.live_image().len() as u64;
        let mut states = vec![state(&store, &probes).expect("reference state")];
        let mut outcomes = Vec::with_capacity(ops.len());
        // Only the operations count: the probes of `state` roll back, but are I/O too.
        let mut io_ops = disk.stats().ops;
        let mut syncs = disk.stats().syncs;
        for op in &ops {
            let before = disk.stats();
            outcomes.push(outcome(apply(&store, op)));
            let after = disk.stats();
            io_ops += after.ops - before.ops;
            syncs += after.syncs - before.syncs;
            states.push(state(&store, &probes).expect("reference state"));
        }
        let len_at_end = disk.live_image().len() as u64;
        drop(store);
        Script {
            seed,
            exclusive,
            ops,
            outcomes,
            states,
            probes,
            syncs,
            io_ops,
            len_after_init,
            len_at_end,
        }
    }

    pub fn describe(&self) -> String {
        format!(
            "seed {} ({}), {} operations",
            self.seed,
            if self.exclusive {
                "ExclusiveWriter, 1PC+C"
            } else {
                "MultiWriter, 1PC, unflushed mark"
            },
            self.ops.len()
        )
    }
}

/// How far a replay got before its fault.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Progress {
    /// Whether opening (creating) the store was acknowledged.
    pub opened: bool,
    /// Operations acknowledged (returned what the reference returned).
    pub acked: usize,
    /// Whether an operation (or the open) failed: it is in flight.
    pub in_flight: bool,
}

impl Progress {
    /// The states a recovered store may be in.
    pub fn allowed(&self) -> Vec<usize> {
        if !self.opened || !self.in_flight {
            vec![self.acked]
        } else {
            vec![self.acked, self.acked + 1]
        }
    }
}

/// Replays `script` on `disk` (fault plan already installed), stopping at the first operation
/// that does not return what the reference returned. An operation failing without an injected
/// fault is a bug, reported as `Err`. `at_failure` runs when an operation failed, before the
/// store is closed (to take a power-loss image of that moment).
pub fn replay(
    script: &Script,
    disk: &SimDisk,
    mut at_failure: impl FnMut(&SimDisk),
) -> Result<Progress, String> {
    let faulty = |d: &SimDisk| d.fired().is_some() || d.is_crashed() || d.stats().full > 0;
    let store = match Store::with_backend(disk.clone(), "sim", options(script.exclusive)) {
        Ok(s) => s,
        Err(e) => {
            if !faulty(disk) {
                return Err(format!("opening failed without a fault: {e}"));
            }
            at_failure(disk);
            return Ok(Progress {
                opened: false,
                acked: 0,
                in_flight: true,
            });
        }
    };
    for (i, op) in script.ops.iter().enumerate() {
        let got = outcome(apply(&store, op));
        if got == script.outcomes[i] {
            continue;
        }
        if !faulty(disk) || got.is_ok() {
            return Err(format!(
                "operation {i} ({}) returned {got:?}, the reference {:?}; no fault explains it",
                op.name(),
                script.outcomes[i]
            ));
        }
        at_failure(disk);
        drop(store);
        return Ok(Progress {
            opened: true,
            acked: i,
            in_flight: true,
        });
    }
    drop(store);
    Ok(Progress {
        opened: true,
        acked: script.ops.len(),
        in_flight: false,
    })
}

fn first_difference(a: &str, b: &str) -> String {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    for i in 0..la.len().max(lb.len()) {
        let (x, y) = (la.get(i), lb.get(i));
        if x != y {
            return format!(
                "line {}: recovered {:?}, expected {:?}",
                i + 1,
                x.unwrap_or(&"<end>"),
                y.unwrap_or(&"<end>")
            );
        }
    }
    "no difference".into()
}

/// Counters of what a sweep explored.
#[derive(Debug, Default, Clone, Copy)]
pub struct Tally {
    pub crash_points: u64,
    pub recoveries: u64,
    pub repair_crashes: u64,
    pub in_flight_landed: u64,
    pub in_flight_absent: u64,
    /// In flight, but an operation that changes nothing (a read, a rejected write).
    pub in_flight_noop: u64,
    pub acked_ops: u64,
    pub lost: u64,
    /// Crashes during the store's creation (nothing acknowledged) that left an image redb
    /// refuses to open ("magic number mismatch"): docs/reliability.md, bug 1.
    pub creation_refused: u64,
}

impl Tally {
    pub fn add(&mut self, o: &Tally) {
        self.crash_points += o.crash_points;
        self.recoveries += o.recoveries;
        self.repair_crashes += o.repair_crashes;
        self.in_flight_landed += o.in_flight_landed;
        self.in_flight_absent += o.in_flight_absent;
        self.in_flight_noop += o.in_flight_noop;
        self.acked_ops += o.acked_ops;
        self.lost += o.lost;
        self.creation_refused += o.creation_refused;
    }

    /// The recovery figures of a sweep's report; `fault` names what struck during the repairs.
    pub fn recoveries_line(&self, fault: &str) -> String {
        format!(
            "{} recoveries verified ({} after {fault} during repair), in flight landed {} / absent {} / no-op {}, creation interrupted and refused {}",
            self.recoveries,
            self.repair_crashes,
            self.in_flight_landed,
            self.in_flight_absent,
            self.in_flight_noop,
            self.creation_refused
        )
    }
}

/// Fails the test listing the first 20 failures, if there are any.
pub fn assert_no_failures(failures: &[String]) {
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures
            .iter()
            .take(20)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Which reference state a recovered store is in.
pub fn which_state(script: &Script, store: &Store, p: &Progress) -> Result<usize, String> {
    let got = state(store, &script.probes)?;
    for k in p.allowed() {
        if script.states.get(k) == Some(&got) {
            return Ok(k);
        }
    }
    let expected = &script.states[p.acked.min(script.states.len() - 1)];
    Err(format!(
        "the recovered state is none of the allowed ones ({:?} of {} acknowledged; in flight: {}): {}",
        p.allowed(),
        p.acked,
        p.in_flight,
        first_difference(&got, expected)
    ))
}

/// Runs `f`, turning a panic into an error (a panic anywhere is a failure of the invariants,
/// but the sweep goes on to report every failing case).
pub fn no_panic<R>(f: impl FnOnce() -> Result<R, String>) -> Result<R, String> {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            Err(format!("PANIC: {msg}"))
        }
    }
}

/// Like [`which_state`], with reads only (no probe transactions): for a store on a full disk.
pub fn which_state_read_only(
    script: &Script,
    store: &Store,
    p: &Progress,
) -> Result<usize, String> {
    let strip = |s: &str| {
        s.lines()
            .filter(|l| !l.starts_with("probe "))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let got = strip(&state(store, &Probes::default())?);
    for k in p.allowed() {
        if script.states.get(k).map(|s| strip(s)) == Some(got.clone()) {
            return Ok(k);
        }
    }
    let expected = strip(&script.states[p.acked.min(script.states.len() - 1)]);
    Err(format!(
        "the state read back is none of the allowed ones ({:?}): {}",
        p.allowed(),
        first_difference(&got, &expected)
    ))
}

/// Reopens `image` (repairing it), checks it against the oracle, verifies it and checks that
/// it keeps working. Returns the state index it was in. A panic is reported as an error.
pub fn check_recovery(
    script: &Script,
    image: Vec<u8>,
    p: &Progress,
    seed: u64,
    tally: &mut Tally,
) -> Result<usize, String> {
    no_panic(|| check_recovery_inner(script, image, p, seed, tally))
}

fn check_recovery_inner(
    script: &Script,
    image: Vec<u8>,
    p: &Progress,
    seed: u64,
    tally: &mut Tally,
) -> Result<usize, String> {
    let opened = Store::with_backend(
        SimDisk::from_image(image, seed),
        "recovered",
        options(script.exclusive),
    );
    let store = match opened {
        Ok(s) => s,
        Err(e) if !p.opened && e.to_string().contains("magic number mismatch") => {
            // The creation was interrupted between redb's two header writes: nothing was
            // acknowledged, but the file cannot be opened. Counted, and guarded separately.
            tally.creation_refused += 1;
            return Ok(0);
        }
        Err(e) => return Err(format!("reopening after the crash failed: {e}")),
    };
    check_recovered(script, store, p, tally)
}

/// What [`check_recovery_of_file`] adds to its error when the open said it had dropped the newest
/// commit after repairing a torn tail (`TailRepair::dropped_newest_commit`): a loss it reported.
pub const DROPPED_REPORTED: &str =
    "the open reported dropping the newest commit after its torn-tail repair";

/// [`check_recovery`] for a real file: `file` is opened by path (as the CLI opens it), so that
/// what somna does to the file itself before redb sees it (the torn-tail repair) is covered.
pub fn check_recovery_of_file(
    script: &Script,
    file: &std::path::Path,
    p: &Progress,
    tally: &mut Tally,
) -> Result<usize, String> {
    no_panic(|| {
        let store = Store::open_with(file, options(script.exclusive))
            .map_err(|e| format!("reopening after the crash failed: {e}"))?;
        let dropped = store
            .repaired_tail()
            .is_some_and(|r| r.dropped_newest_commit);
        check_recovered(script, store, p, tally).map_err(|e| {
            if dropped {
                format!("{e} ({DROPPED_REPORTED})")
            } else {
                e
            }
        })
    })
}

/// Checks a reopened store against the oracle, verifies it and checks that it keeps working.
fn check_recovered(
    script: &Script,
    mut store: Store,
    p: &Progress,
    tally: &mut Tally,
) -> Result<usize, String> {
    let k = which_state(script, &store, p)?;
    tally.recoveries += 1;
    tally.acked_ops += p.acked as u64;
    if p.in_flight && p.opened {
        if script.states.get(p.acked) == script.states.get(p.acked + 1) {
            tally.in_flight_noop += 1;
        } else if k > p.acked {
            tally.in_flight_landed += 1;
        } else {
            tally.in_flight_absent += 1;
        }
    }
    let report = store
        .verify()
        .map_err(|e| format!("verify failed to run: {e}"))?;
    if !report.ok() {
        return Err(format!("verify found problems: {:?}", report.problems));
    }
    // The store keeps working: a write and a read of each kind.
    let id = store
        .note("default", NewMemory::new("written after recovery"))
        .map_err(|e| format!("a note after recovery failed: {e}"))?;
    let m = store
        .memory("default", id)
        .map_err(|e| format!("reading the note after recovery failed: {e}"))?;
    if m.text != "written after recovery" {
        return Err(format!(
            "the note after recovery reads back as {:?}",
            m.text
        ));
    }
    store
        .session_append("after", &[r#"{"after":"recovery"}"#], None, None)
        .map_err(|e| format!("a session append after recovery failed: {e}"))?;
    let items = store
        .session_items("after", None)
        .map_err(|e| format!("session items after recovery failed: {e}"))?;
    if items.last().map(String::as_str) != Some(r#"{"after":"recovery"}"#) {
        return Err(format!(
            "the session append after recovery reads back as {items:?}"
        ));
    }
    store
        .wake_text("default", &WakeOptions::default())
        .map_err(|e| format!("wake after recovery failed: {e}"))?;
    Ok(k)
}

/// Crashes again while the recovery of `image` runs (a power loss at its `sync`-th sync, or an
/// I/O error at its `op`-th operation), then recovers what that left and checks it again.
/// Returns false when the recovery finished before the crash point (nothing was explored).
pub fn check_crash_in_repair(
    script: &Script,
    image: &[u8],
    p: &Progress,
    plan: FaultPlan,
    seed: u64,
    tally: &mut Tally,
) -> Result<bool, String> {
    no_panic(|| check_crash_in_repair_inner(script, image, p, plan, seed, tally))
}

fn check_crash_in_repair_inner(
    script: &Script,
    image: &[u8],
    p: &Progress,
    plan: FaultPlan,
    seed: u64,
    tally: &mut Tally,
) -> Result<bool, String> {
    let disk = SimDisk::from_image(image.to_vec(), seed);
    disk.set_plan(plan);
    let opened = Store::with_backend(disk.clone(), "repairing", options(script.exclusive));
    let hit = disk.is_crashed() || disk.fired().is_some();
    if let Ok(store) = &opened {
        if !hit {
            // The repair finished: the store must be right already.
            which_state(script, store, p)?;
        }
    }
    drop(opened);
    if !hit {
        return Ok(false);
    }
    tally.repair_crashes += 1;
    let after = match disk.crash_image() {
        Some(img) => img,
        None => disk.live_image(),
    };
    check_recovery(script, after, p, seed ^ 0xA5A5, tally)
        .map_err(|e| format!("after a crash during the repair ({:?}): {e}", disk.fired()))?;
    Ok(true)
}

/// Runs the rest of the script on a recovered `store` that is in state `k` (operations `k..`),
/// expecting the reference outcomes and, at the end, the reference's final state.
pub fn continue_from(script: &Script, store: &Store, k: usize) -> Result<(), String> {
    for (i, op) in script.ops.iter().enumerate().skip(k) {
        let got = outcome(apply(store, op));
        if got != script.outcomes[i] {
            return Err(format!(
                "after recovery, operation {i} ({}) returned {got:?}, the reference {:?}",
                op.name(),
                script.outcomes[i]
            ));
        }
    }
    let got = state(store, &script.probes)?;
    let want = script.states.last().map(String::as_str).unwrap_or("");
    if got != want {
        return Err(format!(
            "after recovery and the rest of the workload: {}",
            first_difference(&got, want)
        ));
    }
    Ok(())
}

/// How many syncs and I/O operations opening `image` takes (its repair included).
pub fn repair_cost(script: &Script, image: &[u8]) -> (u64, u64) {
    let disk = SimDisk::from_image(image.to_vec(), 0);
    let s = Store::with_backend(disk.clone(), "probe", options(script.exclusive));
    let st = disk.stats();
    drop(s);
    (st.syncs, st.ops)
}

/// The sweep's size, from the environment: `SOMNA_CRASH_LONG=1` for the long run,
/// `SOMNA_CRASH_SEEDS` and `SOMNA_CRASH_OPS` to set them, `SOMNA_CRASH_SEED` to run one seed
/// (to reproduce a failure).
#[derive(Debug, Clone)]
pub struct Sweep {
    pub seeds: Vec<u64>,
    pub ops: usize,
    pub long: bool,
}

impl Sweep {
    pub fn from_env(
        default_seeds: u64,
        default_ops: usize,
        long_seeds: u64,
        long_ops: usize,
    ) -> Sweep {
        let var = |n: &str| std::env::var(n).ok().and_then(|v| v.parse::<u64>().ok());
        let long = std::env::var("SOMNA_CRASH_LONG").is_ok_and(|v| v == "1");
        let (mut seeds, mut ops) = if long {
            (long_seeds, long_ops)
        } else {
            (default_seeds, default_ops)
        };
        if let Some(s) = var("SOMNA_CRASH_SEEDS") {
            seeds = s;
        }
        if let Some(o) = var("SOMNA_CRASH_OPS") {
            ops = o as usize;
        }
        let seeds = match var("SOMNA_CRASH_SEED") {
            Some(s) => vec![s],
            None => (0..seeds).collect(),
        };
        Sweep { seeds, ops, long }
    }
}

/// Mixes numbers into one seed.
pub fn mix(a: u64, b: u64) -> u64 {
    let mut r = SimRng::new(a.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ b);
    r.next_u64()
}

/// A power-loss image of the disk now, under a random survival policy drawn from `seed`.
pub fn power_loss_now(disk: &SimDisk, seed: u64) -> Vec<u8> {
    let mut r = SimRng::new(seed);
    let s = Survival::random(&mut r);
    disk.power_loss_image(s, r.next_u64())
}

#[cfg(test)]
mod tests {
    use super::mask_revisions;

    #[test]
    fn both_revisions_of_a_conflict_are_masked() {
        assert_eq!(
            mask_revisions("the session is at revision 1796280574354857, not 1796280574246563: it changed since you read it"),
            "the session is at revision _, not _: it changed since you read it"
        );
        assert_eq!(
            mask_revisions("session s1 revision=42 count=3 revision: 7"),
            "session s1 revision=_ count=3 revision: _"
        );
        assert_eq!(mask_revisions("no number here"), "no number here");
    }
}
