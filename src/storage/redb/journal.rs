//! The commit journal of store format 4 (docs/design.md, section "Commit journal"): a file
//! `<store>-journal` beside the store that an exclusive handle ([`crate::Options::exclusive`]
//! with [`crate::Options::journal`]) appends one record to per commit, synced with one
//! `fdatasync`, before it commits the same changes to redb without a sync. Since format 5 the
//! handles of the default mode share it ([`crate::Options::shared_journal`]): each continues
//! it from the marker and tail ([`TAIL_KEY`]) of the commit it starts from, and publishes its
//! commit through redb's journaled commit (design.md 14.9). Every journaled
//! redb commit also sets `meta["journal"]` = (epoch, seq) in the same transaction, so redb's
//! durable state says which records it already holds; a read-write open replays the records
//! past that marker ([`super::engine`] does it, with [`pending`] and [`decode`]).
//!
//! The file: bytes 0..4096 a header (magic `SOMNAJ\0\0`, journal format u32 LE = 1, zeros;
//! a journal written before the project's rename starts with [`LEGACY_MAGIC`] and reads alike),
//! then records from offset 4096, each
//! `len u32 LE | crc32 u32 LE | epoch u64 LE | seq u64 LE | payload`, where `len` counts what
//! follows the crc and the crc covers the same bytes. The payload is the transaction's changes
//! at the storage seam ([`Ops`]): a varint count, then per change a kind byte (0 put, 1 delete,
//! 2 delete range), the table's [`TableId::index`], and varint-length-prefixed bytes (a put's
//! key and value, a delete's key, a range's two bounds each as a tag byte, 0 unbounded,
//! 1 included, 2 excluded, then its bytes unless unbounded). The file is preallocated (zeros
//! written once at creation) so that a record never makes it grow: its `fdatasync` flushes data
//! only, not the file size.
//!
//! This module knows the bytes, `journal_file.rs` the file (its `Journal` and `open_existing`); neither
//! touches redb (the engine applies the decoded changes through its `RedbWrite`).

use std::ops::Bound;
use std::path::{Path, PathBuf};

use redb::StorageBackend;

use crate::error::{Error, Result};
use crate::storage::codec::{Wire, WireOut};
use crate::storage::kv::TableId;

/// The first bytes of a journal file.
pub const MAGIC: &[u8; 8] = b"SOMNAJ\0\0";
/// The first bytes of a journal written before the project was renamed from engram to somna
/// (docs/design.md, "History"): the same format 1 in every other byte, so it is read as one.
pub const LEGACY_MAGIC: &[u8; 8] = b"ENGRAMJ\0";
/// The journal format this build writes and reads (the u32 after [`MAGIC`]).
pub const JOURNAL_FORMAT: u32 = 1;
/// Where the first record starts (the header's size).
pub const HEADER: u64 = 4096;
/// The size of a new journal file unless [`crate::Options::journal_bytes`] says otherwise.
pub const DEFAULT_SIZE: u64 = 4 << 20;
/// The fixed part of a record: len, crc, epoch, seq.
const RECORD_HEAD: usize = 24;
/// The part of a record that `len` counts beside the payload: epoch and seq.
const LEN_FIXED: u32 = 16;

/// Records of the shared journal between two checkpoints. Until a checkpoint no commit reuses a
/// page freed since the last one (docs/design.md 14.9), so each journaled commit takes fresh
/// pages (about 15, 60 KiB, for a note): this bounds what the file grows by between checkpoints
/// (about 4 MiB) and lets the commits after a checkpoint rewrite pages the page cache holds,
/// for one sync of the store every 64 commits.
pub const SHARED_CHECKPOINT_EVERY: u64 = 64;

/// The key of the applied marker in `meta`: (epoch, seq) of the last journaled commit that
/// redb holds.
pub const MARKER_KEY: &str = crate::storage::tables::ENGINE_LOCAL_META[0];
/// The key of the shared journal's tail in `meta`: the offset after the marker's record, set
/// with the marker by every commit of a handle using the shared journal, so the next writer (in
/// any process) appends there and an open reads the one record after it, not the whole chain.
pub const TAIL_KEY: &str = crate::storage::tables::ENGINE_LOCAL_META[1];

/// The journal's path: the store's path with `-journal` appended (as SQLite's `-wal`).
pub fn path_of(store: &Path) -> PathBuf {
    let mut s = store.as_os_str().to_os_string();
    s.push("-journal");
    PathBuf::from(s)
}

/// One transaction's changes at the storage seam, encoded as they happen.
#[derive(Debug, Default)]
pub struct Ops {
    count: u64,
    bytes: WireOut,
}

