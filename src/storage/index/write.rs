//! Keeping the index in step with the texts, inside the write transaction that changes them:
//! [`add`] when a memory is appended or a summary written, [`remove`] before a text is redacted
//! or a summary dropped or replaced. A note costs one tail entry and the statistics (both on the
//! scope's last leaf of `search_tail`); every [`super::TAIL_MAX`]-th document folds the tail.

use crate::domain::block::Block;
use crate::error::Result;
use crate::storage::index::{
    block_doc, decode_block, decode_forward, encode_block, read_stats, write_stats, Forward,
    Posting, BLOCK_MAX, STATS_DOC, TAIL_MAX,
};
use crate::storage::kv::{Dir, KvWrite};
use crate::storage::tables::{SEARCH_POSTINGS, SEARCH_TAIL};

/// Indexes documents of scope `sid`, none of them indexed yet, as `(document, text)`: one tail
/// entry each (none for a text without terms), the statistics written once. A call that would
/// fill the tail (a batch) skips it: the tail and the new documents are folded into the posting
/// blocks together, each term's blocks rewritten once for the whole call instead of once per
/// [`TAIL_MAX`] documents. The index holds the same postings either way.
pub fn add<S: KvWrite + ?Sized>(kv: &mut S, sid: u32, docs: &[(u64, &str)]) -> Result<()> {
    let mut st = read_stats(kv, sid)?;
    let batch = st.tail.saturating_add(docs.len() as u64) >= TAIL_MAX;
    let mut folded = Vec::new();
    for &(doc, text) in docs {
        let Some(f) = Forward::of(text) else { continue };
        st.docs += 1;
        st.total_len += u64::from(f.len);
        if batch {
            folded.push((doc, f));
        } else {
            SEARCH_TAIL.put(kv, (sid, doc), &f.encode())?;
            st.tail += 1;
        }
    }
    if batch {
        fold(kv, sid, folded)?;
        st.tail = 0;
    }
    write_stats(kv, sid, &st)
}

/// Removes document `doc` of scope `sid`, whose indexed text is `text`, from the index: its tail
/// entry, or its posting under each of the text's terms. Afterwards nothing refers to it.
pub fn remove<S: KvWrite + ?Sized>(kv: &mut S, sid: u32, doc: u64, text: &str) -> Result<()> {
    let mut st = read_stats(kv, sid)?;
    let len = match SEARCH_TAIL.take(kv, (sid, doc))? {
        Some(v) => {
            st.tail = st.tail.saturating_sub(1);
            Some(decode_forward(sid, doc, &v)?.len)
        }
        None => {
            let mut len = None;
            for (term, _) in Forward::of(text).map(|f| f.terms).unwrap_or_default() {
                if let Some(p) = remove_posting(kv, sid, &term, doc)? {
                    len = Some(p.len);
                }
            }
            len
        }
    };
    if let Some(len) = len {
        st.docs = st.docs.saturating_sub(1);
        st.total_len = st.total_len.saturating_sub(u64::from(len));
        write_stats(kv, sid, &st)?;
    }
    Ok(())
}

/// A block of a term's postings: its first document, its postings, and whether it is the
/// term's last block.
type Found = (u64, Vec<Posting>, bool);

/// The block of `term` that holds (or would hold) `doc`: the last one starting at or before it,
/// else the first one.
fn block_for<S: KvWrite + ?Sized>(kv: &S, sid: u32, term: &str, doc: u64) -> Result<Option<Found>> {
    // The term's last block, by one probe: the answer when it starts at or before `doc` (a fold
    // appends after the term's last document) or when the term has no block (a new word,
    // number or name), the two common cases.
    let last = SEARCH_POSTINGS.edge(
        kv,
        (sid, term, 0)..=(sid, term, u64::MAX),
        Dir::Reverse,
        |(_, _, f), v| {
            if f > doc {
                return Ok(None);
            }
            Ok(Some((f, decode_block(sid, term, f, v)?, true)))
        },
    )?;
    let Some(None) = last else {
        return Ok(last.flatten());
    };
    let read = |(_, _, f): (u32, std::borrow::Cow<'_, str>, u64), v: &[u8]| {
        Ok((f, decode_block(sid, term, f, v)?, false))
    };
    if let Some(b) =
        SEARCH_POSTINGS.edge(kv, (sid, term, 0)..=(sid, term, doc), Dir::Reverse, read)?
    {
        return Ok(Some(b));
    }
    SEARCH_POSTINGS.edge(
        kv,
        (sid, term, doc)..=(sid, term, u64::MAX),
        Dir::Forward,
        read,
    )
}

/// Writes `postings` (in document order) as blocks of at most [`BLOCK_MAX`], each keyed by its
/// first document.
pub(crate) fn put_blocks<S: KvWrite + ?Sized>(
    kv: &mut S,
    sid: u32,
    term: &str,
    postings: &[Posting],
) -> Result<()> {
    for chunk in postings.chunks(BLOCK_MAX) {
        if let Some(p) = chunk.first() {
            SEARCH_POSTINGS.put(kv, (sid, term, p.doc), &encode_block(chunk))?;
        }
    }
    Ok(())
}

