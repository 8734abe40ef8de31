//! Opening or creating a store file: a new file is built under a temporary name and linked into
//! place whole; a read-write open first recovers a torn tail ([`crate::storage::redb::tail`]);
//! a read-only open gets one read-write open first when the file needs a writer; the format is
//! checked and missing tables are added.

use std::fs::OpenOptions;
use std::path::{Path, PathBuf};

use redb::TableError;

use crate::domain::text::now_us;
use crate::error::{Error, Result};
use crate::storage::engine::{check_format_value, initialize, upgrade, write, Engine, Opened};
use crate::storage::options::Options;
use crate::storage::redb::file::{
    builder, claim_empty, engine_panic, exists, make_parent, may_not_write, open_bounded, Db,
};
use crate::storage::redb::journal;
use crate::storage::redb::journal_file::{self, Journal};
use crate::storage::redb::schema::{self, META, STORE_FORMAT};
use crate::storage::redb::tail::{self, TailRepair};
use crate::storage::tables::{
    CHECKPOINT_TABLES, CHUNK_FORMAT, EMBED_FORMAT, INDEX_FORMAT, SEARCH_TABLES,
};

use super::RedbEngine;

/// Opens the file at `path`; with `create`, builds it first when there is none.
pub(super) fn open(path: &Path, opts: &Options, create: bool) -> Result<Opened<RedbEngine>> {
    if create && !exists(path) {
        let made = make_file(path, opts)?;
        let mut opened = open(path, opts, false)?;
        opened.created = made;
        return Ok(opened);
    }
    if !exists(path) {
        return Err(Error::NotFound {
            path: path.to_path_buf(),
        });
    }
    if opts.read_only {
        open_reader(path, opts)
    } else {
        open_writer(path, opts)
    }
}

/// Opens (creating it if empty) a store on a custom redb storage backend, with its commit
/// journal on `journal` if given (see [`crate::Store::with_backend`] and
/// [`crate::Store::with_backends`]); `name` only labels it in messages.
pub(crate) fn with_backend(
    backend: impl redb::StorageBackend,
    journal: Option<Box<dyn redb::StorageBackend>>,
    name: &str,
    opts: &Options,
) -> Result<Opened<RedbEngine>> {
    let db = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        builder(opts).create_with_backend(backend)
    })) {
        Ok(r) => r?,
        Err(p) => return Err(engine_panic("opening the file", p)),
    };
    let mut engine = RedbEngine::new(Db::ReadWrite(db), opts);
    let jpath = journal::path_of(Path::new(name));
    let fresh = engine.read_file(|r| match r.raw().open_table(META) {
        Ok(_) => Ok(false),
        Err(TableError::TableDoesNotExist(_)) => Ok(true),
        Err(e) => Err(e.into()),
    })?;
    let format = if fresh {
        initialize(&engine, opts.principal.as_deref())?;
        STORE_FORMAT
    } else {
        if let Some(j) = &journal {
            engine.replay(Some(j.as_ref()), &jpath)?;
        }
        check_format(&engine, Path::new(name), opts)?
    };
    if let Some(j) = journal.filter(|_| opts.journal && (opts.exclusive || opts.shared_journal)) {
        engine.start_journal(|epoch| Journal::on(j, &jpath, opts.journal_bytes, epoch))?;
    }
    Ok(Opened {
        engine,
        shown: PathBuf::from(name),
        created: false,
        repaired: None,
        insecure: None,
        format,
    })
}

/// Builds a new store file at `path`; false when another process made it first.
fn make_file(path: &Path, opts: &Options) -> Result<bool> {
    make_parent(path)?;
    // The store is built under a temporary name beside its path and linked into place only
    // once it is complete, so a crash during `init` never leaves a half-made store at the
    // path (which nothing could open).
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "store".into());
    let tmp = path.with_file_name(format!(".{name}.init-{}-{}", std::process::id(), now_us()));
    let built = build(&tmp, path, opts);
    let _ = std::fs::remove_file(&tmp);
    let made = built?;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
    }
    Ok(made)
}

