//! Transactions: [`ReadTxn`] (one consistent snapshot) and [`WriteTxn`] (one atomic, durable
//! change), with what every transaction needs: the settings, scopes and their counters, and who
//! is asking and what their grants allow. The log, the tree, wake, sessions and the importers add
//! their operations to these types in their own files.

use serde::Serialize;

use crate::domain::record::ScopeMeta;
use crate::domain::text::validate_scope;
use crate::error::{Error, Result};
use crate::storage::access::{Access, Asker};
use crate::storage::codec::{decode, encode};
use crate::storage::config::{read_audit, read_config, Config};
use crate::storage::kv::{KvRead, KvWrite};
use crate::storage::tables::{META, SCOPES};

/// The scope's metadata if it holds memory `id`; otherwise [`Error::OutOfRange`] with the
/// scope's count (0 for a scope that does not exist).
pub(crate) fn holding(meta: Option<ScopeMeta>, id: u64) -> Result<ScopeMeta> {
    let count = meta.as_ref().map_or(0, |m| m.count);
    meta.filter(|m| id < m.count)
        .ok_or_else(|| Error::OutOfRange {
            asked: format!("#{id}"),
            count,
        })
}

// Also a scope's line of `stats` in the CLI and over MCP (the `schemars` feature); its fields
// in the order that JSON has always had (sorted).
/// Counters of one scope, for `stats`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct ScopeStats {
    /// Number of memories.
    pub memories: u64,
    /// Number of blocks waiting for a summary.
    pub pending: u64,
    /// The scope's name.
    pub scope: String,
    /// Number of summaries.
    pub summaries: u64,
}

/// A write transaction. Every change somna makes goes through one; see [`crate::Store::write`].
pub struct WriteTxn<'s> {
    /// The engine's transaction, lent for the caller's closure (the engine commits it after).
    pub(crate) tx: &'s mut dyn KvWrite,
    /// The commit's timestamp (microseconds), shared by everything it records.
    pub(crate) now: i64,
    pub(crate) config: Option<Config>,
    /// Who is asking, and the grants in force.
    pub(crate) asker: Asker,
}

/// A read-only snapshot. See [`crate::Store::read`].
pub struct ReadTxn<'s> {
    /// The engine's snapshot, lent for the caller's closure.
    pub(crate) tx: &'s dyn KvRead,
    /// Who is asking, and the grants in force.
    pub(crate) asker: Asker,
}

pub(crate) fn read_scope(kv: &(impl KvRead + ?Sized), name: &str) -> Result<Option<ScopeMeta>> {
    match SCOPES.get(kv, name)? {
        Some(v) => Ok(Some(decode("scopes", &name, &v)?)),
        None => Ok(None),
    }
}

pub(crate) fn list_scopes(kv: &(impl KvRead + ?Sized)) -> Result<Vec<(String, ScopeMeta)>> {
    let mut out = Vec::new();
    SCOPES.each(kv, .., |name, v| {
        let meta: ScopeMeta = decode("scopes", &name, v)?;
        out.push((name.to_string(), meta));
        Ok(())
    })?;
    Ok(out)
}

impl ReadTxn<'_> {
    /// The store's settings.
    pub fn config(&self) -> Result<Config> {
        read_config(self.tx)
    }

    /// Whether the read audit is on ([`Config::audit`], read alone).
    pub(crate) fn audit_on(&self) -> Result<bool> {
        read_audit(self.tx)
    }

    /// The scope's bookkeeping, after checking that the principal may read it.
    pub(crate) fn scope_meta(&self, scope: &str) -> Result<Option<ScopeMeta>> {
        self.require(crate::storage::access::Access::Read, scope)?;
        read_scope(self.tx, scope)
    }

    /// Names of the scopes the principal may read, sorted.
    pub fn scopes(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for (n, _) in list_scopes(self.tx)? {
            if self.may(crate::storage::access::Access::Read, &n)? {
                out.push(n);
            }
        }
        Ok(out)
    }

    /// Number of memories in `scope` (0 for a scope that does not exist).
    pub fn count(&self, scope: &str) -> Result<u64> {
        Ok(self.scope_meta(scope)?.map(|m| m.count).unwrap_or(0))
    }

    /// Counters of every scope.
    pub fn stats(&self) -> Result<Vec<ScopeStats>> {
        let mut out = Vec::new();
        for (scope, m) in list_scopes(self.tx)? {
            if self.may(crate::storage::access::Access::Read, &scope)? {
                out.push(ScopeStats {
                    scope,
                    memories: m.count,
                    summaries: m.summaries,
                    pending: m.pending,
                });
            }
        }
        Ok(out)
    }
}

