//! `mote token`: making, listing and revoking the platform's tokens (needs an admin token).

use super::client::{Server, base, request};
use super::output::outln;
use anyhow::Context;
use clap::{Args, Subcommand};
use serde::Deserialize;

/// `mote token ...`.
#[derive(Subcommand)]
pub enum TokenCommand {
    /// Make a token; it is printed once, as the last line, and stored only as a hash.
    Create(CreateArgs),
    /// List the tokens (names and scopes, never the tokens).
    Ls(LsArgs),
    /// Revoke a token: every node stops taking it within a second.
    Revoke(RevokeArgs),
}

/// Options of `mote token create`.
#[derive(Args)]
pub struct CreateArgs {
    /// The token's name: a-z, 0-9, '-' and '_'.
    name: String,
    /// What it allows: read, invoke, deploy, admin (repeat the flag or separate with commas).
    #[arg(long = "scope", required = true, value_delimiter = ',')]
    scopes: Vec<String>,
    /// Replace a token of the same name, which stops working.
    #[arg(long)]
    replace: bool,
    #[command(flatten)]
    server: Server,
}

/// Options of `mote token ls`.
#[derive(Args)]
pub struct LsArgs {
    #[command(flatten)]
    server: Server,
}

/// Options of `mote token revoke`.
#[derive(Args)]
pub struct RevokeArgs {
    /// The token to revoke.
    name: String,
    #[command(flatten)]
    server: Server,
}

#[derive(Deserialize)]
struct TokenInfo {
    name: String,
    scopes: Vec<String>,
    created_ms: u64,
    token: Option<String>,
}

/// Runs a `mote token` command.
pub fn run(command: TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::Create(args) => {
            let url = format!("{}/v1/tokens", base(&args.server));
            let body = serde_json::json!({
                "name": args.name,
                "scopes": args.scopes,
                "replace": args.replace,
            });
            let answer = args.server.post_json(&url, &body)?;
            let made: TokenInfo =
                serde_json::from_slice(&answer).context("unexpected token response")?;
            let token = made.token.context("the server sent no token")?;
            eprintln!(
                "token `{}` with scopes {}; it is shown only now:",
                made.name,
                made.scopes.join(",")
            );
            outln!("{token}");
        }
        TokenCommand::Ls(args) => {
            #[derive(Deserialize)]
            struct TokenList {
                tokens: Vec<TokenInfo>,
            }
            let url = format!("{}/v1/tokens", base(&args.server));
            let answer = request(&args.server, args.server.get(&url)?.call())?;
            let list: TokenList =
                serde_json::from_slice(&answer).context("unexpected token list")?;
            outln!("{:<32} {:<28} CREATED", "NAME", "SCOPES");
            for t in list.tokens {
                outln!(
                    "{:<32} {:<28} {}",
                    t.name,
                    t.scopes.join(","),
                    humantime::format_rfc3339_seconds(
                        std::time::UNIX_EPOCH + std::time::Duration::from_millis(t.created_ms)
                    )
                );
            }
        }
        TokenCommand::Revoke(args) => {
            let url = format!("{}/v1/tokens/{}", base(&args.server), args.name);
            request(&args.server, args.server.delete(&url)?.call())?;
            outln!("revoked {}", args.name);
        }
    }
    Ok(())
}
