//! The one order-preserving ("memcomparable") byte encoding of every key somna stores, and the
//! typed table descriptors ([`Table`]) that call sites use so that they never handle key bytes.
//!
//! Each key is a tuple of up to five elements, encoded element by element:
//!
//! | element | encoding |
//! |---|---|
//! | `u8`, `u32`, `u64` | big-endian, fixed width (1, 4, 8 bytes) |
//! | `&str` not in last position | UTF-8 with each `00` byte escaped as `00 FF`, then `00 00` |
//! | `&str` in last position | raw UTF-8, no terminator |
//!
//! Comparing two encodings with `memcmp` orders them exactly as redb orders the typed tuples
//! (integers numerically, strings bytewise with a prefix first), which `tests/api/store/key_order.rs`
//! checks against redb itself. Example: the `session_messages` key `("s1", 7)` is
//! `73 31 00 00 00 00 00 00 00 00 00 07`.
//!
//! The escape never fires in practice (scope names, session ids, idempotency keys and principals
//! refuse control characters) but keeps the encoding total. Decoding is strict: a key that is not
//! a complete encoding of its table's shape is [`crate::Error::Corrupt`], never a panic.

use std::borrow::Cow;
use std::marker::PhantomData;
use std::ops::{Bound, ControlFlow, RangeBounds};

use crate::error::{Error, Result};
use crate::storage::kv::{Dir, KvRead, KvWrite, Span, TableId};

/// Appends `v` big-endian.
fn put_u8(out: &mut Vec<u8>, v: u8) {
    out.push(v);
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_be_bytes());
}

fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// A string followed by more elements: `00` escaped as `00 FF`, then the terminator `00 00`.
fn put_str_mid(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    if bytes.contains(&0) {
        for &b in bytes {
            out.push(b);
            if b == 0 {
                out.push(0xFF);
            }
        }
    } else {
        out.extend_from_slice(bytes);
    }
    out.extend_from_slice(&[0, 0]);
}

/// The last element of a key: its raw UTF-8.
fn put_str_last(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
}

/// Reads the elements of an encoded key front to back; `None` on malformed bytes.
pub struct Reader<'a> {
    b: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.b.split_first_chunk::<N>()?;
        self.b = rest;
        Some(*head)
    }

    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|[b]| b)
    }

    fn u32(&mut self) -> Option<u32> {
        self.take::<4>().map(u32::from_be_bytes)
    }

    fn u64(&mut self) -> Option<u64> {
        self.take::<8>().map(u64::from_be_bytes)
    }

    /// A string in non-last position; borrowed unless it held an escaped `00`.
    fn str_mid(&mut self) -> Option<Cow<'a, str>> {
        let b = self.b;
        let mut i = 0;
        let mut escaped = false;
        loop {
            // The next `00`: the terminator `00 00` or an escaped `00 FF`.
            i += b.get(i..)?.iter().position(|&c| c == 0)?;
            match b.get(i + 1) {
                Some(0) => break,
                Some(0xFF) => {
                    escaped = true;
                    i += 2;
                }
                _ => return None,
            }
        }
        let raw = b.get(..i)?;
        self.b = b.get(i + 2..)?;
        if !escaped {
            return std::str::from_utf8(raw).ok().map(Cow::Borrowed);
        }
        let mut v = Vec::with_capacity(raw.len());
        let mut it = raw.iter();
        while let Some(&c) = it.next() {
            v.push(c);
            if c == 0 {
                it.next();
            }
        }
        String::from_utf8(v).ok().map(Cow::Owned)
    }

    /// The last element: the rest of the bytes.
    fn str_last(&mut self) -> Option<&'a str> {
        let s = std::str::from_utf8(self.b).ok()?;
        self.b = &[];
        Some(s)
    }

    /// `v`, if every byte was read.
    fn end<T>(self, v: T) -> Option<T> {
        self.b.is_empty().then_some(v)
    }
}

/// A key shape: how one table's typed keys map to bytes and back. Implemented for the tuple
/// types that name the shapes, the same types as redb's table definitions.
pub trait Key: 'static {
    /// The key as a caller passes it (borrowing its strings).
    type Enc<'a>: Copy;
    /// The key as decoded from bytes (a non-last string may need unescaping, hence `Cow`).
    type Dec<'a>;
    /// Appends the encoding of `k` to `out`.
    fn encode(k: Self::Enc<'_>, out: &mut Vec<u8>);
    /// Decodes a complete encoding; `None` if `b` is not one.
    fn decode(b: &[u8]) -> Option<Self::Dec<'_>>;
}

