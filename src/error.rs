//! The errors of every operation.
//!
//! One enum, [`Error`], is returned by the whole library. It is `#[non_exhaustive]` so that new
//! failure kinds can be added without breaking callers; match on the variants you handle and keep
//! a fallback arm. [`Error::exit_code`] gives the CLI's exit status for each kind.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use crate::domain::block::{Block, InvalidBlock};

/// Result alias used throughout somna.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every failure somna reports. Nothing in the library panics on bad input, bad files or bad
/// bytes: it returns one of these.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// There is no store at this path. Only [`crate::Store::create`] (`somna init`) makes one.
    NotFound {
        /// The path that was looked at.
        path: PathBuf,
    },
    /// Another writer held the store for longer than the configured wait.
    Busy {
        /// How long this call waited before giving up.
        waited: Duration,
    },
    /// A stored value failed its checksum or could not be decoded.
    Corrupt {
        /// The table the value lives in.
        table: &'static str,
        /// The key of the value, rendered for humans.
        key: String,
        /// What was wrong with it.
        reason: String,
    },
    /// The caller's input was rejected; nothing was written.
    Invalid {
        /// What was being validated (`text`, `scope`, `block`, ...).
        what: &'static str,
        /// Why it was rejected.
        reason: String,
    },
    /// `nap` answered a block that is not the next pending one.
    WrongBlock {
        /// The block that was answered.
        given: Block,
        /// The block that is next, if any.
        next: Option<Block>,
    },
    /// A block or memory id lies past the end of the log.
    OutOfRange {
        /// What was asked for, rendered (`#12`, `16-31`).
        asked: String,
        /// How many memories the scope has.
        count: u64,
    },
    /// A write would contradict what is already stored (an idempotency key reused with other
    /// content, a revision that moved on, an import into a non-empty scope).
    Conflict(String),
    /// The store was written by a newer somna, or uses a feature this build does not know.
    Unsupported(String),
    /// The principal may not do this (see docs/trust.md).
    Denied(String),
    /// The store cannot be written through this handle: it was opened read-only
    /// ([`crate::Options::read_only`]), or a read that must write (the read audit) met a file
    /// the user may only read.
    ReadOnly(String),
    /// The storage engine (redb) failed.
    Storage(String),
    /// The database server (a `postgresql://` store) cannot be reached, refused the login, or
    /// failed in a way running again would not fix. The message never holds a password.
    Server(String),
    /// The connection to the server was lost during `COMMIT` and the server could not be asked
    /// afterwards whether the write committed: it may or may not have. Check before writing again,
    /// or write with an idempotency key (which makes the retry exactly-once).
    Ambiguous(String),
    /// An operating-system I/O error.
    Io(std::io::Error),
    /// The store's embedder (an embeddings endpoint, [`crate::search::Embedder`]) cannot be reached,
    /// answered an error, or answered something that is not the vectors asked for. The message
    /// names the endpoint by its scheme and host only, never a key.
    Embedder(String),
}

impl Error {
    pub(crate) fn invalid(what: &'static str, reason: impl Into<String>) -> Self {
        Error::Invalid {
            what,
            reason: reason.into(),
        }
    }

    pub(crate) fn corrupt(
        table: &'static str,
        key: impl fmt::Display,
        reason: impl Into<String>,
    ) -> Self {
        Error::Corrupt {
            table,
            key: key.to_string(),
            reason: reason.into(),
        }
    }

