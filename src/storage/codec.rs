//! The value codec: every value somna stores is
//!
//! ```text
//! +---------+---------------------------+----------------------+
//! | version | postcard payload (n bytes)| CRC32 of payload (LE)|
//! | 1 byte  |                           | 4 bytes              |
//! +---------+---------------------------+----------------------+
//! ```
//!
//! Decoding never panics: a short value, an unknown version, a checksum mismatch or bytes that
//! postcard cannot decode are all [`Error::Corrupt`] naming the table and key.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{Error, Result};

/// The only value format version this build writes and reads.
pub const VALUE_VERSION: u8 = 1;

/// The CRC32 of `bytes`, as `crc32fast::hash` computes it, from a hasher made once per process:
/// `crc32fast::Hasher::new` asks the CPU for its features at every call (about 37 instructions,
/// a fifth of the checksum of a 100-byte record, which recall pays once per record), a clone
/// copies the answer.
pub(crate) fn crc(bytes: &[u8]) -> u32 {
    static HASHER: std::sync::OnceLock<crc32fast::Hasher> = std::sync::OnceLock::new();
    let mut h = HASHER.get_or_init(crc32fast::Hasher::new).clone();
    h.update(bytes);
    h.finalize()
}

/// Encodes `value` as version byte + postcard + CRC32.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    let payload = postcard::to_allocvec(value)
        .map_err(|e| Error::Storage(format!("could not encode a value: {e}")))?;
    let mut out = Vec::with_capacity(payload.len() + 5);
    out.push(VALUE_VERSION);
    out.extend_from_slice(&payload);
    out.extend_from_slice(&crc(&payload).to_le_bytes());
    Ok(out)
}

/// Checks the envelope of `bytes` and returns the postcard payload.
pub fn payload<'a>(
    table: &'static str,
    key: &dyn std::fmt::Display,
    bytes: &'a [u8],
) -> Result<&'a [u8]> {
    let Some((&version, rest)) = bytes.split_first() else {
        return Err(Error::corrupt(table, key, "empty value"));
    };
    if version != VALUE_VERSION {
        return Err(Error::corrupt(
            table,
            key,
            format!("unknown value version {version} (this build reads {VALUE_VERSION})"),
        ));
    }
    if rest.len() < 4 {
        return Err(Error::corrupt(
            table,
            key,
            "value shorter than its checksum",
        ));
    }
    let (body, tail) = rest.split_at(rest.len() - 4);
    let mut crc_bytes = [0u8; 4];
    crc_bytes.copy_from_slice(tail);
    let stored = u32::from_le_bytes(crc_bytes);
    let actual = crc(body);
    if stored != actual {
        return Err(Error::corrupt(
            table,
            key,
            format!("checksum mismatch (stored {stored:08x}, computed {actual:08x})"),
        ));
    }
    Ok(body)
}

/// Decodes a value written by [`encode`].
pub fn decode<T: DeserializeOwned>(
    table: &'static str,
    key: &dyn std::fmt::Display,
    bytes: &[u8],
) -> Result<T> {
    let body = payload(table, key, bytes)?;
    let (value, rest) = postcard::take_from_bytes::<T>(body)
        .map_err(|e| Error::corrupt(table, key, format!("undecodable value: {e}")))?;
    if !rest.is_empty() {
        return Err(Error::corrupt(
            table,
            key,
            format!("{} trailing bytes after the value", rest.len()),
        ));
    }
    Ok(value)
}

/// A reader of postcard's wire format over a payload, for the decoders on hot paths (a session
/// message, a session record) that skip serde's machinery. It accepts exactly what postcard
/// accepts for the same types: LEB128 varints of at most 10 bytes whose tenth byte is 0 or 1,
/// zigzag for signed integers, strings as a varint length and UTF-8 bytes.
pub(crate) struct Wire<'a> {
    b: &'a [u8],
}

impl<'a> Wire<'a> {
    /// A reader of `payload` (the bytes [`payload`] returns).
    pub(crate) fn new(payload: &'a [u8]) -> Self {
        Wire { b: payload }
    }

    /// A `u64` (or `usize`) varint.
    pub(crate) fn u64(&mut self) -> Option<u64> {
        self.varint(10, 1)
    }

    /// A `u32` varint (also an enum's variant index).
    pub(crate) fn u32(&mut self) -> Option<u32> {
        self.varint(5, 0x0F).and_then(|v| u32::try_from(v).ok())
    }

    /// A varint of at most `max` bytes whose last byte is at most `last` (postcard's rule).
    /// One byte is the common case (counters, lengths) and is read here; longer ones in
    /// [`Wire::varint_long`].
    #[inline]
    fn varint(&mut self, max: usize, last: u8) -> Option<u64> {
        if let Some((&first, rest)) = self.b.split_first() {
            if first & 0x80 == 0 {
                self.b = rest;
                return Some(u64::from(first));
            }
        }
        self.varint_long(max, last)
    }

