//! A torn tail: bytes at the end of the store file that no region layout accounts for.
//!
//! redb only ever resizes its file to a length that maps onto its region layout (a super-header
//! page, then whole regions, then a trailing region of whole pages), and it commits only pages
//! inside the layout it records. A length that is not such a length therefore comes from outside
//! a commit: a crash of the file system while the file was being extended, a partial copy, stray
//! bytes appended by another program. redb refuses such a file outright ("File length does not
//! correspond to a valid region layout"), which made every command fail.
//!
//! somna recovers it when it opens the file for writing (docs/reliability.md, "A torn tail"):
//! the stray bytes past the last whole layout are moved to a side file beside the store (never
//! destroyed), the file is cut back, and the open goes on. A tail cut inside the last page is
//! padded back with zeros to the length the header records. If the open still fails after the
//! cut (or a page of the tables fails its checksum), the cut bytes are written back (or the
//! padding removed) and the original error is reported.
//!
//! Detection reads only the immutable region geometry of the header (page size, pages per region
//! header, data pages per region), so a concurrent writer, which changes only the region counts,
//! can never make a sound file look torn.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::error::Result;

/// redb's magic number, the first nine bytes of every redb file.
const MAGIC: [u8; 9] = [b'r', b'e', b'd', b'b', 0x1A, 0x0A, 0xA9, 0x0D, 0x0A];
/// The flag of redb's "god byte" (offset 9) that a writer sets while the file is not clean.
const RECOVERY_REQUIRED: u8 = 2;

/// What an open did to a torn tail. See [`crate::Store::repaired_tail`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TailRepair {
    /// The file's length before the repair.
    pub old_len: u64,
    /// Its length after: the last whole region layout.
    pub new_len: u64,
    /// Where the bytes cut off were saved (`None` when the file was padded, not cut).
    pub saved_to: Option<PathBuf>,
    /// Whether the open then dropped the store's newest commit, whose checksums failed, for the
    /// one before it. After a power loss that is a commit the crash cut (never acknowledged);
    /// but the bytes the torn tail lost may have been that commit's pages, so it may also have
    /// been acknowledged, and the repair says so instead of keeping quiet (docs/reliability.md,
    /// "A torn tail").
    pub dropped_newest_commit: bool,
}

impl std::fmt::Display for TailRepair {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.fmt_cut(f)?;
        if self.dropped_newest_commit {
            write!(
                f,
                "; its newest commit then failed its checksums and was dropped for the one before it: a commit the crash cut short, or, if that commit had been acknowledged, one lost with the damaged end"
            )?;
        }
        Ok(())
    }
}

impl TailRepair {
    fn fmt_cut(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.saved_to {
            Some(side) => write!(
                f,
                "the store file ended with {} stray bytes past its last page (a torn tail, left by a crash or a partial copy); they were moved to {} and the store was recovered",
                self.old_len - self.new_len,
                side.display()
            ),
            None => write!(
                f,
                "the store file ended {} bytes short of a whole page (a torn tail, left by a crash or a partial copy); it was padded with zeros to the page's end and the store was recovered",
                self.new_len - self.old_len
            ),
        }
    }
}

/// The region geometry and recorded layout read from a redb header.
#[derive(Debug, Clone, Copy)]
struct Geometry {
    page: u64,
    header_pages: u64,
    region_pages: u64,
    /// The length the header's region counts describe (may be stale or torn on an unclean file).
    recorded_len: Option<u64>,
    /// Whether the last writer closed the file cleanly (the counts are then authoritative).
    clean: bool,
}

impl Geometry {
    fn read(file: &mut File) -> Option<Geometry> {
        let mut h = [0u8; 32];
        file.seek(SeekFrom::Start(0)).ok()?;
        file.read_exact(&mut h).ok()?;
        if h.get(..9)? != MAGIC {
            return None;
        }
        let u32_at = |at: usize| -> Option<u64> {
            let b: [u8; 4] = h.get(at..at + 4)?.try_into().ok()?;
            Some(u64::from(u32::from_le_bytes(b)))
        };
        let g = Geometry {
            page: u32_at(12)?,
            header_pages: u32_at(16)?,
            region_pages: u32_at(20)?,
            recorded_len: None,
            clean: h.get(9).is_some_and(|god| god & RECOVERY_REQUIRED == 0),
        };
        if !g.page.is_power_of_two() || g.page < 512 || g.region_pages == 0 {
            return None;
        }
        let (full, trailing) = (u32_at(24)?, u32_at(28)?);
        let trailing_len = match trailing {
            0 => Some(0),
            t => g.page.checked_mul(g.header_pages.checked_add(t)?),
        };
        let recorded_len = g
            .region_len()?
            .checked_mul(full)?
            .checked_add(g.page)?
            .checked_add(trailing_len?);
        Some(Geometry { recorded_len, ..g })
    }