    /// A stable name for the kind of error, for bindings and logs: `not_found`, `busy`,
    /// `corrupt`, `invalid`, `wrong_block`, `out_of_range`, `conflict`, `denied`,
    /// `unsupported`, `read_only`, `storage`, `server`, `ambiguous`, `io`, `embedder`.
    pub fn kind(&self) -> &'static str {
        match self {
            Error::NotFound { .. } => "not_found",
            Error::Busy { .. } => "busy",
            Error::Corrupt { .. } => "corrupt",
            Error::Invalid { .. } => "invalid",
            Error::WrongBlock { .. } => "wrong_block",
            Error::OutOfRange { .. } => "out_of_range",
            Error::Conflict(_) => "conflict",
            Error::Denied(_) => "denied",
            Error::Unsupported(_) => "unsupported",
            Error::ReadOnly(_) => "read_only",
            Error::Storage(_) => "storage",
            Error::Server(_) => "server",
            Error::Ambiguous(_) => "ambiguous",
            Error::Io(_) => "io",
            Error::Embedder(_) => "embedder",
        }
    }

    /// The exit status the `somna` CLI uses for this error: 2 for rejected input, 3 for a
    /// missing store, 4 for a busy store, 5 for corruption, 6 for a refused permission, 1 for anything
    /// else; 7 for a server (or an embedder) that cannot be reached, 8 for a commit whose
    /// outcome is unknown.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Invalid { .. } | Error::WrongBlock { .. } | Error::OutOfRange { .. } => 2,
            Error::NotFound { .. } => 3,
            Error::Busy { .. } => 4,
            Error::Corrupt { .. } => 5,
            Error::Denied(_) | Error::ReadOnly(_) => 6,
            Error::Server(_) | Error::Embedder(_) => 7,
            Error::Ambiguous(_) => 8,
            _ => 1,
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::NotFound { path } => write!(
                f,
                "no somna store at {}; create one with `somna init` (or `somna --db {} init`)",
                path.display(),
                path.display()
            ),
            Error::Busy { waited } => write!(
                f,
                "the store is busy: another writer held it for {} ms; try again",
                waited.as_millis()
            ),
            Error::Corrupt { table, key, reason } if *table == "LOG.txt" || *table == "TREE" => {
                write!(
                    f,
                    "the OptMem store is damaged: {table} {key} {reason}; nothing was imported"
                )
            }
            Error::Corrupt { table, reason, .. } if *table == "(file)" => {
                write!(f, "the store file is damaged: {reason}; run `somna verify`")
            }
            Error::Corrupt { table, key, reason } => {
                write!(
                    f,
                    "corrupt value in table {table} at key {key}: {reason}; run `somna verify`"
                )
            }
            Error::Invalid { what, reason } => write!(f, "invalid {what}: {reason}"),
            Error::WrongBlock { given, next } => match next {
                Some(n) => write!(f, "Wrong block {given}: the next is {n}."),
                None => write!(f, "Wrong block {given}: nothing is pending."),
            },
            Error::OutOfRange { asked, count } => {
                write!(f, "{asked} is past the end of the log ({count} memories)")
            }
            Error::Conflict(m) => write!(f, "conflict: {m}"),
            Error::Denied(m) => write!(f, "denied: {m}"),
            Error::Unsupported(m) => write!(f, "unsupported: {m}"),
            Error::ReadOnly(m) => write!(f, "cannot write the store: {m}"),
            Error::Storage(m) => write!(f, "storage error: {m}"),
            Error::Server(m) => write!(f, "server error: {m}"),
            Error::Ambiguous(m) => write!(f, "outcome unknown: {m}"),
            Error::Io(e) => write!(f, "I/O error: {e}"),
            Error::Embedder(m) => write!(f, "the embedder failed: {m}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<InvalidBlock> for Error {
    fn from(e: InvalidBlock) -> Self {
        Error::Invalid {
            what: "block",
            reason: e.0,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}

macro_rules! storage_from {
    ($($t:ty),*) => {$(
        impl From<$t> for Error {
            fn from(e: $t) -> Self {
                storage_error(e.into())
            }
        }
    )*};
}

storage_from!(
    redb::DatabaseError,
    redb::TransactionError,
    redb::TableError,
    redb::StorageError,
    redb::CommitError,
    redb::SetDurabilityError,
    redb::CompactionError
);

/// Damage to the file as a whole (not to one value): [`Error::Corrupt`] in table `(file)`.
pub(crate) fn damaged_file(reason: String) -> Error {
    Error::Corrupt {
        table: "(file)",
        key: "(page)".into(),
        reason,
    }
}

fn storage_error(e: redb::Error) -> Error {
    use std::io::ErrorKind;
    match e {
        redb::Error::Corrupted(m) => damaged_file(m),
        // redb reads only pages its own records point to: a read past the end means the file
        // was truncated or a pointer was damaged; invalid data is a damaged header.
        redb::Error::Io(io) if io.kind() == ErrorKind::UnexpectedEof => {
            damaged_file(format!("a page lies past the end of the file ({io})"))
        }
        redb::Error::Io(io) if io.kind() == ErrorKind::InvalidData => damaged_file(format!(
            "the file header is damaged, or this is not a somna store ({io})"
        )),
        redb::Error::Io(io) => Error::Io(io),
        // Every somna table exists with fixed types once the store is open (opening creates
        // any that are missing), so a missing or retyped table is a damaged table directory.
        e @ (redb::Error::TableDoesNotExist(_)
        | redb::Error::TableTypeMismatch { .. }
        | redb::Error::TypeDefinitionChanged { .. }
        | redb::Error::TableIsMultimap(_)
        | redb::Error::TableIsNotMultimap(_)) => {
            damaged_file(format!("the table directory is damaged ({e})"))
        }
        redb::Error::UpgradeRequired(v) => Error::Unsupported(format!(
            "the file uses redb format {v}; this somna cannot open it"
        )),
        other => Error::Storage(other.to_string()),
    }
}
