//! mote store: an eventually consistent, CRDT-based key-value store that speaks the etcd v3
//! API. Every replica takes reads and writes locally and pulls its peers' changes; concurrent
//! writes to a key converge by last-writer-wins on a hybrid logical clock.
//!
//! - [`engine`]: the replica's state machine (revisions, history, transactions, merge), no I/O.
//! - [`clock`]: the hybrid logical clock that orders writes across replicas.
//! - [`lease`]: leases and the keys they delete when they expire.
//! - [`error`]: errors with etcd's messages and gRPC codes.
//! - [`disk`]: durability, group-committed to a redb database.
//! - [`replica`]: a running replica: the engine behind a lock, its disk, the write feed, the
//!   lease timer, the loops that pull from peers.
//! - [`watch`]: one client's watch stream.
//! - [`service`]: the etcd gRPC services and the peer service, and the server hosting them.

pub mod clock;
pub mod disk;
pub mod engine;
pub mod error;
pub mod lease;
pub mod replica;
pub mod service;
pub mod watch;

pub use engine::Engine;
pub use error::StoreError;

/// mote store's peer protocol, generated from `proto/peer.proto`.
#[allow(missing_docs)]
pub mod pb {
    tonic::include_proto!("motepeer");
}
