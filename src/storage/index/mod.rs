//! The ranked-search index (store format 2): what it stores and how its values are encoded.
//! Every write that changes a memory's or a summary's text keeps it in the same transaction
//! ([`write`](mod@write)); [`build`] rebuilds it from the log and the tree (the upgrade from format 1,
//! `reindex`) and compares the stored index with the rebuilt one (`verify`); [`read`] reads
//! postings back for `crate::memory::search`, which ranks them and never names the tables. docs/design.md, section 12, gives the bytes.
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
use crate::storage::codec::{decode, encode, payload, wire_error, Wire, WireOut};
use crate::storage::kv::{KvRead, KvWrite};
use crate::storage::tables::SEARCH_TAIL;

pub mod build;
pub mod read;
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
    /// Each of the entry's terms with its posting in document `doc`, in term order.
    pub fn into_postings(self, doc: u64) -> impl Iterator<Item = (String, Posting)> {
        let len = self.len;
        self.terms
            .into_iter()
            .map(move |(term, tf)| (term, Posting { doc, tf, len }))
    }

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
/// Written by hand: byte for byte [`encode`] of the rows as a `Vec<(u64, u32, u32)>` (the tests
/// compare them), without the rows' copy and serde's per-field calls, on every fold's path.
pub fn encode_block(postings: &[Posting]) -> Vec<u8> {
    let mut w = WireOut::with_capacity(postings.len() * 4 + 2);
    w.u64(postings.len() as u64);
    let mut prev = postings.first().map_or(0, |p| p.doc);
    for p in postings {
        w.u64(p.doc.wrapping_sub(prev));
        prev = p.doc;
        w.u64(u64::from(p.tf));
        w.u64(u64::from(p.len));
    }
    w.seal()
}

/// A posting block's key, as errors name it.
struct BlockKey<'a>(u32, &'a str, u64);

impl std::fmt::Display for BlockKey<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "(scope {}, {:?}, {})", self.0, self.1, self.2)
    }
}

/// Decodes the block at `(sid, term, first)`. Read by hand with [`Wire`]: what [`decode`] of
/// the rows as a `Vec<(u64, u32, u32)>` accepts, with its errors (the tests compare them on
/// every cut of a block); a query reads every block of its terms this way.
pub fn decode_block(sid: u32, term: &str, first: u64, bytes: &[u8]) -> Result<Vec<Posting>> {
    let key = BlockKey(sid, term, first);
    let mut w = Wire::new(payload("search_postings", &key, bytes)?);
    let n = w
        .u64()
        .ok_or_else(|| wire_error("search_postings", &key, None))?;
    // Each posting takes at least three bytes: a hostile count reserves no more than the bytes.
    let room = usize::try_from(n).unwrap_or(usize::MAX).min(w.left() / 3);
    let mut out = Vec::with_capacity(room);
    let mut doc = first;
    for i in 0..n {
        let (Some(gap), Some(tf), Some(len)) = (w.u64(), w.u32(), w.u32()) else {
            return Err(wire_error("search_postings", &key, None));
        };
        doc = next_doc(doc, gap, i == 0)
            .ok_or_else(|| Error::corrupt("search_postings", &key, "postings out of order"))?;
        out.push(Posting { doc, tf, len });
    }
    if w.left() != 0 {
        return Err(wire_error("search_postings", &key, Some(&w)));
    }
    if out.is_empty() {
        return Err(Error::corrupt("search_postings", &key, "an empty block"));
    }
    Ok(out)
}

/// The number of postings in the block at `(sid, term, first)`, read from its header only (the
/// envelope's checksum is checked, the postings are not decoded): what a pruned query needs of a
/// term it does not score in full (docs/design.md, section 12.6.1).
pub fn block_count(sid: u32, term: &str, first: u64, bytes: &[u8]) -> Result<u64> {
    let key = BlockKey(sid, term, first);
    let mut w = Wire::new(payload("search_postings", &key, bytes)?);
    w.u64()
        .ok_or_else(|| wire_error("search_postings", &key, None))
}

/// A block's next document: `doc` plus `gap`, where the first posting's gap is 0 (the key holds
/// its document) and every later one's positive; `None` when out of order or past `u64::MAX`.
fn next_doc(doc: u64, gap: u64, first: bool) -> Option<u64> {
    let in_order = if first { gap == 0 } else { gap > 0 };
    doc.checked_add(gap).filter(|_| in_order)
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

/// Decodes the tail entry of document `doc`. Read by hand with [`Wire`]: what [`decode`]
/// accepts for a [`Forward`], with its errors (the tests compare them on every cut); a fold
/// reads every tail entry, and a query the whole tail.
pub fn decode_forward(sid: u32, doc: u64, bytes: &[u8]) -> Result<Forward> {
    let key = TailKey(sid, doc);
    let mut w = Wire::new(payload("search_tail", &key, bytes)?);
    match read_forward(&mut w) {
        Some(f) if w.left() == 0 => Ok(f),
        Some(_) => Err(wire_error("search_tail", &key, Some(&w))),
        None => Err(wire_error("search_tail", &key, None)),
    }
}

/// A tail entry's key, as errors name it.
struct TailKey(u32, u64);

impl std::fmt::Display for TailKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "(scope {}, {})", self.0, self.1)
    }
}