/// One element of a key: how it is written and read, in a middle position and in the last.
/// Implemented for `u8`, `u32`, `u64` (the same in either position) and `&'static str`.
///
/// The set is closed: [`Reader`]'s methods are somna's own, so a type outside the crate cannot
/// read itself back, and every table's key is a tuple of these four. The trait is public only
/// because the tuple shapes' [`Key`] implementations name it.
pub trait Elem: 'static {
    /// The element as a caller passes it.
    type Enc<'a>: Copy;
    /// The element as decoded from a middle position.
    type Mid<'a>;
    /// The element as decoded from the last position.
    type Last<'a>;
    /// Appends `v` as a middle element.
    fn put_mid(v: Self::Enc<'_>, out: &mut Vec<u8>);
    /// Appends `v` as the last element.
    fn put_last(v: Self::Enc<'_>, out: &mut Vec<u8>);
    /// Reads a middle element.
    fn mid<'a>(r: &mut Reader<'a>) -> Option<Self::Mid<'a>>;
    /// Reads the last element.
    fn last<'a>(r: &mut Reader<'a>) -> Option<Self::Last<'a>>;
}

/// A fixed-width integer element: the same in every position.
macro_rules! int_elem {
    ($($t:ty => $put:ident, $read:ident;)*) => {$(
        impl Elem for $t {
            type Enc<'a> = $t;
            type Mid<'a> = $t;
            type Last<'a> = $t;
            fn put_mid(v: $t, out: &mut Vec<u8>) {
                $put(out, v);
            }
            fn put_last(v: $t, out: &mut Vec<u8>) {
                $put(out, v);
            }
            fn mid(r: &mut Reader<'_>) -> Option<$t> {
                r.$read()
            }
            fn last(r: &mut Reader<'_>) -> Option<$t> {
                r.$read()
            }
        }
    )*};
}

int_elem! {
    u8 => put_u8, u8;
    u32 => put_u32, u32;
    u64 => put_u64, u64;
}

impl Elem for &'static str {
    type Enc<'a> = &'a str;
    type Mid<'a> = Cow<'a, str>;
    type Last<'a> = &'a str;
    fn put_mid(v: &str, out: &mut Vec<u8>) {
        put_str_mid(out, v);
    }
    fn put_last(v: &str, out: &mut Vec<u8>) {
        put_str_last(out, v);
    }
    fn mid<'a>(r: &mut Reader<'a>) -> Option<Cow<'a, str>> {
        r.str_mid()
    }
    fn last<'a>(r: &mut Reader<'a>) -> Option<&'a str> {
        r.str_last()
    }
}

impl Key for &'static str {
    type Enc<'a> = &'a str;
    type Dec<'a> = &'a str;
    fn encode(k: &str, out: &mut Vec<u8>) {
        put_str_last(out, k);
    }
    fn decode(b: &[u8]) -> Option<&str> {
        Reader { b }.str_last()
    }
}

impl Key for u64 {
    type Enc<'a> = u64;
    type Dec<'a> = u64;
    fn encode(k: u64, out: &mut Vec<u8>) {
        put_u64(out, k);
    }
    fn decode(b: &[u8]) -> Option<u64> {
        let mut r = Reader { b };
        let a = r.u64()?;
        r.end(a)
    }
}

/// A tuple key: its elements in order, every one but the last as a middle element. The whole
/// encoding must be read (a last string takes what is left).
macro_rules! tuple_key {
    ($(($($mid:ident $m:tt),*; $last:ident $l:tt);)*) => {$(
        impl<$($mid: Elem,)* $last: Elem> Key for ($($mid,)* $last) {
            type Enc<'a> = ($($mid::Enc<'a>,)* $last::Enc<'a>);
            type Dec<'a> = ($($mid::Mid<'a>,)* $last::Last<'a>);
            fn encode(k: Self::Enc<'_>, out: &mut Vec<u8>) {
                $($mid::put_mid(k.$m, out);)*
                $last::put_last(k.$l, out);
            }
            fn decode(b: &[u8]) -> Option<Self::Dec<'_>> {
                let mut r = Reader { b };
                let v = ($($mid::mid(&mut r)?,)* $last::last(&mut r)?);
                r.end(v)
            }
        }
    )*};
}

tuple_key! {
    (A 0; B 1);
    (A 0, B 1; C 2);
    (A 0, B 1, C 2; D 3);
    (A 0, B 1, C 2, D 3; E 4);
}

thread_local! {
    /// Reused buffers for the keys and bounds the typed tables encode, so that a get or a scan
    /// allocates nothing in the steady state (a nested call finds a buffer taken and allocates).
    static KEY: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
    static LO: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
    static HI: std::cell::Cell<Vec<u8>> = const { std::cell::Cell::new(Vec::new()) };
}

