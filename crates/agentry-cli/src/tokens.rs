//! `agentry token issue|jwks`: a development identity provider. It signs user tokens with an
//! Ed25519 key kept in a file and prints the key's JWKS, so a team can try JWT-protected
//! agents and delegation on one machine; real deployments take tokens from their own
//! identity provider and give agentry its JWKS.

use std::path::PathBuf;
use std::time::Duration;

use agentry::governance::{Grant, TokenIssuer};
use clap::Subcommand;

use crate::error::CliError;

#[derive(Subcommand)]
pub(crate) enum TokenCommand {
    /// Sign a token for a user (the key is made, mode 0600, when the file does not exist).
    Issue {
        /// The signing key (PKCS#8).
        #[arg(long)]
        key: PathBuf,
        /// The `iss` the token names.
        #[arg(long)]
        issuer: String,
        /// The user (`sub`).
        #[arg(long)]
        sub: String,
        /// The agent it is for (`aud`), e.g. its URL.
        #[arg(long)]
        aud: String,
        /// Its scopes, space-separated.
        #[arg(long, default_value = "")]
        scope: String,
        /// Its lifetime in seconds.
        #[arg(long, default_value_t = 600)]
        ttl: u64,
    },
    /// Print the public keys (JWKS) of a key file, for `[server.jwt] jwks_file`.
    Jwks {
        #[arg(long)]
        key: PathBuf,
        #[arg(long)]
        issuer: String,
    },
}

pub(crate) fn run(cmd: TokenCommand) -> Result<(), CliError> {
    let fail = |e: agentry::governance::TokenError| CliError::Usage(e.to_string());
    match cmd {
        TokenCommand::Issue {
            key,
            issuer,
            sub,
            aud,
            scope,
            ttl,
        } => {
            let issuer = TokenIssuer::load_or_create(issuer, &key).map_err(fail)?;
            let token = issuer
                .issue(&Grant {
                    subject: sub,
                    audience: aud,
                    scopes: scope.split_whitespace().map(str::to_owned).collect(),
                    lifetime: Duration::from_secs(ttl),
                    act: None,
                })
                .map_err(fail)?;
            println!("{token}");
        }
        TokenCommand::Jwks { key, issuer } => {
            let issuer = TokenIssuer::load_or_create(issuer, &key).map_err(fail)?;
            println!("{}", issuer.jwks());
        }
    }
    Ok(())
}
