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
use crate::storage::txn::{ReadTxn, WriteTxn};

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
        f: impl FnMut(&ReadTxn) -> Result<R>,
        items: impl FnOnce(&R) -> Vec<String>,
    ) -> Result<R> {
        self.audited_as(op, f, |r| (scope.to_string(), items(r)))
    }

    /// [`Store::audited`] for a read whose scopes are known only from its result (`scoped`
    /// gives the scope to record and the items).
    pub(crate) fn audited_as<R>(
        &self,
        op: &str,
        mut f: impl FnMut(&ReadTxn) -> Result<R>,
        scoped: impl FnOnce(&R) -> (String, Vec<String>),
    ) -> Result<R> {
        let (r, on) = self.read(|t| Ok((f(t)?, t.audit_on()?)))?;
        if on {
            if self.is_read_only() {
                return Err(Error::ReadOnly(format!(
                    "the read audit is on (AUDIT=1), so this read must record who read what, but {} is open read-only; read it as a user who may write it, or turn the audit off with `somna config AUDIT=0`",
                    self.path().display()
                )));
            }
            let (scope, items) = scoped(&r);
            self.write(|tx| tx.record_read(op, &scope, items.clone()))?;
        }
        Ok(r)
    }

    /// The newest `limit` audit records, oldest first (admin only).
    pub fn audit(&self, limit: usize) -> Result<Vec<AuditEntry>> {
        self.read(|r| {
            r.require_admin("read the audit")?;
            let mut out = Vec::new();
            AUDIT.scan(r.tx, .., Dir::Reverse, |k, v| {
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

impl WriteTxn<'_> {
    /// Records in the read audit that this transaction's principal read `items` of `scope`
    /// through `op`. The caller checks that the audit is on.
    pub(crate) fn record_read(&mut self, op: &str, scope: &str, items: Vec<String>) -> Result<()> {
        let who = self.who()?;
        // Keyed by time, not by "last + 1": concurrent audited reads on a server must not all
        // rewrite one tail key (docs/design.md, audit).
        let mut next = audit_key(self.now_us());
        while AUDIT.contains(&*self.tx, next)? {
            next = next.wrapping_add(1);
        }
        let e = AuditEntry {
            who,
            at_us: self.now_us(),
            op: op.to_string(),
            scope: scope.to_string(),
            items,
        };
        AUDIT.put(&mut *self.tx, next, &encode(&e)?)
    }
}

/// An audit key: the time in microseconds times 4,096, plus 12 bits that differ between
/// processes and calls, so that concurrent readers rarely meet on one key (a taken key is
/// probed past). Keys of older stores (0, 1, 2, ...) sort before every such key.
fn audit_key(now_us: i64) -> u64 {
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let seed = (u128::from(std::process::id()) << 64 | u128::from(n)).to_le_bytes();
    let spread = xxhash_rust::xxh3::xxh3_64(&seed) & 0xfff;
    u64::try_from(now_us).unwrap_or(0).saturating_mul(4096) | spread
}
