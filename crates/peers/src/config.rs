//! How a node joins its cluster ([`PeersConfig`]) and why it may not ([`JoinError`]).

use crate::name::NodeNameError;
use crate::store_peering::StorePeering;
use mote_cluster::PlacementConfig;
use mote_state::StateError;
use std::sync::Arc;
use std::time::Duration;

/// How a node joins its cluster.
#[derive(Clone)]
pub struct PeersConfig {
    /// The node's name, unique in the cluster ([`crate::NodeName`]'s rule, checked on joining).
    pub name: String,
    /// Where peers reach this node's API.
    pub url: String,
    /// An id this node keeps across restarts (in its data directory): the same name under the
    /// same id is this node coming back, not another node.
    pub instance: String,
    /// How long the node's key outlives its last renewal: how long a dead node stays in the
    /// others' routing tables.
    pub ttl: Duration,
    /// How calls are placed.
    pub placement: PlacementConfig,
    /// How often a node with a core free and no call waiting asks the peer furthest behind for
    /// calls that would wait there (late correction, `pull`); `None`: never.
    pub pull_every: Option<Duration>,
    /// The node's scheduling policy, shown to operators.
    pub policy: String,
    /// In the edge set-up: where this node's store replica serves its peers, and how it
    /// starts pulling from a replica it learns of.
    pub store: Option<(String, Arc<dyn StorePeering>)>,
    /// Object storage that keeps a copy of every module deployed on this node, and that this
    /// node fetches a module from when no peer has it: the objects client and the bucket.
    pub modules: Option<(Arc<mote_objects::Objects>, String)>,
    /// Whom this node trusts when it calls its peers over https, and the cluster secret it
    /// shows them on every request.
    pub access: mote_tls::PeerAccess,
    /// The node's live tokens, kept current from the store's token records.
    pub tokens: Arc<mote_access::Grants>,
}

impl PeersConfig {
    /// How long a node's key outlives its last renewal unless told otherwise.
    pub const DEFAULT_TTL: Duration = Duration::from_secs(3);
    /// How often an idle node asks for calls unless told otherwise: a few forwarding costs
    /// (150 µs on loopback), so a call that would wait behind tens of milliseconds of work
    /// elsewhere is asked for soon, while an idle node's timer costs a few microseconds of
    /// CPU per tick.
    pub const DEFAULT_PULL_EVERY: Duration = Duration::from_millis(2);
}

/// Why a node could not join its cluster.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    /// Another node holds the name.
    #[error(
        "node name `{name}` is taken by the node at {url}; start this node with another --node NAME, or stop that node first (its name frees a lease TTL after it stops)"
    )]
    NameTaken {
        /// The name.
        name: String,
        /// Where the node holding it listens.
        url: String,
    },
    /// The name cannot be a key or a header.
    #[error(transparent)]
    BadName(#[from] NodeNameError),
    /// The store failed.
    #[error("cannot join the cluster: {0}")]
    State(#[from] StateError),
}
