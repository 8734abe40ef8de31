//! The seam's bytes as redb's typed tables: each key the seam passes in (memcomparable,
//! [`crate::storage::keys`]) is decoded back into the table's typed tuple key ([`RedbKey`]), each
//! key redb yields is encoded; values pass through as they are ([`RedbVal`]: `pending` and `stale`
//! hold `()`, seen as empty bytes). One generic function per operation (`get_in`, `scan_in`,
//! `put_in`, `delete_in`, `delete_range_in`), which [`crate::storage::redb::kv`] calls for each
//! table of format 1. Scans stream redb's range iterator into the visitor: nothing is collected,
//! values are never copied.

use std::borrow::Cow;
use std::ops::Bound;

use redb::ReadableTable;

use crate::error::Result;
use crate::storage::keys::{self, Key};
use crate::storage::kv::{empty_range, Dir, Seen, Span, TableId, Visit};

/// A key shape that is also redb's typed key: how a decoded key is viewed as redb's key, and how
/// redb's key is encoded.
pub(crate) trait RedbKey: Key + redb::Key {
    /// The decoded key as redb's key type.
    fn view<'a>(d: &'a Self::Dec<'_>) -> Self::SelfType<'a>;
    /// Appends the encoding of redb's key.
    fn put(k: Self::SelfType<'_>, out: &mut Vec<u8>);
    /// Appends the encoding of a key given as redb stores it (`as_bytes`). By default decoded
    /// by redb first; a `&str` key is stored as its raw UTF-8, which is also somna's encoding,
    /// so it is copied and checked once, by `keys::decode` (redb's `from_bytes` would check it
    /// too, and panic on bytes that are not UTF-8).
    fn put_stored(stored: &[u8], out: &mut Vec<u8>) {
        Self::put(<Self as redb::Value>::from_bytes(stored), out);
    }
}

impl RedbKey for &'static str {
    fn view<'a>(d: &'a &str) -> &'a str {
        d
    }
    fn put(k: &str, out: &mut Vec<u8>) {
        <Self as Key>::encode(k, out)
    }
    fn put_stored(stored: &[u8], out: &mut Vec<u8>) {
        out.extend_from_slice(stored);
    }
}

impl RedbKey for u64 {
    fn view(d: &u64) -> u64 {
        *d
    }
    fn put(k: u64, out: &mut Vec<u8>) {
        <Self as Key>::encode(k, out)
    }
}

impl RedbKey for (u32, u64) {
    fn view(d: &(u32, u64)) -> (u32, u64) {
        *d
    }
    fn put(k: (u32, u64), out: &mut Vec<u8>) {
        <Self as Key>::encode(k, out)
    }
}

impl RedbKey for (u32, u8, u64) {
    fn view(d: &(u32, u8, u64)) -> (u32, u8, u64) {
        *d
    }
    fn put(k: (u32, u8, u64), out: &mut Vec<u8>) {
        <Self as Key>::encode(k, out)
    }
}

impl RedbKey for (u32, u64, u32) {
    fn view(d: &(u32, u64, u32)) -> (u32, u64, u32) {
        *d
    }
    fn put(k: (u32, u64, u32), out: &mut Vec<u8>) {
        <Self as Key>::encode(k, out)
    }
}

impl RedbKey for (u32, &'static str) {
    fn view<'a>(d: &'a (u32, &str)) -> (u32, &'a str) {
        *d
    }
    fn put(k: (u32, &str), out: &mut Vec<u8>) {
        <Self as Key>::encode(k, out)
    }
}

impl RedbKey for (&'static str, u64) {
    fn view<'a>(d: &'a (Cow<'_, str>, u64)) -> (&'a str, u64) {
        (d.0.as_ref(), d.1)
    }
    fn put(k: (&str, u64), out: &mut Vec<u8>) {
        <Self as Key>::encode(k, out)
    }
}

impl RedbKey for (&'static str, &'static str) {
    fn view<'a>(d: &'a (Cow<'_, str>, &str)) -> (&'a str, &'a str) {
        (d.0.as_ref(), d.1)
    }
    fn put(k: (&str, &str), out: &mut Vec<u8>) {
        <Self as Key>::encode(k, out)
    }
}

impl RedbKey for (&'static str, u8, &'static str) {
    fn view<'a>(d: &'a (Cow<'_, str>, u8, &str)) -> (&'a str, u8, &'a str) {
        (d.0.as_ref(), d.1, d.2)
    }
    fn put(k: (&str, u8, &str), out: &mut Vec<u8>) {
        <Self as Key>::encode(k, out)
    }
}

