//! Principals and grants: who may read or write which scopes.
//!
//! A principal is an id such as `user:alice` or `agent:ci`. It holds read and write grants on
//! scopes, each an exact scope name or a prefix (a pattern ending in `/` or `:`). Grants live in
//! the store and only the admin (the principal that created the store, `admin` by default) may
//! change them. A store with no grants at all behaves as a single-owner store: every principal
//! may do everything. Sessions are governed as the scope `session:<id>`.
//!
//! Every read and write checks the grants inside its own transaction, before anything is read,
//! so a revoked grant takes effect at the next call, and a refusal names only what the caller
//! asked for.

use redb::ReadableTable;

use serde::{Deserialize, Serialize};

use crate::codec::{decode, encode};
use crate::db::{ReadTxn, Store, WriteTxn};
use crate::error::{Error, Result};
use crate::schema::{GRANTS, META};

/// The admin principal of a store created without one.
pub const DEFAULT_ADMIN: &str = "admin";

/// What a grant allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Access {
    /// Reading: wake, zoom, recall, export, session reads.
    Read,
    /// Writing: note, nap, forget, lifecycle events, session writes.
    Write,
}

impl Access {
    fn code(self) -> u8 {
        match self {
            Access::Read => 0,
            Access::Write => 1,
        }
    }
    fn from_code(c: u8) -> Option<Access> {
        match c {
            0 => Some(Access::Read),
            1 => Some(Access::Write),
            _ => None,
        }
    }
}

impl std::str::FromStr for Access {
    type Err = Error;
    fn from_str(s: &str) -> Result<Access> {
        match s {
            "read" => Ok(Access::Read),
            "write" => Ok(Access::Write),
            _ => Err(Error::invalid(
                "access",
                format!("{s:?} is not read or write"),
            )),
        }
    }
}

impl std::fmt::Display for Access {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Access::Read => "read",
            Access::Write => "write",
        })
    }
}

/// One grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Grant {
    /// Who holds it.
    pub principal: String,
    /// What it allows.
    pub access: Access,
    /// An exact scope, or a prefix ending in `/` or `:`.
    pub scope: String,
    /// Who granted it.
    pub granted_by: String,
    /// When (microseconds since the epoch, UTC).
    pub granted_us: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct GrantRecord {
    granted_by: String,
    granted_us: i64,
}

/// Checks a principal id: 1 to 128 bytes, no control characters or spaces.
pub fn validate_principal(p: &str) -> Result<()> {
    if p.is_empty() || p.len() > 128 || p.chars().any(|c| c.is_control() || c.is_whitespace()) {
        return Err(Error::invalid(
            "principal",
            format!(
                "{:?}: must be 1 to 128 bytes without spaces or control characters",
                p.escape_debug().to_string()
            ),
        ));
    }
    Ok(())
}

/// Whether a grant pattern covers a scope.
pub fn pattern_matches(pattern: &str, scope: &str) -> bool {
    pattern == scope
        || ((pattern.ends_with('/') || pattern.ends_with(':')) && scope.starts_with(pattern))
}

/// The grants in force in one transaction.
#[derive(Debug, Clone)]
pub(crate) struct Auth {
    admin: String,
    grants: Vec<(String, Access, String)>,
}

impl Auth {
    fn load<M, G>(meta: &M, grants: &G) -> Result<Auth>
    where
        M: ReadableTable<&'static str, &'static [u8]>,
        G: ReadableTable<(&'static str, u8, &'static str), &'static [u8]>,
    {
        let admin = match meta.get("admin")? {
            Some(v) => decode::<String>("meta", &"admin", v.value())?,
            None => DEFAULT_ADMIN.to_string(),
        };
        let mut out = Vec::new();
        if grants.len()? > 0 {
            for item in grants.iter()? {
                let (k, _) = item?;
                let (p, a, pat) = k.value();
                if let Some(a) = Access::from_code(a) {
                    out.push((p.to_string(), a, pat.to_string()));
                }
            }
        }
        Ok(Auth { admin, grants: out })
    }

    pub(crate) fn is_admin(&self, p: Option<&str>) -> bool {
        p.is_none_or(|p| p == self.admin)
    }

