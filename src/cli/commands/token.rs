//! `token add|list|revoke`: the bearer tokens that authenticate principals to `somna mcp
//! --http`. A token is printed once, when it is added; the store keeps only its SHA-256.

use clap::{Args, Subcommand};
use sha2::Digest;
use somna::text;
use somna::Error;

use crate::cli::context::Context;
use crate::cli::verb::Verb;

#[derive(Args, Debug)]
pub struct TokenArgs {
    #[command(subcommand)]
    pub cmd: TokenCmd,
}

#[derive(Subcommand, Debug)]
pub enum TokenCmd {
    /// Make a token for PRINCIPAL and print it (once: only its hash is stored)
    Add(AddArgs),
    /// List the tokens: the start of each hash, its principal, who added it and when
    List,
    /// Revoke a token by the id `token list` shows; the server refuses it at once
    Revoke(RevokeArgs),
}

#[derive(Args, Debug)]
pub struct AddArgs {
    /// The principal the token authenticates
    #[arg(value_name = "PRINCIPAL")]
    pub who: String,
}

#[derive(Args, Debug)]
pub struct RevokeArgs {
    /// The token's id, as `token list` shows it
    pub id: String,
}

/// Marks a response to a request with a valid session (the inspector) or token (MCP), so that
/// the listener never sheds its connection. Here, beside the tokens, so that the inspector and
/// the MCP server share it without naming each other.
/// It carries the hash of the token, which authenticates a bounded number of connections.
#[derive(Clone, Debug)]
pub struct Authenticated(pub String);

/// The address a request came from (the listener's), for the inspector's login limit.
#[derive(Clone, Copy, Debug)]
pub struct Peer(pub std::net::IpAddr);

/// Marks a response to a request whose session's token was found revoked: its connection is
/// closed after it and may be shed.
#[derive(Clone, Debug)]
pub struct Revoked;

/// Whether the command only reads.
pub fn reads_only(a: &TokenArgs) -> bool {
    matches!(a.cmd, TokenCmd::List)
}

/// The SHA-256 of a token, in lowercase hex: what the store keys it by.
pub fn token_hash(token: &str) -> String {
    sha2::Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Runs `token add`, `token list` or `token revoke`.
pub fn run(cx: &mut Context<'_>, a: &TokenArgs) -> Result<u8, Error> {
    match &a.cmd {
        TokenCmd::Add(a) => add(cx, a),
        TokenCmd::List => list(cx),
        TokenCmd::Revoke(a) => revoke(cx, a),
    }
}

/// `N` bytes of the operating system's randomness as `2 * N` hex digits (tokens, the web
/// inspector's session ids and CSRF tokens).
pub fn random_hex<const N: usize>() -> Result<String, Error> {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes)
        .map_err(|e| Error::Io(std::io::Error::other(format!("no randomness: {e}"))))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// A new token: `somna_` and 64 hex digits of the operating system's randomness.
fn new_token() -> Result<String, Error> {
    Ok(format!("somna_{}", random_hex::<32>()?))
}

/// Stores the new token's hash and prints the token, once.
fn add(cx: &mut Context<'_>, a: &AddArgs) -> Result<u8, Error> {
    let token = new_token()?;
    let info = cx.store.token_add(&token_hash(&token), &a.who)?;
    cx.emit(&serde_json::json!({"token": token, "id": info.id, "principal": info.principal}))?;
    if cx.text_wanted() {
        writeln!(cx.out, "{token}")?;
        eprintln!(
            "somna: token {} authenticates {} over `somna mcp --http`; it is shown only now (somna keeps its hash).",
            info.id,
            text::display_safe(&info.principal)
        );
    }
    Ok(0)
}

/// Lists the tokens, one per line: id, principal, who added it, when.
fn list(cx: &mut Context<'_>) -> Result<u8, Error> {
    let tokens = cx.store.tokens()?;
    cx.emit(&tokens)?;
    if !cx.text_wanted() {
        return Ok(0);
    }
    if tokens.is_empty() {
        writeln!(
            cx.out,
            "No tokens: `somna mcp --http` refuses every request."
        )?;
    }
    for t in tokens {
        writeln!(
            cx.out,
            "{} {} added by {} {}",
            t.id,
            text::display_safe(&t.principal),
            text::display_safe(&t.created_by),
            text::rfc3339_of(t.created_us)
        )?;
    }
    Ok(0)
}

/// Removes the token; a server refuses it from its next request on.
fn revoke(cx: &mut Context<'_>, a: &RevokeArgs) -> Result<u8, Error> {
    let n = cx.store.token_revoke(&a.id)?;
    cx.emit(&serde_json::json!({"revoked": n}))?;
    if cx.text_wanted() {
        if n == 0 {
            writeln!(cx.out, "No token {}.", text::display_safe(&a.id))?;
        } else {
            writeln!(
                cx.out,
                "Revoked {n} token{}.",
                if n == 1 { "" } else { "s" }
            )?;
        }
    }
    Ok(if n == 0 { 3 } else { 0 })
}

/// The verb `token` and its subcommands.
pub const TOKEN: Verb<TokenArgs> = Verb::reads_when(run, reads_only);
