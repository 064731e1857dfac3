//! Where mote's control-plane state lives.
//!
//! - [`StateStore`]: a small key-value interface shaped like etcd's (get, put, delete, prefix
//!   list over string keys), so that the etcd-API store, or a real etcd, can stand behind it.
//! - [`EtcdStore`]: the implementation `mote up` uses, an etcd v3 client: to the mote store
//!   replica `mote up` embeds, or to any etcd-API endpoint given with `--store`.
//!   Beyond the trait, it keeps keys alive under leases ([`LeasedKey`]) and follows a prefix
//!   ([`PrefixWatch`]): how nodes find each other.
//! - [`EmbeddedStore`]: a redb database file in the process, for nodes that run without a store
//!   server (the in-process benchmarks and tests); every acknowledged write is durable.
//! - [`ModuleBlobs`]: module bytes, content-addressed by sha256 in a directory. Modules are kept
//!   out of the key-value store because they are large and immutable; records point to them.

mod blobs;
mod embedded;
mod etcd;
mod lease;
mod watch;

pub use blobs::ModuleBlobs;
pub use embedded::EmbeddedStore;
pub use etcd::{EtcdStore, KEY_PREFIX};
pub use lease::LeasedKey;
pub use watch::{Change, PrefixWatch};

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

/// A state operation failed. The store is unchanged by a failed write.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// The store's backing storage failed.
    #[error("state store {path}: {message}")]
    Storage {
        /// Where the store lives.
        path: String,
        /// What failed.
        message: String,
    },
    /// The etcd-API store did not answer or refused a request.
    #[error("state store at {endpoints}: {message}")]
    Remote {
        /// The endpoints the platform uses.
        endpoints: String,
        /// What failed.
        message: String,
    },
    /// A blob could not be read or written.
    #[error("module blob {path}: {source}")]
    Blob {
        /// The blob's path.
        path: String,
        /// The underlying I/O error.
        source: std::io::Error,
    },
}
