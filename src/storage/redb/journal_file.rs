//! The journal's file: opened only as a regular file (never through a link, never blocking on a
//! FIFO), made whole under a temporary name and preallocated, read and written at offsets
//! ([`Journal`] for the handle that appends to it).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use redb::StorageBackend;

use crate::error::{Error, Result};

use crate::storage::redb::journal::{
    check_header, header, path_of, unformatted, HEADER, SHARED_CHECKPOINT_EVERY,
};

/// Opens the journal of the store at `store` to read it ([`crate::storage::redb::journal::pending`]); `None` when there is
/// none. A journal that is a symbolic link, a FIFO, a device or anything but a regular file is
/// [`Error::Invalid`]: somna makes it, so anything else there was put by someone else, and is
/// never followed (nor waited on).
pub fn open_existing(store: &Path) -> Result<Option<Box<dyn StorageBackend>>> {
    match open_regular(&path_of(store), false) {
        Ok(f) => Ok(Some(Box::new(FileIo(f)))),
        Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// Opens `path`, which must be a regular file (not through a symbolic link), to read it and, if
/// `write`, to write it. On Unix the open itself refuses a link (`O_NOFOLLOW`) and never blocks
/// on a FIFO (`O_NONBLOCK`, which a regular file's I/O ignores); the type is then checked on the
/// open file, so nothing can swap the path between the check and the open.
fn open_regular(path: &Path, write: bool) -> Result<File> {
    let refused = |kind: &str| {
        Error::invalid(
            "journal path",
            format!(
                "{} is {kind}; a store's journal is a regular file that somna makes: remove it",
                path.display()
            ),
        )
    };
    let mut o = std::fs::OpenOptions::new();
    o.read(true).write(write);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    #[cfg(not(unix))]
    if std::fs::symlink_metadata(path)?.is_symlink() {
        return Err(refused("a symbolic link"));
    }
    let file = match o.open(path) {
        Ok(f) => f,
        #[cfg(unix)]
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Err(refused("a symbolic link")),
        Err(e) => return Err(e.into()),
    };
    if !file.metadata()?.is_file() {
        return Err(refused(
            "not a regular file (a directory, a FIFO, a device or a socket)",
        ));
    }
    Ok(file)
}

/// The journal file as a [`StorageBackend`], the one I/O interface of the journal (the crash
/// tests put the simulated disk there, [`crate::Store::with_backends`]).
#[derive(Debug)]
struct FileIo(File);

impl StorageBackend for FileIo {
    fn len(&self) -> std::io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }
    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        read_at(&self.0, offset, out)
    }
    fn set_len(&self, len: u64) -> std::io::Result<()> {
        self.0.set_len(len)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        self.0.sync_data()
    }
    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        write_at(&self.0, offset, data)
    }
}

/// A positioned read: one `pread` on Unix (no seek, so the file offset is never shared state).
#[cfg(unix)]
fn read_at(f: &File, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(f, out, offset)
}

/// A positioned write: one `pwrite` on Unix.
#[cfg(unix)]
fn write_at(f: &File, offset: u64, data: &[u8]) -> std::io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(f, data, offset)
}

#[cfg(not(unix))]
fn read_at(mut f: &File, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    f.seek(SeekFrom::Start(offset))?;
    f.read_exact(out)
}

#[cfg(not(unix))]
fn write_at(mut f: &File, offset: u64, data: &[u8]) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom};
    f.seek(SeekFrom::Start(offset))?;
    f.write_all(data)
}

/// The open journal of an exclusive handle: where the next record goes and its number.
#[derive(Debug)]
pub(crate) struct Journal {
    io: Box<dyn StorageBackend>,
    size: u64,
    tail: u64,
    epoch: u64,
    seq: u64,
}

impl Journal {
    /// Opens the store's journal file, making it first (`size` bytes, preallocated, under a
    /// temporary name) if there is none; see [`Journal::on`].
    pub(crate) fn open(store: &Path, size: u64, epoch: u64) -> Result<Journal> {
        let path = path_of(store);
        let file = match open_regular(&path, true) {
            Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => {
                make(&path, size.max(2 * HEADER))?;
                open_regular(&path, true)?
            }
            r => r?,
        };
        Journal::on(Box::new(FileIo(file)), &path, size, epoch)
    }

