//! Store peering, in the edge set-up: every node embeds a store replica, and each replica pulls
//! from the others. What this node's replica does with another's is the binary's
//! ([`StorePeering`]); this module introduces this node's replica to a node seen for the first
//! time (`POST` [`mote_wire::route::STORE_PEERS`]), so that its replica pulls from this one.

use serde::Serialize;

/// What the node's embedded store replica does with another node's replica, in the edge
/// set-up: pull its changes. Implemented by whoever runs the replica (the binary), so that
/// this crate needs no store of its own.
pub trait StorePeering: Send + Sync + 'static {
    /// Starts pulling from the replica of node `name` at `url`, unless it already does.
    fn pull_from(&self, name: &str, url: &str);

    /// The replicas it pulls from, and how far behind each it is.
    fn lag(&self) -> Vec<ReplicaLag>;
}

/// A store replica this node's replica pulls from (the edge set-up), and how far behind it
/// this node's replica is.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ReplicaLag {
    /// The replica's name: its node's.
    pub name: String,
    /// Where it serves its peers.
    pub url: String,
    /// Its revision up to which this node's replica has merged everything.
    pub merged_revision: i64,
    /// How long ago this node's replica last had every change it had, in ms: the lag, give or
    /// take one pull interval. `None` before the first complete pull.
    pub behind_ms: Option<u64>,
    /// Why pulls from it fail, while they do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How long pulls from it have failed, in ms.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failing_ms: Option<u64>,
}

/// Tells the node at `api` that the store replica of node `me` serves its peers at
/// `store_peer`, so that its replica pulls from this one (the edge set-up's join).
pub(crate) async fn introduce(
    wire: &mote_wire::WireClient,
    api: &str,
    me: &str,
    store_peer: &str,
) -> Result<(), mote_wire::WireError> {
    let request = mote_wire::PeerRequest::store_peer(me, store_peer);
    wire.fetch(&mote_wire::Peer::at(api), request, INTRODUCTION_ANSWER)
        .await
        .map(drop)
}

/// The most of an answer to an introduction that is read: a status, or an error's text.
const INTRODUCTION_ANSWER: u64 = 64 << 10;