    /// Fails with [`Error::Denied`] unless `p` may `access` `scope`; the message names only
    /// what was asked for.
    pub(crate) fn check(&self, p: Option<&str>, access: Access, scope: &str) -> Result<()> {
        if self.allows(p, access, scope) {
            Ok(())
        } else {
            Err(Error::Denied(format!(
                "{} may not {access} scope {scope:?}",
                p.unwrap_or(DEFAULT_ADMIN)
            )))
        }
    }

    /// Fails with [`Error::Denied`] unless `p` is the admin.
    pub(crate) fn check_admin(&self, p: Option<&str>, what: &str) -> Result<()> {
        if self.is_admin(p) {
            Ok(())
        } else {
            Err(Error::Denied(format!("only the admin may {what}")))
        }
    }

    /// Whether `p` may do anything (the admin, a store without grants, or no principal), so
    /// that a listing can skip the check per row.
    pub(crate) fn unrestricted(&self, p: Option<&str>) -> bool {
        p.is_none() || self.grants.is_empty() || self.is_admin(p)
    }

    pub(crate) fn allows(&self, p: Option<&str>, access: Access, scope: &str) -> bool {
        if self.is_admin(p) || self.grants.is_empty() {
            return true;
        }
        let Some(p) = p else { return true };
        self.grants
            .iter()
            .any(|(who, a, pat)| who == p && *a == access && pattern_matches(pat, scope))
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

    /// Every grant, by principal (admin only).
    pub fn grants(&self) -> Result<Vec<Grant>> {
        self.require_admin("list grants")?;
        let mut out = Vec::new();
        for item in self.open(GRANTS)?.iter()? {
            let (k, v) = item?;
            let (p, a, pat) = k.value();
            let r: GrantRecord = decode("grants", &p, v.value())?;
            if let Some(access) = Access::from_code(a) {
                out.push(Grant {
                    principal: p.to_string(),
                    access,
                    scope: pat.to_string(),
                    granted_by: r.granted_by,
                    granted_us: r.granted_us,
                });
            }
        }
        Ok(out)
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
            None => Ok(self.auth()?.admin.clone()),
        }
    }

    /// Gives `principal` `access` to `scope` (an exact name, or a prefix ending in `/` or `:`).
    /// Admin only.
    pub fn grant(&mut self, principal: &str, access: Access, scope: &str) -> Result<()> {
        self.require_admin("change grants")?;
        validate_principal(principal)?;
        validate_pattern(scope)?;
        let rec = GrantRecord {
            granted_by: self.who()?,
            granted_us: self.now,
        };
        self.tx
            .open_table(GRANTS)?
            .insert((principal, access.code(), scope), encode(&rec)?.as_slice())?;
        self.auth = std::cell::OnceCell::new();
        Ok(())
    }

    /// Removes a grant. Returns whether it existed. Admin only.
    pub fn revoke(&mut self, principal: &str, access: Access, scope: &str) -> Result<bool> {
        self.require_admin("change grants")?;
        let existed = self
            .tx
            .open_table(GRANTS)?
            .remove((principal, access.code(), scope))?
            .is_some();
        self.auth = std::cell::OnceCell::new();
        Ok(existed)
    }
}

fn validate_pattern(scope: &str) -> Result<()> {
    let base = scope.trim_end_matches(['/', ':']);
    if base.is_empty() {
        return Err(Error::invalid(
            "scope",
            "a grant needs a scope name or prefix",
        ));
    }
    crate::db::validate_scope(scope)
}

impl Store {
    /// Gives `principal` `access` to `scope`; see [`WriteTxn::grant`].
    pub fn grant(&self, principal: &str, access: Access, scope: &str) -> Result<()> {
        self.write(|tx| tx.grant(principal, access, scope))
    }
    /// Removes a grant; see [`WriteTxn::revoke`].
    pub fn revoke(&self, principal: &str, access: Access, scope: &str) -> Result<bool> {
        self.write(|tx| tx.revoke(principal, access, scope))
    }
    /// Every grant (admin only).
    pub fn grants(&self) -> Result<Vec<Grant>> {
        self.read(|r| r.grants())
    }
}
