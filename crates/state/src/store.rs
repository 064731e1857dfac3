//! The key-value interface every control-plane store implements.

use crate::StateError;
use async_trait::async_trait;

/// A key-value store for control-plane records.
#[async_trait]
pub trait StateStore: Send + Sync + 'static {
    /// The value at `key`, if any.
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StateError>;
    /// Sets `key` to `value`; durable when this returns.
    async fn put(&self, key: &str, value: Vec<u8>) -> Result<(), StateError>;
    /// Removes `key`; returns whether it existed.
    async fn delete(&self, key: &str) -> Result<bool, StateError>;
    /// Every key starting with `prefix` and its value, in key order.
    async fn list(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StateError>;
}
