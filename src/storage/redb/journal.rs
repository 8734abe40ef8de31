//! The commit journal of store format 4 (docs/design.md, section "Commit journal"): a file
//! `<store>-journal` beside the store that an exclusive handle ([`crate::Options::exclusive`]
//! with [`crate::Options::journal`]) appends one record to per commit, synced with one
//! `fdatasync`, before it commits the same changes to redb without a sync. Every journaled
//! redb commit also sets `meta["journal"]` = (epoch, seq) in the same transaction, so redb's
//! durable state says which records it already holds; a read-write open replays the records
//! past that marker ([`super::engine`] does it, with [`pending`] and [`decode`]).
//!
//! The file: bytes 0..4096 a header (magic `ENGRAMJ\0`, journal format u32 LE = 1, zeros),
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
//! This module knows the bytes and the file; it never touches redb (the engine applies the
//! decoded changes through its `RedbWrite`).

use std::fs::File;
use std::io::Write;
use std::ops::Bound;
use std::path::{Path, PathBuf};

use redb::StorageBackend;

use crate::error::{Error, Result};
use crate::storage::codec::Wire;
use crate::storage::kv::TableId;

/// The first bytes of a journal file.
pub const MAGIC: &[u8; 8] = b"ENGRAMJ\0";
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

/// The key of the applied marker in `meta`: (epoch, seq) of the last journaled commit that
/// redb holds.
pub const MARKER_KEY: &str = "journal";

/// The journal's path: the store's path with `-journal` appended (as SQLite's `-wal`).
pub fn path_of(store: &Path) -> PathBuf {
    let mut s = store.as_os_str().to_os_string();
    s.push("-journal");
    PathBuf::from(s)
}

/// One transaction's changes at the storage seam, encoded as they happen.
#[derive(Debug, Default, Clone)]
pub struct Ops {
    count: u64,
    bytes: Vec<u8>,
}

fn varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

fn put_bytes(out: &mut Vec<u8>, b: &[u8]) {
    varint(out, b.len() as u64);
    out.extend_from_slice(b);
}

fn put_bound(out: &mut Vec<u8>, b: Bound<&[u8]>) {
    match b {
        Bound::Unbounded => out.push(0),
        Bound::Included(k) => {
            out.push(1);
            put_bytes(out, k);
        }
        Bound::Excluded(k) => {
            out.push(2);
            put_bytes(out, k);
        }
    }
}

impl Ops {
    /// Whether no change was recorded.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Records a put.
    pub fn put(&mut self, t: TableId, key: &[u8], value: &[u8]) {
        self.head(0, t);
        put_bytes(&mut self.bytes, key);
        put_bytes(&mut self.bytes, value);
    }

    /// Records a delete (of a key that was there).
    pub fn delete(&mut self, t: TableId, key: &[u8]) {
        self.head(1, t);
        put_bytes(&mut self.bytes, key);
    }

    /// Records a range delete (that removed something).
    pub fn delete_range(&mut self, t: TableId, lo: Bound<&[u8]>, hi: Bound<&[u8]>) {
        self.head(2, t);
        put_bound(&mut self.bytes, lo);
        put_bound(&mut self.bytes, hi);
    }

    fn head(&mut self, kind: u8, t: TableId) {
        self.count += 1;
        self.bytes.push(kind);
        // 28 tables: the index always fits a byte.
        self.bytes.push(t.index() as u8);
    }

    /// The payload of a record: the count, then the changes.
    pub fn payload(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.bytes.len() + 10);
        varint(&mut out, self.count);
        out.extend_from_slice(&self.bytes);
        out
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
    let crc = crc32fast::hash(out.get(8..).unwrap_or_default());
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
pub struct Found<'a> {
    /// The checkpoint epoch it belongs to.
    pub epoch: u64,
    /// Its number within the epoch, from 1.
    pub seq: u64,
    /// The changes.
    pub payload: &'a [u8],
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

/// The record at `at` of `file`, if its length is sane and its crc matches.
fn record_at(file: &[u8], at: usize) -> Option<Found<'_>> {
    let len = usize::try_from(le_u32(file, at)?).ok()?;
    if len < LEN_FIXED as usize || len > file.len() {
        return None;
    }
    let crc = le_u32(file, at + 4)?;
    let body = file.get(at + 8..(at + 8).checked_add(len)?)?;
    if crc32fast::hash(body) != crc {
        return None;
    }
    Some(Found {
        epoch: le_u64(body, 0)?,
        seq: le_u64(body, 8)?,
        payload: body.get(16..)?,
        end: (at + 8 + len) as u64,
    })
}

