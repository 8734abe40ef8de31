//! The read audit (opt-in per store with `config AUDIT=1`): each read through the [`Store`]
//! (wake, zoom, recall, export, show, why, session reads) records who read which scope and which
//! memories and blocks it returned, in the `audit` table. `audit` lists the records (admin only).

use std::ops::ControlFlow;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::storage::codec::{decode, encode};
use crate::storage::kv::Dir;
use crate::storage::store::Store;
use crate::storage::tables::AUDIT;
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
                let next = AUDIT
                    .edge(&tx.tx, .., Dir::Reverse, |k, _| Ok(k + 1))?
                    .unwrap_or(0);
                let e = AuditEntry {
                    who,
                    at_us: tx.now_us(),
                    op: op.to_string(),
                    scope: scope.to_string(),
                    items: items.clone(),
                };
                AUDIT.put(&mut tx.tx, next, &encode(&e)?)
            })?;
        }
        Ok(r)
    }

    /// The newest `limit` audit records, oldest first (admin only).
    pub fn audit(&self, limit: usize) -> Result<Vec<AuditEntry>> {
        self.read(|r| {
            r.require_admin("read the audit")?;
            let mut out = Vec::new();
            AUDIT.scan(&r.tx, .., Dir::Reverse, |k, v| {
                if out.len() >= limit {
                    return Ok(ControlFlow::Break(()));
                }
                out.push(decode("audit", &k, v)?);
                Ok(ControlFlow::Continue(()))
            })?;
            out.reverse();
            Ok(out)
        })
    }
}