impl WriteTxn<'_> {
    /// Creates every table the file lacks (a store made by an older somna).
    pub(crate) fn ensure_tables(&mut self) -> Result<()> {
        self.tx.ensure_tables()
    }

    /// The commit's timestamp in microseconds.
    pub fn now_us(&self) -> i64 {
        self.now
    }

    /// The store's settings (read once per transaction).
    pub fn config(&mut self) -> Result<Config> {
        if let Some(c) = self.config {
            return Ok(c);
        }
        let c = read_config(&*self.tx)?;
        self.config = Some(c);
        Ok(c)
    }

    /// The scope's bookkeeping, after checking that the principal may write it.
    pub(crate) fn scope_meta(&self, scope: &str) -> Result<Option<ScopeMeta>> {
        self.require(crate::storage::access::Access::Write, scope)?;
        read_scope(&*self.tx, scope)
    }

    /// The scope's bookkeeping, creating the scope if it does not exist yet.
    /// Read for update: appends to one scope queue on its row on a server (instead of all but
    /// one failing at commit and running again).
    pub(crate) fn scope_or_create(&mut self, scope: &str) -> Result<ScopeMeta> {
        validate_scope(scope)?;
        self.require(crate::storage::access::Access::Write, scope)?;
        if let Some(v) = SCOPES.get_for_update(&mut *self.tx, scope)? {
            return decode("scopes", &scope, &v);
        }
        let next: u32 = match META.get_for_update(&mut *self.tx, "next_scope_id")? {
            Some(v) => decode("meta", &"next_scope_id", &v)?,
            None => 0,
        };
        let after = next
            .checked_add(1)
            .ok_or_else(|| Error::invalid("scope", "too many scopes"))?;
        META.put(&mut *self.tx, "next_scope_id", &encode(&after)?)?;
        let m = ScopeMeta {
            id: next,
            created_us: self.now,
            count: 0,
            summaries: 0,
            pending: 0,
        };
        self.put_scope(scope, &m)?;
        Ok(m)
    }

    pub(crate) fn put_scope(&mut self, scope: &str, m: &ScopeMeta) -> Result<()> {
        SCOPES.put(&mut *self.tx, scope, &encode(m)?)
    }

    /// Number of memories in `scope`, as of this transaction.
    pub fn count(&self, scope: &str) -> Result<u64> {
        Ok(self.scope_meta(scope)?.map(|m| m.count).unwrap_or(0))
    }
}

impl ReadTxn<'_> {
    /// Whether this transaction's principal may `access` `scope`.
    pub fn may(&self, access: Access, scope: &str) -> Result<bool> {
        self.asker.may(self.tx, access, scope)
    }

    /// Fails with [`Error::Denied`] unless the principal may `access` `scope`.
    pub(crate) fn require(&self, access: Access, scope: &str) -> Result<()> {
        self.asker.require(self.tx, access, scope)
    }

    pub(crate) fn require_admin(&self, what: &str) -> Result<()> {
        self.asker.require_admin(self.tx, what)
    }

    /// Whether this transaction's principal is the store's admin, exactly when an admin-only
    /// call would be allowed (the MCP server lists its admin tools only then; the web
    /// inspector links its admin page).
    pub fn is_admin(&self) -> Result<bool> {
        self.asker.is_admin(self.tx)
    }
}

impl WriteTxn<'_> {
    /// Whether this transaction's principal may `access` `scope`.
    pub fn may(&self, access: Access, scope: &str) -> Result<bool> {
        self.asker.may(&*self.tx, access, scope)
    }

    /// Fails with [`Error::Denied`] unless the principal may `access` `scope`.
    pub(crate) fn require(&self, access: Access, scope: &str) -> Result<()> {
        self.asker.require(&*self.tx, access, scope)
    }

    pub(crate) fn require_admin(&self, what: &str) -> Result<()> {
        self.asker.require_admin(&*self.tx, what)
    }

    /// The principal this transaction acts as, as recorded in events.
    pub fn who(&self) -> Result<String> {
        self.asker.who(&*self.tx)
    }
}