/// Runs `f` on the encoding of `k`, in a reused buffer.
fn with_key<K: Key, R>(k: K::Enc<'_>, f: impl FnOnce(&[u8]) -> R) -> R {
    let mut buf = KEY.take();
    buf.clear();
    K::encode(k, &mut buf);
    let r = f(&buf);
    KEY.set(buf);
    r
}

/// Runs `f` on the encoded bounds of `range`, in reused buffers.
fn with_bounds<'a, K: Key, R>(
    range: &impl RangeBounds<K::Enc<'a>>,
    f: impl FnOnce(Bound<&[u8]>, Bound<&[u8]>) -> R,
) -> R {
    let mut lo = LO.take();
    let mut hi = HI.take();
    let lo_b = enc_bound::<K>(range.start_bound(), &mut lo);
    let hi_b = enc_bound::<K>(range.end_bound(), &mut hi);
    let r = f(as_slice(lo_b, &lo), as_slice(hi_b, &hi));
    LO.set(lo);
    HI.set(hi);
    r
}

/// The encoding of `k` as a key of shape `K`.
pub fn encode<K: Key>(k: K::Enc<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    K::encode(k, &mut out);
    out
}

/// Decodes a key of table `t`; a malformed one is [`Error::Corrupt`] naming the table.
pub fn decode<K: Key>(t: TableId, b: &[u8]) -> Result<K::Dec<'_>> {
    K::decode(b).ok_or_else(|| bad_key(t, b))
}

/// The error for key bytes that are not a complete encoding of the table's shape.
pub(crate) fn bad_key(t: TableId, b: &[u8]) -> Error {
    let hex: String = b.iter().map(|x| format!("{x:02x}")).collect();
    Error::corrupt(
        t.name(),
        hex,
        "the key is not an encoding of this table's key shape",
    )
}

/// A table with keys of shape `K`: the typed face of [`KvRead`] and [`KvWrite`]. The constants
/// are in [`crate::storage::redb::schema`].
pub struct Table<K> {
    /// Which table.
    pub id: TableId,
    _k: PhantomData<fn() -> K>,
}

impl<K> Clone for Table<K> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K> Copy for Table<K> {}

impl<K> std::fmt::Debug for Table<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Table({})", self.id.name())
    }
}

