//! The node's table of live tokens: a map from sha256 to what the token allows, replaced whole
//! on every change so that checks, which happen on every request, take no lock.

use crate::scope::{Scope, Scopes};
use crate::token::{TokenName, TokenRecord, hash_token};
use arc_swap::ArcSwap;
use rustc_hash::FxHashMap;
use std::sync::Arc;

/// What one live token allows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grant {
    /// The token's name.
    pub name: TokenName,
    /// Its scopes.
    pub scopes: Scopes,
}

/// Why a request's credentials do not let it through.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// No `Authorization` header.
    #[error(
        "this needs a token with the `{needed}` scope: send `Authorization: Bearer TOKEN` (the CLI reads MOTE_TOKEN, then DATA/admin.token; an admin makes tokens with `mote token create NAME --scope {needed}`)"
    )]
    Missing {
        /// The scope the request needs.
        needed: Scope,
    },
    /// An `Authorization` header that is not `Bearer TOKEN`.
    #[error("the Authorization header must be `Bearer TOKEN`")]
    Malformed,
    /// A token no one made, or one that was revoked.
    #[error(
        "the token is not valid (unknown or revoked); ask an admin for one with the `{needed}` scope"
    )]
    Unknown {
        /// The scope the request needs.
        needed: Scope,
    },
    /// A valid token without the scope.
    #[error("token `{name}` has the scopes [{has}]; this needs `{needed}`")]
    Scope {
        /// The token's name.
        name: TokenName,
        /// What it allows.
        has: Scopes,
        /// What the request needs.
        needed: Scope,
    },
}

impl Denied {
    /// Whether the failure is the credentials' (401: authenticate again), not the scope's (403).
    pub fn is_unauthenticated(&self) -> bool {
        !matches!(self, Denied::Scope { .. })
    }
}

/// Every live token, by hash.
#[derive(Default)]
pub struct Grants {
    table: ArcSwap<FxHashMap<[u8; 32], Grant>>,
}

impl Grants {
    /// An empty table: nothing gets through until records arrive.
    pub fn new() -> Self {
        Self::default()
    }

    /// Replaces the table with `records` (a fresh listing of the store).
    pub fn replace(&self, records: impl IntoIterator<Item = TokenRecord>) {
        let table = records.into_iter().filter_map(entry).collect();
        self.table.store(Arc::new(table));
    }

    /// Adds or replaces one record.
    pub fn put(&self, record: TokenRecord) {
        let Some((hash, grant)) = entry(record) else {
            return;
        };
        self.table.rcu(|table| {
            let mut table = FxHashMap::clone(table);
            table.retain(|_, g| g.name != grant.name);
            table.insert(hash, grant.clone());
            table
        });
    }

    /// Drops the token named `name`, if it is in the table.
    pub fn remove(&self, name: &str) {
        self.table.rcu(|table| {
            let mut table = FxHashMap::clone(table);
            table.retain(|_, g| g.name.as_str() != name);
            table
        });
    }

    /// How many tokens are live.
    pub fn len(&self) -> usize {
        self.table.load().len()
    }

    /// Whether no token is live.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the `Authorization` header `authorization` lets a request that needs `needed`
    /// through.
    pub fn check(&self, authorization: Option<&[u8]>, needed: Scope) -> Result<(), Denied> {
        let token = bearer(authorization.ok_or(Denied::Missing { needed })?)?;
        let table = self.table.load();
        let grant = table
            .get(&hash_token(token))
            .ok_or(Denied::Unknown { needed })?;
        match grant.scopes.allows(needed) {
            true => Ok(()),
            false => Err(Denied::Scope {
                name: grant.name.clone(),
                has: grant.scopes,
                needed,
            }),
        }
    }
}

fn entry(record: TokenRecord) -> Option<([u8; 32], Grant)> {
    let Some(hash) = record.hash() else {
        tracing::warn!(token = %record.name, "a token record holds no valid sha256; it is ignored");
        return None;
    };
    let scopes = record.scope_set();
    Some((
        hash,
        Grant {
            name: record.name,
            scopes,
        },
    ))
}

/// The token in `Bearer TOKEN` (the scheme is case-insensitive, as RFC 7235 says).
fn bearer(header: &[u8]) -> Result<&[u8], Denied> {
    const SCHEME: &[u8] = b"bearer ";
    match header.get(..SCHEME.len()) {
        Some(scheme) if scheme.eq_ignore_ascii_case(SCHEME) => {
            let token = header[SCHEME.len()..].trim_ascii();
            match token.is_empty() {
                true => Err(Denied::Malformed),
                false => Ok(token),
            }
        }
        _ => Err(Denied::Malformed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::Token;

    fn record(name: &str, scopes: &[Scope], token: &Token) -> TokenRecord {
        TokenRecord::new(
            TokenName::new(name).unwrap(),
            scopes.iter().copied().collect(),
            token,
        )
    }

    fn header(token: &Token) -> Vec<u8> {
        format!("Bearer {}", token.expose()).into_bytes()
    }

    #[test]
    fn checks_presence_form_validity_and_scope() {
        let grants = Grants::new();
        let (deployer, caller) = (Token::generate(), Token::generate());
        grants.replace([
            record("deployer", &[Scope::Deploy, Scope::Read], &deployer),
            record("caller", &[Scope::Invoke], &caller),
        ]);
        assert_eq!(
            grants.check(Some(&header(&deployer)), Scope::Deploy),
            Ok(())
        );
        assert_eq!(grants.check(Some(&header(&caller)), Scope::Invoke), Ok(()));
        let lower = format!("bearer  {} ", caller.expose());
        assert_eq!(grants.check(Some(lower.as_bytes()), Scope::Invoke), Ok(()));
        assert_eq!(
            grants.check(None, Scope::Read),
            Err(Denied::Missing {
                needed: Scope::Read
            })
        );
        assert_eq!(
            grants.check(Some(b"Basic dXNlcjpwdw=="), Scope::Read),
            Err(Denied::Malformed)
        );
        assert_eq!(
            grants.check(Some(b"Bearer mote_0000"), Scope::Read),
            Err(Denied::Unknown {
                needed: Scope::Read
            })
        );
        let denied = grants
            .check(Some(&header(&caller)), Scope::Deploy)
            .unwrap_err();
        assert!(!denied.is_unauthenticated());
        assert_eq!(
            denied.to_string(),
            "token `caller` has the scopes [invoke]; this needs `deploy`"
        );
    }

    #[test]
    fn a_removed_or_replaced_token_stops_working() {
        let grants = Grants::new();
        let (old, new) = (Token::generate(), Token::generate());
        grants.put(record("ci", &[Scope::Invoke], &old));
        assert_eq!(grants.check(Some(&header(&old)), Scope::Invoke), Ok(()));
        grants.put(record("ci", &[Scope::Invoke], &new));
        assert!(grants.check(Some(&header(&old)), Scope::Invoke).is_err());
        assert_eq!(grants.check(Some(&header(&new)), Scope::Invoke), Ok(()));
        grants.remove("ci");
        assert!(grants.check(Some(&header(&new)), Scope::Invoke).is_err());
        assert!(grants.is_empty());
    }
}