/// The chain of records of `epoch` from offset [`HEADER`]: seq 1, 2, ... while each record's
/// length is sane, its crc matches and it follows the one before. Whatever comes first that
/// does not (a torn tail, zeros, a record of an older epoch) ends the walk: it was never
/// acknowledged, or it was made durable in redb by a checkpoint.
pub fn walk(file: &[u8], epoch: u64) -> Vec<Found<'_>> {
    let mut out = Vec::new();
    let mut at = HEADER as usize;
    let mut want = 1u64;
    while let Some(r) = record_at(file, at) {
        if r.epoch != epoch || r.seq != want {
            break;
        }
        at = r.end as usize;
        want += 1;
        out.push(r);
    }
    out
}

/// Checks the header of a journal file's bytes.
pub fn check_header(file: &[u8], path: &Path) -> Result<()> {
    if file.get(..8) != Some(&MAGIC[..]) {
        return Err(corrupt(path, "header", "it does not start with ENGRAMJ\\0"));
    }
    match le_u32(file, 8) {
        Some(JOURNAL_FORMAT) => Ok(()),
        Some(n) => Err(Error::Unsupported(format!(
            "{} has journal format {n}; this engram reads {JOURNAL_FORMAT}",
            path.display()
        ))),
        None => Err(corrupt(path, "header", "it is shorter than its header")),
    }
}

/// A damaged journal as [`Error::Corrupt`], naming the file and `what` (its header, a record).
pub fn corrupt(path: &Path, what: impl std::fmt::Display, why: impl Into<String>) -> Error {
    Error::corrupt("(journal)", format!("{} {what}", path.display()), why)
}

/// The records of `file` that redb does not hold yet: those of the marker's epoch past its seq.
pub fn pending<'a>(file: &'a [u8], path: &Path, marker: (u64, u64)) -> Result<Vec<Found<'a>>> {
    check_header(file, path)?;
    Ok(walk(file, marker.0)
        .into_iter()
        .filter(|r| r.seq > marker.1)
        .collect())
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

/// Reads the whole journal of the store at `store`; `None` when there is none, or when it
/// never got its header (see [`Journal::on`]).
pub fn read(store: &Path) -> Result<Option<Vec<u8>>> {
    match std::fs::read(path_of(store)) {
        Ok(b) if unformatted(&b) => Ok(None),
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e.into()),
    }
}

/// Reads the whole journal on `io`; `None` when it never got its header.
pub fn read_from(io: &dyn StorageBackend) -> Result<Option<Vec<u8>>> {
    let len = usize::try_from(io.len()?)
        .map_err(|_| Error::Storage("the journal is larger than memory".into()))?;
    let mut b = vec![0u8; len];
    io.read(0, &mut b)?;
    Ok((!unformatted(&b)).then_some(b))
}

/// Whether a journal's first sector never got its header: shorter than the magic and the
/// format, or zeros there. The header is written (and synced) only after the rest of the file,
/// and no record before it, so such a journal holds nothing acknowledged.
fn unformatted(b: &[u8]) -> bool {
    b.get(..12).is_none_or(|h| h.iter().all(|x| *x == 0))
}

/// The journal file as a [`StorageBackend`], the one I/O interface of the journal (the crash
/// tests put the simulated disk there, [`crate::Store::with_backends`]).
#[derive(Debug)]
struct FileIo(File);

impl StorageBackend for FileIo {
    fn len(&self) -> std::io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        read_at(&self.0, offset, out)
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        self.0.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        write_at(&self.0, offset, data)
    }
}

/// A positioned read: one `pread` on Unix (no seek, so the file offset is never shared state).
#[cfg(unix)]
fn read_at(f: &File, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(f, out, offset)
}

/// A positioned write: one `pwrite` on Unix.
#[cfg(unix)]
fn write_at(f: &File, offset: u64, data: &[u8]) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(f, data, offset)
}

#[cfg(not(unix))]
fn read_at(mut f: &File, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    f.seek(SeekFrom::Start(offset))?;
    f.read_exact(out)
}

#[cfg(not(unix))]
fn write_at(mut f: &File, offset: u64, data: &[u8]) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    f.seek(SeekFrom::Start(offset))?;
    f.write_all(data)
}