impl RedbKey for (&'static str, &'static str, &'static str) {
    fn view<'a>(d: &'a (Cow<'_, str>, Cow<'_, str>, &str)) -> (&'a str, &'a str, &'a str) {
        (d.0.as_ref(), d.1.as_ref(), d.2)
    }
    fn put(k: (&str, &str, &str), out: &mut Vec<u8>) {
        <Self as Key>::encode(k, out)
    }
}

impl RedbKey for (&'static str, &'static str, &'static str, &'static str) {
    fn view<'a>(d: &'a Self::Dec<'_>) -> (&'a str, &'a str, &'a str, &'a str) {
        (d.0.as_ref(), d.1.as_ref(), d.2.as_ref(), d.3)
    }
    fn put(k: (&str, &str, &str, &str), out: &mut Vec<u8>) {
        <Self as Key>::encode(k, out)
    }
}

impl RedbKey for (&'static str, &'static str, &'static str, u64) {
    fn view<'a>(d: &'a Self::Dec<'_>) -> (&'a str, &'a str, &'a str, u64) {
        (d.0.as_ref(), d.1.as_ref(), d.2.as_ref(), d.3)
    }
    fn put(k: (&str, &str, &str, u64), out: &mut Vec<u8>) {
        <Self as Key>::encode(k, out)
    }
}

impl RedbKey for (&'static str, &'static str, &'static str, &'static str, u64) {
    fn view<'a>(d: &'a Self::Dec<'_>) -> (&'a str, &'a str, &'a str, &'a str, u64) {
        (d.0.as_ref(), d.1.as_ref(), d.2.as_ref(), d.3.as_ref(), d.4)
    }
    fn put(k: (&str, &str, &str, &str, u64), out: &mut Vec<u8>) {
        <Self as Key>::encode(k, out)
    }
}

impl RedbKey for (u32, &'static str, u64) {
    fn view<'a>(d: &'a (u32, Cow<'_, str>, u64)) -> (u32, &'a str, u64) {
        (d.0, d.1.as_ref(), d.2)
    }
    fn put(k: (u32, &str, u64), out: &mut Vec<u8>) {
        <Self as Key>::encode(k, out)
    }
}

/// A value type of format 1 as bytes: `&[u8]` as is, `()` as empty.
pub(crate) trait RedbVal: redb::Value + 'static {
    /// The bytes of a value.
    fn bytes<'a>(v: &'a Self::SelfType<'_>) -> &'a [u8];
    /// The value to store for `b`.
    fn of(b: &[u8]) -> Self::SelfType<'_>;
}

impl RedbVal for &'static [u8] {
    fn bytes<'a>(v: &'a &[u8]) -> &'a [u8] {
        v
    }
    fn of(b: &[u8]) -> &[u8] {
        b
    }
}

impl RedbVal for () {
    fn bytes(_: &()) -> &[u8] {
        &[]
    }
    fn of(_: &[u8]) {}
}

/// A bound of encoded keys, decoded into the table's key shape.
fn dec_bound<K: Key>(t: TableId, b: Bound<&[u8]>) -> Result<Bound<K::Dec<'_>>> {
    Ok(match b {
        Bound::Included(k) => Bound::Included(keys::decode::<K>(t, k)?),
        Bound::Excluded(k) => Bound::Excluded(keys::decode::<K>(t, k)?),
        Bound::Unbounded => Bound::Unbounded,
    })
}