fn read_forward(w: &mut Wire<'_>) -> Option<Forward> {
    let len = w.u32()?;
    let n = w.u64()?;
    // Each term takes at least two bytes: a hostile count reserves no more than the bytes.
    let mut terms = Vec::with_capacity(usize::try_from(n).ok()?.min(w.left() / 2));
    for _ in 0..n {
        let t = w.str()?;
        terms.push((t.to_owned(), w.u32()?));
    }
    Some(Forward { len, terms })
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
            // Every cut of the payload, resealed, and the payload with a byte after it: read
            // as serde reads them.
            let bytes = f.encode();
            let body = &bytes[1..bytes.len() - 4];
            let mut cases: Vec<Vec<u8>> = (0..body.len()).map(|n| body[..n].to_vec()).collect();
            cases.push([body, &[0]].concat());
            for body in cases {
                let mut w = WireOut::with_capacity(body.len());
                w.raw(&body);
                let sealed = w.seal();
                let ours = decode_forward(1, 2, &sealed);
                let theirs: Result<Forward> = decode("search_tail", &"(scope 1, 2)", &sealed);
                match (&ours, &theirs) {
                    (Ok(a), Ok(b)) => assert_eq!(a, b),
                    (Err(_), Err(_)) => {}
                    _ => panic!("{} bytes: ours {ours:?}, serde's {theirs:?}", body.len()),
                }
            }
        }
        let mut w = WireOut::with_capacity(16);
        w.u64(3);
        w.u64(u64::MAX);
        assert!(decode_forward(1, 2, &w.seal()).is_err());
    }

    const MAX_TERM_BYTES_FOR_TEST: usize = 200;

    /// Postings of every varint width: small and huge gaps, frequencies and lengths up to
    /// `u32::MAX`, one posting and a full block.
    fn blocks() -> Vec<Vec<Posting>> {
        let mut out = vec![vec![Posting {
            doc: 7,
            tf: 1,
            len: 12,
        }]];
        let mut doc = 1u64 << 56;
        let mut full = Vec::new();
        for i in 0..BLOCK_MAX as u64 {
            doc += 1 + i * i * i * 977;
            let tf = if i % 9 == 0 {
                u32::MAX
            } else {
                (i * 131) as u32
            };
            full.push(Posting {
                doc,
                tf,
                len: (i as u32).wrapping_mul(2_654_435_761),
            });
        }
        out.push(full);
        out.push(vec![
            Posting {
                doc: 0,
                tf: 0,
                len: 0,
            },
            Posting {
                doc: u64::MAX,
                tf: 128,
                len: 16_384,
            },
        ]);
        out
    }

    fn rows(postings: &[Posting]) -> Vec<(u64, u32, u32)> {
        let mut prev = postings.first().map_or(0, |p| p.doc);
        postings
            .iter()
            .map(|p| {
                let gap = p.doc.wrapping_sub(prev);
                prev = p.doc;
                (gap, p.tf, p.len)
            })
            .collect()
    }

    /// serde's reading of a block, as `decode_block` read it before it was written by hand (the
    /// order of its documents checked by the same `next_doc`).
    fn serde_block(first: u64, bytes: &[u8]) -> Result<Vec<Posting>> {
        let key = BlockKey(1, "t", first);
        let rows: Vec<(u64, u32, u32)> = decode("search_postings", &key, bytes)?;
        let mut doc = first;
        let mut out = Vec::new();
        for (i, (gap, tf, len)) in rows.into_iter().enumerate() {
            doc = next_doc(doc, gap, i == 0)
                .ok_or_else(|| Error::corrupt("search_postings", &key, "postings out of order"))?;
            out.push(Posting { doc, tf, len });
        }
        if out.is_empty() {
            return Err(Error::corrupt("search_postings", &key, "an empty block"));
        }
        Ok(out)
    }

    #[test]
    fn blocks_are_written_and_read_as_serde_writes_and_reads_them() {
        for b in blocks() {
            let first = b[0].doc;
            let bytes = encode_block(&b);
            assert_eq!(bytes, encode(&rows(&b)).unwrap());
            assert_eq!(decode_block(1, "t", first, &bytes).unwrap(), b);
            // Every cut of the payload, sealed again so that only the postcard layer differs,
            // and the whole payload with a byte after it; then a gap of 0 after the first.
            let body = &bytes[1..bytes.len() - 4];
            let mut cases: Vec<Vec<u8>> = (0..body.len()).map(|n| body[..n].to_vec()).collect();
            cases.push([body, &[0]].concat());
            cases.push([body, &[1]].concat());
            let mut zero_gap = rows(&b);
            zero_gap.push((0, 1, 1));
            cases.push(encode(&zero_gap).unwrap()[1..].to_vec());
            cases.push(encode(&Vec::<(u64, u32, u32)>::new()).unwrap()[1..].to_vec());
            for body in cases {
                let mut w = WireOut::with_capacity(body.len());
                w.raw(&body);
                let sealed = w.seal();
                let (ours, theirs) = (
                    decode_block(1, "t", first, &sealed),
                    serde_block(first, &sealed),
                );
                match (&ours, &theirs) {
                    (Ok(a), Ok(b)) => assert_eq!(a, b),
                    (Err(_), Err(_)) => {}
                    _ => panic!("{} bytes: ours {ours:?}, serde's {theirs:?}", body.len()),
                }
            }
        }
        // A count far past the bytes reserves nothing it cannot fill.
        let mut w = WireOut::with_capacity(16);
        w.u64(u64::MAX);
        assert!(decode_block(1, "t", 0, &w.seal()).is_err());
    }
}