/// Removes `doc`'s posting under `term`; the posting, if there was one.
fn remove_posting<S: KvWrite + ?Sized>(
    kv: &mut S,
    sid: u32,
    term: &str,
    doc: u64,
) -> Result<Option<Posting>> {
    let Some((first, mut postings, _)) = block_for(kv, sid, term, doc)? else {
        return Ok(None);
    };
    let Ok(i) = postings.binary_search_by_key(&doc, |p| p.doc) else {
        return Ok(None);
    };
    let p = postings.remove(i);
    SEARCH_POSTINGS.delete(kv, (sid, term, first))?;
    put_blocks(kv, sid, term, &postings)?;
    Ok(Some(p))
}

/// Moves every tail entry of scope `sid`, and `more` documents (not in the tail), into the
/// posting blocks. The caller resets the tail count in the statistics.
fn fold<S: KvWrite + ?Sized>(kv: &mut S, sid: u32, more: Vec<(u64, Forward)>) -> Result<()> {
    // Grouped by hashing (a batch posts each of its terms' occurrences here: a tree of strings
    // compared at every level cost more than the fold's writes), then merged in term order.
    let mut by_term: foldhash::HashMap<String, Vec<Posting>> = foldhash::HashMap::default();
    let mut post = |doc: u64, f: Forward| {
        for (term, p) in f.into_postings(doc) {
            by_term.entry(term).or_default().push(p);
        }
    };
    SEARCH_TAIL.each(kv, (sid, 0)..(sid, STATS_DOC), |(_, doc), v| {
        post(doc, decode_forward(sid, doc, v)?);
        Ok(())
    })?;
    more.into_iter().for_each(|(doc, f)| post(doc, f));
    SEARCH_TAIL.delete_range(kv, (sid, 0)..(sid, STATS_DOC))?;
    let mut by_term: Vec<(String, Vec<Posting>)> = by_term.into_iter().collect();
    by_term.sort_unstable_by(|a, b| a.0.cmp(&b.0));
    for (term, mut new) in by_term {
        // A summary's document may sort before the tail's memories.
        new.sort_unstable_by_key(|p| p.doc);
        merge(kv, sid, &term, &new)?;
    }
    Ok(())
}

/// Merges `new` postings (in document order, none indexed under `term` yet) into `term`'s
/// blocks: each run goes into the block that covers it, which is rewritten once.
fn merge<S: KvWrite + ?Sized>(kv: &mut S, sid: u32, term: &str, new: &[Posting]) -> Result<()> {
    let mut rest = new;
    while let Some(p0) = rest.first() {
        let (mut merged, next) = match block_for(kv, sid, term, p0.doc)? {
            None => (Vec::new(), None),
            Some((first, postings, last)) => {
                let next = match first.checked_add(1).filter(|_| !last) {
                    Some(f) => SEARCH_POSTINGS.edge(
                        kv,
                        (sid, term, f)..=(sid, term, u64::MAX),
                        Dir::Forward,
                        |(_, _, f), _| Ok(f),
                    )?,
                    None => None,
                };
                SEARCH_POSTINGS.delete(kv, (sid, term, first))?;
                (postings, next)
            }
        };
        let take = next
            .map_or(rest.len(), |b| rest.partition_point(|p| p.doc < b))
            .max(1);
        let (now, later) = rest.split_at(take.min(rest.len()));
        merged.extend_from_slice(now);
        merged.sort_unstable_by_key(|p| p.doc);
        merged.dedup_by_key(|p| p.doc);
        put_blocks(kv, sid, term, &merged)?;
        rest = later;
    }
    Ok(())
}

/// Indexes the memories `first, first + 1, ...` of scope `sid`, just appended with these texts.
pub fn add_memories<'a, S: KvWrite + ?Sized>(
    kv: &mut S,
    sid: u32,
    first: u64,
    texts: impl IntoIterator<Item = &'a str>,
) -> Result<()> {
    let docs: Vec<(u64, &str)> = (first..)
        .zip(texts)
        .filter_map(|(id, t)| block_doc(Block::single(id)).map(|d| (d, t)))
        .collect();
    add(kv, sid, &docs)
}

/// Keeps the index of block `b` of scope `sid` (a memory, or a summary) in step with a change of
/// its text from `old` to `new` (`None`: no text, or none that could be read).
pub fn replace<S: KvWrite + ?Sized>(
    kv: &mut S,
    sid: u32,
    b: Block,
    old: Option<&str>,
    new: Option<&str>,
) -> Result<()> {
    let Some(doc) = block_doc(b) else {
        return Ok(());
    };
    if let Some(old) = old {
        remove(kv, sid, doc, old)?;
    }
    match new {
        Some(new) => add(kv, sid, &[(doc, new)]),
        None => Ok(()),
    }
}