    /// A varint of two bytes or more. One that ends within the next eight bytes (a timestamp or
    /// a revision takes eight) is read as one little-endian word, its 7-bit groups put together
    /// by three shift-and-mask steps; the rest (nine or ten bytes, or the end of the payload
    /// near) takes the byte loop, [`Wire::varint_bytes`].
    fn varint_long(&mut self, max: usize, last: u8) -> Option<u64> {
        let Some(word) = self.b.first_chunk::<8>() else {
            return self.varint_bytes(max, last);
        };
        let w = u64::from_le_bytes(*word);
        let ends = !w & 0x8080_8080_8080_8080;
        if ends == 0 {
            return self.varint_bytes(max, last);
        }
        // Bytes used, 1 to 8: the first byte whose high bit is clear ends the varint.
        let n = (ends.trailing_zeros() / 8 + 1) as usize;
        let end = (w >> (8 * (n - 1))) & 0xFF;
        if n > max || (n == max && end > u64::from(last)) {
            return None;
        }
        let used = if n == 8 {
            w
        } else {
            w & ((1u64 << (8 * n)) - 1)
        };
        // Eight 7-bit groups, one per byte, packed into 56 bits: pairs, then quads, then all.
        let x = used & 0x7F7F_7F7F_7F7F_7F7F;
        let x = ((x & 0x7F00_7F00_7F00_7F00) >> 1) | (x & 0x007F_007F_007F_007F);
        let x = ((x & 0x3FFF_0000_3FFF_0000) >> 2) | (x & 0x0000_3FFF_0000_3FFF);
        let x = ((x & 0x0FFF_FFFF_0000_0000) >> 4) | (x & 0x0000_0000_0FFF_FFFF);
        self.b = self.b.get(n..)?;
        Some(x)
    }

    /// [`Wire::varint`] byte by byte.
    fn varint_bytes(&mut self, max: usize, last: u8) -> Option<u64> {
        let mut out = 0u64;
        for (i, &byte) in self.b.iter().take(max).enumerate() {
            out |= u64::from(byte & 0x7F) << (7 * i);
            if byte & 0x80 == 0 {
                if i + 1 == max && byte > last {
                    return None;
                }
                self.b = self.b.get(i + 1..)?;
                return Some(out);
            }
        }
        None
    }

    /// An `i64` varint (zigzag).
    pub(crate) fn i64(&mut self) -> Option<i64> {
        let n = self.u64()?;
        Some(((n >> 1) as i64) ^ -((n & 1) as i64))
    }

    /// The next `n` bytes as they are (a fixed-size array's bytes, say).
    pub(crate) fn bytes(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = self.b.split_at_checked(n)?;
        self.b = rest;
        Some(head)
    }

    /// A string: its length, then its UTF-8 bytes.
    pub(crate) fn str(&mut self) -> Option<&'a str> {
        let n = usize::try_from(self.u64()?).ok()?;
        let (head, rest) = self.b.split_at_checked(n)?;
        self.b = rest;
        simdutf8::basic::from_utf8(head).ok()
    }

    /// A sequence of `f32`s (a `Vec<f32>`): its length, then 4 little-endian bytes each,
    /// borrowed as those bytes (`chunks_exact(4)` reads them without a copy).
    pub(crate) fn f32s(&mut self) -> Option<&'a [u8]> {
        let n = usize::try_from(self.u64()?).ok()?;
        let (head, rest) = self.b.split_at_checked(n.checked_mul(4)?)?;
        self.b = rest;
        Some(head)
    }

    /// How many bytes are left.
    pub(crate) fn left(&self) -> usize {
        self.b.len()
    }
}

/// The writer that mirrors [`Wire`]: a value built by hand in postcard's wire format, for the
/// encoders on hot paths, then sealed into [`encode`]'s envelope. What it writes is what
/// [`encode`] writes for the same types (each hand encoder's test compares the bytes). Its
/// `Default` is an empty [`WireOut::bare`] writer.
#[derive(Debug, Default)]
pub(crate) struct WireOut {
    out: Vec<u8>,
}

impl WireOut {
    /// A writer with room for a payload of about `capacity` bytes.
    pub(crate) fn with_capacity(capacity: usize) -> Self {
        let mut out = Vec::with_capacity(capacity.saturating_add(5));
        out.push(VALUE_VERSION);
        WireOut { out }
    }

    /// A writer of bare bytes, without [`WireOut::seal`]'s envelope (the journal's changes,
    /// which its record's own CRC covers); read back with [`Wire`], taken with
    /// [`WireOut::into_bytes`].
    pub(crate) fn bare(capacity: usize) -> Self {
        WireOut {
            out: Vec::with_capacity(capacity),
        }
    }

