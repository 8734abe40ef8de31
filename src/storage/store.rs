//! The store: opening and creating the file, transactions with a bounded wait, scopes, settings
//! and statistics. The log, the tree, wake and the importers add their operations to
//! [`WriteTxn`] and [`ReadTxn`] in their own files.

use std::any::Any;
use std::fs::OpenOptions;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use redb::{
    ConcurrencyMode, Database, ReadTransaction, ReadableDatabase, TableError, TransactionError,
    WriteTransaction,
};

use crate::domain::text::now_us;
use crate::error::{Error, Result};
use crate::storage::access::Asker;
use crate::storage::backend::{ReadKv, WriteKv};
use crate::storage::codec::{decode, encode};
use crate::storage::config::{validate_config, Config};
use crate::storage::group::{copy_error, Job, Op};
#[cfg(feature = "postgres")]
use crate::storage::pg::{Attempt, PgEngine};
use crate::storage::redb_kv::{RedbRead, RedbWrite};
use crate::storage::schema::{self, META, STORE_FORMAT};
use crate::storage::tables;
use crate::storage::txn::{ReadTxn, WriteTxn};

/// The scope used when none is named.
pub const DEFAULT_SCOPE: &str = "default";

/// How a [`Store`] is opened.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Options {
    /// How long a writer waits for another writer (thread or process) before failing with
    /// [`Error::Busy`]. Default 10 s.
    pub busy_timeout: Duration,
    /// redb's page cache for this handle. Default 32 MiB (redb's own default is 1 GiB).
    pub cache_bytes: usize,
    /// Open with redb's `ExclusiveWriter` mode: one process owns the file, commits cost one
    /// fsync instead of two, and other processes wait (then fail `Busy`) to open it. Default
    /// false: `MultiWriter`, so many agent processes share one store. See docs/design.md.
    pub exclusive: bool,
    /// The principal this handle acts as (see docs/trust.md). `None`: the store's admin.
    pub principal: Option<String>,
    /// Check every page of the file when opening it (redb's `set_check_integrity_on_open`): a
    /// damaged file is then refused with [`Error::Corrupt`] before anything reads it, instead of
    /// possibly making redb panic. Costs a read of the whole file (and a commit) per open; off
    /// by default. See docs/reliability.md.
    pub check_on_open: bool,
    /// Open the file read-only: nothing this handle does can change the file's bytes, so it
    /// works on a file the user may only read, and it never waits for a writer. Writes fail
    /// with [`Error::ReadOnly`]. A file that needs a writer first (a crash left it to recover,
    /// it has a torn tail, or it lacks tables of this engram) is recovered by one read-write
    /// open before the read-only one, when the user may write it. Default false.
    pub read_only: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            busy_timeout: Duration::from_secs(10),
            cache_bytes: 32 << 20,
            exclusive: false,
            principal: None,
            check_on_open: false,
            read_only: false,
        }
    }
}

impl Options {
    /// Sets [`Options::busy_timeout`].
    pub fn busy_timeout(mut self, d: Duration) -> Self {
        self.busy_timeout = d;
        self
    }
    /// Sets [`Options::exclusive`].
    pub fn exclusive(mut self, yes: bool) -> Self {
        self.exclusive = yes;
        self
    }
    /// Sets [`Options::principal`].
    pub fn principal(mut self, p: Option<&str>) -> Self {
        self.principal = p.map(str::to_string);
        self
    }
    /// Sets [`Options::check_on_open`].
    pub fn check_on_open(mut self, yes: bool) -> Self {
        self.check_on_open = yes;
        self
    }
    /// Sets [`Options::read_only`].
    pub fn read_only(mut self, yes: bool) -> Self {
        self.read_only = yes;
        self
    }
    /// Sets [`Options::cache_bytes`].
    pub fn cache_bytes(mut self, n: usize) -> Self {
        self.cache_bytes = n;
        self
    }
}

/// An engram store: one redb file holding every scope's log and tree.
///
/// ```
/// let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("memory.redb");
/// assert!(engram::Store::open(&path).is_err()); // only create() makes a store
/// let store = engram::Store::create(&path).unwrap();
/// let id = store.note("default", engram::NewMemory::new("the user prefers tabs")).unwrap();
/// assert_eq!(id, 0);
/// assert_eq!(store.count("default").unwrap(), 1);
/// ```
pub struct Store {
    backend: Backend,
    group: Arc<crate::storage::group::Group>,
    path: PathBuf,
    opts: Options,
    repaired: Option<crate::storage::tail::TailRepair>,
    created: bool,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("path", &self.path).finish()
    }
}

/// Where the store lives: a file (redb) or a schema on a PostgreSQL-protocol server.
#[derive(Clone)]
enum Backend {
    File(Arc<Engine>),
    #[cfg(feature = "postgres")]
    Server(Arc<PgEngine>),
}