/// A decoded bound as redb's key type.
fn view_bound<'a, K: RedbKey>(b: &'a Bound<K::Dec<'_>>) -> Bound<K::SelfType<'a>> {
    match b {
        Bound::Included(k) => Bound::Included(K::view(k)),
        Bound::Excluded(k) => Bound::Excluded(K::view(k)),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Calls `f` with the value at `key` of table `t` (of id `id`), if there is one; whether there was.
pub(super) fn get_in<K: RedbKey, V: RedbVal, T: ReadableTable<K, V>>(
    t: &T,
    id: TableId,
    key: &[u8],
    f: &mut Seen<'_>,
) -> Result<bool> {
    let d = keys::decode::<K>(id, key)?;
    match t.get(K::view(&d))? {
        Some(g) => f(V::bytes(&g.value())).map(|()| true),
        None => Ok(false),
    }
}

/// Feeds redb's entries to the visitor, encoding each key into one reused buffer, until the
/// first key past `far` (the bound the scan moves towards). The entries come borrowed from their
/// pages as redb stores them (the vendored redb's `Range::for_each_entry_bytes`), with no guard
/// and no page reference count per entry, each key put in somna's encoding by
/// [`RedbKey::put_stored`].
fn visit<K: RedbKey, V: RedbVal>(
    mut range: redb::Range<'_, K, V>,
    far: Far<'_>,
    f: &mut Visit<'_>,
) -> Result<()> {
    let mut buf = Vec::with_capacity(32);
    let mut out = Ok(());
    let mut each = |k: &[u8], v: &[u8]| {
        buf.clear();
        K::put_stored(k, &mut buf);
        if far.passed(&buf) {
            return false;
        }
        match f(&buf, V::bytes(&V::from_bytes(v))) {
            Ok(flow) => flow.is_continue(),
            Err(e) => {
                out = Err(e);
                false
            }
        }
    };
    range.for_each_entry_bytes(far.dir == Dir::Forward, &mut each)?;
    out
}

/// The bound a scan moves towards, checked on the encoded key. redb checks it on every entry by
/// comparing typed tuples (about 56 instructions for a `(u32, u64)` key, a tenth of a recall's
/// per-record cost in the B-tree); the memcomparable encoding (`storage::keys`) orders exactly
/// as those tuples, so one `memcmp` of the buffer the visitor gets anyway decides the same. The
/// near bound still goes to redb, which seeks to it.
struct Far<'a> {
    bound: Bound<&'a [u8]>,
    dir: Dir,
}

impl Far<'_> {
    /// Whether `key` lies past the bound, so the scan is over.
    fn passed(&self, key: &[u8]) -> bool {
        match (self.dir, self.bound) {
            (_, Bound::Unbounded) => false,
            (Dir::Forward, Bound::Included(b)) => key > b,
            (Dir::Forward, Bound::Excluded(b)) => key >= b,
            (Dir::Reverse, Bound::Included(b)) => key < b,
            (Dir::Reverse, Bound::Excluded(b)) => key <= b,
        }
    }
}

/// Visits the entries of table `t` within `span`, in its order, until `f` breaks.
pub(super) fn scan_in<K: RedbKey, V: RedbVal, T: ReadableTable<K, V>>(
    t: &T,
    id: TableId,
    span: Span<'_>,
    f: &mut Visit<'_>,
) -> Result<()> {
    if span.is_empty() {
        return Ok(());
    }
    let Span { lo, hi, dir } = span;
    // The far bound is checked here (`Far`); redb gets the near one to seek to.
    let (near_lo, near_hi, far) = match dir {
        Dir::Forward => (lo, Bound::Unbounded, hi),
        Dir::Reverse => (Bound::Unbounded, hi, lo),
    };
    let far = Far { bound: far, dir };
    // Both bounds are still decoded, so a malformed one is refused as before.
    dec_bound::<K>(id, far.bound)?;
    let lo = dec_bound::<K>(id, near_lo)?;
    let hi = dec_bound::<K>(id, near_hi)?;
    let range = t.range::<K::SelfType<'_>>((view_bound::<K>(&lo), view_bound::<K>(&hi)))?;
    visit(range, far, f)
}

/// Stores `value` at `key` in table `t`.
pub(super) fn put_in<K: RedbKey, V: RedbVal>(
    t: &mut redb::Table<'_, K, V>,
    id: TableId,
    key: &[u8],
    value: &[u8],
) -> Result<()> {
    let d = keys::decode::<K>(id, key)?;
    t.insert(K::view(&d), V::of(value))?;
    Ok(())
}

/// Removes `key` from table `t`; whether it was there.
pub(super) fn delete_in<K: RedbKey, V: RedbVal>(
    t: &mut redb::Table<'_, K, V>,
    id: TableId,
    key: &[u8],
) -> Result<bool> {
    let d = keys::decode::<K>(id, key)?;
    let old = t.remove(K::view(&d))?;
    Ok(old.is_some())
}

/// Removes every key of table `t` within the bounds; how many there were.
pub(super) fn delete_range_in<K: RedbKey, V: RedbVal>(
    t: &mut redb::Table<'_, K, V>,
    id: TableId,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
) -> Result<u64> {
    if empty_range(lo, hi) {
        return Ok(0);
    }
    let lo = dec_bound::<K>(id, lo)?;
    let hi = dec_bound::<K>(id, hi)?;
    let mut n = 0u64;
    for item in t.extract_from_if::<K::SelfType<'_>, _>(
        (view_bound::<K>(&lo), view_bound::<K>(&hi)),
        |_, _| true,
    )? {
        item?;
        n += 1;
    }
    Ok(n)
}