/// Builds and initializes a store at `tmp`, then links it to `path`; false when another
/// process made `path` first.
fn build(tmp: &Path, path: &Path, opts: &Options) -> Result<bool> {
    let mut o = OpenOptions::new();
    o.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        o.mode(0o600);
    }
    o.open(tmp)?;
    let db = builder(opts).create(tmp)?;
    let engine = RedbEngine::new(Db::ReadWrite(db), opts);
    initialize(&engine, opts.principal.as_deref())?;
    drop(engine);
    // Through a writable handle: Windows' FlushFileBuffers refuses a read-only one.
    std::fs::OpenOptions::new()
        .write(true)
        .open(tmp)?
        .sync_all()?;
    match std::fs::hard_link(tmp, path) {
        Ok(()) => Ok(true),
        // An empty file at the path (`touch`, a failed copy) holds no store: take its place.
        // Another process created the store first: use theirs.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => claim_empty(tmp, path),
        Err(e) => Err(e.into()),
    }
}

/// A read-write open, which first recovers a torn tail (see [`crate::Store::repaired_tail`]).
fn open_writer(path: &Path, opts: &Options) -> Result<Opened<RedbEngine>> {
    let lengths = tail::repair_lengths(path)?;
    if lengths.is_empty() {
        return open_file(path, opts, None);
    }
    let mut first_error = None;
    for len in lengths {
        let repair = tail::cut(path, len).map_err(|e| may_not_write(path, e))?;
        // A repair is kept only if every page of the recovered store matches its checksum:
        // a cut that took live bytes must stay an error, never become wrong answers.
        match open_file(path, opts, Some(repair.clone())) {
            Ok(opened) => return Ok(opened),
            Err(e) => {
                tail::undo(path, &repair)?;
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => open_file(path, opts, None),
    }
}

/// A read-only open. What needs a writer first (a crash to recover, a torn tail, tables
/// to add) gets one read-write open, when the user may write the file.
fn open_reader(path: &Path, opts: &Options) -> Result<Opened<RedbEngine>> {
    let torn = !tail::repair_lengths(path)?.is_empty();
    let why = if torn {
        "it has a torn tail (stray bytes past its last page) to move aside".to_string()
    } else {
        match open_file(path, opts, None) {
            Err(Error::ReadOnly(why)) => why,
            other => return other,
        }
    };
    let mut writer = open_writer(path, &opts.clone().read_only(false)).map_err(|e| match e {
        Error::ReadOnly(_) => Error::ReadOnly(format!(
            "{} needs one open by a user who may write it, because {why}: run `somna verify` as such a user",
            path.display()
        )),
        e => e,
    })?;
    writer.engine.close()?;
    let mut opened = open_file(path, opts, None)?;
    opened.repaired = writer.repaired;
    Ok(opened)
}

/// One open of the file; `repaired` is what [`open_writer`] cut off first, if anything.
fn open_file(
    path: &Path,
    opts: &Options,
    mut repaired: Option<TailRepair>,
) -> Result<Opened<RedbEngine>> {
    let (db, fell_back) = open_bounded(opts, path).map_err(|e| may_not_write(path, e))?;
    if let Some(r) = &mut repaired {
        r.dropped_newest_commit = fell_back;
    }
    let mut engine = RedbEngine::new(db, opts);
    if let Some(r) = &repaired {
        // A repair is kept only if every page of the recovered store matches its checksum:
        // a cut that took live bytes must stay an error, never become wrong answers.
        let intact = engine.read_file(|t| Ok(t.raw().verify_checksums()?))?;
        if !intact {
            return Err(crate::error::damaged_file(format!(
                "its end was cut inside a page that holds data ({} bytes, {} expected)",
                r.old_len, r.new_len
            )));
        }
    }
    engine.replay(
        journal_file::open_existing(path)?.as_deref(),
        &journal::path_of(path),
    )?;
    let format = check_format(&engine, path, opts).map_err(|e| match &repaired {
        // What the repair dropped the newest commit for may not be a store at all (a commit
        // from before the store was made): damage, not a file of another kind
        Some(r) if r.dropped_newest_commit => crate::error::damaged_file(format!(
            "its end was cut, and its newest commit, whose checksums then failed, was dropped for one that is not a whole somna store ({e})"
        )),
        _ => e,
    })?;
    if opts.journal && (opts.exclusive || opts.shared_journal) && !opts.read_only {
        engine.start_journal(|epoch| Journal::open(path, opts.journal_bytes, epoch))?;
    }
    Ok(Opened {
        engine,
        shown: path.to_path_buf(),
        created: false,
        repaired,
        insecure: None,
        format,
    })
}

/// Checks the format of an open file, adds the tables of a newer somna it lacks, and upgrades
/// a store of an older format (sections 12.5 and 13.4 of docs/design.md); returns the format
/// it had.
fn check_format(engine: &RedbEngine, path: &Path, opts: &Options) -> Result<u32> {
    let (missing, format) = engine.guard("reading the store header", |db| read_format(db, path))?;
    // A read-only handle reads a store of an older format as it is (a format-1 store without
    // the search tables, which only search needs; a format-2 store without the session chunks,
    // its sessions read from the format-2 tables; neither with LangGraph's tables, which only
    // its verbs need); its next read-write open adds them and upgrades the store.
    let only_index = missing.iter().all(|t| {
        CHECKPOINT_TABLES.contains(t)
            || (format < INDEX_FORMAT && SEARCH_TABLES.contains(t))
            || (format < CHUNK_FORMAT && *t == "session_chunks")
            || (format < EMBED_FORMAT && *t == "embeddings")
    });
    let readable_as_is = missing.is_empty() || (opts.read_only && only_index);
    if !readable_as_is {
        if opts.read_only {
            return Err(Error::ReadOnly(
                "it lacks tables that this somna adds on its first read-write open".into(),
            ));
        }
        write(engine, opts.principal.as_deref(), |tx| tx.ensure_tables())?;
    }
    upgrade(engine, opts, format)
}

/// Checks the format number; returns the tables of this somna that the file lacks, and the
/// format.
fn read_format(db: &Db, path: &Path) -> Result<(Vec<&'static str>, u32)> {
    let rtx = db.begin_read()?;
    let meta = match rtx.open_table(META) {
        Ok(t) => t,
        Err(TableError::TableDoesNotExist(_)) => {
            // Other somna tables without `meta`: a damaged table directory, not a
            // foreign file.
            let ours = rtx
                .list_tables()?
                .filter(|t| schema::TABLE_NAMES.contains(&redb::TableHandle::name(t)))
                .count();
            if ours > 0 {
                return Err(crate::error::damaged_file(format!(
                    "the table directory is damaged (table meta is missing, {ours} other somna tables are present)"
                )));
            }
            return Err(Error::Unsupported(format!(
                "{} is a redb file but not a somna store",
                path.display()
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
            "{} is a redb file but not a somna store",
            path.display()
        )));
    };
    let format = check_format_value(v.value())?;
    drop(v);
    drop(meta);
    let have: Vec<String> = rtx
        .list_tables()?
        .map(|t| redb::TableHandle::name(&t).to_string())
        .collect();
    // A table name this somna does not know means a damaged table directory (or a newer
    // somna's table): then nothing is created, and a read of a missing table reports it.
    let missing = if have
        .iter()
        .any(|h| !schema::TABLE_NAMES.contains(&h.as_str()))
    {
        Vec::new()
    } else {
        schema::TABLE_NAMES
            .iter()
            .copied()
            .filter(|n| !have.iter().any(|h| h == n))
            .collect()
    };
    Ok((missing, format))
}