/// Encodes a bound's key into `buf`; the bound's kind.
fn enc_bound<K: Key>(b: Bound<&K::Enc<'_>>, buf: &mut Vec<u8>) -> Bound<()> {
    buf.clear();
    match b {
        Bound::Included(k) => {
            K::encode(*k, buf);
            Bound::Included(())
        }
        Bound::Excluded(k) => {
            K::encode(*k, buf);
            Bound::Excluded(())
        }
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn as_slice(b: Bound<()>, buf: &[u8]) -> Bound<&[u8]> {
    match b {
        Bound::Included(()) => Bound::Included(buf),
        Bound::Excluded(()) => Bound::Excluded(buf),
        Bound::Unbounded => Bound::Unbounded,
    }
}

impl<K: Key> Table<K> {
    /// The descriptor of table `id`, whose keys have shape `K`.
    pub const fn new(id: TableId) -> Self {
        Table {
            id,
            _k: PhantomData,
        }
    }

    /// The value at `k`.
    pub fn get<S: KvRead + ?Sized>(&self, kv: &S, k: K::Enc<'_>) -> Result<Option<Vec<u8>>> {
        with_key::<K, _>(k, |key| kv.get(self.id, key))
    }

    /// `f` of the value at `k`, read in place (no copy on redb).
    pub fn read<S: KvRead + ?Sized, R>(
        &self,
        kv: &S,
        k: K::Enc<'_>,
        f: impl FnOnce(&[u8]) -> Result<R>,
    ) -> Result<Option<R>> {
        let mut f = Some(f);
        let mut out = None;
        with_key::<K, _>(k, |key| {
            kv.get_with(self.id, key, &mut |v| {
                if let Some(f) = f.take() {
                    out = Some(f(v)?);
                }
                Ok(())
            })
        })?;
        Ok(out)
    }

    /// The value at `k`, announcing that it will be written (see [`KvWrite::get_for_update`]).
    pub fn get_for_update<S: KvWrite + ?Sized>(
        &self,
        kv: &mut S,
        k: K::Enc<'_>,
    ) -> Result<Option<Vec<u8>>> {
        with_key::<K, _>(k, |key| kv.get_for_update(self.id, key))
    }

    /// Whether `k` is present.
    pub fn contains<S: KvRead + ?Sized>(&self, kv: &S, k: K::Enc<'_>) -> Result<bool> {
        with_key::<K, _>(k, |key| kv.get_with(self.id, key, &mut |_| Ok(())))
    }

    /// Stores `value` at `k`.
    pub fn put<S: KvWrite + ?Sized>(&self, kv: &mut S, k: K::Enc<'_>, value: &[u8]) -> Result<()> {
        with_key::<K, _>(k, |key| kv.put(self.id, key, value))
    }

    /// Stores `value` at `k`; whether a value was there before.
    pub fn insert<S: KvWrite + ?Sized>(
        &self,
        kv: &mut S,
        k: K::Enc<'_>,
        value: &[u8],
    ) -> Result<bool> {
        with_key::<K, _>(k, |key| {
            let had = kv.get_with(self.id, key, &mut |_| Ok(()))?;
            kv.put(self.id, key, value)?;
            Ok(had)
        })
    }

    /// Removes `k`; whether it was present.
    pub fn delete<S: KvWrite + ?Sized>(&self, kv: &mut S, k: K::Enc<'_>) -> Result<bool> {
        with_key::<K, _>(k, |key| kv.delete(self.id, key))
    }

    /// Removes `k`, returning the value it had.
    pub fn take<S: KvWrite + ?Sized>(&self, kv: &mut S, k: K::Enc<'_>) -> Result<Option<Vec<u8>>> {
        with_key::<K, _>(k, |key| {
            let old = kv.get(self.id, key)?;
            if old.is_some() {
                kv.delete(self.id, key)?;
            }
            Ok(old)
        })
    }

    /// Removes every key in `range`; how many there were.
    pub fn delete_range<'a, S: KvWrite + ?Sized>(
        &self,
        kv: &mut S,
        range: impl RangeBounds<K::Enc<'a>>,
    ) -> Result<u64> {
        with_bounds::<K, _>(&range, |lo, hi| kv.delete_range(self.id, lo, hi))
    }

    /// Hints that these keys are about to be read (see [`KvRead::prefetch`]); nothing is
    /// encoded where the engine ignores hints.
    pub fn prefetch<'a, S: KvRead + ?Sized>(
        &self,
        kv: &S,
        keys: impl IntoIterator<Item = K::Enc<'a>>,
    ) -> Result<()> {
        if !kv.prefetches() {
            return Ok(());
        }
        let keys: Vec<Vec<u8>> = keys.into_iter().map(encode::<K>).collect();
        if keys.is_empty() {
            return Ok(());
        }
        kv.prefetch(self.id, &keys)
    }

    /// Hints that `range` is about to be scanned (see [`KvRead::prefetch_range`]).
    pub fn prefetch_range<'a, S: KvRead + ?Sized>(
        &self,
        kv: &S,
        range: impl RangeBounds<K::Enc<'a>>,
    ) -> Result<()> {
        with_bounds::<K, _>(&range, |lo, hi| kv.prefetch_range(self.id, lo, hi))
    }

    /// Visits the entries in `range` in `dir` order, typed keys and value bytes, until `f`
    /// breaks. Zero-copy on redb: nothing is collected.
    pub fn scan<'a, S: KvRead + ?Sized>(
        &self,
        kv: &S,
        range: impl RangeBounds<K::Enc<'a>>,
        dir: Dir,
        mut f: impl FnMut(K::Dec<'_>, &[u8]) -> Result<ControlFlow<()>>,
    ) -> Result<()> {
        let id = self.id;
        with_bounds::<K, _>(&range, |lo, hi| {
            kv.scan(id, Span::new(lo, hi, dir), &mut |k, v| {
                f(decode::<K>(id, k)?, v)
            })
        })
    }

    /// [`Table::scan`] over every entry of `range`, forward, never breaking.
    pub fn each<'a, S: KvRead + ?Sized>(
        &self,
        kv: &S,
        range: impl RangeBounds<K::Enc<'a>>,
        mut f: impl FnMut(K::Dec<'_>, &[u8]) -> Result<()>,
    ) -> Result<()> {
        self.scan(kv, range, Dir::Forward, |k, v| {
            f(k, v)?;
            Ok(ControlFlow::Continue(()))
        })
    }

    /// The first (`Dir::Forward`) or last (`Dir::Reverse`) entry of `range`, mapped by `f`.
    pub fn edge<'a, S: KvRead + ?Sized, R>(
        &self,
        kv: &S,
        range: impl RangeBounds<K::Enc<'a>>,
        dir: Dir,
        mut f: impl FnMut(K::Dec<'_>, &[u8]) -> Result<R>,
    ) -> Result<Option<R>> {
        let id = self.id;
        let row = with_bounds::<K, _>(&range, |lo, hi| kv.edge(id, Span::new(lo, hi, dir)))?;
        row.map(|(k, v)| f(decode::<K>(id, &k)?, &v)).transpose()
    }
}
