//! The storage layer's part of `verify` ([`crate::Store::verify`]): the store's own rows. The
//! format mark and the scope-id counter in `meta`, every setting in `config`, and every scope's
//! bookkeeping in `scopes` must decode, and no two scopes may share an id. The scopes found are
//! handed to the layers above, whose rows they own.

use std::collections::BTreeMap;

use crate::domain::record::ScopeMeta;
use crate::error::{Error, Result};
use crate::storage::codec::decode;
use crate::storage::tables::{CONFIG, META, SCOPES};
use crate::storage::txn::ReadTxn;

/// The scopes `verify` found, by id: each one's name and bookkeeping.
pub(crate) type Scopes = BTreeMap<u32, (String, ScopeMeta)>;

/// Checks `meta`, `config` and `scopes`, reporting each problem to `problem`, and returns the
/// scopes that decoded.
pub(crate) fn verify_rows(r: &ReadTxn, problem: &mut dyn FnMut(String)) -> Result<Scopes> {
    let kv = &r.tx;
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
