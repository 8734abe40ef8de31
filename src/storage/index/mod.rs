//! The ranked-search index (store format 2): what it stores and how its values are encoded.
//! Every write that changes a memory's or a summary's text keeps it in the same transaction
//! ([`write`]); [`build`] rebuilds it from the log and the tree (the upgrade from format 1,
//! `reindex`) and compares the stored index with the rebuilt one (`verify`). Querying it is
//! `crate::memory::search`'s business. docs/design.md, section 12, gives the bytes.
//!
//! A **document** is a memory (its id) or a summary (`level << 56 | start`: memories sort
//! first, and a summary's document names its block). Per scope the index holds:
//! - the **tail** (table `search_tail`, key `(scope id, document)`): one [`Forward`] entry per
//!   recently indexed document, its terms with their frequencies and its length. A note writes
//!   one entry beside the previous note's, on the same leaf;
//! - the **postings** (table `search_postings`, key `(scope id, term, first document)`): blocks
//!   of up to [`BLOCK_MAX`] postings in document order. When the tail reaches [`TAIL_MAX`]
//!   documents, the write that fills it folds every tail entry into the blocks (each touched
//!   term's block read and rewritten once per fold, not once per note); a batch that would fill
//!   the tail is folded with it at once, without tail entries;
//! - the **statistics** ([`IndexStats`], in the tail at `(scope id, u64::MAX)`): documents,
//!   their total length, the tail's size: BM25's N and average length, per scope.

use serde::{Deserialize, Serialize};

use crate::domain::block::Block;
use crate::error::{Error, Result};
use crate::storage::codec::{decode, encode, WireOut};
use crate::storage::kv::{KvRead, KvWrite};
use crate::storage::tables::SEARCH_TAIL;

pub mod build;
pub mod write;

/// Documents in a scope's tail before the write that reaches this many folds them into blocks.
pub const TAIL_MAX: u64 = 256;
/// Most postings in one block.
pub const BLOCK_MAX: usize = 128;
/// The tail key (document) of a scope's statistics.
pub const STATS_DOC: u64 = u64::MAX;
/// A summary's document is its level shifted by this, or-ed with its start.
const LEVEL_SHIFT: u32 = 56;

/// The text of a redacted memory: never indexed (`crate::memory::lifecycle::TOMBSTONE`).
pub const TOMBSTONE: &str = "[redacted]";

/// The terms of `text` as the index sees them ([`crate::domain::tokenize::tokens`]), in order,
/// repeated as they occur.
pub fn terms(text: &str) -> Vec<String> {
    crate::domain::tokenize::tokens(text)
}

/// The document of a memory or summary block (`Block::single(id)` for memory `id`); `None` for
/// a block beyond what a document can name (a start of 2^56 or more: never in practice, and never indexed).
pub fn block_doc(b: Block) -> Option<u64> {
    (b.lo() < 1 << LEVEL_SHIFT).then(|| (u64::from(b.level()) << LEVEL_SHIFT) | b.lo())
}

/// The block a document names (a memory is a block of level 0).
pub fn doc_block(doc: u64) -> Result<Block> {
    let level = u8::try_from(doc >> LEVEL_SHIFT).unwrap_or(u8::MAX);
    Block::new(level, doc & ((1 << LEVEL_SHIFT) - 1)).map_err(|e| Error::invalid("document", e.0))
}

/// A tail entry: one document's terms, each with its frequency, sorted by term; and its length
/// (the number of terms, repeats counted).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Forward {
    /// The document's length in terms.
    pub len: u32,
    /// Each distinct term and how often it occurs, sorted by term.
    pub terms: Vec<(String, u32)>,
}

impl Forward {
    /// The entry of `text`; `None` when it has no term (such a document is not indexed).
    pub fn of(text: &str) -> Option<Forward> {
        if text == TOMBSTONE {
            return None;
        }
        let mut all = terms(text);
        let len = u32::try_from(all.len()).unwrap_or(u32::MAX);
        all.sort_unstable();
        // Runs of equal terms, counted (a short memory's few terms: cheaper than a map).
        let mut terms: Vec<(String, u32)> = Vec::with_capacity(all.len());
        for t in all {
            match terms.last_mut() {
                Some((last, n)) if *last == t => *n += 1,
                _ => terms.push((t, 1)),
            }
        }
        (len > 0).then_some(Forward { len, terms })
    }
}

