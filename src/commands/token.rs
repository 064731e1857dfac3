//! `mote token`: making, listing and revoking the platform's tokens (needs an admin token).

use super::client::Server;
use super::output::outln;
use anyhow::Context;
use clap::{Args, Subcommand};
use mote_api::CreateToken;

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

/// Runs a `mote token` command.
pub fn run(command: TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::Create(args) => {
            let request = CreateToken {
                name: args.name,
                scopes: args.scopes,
                replace: args.replace,
            };
            let api = args.server.api()?;
            let made = args.server.answer(api.create_token(&request))?;
            let token = made.token.context("the server sent no token")?;
            eprintln!(
                "token `{}` with scopes {}; it is shown only now:",
                made.name,
                made.scopes.join(",")
            );
            outln!("{token}");
        }
        TokenCommand::Ls(args) => {
            let api = args.server.api()?;
            let list = args.server.answer(api.tokens())?;
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
            let api = args.server.api()?;
            args.server.answer(api.revoke_token(&args.name))?;
            outln!("revoked {}", args.name);
        }
    }
    Ok(())
}
