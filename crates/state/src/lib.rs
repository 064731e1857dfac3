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
mod error;
mod etcd;
mod lease;
mod store;
mod watch;

pub use blobs::ModuleBlobs;
pub use embedded::EmbeddedStore;
pub use error::StateError;
pub use etcd::{EtcdStore, KEY_PREFIX};
pub use lease::LeasedKey;
pub use store::StateStore;
pub use watch::{Change, PrefixWatch};
