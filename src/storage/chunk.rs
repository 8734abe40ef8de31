//! Session chunks, the session layout of store format 3 (docs/design.md, section 13): a run of
//! consecutive live messages of one session, each with its XXH3-128 hash, stored as one value of
//! [`SESSION_CHUNKS`] keyed by (session id, sequence number of the run's first message), with
//! the session's hash chain after the run's last message. Here: the value ([`Chunk`]), the chain,
//! the packing rule ([`Packer`]), and the migration of a format-2 store's one-row-per-message
//! tables ([`migrate_sessions`]). The session layer ([`crate::session`]) uses them for every path.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::storage::codec::{decode_str, encode, payload, wire_error, Wire};
use crate::storage::kv::KvWrite;
use crate::storage::tables::{SESSIONS, SESSION_CHUNKS, SESSION_HASHES, SESSION_MESSAGES};

/// A chunk holds at most this many messages.
pub const CHUNK_MAX_ENTRIES: usize = 64;
/// A chunk is closed when its payload would pass this many bytes (a larger message has a chunk
/// of its own). With the value's envelope (5 bytes) and a key of the longest session id
/// (256 bytes, a length and the sequence number: at most 269), one chunk fills at most one 4 KiB
/// redb leaf (12 bytes of leaf header and offsets), so that a load reads as few leaves as the
/// messages need. Stores written with the earlier bound (3,072) read the same; their chunks
/// simply hold less.
pub const CHUNK_MAX_BYTES: usize = 3800;
/// A chunk's payload before its entries: the chain and the entry count (one byte up to 127).
const CHUNK_BASE_BYTES: usize = 17;
/// The chain before a session's first message.
pub const CHAIN_START: [u8; 16] = [0; 16];

/// One live message in a chunk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Its sequence number minus the previous entry's plus one (0 when consecutive; the first
    /// entry's is 0: its number is the chunk's key).
    pub gap: u64,
    /// XXH3-128 of the text, `u128` little-endian.
    pub hash: [u8; 16],
    /// The message's compact JSON text.
    pub text: String,
}

/// A run of consecutive live messages of one session (the value of [`SESSION_CHUNKS`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Chunk {
    /// The session's hash chain after this chunk's last message.
    pub chain: [u8; 16],
    /// The messages, oldest first (1 to [`CHUNK_MAX_ENTRIES`]).
    pub entries: Vec<Entry>,
}

/// A live message with its sequence number, as the session paths handle it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Live {
    /// Its sequence number.
    pub seq: u64,
    /// XXH3-128 of the text.
    pub hash: [u8; 16],
    /// The compact JSON text.
    pub text: String,
}

/// A session row's key as messages name it: `("id", seq)`.
pub struct SKey<'a>(pub &'a str, pub u64);
impl fmt::Display for SKey<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({:?}, {})", self.0, self.1)
    }
}

/// XXH3-128 of a message's text, `u128` little-endian. Computed by the vendored redb's XXH3
/// ([`redb::xxh3_128`]), which picks its SIMD path at run time (a whole-list save hashes every
/// message: xxhash-rust's compile-time choice is SSE2 on a baseline x86-64 build, about three
/// times the instructions); the same value as the reference's (a test compares them).
pub fn msg_hash(text: &str) -> [u8; 16] {
    redb::xxh3_128(text.as_bytes()).to_le_bytes()
}

/// The chain after a message of hash `h`, from the chain `c` before it.
pub fn chain_next(c: &[u8; 16], h: &[u8; 16]) -> [u8; 16] {
    let mut buf = [0u8; 32];
    let (a, b) = buf.split_at_mut(16);
    a.copy_from_slice(c);
    b.copy_from_slice(h);
    xxhash_rust::xxh3::xxh3_128(&buf).to_le_bytes()
}

/// Decodes the chunk stored at `(id, key)`.
///
/// Read by hand with [`Wire`] (what postcard accepts for [`Chunk`], the same errors as
/// [`crate::storage::codec::decode`]'s): serde reads the two 16-byte arrays of each entry one
/// byte at a time, the larger part of a session load's decoding.
pub fn decode_chunk(id: &str, key: u64, bytes: &[u8]) -> Result<Chunk> {
    let k = SKey(id, key);
    let body = payload("session_chunks", &k, bytes)?;
    let mut w = Wire::new(body);
    match read_chunk(&mut w) {
        Some(c) if w.left() == 0 => Ok(c),
        Some(_) => Err(wire_error("session_chunks", &k, Some(&w))),
        None => Err(wire_error("session_chunks", &k, None)),
    }
}

