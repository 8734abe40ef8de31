//! Transactions: [`ReadTxn`] (one consistent snapshot) and [`WriteTxn`] (one atomic, durable
//! change), with what every transaction needs: the settings, scopes and their counters, and who
//! is asking and what their grants allow. The log, the tree, wake, sessions and the importers add
//! their operations to these types in their own files.

use redb::{ReadTransaction, ReadableTable, WriteTransaction};
use serde::Serialize;

use crate::domain::record::ScopeMeta;
use crate::domain::text::validate_scope;
use crate::error::{Error, Result};
use crate::storage::access::{Access, Auth};
use crate::storage::codec::{decode, encode};
use crate::storage::config::{read_config, Config};
use crate::storage::schema::{self, CONFIG, GRANTS, IDEMPOTENCY, LOG, META, PENDING, SCOPES, TREE};

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

/// Counters of one scope, for `stats`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ScopeStats {
    /// The scope's name.
    pub scope: String,
    /// Number of memories.
    pub memories: u64,
    /// Number of summaries.
    pub summaries: u64,
    /// Number of blocks waiting for a summary.
    pub pending: u64,
}

/// A write transaction. Every change engram makes goes through one; see [`Store::write`].
pub struct WriteTxn<'s> {
    pub(crate) tx: WriteTransaction,
    /// The commit's timestamp (microseconds), shared by everything it records.
    pub(crate) now: i64,
    pub(crate) config: Option<Config>,
    pub(crate) _s: std::marker::PhantomData<&'s ()>,
    pub(crate) principal: Option<String>,
    pub(crate) auth: std::cell::OnceCell<crate::storage::access::Auth>,
}

/// A read-only snapshot. See [`Store::read`].
pub struct ReadTxn {
    pub(crate) tx: ReadTransaction,
    pub(crate) principal: Option<String>,
    pub(crate) auth: std::cell::OnceCell<crate::storage::access::Auth>,
}

pub(crate) fn read_scope<T: ReadableTable<&'static str, &'static [u8]>>(
    t: &T,
    name: &str,
) -> Result<Option<ScopeMeta>> {
    match t.get(name)? {
        Some(v) => Ok(Some(decode("scopes", &name, v.value())?)),
        None => Ok(None),
    }
}

pub(crate) fn list_scopes<T: ReadableTable<&'static str, &'static [u8]>>(
    t: &T,
) -> Result<Vec<(String, ScopeMeta)>> {
    let mut out = Vec::new();
    for item in t.iter()? {
        let (k, v) = item?;
        let name = k.value().to_string();
        let meta: ScopeMeta = decode("scopes", &name, v.value())?;
        out.push((name, meta));
    }
    Ok(out)
}

impl ReadTxn {
    pub(crate) fn open<K: redb::Key + 'static, V: redb::Value + 'static>(
        &self,
        def: redb::TableDefinition<K, V>,
    ) -> Result<redb::ReadOnlyTable<K, V>> {
        Ok(self.tx.open_table(def)?)
    }

    /// The store's settings.
    pub fn config(&self) -> Result<Config> {
        read_config(&self.open(CONFIG)?)
    }

    /// The scope's bookkeeping, after checking that the principal may read it.
    pub(crate) fn scope_meta(&self, scope: &str) -> Result<Option<ScopeMeta>> {
        self.require(crate::storage::access::Access::Read, scope)?;
        read_scope(&self.open(SCOPES)?, scope)
    }

