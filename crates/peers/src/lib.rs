//! A mote node's dealings with the other nodes of its cluster. Nodes that share a state store
//! (one etcd-API endpoint, or replicas of mote store that peer with each other) are a cluster;
//! [`Peers`] is one node's side of it, one module per concern:
//!
//! - **Its key** (`lease`). The node writes `/mote/nodes/NAME` (its URL, policy and load:
//!   `node_key`) under a lease of `--lease-ttl-s` and rewrites it three times a TTL with its
//!   load, so that a node that dies leaves the store, and every routing table, a TTL later by
//!   itself. Its name is a [`NodeName`] (`name`).
//! - **The membership** (`membership`). It feeds every node key it sees to its
//!   [`mote_cluster::Placement`], the I/O-free state machine that decides where a call runs
//!   ([`Peers::route`]).
//! - **Following** (`follow`). It watches the node keys, the function records (the node
//!   follows each change, [`mote_node::Node::follow`], so a deploy or removal on any node
//!   reaches every node) and the token records.
//! - **Modules** (`modules`, `shelf`). The module of an adopted record is fetched from a peer
//!   by its sha256, or from the object storage the deploying node copied it to, when the
//!   function is first loaded.
//! - **Forwarding** (`forward`): a call placed on a peer is sent there over the wire between
//!   nodes ([`mote_wire`]), once at most; the **log fan-out** (`logs`) asks every peer for its
//!   entries the same way.
//! - **Late correction** (`pull`): an idle node asks the peer furthest behind for calls that
//!   have not started, and a node asked hands some over ([`Peers::hand_over`]).
//! - **Store peering** (`store_peering`), in the edge set-up; the cluster's **metrics**
//!   (`metrics`); the **view** of the cluster for `/v1/cluster` (`view`).
//!
//! `membership` defines [`Peers`] and uses only the leaf modules (`name`, `node_key`, `config`,
//! `forward`, `metrics`, `shelf`, `store_peering`); the others add to it and use it, and
//! `lease` alone starts the followers and the pulls, so no two modules use each other.

mod config;
mod follow;
mod forward;
mod lease;
mod logs;
mod membership;
mod metrics;
mod modules;
mod name;
mod node_key;
mod pull;
mod shelf;
mod store_peering;
mod view;

pub use config::{JoinError, PeersConfig};
pub use forward::{FORWARDED_BY, ForwardError, NOT_DEPLOYED_HERE};
pub use membership::{Peers, Route};
pub use mote_api::{ClusterView, MemberState, MemberView, StoreView};
pub use name::{MAX_NODE_NAME_LEN, NodeName, NodeNameError};
pub use store_peering::{ReplicaLag, StorePeering};
pub use view::Forwarded;
