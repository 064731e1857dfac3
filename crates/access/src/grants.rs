//! The node's table of live tokens: a map from sha256 to what the token allows, replaced whole
//! on every change so that checks, which happen on every request, take no lock. Every change is
//! also announced, so that what a token opened that stays open (a followed log, the dashboard's
//! stream) ends when the token stops allowing it ([`Grants::revoked`]), without polling.

use crate::scope::{Scope, Scopes};
use crate::token::{Token, TokenName, TokenRecord, hash_token};
use arc_swap::ArcSwap;
use rustc_hash::FxHashMap;
use std::sync::Arc;
use tokio::sync::watch;

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

/// A token that passed a check: its hash and what it allows, enough to check it again later
/// without the token itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Holder {
    /// The token's sha256.
    pub hash: [u8; 32],
    /// Its scopes when it was checked.
    pub scopes: Scopes,
}

/// Every live token, by hash.
pub struct Grants {
    table: ArcSwap<FxHashMap<[u8; 32], Grant>>,
    /// Told of every change to `table`.
    changed: watch::Sender<()>,
}

impl Default for Grants {
    fn default() -> Self {
        Self {
            table: ArcSwap::default(),
            changed: watch::Sender::new(()),
        }
    }
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
        self.changed.send_replace(());
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
        self.changed.send_replace(());
    }

    /// Drops the token named `name`, if it is in the table.
    pub fn remove(&self, name: &str) {
        self.table.rcu(|table| {
            let mut table = FxHashMap::clone(table);
            table.retain(|_, g| g.name.as_str() != name);
            table
        });
        self.changed.send_replace(());
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
    /// through; if so, who holds the token.
    pub fn check(&self, authorization: Option<&[u8]>, needed: Scope) -> Result<Holder, Denied> {
        let token = bearer(authorization.ok_or(Denied::Missing { needed })?)?;
        let hash = hash_token(token);
        let table = self.table.load();
        let grant = table.get(&hash).ok_or(Denied::Unknown { needed })?;
        match grant.scopes.allows(needed) {
            true => Ok(Holder {
                hash,
                scopes: grant.scopes,
            }),
            false => Err(Denied::Scope {
                name: grant.name.clone(),
                has: grant.scopes,
                needed,
            }),
        }
    }

    /// Whether the token with sha256 `hash` is live and allows `needed`.
    pub fn allows(&self, hash: &[u8; 32], needed: Scope) -> bool {
        self.table
            .load()
            .get(hash)
            .is_some_and(|grant| grant.scopes.allows(needed))
    }

    /// Resolves once the token `holder` no longer allows `needed`: it was revoked, replaced, or
    /// its scopes changed. Checked again on every change of the table, so it resolves within the
    /// time the change takes to reach this node.
    pub async fn revoked(&self, holder: Holder, needed: Scope) {
        // Subscribed before the first check, so that no change between them goes unseen.
        let mut changes = self.changed.subscribe();
        while self.allows(&holder.hash, needed) {
            if changes.changed().await.is_err() {
                // The table is gone with its node; nothing revokes the token any more.
                std::future::pending::<()>().await;
            }
        }
    }
}

/// Whether an `Authorization` header carries a mote token (or something shaped like one, live or
/// not), which a guest must never see.
pub fn is_mote_credential(authorization: &[u8]) -> bool {
    bearer(authorization).is_ok_and(|token| {
        token.len() >= Token::PREFIX.len()
            && token[..Token::PREFIX.len()].eq_ignore_ascii_case(Token::PREFIX.as_bytes())
    })
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
        assert!(
            grants
                .check(Some(&header(&deployer)), Scope::Deploy)
                .is_ok()
        );
        assert!(grants.check(Some(&header(&caller)), Scope::Invoke).is_ok());
        let lower = format!("bearer  {} ", caller.expose());
        assert!(grants.check(Some(lower.as_bytes()), Scope::Invoke).is_ok());
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
        assert!(grants.check(Some(&header(&old)), Scope::Invoke).is_ok());
        grants.put(record("ci", &[Scope::Invoke], &new));
        assert!(grants.check(Some(&header(&old)), Scope::Invoke).is_err());
        assert!(grants.check(Some(&header(&new)), Scope::Invoke).is_ok());
        grants.remove("ci");
        assert!(grants.check(Some(&header(&new)), Scope::Invoke).is_err());
        assert!(grants.is_empty());
    }

    #[test]
    fn a_check_names_the_holder_by_hash_and_scopes() {
        let grants = Grants::new();
        let token = Token::generate();
        grants.put(record("ci", &[Scope::Read], &token));
        let holder = grants.check(Some(&header(&token)), Scope::Read).unwrap();
        assert_eq!(holder.hash, token.sha256());
        assert!(grants.allows(&holder.hash, Scope::Read));
        assert!(!grants.allows(&holder.hash, Scope::Invoke));
    }

    #[tokio::test]
    async fn revoked_resolves_when_the_token_goes_and_not_before() {
        let grants = Arc::new(Grants::new());
        let (kept, gone) = (Token::generate(), Token::generate());
        grants.put(record("kept", &[Scope::Read], &kept));
        grants.put(record("gone", &[Scope::Read], &gone));
        let holder = grants.check(Some(&header(&gone)), Scope::Read).unwrap();
        let watcher = tokio::spawn({
            let grants = grants.clone();
            async move { grants.revoked(holder, Scope::Read).await }
        });
        // A change that leaves the token alone does not end it.
        grants.put(record("other", &[Scope::Invoke], &Token::generate()));
        tokio::task::yield_now().await;
        assert!(!watcher.is_finished());
        grants.remove("gone");
        tokio::time::timeout(std::time::Duration::from_secs(5), watcher)
            .await
            .expect("revocation was not noticed")
            .unwrap();
        // Narrowed scopes count as revoked for what they no longer allow.
        let holder = grants.check(Some(&header(&kept)), Scope::Read).unwrap();
        grants.put(record("kept", &[Scope::Invoke], &kept));
        tokio::time::timeout(
            std::time::Duration::from_secs(5),
            grants.revoked(holder, Scope::Read),
        )
        .await
        .expect("a narrowed token still allowed the stream");
    }

    #[test]
    fn mote_credentials_are_recognised_whatever_their_case_or_liveness() {
        let token = Token::generate();
        assert!(is_mote_credential(&header(&token)));
        assert!(is_mote_credential(b"bearer MOTE_not-even-hex"));
        assert!(is_mote_credential(b"Bearer   mote_x  "));
        assert!(!is_mote_credential(b"Bearer github_pat_123"));
        assert!(!is_mote_credential(b"Basic bW90ZV94Og=="));
        assert!(!is_mote_credential(b"mote_abc"));
    }
}
