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

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::storage::codec::decode;
use crate::storage::kv::KvRead;
use crate::storage::tables::{GRANTS, META};

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
    pub(crate) fn code(self) -> u8 {
        match self {
            Access::Read => 0,
            Access::Write => 1,
        }
    }
    pub(crate) fn from_code(c: u8) -> Option<Access> {
        match c {
            0 => Some(Access::Read),
            1 => Some(Access::Write),
            _ => None,
        }
    }
}

crate::domain::record::names!(Access, "access", Read => "read", Write => "write");

/// Checks a principal id: 1 to 128 bytes, no control characters or spaces.
pub fn validate_principal(p: &str) -> Result<()> {
    if p.is_empty() || p.len() > 128 || p.chars().any(|c| c.is_control() || c.is_whitespace()) {
        let reason = format!(
            "{:?}: must be 1 to 128 bytes without spaces or control characters",
            p.escape_debug().to_string()
        );
        return Err(Error::invalid("principal", reason));
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
    /// The admin's name; read only where it can change an answer (the store has grants, or
    /// someone asks for it), so that a store without grants reads one table per check, not two.
    admin: Option<String>,
    grants: Vec<(String, Access, String)>,
}

/// The admin's name as stored in `meta` (the default when none was recorded).
fn read_admin(kv: &(impl KvRead + ?Sized)) -> Result<String> {
    match META.get(kv, "admin")? {
        Some(v) => decode::<String>("meta", &"admin", &v),
        None => Ok(DEFAULT_ADMIN.to_string()),
    }
}

impl Auth {
    /// Loads every grant from the `grants` table, and the admin's name from `meta` when there
    /// are grants.
    pub(crate) fn load(kv: &(impl KvRead + ?Sized)) -> Result<Auth> {
        let mut out = Vec::new();
        GRANTS.each(kv, .., |(p, a, pat), _| {
            if let Some(a) = Access::from_code(a) {
                out.push((p.into_owned(), a, pat.to_string()));
            }
            Ok(())
        })?;
        let admin = if out.is_empty() {
            None
        } else {
            Some(read_admin(kv)?)
        };
        Ok(Auth { admin, grants: out })
    }

    /// Whether `p` is the admin. Without grants the admin's name may be unread: then only
    /// `None` counts, which is all that the answers of [`Auth::allows`] and
    /// [`Auth::unrestricted`] need there (a store without grants allows everyone).
    pub(crate) fn is_admin(&self, p: Option<&str>) -> bool {
        p.is_none_or(|p| self.admin.as_deref() == Some(p))
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

    /// Fails with [`Error::Denied`] unless `p` is the admin (whose name `admin` gives).
    pub(crate) fn check_admin(
        &self,
        p: Option<&str>,
        what: &str,
        admin: impl FnOnce() -> Result<String>,
    ) -> Result<()> {
        if self.admin_is(p, admin)? {
            Ok(())
        } else {
            Err(Error::Denied(format!("only the admin may {what}")))
        }
    }

    /// Whether `p` is the admin, reading the admin's name through `admin` when the grants did not
    /// (a store without grants): what [`Auth::check_admin`] decides.
    pub(crate) fn admin_is(
        &self,
        p: Option<&str>,
        admin: impl FnOnce() -> Result<String>,
    ) -> Result<bool> {
        Ok(match (p, &self.admin) {
            (None, _) => true,
            (Some(p), Some(a)) => p == a,
            (Some(p), None) => p == admin()?,
        })
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

/// Who a transaction acts for, and the grants in force, loaded at the first check and kept for
/// the rest of the transaction (never for no principal: the admin, whom every check allows, so
/// the owner's reads do not open the `grants` table). Both transaction types hold one, so the
/// checks are written once.
#[derive(Debug)]
pub(crate) struct Asker {
    principal: Option<String>,
    auth: std::cell::OnceCell<Auth>,
}

impl Asker {
    pub(crate) fn new(principal: Option<String>) -> Asker {
        Asker {
            principal,
            auth: std::cell::OnceCell::new(),
        }
    }

    /// The principal (`None`: the admin).
    pub(crate) fn principal(&self) -> Option<&str> {
        self.principal.as_deref()
    }

    /// Acts for another principal from now on (group commit runs several callers' operations
    /// in one transaction); the grants loaded stay valid.
    pub(crate) fn set_principal(&mut self, p: Option<String>) {
        self.principal = p;
    }

    /// Drops the loaded grants (after a grant or revoke in this transaction).
    pub(crate) fn forget_grants(&mut self) {
        self.auth = std::cell::OnceCell::new();
    }

    /// The grants in force, loaded from `kv` once.
    pub(crate) fn auth(&self, kv: &(impl KvRead + ?Sized)) -> Result<&Auth> {
        if let Some(a) = self.auth.get() {
            return Ok(a);
        }
        let a = Auth::load(kv)?;
        Ok(self.auth.get_or_init(|| a))
    }

    /// Whether the principal may `access` `scope`.
    pub(crate) fn may(
        &self,
        kv: &(impl KvRead + ?Sized),
        access: Access,
        scope: &str,
    ) -> Result<bool> {
        // No principal is the admin, whom every grant allows (`Auth::allows`): nothing to load.
        if self.principal.is_none() {
            return Ok(true);
        }
        Ok(self.auth(kv)?.allows(self.principal(), access, scope))
    }

    /// Fails with [`Error::Denied`] unless the principal may `access` `scope`.
    pub(crate) fn require(
        &self,
        kv: &(impl KvRead + ?Sized),
        access: Access,
        scope: &str,
    ) -> Result<()> {
        self.require_with(kv, access, || scope.into())
    }

    /// [`Asker::require`] of a scope built only when there is a principal to check (the admin,
    /// `None`, may do anything: a hot read need not format the scope's name).
    pub(crate) fn require_with<'s>(
        &self,
        kv: &(impl KvRead + ?Sized),
        access: Access,
        scope: impl FnOnce() -> std::borrow::Cow<'s, str>,
    ) -> Result<()> {
        if self.principal.is_none() {
            return Ok(());
        }
        self.auth(kv)?.check(self.principal(), access, &scope())
    }

    /// Fails with [`Error::Denied`] unless the principal is the admin.
    pub(crate) fn require_admin(&self, kv: &(impl KvRead + ?Sized), what: &str) -> Result<()> {
        if self.principal.is_none() {
            return Ok(());
        }
        self.auth(kv)?
            .check_admin(self.principal(), what, || read_admin(kv))
    }

    /// Whether the principal is the admin (by name too in a store without grants), as
    /// [`Asker::require_admin`] decides.
    pub(crate) fn is_admin(&self, kv: &(impl KvRead + ?Sized)) -> Result<bool> {
        if self.principal.is_none() {
            return Ok(true);
        }
        self.auth(kv)?.admin_is(self.principal(), || read_admin(kv))
    }

    /// Whether the principal may read everything (the admin, or a grant on every scope).
    pub(crate) fn unrestricted(&self, kv: &(impl KvRead + ?Sized)) -> Result<bool> {
        if self.principal.is_none() {
            return Ok(true);
        }
        Ok(self.auth(kv)?.unrestricted(self.principal()))
    }

    /// The principal's name as events record it (the admin's name for `None`).
    pub(crate) fn who(&self, kv: &(impl KvRead + ?Sized)) -> Result<String> {
        match &self.principal {
            Some(p) => Ok(p.clone()),
            None => match &self.auth(kv)?.admin {
                Some(a) => Ok(a.clone()),
                None => read_admin(kv),
            },
        }
    }
}
