//! Tokens: a secret made once and shown once, and the record the store keeps of it.

use crate::scope::{Scope, Scopes};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;

/// A new token's secret: `mote_` and 32 random bytes in hex. `Debug` never shows it.
pub struct Token(String);

impl Token {
    /// Prefix of every token, so that a leaked one is recognisable (and secret scanners can
    /// find it).
    pub const PREFIX: &'static str = "mote_";

    /// A fresh token from the operating system's random source.
    pub fn generate() -> Self {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes).expect("the operating system's random source is available");
        Token(format!("{}{}", Self::PREFIX, hex::encode(bytes)))
    }

    /// The secret, to hand to its owner once.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// What the store keeps of it.
    pub fn sha256(&self) -> [u8; 32] {
        hash_token(self.0.as_bytes())
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(..)")
    }
}

/// The sha256 of a presented token. Tokens carry 256 random bits, so a fast hash is enough: no
/// dictionary exists to try against a leaked record.
pub fn hash_token(token: &[u8]) -> [u8; 32] {
    Sha256::digest(token).into()
}

/// A token's name: what `mote token ls` shows and `revoke` takes: 1 to 63 characters of `a-z`,
/// `0-9`, `-` and `_`, starting with a letter or digit.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct TokenName(String);

/// Why a text is not a token name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "token name {0:?} is not valid: use 1 to 63 characters of a-z, 0-9, '-' and '_', starting with a letter or digit"
)]
pub struct TokenNameError(pub String);

impl TokenName {
    /// Checks `name` against the rules.
    pub fn new(name: impl Into<String>) -> Result<Self, TokenNameError> {
        let name = name.into();
        let allowed =
            |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_';
        let first = name.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit());
        match first && name.len() <= 63 && name.chars().all(allowed) {
            true => Ok(Self(name)),
            false => Err(TokenNameError(name)),
        }
    }

    /// The name as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for TokenName {
    type Error = TokenNameError;

    fn try_from(name: String) -> Result<Self, Self::Error> {
        Self::new(name)
    }
}

impl From<TokenName> for String {
    fn from(name: TokenName) -> String {
        name.0
    }
}

impl fmt::Display for TokenName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the state store keeps of a token: never the token, only its hash.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRecord {
    /// The token's name.
    pub name: TokenName,
    /// What it allows.
    pub scopes: Vec<Scope>,
    /// The sha256 of the token, in hex.
    pub sha256: String,
    /// When it was made, in milliseconds since the Unix epoch.
    pub created_ms: u64,
}

impl TokenRecord {
    /// The record of `token`, made now.
    pub fn new(name: TokenName, scopes: Scopes, token: &Token) -> Self {
        Self {
            name,
            scopes: scopes.iter().collect(),
            sha256: hex::encode(token.sha256()),
            created_ms: std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
        }
    }

    /// The scopes as a set.
    pub fn scope_set(&self) -> Scopes {
        self.scopes.iter().copied().collect()
    }

    /// The hash as bytes, if the record holds a well-formed one.
    pub fn hash(&self) -> Option<[u8; 32]> {
        let mut hash = [0u8; 32];
        hex::decode_to_slice(&self.sha256, &mut hash).ok()?;
        Some(hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_unique_and_hashed_not_kept() {
        let (a, b) = (Token::generate(), Token::generate());
        assert_ne!(a.expose(), b.expose());
        assert!(a.expose().starts_with(Token::PREFIX));
        assert_eq!(a.expose().len(), Token::PREFIX.len() + 64);
        let scopes: Scopes = [Scope::Invoke].into_iter().collect();
        let record = TokenRecord::new(TokenName::new("ci").unwrap(), scopes, &a);
        let json = serde_json::to_string(&record).unwrap();
        assert!(
            !json.contains(a.expose()),
            "the record holds the token: {json}"
        );
        assert_eq!(record.hash(), Some(hash_token(a.expose().as_bytes())));
        assert_eq!(format!("{a:?}"), "Token(..)");
    }

    #[test]
    fn names_follow_the_rules() {
        assert!(TokenName::new("ci-deploy_2").is_ok());
        for bad in ["", "-x", "Admin", "a b", &"x".repeat(64)] {
            assert!(TokenName::new(bad).is_err(), "{bad:?} was taken");
        }
    }
}