/// A [`Chunk`] in postcard's wire format: the chain (16 bytes), the entry count, then per entry
/// the gap, the hash (16 bytes) and the text.
fn read_chunk(w: &mut Wire<'_>) -> Option<Chunk> {
    let chain: [u8; 16] = w.bytes(16)?.try_into().ok()?;
    let n = usize::try_from(w.u64()?).ok()?;
    // An entry is at least 18 bytes: never reserve more than the payload could hold.
    let mut entries = Vec::with_capacity(n.min(w.left() / 18));
    for _ in 0..n {
        let gap = w.u64()?;
        let hash: [u8; 16] = w.bytes(16)?.try_into().ok()?;
        let text = w.str()?.to_owned();
        entries.push(Entry { gap, hash, text });
    }
    Some(Chunk { chain, entries })
}

impl Chunk {
    /// The entries with their sequence numbers, the first being `key`.
    pub fn into_live(self, key: u64) -> impl Iterator<Item = Live> {
        let mut next = key;
        self.entries.into_iter().map(move |e| {
            let seq = next.saturating_add(e.gap);
            next = seq.saturating_add(1);
            Live {
                seq,
                hash: e.hash,
                text: e.text,
            }
        })
    }
}

/// Bytes an entry adds to a chunk's payload.
fn entry_bytes(gap: u64, text: &str) -> usize {
    varint_len(gap) + 16 + varint_len(text.len() as u64) + text.len()
}

fn varint_len(mut n: u64) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

/// The chunk being filled: its key, its last sequence number, its payload size.
struct Open {
    key: u64,
    last: u64,
    size: usize,
    chunk: Chunk,
}

/// Packs messages into chunks by the bounds ([`CHUNK_MAX_ENTRIES`], [`CHUNK_MAX_BYTES`]),
/// keeping the chain.
pub struct Packer {
    chain: [u8; 16],
    open: Option<Open>,
    out: Vec<(u64, Chunk)>,
}

impl Packer {
    /// Packs after a chain (`CHAIN_START` for a session's first message), starting a new chunk.
    pub fn after(chain: [u8; 16]) -> Packer {
        Packer {
            chain,
            open: None,
            out: Vec::new(),
        }
    }

    /// Packs after the stored chunk at `key`, filling it first while messages fit.
    pub fn resume(key: u64, chunk: Chunk) -> Packer {
        let mut last = key;
        let mut size = CHUNK_BASE_BYTES;
        for (i, e) in chunk.entries.iter().enumerate() {
            if i > 0 {
                last = last.saturating_add(1).saturating_add(e.gap);
            }
            size += entry_bytes(e.gap, &e.text);
        }
        Packer {
            chain: chunk.chain,
            open: Some(Open {
                key,
                last,
                size,
                chunk,
            }),
            out: Vec::new(),
        }
    }

    /// Adds the next message (its `seq` above every one added before).
    pub fn push(&mut self, seq: u64, hash: [u8; 16], text: String) {
        self.chain = chain_next(&self.chain, &hash);
        if let Some(o) = &mut self.open {
            let gap = seq.saturating_sub(o.last.saturating_add(1));
            let add = entry_bytes(gap, &text);
            if o.chunk.entries.len() < CHUNK_MAX_ENTRIES && o.size + add <= CHUNK_MAX_BYTES {
                o.chunk.entries.push(Entry { gap, hash, text });
                o.chunk.chain = self.chain;
                o.last = seq;
                o.size += add;
                return;
            }
        }
        self.close();
        let size = CHUNK_BASE_BYTES + entry_bytes(0, &text);
        self.open = Some(Open {
            key: seq,
            last: seq,
            size,
            chunk: Chunk {
                chain: self.chain,
                entries: vec![Entry { gap: 0, hash, text }],
            },
        });
    }

    fn close(&mut self) {
        if let Some(o) = self.open.take() {
            self.out.push((o.key, o.chunk));
        }
    }

    /// The chunks, oldest first, each with its key.
    pub fn finish(mut self) -> Vec<(u64, Chunk)> {
        self.close();
        self.out
    }
}

/// What a lossy read makes of a chunk that fails to decode (its checksum, say): its entries read
/// by their layout, each returned when its text still has its stored hash (a 128-bit check of
/// that message alone) and named by its sequence number otherwise. Reading stops at the first
/// entry whose layout does not hold; a chunk whose start does not hold is named by its key.
pub fn salvage(key: u64, bytes: &[u8]) -> Vec<std::result::Result<String, u64>> {
    let mut out = Vec::new();
    // The payload between the version byte and the CRC, unchecked: the check already failed.
    let mut w = Wire::new(
        bytes
            .get(1..bytes.len().saturating_sub(4))
            .unwrap_or_default(),
    );
    let count = w.bytes(16).and_then(|_| w.u64());
    let mut next = key;
    for i in 0..count.unwrap_or(0).min(CHUNK_MAX_ENTRIES as u64) {
        let Some(gap) = w.u64() else { break };
        let seq = if i == 0 {
            key
        } else {
            next.saturating_add(gap)
        };
        next = seq.saturating_add(1);
        let entry = (|| {
            let hash = w.bytes(16)?;
            let len = usize::try_from(w.u64()?).ok()?;
            Some((hash, w.bytes(len)?))
        })();
        let Some((hash, text)) = entry else {
            out.push(Err(seq));
            break;
        };
        match std::str::from_utf8(text) {
            Ok(t) if msg_hash(t)[..] == *hash => out.push(Ok(t.to_string())),
            _ => out.push(Err(seq)),
        }
    }
    if out.is_empty() {
        out.push(Err(key));
    }
    out
}