/// The open journal of an exclusive handle: where the next record goes and its number.
#[derive(Debug)]
pub(crate) struct Journal {
    io: Box<dyn StorageBackend>,
    size: u64,
    tail: u64,
    epoch: u64,
    seq: u64,
}

impl Journal {
    /// Opens the store's journal file, making it first (`size` bytes, preallocated, under a
    /// temporary name) if there is none; see [`Journal::on`].
    pub(crate) fn open(store: &Path, size: u64, epoch: u64) -> Result<Journal> {
        let path = path_of(store);
        if !path.exists() {
            make(&path, size.max(2 * HEADER))?;
        }
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)?;
        Journal::on(Box::new(FileIo(file)), &path, size, epoch)
    }

    /// The journal on `io` (named `path` in messages): one that never got its header is
    /// formatted first (zeros to `size` bytes, synced, then the header, synced), so a
    /// header, once there, always has the whole file behind it. New records start at epoch
    /// `epoch`, seq 1, offset [`HEADER`].
    pub(crate) fn on(
        io: Box<dyn StorageBackend>,
        path: &Path,
        size: u64,
        epoch: u64,
    ) -> Result<Journal> {
        let mut head = vec![0u8; 12];
        let len = io.len()?;
        if len >= 12 {
            io.read(0, &mut head)?;
        }
        if unformatted(&head) {
            let size = size.max(2 * HEADER).max(len);
            let zeros = vec![0u8; 64 << 10];
            let mut at = HEADER;
            while at < size {
                let n = (size - at).min(zeros.len() as u64);
                io.write(at, zeros.get(..n as usize).unwrap_or_default())?;
                at += n;
            }
            io.sync_data()?;
            io.write(0, &header())?;
            io.sync_data()?;
            io.read(0, &mut head)?;
        }
        check_header(&head, path)?;
        Ok(Journal {
            size: io.len()?,
            io,
            tail: HEADER,
            epoch,
            seq: 0,
        })
    }

    /// The (epoch, seq) the next record gets.
    pub(crate) fn next(&self) -> (u64, u64) {
        (self.epoch, self.seq + 1)
    }

    /// Whether a record of `n` bytes fits before the end of the file.
    pub(crate) fn fits(&self, n: usize) -> bool {
        self.tail.saturating_add(n as u64) <= self.size
    }

    /// Writes `rec` (numbered [`Journal::next`]) at the tail and syncs its data.
    pub(crate) fn append(&mut self, rec: &[u8]) -> std::io::Result<()> {
        self.io.write(self.tail, rec)?;
        self.io.sync_data()?;
        self.tail += rec.len() as u64;
        self.seq += 1;
        Ok(())
    }

    /// Starts epoch `epoch` from the top of the file (after a checkpoint made redb durable).
    pub(crate) fn reset(&mut self, epoch: u64) {
        self.epoch = epoch;
        self.seq = 0;
        self.tail = HEADER;
    }

    /// Whether the tail has passed 3/4 of the file: time for a checkpoint.
    pub(crate) fn wants_checkpoint(&self) -> bool {
        self.tail > self.size / 4 * 3
    }

    /// The epoch of the records being written.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }
}

/// Makes a journal file of `size` bytes: the header and zeros, written under a temporary name,
/// synced, renamed into place, and the directory synced, so the path never holds a partial
/// header.
fn make(path: &Path, size: u64) -> Result<()> {
    let tmp = {
        let mut s = path.as_os_str().to_os_string();
        s.push(format!(".new-{}", std::process::id()));
        PathBuf::from(s)
    };
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    let written = (|| -> std::io::Result<()> {
        let mut f = o.open(&tmp)?;
        f.write_all(&header())?;
        let zeros = vec![0u8; 64 << 10];
        let mut left = size.saturating_sub(HEADER);
        while left > 0 {
            let n = left.min(zeros.len() as u64) as usize;
            f.write_all(zeros.get(..n).unwrap_or_default())?;
            left -= n as u64;
        }
        f.sync_all()?;
        std::fs::rename(&tmp, path)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    Ok(written?)
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
        let got = decode(found[0].payload).unwrap();
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
        // Pending: past the marker only.
        let p = pending(&f, Path::new("j"), (1, 2)).unwrap();
        assert_eq!(p.iter().map(|r| r.seq).collect::<Vec<_>>(), [3]);
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
