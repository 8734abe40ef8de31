//! Reading the index back, for ranking: a term's postings in its blocks, a term's blocks as
//! stored (for a reader that decodes only the blocks it needs), and the postings the tail holds
//! for a set of terms. `crate::memory::search` ranks with these and never names the index's
//! tables; [`super::write`] is the other side, [`super::build`] the rebuild.

use std::ops::ControlFlow;

use crate::error::Result;
use crate::storage::index::{block_count, decode_block, decode_forward, Posting, STATS_DOC};
use crate::storage::kv::{Dir, KvRead};
use crate::storage::tables::{SEARCH_POSTINGS, SEARCH_TAIL};

/// Visits each posting of `term` in scope `sid`'s blocks, in document order (not the tail).
pub fn each_posting(
    kv: &(impl KvRead + ?Sized),
    sid: u32,
    term: &str,
    mut f: impl FnMut(Posting),
) -> Result<()> {
    SEARCH_POSTINGS.scan(
        kv,
        (sid, term, 0)..=(sid, term, u64::MAX),
        Dir::Forward,
        |(_, _, first), v| {
            decode_block(sid, term, first, v)?
                .into_iter()
                .for_each(&mut f);
            Ok(ControlFlow::Continue(()))
        },
    )
}

/// A term's blocks as stored: `(first document, bytes)` in document order.
pub type RawBlocks = Vec<(u64, Vec<u8>)>;

/// `term`'s blocks in scope `sid` as stored, and how many postings they hold (read from each
/// block's header, nothing decoded).
pub fn raw_blocks(kv: &(impl KvRead + ?Sized), sid: u32, term: &str) -> Result<(RawBlocks, u64)> {
    let mut blocks = Vec::new();
    let mut n = 0u64;
    SEARCH_POSTINGS.scan(
        kv,
        (sid, term, 0)..=(sid, term, u64::MAX),
        Dir::Forward,
        |(_, _, first), v| {
            n = n.saturating_add(block_count(sid, term, first, v)?);
            blocks.push((first, v.to_vec()));
            Ok(ControlFlow::Continue(()))
        },
    )?;
    Ok((blocks, n))
}

/// Visits the postings scope `sid`'s tail holds for `terms`, in document order: `f(i, posting)`
/// for each tail document that contains `terms[i]` (one scan of the tail for every term).
pub fn each_tail_posting(
    kv: &(impl KvRead + ?Sized),
    sid: u32,
    terms: &[String],
    mut f: impl FnMut(usize, Posting),
) -> Result<()> {
    SEARCH_TAIL.scan(
        kv,
        (sid, 0)..(sid, STATS_DOC),
        Dir::Forward,
        |(_, doc), v| {
            let fw = decode_forward(sid, doc, v)?;
            for (i, t) in terms.iter().enumerate() {
                if let Ok(j) = fw.terms.binary_search_by(|(x, _)| x.as_str().cmp(t)) {
                    let tf = fw.terms.get(j).map_or(0, |e| e.1);
                    f(
                        i,
                        Posting {
                            doc,
                            tf,
                            len: fw.len,
                        },
                    );
                }
            }
            Ok(ControlFlow::Continue(()))
        },
    )
}
