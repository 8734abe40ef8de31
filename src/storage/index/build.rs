//! The index rebuilt from the texts: for the upgrade from store format 1 and `reindex`
//! ([`rebuild_all`]), and for `verify`, which compares what is stored with what a rebuild
//! would store ([`check`]). Two indexes are equal when they hold the same postings (term,
//! document, frequency, length) and the same statistics, whatever their split between the tail
//! and the blocks.

use std::collections::BTreeMap;
use std::ops::ControlFlow;

use crate::domain::block::Block;
use crate::domain::record::{Memory, ScopeMeta, Summary};
use crate::error::Result;
use crate::storage::codec::{decode, encode};
use crate::storage::index::{
    block_doc, decode_block, decode_forward, read_stats, write_stats, Forward, IndexStats, Posting,
    STATS_DOC,
};
use crate::storage::kv::{Dir, KvRead, KvWrite};
use crate::storage::tables::{LOG, META, SCOPES, SEARCH_POSTINGS, SEARCH_TAIL, TREE};

/// What an index holds, logically: each (term, document) with (frequency, length), and each
/// document with its length.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Content {
    /// Postings: (term, document) -> (frequency, document length).
    pub postings: BTreeMap<(String, u64), (u32, u32)>,
    /// Documents -> length.
    pub docs: BTreeMap<u64, u32>,
}

impl Content {
    fn add(&mut self, doc: u64, f: Forward) {
        self.docs.insert(doc, f.len);
        for (t, tf) in f.terms {
            self.postings.insert((t, doc), (tf, f.len));
        }
    }

    fn add_posting(&mut self, term: &str, p: Posting) {
        self.docs.insert(p.doc, p.len);
        self.postings
            .insert((term.to_string(), p.doc), (p.tf, p.len));
    }

    /// The statistics that describe this content, with an empty tail.
    fn stats(&self) -> IndexStats {
        IndexStats {
            docs: self.docs.len() as u64,
            total_len: self.docs.values().map(|&l| u64::from(l)).sum(),
            tail: 0,
        }
    }
}

/// Every document of scope `sid` with its text, as the index should hold it: the memories
/// `0..count` (a redacted one's tombstone has no terms) and the summaries.
pub fn texts(
    kv: &(impl KvRead + ?Sized),
    sid: u32,
    count: u64,
    f: &mut dyn FnMut(u64, &str),
) -> Result<()> {
    LOG.each(kv, (sid, 0)..(sid, count), |(_, id), v| {
        let m: Memory = decode("log", &format_args!("(scope {sid}, #{id})"), v)?;
        if let Some(doc) = block_doc(Block::single(id)) {
            f(doc, &m.text);
        }
        Ok(())
    })?;
    TREE.each(
        kv,
        (sid, 0, 0)..=(sid, u8::MAX, u64::MAX),
        |(_, level, lo), v| {
            let s: Summary = decode("tree", &format_args!("(scope {sid}, {level}, {lo})"), v)?;
            if let Some(doc) = Block::new(level, lo).ok().and_then(block_doc) {
                f(doc, &s.text);
            }
            Ok(())
        },
    )
}

/// The index of scope `sid` as a rebuild from its texts would hold it.
pub fn expected(kv: &(impl KvRead + ?Sized), sid: u32, count: u64) -> Result<Content> {
    let mut c = Content::default();
    texts(kv, sid, count, &mut |doc, text| {
        if let Some(f) = Forward::of(text) {
            c.add(doc, f);
        }
    })?;
    Ok(c)
}

/// The index of scope `sid` as stored (tail and blocks), and its statistics as stored.
pub fn stored(kv: &(impl KvRead + ?Sized), sid: u32) -> Result<(Content, IndexStats, u64)> {
    let mut c = Content::default();
    let mut tail = 0u64;
    SEARCH_TAIL.each(kv, (sid, 0)..(sid, STATS_DOC), |(_, doc), v| {
        c.add(doc, decode_forward(sid, doc, v)?);
        tail += 1;
        Ok(())
    })?;
    SEARCH_POSTINGS.scan(kv, (sid, "", 0).., Dir::Forward, |(s, term, first), v| {
        if s != sid {
            return Ok(ControlFlow::Break(()));
        }
        for p in decode_block(sid, &term, first, v)? {
            c.add_posting(&term, p);
        }
        Ok(ControlFlow::Continue(()))
    })?;
    Ok((c, read_stats(kv, sid)?, tail))
}