/// A server URL as it may be shown: without the password of its user info, if it has one.
///
/// ```
/// use engram::storage::store::without_password;
/// assert_eq!(
///     without_password("postgresql://ann:secret@db.example:5432/mem?schema=team"),
///     "postgresql://ann@db.example:5432/mem?schema=team"
/// );
/// assert_eq!(without_password("/home/ann/.engram/memory.redb"), "/home/ann/.engram/memory.redb");
/// ```
pub fn without_password(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let Some(at) = authority.rfind('@') else {
        return url.to_string();
    };
    let (userinfo, hosts) = authority.split_at(at);
    let user = userinfo.split(':').next().unwrap_or("");
    format!("{scheme}://{user}{hosts}{tail}")
}

/// The server URL that `path` holds, if it is one (`postgresql://...`).
pub fn url_of(path: &Path) -> Option<&str> {
    path.to_str()
        .filter(|s| s.starts_with("postgresql://") || s.starts_with("postgres://"))
}

/// The open database, and the first failure of the storage engine on it.
///
/// redb trusts a file that was closed cleanly and may panic on a page damaged since (an
/// out-of-range slice index in its B-tree code). Every transaction runs under [`Engine::guard`],
/// which catches such a panic, records it here and returns [`Error::Corrupt`]. From then on every
/// operation on this database fails with the same error without touching the file, and the
/// database is not closed when the last handle goes (closing commits redb's allocator state,
/// which would write into the damaged file): it is leaked, file descriptor and cache included,
/// and the next open of the file repairs or refuses it.
pub(crate) struct Engine {
    db: Option<Db>,
    failed: std::sync::OnceLock<String>,
}

/// The open file: read-write, or read-only (a handle that cannot change the file at all).
enum Db {
    ReadWrite(Database),
    ReadOnly(redb::ReadOnlyDatabase),
}

impl Db {
    fn begin_read(&self) -> Result<ReadTransaction> {
        Ok(match self {
            Db::ReadWrite(d) => d.begin_read()?,
            Db::ReadOnly(d) => d.begin_read()?,
        })
    }

    /// The database, for a write; [`Error::ReadOnly`] on a read-only handle.
    fn writable(&self) -> Result<&Database> {
        match self {
            Db::ReadWrite(d) => Ok(d),
            Db::ReadOnly(_) => Err(read_only_handle()),
        }
    }

    /// [`Db::writable`], for the operations that need the database to themselves.
    fn writable_mut(&mut self) -> Result<&mut Database> {
        match self {
            Db::ReadWrite(d) => Ok(d),
            Db::ReadOnly(_) => Err(read_only_handle()),
        }
    }

    fn close(self) -> Result<()> {
        match self {
            Db::ReadWrite(d) => drop(d),
            Db::ReadOnly(d) => d.close()?,
        }
        Ok(())
    }
}

/// A refused read-write open of the file as [`Error::ReadOnly`]; other errors as they are.
fn may_not_write(path: &Path, e: Error) -> Error {
    match e {
        Error::Io(io) if io.kind() == std::io::ErrorKind::PermissionDenied => {
            Error::ReadOnly(format!("this user may not write {} ({io})", path.display()))
        }
        e => e,
    }
}

fn read_only_handle() -> Error {
    Error::ReadOnly("this handle was opened read-only and cannot write".into())
}

impl Engine {
    fn new(db: Db) -> Arc<Engine> {
        Arc::new(Engine {
            db: Some(db),
            failed: std::sync::OnceLock::new(),
        })
    }

    fn db(&self) -> Result<&Db> {
        if let Some(reason) = self.failed.get() {
            return Err(crate::error::damaged_file(reason.clone()));
        }
        self.db
            .as_ref()
            .ok_or_else(|| crate::error::damaged_file("the store is closed".into()))
    }

    /// Runs `f` on the database, turning a panic of the storage engine into `Error::Corrupt`
    /// and marking the engine failed.
    fn guard<R>(&self, during: &str, f: impl FnOnce(&Db) -> Result<R>) -> Result<R> {
        let db = self.db()?;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(db)))
            .unwrap_or_else(|p| Err(self.fail(during, p)))
    }

    /// Records a panic of the engine: from now on every call fails with the returned error.
    fn fail(&self, during: &str, panic: Box<dyn std::any::Any + Send>) -> Error {
        let e = engine_panic(during, panic);
        if let Error::Corrupt { reason, .. } = &e {
            let _ = self.failed.set(reason.clone());
        }
        e
    }

    /// [`Engine::guard`] for the operations that need the database to themselves.
    fn guard_mut<R>(
        &mut self,
        during: &str,
        f: impl FnOnce(&mut Database) -> Result<R>,
    ) -> Result<R> {
        if let Some(reason) = self.failed.get() {
            return Err(crate::error::damaged_file(reason.clone()));
        }
        let db = self
            .db
            .as_mut()
            .ok_or_else(|| crate::error::damaged_file("the store is closed".into()))?
            .writable_mut()?;
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(db)))
            .unwrap_or_else(|p| Err(self.fail(during, p)))
    }

    /// Closes the database: redb commits its allocator state. A failed engine is not closed.
    fn close(&mut self) -> Result<()> {
        let Some(db) = self.db.take() else {
            return Ok(());
        };
        if let Some(reason) = self.failed.get() {
            std::mem::forget(db);
            return Err(crate::error::damaged_file(reason.clone()));
        }
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| db.close()))
            .unwrap_or_else(|p| Err(engine_panic("closing the file", p)))
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        // Drop cannot report an error; `Store::close` does.
        let _ = self.close();
    }
}

