//! Tokens (`/v1/tokens`, the `admin` scope): the request that makes one ([`CreateToken`]), a
//! token as the API lists it ([`TokenInfo`], [`TokenList`]), and a revocation's answer
//! ([`Revoked`]).

use serde::{Deserialize, Serialize};

/// `POST /v1/tokens`'s body.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateToken {
    /// The token's name: a-z, 0-9, '-' and '_'.
    pub name: String,
    /// What it allows: `read`, `invoke`, `deploy`, `admin`.
    pub scopes: Vec<String>,
    /// Replace a token of the same name (which stops working) instead of refusing.
    #[serde(default)]
    pub replace: bool,
}

/// A token as the API shows it: never the token itself, but in the answer that made it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenInfo {
    /// Its name.
    pub name: String,
    /// What it allows.
    pub scopes: Vec<String>,
    /// When it was made, in milliseconds since the Unix epoch.
    pub created_ms: u64,
    /// The token: only in the answer to its creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
}

/// `GET /v1/tokens`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenList {
    /// Every token, by name.
    pub tokens: Vec<TokenInfo>,
}

/// `DELETE /v1/tokens/{name}`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Revoked {
    /// The token.
    pub name: String,
    /// Always true: a revocation that fails answers an error.
    pub revoked: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_listed_token_has_no_token_and_a_made_one_has() {
        let listed: TokenInfo =
            serde_json::from_str(r#"{"name": "ci", "scopes": ["deploy"], "created_ms": 1}"#)
                .unwrap();
        assert_eq!(listed.token, None);
        assert!(
            serde_json::to_value(&listed)
                .unwrap()
                .get("token")
                .is_none()
        );
        let made = TokenInfo {
            token: Some("mote_abc".into()),
            ..listed
        };
        let again: TokenInfo =
            serde_json::from_str(&serde_json::to_string(&made).unwrap()).unwrap();
        assert_eq!(again, made);
    }

    #[test]
    fn a_token_request_with_a_field_the_server_does_not_know_is_refused() {
        let refused = serde_json::from_str::<CreateToken>(
            r#"{"name": "ci", "scopes": ["read"], "scope": "admin"}"#,
        );
        assert!(refused.is_err());
        let taken: CreateToken =
            serde_json::from_str(r#"{"name": "ci", "scopes": ["read"]}"#).unwrap();
        assert!(!taken.replace);
    }
}