    /// Names of the scopes the principal may read, sorted.
    pub fn scopes(&self) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for (n, _) in list_scopes(&self.open(SCOPES)?)? {
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
        for (scope, m) in list_scopes(&self.open(SCOPES)?)? {
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
    pub(crate) fn ensure_tables(&mut self) -> Result<()> {
        self.tx.open_table(META)?;
        self.tx.open_table(CONFIG)?;
        self.tx.open_table(SCOPES)?;
        self.tx.open_table(LOG)?;
        self.tx.open_table(TREE)?;
        self.tx.open_table(PENDING)?;
        self.tx.open_table(IDEMPOTENCY)?;
        self.tx.open_table(schema::SESSIONS)?;
        self.tx.open_table(schema::SESSION_MESSAGES)?;
        self.tx.open_table(schema::SESSION_HASHES)?;
        self.tx.open_table(schema::SESSION_ARCHIVE)?;
        self.tx.open_table(schema::SESSION_IDEMPOTENCY)?;
        self.tx.open_table(schema::GRANTS)?;
        self.tx.open_table(schema::POLICIES)?;
        self.tx.open_table(schema::EVENTS)?;
        self.tx.open_table(schema::STALE)?;
        self.tx.open_table(schema::CLAIMS)?;
        self.tx.open_table(schema::AUDIT)?;
        Ok(())
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
        let c = read_config(&self.tx.open_table(CONFIG)?)?;
        self.config = Some(c);
        Ok(c)
    }

    /// The scope's bookkeeping, after checking that the principal may write it.
    pub(crate) fn scope_meta(&self, scope: &str) -> Result<Option<ScopeMeta>> {
        self.require(crate::storage::access::Access::Write, scope)?;
        read_scope(&self.tx.open_table(SCOPES)?, scope)
    }

    /// The scope's bookkeeping, creating the scope if it does not exist yet.
    pub(crate) fn scope_or_create(&mut self, scope: &str) -> Result<ScopeMeta> {
        validate_scope(scope)?;
        if let Some(m) = self.scope_meta(scope)? {
            return Ok(m);
        }
        let mut meta = self.tx.open_table(META)?;
        let next: u32 = match meta.get("next_scope_id")? {
            Some(v) => decode("meta", &"next_scope_id", v.value())?,
            None => 0,
        };
        let after = next
            .checked_add(1)
            .ok_or_else(|| Error::invalid("scope", "too many scopes"))?;
        meta.insert("next_scope_id", encode(&after)?.as_slice())?;
        drop(meta);
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
        let mut t = self.tx.open_table(SCOPES)?;
        t.insert(scope, encode(m)?.as_slice())?;
        Ok(())
    }

    /// Number of memories in `scope`, as of this transaction.
    pub fn count(&self, scope: &str) -> Result<u64> {
        Ok(self.scope_meta(scope)?.map(|m| m.count).unwrap_or(0))
    }
}

impl ReadTxn {
    pub(crate) fn auth(&self) -> Result<&Auth> {
        if let Some(a) = self.auth.get() {
            return Ok(a);
        }
        let a = Auth::load(&self.open(META)?, &self.open(GRANTS)?)?;
        Ok(self.auth.get_or_init(|| a))
    }

    /// Whether this transaction's principal may `access` `scope`.
    pub fn may(&self, access: Access, scope: &str) -> Result<bool> {
        Ok(self
            .auth()?
            .allows(self.principal.as_deref(), access, scope))
    }

    /// Fails with [`Error::Denied`] unless the principal may `access` `scope`.
    pub(crate) fn require(&self, access: Access, scope: &str) -> Result<()> {
        self.auth()?.check(self.principal.as_deref(), access, scope)
    }

    pub(crate) fn require_admin(&self, what: &str) -> Result<()> {
        self.auth()?.check_admin(self.principal.as_deref(), what)
    }
}

impl WriteTxn<'_> {
    pub(crate) fn auth(&self) -> Result<&Auth> {
        if let Some(a) = self.auth.get() {
            return Ok(a);
        }
        let a = Auth::load(&self.tx.open_table(META)?, &self.tx.open_table(GRANTS)?)?;
        Ok(self.auth.get_or_init(|| a))
    }

    /// Whether this transaction's principal may `access` `scope`.
    pub fn may(&self, access: Access, scope: &str) -> Result<bool> {
        Ok(self
            .auth()?
            .allows(self.principal.as_deref(), access, scope))
    }

    /// Fails with [`Error::Denied`] unless the principal may `access` `scope`.
    pub(crate) fn require(&self, access: Access, scope: &str) -> Result<()> {
        self.auth()?.check(self.principal.as_deref(), access, scope)
    }

    pub(crate) fn require_admin(&self, what: &str) -> Result<()> {
        self.auth()?.check_admin(self.principal.as_deref(), what)
    }

    /// The principal this transaction acts as, as recorded in events.
    pub fn who(&self) -> Result<String> {
        match &self.principal {
            Some(p) => Ok(p.clone()),
            None => Ok(self.auth()?.admin().to_string()),
        }
    }
}