fn builder(opts: &Options) -> redb::Builder {
    let mut b = Database::builder();
    b.set_cache_size(opts.cache_bytes);
    b.set_check_integrity_on_open(opts.check_on_open);
    b.set_concurrency_mode(if opts.exclusive {
        ConcurrencyMode::ExclusiveWriter
    } else {
        ConcurrencyMode::MultiWriter
    });
    b
}

impl Store {
    /// Creates the store at `path` (file mode 0600, parent directories 0700), or opens it if it
    /// already exists. This is `engram init`: idempotent.
    pub fn create(path: impl AsRef<Path>) -> Result<Store> {
        Self::create_with(path, Options::default())
    }

    /// [`Store::create`] with options.
    ///
    /// `path` may be a server URL (`postgresql://user@host/db?schema=name`): the schema and its
    /// tables are then created on the server (see docs/scale-out.md).
    pub fn create_with(path: impl AsRef<Path>, opts: Options) -> Result<Store> {
        let path = path.as_ref();
        if let Some(url) = url_of(path) {
            return Self::open_server(url, opts, true);
        }
        if Self::exists(path) {
            return Self::open_with(path, opts);
        }
        let made = Self::make_file(path, &opts)?;
        let mut store = Self::open_with(path, opts)?;
        store.created = made;
        Ok(store)
    }