    /// The journal on `io` (named `path` in messages): one that never got its header is
    /// formatted first (zeros to `size` bytes, synced, then the header, synced), so a
    /// header, once there, always has the whole file behind it. New records start at epoch
    /// `epoch`, seq 1, offset [`HEADER`].
    pub(crate) fn on(
        io: Box<dyn StorageBackend>,
        path: &Path,
        size: u64,
        epoch: u64,
    ) -> Result<Journal> {
        let mut head = vec![0u8; 12];
        let len = io.len()?;
        if len >= 12 {
            io.read(0, &mut head)?;
        }
        if unformatted(&head) {
            let size = size.max(2 * HEADER).max(len);
            let zeros = vec![0u8; 64 << 10];
            let mut at = HEADER;
            while at < size {
                let n = (size - at).min(zeros.len() as u64);
                io.write(at, zeros.get(..n as usize).unwrap_or_default())?;
                at += n;
            }
            io.sync_data()?;
            io.write(0, &header())?;
            io.sync_data()?;
            io.read(0, &mut head)?;
        }
        check_header(&head, path)?;
        Ok(Journal {
            size: io.len()?,
            io,
            tail: HEADER,
            epoch,
            seq: 0,
        })
    }

    /// The (epoch, seq) the next record gets.
    pub(crate) fn next(&self) -> (u64, u64) {
        (self.epoch, self.seq + 1)
    }

    /// Whether a record of `n` bytes fits before the end of the file.
    pub(crate) fn fits(&self, n: usize) -> bool {
        self.tail.saturating_add(n as u64) <= self.size
    }

    /// Writes `rec` (numbered [`Journal::next`]) at the tail and syncs its data.
    pub(crate) fn append(&mut self, rec: &[u8]) -> std::io::Result<()> {
        self.io.write(self.tail, rec)?;
        self.io.sync_data()?;
        self.tail += rec.len() as u64;
        self.seq += 1;
        Ok(())
    }

    /// Continues the shared journal as the commit a write transaction starts from left it: its
    /// marker (epoch, seq) and tail, which any process's writer may have moved.
    pub(crate) fn follow(&mut self, (epoch, seq): (u64, u64), tail: u64) {
        self.epoch = epoch;
        self.seq = seq;
        self.tail = tail.max(HEADER);
    }

    /// Where the next record goes.
    pub(crate) fn tail(&self) -> u64 {
        self.tail
    }

    /// Starts epoch `epoch` from the top of the file (after a checkpoint made redb durable).
    pub(crate) fn reset(&mut self, epoch: u64) {
        self.epoch = epoch;
        self.seq = 0;
        self.tail = HEADER;
    }

    /// Overwrites every record with zeros and syncs (after a checkpoint made them all durable in
    /// redb, so none is needed again): a redaction leaves no copy of the text in the journal.
    pub(crate) fn scrub(&mut self) -> std::io::Result<()> {
        const STEP: u64 = 1 << 20;
        let mut at = HEADER;
        while at < self.size {
            let n = (self.size - at).min(STEP);
            self.io.write(at, &vec![0u8; n as usize])?;
            at += n;
        }
        self.io.sync_data()
    }

    /// Whether it is time for a checkpoint: the tail has passed 3/4 of the file, or, for the
    /// shared journal, [`SHARED_CHECKPOINT_EVERY`] records follow the last checkpoint.
    pub(crate) fn wants_checkpoint(&self, shared: bool) -> bool {
        self.tail > self.size / 4 * 3 || (shared && self.seq >= SHARED_CHECKPOINT_EVERY)
    }

    /// The epoch of the records being written.
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }
}

/// Makes a journal file of `size` bytes: the header and zeros, written under a temporary name,
/// synced, renamed into place, and the directory synced, so the path never holds a partial
/// header.
fn make(path: &Path, size: u64) -> Result<()> {
    let tmp = {
        let mut s = path.as_os_str().to_os_string();
        s.push(format!(
            ".new-{}-{}",
            std::process::id(),
            crate::domain::text::now_us()
        ));
        PathBuf::from(s)
    };
    // A name of its own (create_new), so a file or link already there is never written through.
    let _ = std::fs::remove_file(&tmp);
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    let written = (|| -> std::io::Result<()> {
        let mut f = o.open(&tmp)?;
        f.write_all(&header())?;
        let zeros = vec![0u8; 64 << 10];
        let mut left = size.saturating_sub(HEADER);
        while left > 0 {
            let n = left.min(zeros.len() as u64) as usize;
            f.write_all(zeros.get(..n).unwrap_or_default())?;
            left -= n as u64;
        }
        f.sync_all()?;
        // Linked, not renamed, into place: a journal another process made meanwhile (the shared
        // journal's writers may race to make it) is kept, never replaced under its records.
        match std::fs::hard_link(&tmp, path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            // A file system without hard links
            Err(_) => std::fs::rename(&tmp, path)?,
        }
        let _ = std::fs::remove_file(&tmp);
        // The rename made durable. Unix only: Windows cannot open a directory to flush it (std
        // has no way to), and NTFS journals the rename itself.
        #[cfg(unix)]
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            File::open(dir)?.sync_all()?;
        }
        Ok(())
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    Ok(written?)
}