impl Ops {
    /// Whether no change was recorded.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Records a put.
    pub fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) {
        self.head(0, t);
        self.bytes.bytes(key);
        self.bytes.bytes(value);
    }

    /// Records a delete (of a key that was there).
    pub fn delete(&mut self, t: TableId, key: &[u8]) {
        self.head(1, t);
        self.bytes.bytes(key);
    }

    /// Records a range delete (that removed something).
    pub fn delete_range(&mut self, t: TableId, lo: Bound<&[u8]>, hi: Bound<&[u8]>) {
        self.head(2, t);
        self.bound(lo);
        self.bound(hi);
    }

    fn head(&mut self, kind: u8, t: TableId) {
        self.count += 1;
        self.bytes.byte(kind);
        // 29 tables: the index always fits a byte.
        self.bytes.byte(t.index() as u8);
    }

    fn bound(&mut self, b: Bound<&[u8]>) {
        match b {
            Bound::Unbounded => self.bytes.byte(0),
            Bound::Included(k) => {
                self.bytes.byte(1);
                self.bytes.bytes(k);
            }
            Bound::Excluded(k) => {
                self.bytes.byte(2);
                self.bytes.bytes(k);
            }
        }
    }

    /// The payload of a record: the count, then the changes.
    pub fn payload(&self) -> Vec<u8> {
        let mut out = WireOut::bare(self.bytes.len() + 10);
        out.u64(self.count);
        out.raw(self.bytes.as_slice());
        out.into_bytes()
    }
}

/// A whole record: the fixed head, then `payload`.
pub fn record(epoch: u64, seq: u64, payload: &[u8]) -> Result<Vec<u8>> {
    let len = u32::try_from(payload.len())
        .ok()
        .and_then(|n| n.checked_add(LEN_FIXED))
        .ok_or_else(|| Error::Storage("a transaction too large for the journal".into()))?;
    let mut out = Vec::with_capacity(RECORD_HEAD + payload.len());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&epoch.to_le_bytes());
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(payload);
    let crc = crate::storage::codec::crc(out.get(8..).unwrap_or_default());
    if let Some(c) = out.get_mut(4..8) {
        c.copy_from_slice(&crc.to_le_bytes());
    }
    Ok(out)
}

/// The header of a new journal file.
pub fn header() -> Vec<u8> {
    let mut h = vec![0u8; HEADER as usize];
    if let Some(m) = h.get_mut(..8) {
        m.copy_from_slice(MAGIC);
    }
    if let Some(f) = h.get_mut(8..12) {
        f.copy_from_slice(&JOURNAL_FORMAT.to_le_bytes());
    }
    h
}

/// One record found by [`walk`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The checkpoint epoch it belongs to.
    pub epoch: u64,
    /// Its number within the epoch, from 1.
    pub seq: u64,
    /// The changes.
    pub payload: Vec<u8>,
    /// The offset just past it.
    pub end: u64,
}

fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    let a: [u8; 4] = b.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_le_bytes(a))
}

fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    let a: [u8; 8] = b.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_le_bytes(a))
}

/// The record at offset `at` of the journal on `io` (`file_len` bytes long), if it is of
/// `epoch` and numbered `seq`, its length is sane and its crc matches; `None` otherwise. Reads
/// the fixed head first and the rest only when the head's epoch and seq are the ones wanted, so
/// the walk past a checkpoint (whose first record is of an older epoch) reads 24 bytes.
fn record_at(
    io: &dyn StorageBackend,
    file_len: u64,
    at: u64,
    epoch: u64,
    seq: u64,
) -> std::io::Result<Option<Found>> {
    let mut head = [0u8; RECORD_HEAD];
    if at.saturating_add(RECORD_HEAD as u64) > file_len {
        return Ok(None);
    }
    io.read(at, &mut head)?;
    let (Some(len), Some(crc), Some(e), Some(s)) = (
        le_u32(&head, 0),
        le_u32(&head, 4),
        le_u64(&head, 8),
        le_u64(&head, 16),
    ) else {
        return Ok(None);
    };
    let end = at.saturating_add(8).saturating_add(u64::from(len));
    if len < LEN_FIXED || end > file_len || e != epoch || s != seq {
        return Ok(None);
    }
    let mut payload = vec![0u8; (len - LEN_FIXED) as usize];
    io.read(at + RECORD_HEAD as u64, &mut payload)?;
    let mut h = crc32fast::Hasher::new();
    h.update(head.get(8..).unwrap_or_default());
    h.update(&payload);
    if h.finalize() != crc {
        return Ok(None);
    }
    Ok(Some(Found {
        epoch,
        seq,
        payload,
        end,
    }))
}