    fn region_len(&self) -> Option<u64> {
        self.page
            .checked_mul(self.header_pages.checked_add(self.region_pages)?)
    }

    /// The longest length at most `len` that maps onto a region layout, as redb computes it.
    fn floor(&self, len: u64) -> Option<u64> {
        let region = self.region_len()?;
        let rest = len.checked_sub(self.page)?;
        let full = rest / region;
        let in_trailing = rest - full * region;
        let base = self.page + full * region;
        let trailing_min = self.page.checked_mul(self.header_pages + 1)?;
        if in_trailing >= trailing_min {
            Some(base + in_trailing / self.page * self.page)
        } else if full > 0 {
            Some(base)
        } else {
            None
        }
    }
}

/// The lengths to try, best first, when the file at `path` has a torn tail; empty when its
/// length is one redb can open (or it is not a redb file, which redb reports itself).
///
/// On a clean file the recorded layout is authoritative: bytes past it are stray, and a file
/// cut less than a page short of it is padded back. On a file a writer did not close (redb then
/// trusts the length, not the counts, which a crash may tear) the length is rounded up to the
/// next layout first, which keeps every byte present; then down.
pub(crate) fn repair_lengths(path: &Path) -> Result<Vec<u64>> {
    let mut file = File::open(path)?;
    let len = file.metadata()?.len();
    let Some(g) = Geometry::read(&mut file) else {
        return Ok(Vec::new());
    };
    let floor = g.floor(len);
    if floor == Some(len) {
        return Ok(Vec::new());
    }
    let ceil = len
        .checked_add(g.page - 1)
        .and_then(|l| g.floor(l))
        .filter(|&c| c > len);
    let recorded = g
        .recorded_len
        .filter(|&r| g.floor(r) == Some(r) && (r < len || r - len < g.page));
    let order = if g.clean {
        [recorded, floor, ceil]
    } else {
        [ceil, floor, None]
    };
    let mut out = Vec::new();
    for l in order.into_iter().flatten() {
        if !out.contains(&l) {
            out.push(l);
        }
    }
    Ok(out)
}

/// Cuts (or pads) the file to `new_len`, saving what is cut in a side file first. Both are
/// synced before this returns.
pub(crate) fn cut(path: &Path, new_len: u64) -> Result<TailRepair> {
    let mut file = OpenOptions::new().read(true).write(true).open(path)?;
    let old_len = file.metadata()?.len();
    let mut saved_to = None;
    if new_len < old_len {
        file.seek(SeekFrom::Start(new_len))?;
        let side = side_file(path);
        let mut o = OpenOptions::new();
        o.write(true).create_new(true);
        #[cfg(unix)]
        {
            use std::os::unix::fs::OpenOptionsExt;
            o.mode(0o600);
        }
        let mut s = o.open(&side)?;
        // Streamed, not read whole: a tail can be as long as a partial copy left it.
        std::io::copy(&mut (&mut file).take(old_len - new_len), &mut s)?;
        s.sync_all()?;
        saved_to = Some(side);
    }
    file.set_len(new_len)?;
    file.sync_all()?;
    Ok(TailRepair {
        old_len,
        new_len,
        saved_to,
        dropped_newest_commit: false,
    })
}

/// Puts the file back as it was before [`cut`], and removes the side file.
pub(crate) fn undo(path: &Path, r: &TailRepair) -> Result<()> {
    let mut file = OpenOptions::new().write(true).open(path)?;
    match &r.saved_to {
        Some(side) => {
            file.set_len(r.new_len)?;
            file.seek(SeekFrom::Start(r.new_len))?;
            std::io::copy(&mut File::open(side)?, &mut file)?;
            file.sync_all()?;
            std::fs::remove_file(side)?;
        }
        None => {
            file.set_len(r.old_len)?;
            file.sync_all()?;
        }
    }
    Ok(())
}

fn side_file(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "store".into());
    path.with_file_name(format!(
        "{name}.torn-tail-{}-{}",
        crate::domain::text::now_us(),
        std::process::id()
    ))
}
