//! Splitting a MessagePack array into its elements and joining elements back into an array,
//! without decoding them: the checkpointer serializes a list channel with one call of
//! LangGraph's serializer, and somna stores the list element by element (so that a list that
//! only grew stores only its new elements). Only the lengths in the headers are read; element
//! bytes are copied as they are.

/// The element byte ranges of the MessagePack array `b`, or `None` when `b` is not exactly one
/// well-formed array.
pub(crate) fn split_array(b: &[u8]) -> Option<Vec<&[u8]>> {
    let (n, mut at) = parse_header(b)?;
    let mut out = Vec::with_capacity(n.min(1 << 16));
    for _ in 0..n {
        let end = skip(b, at)?;
        out.push(b.get(at..end)?);
        at = end;
    }
    (at == b.len()).then_some(out)
}

/// The array header for `n` elements, as a MessagePack packer writes it (the shortest form).
pub(crate) fn array_header(n: usize) -> Vec<u8> {
    if n < 16 {
        vec![0x90 | n as u8]
    } else if let Ok(n16) = u16::try_from(n) {
        let mut v = vec![0xdc];
        v.extend_from_slice(&n16.to_be_bytes());
        v
    } else {
        let mut v = vec![0xdd];
        v.extend_from_slice(&(n as u32).to_be_bytes());
        v
    }
}

fn be(b: &[u8], at: usize, width: usize) -> Option<usize> {
    let bytes = b.get(at..at.checked_add(width)?)?;
    Some(
        bytes
            .iter()
            .fold(0usize, |acc, &x| (acc << 8) | usize::from(x)),
    )
}

/// `(element count, offset of the first element)` of an array header at the start of `b`.
fn parse_header(b: &[u8]) -> Option<(usize, usize)> {
    match *b.first()? {
        x @ 0x90..=0x9f => Some((usize::from(x & 0x0f), 1)),
        0xdc => Some((be(b, 1, 2)?, 3)),
        0xdd => Some((be(b, 1, 4)?, 5)),
        _ => None,
    }
}

/// The end of the object that starts at `at` (iteratively: nested containers add to the number
/// of objects still to skip).
fn skip(b: &[u8], mut at: usize) -> Option<usize> {
    let mut pending: usize = 1;
    while pending > 0 {
        pending -= 1;
        let (len, children) = head(b, at)?;
        at = at.checked_add(len)?;
        pending = pending.checked_add(children)?;
        if at > b.len() {
            return None;
        }
    }
    Some(at)
}

/// `(bytes of the header and any payload, number of child objects)` of the object at `at`.
fn head(b: &[u8], at: usize) -> Option<(usize, usize)> {
    let t = *b.get(at)?;
    let sized = |w: usize, extra: usize| -> Option<(usize, usize)> {
        Some((1 + w + extra + be(b, at + 1, w)?, 0))
    };
    Some(match t {
        0x00..=0x7f | 0xc0 | 0xc2 | 0xc3 | 0xe0..=0xff => (1, 0),
        0x80..=0x8f => (1, 2 * usize::from(t & 0x0f)),
        0x90..=0x9f => (1, usize::from(t & 0x0f)),
        0xa0..=0xbf => (1 + usize::from(t & 0x1f), 0),
        0xc4 | 0xd9 => sized(1, 0)?,
        0xc5 | 0xda => sized(2, 0)?,
        0xc6 | 0xdb => sized(4, 0)?,
        0xc7 => sized(1, 1)?,
        0xc8 => sized(2, 1)?,
        0xc9 => sized(4, 1)?,
        0xca => (5, 0),
        0xcb => (9, 0),
        0xcc | 0xd0 => (2, 0),
        0xcd | 0xd1 => (3, 0),
        0xce | 0xd2 => (5, 0),
        0xcf | 0xd3 => (9, 0),
        0xd4 => (3, 0),
        0xd5 => (4, 0),
        0xd6 => (6, 0),
        0xd7 => (10, 0),
        0xd8 => (18, 0),
        0xdc => (3, be(b, at + 1, 2)?),
        0xdd => (5, be(b, at + 1, 4)?),
        0xde => (3, 2 * be(b, at + 1, 2)?),
        0xdf => (5, 2 * be(b, at + 1, 4)?),
        0xc1 => return None,
    })
}
