//! `grant`, `revoke`, `grants`, `policy` and `audit`: who may read and write what, what may be
//! written, and who read what.

use crate::cli::names::{accesses, Names};
use clap::Args;
#[cfg(feature = "mcp")]
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use somna::text;
use somna::trust::{Grant, Policy};
use somna::{Error, Kind, Status, Store};

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

// Typed results: the CLI prints each as text (`render`) or JSON, and the MCP tool returns it as
// its structured content, its output schema derived from the type. Their fields are in the
// order the JSON has always had (sorted: it was built as a `serde_json::Value`).
/// A grant given.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
pub struct Granted {
    /// What it allows: read or write.
    pub access: String,
    /// Always true.
    pub granted: bool,
    /// Who holds it.
    pub principal: String,
    /// An exact scope, or a prefix ending in `/` or `:`.
    pub scope: String,
}

impl Granted {
    /// Gives `a.who` `a.access` to `a.target` (admin only).
    pub fn call(store: &Store, a: &GrantArgs) -> Result<Granted, Error> {
        store.grant(&a.who, a.access.parse()?, &a.target)?;
        Ok(Granted {
            access: a.access.clone(),
            granted: true,
            principal: a.who.clone(),
            scope: a.target.clone(),
        })
    }

    /// Its text: one line.
    pub fn render(&self) -> String {
        format!(
            "{} may now {} {}.\n",
            self.principal, self.access, self.scope
        )
    }
}

/// Gives the principal read or write access to the scope (or prefix).
pub fn grant(cx: &mut Context<'_>, a: &GrantArgs) -> Result<u8, Error> {
    let g = Granted::call(&cx.store, a)?;
    cx.show(&g, |g| g.render())
}

/// A grant taken back.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
pub struct Revoked {
    /// What it allowed: read or write.
    pub access: String,
    /// Who held it.
    pub principal: String,
    /// Whether there was such a grant.
    pub revoked: bool,
    /// An exact scope, or a prefix ending in `/` or `:`.
    pub scope: String,
}

impl Revoked {
    /// Takes back `a.who`'s `a.access` grant on `a.target` (admin only).
    pub fn call(store: &Store, a: &GrantArgs) -> Result<Revoked, Error> {
        let existed = store.revoke(&a.who, a.access.parse()?, &a.target)?;
        Ok(Revoked {
            access: a.access.clone(),
            principal: a.who.clone(),
            revoked: existed,
            scope: a.target.clone(),
        })
    }

    /// Its text: one line, which says when there was no such grant.
    pub fn render(&self) -> String {
        let (who, access, target) = (&self.principal, &self.access, &self.scope);
        match self.revoked {
            true => format!("{who} may no longer {access} {target}.\n"),
            false => format!("{who} had no {access} grant on {target}.\n"),
        }
    }
}

/// Takes a grant back; says so when there was none.
pub fn revoke(cx: &mut Context<'_>, a: &GrantArgs) -> Result<u8, Error> {
    let r = Revoked::call(&cx.store, a)?;
    cx.show(&r, |r| r.render())
}

// A typed result: the CLI prints it as text (`Grants::render`) or JSON, and the MCP tool returns
// it (under `result`) as its structured content, its output schema derived from this type.
/// Every grant.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
#[serde(transparent)]
pub struct Grants(pub Vec<Grant>);

impl Grants {
    /// Every grant of `store` (admin only).
    pub fn call(store: &Store) -> Result<Grants, Error> {
        Ok(Grants(store.grants()?))
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
    cx.show(&g, |g| g.render())
}

// A typed result: the CLI prints it as text (`PolicyShown::render`, the library's) or JSON, and
// the MCP tool returns it as its structured content, its output schema derived from this type.
// Its fields are in the order the JSON has always had (the library's `Policy`'s).
/// A scope's write policy.
#[derive(Debug, Serialize)]
#[cfg_attr(feature = "mcp", derive(JsonSchema))]
pub struct PolicyShown {
    /// The status an inference gets when the caller names none: proposed or accepted.
    #[cfg_attr(feature = "mcp", schemars(with = "String"))]
    pub inference_status: Status,
    /// The kinds of memory that must carry a source.
    #[cfg_attr(feature = "mcp", schemars(with = "Vec<String>"))]
    pub require_source: Vec<Kind>,
    /// Whether notes that look like secrets are refused unless forced.
    pub refuse_secrets: bool,
    /// Whether summaries with a claim that cites nothing are refused.
    pub require_citations: bool,
}

impl PolicyShown {
    /// `scope`'s write policy, after applying `a.settings` to it (if any).
    pub fn call(store: &Store, scope: &str, a: &PolicyArgs) -> Result<PolicyShown, Error> {
        let mut p = store.policy(scope)?;
        if !a.settings.is_empty() {
            for s in &a.settings {
                p.apply(s)?;
            }
            store.set_policy(scope, &p)?;
        }
        Ok(PolicyShown {
            inference_status: p.inference_status,
            require_source: p.require_source,
            refuse_secrets: p.refuse_secrets,
            require_citations: p.require_citations,
        })
    }

    /// Its text: a setting a line.
    pub fn render(&self) -> String {
        let p = Policy {
            inference_status: self.inference_status,
            require_source: self.require_source.clone(),
            refuse_secrets: self.refuse_secrets,
            require_citations: self.require_citations,
        };
        p.describe()
    }
}

/// Applies the settings to the scope's write policy (if any), then prints the policy.
pub fn policy(cx: &mut Context<'_>, a: &PolicyArgs) -> Result<u8, Error> {
    let p = PolicyShown::call(&cx.store, cx.scope, a)?;
    cx.show(&p, |p| p.render())
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
