//! Administering grants: who may read or write which scopes. Granting, revoking and listing
//! are the admin's; enforcement is in every transaction ([`crate::storage::access`]).

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::storage::access::{validate_principal, Access};
use crate::storage::codec::{decode, encode};
use crate::storage::tables::GRANTS;
use crate::storage::txn::{ReadTxn, WriteTxn};

// Also a line of `grants` in the CLI and over MCP (the `schemars` feature).
/// One grant.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[cfg_attr(feature = "schemars", derive(schemars::JsonSchema))]
pub struct Grant {
    /// Who holds it.
    pub principal: String,
    /// What it allows: Read or Write.
    #[cfg_attr(feature = "schemars", schemars(with = "String"))]
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

impl ReadTxn<'_> {
    /// Every grant, by principal (admin only).
    pub fn grants(&self) -> Result<Vec<Grant>> {
        self.require_admin("list grants")?;
        let mut out = Vec::new();
        GRANTS.each(self.tx, .., |(p, a, pat), v| {
            let r: GrantRecord = decode("grants", &p, v)?;
            if let Some(access) = Access::from_code(a) {
                out.push(Grant {
                    principal: p.into_owned(),
                    access,
                    scope: pat.to_string(),
                    granted_by: r.granted_by,
                    granted_us: r.granted_us,
                });
            }
            Ok(())
        })?;
        Ok(out)
    }
}

impl WriteTxn<'_> {
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
        GRANTS.put(
            &mut *self.tx,
            (principal, access.code(), scope),
            &encode(&rec)?,
        )?;
        self.asker.forget_grants();
        Ok(())
    }

    /// Removes a grant. Returns whether it existed. Admin only.
    pub fn revoke(&mut self, principal: &str, access: Access, scope: &str) -> Result<bool> {
        self.require_admin("change grants")?;
        let existed = GRANTS.delete(&mut *self.tx, (principal, access.code(), scope))?;
        self.asker.forget_grants();
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
    crate::domain::text::validate_scope(scope)
}

crate::storage::store::store_calls! {
    /// Gives `principal` `access` to `scope`; see [`WriteTxn::grant`].
    write fn grant(principal: &str, access: Access, scope: &str) -> ();
    /// Removes a grant; see [`WriteTxn::revoke`].
    write fn revoke(principal: &str, access: Access, scope: &str) -> bool;
    /// Every grant (admin only).
    read fn grants() -> Vec<Grant>;
}