/// The chain of records of `epoch` on `io` from offset [`HEADER`]: seq 1, 2, ... while each
/// record's length is sane, its crc matches and it follows the one before. Whatever comes first
/// that does not (a torn tail, zeros, a record of an older epoch) ends the walk: it was never
/// acknowledged, or it was made durable in redb by a checkpoint. Only the records' bytes are
/// read, never the rest of the file.
pub fn walk(io: &dyn StorageBackend, epoch: u64) -> std::io::Result<Vec<Found>> {
    walk_from(io, epoch, HEADER, 1)
}

/// The chain of records of `epoch` from offset `at`, starting with seq `want` (see [`walk`]).
fn walk_from(
    io: &dyn StorageBackend,
    epoch: u64,
    mut at: u64,
    mut want: u64,
) -> std::io::Result<Vec<Found>> {
    let len = io.len()?;
    let mut out = Vec::new();
    while let Some(r) = record_at(io, len, at, epoch, want)? {
        at = r.end;
        want += 1;
        out.push(r);
    }
    Ok(out)
}

/// Checks the header of a journal file's bytes.
pub fn check_header(file: &[u8], path: &Path) -> Result<()> {
    let magic = file.get(..8);
    if magic != Some(&MAGIC[..]) && magic != Some(&LEGACY_MAGIC[..]) {
        return Err(corrupt(
            path,
            "header",
            "it does not start with SOMNAJ\\0\\0",
        ));
    }
    match le_u32(file, 8) {
        Some(JOURNAL_FORMAT) => Ok(()),
        Some(n) => Err(Error::Unsupported(format!(
            "{} has journal format {n}; this somna reads {JOURNAL_FORMAT}",
            path.display()
        ))),
        None => Err(corrupt(path, "header", "it is shorter than its header")),
    }
}

/// A damaged journal as [`Error::Corrupt`], naming the file and `what` (its header, a record).
pub fn corrupt(path: &Path, what: impl std::fmt::Display, why: impl Into<String>) -> Error {
    Error::corrupt("(journal)", format!("{} {what}", path.display()), why)
}

/// The records of the journal on `io` (named `path` in messages) that redb does not hold yet:
/// those of the marker's epoch past its seq. None for a journal that never got its header.
/// With the shared journal's `tail` (its record after the marker's starts there), only the
/// records from there are read.
pub fn pending(
    io: &dyn StorageBackend,
    path: &Path,
    marker: (u64, u64),
    tail: Option<u64>,
) -> Result<Vec<Found>> {
    let mut head = [0u8; 12];
    if io.len()? >= head.len() as u64 {
        io.read(0, &mut head)?;
    }
    if unformatted(&head) {
        return Ok(Vec::new());
    }
    check_header(&head, path)?;
    let mut all = match tail {
        Some(at) => walk_from(io, marker.0, at, marker.1 + 1)?,
        None => walk(io, marker.0)?,
    };
    all.retain(|r| r.seq > marker.1);
    Ok(all)
}

/// One change decoded from a payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op<'a> {
    /// A put of key and value.
    Put(TableId, &'a [u8], &'a [u8]),
    /// A delete of a key.
    Delete(TableId, &'a [u8]),
    /// A delete of a key range.
    DeleteRange(TableId, Bound<&'a [u8]>, Bound<&'a [u8]>),
}

fn take<'a>(w: &mut Wire<'a>) -> Option<&'a [u8]> {
    let n = usize::try_from(w.u64()?).ok()?;
    w.bytes(n)
}

fn byte(w: &mut Wire<'_>) -> Option<u8> {
    w.bytes(1)?.first().copied()
}

fn bound<'a>(w: &mut Wire<'a>) -> Option<Bound<&'a [u8]>> {
    Some(match byte(w)? {
        0 => Bound::Unbounded,
        1 => Bound::Included(take(w)?),
        2 => Bound::Excluded(take(w)?),
        _ => return None,
    })
}

fn op<'a>(w: &mut Wire<'a>) -> Option<Op<'a>> {
    let kind = byte(w)?;
    let t = *TableId::ALL.get(usize::from(byte(w)?))?;
    Some(match kind {
        0 => Op::Put(t, take(w)?, take(w)?),
        1 => Op::Delete(t, take(w)?),
        2 => Op::DeleteRange(t, bound(w)?, bound(w)?),
        _ => return None,
    })
}

/// The changes of a payload; `None` when it does not decode (an unknown kind or table, a
/// length past the end, bytes left over).
pub fn decode(payload: &[u8]) -> Option<Vec<Op<'_>>> {
    let mut w = Wire::new(payload);
    let n = w.u64()?;
    let mut out = Vec::new();
    for _ in 0..n {
        out.push(op(&mut w)?);
    }
    (w.left() == 0).then_some(out)
}

/// Whether a journal's first sector never got its header: shorter than the magic and the
/// format, or zeros there. The header is written (and synced) only after the rest of the file,
/// and no record before it, so such a journal holds nothing acknowledged.
pub(super) fn unformatted(b: &[u8]) -> bool {
    b.get(..12).is_none_or(|h| h.iter().all(|x| *x == 0))
}