impl Forward {
    /// [`encode`] of the entry, byte for byte, without serde (a note writes one).
    pub fn encode(&self) -> Vec<u8> {
        let room: usize = self.terms.iter().map(|(t, _)| t.len() + 3).sum();
        let mut w = WireOut::with_capacity(room + 8);
        w.u64(u64::from(self.len));
        w.u64(self.terms.len() as u64);
        for (t, n) in &self.terms {
            w.str(t);
            w.u64(u64::from(*n));
        }
        w.seal()
    }
}

/// A scope's index statistics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexStats {
    /// Documents indexed (tail and blocks).
    pub docs: u64,
    /// Their total length in terms.
    pub total_len: u64,
    /// Documents in the tail.
    pub tail: u64,
}

/// One posting: a document, the term's frequency in it, the document's length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Posting {
    /// The document.
    pub doc: u64,
    /// How often the term occurs in it.
    pub tf: u32,
    /// Its length in terms.
    pub len: u32,
}

/// Encodes a block (postings in document order, at least one): each posting as (gap from the
/// previous document, or 0 for the first, which the key holds; tf; length), postcard varints.
pub fn encode_block(postings: &[Posting]) -> Result<Vec<u8>> {
    let mut prev = postings.first().map_or(0, |p| p.doc);
    let rows: Vec<(u64, u32, u32)> = postings
        .iter()
        .map(|p| {
            let gap = p.doc.wrapping_sub(prev);
            prev = p.doc;
            (gap, p.tf, p.len)
        })
        .collect();
    encode(&rows)
}

/// A posting block's key, as errors name it.
struct BlockKey<'a>(u32, &'a str, u64);

impl std::fmt::Display for BlockKey<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "(scope {}, {:?}, {})", self.0, self.1, self.2)
    }
}

/// Decodes the block at `(sid, term, first)`.
pub fn decode_block(sid: u32, term: &str, first: u64, bytes: &[u8]) -> Result<Vec<Posting>> {
    let key = BlockKey(sid, term, first);
    let rows: Vec<(u64, u32, u32)> = decode("search_postings", &key, bytes)?;
    let mut doc = first;
    let mut out = Vec::with_capacity(rows.len());
    for (i, (gap, tf, len)) in rows.into_iter().enumerate() {
        doc = match doc.checked_add(gap) {
            Some(d) if i == 0 && gap == 0 || i > 0 && gap > 0 => d,
            _ => {
                return Err(Error::corrupt(
                    "search_postings",
                    &key,
                    "postings out of order",
                ))
            }
        };
        out.push(Posting { doc, tf, len });
    }
    if out.is_empty() {
        return Err(Error::corrupt("search_postings", &key, "an empty block"));
    }
    Ok(out)
}

/// Scope `sid`'s statistics (zero for a scope never indexed).
pub fn read_stats(kv: &(impl KvRead + ?Sized), sid: u32) -> Result<IndexStats> {
    match SEARCH_TAIL.get(kv, (sid, STATS_DOC))? {
        Some(v) => decode("search_tail", &format_args!("(scope {sid}, stats)"), &v),
        None => Ok(IndexStats::default()),
    }
}

/// Stores scope `sid`'s statistics (removes them when nothing is indexed).
pub fn write_stats(kv: &mut (impl KvWrite + ?Sized), sid: u32, s: &IndexStats) -> Result<()> {
    if *s == IndexStats::default() {
        SEARCH_TAIL.delete(kv, (sid, STATS_DOC)).map(|_| ())
    } else {
        SEARCH_TAIL.put(kv, (sid, STATS_DOC), &encode(s)?)
    }
}

/// Decodes the tail entry of document `doc`.
pub fn decode_forward(sid: u32, doc: u64, bytes: &[u8]) -> Result<Forward> {
    decode("search_tail", &format_args!("(scope {sid}, {doc})"), bytes)
}

#[cfg(test)]
mod forward_tests {
    use super::*;

    #[test]
    fn the_hand_encoder_writes_what_serde_writes() {
        let long = "x".repeat(MAX_TERM_BYTES_FOR_TEST);
        let cases = [
            Forward::of("the build of module 7 passed after fixing flaky test 3"),
            Forward::of("東京 café 2023 running runs ran"),
            Some(Forward {
                len: 300,
                terms: vec![(long, 200), ("é".into(), 1), (String::new(), 0)],
            }),
            Some(Forward {
                len: u32::MAX,
                terms: Vec::new(),
            }),
        ];
        for f in cases.into_iter().flatten() {
            assert_eq!(f.encode(), encode(&f).unwrap(), "{f:?}");
            let back = decode_forward(1, 2, &f.encode()).unwrap();
            assert_eq!(back, f);
        }
    }

    const MAX_TERM_BYTES_FOR_TEST: usize = 200;
}
