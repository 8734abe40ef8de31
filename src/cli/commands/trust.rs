//! `grant`, `revoke`, `grants`, `policy` and `audit`: who may read and write what, what may be
//! written, and who read what.

use crate::cli::names::{accesses, Names};
use clap::Args;
#[cfg(feature = "mcp")]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use somna::text;
use somna::{Access, Error, Store};

use crate::cli::context::Context;
use crate::cli::output::json;
use crate::cli::verb::{NoArgs, Verb};

/// The arguments of `grant` and `revoke` (the CLI verbs and the MCP tools).
#[derive(Args, Debug, Deserialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct GrantArgs {
    /// The principal, e.g. user:alice
    #[arg(value_name = "PRINCIPAL")]
    // Named apart from the global options `--as` (`principal`) and `--scope`, as clap needs.
    #[serde(rename = "principal")]
    pub who: String,
    /// What the grant allows
    #[arg(value_parser = Names(accesses))]
    #[cfg_attr(feature = "mcp", schemars(extend("enum" = accesses())))]
    pub access: String,
    /// The scope, or a prefix ending in / or :
    #[arg(value_name = "SCOPE")]
    #[serde(rename = "scope")]
    pub target: String,
}

/// The arguments of `policy` (the CLI verb and the MCP tool).
#[derive(Args, Debug, Deserialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(deny_unknown_fields)]
pub struct PolicyArgs {
    /// KEY=VALUE settings to change: inference=proposed|accepted, require-source=KIND,...|none,
    /// secrets=refuse|allow, citations=required|optional. None: only show the policy
    #[serde(default)]
    pub settings: Vec<String>,
}

#[derive(Args, Debug)]
pub struct AuditArgs {
    /// The newest N records
    #[arg(long, default_value_t = 100)]
    pub limit: usize,
}

/// Gives the principal read or write access to the scope (or prefix).
pub fn grant(cx: &mut Context<'_>, a: &GrantArgs) -> Result<u8, Error> {
    let (who, access, target) = (&a.who, &a.access, &a.target);
    cx.store.grant(who, access.parse()?, target)?;
    cx.emit(
        &serde_json::json!({"principal": who, "access": access, "scope": target, "granted": true}),
    )?;
    if cx.text_wanted() {
        writeln!(cx.out, "{who} may now {access} {target}.")?;
    }
    Ok(0)
}

/// Takes a grant back; says so when there was none.
pub fn revoke(cx: &mut Context<'_>, a: &GrantArgs) -> Result<u8, Error> {
    let (who, access, target) = (&a.who, &a.access, &a.target);
    let existed = cx.store.revoke(who, access.parse()?, target)?;
    cx.emit(&serde_json::json!({"principal": who, "access": access, "scope": target, "revoked": existed}))?;
    if !cx.text_wanted() {
        return Ok(0);
    }
    if existed {
        writeln!(cx.out, "{who} may no longer {access} {target}.")?;
    } else {
        writeln!(cx.out, "{who} had no {access} grant on {target}.")?;
    }
    Ok(0)
}

// A typed result: the CLI prints it as text (`Grants::render`) or JSON, and the MCP tool returns
// it (under `result`) as its structured content, its output schema derived from this type.
/// Every grant.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(transparent)]
pub struct Grants(pub Vec<GrantLine>);

// Its fields are in the order the JSON has always had (the library's `Grant`'s).
/// One grant.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
pub struct GrantLine {
    /// Who holds it.
    pub principal: String,
    /// What it allows: Read or Write.
    #[cfg_attr(feature = "mcp", schemars(with = "String"))]
    pub access: Access,
    /// An exact scope, or a prefix ending in `/` or `:`.
    pub scope: String,
    /// Who granted it.
    pub granted_by: String,
    /// When (microseconds since the epoch, UTC).
    pub granted_us: i64,
}

impl Grants {
    /// Every grant of `store` (admin only).
    pub fn call(store: &Store) -> Result<Grants, Error> {
        let lines = store.grants()?.into_iter().map(|g| GrantLine {
            principal: g.principal,
            access: g.access,
            scope: g.scope,
            granted_by: g.granted_by,
            granted_us: g.granted_us,
        });
        Ok(Grants(lines.collect()))
    }

    /// Its text: `PRINCIPAL ACCESS SCOPE` a line, or that there is none.
    pub fn render(&self) -> String {
        if self.0.is_empty() {
            return "No grants: every principal may read and write every scope.\n".into();
        }
        self.0
            .iter()
            .map(|x| format!("{} {} {}\n", x.principal, x.access, x.scope))
            .collect()
    }
}

/// Lists every grant.
pub fn grants(cx: &mut Context<'_>) -> Result<u8, Error> {
    let g = Grants::call(&cx.store)?;
    cx.emit(&g)?;
    if cx.text_wanted() {
        write!(cx.out, "{}", g.render())?;
    }
    Ok(0)
}

/// Applies the settings to the scope's write policy (if any), then prints the policy.
pub fn policy(cx: &mut Context<'_>, a: &PolicyArgs) -> Result<u8, Error> {
    let mut p = cx.store.policy(cx.scope)?;
    if !a.settings.is_empty() {
        for s in &a.settings {
            p.apply(s)?;
        }
        cx.store.set_policy(cx.scope, &p)?;
    }
    cx.emit(&p)?;
    if cx.text_wanted() {
        write!(cx.out, "{}", p.describe())?;
    }
    Ok(0)
}

/// Lists the newest records of the read audit.
pub fn audit(cx: &mut Context<'_>, a: &AuditArgs) -> Result<u8, Error> {
    let records = cx.store.audit(a.limit)?;
    if cx.json {
        json(cx.out, &records)?;
    } else {
        for e in records {
            writeln!(
                cx.out,
                "{} {} {} {} {}",
                text::rfc3339_of(e.at_us),
                text::display_safe(&e.who),
                e.op,
                e.scope,
                e.items.join(",")
            )?;
        }
    }
    Ok(0)
}

/// The verb `grant`.
pub const GRANT: Verb<GrantArgs> = Verb::writes(grant);

/// The verb `revoke`.
pub const REVOKE: Verb<GrantArgs> = Verb::writes(revoke);

/// The verb `grants`.
pub const GRANTS: Verb<NoArgs> = Verb::reads(|cx, _| grants(cx));

/// The verb `policy` (it reads when it changes no setting).
pub const POLICY: Verb<PolicyArgs> = Verb::reads_when(policy, |a| a.settings.is_empty());

/// The verb `audit`.
pub const AUDIT: Verb<AuditArgs> = Verb::reads(audit);