#[cfg(test)]
mod tests {
    //! The record bytes: a round trip, and where the walk stops (a torn record, a bad crc, an
    //! epoch change, a seq gap); an undecodable payload is refused.
    use super::*;

    fn ops(i: u8) -> Ops {
        let mut o = Ops::default();
        o.put(TableId::Log, &[i, 1, 2], b"value");
        o.delete(TableId::Meta, b"k");
        o.delete_range(
            TableId::SessionChunks,
            Bound::Included(&b"a"[..]),
            Bound::Unbounded,
        );
        o
    }

    /// A journal in memory, to walk.
    #[derive(Debug)]
    struct Mem(Vec<u8>);

    impl StorageBackend for Mem {
        fn len(&self) -> std::io::Result<u64> {
            Ok(self.0.len() as u64)
        }
        fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
            let at = offset as usize;
            out.copy_from_slice(&self.0[at..at + out.len()]);
            Ok(())
        }
        fn set_len(&self, _: u64) -> std::io::Result<()> {
            Err(std::io::Error::other("read only"))
        }
        fn sync_data(&self) -> std::io::Result<()> {
            Err(std::io::Error::other("read only"))
        }
        fn write(&self, _: u64, _: &[u8]) -> std::io::Result<()> {
            Err(std::io::Error::other("read only"))
        }
    }

    fn walk(f: &[u8], epoch: u64) -> Vec<Found> {
        super::walk(&Mem(f.to_vec()), epoch).unwrap()
    }

    fn file(recs: &[(u64, u64)]) -> Vec<u8> {
        let mut f = header();
        for (i, (e, s)) in recs.iter().enumerate() {
            f.extend(record(*e, *s, &ops(i as u8).payload()).unwrap());
        }
        f.extend([0u8; 64]);
        f
    }

    #[test]
    fn a_record_round_trips() {
        let f = file(&[(3, 1)]);
        let found = walk(&f, 3);
        assert_eq!(found.len(), 1);
        assert_eq!((found[0].epoch, found[0].seq), (3, 1));
        let got = decode(&found[0].payload).unwrap();
        assert_eq!(
            got,
            vec![
                Op::Put(TableId::Log, &[0, 1, 2][..], &b"value"[..]),
                Op::Delete(TableId::Meta, &b"k"[..]),
                Op::DeleteRange(
                    TableId::SessionChunks,
                    Bound::Included(&b"a"[..]),
                    Bound::Unbounded
                ),
            ]
        );
        assert!(check_header(&f, Path::new("j")).is_ok());
    }

    #[test]
    fn the_walk_stops_at_a_torn_record_a_bad_crc_an_epoch_change_and_a_gap() {
        let f = file(&[(1, 1), (1, 2), (1, 3)]);
        assert_eq!(walk(&f, 1).len(), 3);
        assert_eq!(walk(&f, 2).len(), 0);
        let ends: Vec<u64> = walk(&f, 1).iter().map(|r| r.end).collect();
        // Torn: every cut inside the last record leaves the first two.
        for cut in ends[1]..ends[2] {
            let mut t = f.clone();
            t.truncate(cut as usize);
            assert_eq!(walk(&t, 1).len(), 2, "cut at {cut}");
        }
        // A flipped byte in the second record.
        let mut bad = f.clone();
        bad[ends[0] as usize + 30] ^= 1;
        assert_eq!(walk(&bad, 1).len(), 1);
        // An epoch change and a seq gap.
        assert_eq!(walk(&file(&[(1, 1), (2, 2)]), 1).len(), 1);
        assert_eq!(walk(&file(&[(1, 1), (1, 3)]), 1).len(), 1);
        assert_eq!(walk(&file(&[(1, 2)]), 1).len(), 0);
        // Pending: past the marker only; none in a journal that never got its header.
        let p = pending(&Mem(f.clone()), Path::new("j"), (1, 2), None).unwrap();
        assert_eq!(p.iter().map(|r| r.seq).collect::<Vec<_>>(), [3]);
        let mut blank = f.clone();
        blank[..12].fill(0);
        assert!(pending(&Mem(blank), Path::new("j"), (1, 0), None)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn an_undecodable_payload_is_refused() {
        let mut o = ops(0).payload();
        o.push(0);
        assert!(decode(&o).is_none());
        assert!(decode(&[1, 0, 200, 0, 0]).is_none());
        assert!(decode(&[1, 9, 0]).is_none());
        assert!(decode(&[]).is_none());
        let mut bad = header();
        bad[0] = b'X';
        assert!(matches!(
            check_header(&bad, Path::new("j")),
            Err(Error::Corrupt { .. })
        ));
    }
}