    /// One byte as it is.
    pub(crate) fn byte(&mut self, b: u8) {
        self.out.push(b);
    }

    /// Bytes as they are, with no length (the caller's format knows where they end).
    pub(crate) fn raw(&mut self, b: &[u8]) {
        self.out.extend_from_slice(b);
    }

    /// Bytes as postcard writes a `&[u8]`: the length, then the bytes.
    pub(crate) fn bytes(&mut self, b: &[u8]) {
        self.u64(b.len() as u64);
        self.out.extend_from_slice(b);
    }

    /// How many bytes are written so far.
    pub(crate) fn len(&self) -> usize {
        self.out.len()
    }

    /// The bytes written so far.
    pub(crate) fn as_slice(&self) -> &[u8] {
        &self.out
    }

    /// The bytes written, of a [`WireOut::bare`] writer.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.out
    }

    /// A `u64` (or `usize`, `u32`) as postcard's LEB128 varint.
    pub(crate) fn u64(&mut self, mut n: u64) {
        while n >= 0x80 {
            self.out.push((n as u8) | 0x80);
            n >>= 7;
        }
        self.out.push(n as u8);
    }

    /// A string: its length, then its UTF-8 bytes.
    pub(crate) fn str(&mut self, s: &str) {
        self.u64(s.len() as u64);
        self.out.extend_from_slice(s.as_bytes());
    }

    /// The value in its envelope: the version byte, the payload, its CRC32.
    pub(crate) fn seal(mut self) -> Vec<u8> {
        let sum = crc(self.out.get(1..).unwrap_or_default());
        self.out.extend_from_slice(&sum.to_le_bytes());
        self.out
    }
}

/// The error for a payload a [`Wire`] decoder could not read, worded as [`decode`]'s.
pub(crate) fn wire_error(
    table: &'static str,
    key: &dyn std::fmt::Display,
    w: Option<&Wire<'_>>,
) -> Error {
    match w {
        Some(w) => Error::corrupt(
            table,
            key,
            format!("{} trailing bytes after the value", w.left()),
        ),
        None => Error::corrupt(table, key, "undecodable value: not a valid encoding"),
    }
}