    /// Builds a new store file at `path`; false when another process made it first.
    fn make_file(path: &Path, opts: &Options) -> Result<bool> {
        if let Some(parent) = path.parent() {
            if !parent.as_os_str().is_empty() && !parent.exists() {
                let mut b = std::fs::DirBuilder::new();
                b.recursive(true);
                #[cfg(unix)]
                {
                    use std::os::unix::fs::DirBuilderExt;
                    b.mode(0o700);
                }
                b.create(parent)?;
            }
        }
        // The store is built under a temporary name beside its path and linked into place only
        // once it is complete, so a crash during `init` never leaves a half-made store at the
        // path (which nothing could open).
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "store".into());
        let tmp = path.with_file_name(format!(".{name}.init-{}-{}", std::process::id(), now_us()));
        let built = (|| -> Result<bool> {
            let mut o = OpenOptions::new();
            o.write(true).create_new(true);
            #[cfg(unix)]
            {
                use std::os::unix::fs::OpenOptionsExt;
                o.mode(0o600);
            }
            o.open(&tmp)?;
            let db = builder(opts).create(&tmp)?;
            let store = Self::initialize(Store {
                backend: Backend::File(Engine::new(Db::ReadWrite(db))),
                group: Arc::default(),
                path: tmp.clone(),
                opts: opts.clone(),
                repaired: None,
                created: false,
            })?;
            drop(store);
            std::fs::File::open(&tmp)?.sync_all()?;
            match std::fs::hard_link(&tmp, path) {
                Ok(()) => Ok(true),
                // Another process created the store first: use theirs.
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
                Err(e) => Err(e.into()),
            }
        })();
        let _ = std::fs::remove_file(&tmp);
        let made = built?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            if let Ok(d) = std::fs::File::open(dir) {
                let _ = d.sync_all();
            }
        }
        Ok(made)
    }

    /// Opens (creating it if empty) a store on a custom redb storage backend: an in-memory
    /// disk, or the fault-injecting disk of the crash tests. `name` only labels the store in
    /// messages. On a non-empty backend this is an open: the format is checked as usual.
    pub fn with_backend(
        backend: impl redb::StorageBackend,
        name: &str,
        opts: Options,
    ) -> Result<Store> {
        let db = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            builder(&opts).create_with_backend(backend)
        })) {
            Ok(r) => r?,
            Err(p) => return Err(engine_panic("opening the file", p)),
        };
        let store = Store {
            backend: Backend::File(Engine::new(Db::ReadWrite(db))),
            group: Arc::default(),
            path: PathBuf::from(name),
            opts,
            repaired: None,
            created: false,
        };
        let fresh = store.read(|r| match r.tx.redb()?.raw().open_table(META) {
            Ok(_) => Ok(false),
            Err(TableError::TableDoesNotExist(_)) => Ok(true),
            Err(e) => Err(e.into()),
        })?;
        if fresh {
            Self::initialize(store)
        } else {
            store.check_format()?;
            Ok(store)
        }
    }

    fn initialize(store: Store) -> Result<Store> {
        store.write(|tx| {
            let kv = &mut tx.tx;
            if tables::META.get_for_update(kv, "format")?.is_none() {
                tables::META.put(kv, "format", &encode(&STORE_FORMAT)?)?;
                tables::META.put(kv, "created_us", &encode(&tx.now)?)?;
                tables::META.put(kv, "next_scope_id", &encode(&0u32)?)?;
                let admin = tx
                    .asker
                    .principal()
                    .map(str::to_string)
                    .unwrap_or_else(|| crate::storage::access::DEFAULT_ADMIN.to_string());
                tables::META.put(&mut tx.tx, "admin", &encode(&admin)?)?;
            }
            tx.ensure_tables()
        })?;
        Ok(store)
    }

    /// Opens (with `create`: creates if missing) the store in a server's schema.
    #[cfg(not(feature = "postgres"))]
    fn open_server(url: &str, _opts: Options, _create: bool) -> Result<Store> {
        Err(Error::Unsupported(format!(
            "{} names a PostgreSQL server, and this engram was built without the `postgres` feature",
            url.split('@').next_back().unwrap_or("the URL")
        )))
    }

    /// Opens (with `create`: creates if missing) the store in a server's schema.
    #[cfg(feature = "postgres")]
    fn open_server(url: &str, opts: Options, create: bool) -> Result<Store> {
        let pg = PgEngine::connect(url, opts.busy_timeout)?;
        let names = pg.table_names()?;
        let ours = schema::TABLE_NAMES
            .iter()
            .filter(|n| names.iter().any(|m| m == *n))
            .count();
        let store = Store {
            path: PathBuf::from(pg.shown()),
            backend: Backend::Server(Arc::clone(&pg)),
            group: Arc::default(),
            opts,
            repaired: None,
            created: false,
        };
        if !names.iter().any(|n| n == "meta") {
            if ours > 0 {
                return Err(crate::error::damaged_file(format!(
                    "schema {} has {ours} engram tables but not meta",
                    pg.schema()
                )));
            }
            if !names.is_empty() {
                return Err(Error::Unsupported(format!(
                    "schema {} at {} holds tables that are not an engram store; name another with ?schema=NAME",
                    pg.schema(),
                    pg.shown()
                )));
            }
        }
        let complete = ours == schema::TABLE_NAMES.len()
            && names.iter().any(|n| n == crate::storage::pg::COMMITS);
        // A read-only handle creates nothing: a table a newer engram added is made by the next
        // read-write open, and until then a verb that needs it says so.
        if !complete && (create || ours > 0) && !store.opts.read_only {
            pg.create_tables()?;
        }
        let format = match ours {
            0 => None,
            _ => store.read(|r| tables::META.get(&r.tx, "format"))?,
        };
        if let Some(v) = format {
            store.upgrade(check_format_value(&v)?)?;
            Ok(store)
        } else if create {
            let mut store = Self::initialize(store)?;
            store.created = true;
            Ok(store)
        } else {
            Err(Error::NotFound {
                path: PathBuf::from(pg.shown()),
            })
        }
    }

    /// Whether a store file exists (and is not empty) at `path`.
    pub fn exists(path: impl AsRef<Path>) -> bool {
        std::fs::metadata(path.as_ref())
            .map(|m| m.is_file() && m.len() > 0)
            .unwrap_or(false)
    }

    /// Opens an existing store. A missing file is [`Error::NotFound`]; nothing is created.
    pub fn open(path: impl AsRef<Path>) -> Result<Store> {
        Self::open_with(path, Options::default())
    }

    /// [`Store::open`] with options. With [`Options::read_only`] the file is opened read-only
    /// (see there).
    pub fn open_with(path: impl AsRef<Path>, opts: Options) -> Result<Store> {
        let path = path.as_ref();
        if let Some(url) = url_of(path) {
            return Self::open_server(url, opts, false);
        }
        if !Self::exists(path) {
            return Err(Error::NotFound {
                path: path.to_path_buf(),
            });
        }
        if opts.read_only {
            Self::open_reader(path, opts)
        } else {
            Self::open_writer(path, opts)
        }
    }

    /// A read-write open, which first recovers a torn tail (see [`Store::repaired_tail`]).
    fn open_writer(path: &Path, opts: Options) -> Result<Store> {
        let lengths = crate::storage::tail::repair_lengths(path)?;
        if lengths.is_empty() {
            return Self::open_file(path, opts, None);
        }
        let mut first_error = None;
        for len in lengths {
            let repair =
                crate::storage::tail::cut(path, len).map_err(|e| may_not_write(path, e))?;
            // A repair is kept only if every page of the recovered store matches its checksum:
            // a cut that took live bytes must stay an error, never become wrong answers.
            match Self::open_file(path, opts.clone(), Some(repair.clone())) {
                Ok(store) => return Ok(store),
                Err(e) => {
                    crate::storage::tail::undo(path, &repair)?;
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Self::open_file(path, opts, None),
        }
    }

    /// A read-only open. What needs a writer first (a crash to recover, a torn tail, tables
    /// to add) gets one read-write open, when the user may write the file.
    fn open_reader(path: &Path, opts: Options) -> Result<Store> {
        let torn = !crate::storage::tail::repair_lengths(path)?.is_empty();
        let why = if torn {
            "it has a torn tail (stray bytes past its last page) to move aside".to_string()
        } else {
            match Self::open_file(path, opts.clone(), None) {
                Err(Error::ReadOnly(why)) => why,
                other => return other,
            }
        };
        let writer = Self::open_writer(path, opts.clone().read_only(false)).map_err(|e| match e {
            Error::ReadOnly(_) => Error::ReadOnly(format!(
                "{} needs one open by a user who may write it, because {why}: run `engram verify` as such a user",
                path.display()
            )),
            e => e,
        })?;
        let repaired = writer.repaired.clone();
        writer.close()?;
        let mut store = Self::open_file(path, opts, None)?;
        store.repaired = repaired;
        Ok(store)
    }

    fn open_file(
        path: &Path,
        opts: Options,
        repaired: Option<crate::storage::tail::TailRepair>,
    ) -> Result<Store> {
        let db = open_bounded(&opts, path).map_err(|e| may_not_write(path, e))?;
        let store = Store {
            backend: Backend::File(Engine::new(db)),
            group: Arc::default(),
            path: path.to_path_buf(),
            opts,
            repaired,
            created: false,
        };
        if let Some(r) = &store.repaired {
            // A repair is kept only if every page of the recovered store matches its checksum:
            // a cut that took live bytes must stay an error, never become wrong answers.
            if !store.read(|t| Ok(t.tx.redb()?.raw().verify_checksums()?))? {
                return Err(crate::error::damaged_file(format!(
                    "its end was cut inside a page that holds data ({} bytes, {} expected)",
                    r.old_len, r.new_len
                )));
            }
        }
        store.check_format()?;
        Ok(store)
    }

    /// What opening this handle did to a torn tail of the file (stray bytes past its last
    /// page, moved to a side file), if it found one. Say it to the user once: the next open
    /// finds a sound file. See docs/reliability.md.
    pub fn repaired_tail(&self) -> Option<&crate::storage::tail::TailRepair> {
        self.repaired.as_ref()
    }

    /// Whether this handle's open made the store ([`Store::create`] on a path or schema that held
    /// none).
    pub fn was_created(&self) -> bool {
        self.created
    }

    /// Whether the store lives on a server (a `postgresql://` URL) rather than in a file.
    pub fn is_server(&self) -> bool {
        match &self.backend {
            Backend::File(_) => false,
            #[cfg(feature = "postgres")]
            Backend::Server(_) => true,
        }
    }

    /// Whether this handle was opened read-only ([`Options::read_only`]).
    pub fn is_read_only(&self) -> bool {
        self.opts.read_only
    }

    fn check_format(&self) -> Result<()> {
        let engine = match &self.backend {
            Backend::File(e) => e,
            // `open_server` checked the format with the one read it needed.
            #[cfg(feature = "postgres")]
            Backend::Server(_) => return Ok(()),
        };
        let (missing, format) =
            engine.guard("reading the store header", |db| self.read_format(db))?;
        // A read-only handle reads a format-1 store as it is (without the search tables, which
        // only search needs); its next read-write open adds them and builds the index.
        let only_index = format < STORE_FORMAT
            && missing
                .iter()
                .all(|t| crate::storage::index::TABLES.contains(t));
        let readable_as_is = missing.is_empty() || (self.opts.read_only && only_index);
        if !readable_as_is {
            if self.opts.read_only {
                return Err(Error::ReadOnly(
                    "it lacks tables that this engram adds on its first read-write open".into(),
                ));
            }
            self.write(|tx| tx.ensure_tables())?;
        }
        self.upgrade(format)
    }

    /// Builds the search index of a store of an older format (format 1) from its log and tree
    /// and marks it format 2, in one write transaction; a read-only handle leaves the store as
    /// it is (search then asks for `engram reindex`).
    fn upgrade(&self, format: u32) -> Result<()> {
        if format < STORE_FORMAT && !self.opts.read_only {
            self.write(|tx| {
                // Another process may have upgraded it since this one read the format.
                let now = match tables::META.get_for_update(&mut tx.tx, "format")? {
                    Some(v) => decode::<u32>("meta", &"format", &v)?,
                    None => format,
                };
                if now < STORE_FORMAT {
                    crate::storage::index::build::rebuild_all(&mut tx.tx, &mut |_, _| {})?;
                }
                Ok(())
            })?;
        }
        Ok(())
    }

    /// Checks the format number; returns the tables of this engram that the file lacks, and
    /// the format.
    fn read_format(&self, db: &Db) -> Result<(Vec<&'static str>, u32)> {
        let rtx = db.begin_read()?;
        let meta = match rtx.open_table(META) {
            Ok(t) => t,
            Err(TableError::TableDoesNotExist(_)) => {
                // Other engram tables without `meta`: a damaged table directory, not a
                // foreign file.
                let ours = rtx
                    .list_tables()?
                    .filter(|t| schema::TABLE_NAMES.contains(&redb::TableHandle::name(t)))
                    .count();
                if ours > 0 {
                    return Err(crate::error::damaged_file(format!(
                        "the table directory is damaged (table meta is missing, {ours} other engram tables are present)"
                    )));
                }
                return Err(Error::Unsupported(format!(
                    "{} is a redb file but not an engram store",
                    self.path.display()
                )));
            }
            Err(e) => return Err(e.into()),
        };
        let Some(v) = meta.get("format")? else {
            if redb::ReadableTableMetadata::len(&meta)? > 0 {
                return Err(crate::error::damaged_file(
                    "the meta table is damaged (its format entry is missing)".into(),
                ));
            }
            return Err(Error::Unsupported(format!(
                "{} is a redb file but not an engram store",
                self.path.display()
            )));
        };
        let format = check_format_value(v.value())?;
        drop(v);
        drop(meta);
        let have: Vec<String> = rtx
            .list_tables()?
            .map(|t| redb::TableHandle::name(&t).to_string())
            .collect();
        let missing = schema::TABLE_NAMES
            .iter()
            .copied()
            .filter(|n| !have.iter().any(|h| h == n))
            .collect();
        Ok((missing, format))
    }

    /// Another handle to the same open store that acts as `principal` (`None`: the admin).
    /// Cheap: the database is shared.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = engram::Store::create(dir.path().join("m.redb")).unwrap();
    /// store.grant("user:bob", engram::Access::Read, "team/").unwrap();
    /// let bob = store.as_principal(Some("user:bob"));
    /// assert!(bob.note("team/x", engram::NewMemory::new("hi")).is_err()); // no write grant
    /// ```
    pub fn as_principal(&self, principal: Option<&str>) -> Store {
        Store {
            backend: self.backend.clone(),
            group: Arc::clone(&self.group),
            path: self.path.clone(),
            opts: self.opts.clone().principal(principal),
            repaired: self.repaired.clone(),
            created: self.created,
        }
    }

    pub(crate) fn group(&self) -> &Arc<crate::storage::group::Group> {
        &self.group
    }

    /// The principal this handle acts as (`None`: the admin).
    pub fn principal(&self) -> Option<&str> {
        self.opts.principal.as_deref()
    }

    /// The path of the store file; for a server store, its URL without the password.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The options this handle was opened with.
    pub fn options(&self) -> &Options {
        &self.opts
    }

    /// Runs `f` in one write transaction and commits it durably; if `f` fails, nothing is
    /// written. Waits up to [`Options::busy_timeout`] for another writer, then fails with
    /// [`Error::Busy`].
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let store = engram::Store::create(dir.path().join("m.redb")).unwrap();
    /// use engram::NewMemory;
    /// // Two notes in two scopes, one commit: a reader sees both or neither.
    /// store.write(|tx| {
    ///     tx.note("project:a", NewMemory::new("chose postgres"))?;
    ///     tx.note("user", NewMemory::new("prefers short answers"))?;
    ///     Ok(())
    /// }).unwrap();
    /// ```
    ///
    /// On a server store `f` may run more than once (when the server asks for the transaction
    /// to be run again): it must have no effects outside the transaction.
    pub fn write<R>(&self, mut f: impl FnMut(&mut WriteTxn<'_>) -> Result<R>) -> Result<R> {
        let engine = match &self.backend {
            Backend::File(e) => e,
            #[cfg(feature = "postgres")]
            Backend::Server(pg) => return self.write_server(pg, f),
        };
        engine.guard("writing", |db| {
            let tx = self.begin_write(db.writable()?)?;
            let r = {
                let mut w = WriteTxn {
                    tx: WriteKv::Redb(RedbWrite::new(&tx)),
                    now: now_us(),
                    config: None,
                    _s: std::marker::PhantomData,
                    asker: Asker::new(self.opts.principal.clone()),
                };
                let r = f(&mut w)?;
                // Irrefutable without the `postgres` feature.
                #[allow(irrefutable_let_patterns)]
                if let WriteKv::Redb(t) = &w.tx {
                    t.close()?;
                }
                r
            };
            tx.commit()?;
            Ok(r)
        })
    }

    /// [`Store::write`] on a server: attempts until one commits, up to the busy timeout.
    #[cfg(feature = "postgres")]
    fn write_server<R>(
        &self,
        pg: &Arc<PgEngine>,
        mut f: impl FnMut(&mut WriteTxn<'_>) -> Result<R>,
    ) -> Result<R> {
        if self.opts.read_only {
            return Err(read_only_handle());
        }
        let mut clean = false;
        pg.retrying(|| {
            let tx = match pg.begin_write(!clean) {
                Ok(t) => t,
                Err(a) => return a,
            };
            let now = now_us();
            let mut w = WriteTxn {
                tx: WriteKv::Pg(tx),
                now,
                config: None,
                _s: std::marker::PhantomData,
                asker: Asker::new(self.opts.principal.clone()),
            };
            let r = f(&mut w);
            match w.tx {
                WriteKv::Pg(tx) => {
                    let a = tx.finish(r, now);
                    clean = matches!(a, Attempt::Again(crate::storage::pg::Fault::Injected));
                    a
                }
                WriteKv::Redb(_) => Attempt::Done(Err(Error::Storage(
                    "a server transaction became a file transaction".into(),
                ))),
            }
        })
    }

    fn begin_write(&self, db: &Database) -> Result<WriteTransaction> {
        let start = Instant::now();
        let mut pause = Duration::from_micros(200);
        loop {
            match db.try_begin_write() {
                Ok(tx) => return Ok(tx),
                Err(TransactionError::WouldBlock) => {
                    let waited = start.elapsed();
                    if waited >= self.opts.busy_timeout {
                        return Err(Error::Busy { waited });
                    }
                    std::thread::sleep(pause.min(self.opts.busy_timeout - waited));
                    pause = (pause * 2).min(Duration::from_millis(20));
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Runs `f` over one consistent snapshot. Keep it short: a read transaction pins pages.
    pub fn read<R>(&self, f: impl FnOnce(&ReadTxn) -> Result<R>) -> Result<R> {
        let engine = match &self.backend {
            Backend::File(e) => e,
            #[cfg(feature = "postgres")]
            Backend::Server(pg) => {
                let r = ReadTxn {
                    tx: ReadKv::Pg(pg.begin_read()?),
                    asker: Asker::new(self.opts.principal.clone()),
                };
                let out = f(&r);
                if let ReadKv::Pg(t) = r.tx {
                    t.end_read();
                }
                return out;
            }
        };
        engine.guard("reading", |db| {
            let r = ReadTxn {
                tx: ReadKv::Redb(RedbRead::new(db.begin_read()?)),
                asker: Asker::new(self.opts.principal.clone()),
            };
            f(&r)
        })
    }

    /// Closes the store, reporting what dropping it cannot: redb writes its allocator state
    /// when the last handle closes, which fails with [`Error::Corrupt`] on a damaged file (or an
    /// I/O error). Closing a handle while others to the same database remain open only drops it.
    pub fn close(self) -> Result<()> {
        match self.backend {
            Backend::File(engine) => match Arc::try_unwrap(engine) {
                Ok(mut engine) => engine.close(),
                Err(_) => Ok(()),
            },
            // The connections close when the last handle goes.
            #[cfg(feature = "postgres")]
            Backend::Server(_) => Ok(()),
        }
    }

    /// Runs redb's own integrity check (every page checksum, the allocator state). Returns
    /// `Ok(true)` when the file was intact, `Ok(false)` when redb repaired it. On a read-only
    /// handle it checks every page checksum of the tables and repairs nothing (damage is
    /// [`Error::Corrupt`]).
    ///
    /// A server store has no pages of ours to check (the server checksums its own): `Ok(true)`.
    pub fn check_engine_integrity(&mut self) -> Result<bool> {
        let engine = match &mut self.backend {
            Backend::File(e) => e,
            #[cfg(feature = "postgres")]
            Backend::Server(_) => return Ok(true),
        };
        let engine = Arc::get_mut(engine).ok_or_else(|| {
            Error::invalid(
                "store",
                "the integrity check needs the only handle to the store",
            )
        })?;
        if self.opts.read_only {
            // A read-only handle checks every page checksum of the snapshot and repairs nothing.
            let intact = self.read(|r| Ok(r.tx.redb()?.raw().verify_checksums()?))?;
            if !intact {
                return Err(crate::error::damaged_file(
                    "a page does not match its checksum".into(),
                ));
            }
            return Ok(true);
        }
        engine.guard_mut("checking the file", |db| Ok(db.check_integrity()?))
    }

    /// Compacts the file (offline: needs no other handle open in this process).
    /// On a server store this does nothing: the server reclaims space itself (autovacuum).
    pub fn compact(&mut self) -> Result<()> {
        let engine = match &mut self.backend {
            Backend::File(e) => e,
            #[cfg(feature = "postgres")]
            Backend::Server(_) => return Ok(()),
        };
        let engine = Arc::get_mut(engine).ok_or_else(|| {
            Error::invalid("store", "compaction needs the only handle to the store")
        })?;
        engine.guard_mut("compacting the file", |db| {
            while db.compact()? {}
            Ok(())
        })
    }

    /// Stores a setting (see [`crate::CONFIG_NAMES`]).
    pub fn set_config(&self, name: &str, value: &str) -> Result<u64> {
        let v = validate_config(name, value)?;
        self.write(|tx| {
            tx.require_admin("change settings")?;
            tables::CONFIG.put(&mut tx.tx, name, &encode(&v)?)?;
            Ok(v)
        })
    }

    /// The store's settings.
    pub fn config(&self) -> Result<Config> {
        self.read(|r| r.config())
    }
}

/// Opens the file, waiting at most `busy_timeout`: in multi-writer mode redb's open waits for a
/// writer in another process to finish, so the open runs on a helper thread and the caller stops
/// waiting after the timeout (the thread then closes the handle it gets).
fn open_bounded(opts: &Options, path: &Path) -> Result<Db> {
    let (tx, rx) = std::sync::mpsc::channel();
    let o = opts.clone();
    let p = path.to_path_buf();
    let start = Instant::now();
    std::thread::Builder::new()
        .name("engram-open".into())
        .spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                retry_busy(&o, || open_db(&o, &p))
            }));
            let _ = tx.send(r.unwrap_or_else(|panic| Err(engine_panic("opening the file", panic))));
        })?;
    match rx.recv_timeout(opts.busy_timeout) {
        Ok(r) => r,
        Err(std::sync::mpsc::RecvTimeoutError::Timeout) => Err(Error::Busy {
            waited: start.elapsed(),
        }),
        Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => Err(crate::error::damaged_file(
            "the storage engine stopped while opening the file".into(),
        )),
    }
}

/// Checks a store's `meta.format` value: a newer format than this build's is refused.
fn check_format_value(v: &[u8]) -> Result<u32> {
    let format: u32 = decode("meta", &"format", v)?;
    if format > STORE_FORMAT {
        return Err(Error::Unsupported(format!(
            "store format {format} is newer than this engram (format {STORE_FORMAT}); upgrade engram"
        )));
    }
    Ok(format)
}

/// A panic inside the storage engine, which redb may raise on a damaged file, as a typed error.
pub(crate) fn engine_panic(during: &str, panic: Box<dyn std::any::Any + Send>) -> Error {
    let msg = panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into());
    crate::error::damaged_file(format!("the storage engine failed while {during} ({msg})"))
}

/// One open of the file, read-write or read-only as the options say.
fn open_db(opts: &Options, path: &Path) -> Result<Db, redb::DatabaseError> {
    if opts.read_only {
        builder(opts).open_read_only(path).map(Db::ReadOnly)
    } else {
        builder(opts).open(path).map(Db::ReadWrite)
    }
}

fn retry_busy(
    opts: &Options,
    mut f: impl FnMut() -> Result<Db, redb::DatabaseError>,
) -> Result<Db> {
    let start = Instant::now();
    loop {
        match f() {
            Ok(db) => return Ok(db),
            Err(redb::DatabaseError::DatabaseAlreadyOpen) => {
                let waited = start.elapsed();
                if waited >= opts.busy_timeout {
                    return Err(Error::Busy { waited });
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            // A read-only open of a file that a crashed writer left to recover.
            Err(redb::DatabaseError::RepairAborted) if opts.read_only => {
                return Err(Error::ReadOnly(
                    "a crash left it to be recovered by a writer".into(),
                ))
            }
            Err(e) => return Err(e.into()),
        }
    }
}

impl Store {
    /// Runs `op` in a write transaction shared with other threads writing at the same moment
    /// (group commit: the queue of `storage/group.rs`). The result is as if each operation ran in its
    /// own transaction, one after the other; each returns once its write is durable. `op` may
    /// run more than once (when another operation of its batch fails), so it must own its
    /// inputs and have no side effects outside the transaction.
    pub fn write_grouped<R: Send + 'static>(
        &self,
        op: impl Fn(&mut WriteTxn<'_>) -> Result<R> + Send + Sync + 'static,
    ) -> Result<R> {
        let op: Op = Arc::new(move |tx| op(tx).map(|r| Box::new(r) as Box<dyn Any + Send>));
        let r = self
            .group()
            .submit(self.opts.principal.clone(), op, |batch| {
                self.commit_batch(batch)
            })?;
        r.downcast::<R>()
            .map(|b| *b)
            .map_err(|_| Error::Storage("group commit returned the wrong type".into()))
    }

    /// Runs a batch in one transaction; on an operation's failure, rolls back and retries
    /// without it.
    fn commit_batch(&self, mut batch: Vec<Job>) -> Vec<(u64, Result<Box<dyn Any + Send>>)> {
        let mut out = Vec::with_capacity(batch.len());
        while !batch.is_empty() {
            let mut failed: Option<(usize, Error)> = None;
            let mut oks: Vec<Box<dyn Any + Send>> = Vec::with_capacity(batch.len());
            let r = self.write(|tx| {
                // A server may run this again: each attempt starts afresh.
                oks.clear();
                failed = None;
                for (i, job) in batch.iter().enumerate() {
                    tx.asker.set_principal(job.principal.clone());
                    match (job.op)(tx) {
                        Ok(v) => oks.push(v),
                        Err(e) => {
                            failed = Some((i, e));
                            return Err(Error::Conflict("batch rolled back".into()));
                        }
                    }
                }
                Ok(())
            });
            match (r, failed) {
                (Ok(()), _) => {
                    out.extend(batch.drain(..).map(|j| j.id).zip(oks.into_iter().map(Ok)));
                }
                (Err(_), Some((i, e))) => {
                    // Report the failing operation, then run the rest again without it.
                    if i < batch.len() {
                        let job = batch.remove(i);
                        out.push((job.id, Err(e)));
                    }
                }
                (Err(e), None) => {
                    // The transaction itself failed (busy, I/O): every operation gets the error,
                    // the last one the original.
                    let mut jobs: Vec<u64> = batch.drain(..).map(|j| j.id).collect();
                    let last = jobs.pop();
                    out.extend(jobs.into_iter().map(|id| (id, Err(copy_error(&e)))));
                    if let Some(id) = last {
                        out.push((id, Err(e)));
                    }
                }
            }
        }
        out
    }
}
