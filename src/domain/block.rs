//! Aligned power-of-two blocks of the log: `[lo, hi)` with `hi - lo` a power of two and
//! `lo % (hi - lo) == 0`. Written inclusive on the command line (`16-31`).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// Why a block was refused: not aligned, not a power of two, or out of range. Converts into
/// [`crate::Error::Invalid`] (`what` = `block`), so `?` works in code that returns `somna::Result`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidBlock(pub String);

impl fmt::Display for InvalidBlock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for InvalidBlock {}

fn invalid(reason: impl Into<String>) -> InvalidBlock {
    InvalidBlock(reason.into())
}

/// An aligned block `[lo, hi)` of memory positions. A block of size 1 is a single memory.
///
/// ```
/// use somna::Block;
/// let b: Block = "16-31".parse().unwrap();
/// assert_eq!((b.lo(), b.hi(), b.size(), b.level()), (16, 32, 16, 4));
/// assert_eq!(b.to_string(), "16-31");
/// assert!("3-4".parse::<Block>().is_err()); // not aligned
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Block {
    lo: u64,
    hi: u64,
}

/// The largest level a block may have (size 2^62).
pub const MAX_LEVEL: u8 = 62;

impl Block {
    /// The block at `level` (size `2^level`) that starts at `lo`. Errors unless `lo` is aligned.
    pub fn new(level: u8, lo: u64) -> Result<Block, InvalidBlock> {
        if level > MAX_LEVEL {
            return Err(invalid(format!("level {level} is above {MAX_LEVEL}")));
        }
        let size = 1u64 << level;
        if !lo.is_multiple_of(size) {
            return Err(invalid(format!(
                "{lo} is not a multiple of the block size {size}"
            )));
        }
        let hi = lo
            .checked_add(size)
            .ok_or_else(|| invalid("block end overflows"))?;
        Ok(Block { lo, hi })
    }

    /// Builds a block without checking; callers guarantee alignment.
    pub(crate) fn raw(level: u8, lo: u64) -> Block {
        Block {
            lo,
            hi: lo.saturating_add(1u64 << level.min(MAX_LEVEL)),
        }
    }

    /// A single memory.
    pub fn single(id: u64) -> Block {
        Block {
            lo: id,
            hi: id.saturating_add(1),
        }
    }

    /// First position in the block.
    pub fn lo(&self) -> u64 {
        self.lo
    }
    /// One past the last position.
    pub fn hi(&self) -> u64 {
        self.hi
    }
    /// Number of positions.
    pub fn size(&self) -> u64 {
        self.hi - self.lo
    }
    /// log2 of the size (0 for a single memory).
    pub fn level(&self) -> u8 {
        self.size().trailing_zeros() as u8
    }
    /// The two halves, or `None` for a single memory.
    pub fn halves(&self) -> Option<(Block, Block)> {
        let s = self.size();
        if s < 2 {
            return None;
        }
        let mid = self.lo + s / 2;
        Some((
            Block {
                lo: self.lo,
                hi: mid,
            },
            Block {
                lo: mid,
                hi: self.hi,
            },
        ))
    }
    /// The enclosing block one level up.
    pub fn parent(&self) -> Option<Block> {
        let level = self.level();
        if level >= MAX_LEVEL {
            return None;
        }
        let size = self.size() * 2;
        let lo = self.lo - self.lo % size;
        Some(Block { lo, hi: lo + size })
    }
    /// Whether `other` lies inside this block.
    pub fn contains(&self, other: &Block) -> bool {
        self.lo <= other.lo && other.hi <= self.hi
    }
}

impl fmt::Display for Block {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.size() == 1 {
            write!(f, "#{}", self.lo)
        } else {
            write!(f, "{}-{}", self.lo, self.hi - 1)
        }
    }
}

impl FromStr for Block {
    type Err = InvalidBlock;

    /// Parses `lo-hi` (inclusive, as the CLI writes blocks); a leading `#` is accepted. A block
    /// must have size at least 2, be a power of two and be aligned.
    fn from_str(s: &str) -> Result<Block, InvalidBlock> {
        let t = s.trim().trim_start_matches('#');
        let (a, b) = t
            .split_once('-')
            .ok_or_else(|| invalid(format!("{s:?} is not of the form LO-HI")))?;
        let lo: u64 = a
            .parse()
            .map_err(|_| invalid(format!("{s:?}: {a:?} is not a number")))?;
        let last: u64 = b
            .parse()
            .map_err(|_| invalid(format!("{s:?}: {b:?} is not a number")))?;
        if last <= lo {
            return Err(invalid(format!("{s:?}: the end must be above the start")));
        }
        let size = (last - lo).checked_add(1).filter(|s| s.is_power_of_two());
        let Some(size) =
            size.filter(|s| lo.is_multiple_of(*s) && last < u64::MAX && *s <= 1 << MAX_LEVEL)
        else {
            return Err(invalid(format!(
                "{s:?} is not an aligned power-of-two block (like 0-1, 16-31, 64-127)"
            )));
        };
        let _ = size;
        Ok(Block { lo, hi: last + 1 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_and_display_round_trip() {
        for s in ["0-1", "2-3", "16-31", "64-127", "0-1023"] {
            let b: Block = s.parse().unwrap();
            assert_eq!(b.to_string(), s);
        }
        for s in [
            "1-2",
            "0-2",
            "5",
            "a-b",
            "3-3",
            "4-3",
            "0-18446744073709551615",
            "",
        ] {
            assert!(s.parse::<Block>().is_err(), "{s}");
        }
    }

    #[test]
    fn family() {
        let b: Block = "16-31".parse().unwrap();
        assert_eq!(b.parent().unwrap().to_string(), "0-31");
        let (l, r) = b.halves().unwrap();
        assert_eq!(
            (l.to_string(), r.to_string()),
            ("16-23".into(), "24-31".into())
        );
        assert!(b.parent().unwrap().contains(&b));
    }
}
