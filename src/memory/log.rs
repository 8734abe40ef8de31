//! The raw log: append-only memories, keyed by (scope id, position), never rewritten. This file
//! is record access only: keys, decoding, the line a memory is shown as, and point and range
//! reads. Appending is in [`crate::memory::note`], recall in [`crate::memory::recall`].

use std::fmt;

use crate::domain::record::{Kind, Memory};
use crate::domain::text::{date_of, display_safe};
use crate::error::{Error, Result};
use crate::storage::codec::decode;
use crate::storage::kv::KvRead;
use crate::storage::tables::LOG;
use crate::storage::txn::{ReadTxn, WriteTxn};

pub(crate) struct LogKey(pub u32, pub u64);
impl fmt::Display for LogKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "(scope {}, #{})", self.0, self.1)
    }
}

pub(crate) fn decode_memory(scope_id: u32, pos: u64, bytes: &[u8]) -> Result<Memory> {
    let m: Memory = decode("log", &LogKey(scope_id, pos), bytes)?;
    check_position(scope_id, pos, m.id)?;
    Ok(m)
}

/// A record stored at `pos` must say it is `#pos`.
fn check_position(scope_id: u32, pos: u64, id: u64) -> Result<()> {
    if id != pos {
        return Err(Error::corrupt(
            "log",
            LogKey(scope_id, pos),
            format!("the record says it is #{id}"),
        ));
    }
    Ok(())
}

/// The fields of a stored memory that recall filters on, borrowed from the value's bytes: the
/// start of [`Memory`] in wire order; the rest of the record is not decoded.
pub(crate) struct MemoryView<'a> {
    id: u64,
    pub(crate) observed_us: i64,
    /// The text's bytes, not yet checked to be UTF-8: recall checks printable ASCII (which is
    /// UTF-8) in one pass, and only other text with `from_utf8`.
    pub(crate) text: &'a [u8],
    pub(crate) kind: Kind,
}

/// The first fields of a log record, read off postcard's wire format without serde (recall
/// reads one per record): `id`, `observed_us`, `recorded_us` (skipped), `text`, `kind` (its
/// variant index, in [`Kind`]'s declaration order).
#[inline]
pub(crate) fn decode_view(scope_id: u32, pos: u64, bytes: &[u8]) -> Result<MemoryView<'_>> {
    let body = crate::storage::codec::payload("log", &LogKey(scope_id, pos), bytes)?;
    let mut w = crate::storage::codec::Wire::new(body);
    let m = (|| {
        let id = w.u64()?;
        let observed_us = w.i64()?;
        w.i64()?;
        let n = usize::try_from(w.u64()?).ok()?;
        let text = w.bytes(n)?;
        let kind = match w.u32()? {
            0 => Kind::Statement,
            1 => Kind::Observation,
            2 => Kind::Inference,
            3 => Kind::Decision,
            4 => Kind::Task,
            _ => return None,
        };
        Some(MemoryView {
            id,
            observed_us,
            text,
            kind,
        })
    })()
    .ok_or_else(|| crate::storage::codec::wire_error("log", &LogKey(scope_id, pos), None))?;
    check_position(scope_id, pos, m.id)?;
    Ok(m)
}

/// Formats `n` in decimal into `buf` without allocating.
pub(crate) fn itoa_u64(mut n: u64, buf: &mut [u8; 20]) -> &str {
    let mut i = buf.len();
    loop {
        i -= 1;
        if let Some(b) = buf.get_mut(i) {
            *b = b'0' + (n % 10) as u8;
        }
        n /= 10;
        if n == 0 || i == 0 {
            break;
        }
    }
    std::str::from_utf8(buf.get(i..).unwrap_or_default()).unwrap_or("0")
}

/// Renders a memory as its wake/recall line: `#id YYYY-MM-DD text`.
pub fn memory_line(m: &Memory) -> String {
    format!(
        "#{} {} {}",
        m.id,
        date_of(m.observed_us),
        display_safe(&m.text)
    )
}

impl WriteTxn<'_> {
    /// Reads one memory as of this transaction.
    pub fn memory(&self, scope: &str, id: u64) -> Result<Memory> {
        let meta = crate::storage::txn::holding(self.scope_meta(scope)?, id)?;
        get_memory(&*self.tx, meta.id, id)
    }
}
pub(crate) fn get_memory(kv: &(impl KvRead + ?Sized), scope_id: u32, id: u64) -> Result<Memory> {
    match LOG.read(kv, (scope_id, id), |v| decode_memory(scope_id, id, v))? {
        Some(m) => Ok(m),
        None => Err(Error::corrupt(
            "log",
            LogKey(scope_id, id),
            "missing: the log is not dense",
        )),
    }
}

/// Streams the memories with ids in `[lo, hi)` of scope `sid` to `f`, oldest first.
pub(crate) fn each_memory(
    kv: &(impl KvRead + ?Sized),
    sid: u32,
    lo: u64,
    hi: u64,
    mut f: impl FnMut(Memory) -> Result<()>,
) -> Result<()> {
    LOG.each(kv, (sid, lo)..(sid, hi), |(_, pos), v| {
        f(decode_memory(sid, pos, v)?)
    })
}

impl ReadTxn<'_> {
    /// Reads one memory.
    pub fn memory(&self, scope: &str, id: u64) -> Result<Memory> {
        let meta = crate::storage::txn::holding(self.scope_meta(scope)?, id)?;
        get_memory(self.tx, meta.id, id)
    }

    /// Reads the memories with ids in `[lo, hi)` (clipped to the log).
    pub fn memories(&self, scope: &str, lo: u64, hi: u64) -> Result<Vec<Memory>> {
        let Some(meta) = self.scope_meta(scope)? else {
            return Ok(Vec::new());
        };
        let hi = hi.min(meta.count);
        let mut out = Vec::new();
        if lo >= hi {
            return Ok(out);
        }
        each_memory(self.tx, meta.id, lo, hi, |m| {
            out.push(m);
            Ok(())
        })?;
        Ok(out)
    }
}

crate::storage::store::store_calls! {
    /// Number of memories in `scope`.
    read fn count(scope: &str) -> u64;
    /// Reads one memory.
    read fn memory(scope: &str, id: u64) -> Memory;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::codec::encode;

    #[test]
    fn the_view_reads_what_serde_reads() {
        for (i, kind) in [
            Kind::Statement,
            Kind::Observation,
            Kind::Inference,
            Kind::Decision,
            Kind::Task,
        ]
        .into_iter()
        .enumerate()
        {
            let m = Memory {
                id: 300 + i as u64,
                observed_us: -5 - i as i64,
                recorded_us: i64::MAX,
                text: format!("caf\u{e9} {i}"),
                kind,
                status: Default::default(),
                source: Some("s".into()),
                source_uri: None,
                supersedes: vec![1],
                conflicts_with: Vec::new(),
                valid_until_us: None,
            };
            let v = encode(&m).unwrap();
            let view = decode_view(1, m.id, &v).unwrap();
            assert_eq!(
                (view.id, view.observed_us, view.text, view.kind),
                (m.id, m.observed_us, m.text.as_bytes(), m.kind)
            );
            assert!(decode_view(1, m.id + 1, &v).is_err());
        }
    }
}
