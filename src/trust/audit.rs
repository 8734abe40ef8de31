//! The read audit (opt-in per store with `config AUDIT=1`): each read through the [`Store`]
//! (wake, zoom, recall, export, show, why, session reads) records who read which scope and which
//! memories and blocks it returned, in the `audit` table. `audit` lists the records (admin only).

use redb::ReadableTable;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::storage::codec::{decode, encode};
use crate::storage::schema::AUDIT;
use crate::storage::store::Store;
use crate::storage::txn::ReadTxn;

/// One audited read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditEntry {
    /// Who read.
    pub who: String,
    /// When (microseconds since the epoch, UTC).
    pub at_us: i64,
    /// Which read (`wake`, `zoom`, `recall`, ...).
    pub op: String,
    /// Which scope (or `session:<id>`).
    pub scope: String,
    /// What it returned: memory ids (`#3`) and blocks (`0-7`).
    pub items: Vec<String>,
}

impl Store {
    /// Runs a read and, when the audit is on, records who read what in the same store.
    pub(crate) fn audited<R>(
        &self,
        op: &str,
        scope: &str,
        f: impl FnOnce(&ReadTxn) -> Result<R>,
        items: impl FnOnce(&R) -> Vec<String>,
    ) -> Result<R> {
        let (r, on) = self.read(|t| Ok((f(t)?, t.config()?.audit)))?;
        if on {
            if self.is_read_only() {
                return Err(Error::ReadOnly(format!(
                    "the read audit is on (AUDIT=1), so this read must record who read what, but {} is open read-only; read it as a user who may write it, or turn the audit off with `engram config AUDIT=0`",
                    self.path().display()
                )));
            }
            let items = items(&r);
            self.write(|tx| {
                let who = tx.who()?;
                let mut t = tx.tx.open_table(AUDIT)?;
                let next = match t.last()? {
                    Some((k, _)) => k.value() + 1,
                    None => 0,
                };
                let e = AuditEntry {
                    who,
                    at_us: tx.now_us(),
                    op: op.to_string(),
                    scope: scope.to_string(),
                    items,
                };
                t.insert(next, encode(&e)?.as_slice())?;
                Ok(())
            })?;
        }
        Ok(r)
    }

    /// The newest `limit` audit records, oldest first (admin only).
    pub fn audit(&self, limit: usize) -> Result<Vec<AuditEntry>> {
        self.read(|r| {
            r.require_admin("read the audit")?;
            let mut out = Vec::new();
            for item in r.open(AUDIT)?.iter()?.rev().take(limit) {
                let (k, v) = item?;
                out.push(decode("audit", &k.value(), v.value())?);
            }
            out.reverse();
            Ok(out)
        })
    }
}
