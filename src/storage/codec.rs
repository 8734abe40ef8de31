//! The value codec: every value engram stores is
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

/// Encodes `value` as version byte + postcard + CRC32.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>> {
    let payload = postcard::to_allocvec(value)
        .map_err(|e| Error::Storage(format!("could not encode a value: {e}")))?;
    let mut out = Vec::with_capacity(payload.len() + 5);
    out.push(VALUE_VERSION);
    out.extend_from_slice(&payload);
    out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
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
    let (body, crc) = rest.split_at(rest.len() - 4);
    let mut crc_bytes = [0u8; 4];
    crc_bytes.copy_from_slice(crc);
    let stored = u32::from_le_bytes(crc_bytes);
    let actual = crc32fast::hash(body);
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

#[cfg(test)]
mod tests {
    use super::*;

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
}
