//! The storage layer's part of `verify` ([`crate::Store::verify`]): the store's own rows. The
//! format mark and the scope-id counter in `meta`, every setting in `config`, and every scope's
//! bookkeeping in `scopes` must decode, and no two scopes may share an id. The scopes found are
//! handed to the layers above, whose rows they own. The commit journal of a file store
//! ([`crate::storage::redb::journal`]) is checked against its applied marker in `meta`.

use std::collections::BTreeMap;
use std::path::Path;

use crate::domain::record::ScopeMeta;
use crate::error::{Error, Result};
use crate::storage::codec::decode;
use crate::storage::redb::journal::{self, MARKER_KEY};
use crate::storage::tables::{CONFIG, META, SCOPES};
use crate::storage::txn::ReadTxn;

/// The scopes `verify` found, by id: each one's name and bookkeeping.
pub(crate) type Scopes = BTreeMap<u32, (String, ScopeMeta)>;

/// Checks `meta`, `config` and `scopes`, reporting each problem to `problem`, and returns the
/// scopes that decoded.
pub(crate) fn verify_rows(r: &ReadTxn, problem: &mut dyn FnMut(String)) -> Result<Scopes> {
    let kv = r.tx;
    match crate::storage::tables::stored_format(kv) {
        Ok(Some(_)) => {}
        Ok(None) => problem("meta: the store format is missing".into()),
        Err(e @ Error::Corrupt { .. }) => problem(e.to_string()),
        Err(e) => return Err(e),
    }
    CONFIG.each(kv, .., |k, v| {
        if let Err(e) = decode::<u64>("config", &k, v) {
            problem(e.to_string());
        }
        Ok(())
    })?;
    let mut scopes = Scopes::new();
    SCOPES.each(kv, .., |k, v| {
        match decode::<ScopeMeta>("scopes", &k, v) {
            Ok(m) => {
                if let Some((other, _)) = scopes.get(&m.id) {
                    problem(format!("scopes {other:?} and {k:?} share id {}", m.id));
                }
                scopes.insert(m.id, (k.to_string(), m));
            }
            Err(e) => problem(e.to_string()),
        }
        Ok(())
    })?;
    if let Some(v) = META.get(kv, MARKER_KEY)? {
        if let Err(e) = decode::<(u64, u64)>("meta", &MARKER_KEY, &v) {
            problem(e.to_string());
        }
    }
    match META.get(kv, "next_scope_id")? {
        Some(v) => match decode::<u32>("meta", &"next_scope_id", &v) {
            Ok(next) => {
                if let Some(max) = scopes.keys().next_back() {
                    if next <= *max {
                        problem(format!(
                            "meta: next_scope_id {next} would reuse scope id {max}"
                        ));
                    }
                }
            }
            Err(e) => problem(e.to_string()),
        },
        None => problem("meta: next_scope_id is missing".into()),
    }
    Ok(scopes)
}

/// Checks the commit journal of the store file at `path`, if it has one: its header, and that
/// redb holds every record (after an open, which replays, and the checkpoint `verify` makes
/// first, no record may lie past the applied marker).
pub(crate) fn verify_journal(
    r: &ReadTxn,
    path: &Path,
    problem: &mut dyn FnMut(String),
) -> Result<()> {
    let Some(io) = crate::storage::redb::journal_file::open_existing(path)? else {
        return Ok(());
    };
    let marker = match META.get(r.tx, MARKER_KEY)? {
        Some(v) => match decode::<(u64, u64)>("meta", &MARKER_KEY, &v) {
            Ok(m) => m,
            Err(_) => return Ok(()),
        },
        None => return Ok(()),
    };
    // The shared journal's tail: where the record after the marker's would start
    let tail = match META.get(r.tx, journal::TAIL_KEY)? {
        Some(v) => match decode::<u64>("meta", &journal::TAIL_KEY, &v) {
            Ok(t) => Some(t),
            Err(e) => {
                problem(e.to_string());
                return Ok(());
            }
        },
        None => None,
    };
    let jpath = journal::path_of(path);
    if let Some(t) = tail {
        let len = io.len()?;
        if t < journal::HEADER || t > len {
            problem(format!(
                "the journal {}'s tail {t} lies outside its records ({} to {len})",
                jpath.display(),
                journal::HEADER
            ));
            return Ok(());
        }
    }
    match journal::pending(io.as_ref(), &jpath, marker, tail) {
        Ok(p) if p.is_empty() => {}
        Ok(p) => problem(format!(
            "the journal {} holds {} records past the applied marker {}.{}",
            jpath.display(),
            p.len(),
            marker.0,
            marker.1
        )),
        Err(e) => problem(e.to_string()),
    }
    Ok(())
}
