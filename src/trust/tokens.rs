//! Bearer tokens: the credentials that make a principal real over the MCP server's HTTP
//! transport. The store keeps only the SHA-256 of each token (in hex), never the token itself;
//! the caller hashes (the library has no hash of its own for this, so it gains no dependency).
//! Adding, listing and revoking are the admin's; looking a hash up is not, because the server
//! must authenticate a request before it knows who is asking, and a hash reveals nothing to
//! someone who does not hold its token.

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::storage::access::validate_principal;
use crate::storage::codec::{decode, encode};
use crate::storage::tables::TOKENS;
use crate::storage::txn::{ReadTxn, WriteTxn};

/// How many hex digits of a token's hash name it in `token list` and `token revoke`.
pub const TOKEN_ID_LEN: usize = 12;

/// One token as `token list` shows it (never the token, only the start of its hash).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TokenInfo {
    /// The first [`TOKEN_ID_LEN`] hex digits of the token's SHA-256: its name.
    pub id: String,
    /// The principal the token authenticates.
    pub principal: String,
    /// Who added it.
    pub created_by: String,
    /// When (microseconds since the epoch, UTC).
    pub created_us: i64,
}

/// The stored value of a token (docs/design.md, table `tokens`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct TokenRecord {
    principal: String,
    created_by: String,
    created_us: i64,
}

/// Checks that `hash` is a SHA-256 in lowercase hex (64 digits).
fn validate_hash(hash: &str) -> Result<()> {
    if hash.len() == 64 && hash.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(())
    } else {
        Err(Error::invalid(
            "token hash",
            "expected the SHA-256 of the token as 64 lowercase hex digits",
        ))
    }
}

impl ReadTxn<'_> {
    /// Every token, by hash (admin only).
    pub fn tokens(&self) -> Result<Vec<TokenInfo>> {
        self.require_admin("list tokens")?;
        let mut out = Vec::new();
        TOKENS.each(self.tx, .., |hash, v| {
            let r: TokenRecord = decode("tokens", &hash, v)?;
            out.push(TokenInfo {
                id: hash.chars().take(TOKEN_ID_LEN).collect(),
                principal: r.principal,
                created_by: r.created_by,
                created_us: r.created_us,
            });
            Ok(())
        })?;
        Ok(out)
    }

    /// The principal a token authenticates, given the SHA-256 of the token in hex; `None` for a
    /// token that was never added or was revoked. Open to every principal (see the module doc).
    pub fn token_principal(&self, hash: &str) -> Result<Option<String>> {
        validate_hash(hash)?;
        match TOKENS.get(self.tx, hash)? {
            Some(v) => {
                let r: TokenRecord = decode("tokens", &hash, &v)?;
                Ok(Some(r.principal))
            }
            None => Ok(None),
        }
    }
}

impl WriteTxn<'_> {
    /// Stores a token for `principal`, given its SHA-256 in hex. Admin only.
    pub fn token_add(&mut self, hash: &str, principal: &str) -> Result<TokenInfo> {
        self.require_admin("add tokens")?;
        validate_hash(hash)?;
        validate_principal(principal)?;
        if TOKENS.get(&*self.tx, hash)?.is_some() {
            return Err(Error::Conflict("this token is already stored".into()));
        }
        let rec = TokenRecord {
            principal: principal.to_string(),
            created_by: self.who()?,
            created_us: self.now,
        };
        TOKENS.put(&mut *self.tx, hash, &encode(&rec)?)?;
        Ok(TokenInfo {
            id: hash.chars().take(TOKEN_ID_LEN).collect(),
            principal: rec.principal,
            created_by: rec.created_by,
            created_us: rec.created_us,
        })
    }

    /// Removes every token whose hash starts with `id` (as `token list` shows it, at least
    /// [`TOKEN_ID_LEN`] digits, so that a short prefix cannot take several by accident), and
    /// returns how many. Admin only.
    pub fn token_revoke(&mut self, id: &str) -> Result<u64> {
        self.require_admin("revoke tokens")?;
        if id.len() < TOKEN_ID_LEN || id.len() > 64 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(Error::invalid(
                "token id",
                format!("expected the {TOKEN_ID_LEN} hex digits that `token list` shows"),
            ));
        }
        let id = id.to_ascii_lowercase();
        let mut hashes = Vec::new();
        TOKENS.each(&*self.tx, id.as_str().., |hash, _| {
            if hash.starts_with(id.as_str()) {
                hashes.push(hash.to_string());
            }
            Ok(())
        })?;
        for h in &hashes {
            TOKENS.delete(&mut *self.tx, h.as_str())?;
        }
        Ok(hashes.len() as u64)
    }
}

crate::storage::store::store_calls! {
    /// Stores a token's hash for `principal`; see [`WriteTxn::token_add`].
    write fn token_add(hash: &str, principal: &str) -> TokenInfo;
    /// Removes tokens by id; see [`WriteTxn::token_revoke`].
    write fn token_revoke(id: &str) -> u64;
    /// Every token (admin only).
    read fn tokens() -> Vec<TokenInfo>;
    /// The principal of a token's hash; see [`ReadTxn::token_principal`].
    read fn token_principal(hash: &str) -> Option<String>;
}
