//! Token records in the state store, under `/mote/tokens/NAME`: made, listed and revoked
//! through any node. Every node follows the prefix into its [`Grants`] (`Grants::relist`, then
//! `Grants::apply` for each change), with the same watch that follows the other records.

use crate::grants::Grants;
use crate::scope::Scopes;
use crate::token::{Token, TokenName, TokenRecord};
use mote_state::{Change, EtcdStore, StateError, StateStore};

/// Where token records live, under the platform's key prefix.
pub const TOKEN_PREFIX: &str = "tokens/";

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

    /// Loads every record into `grants`.
    pub async fn load(&self, grants: &Grants) -> Result<(), TokenStoreError> {
        grants.relist(self.store.list(TOKEN_PREFIX).await?);
        Ok(())
    }
}

impl Grants {
    /// Replaces the table with a listing of [`TOKEN_PREFIX`]; a damaged record is logged and left
    /// out.
    pub fn relist(&self, listing: Vec<(String, Vec<u8>)>) {
        self.replace(records(listing));
    }

    /// Applies one change under [`TOKEN_PREFIX`].
    pub fn apply(&self, change: Change) {
        match change {
            Change::Put { key, value } => match parse(&key, &value) {
                Ok(record) => self.put(record),
                Err(e) => tracing::warn!(error = %e, "a token record is ignored"),
            },
            Change::Delete { key } => {
                if let Some(name) = key.strip_prefix(TOKEN_PREFIX) {
                    self.remove(name);
                }
            }
        }
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
