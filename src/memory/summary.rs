//! Stored summaries: the `tree` table's values (one summary per aligned block, keyed by (scope
//! id, level, aligned start)) read and decoded, the `pending` table's first block, and a
//! summary's line as wake, zoom and merge prompts show it. The summary tree's verbs (prompts,
//! `nap`, `forget`, `zoom`, `why`) are in `tree/`; wake and search read summaries here.

use std::fmt;

use crate::domain::block::Block;
use crate::domain::record::{BuiltFrom, Node, Summary};
use crate::domain::text::display_safe;
use crate::error::{Error, Result};
use crate::memory::log::itoa_u64;
use crate::storage::codec::{payload, wire_error, Wire};
use crate::storage::kv::{Dir, KvRead};
use crate::storage::tables::{PENDING, TREE};

pub(crate) struct TreeKey(pub u32, pub Block);
impl fmt::Display for TreeKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "(scope {}, {})", self.0, self.1)
    }
}

pub(crate) fn get_summary(
    kv: &(impl KvRead + ?Sized),
    sid: u32,
    b: Block,
) -> Result<Option<Summary>> {
    TREE.read(kv, (sid, b.level(), b.lo()), |v| decode_summary(sid, b, v))
}

/// Decodes a `tree` value: the bytes serde and postcard write for [`Summary`] (section 5.5 of
/// docs/design.md), read by hand with [`Wire`] on the paths that read many (wake, zoom): the
/// same values accepted, the same refused (a test compares the two on every cut).
pub(crate) fn decode_summary(sid: u32, b: Block, bytes: &[u8]) -> Result<Summary> {
    let key = TreeKey(sid, b);
    let mut w = Wire::new(payload("tree", &key, bytes)?);
    let s = (|| {
        let text = w.str()?.to_owned();
        let written_us = w.i64()?;
        let built_from = match w.u32()? {
            0 => BuiltFrom::Raw,
            1 => BuiltFrom::Children {
                left_written_us: w.i64()?,
                right_written_us: w.i64()?,
            },
            2 => BuiltFrom::Imported,
            _ => return None,
        };
        Some(Summary {
            text,
            written_us,
            built_from,
            inputs_crc: w.u32()?,
        })
    })()
    .ok_or_else(|| wire_error("tree", &key, None))?;
    if w.left() != 0 {
        return Err(wire_error("tree", &key, Some(&w)));
    }
    Ok(s)
}

/// Streams the summaries of scope `sid` at `level` with starts from `first` to `last`
/// (inclusive), in order, to `f`: one range scan for a run of consecutive blocks.
pub(crate) fn each_summary(
    kv: &(impl KvRead + ?Sized),
    sid: u32,
    level: u8,
    first: u64,
    last: u64,
    mut f: impl FnMut(Block, Summary) -> Result<()>,
) -> Result<()> {
    TREE.each(
        kv,
        (sid, level, first)..=(sid, level, last),
        |(_, level, lo), v| {
            let b = stored_block("tree", sid, level, lo)?;
            f(b, decode_summary(sid, b, v)?)
        },
    )
}

pub(crate) fn pending_range(sid: u32) -> std::ops::RangeInclusive<(u32, u8, u64)> {
    (sid, 0, 0)..=(sid, u8::MAX, u64::MAX)
}

pub(crate) fn first_pending(kv: &(impl KvRead + ?Sized), sid: u32) -> Result<Option<Block>> {
    PENDING.edge(kv, pending_range(sid), Dir::Forward, |(_, level, lo), _| {
        stored_block("pending", sid, level, lo)
    })
}

/// Streams every summary node of scope `sid` to `f`, by level then start.
pub(crate) fn each_node(
    kv: &(impl KvRead + ?Sized),
    sid: u32,
    mut f: impl FnMut(Node) -> Result<()>,
) -> Result<()> {
    let range = (sid, 0, 0)..=(sid, u8::MAX, u64::MAX);
    TREE.each(kv, range, |(_, level, lo), v| {
        let block = stored_block("tree", sid, level, lo)?;
        let summary = decode_summary(sid, block, v)?;
        f(Node { block, summary })
    })
}