/// Writes `chunks` of session `id`.
pub fn put_chunks<S: KvWrite + ?Sized>(
    kv: &mut S,
    id: &str,
    chunks: &[(u64, Chunk)],
) -> Result<()> {
    for (key, chunk) in chunks {
        SESSION_CHUNKS.put(kv, (id, *key), &encode(chunk)?)?;
    }
    Ok(())
}

/// Decodes a format-2 `session_hashes` value.
pub fn decode_hash(id: &str, seq: u64, bytes: &[u8]) -> Result<[u8; 16]> {
    let key = SKey(id, seq);
    let body = payload("session_hashes", &key, bytes)?;
    body.try_into().map_err(|_| {
        if body.len() > 16 {
            Error::corrupt(
                "session_hashes",
                key,
                format!("{} trailing bytes after the value", body.len() - 16),
            )
        } else {
            wire_error("session_hashes", &key, None)
        }
    })
}

/// The upgrade from store format 2: every session's `session_messages` and `session_hashes`
/// rows become chunks (each hash checked against its text: a damaged or mismatched row is
/// [`Error::Corrupt`] naming it, and the caller's transaction, aborted, leaves the store as it
/// was), then the two old tables are emptied. Returns how many messages moved.
pub fn migrate_sessions<S: KvWrite + ?Sized>(kv: &mut S) -> Result<u64> {
    let mut ids = Vec::new();
    SESSIONS.each(kv, .., |id, _| {
        ids.push(id.to_string());
        Ok(())
    })?;
    let mut moved = 0u64;
    for id in &ids {
        let mut rows = Vec::new();
        SESSION_MESSAGES.each(
            kv,
            (id.as_str(), 0)..=(id.as_str(), u64::MAX),
            |(_, seq), v| {
                rows.push((
                    seq,
                    decode_str("session_messages", &SKey(id, seq), v)?.to_owned(),
                ));
                Ok(())
            },
        )?;
        // The hashes by one range read too (on a server one statement, not one per message).
        let mut hashes = std::collections::HashMap::new();
        SESSION_HASHES.each(
            kv,
            (id.as_str(), 0)..=(id.as_str(), u64::MAX),
            |(_, seq), v| {
                hashes.insert(seq, decode_hash(id, seq, v)?);
                Ok(())
            },
        )?;
        let mut packer = Packer::after(CHAIN_START);
        for (seq, text) in rows {
            let Some(stored) = hashes.remove(&seq) else {
                return Err(Error::corrupt(
                    "session_hashes",
                    SKey(id, seq),
                    "a stored message has no hash",
                ));
            };
            if stored != msg_hash(&text) {
                return Err(Error::corrupt(
                    "session_messages",
                    SKey(id, seq),
                    "the message does not match its stored hash",
                ));
            }
            packer.push(seq, stored, text);
            moved += 1;
        }
        put_chunks(kv, id, &packer.finish())?;
    }
    SESSION_MESSAGES.delete_range(kv, ..)?;
    SESSION_HASHES.delete_range(kv, ..)?;
    Ok(moved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::codec::decode;

    fn text(n: usize) -> String {
        format!("{{\"n\":\"{}\"}}", "x".repeat(n))
    }

    #[test]
    fn the_hand_decoder_reads_what_serde_reads_and_refuses_what_it_refuses() {
        let mut p = Packer::after(CHAIN_START);
        for i in 0..70u64 {
            let t = format!("{{\"n\":\"{}é\"}}", "x".repeat(i as usize * 7));
            p.push(i * 300, msg_hash(&t), t);
        }
        for (key, c) in p.finish() {
            let bytes = encode(&c).unwrap();
            assert_eq!(decode_chunk("s", key, &bytes).unwrap(), c);
            let body = payload("session_chunks", &SKey("s", key), &bytes).unwrap();
            // Every cut of the payload and one byte more, each resealed with a good checksum:
            // both decoders refuse the same ones.
            let mut cuts: Vec<Vec<u8>> = (0..body.len()).map(|n| body[..n].to_vec()).collect();
            cuts.push([body, &[0][..]].concat());
            for b in cuts {
                let mut sealed = vec![bytes[0]];
                sealed.extend_from_slice(&b);
                sealed.extend_from_slice(&crc32fast::hash(&b).to_le_bytes());
                let serde = decode::<Chunk>("session_chunks", &SKey("s", key), &sealed);
                let hand = decode_chunk("s", key, &sealed);
                assert_eq!(serde.is_ok(), hand.is_ok(), "{} bytes", b.len());
                if let (Ok(a), Ok(h)) = (serde, hand) {
                    assert_eq!(a, h);
                }
            }
        }
    }

    /// The message hash is XXH3-128 as the reference (and xxhash-rust, which wrote the stored
    /// hashes before) computes it, at every length across the short, medium and long paths and
    /// the SIMD block and stripe boundaries, on varied bytes.
    #[test]
    fn the_message_hash_is_the_reference_xxh3_128() {
        let mut next = crate::domain::test_rng::xorshift(0x9E37_79B9_7F4A_7C15u64);
        let bytes: Vec<u8> = (0..9000).map(|_| (next() >> 24) as u8).collect();
        for len in (0..=2100).chain([4095, 4096, 4097, 8191, 8192, 8193, 9000]) {
            let b = &bytes[..len];
            assert_eq!(
                redb::xxh3_128(b),
                xxhash_rust::xxh3::xxh3_128(b),
                "length {len}"
            );
        }
        assert_eq!(
            msg_hash("{}"),
            xxhash_rust::xxh3::xxh3_128(b"{}").to_le_bytes()
        );
    }

    #[test]
    fn packing_keeps_the_bounds_the_chain_and_the_gaps() {
        let mut p = Packer::after(CHAIN_START);
        let mut chain = CHAIN_START;
        let mut seqs = Vec::new();
        for i in 0..200u64 {
            let seq = i * 2;
            let t = text(if i == 7 { 5000 } else { 10 });
            chain = chain_next(&chain, &msg_hash(&t));
            p.push(seq, msg_hash(&t), t);
            seqs.push(seq);
        }
        let chunks = p.finish();
        let mut got = Vec::new();
        for (key, c) in &chunks {
            assert!(!c.entries.is_empty() && c.entries.len() <= CHUNK_MAX_ENTRIES);
            let bytes = encode(c).unwrap();
            assert!(bytes.len() <= CHUNK_MAX_BYTES + 5 || c.entries.len() == 1);
            got.extend(c.clone().into_live(*key).map(|l| l.seq));
        }
        assert_eq!(got, seqs);
        assert_eq!(chunks.last().unwrap().1.chain, chain);
        // The 5000-byte message has a chunk of its own.
        assert!(chunks.iter().any(|(k, c)| *k == 14 && c.entries.len() == 1));
    }

    #[test]
    fn a_damaged_chunk_gives_back_every_message_that_still_has_its_hash() {
        let msgs: Vec<String> = (0..5).map(|i| text(i * 3)).collect();
        let mut p = Packer::after(CHAIN_START);
        for (i, m) in msgs.iter().enumerate() {
            p.push(10 + 2 * i as u64, msg_hash(m), m.clone());
        }
        let (key, chunk) = p.finish().pop().unwrap();
        let mut bytes = encode(&chunk).unwrap();
        // A bit flipped in the third message's text.
        let at = bytes.len() - 4 - msgs[4].len() - 18 - msgs[3].len() - 18 - 3;
        bytes[at] ^= 0x01;
        assert!(decode_chunk("s", key, &bytes).is_err());
        let got = salvage(key, &bytes);
        let want: Vec<std::result::Result<String, u64>> = vec![
            Ok(msgs[0].clone()),
            Ok(msgs[1].clone()),
            Err(14),
            Ok(msgs[3].clone()),
            Ok(msgs[4].clone()),
        ];
        assert_eq!(got, want);
        // Nothing readable: named by the key.
        assert_eq!(salvage(key, &[1, 2, 3]), vec![Err(key)]);
    }

    #[test]
    fn resuming_fills_the_last_chunk_as_one_packing_would() {
        let msgs: Vec<String> = (0..100).map(|i| text(i % 40)).collect();
        let mut whole = Packer::after(CHAIN_START);
        for (i, m) in msgs.iter().enumerate() {
            whole.push(i as u64, msg_hash(m), m.clone());
        }
        let whole = whole.finish();
        let mut first = Packer::after(CHAIN_START);
        for (i, m) in msgs.iter().enumerate().take(30) {
            first.push(i as u64, msg_hash(m), m.clone());
        }
        let mut chunks = first.finish();
        let (key, last) = chunks.pop().unwrap();
        let mut rest = Packer::resume(key, last);
        for (i, m) in msgs.iter().enumerate().skip(30) {
            rest.push(i as u64, msg_hash(m), m.clone());
        }
        chunks.extend(rest.finish());
        assert_eq!(chunks, whole);
    }
}
