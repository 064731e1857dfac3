//! Token records in the state store, under `/mote/tokens/NAME`: made, listed and revoked
//! through any node, and followed by every node into its [`Grants`].

use crate::grants::Grants;
use crate::scope::Scopes;
use crate::token::{Token, TokenName, TokenRecord};
use mote_state::{Change, EtcdStore, PrefixWatch, StateError, StateStore};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// Where token records live, under the platform's key prefix.
pub const TOKEN_PREFIX: &str = "tokens/";

/// How long to wait before following again after the store failed.
const RETRY: Duration = Duration::from_secs(1);

/// Why a token could not be made, listed or revoked.
#[derive(Debug, thiserror::Error)]
pub enum TokenStoreError {
    /// A token of that name exists.
    #[error(
        "a token named `{0}` exists; revoke it first (`mote token revoke {0}`) or choose another name"
    )]
    Taken(TokenName),
    /// No token of that name exists.
    #[error("no token is named `{0}`; `mote token ls` lists them")]
    NotFound(String),
    /// A token without scopes would allow nothing.
    #[error("a token needs at least one scope: read, invoke, deploy or admin")]
    NoScopes,
    /// The state store failed.
    #[error(transparent)]
    State(#[from] StateError),
    /// A stored record is not a token record.
    #[error("the token record at {key} is damaged: {message}")]
    Damaged {
        /// Its key.
        key: String,
        /// What is wrong with it.
        message: String,
    },
}

/// The token records of a platform.
#[derive(Clone)]
pub struct TokenStore {
    store: EtcdStore,
}

fn key(name: &str) -> String {
    format!("{TOKEN_PREFIX}{name}")
}

fn parse(key: &str, value: &[u8]) -> Result<TokenRecord, TokenStoreError> {
    serde_json::from_slice(value).map_err(|e| TokenStoreError::Damaged {
        key: key.to_owned(),
        message: e.to_string(),
    })
}

impl TokenStore {
    /// Token records in `store`.
    pub fn new(store: EtcdStore) -> Self {
        Self { store }
    }

    /// Makes a token named `name` with `scopes`: the record is stored, the token returned (it
    /// is nowhere else). With `replace`, an existing token of that name is replaced (and stops
    /// working); otherwise its existence is an error.
    pub async fn create(
        &self,
        name: TokenName,
        scopes: Scopes,
        replace: bool,
    ) -> Result<(Token, TokenRecord), TokenStoreError> {
        if scopes.is_empty() {
            return Err(TokenStoreError::NoScopes);
        }
        if !replace && self.store.get(&key(name.as_str())).await?.is_some() {
            return Err(TokenStoreError::Taken(name));
        }
        let token = Token::generate();
        let record = TokenRecord::new(name, scopes, &token);
        let value = serde_json::to_vec(&record).expect("a token record serializes");
        self.store.put(&key(record.name.as_str()), value).await?;
        Ok((token, record))
    }

    /// Every token record, by name.
    pub async fn list(&self) -> Result<Vec<TokenRecord>, TokenStoreError> {
        self.store
            .list(TOKEN_PREFIX)
            .await?
            .iter()
            .map(|(key, value)| parse(key, value))
            .collect()
    }

    /// Revokes the token `name`: every node stops taking it once its watch sees the delete.
    pub async fn revoke(&self, name: &str) -> Result<(), TokenStoreError> {
        match self.store.delete(&key(name)).await? {
            true => Ok(()),
            false => Err(TokenStoreError::NotFound(name.to_owned())),
        }
    }

    /// Loads every record into `grants`, then keeps it current in a task for as long as
    /// `grants` lives, listing again after a failure of the store.
    pub async fn follow(&self, grants: &Arc<Grants>) -> Result<(), TokenStoreError> {
        let (listing, watch) = self.store.watch_prefix(TOKEN_PREFIX).await?;
        grants.replace(records(listing));
        tokio::spawn(follow(self.store.clone(), Arc::downgrade(grants), watch));
        Ok(())
    }
}

/// The well-formed records of a listing; a damaged one is logged and left out.
fn records(listing: Vec<(String, Vec<u8>)>) -> impl Iterator<Item = TokenRecord> {
    listing
        .into_iter()
        .filter_map(|(key, value)| match parse(&key, &value) {
            Ok(record) => Some(record),
            Err(e) => {
                tracing::warn!(error = %e, "a token record is ignored");
                None
            }
        })
}

async fn follow(store: EtcdStore, grants: Weak<Grants>, mut watch: PrefixWatch) {
    loop {
        let change = watch.next().await;
        let Some(table) = grants.upgrade() else {
            return;
        };
        match change {
            Ok(Change::Put { key, value }) => match parse(&key, &value) {
                Ok(record) => table.put(record),
                Err(e) => tracing::warn!(error = %e, "a token record is ignored"),
            },
            Ok(Change::Delete { key }) => {
                if let Some(name) = key.strip_prefix(TOKEN_PREFIX) {
                    table.remove(name);
                }
            }
            Err(e) => {
                tracing::warn!(error = %e, "lost the watch on token records; listing them again in a second");
                drop(table);
                watch = loop {
                    tokio::time::sleep(RETRY).await;
                    let Some(table) = grants.upgrade() else {
                        return;
                    };
                    match store.watch_prefix(TOKEN_PREFIX).await {
                        Ok((listing, watch)) => {
                            table.replace(records(listing));
                            break watch;
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "cannot list token records; trying again in a second")
                        }
                    }
                };
            }
        }
    }
}