/// Renders a summary with its marker: `#lo-hi [stale] text` when an input changed since it
/// was written, else the plain line.
pub fn marked_summary_line(b: Block, s: &Summary, stale: bool) -> String {
    block_line(b, if stale { " [stale] " } else { " " }, &s.text)
}

/// Renders a summary as its wake line: `#lo-hi text`.
pub fn summary_line(b: Block, s: &Summary) -> String {
    block_line(b, " ", &s.text)
}

/// `#` + the block as [`Block`]'s `Display` writes it + `sep` + the text made display-safe,
/// built without `fmt` (a wake renders up to its whole budget of these).
fn block_line(b: Block, sep: &str, text: &str) -> String {
    let text = display_safe(text);
    let mut out = String::with_capacity(text.len() + sep.len() + 42);
    let mut num = [0u8; 20];
    if b.size() == 1 {
        out.push_str("##");
        out.push_str(itoa_u64(b.lo(), &mut num));
    } else {
        out.push('#');
        out.push_str(itoa_u64(b.lo(), &mut num));
        out.push('-');
        out.push_str(itoa_u64(b.hi().saturating_sub(1), &mut num));
    }
    out.push_str(sep);
    out.push_str(&text);
    out
}

/// The block of a key read from `table`: a key that is not a valid block is damage to the
/// store ([`Error::Corrupt`]), not a rejected input.
pub(crate) fn stored_block(table: &'static str, scope: u32, level: u8, lo: u64) -> Result<Block> {
    Block::new(level, lo).map_err(|e| Error::Corrupt {
        table,
        key: format!("(scope {scope}, level {level}, start {lo})"),
        reason: format!("not a block: {e}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::codec::{decode, encode};

    /// The hand decoder against serde: every variant and extreme field, then every cut of each
    /// payload and one byte more, and single bytes changed, each resealed with a good checksum:
    /// both accept the same values and refuse the same bytes.
    #[test]
    fn the_hand_decoder_reads_what_serde_reads_and_refuses_what_it_refuses() {
        let b = Block::raw(3, 8);
        let built = [
            BuiltFrom::Raw,
            BuiltFrom::Imported,
            BuiltFrom::Children {
                left_written_us: i64::MIN,
                right_written_us: i64::MAX,
            },
            BuiltFrom::Children {
                left_written_us: -1,
                right_written_us: 1_700_000_000_000_000,
            },
        ];
        let texts = ["", "a summary", "é\u{1F600} mixed", &"x".repeat(300)];
        for (i, built_from) in built.iter().enumerate() {
            for (j, text) in texts.iter().enumerate() {
                let s = Summary {
                    text: text.to_string(),
                    written_us: [0, -5, i64::MAX, 1_764_000_000_000_000][(i + j) % 4],
                    built_from: built_from.clone(),
                    inputs_crc: [0, 127, 128, u32::MAX][j],
                };
                let bytes = encode(&s).unwrap();
                assert_eq!(decode_summary(1, b, &bytes).unwrap(), s);
                let body = payload("tree", &TreeKey(1, b), &bytes).unwrap();
                let mut cases: Vec<Vec<u8>> = (0..body.len()).map(|n| body[..n].to_vec()).collect();
                cases.push([body, &[0][..]].concat());
                for k in 0..body.len() {
                    for x in [0x00, 0x01, 0x03, 0x7F, 0x80, 0xFF] {
                        let mut c = body.to_vec();
                        c[k] = x;
                        cases.push(c);
                    }
                }
                for c in cases {
                    let mut sealed = vec![bytes[0]];
                    sealed.extend_from_slice(&c);
                    sealed.extend_from_slice(&crc32fast::hash(&c).to_le_bytes());
                    let serde = decode::<Summary>("tree", &TreeKey(1, b), &sealed);
                    let hand = decode_summary(1, b, &sealed);
                    assert_eq!(serde.is_ok(), hand.is_ok(), "{c:?}");
                    if let (Ok(a), Ok(h)) = (serde, hand) {
                        assert_eq!(a, h);
                    }
                }
            }
        }
    }
}