/// [`decode`] of a value that is one string, borrowed from `bytes` (no allocation, no serde).
pub fn decode_str<'a>(
    table: &'static str,
    key: &dyn std::fmt::Display,
    bytes: &'a [u8],
) -> Result<&'a str> {
    let mut w = Wire::new(payload(table, key, bytes)?);
    let s = w.str().ok_or_else(|| wire_error(table, key, None))?;
    if w.left() != 0 {
        return Err(wire_error(table, key, Some(&w)));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shared hasher's checksum is `crc32fast::hash`'s, at every length the SIMD and the
    /// table paths split on, and again after the first use (the clone, not a fresh hasher).
    #[test]
    fn the_shared_hasher_sums_as_crc32fast_hash() {
        let bytes: Vec<u8> = (0..700u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        for _ in 0..2 {
            for n in 0..bytes.len() {
                assert_eq!(crc(&bytes[..n]), crc32fast::hash(&bytes[..n]), "{n} bytes");
            }
        }
        assert_eq!(crc(b"123456789"), 0xCBF4_3926); // the CRC-32 check value
    }

    /// Every varint length (1 to 10 bytes, and 11, which postcard refuses), at the end of the
    /// payload and with bytes after it (the word path and the byte loop), for `u64` and `u32`,
    /// against postcard.
    #[test]
    fn wire_varints_of_every_length_read_as_postcard_reads_them() {
        let mut cases: Vec<Vec<u8>> = Vec::new();
        for len in 1..=11usize {
            for top in [0x00u8, 0x01, 0x02, 0x0F, 0x10, 0x7F] {
                let mut v = vec![0xFFu8; len - 1];
                v.push(top);
                cases.push(v);
            }
        }
        // Varied bit patterns of every width, encoded by postcard.
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..64 {
            x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
            for shift in 0..64 {
                let bytes = postcard::to_allocvec(&(x >> shift)).unwrap();
                assert_eq!(Wire::new(&bytes).u64(), Some(x >> shift));
            }
        }
        for bytes in cases {
            for tail in [&[][..], &[0x05, 0x80, 0x01, 0, 0, 0, 0, 0, 0, 0, 0][..]] {
                let mut b = bytes.clone();
                b.extend_from_slice(tail);
                let want = postcard::take_from_bytes::<u64>(&b).ok();
                let mut w = Wire::new(&b);
                assert_eq!(w.u64(), want.map(|x| x.0), "u64 {b:02x?}");
                if let Some((_, rest)) = want {
                    assert_eq!(w.left(), rest.len());
                }
                let want = postcard::take_from_bytes::<u32>(&b).ok();
                let mut w = Wire::new(&b);
                assert_eq!(w.u32(), want.map(|x| x.0), "u32 {b:02x?}");
                if let Some((_, rest)) = want {
                    assert_eq!(w.left(), rest.len());
                }
            }
        }
    }

    #[test]
    fn wire_reads_what_postcard_reads() {
        let ints = [0u64, 1, 127, 128, 300, 1 << 32, u64::MAX - 1, u64::MAX];
        for &a in &ints {
            let b = a as i64;
            let bytes = postcard::to_allocvec(&(b, a, "x\u{e9}")).unwrap();
            let mut w = Wire::new(&bytes);
            assert_eq!(
                (w.i64(), w.u64(), w.str()),
                (Some(b), Some(a), Some("x\u{e9}"))
            );
            assert_eq!(w.left(), 0);
        }
        let v = [1.5f32, -0.0, f32::MAX, 3.25e-7];
        let bytes = postcard::to_allocvec(&v.to_vec()).unwrap();
        let mut w = Wire::new(&bytes);
        let raw = w.f32s().unwrap();
        let read: Vec<f32> = raw
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        assert_eq!(read, v);
        assert_eq!(w.left(), 0);
        assert_eq!(Wire::new(&[3, 0, 0, 0, 0]).f32s(), None);
        // Overlong and overflowing varints, a string past the end, bad UTF-8: refused by both.
        let bad: [&[u8]; 5] = [
            &[0x80; 11],
            &[0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x02],
            &[0x80],
            &[0x05, b'a'],
            &[0x01, 0xFF],
        ];
        for b in bad {
            assert!(postcard::from_bytes::<String>(b).is_err());
            assert_eq!(Wire::new(b).str(), None, "{b:?}");
        }
        // decode_str is decode::<String>, errors included.
        let v = encode(&"hello".to_string()).unwrap();
        assert_eq!(decode_str("t", &"k", &v).unwrap(), "hello");
        let longer = encode(&("hello", 7u8)).unwrap();
        let e = decode_str("t", &"k", &longer).unwrap_err();
        assert!(e.to_string().contains("1 trailing bytes"), "{e}");
        let mut flipped = v.clone();
        flipped[3] ^= 1;
        assert!(matches!(
            decode_str("t", &"k", &flipped),
            Err(Error::Corrupt { .. })
        ));
    }

    #[test]
    fn round_trip_and_every_single_byte_flip_is_detected() {
        let v: (u64, String, Vec<u64>) = (7, "hello".into(), vec![1, 2, 3]);
        let bytes = encode(&v).unwrap();
        let back: (u64, String, Vec<u64>) = decode("t", &"k", &bytes).unwrap();
        assert_eq!(back, v);
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                let r: Result<(u64, String, Vec<u64>)> = decode("t", &"k", &b);
                assert!(
                    matches!(r, Err(Error::Corrupt { .. })),
                    "flip {i}/{bit} undetected"
                );
            }
        }
        for n in 0..bytes.len() {
            let r: Result<(u64, String, Vec<u64>)> = decode("t", &"k", &bytes[..n]);
            assert!(r.is_err());
        }
    }

    /// `Wire::str` accepts exactly what std's `from_utf8` accepts (it uses simdutf8's check):
    /// ASCII and multi-byte text at lengths on both sides of the SIMD block size, and every
    /// kind of bad sequence (a lone continuation byte, a truncated sequence, an overlong form, a
    /// surrogate, a code point past U+10FFFF), each at the start, middle and end of the text.
    #[test]
    fn wire_str_refuses_what_is_not_utf8_as_std_does() {
        let good = ["", "a", "héllo wörld", "日本語のテキスト", "🦀 crab"];
        let bad: [&[u8]; 6] = [
            b"\x80",
            b"\xC3",
            b"\xC0\xAF",
            b"\xED\xA0\x80",
            b"\xF4\x90\x80\x80",
            b"\xE2\x82",
        ];
        let mut texts: Vec<Vec<u8>> = Vec::new();
        for pad in [0usize, 1, 31, 63, 64, 65, 200] {
            let filler = "x".repeat(pad);
            for g in good {
                texts.push(format!("{filler}{g}{filler}").into_bytes());
            }
            for b in bad {
                for (pre, post) in [(0, pad), (pad, pad), (pad, 0)] {
                    let mut t = "y".repeat(pre).into_bytes();
                    t.extend_from_slice(b);
                    t.extend(std::iter::repeat_n(b'z', post));
                    texts.push(t);
                }
            }
        }
        for t in &texts {
            let mut framed = postcard::to_allocvec(&(t.len() as u64)).expect("len");
            framed.extend_from_slice(t);
            let got = Wire::new(&framed).str();
            assert_eq!(got, std::str::from_utf8(t).ok(), "{t:?}");
        }
    }
}
