//! Copying a whole store to another, between backends (a file to a server and back): every
//! table, byte for byte (keys and values are the same bytes on every backend), read from one
//! snapshot of the source and written in one transaction on the destination, which must hold
//! no memories, sessions or grants yet. The copy is then checked twice: the two stores' JSON
//! Lines exports are identical, and every table holds the same rows (a digest per table). The
//! commit journal's marker and tail in `meta` count the source file's own journal: they are
//! neither copied nor compared (`tables::ENGINE_LOCAL_META`).

use std::io::Write;
use std::ops::ControlFlow;

use serde::Serialize;

use crate::error::{Error, Result};
use crate::storage::kv::{Dir, KvRead, KvWrite, Span, TableId, Visit};
use crate::storage::store::Store;
use crate::storage::tables::engine_local;
use crate::storage::txn::list_scopes;

/// What [`Store::copy_into`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[non_exhaustive]
pub struct Copied {
    /// Rows copied, over every table.
    pub rows: u64,
    /// Lines of the export both stores gave (identical).
    pub export_lines: u64,
    /// Bytes of that export.
    pub export_bytes: u64,
}

/// Rows written per statement on the destination.
const BATCH: usize = 512;

/// Visits every row of table `t`, in key order.
fn scan_all(kv: &(impl KvRead + ?Sized), t: TableId, f: &mut Visit<'_>) -> Result<()> {
    kv.scan(t, Span::all(Dir::Forward), f)
}

/// A writer that keeps only a digest and a count of what passes through it.
#[derive(Default)]
struct Digest {
    hash: xxhash_rust::xxh3::Xxh3,
    bytes: u64,
}

impl Write for Digest {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.hash.update(buf);
        self.bytes += buf.len() as u64;
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The digest of every row of every table, one per table.
fn table_digests(kv: &(impl KvRead + ?Sized)) -> Result<Vec<(TableId, u128, u64)>> {
    let mut out = Vec::with_capacity(TableId::ALL.len());
    for t in TableId::ALL {
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        let mut n = 0u64;
        scan_all(kv, t, &mut |k, v| {
            if engine_local(t, k) {
                return Ok(ControlFlow::Continue(()));
            }
            h.update(&(k.len() as u64).to_le_bytes());
            h.update(k);
            h.update(&(v.len() as u64).to_le_bytes());
            h.update(v);
            n += 1;
            Ok(ControlFlow::Continue(()))
        })?;
        out.push((t, h.digest128(), n));
    }
    Ok(out)
}

impl Store {
    /// Copies this store into `dst` (admin only, on both), calling `progress` with the rows
    /// copied so far; then checks that both give the same export and the same rows. `dst` must
    /// be empty: no scope, session or grant (a store `create` just made).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let src = somna::Store::create(dir.path().join("a.redb")).unwrap();
    /// src.note("default", somna::NewMemory::new("kept")).unwrap();
    /// let dst = somna::Store::create(dir.path().join("b.redb")).unwrap();
    /// let copied = src.copy_into(&dst, &mut |_| {}).unwrap();
    /// assert!(copied.rows > 0);
    /// assert_eq!(dst.count("default").unwrap(), 1);
    /// ```
    pub fn copy_into(&self, dst: &Store, progress: &mut dyn FnMut(u64)) -> Result<Copied> {
        let rows = dst.write(|w| {
            w.require_admin("copy a store into this one")?;
            if !list_scopes(&*w.tx)?.is_empty()
                || has_rows(&*w.tx, TableId::Sessions)?
                || has_rows(&*w.tx, TableId::Grants)?
            {
                return Err(Error::Conflict(format!(
                    "{} is not empty (it has scopes, sessions or grants); copy into a new store",
                    dst.path().display()
                )));
            }
            self.read(|r| {
                r.require_admin("copy this store")?;
                let mut n = 0u64;
                for t in TableId::ALL {
                    n += copy_table(r.tx, &mut *w.tx, t, &mut |k| progress(n + k))?;
                }
                Ok(n)
            })
        })?;
        // Rows first: an export with the read audit on adds an audit row to each store.
        let (a, b) = (
            self.read(|r| table_digests(r.tx))?,
            dst.read(|r| table_digests(r.tx))?,
        );
        if let Some(((t, _, n), (_, _, m))) = a.iter().zip(&b).find(|(x, y)| x != y) {
            return Err(Error::Storage(format!(
                "the copy's table {} differs from the source's ({m} rows, {n} expected)",
                t.name()
            )));
        }
        let (src_export, dst_export) = (self.export_digest()?, dst.export_digest()?);
        if src_export != dst_export {
            return Err(Error::Storage(
                "the copy's export differs from the source's; the destination is not a faithful copy".into(),
            ));
        }
        Ok(Copied {
            rows,
            export_lines: src_export.1,
            export_bytes: src_export.2,
        })
    }

    /// The digest, line count and byte count of this store's export.
    fn export_digest(&self) -> Result<(u128, u64, u64)> {
        let mut d = Digest::default();
        let lines = self.export(&mut d)?;
        Ok((d.hash.digest128(), lines, d.bytes))
    }
}

fn has_rows(kv: &(impl KvRead + ?Sized), t: TableId) -> Result<bool> {
    let mut any = false;
    scan_all(kv, t, &mut |_, _| {
        any = true;
        Ok(ControlFlow::Break(()))
    })?;
    Ok(any)
}

/// Copies table `t` in batches; the rows copied.
fn copy_table(
    src: &(impl KvRead + ?Sized),
    dst: &mut (impl KvWrite + ?Sized),
    t: TableId,
    progress: &mut dyn FnMut(u64),
) -> Result<u64> {
    let mut batch: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(BATCH);
    let mut n = 0u64;
    scan_all(src, t, &mut |k, v| {
        if engine_local(t, k) {
            return Ok(ControlFlow::Continue(()));
        }
        batch.push((k.to_vec(), v.to_vec()));
        if batch.len() == BATCH {
            dst.put_many(t, &batch)?;
            n += batch.len() as u64;
            batch.clear();
            progress(n);
        }
        Ok(ControlFlow::Continue(()))
    })?;
    if !batch.is_empty() {
        dst.put_many(t, &batch)?;
        n += batch.len() as u64;
        progress(n);
    }
    Ok(n)
}