/// Differences between the stored index of scope `name` (id `sid`, `count` memories) and a rebuilt one, as `verify` reports them
/// (at most a few per scope).
pub fn check(kv: &(impl KvRead + ?Sized), name: &str, sid: u32, count: u64) -> Result<Vec<String>> {
    let want = expected(kv, sid, count)?;
    let (have, st, tail) = stored(kv, sid)?;
    let mut out = Vec::new();
    let at = |what: String| format!("search index of {name:?}: {what}");
    for (k, v) in &want.postings {
        if have.postings.get(k) != Some(v) {
            out.push(at(format!(
                "term {:?} of document {} is missing or wrong",
                k.0, k.1
            )));
            break;
        }
    }
    if let Some(k) = have
        .postings
        .keys()
        .find(|k| !want.postings.contains_key(*k))
    {
        out.push(at(format!(
            "term {:?} of document {} refers to nothing",
            k.0, k.1
        )));
    }
    let w = want.stats();
    if (st.docs, st.total_len, st.tail) != (w.docs, w.total_len, tail) {
        out.push(at(format!(
            "statistics say {} documents, length {}, tail {}; the index holds {}, {}, {}",
            st.docs, st.total_len, st.tail, w.docs, w.total_len, tail
        )));
    }
    Ok(out)
}

/// Drops scope `sid`'s index and builds it again from its texts, every document in blocks;
/// returns how many documents it holds. Postings are gathered per term (one string per distinct
/// term, not per posting) and the statistics summed as the texts stream by.
pub fn rebuild<S: KvWrite + ?Sized>(kv: &mut S, sid: u32, count: u64) -> Result<u64> {
    SEARCH_TAIL.delete_range(kv, (sid, 0)..=(sid, STATS_DOC))?;
    match sid.checked_add(1) {
        Some(next) => SEARCH_POSTINGS.delete_range(kv, (sid, "", 0)..(next, "", 0))?,
        None => SEARCH_POSTINGS.delete_range(kv, (sid, "", 0)..)?,
    };
    let mut by_term: BTreeMap<String, Vec<Posting>> = BTreeMap::new();
    let mut stats = IndexStats::default();
    texts(kv, sid, count, &mut |doc, text| {
        if let Some(f) = Forward::of(text) {
            stats.docs += 1;
            stats.total_len += u64::from(f.len);
            for (term, p) in f.into_postings(doc) {
                by_term.entry(term).or_default().push(p);
            }
        }
    })?;
    for (term, mut postings) in by_term {
        // Memories come before summaries in `texts`: blocks want document order.
        postings.sort_unstable_by_key(|p| p.doc);
        super::write::put_blocks(kv, sid, &term, &postings)?;
    }
    write_stats(kv, sid, &stats)?;
    Ok(stats.docs)
}

/// Rebuilds the index of every scope and marks the store format 2: the upgrade of a format-1
/// store, and `reindex`. `progress(done, total)` counts scopes.
pub fn rebuild_all<S: KvWrite + ?Sized>(
    kv: &mut S,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<u64> {
    let mut scopes: Vec<ScopeMeta> = Vec::new();
    SCOPES.each(kv, .., |name, v| {
        scopes.push(decode("scopes", &name, v)?);
        Ok(())
    })?;
    let total = scopes.len() as u64;
    let mut docs = 0;
    for (i, m) in scopes.iter().enumerate() {
        docs += rebuild(kv, m.id, m.count)?;
        progress(i as u64 + 1, total);
    }
    META.put(
        kv,
        "format",
        &encode(&crate::storage::tables::STORE_FORMAT)?,
    )?;
    Ok(docs)
}

/// `verify`'s check of the search index: for each `(name, scope id, memories)`, the stored index
/// equals the rebuilt one; a damaged index value is reported, not raised. A format-1 store (no
/// index yet) has nothing to check.
pub fn check_all<'a>(
    kv: &(impl KvRead + ?Sized),
    scopes: impl IntoIterator<Item = (&'a str, u32, u64)>,
    problem: &mut dyn FnMut(String),
) -> Result<()> {
    // A damaged format value is verify_rows's to report; the index is then not checked.
    let format = crate::storage::tables::stored_format(kv).ok().flatten();
    if format.unwrap_or(0) < crate::storage::tables::INDEX_FORMAT {
        return Ok(());
    }
    for (name, sid, count) in scopes {
        match check(kv, name, sid, count) {
            Ok(found) => found.into_iter().for_each(&mut *problem),
            Err(e) => problem(format!("search index of {name:?}: {e}")),
        }
    }
    Ok(())
}
