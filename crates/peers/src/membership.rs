//! [`Peers`], and the membership it keeps: the node keys it has seen, fed into its
//! [`mote_cluster::Placement`], and the call path's use of them ([`Peers::route`],
//! [`Peers::forward`]).
//!
//! Invariants:
//! - The call path takes no lock while this node knows no other taker (`others` is zero): a
//!   single node pays one atomic load for being able to join a cluster, and runs every call it
//!   is given, even while it stops.
//! - A node that lost the store keeps its last view and keeps serving (`store_lost` says since
//!   when, for `/v1/cluster` and `/healthz`).

use crate::config::PeersConfig;
use crate::forward::{ForwardError, NOT_DEPLOYED_HERE};
use crate::metrics::PeerMetrics;
use crate::name::NodeName;
use crate::node_key::{NODES_PREFIX, NodeKey, now_ms};
use crate::shelf::ModuleShelf;
use mote_cluster::{Decision, Event, Membership, Origin, Placement};
use mote_node::Node;
use mote_state::{EtcdStore, LeasedKey, StateError};
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Instant;
use tokio::task::JoinHandle;

/// Where a call runs, as the gateway acts on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// On this node.
    Here,
    /// On the peer with this name, at this URL.
    Peer(mote_cluster::NodeName, String),
    /// Nowhere: every node is stopping or could not be reached.
    Refuse,
}

/// This node's side of its cluster.
pub struct Peers {
    pub(crate) me: NodeName,
    /// `me` as the header a forwarded request carries.
    pub(crate) me_header: hyper::header::HeaderValue,
    pub(crate) config: PeersConfig,
    pub(crate) node: Arc<Node>,
    pub(crate) store: EtcdStore,
    pub(crate) placement: Mutex<Placement>,
    /// Other members that take calls; zero lets the call path skip placement.
    pub(crate) others: AtomicUsize,
    pub(crate) draining: AtomicBool,
    pub(crate) origin: Instant,
    pub(crate) key: tokio::sync::Mutex<Option<LeasedKey>>,
    pub(crate) store_lost: Mutex<Option<(Instant, String)>>,
    pub(crate) wire: mote_wire::WireClient,
    pub(crate) metrics: PeerMetrics,
    /// Object storage that keeps a copy of every module deployed here, if the node has some.
    pub(crate) shelf: Option<ModuleShelf>,
    pub(crate) tasks: Mutex<Vec<JoinHandle<()>>>,
}

impl Peers {
    /// This node's name.
    pub fn name(&self) -> &str {
        self.me.as_str()
    }

    /// The cluster's secret, if it has one: what a peer's request must carry in
    /// [`mote_types::CLUSTER_SECRET_HEADER`].
    pub fn cluster_secret(&self) -> Option<&mote_types::ClusterSecret> {
        self.config.access.secret.as_ref()
    }

    /// Where a call of `function` from `origin` runs; `exclude` names the peers that could not
    /// be reached for this call.
    #[inline]
    pub fn route(
        &self,
        function: &str,
        origin: Origin,
        exclude: &[mote_cluster::NodeName],
    ) -> Route {
        // Alone, a node runs what it is given even while it stops: nobody else could.
        if origin == Origin::Peer || !self.has_others() {
            return Route::Here;
        }
        self.place(function, origin, exclude)
    }

    /// Whether another node takes calls.
    #[inline]
    pub fn has_others(&self) -> bool {
        self.others.load(Ordering::Acquire) > 0
    }

    fn place(&self, function: &str, origin: Origin, exclude: &[mote_cluster::NodeName]) -> Route {
        let expected = self.node.expected(function);
        let (running, queued) = (self.node.busy_executors(), self.node.queued());
        let at = self.origin.elapsed();
        let mut placement = self.placement.lock();
        // Counts are cheap to read fresh; the backlog is the one this node last reported,
        // worked off since, as its peers see it.
        placement.set_my_calls(running as u32, queued as u32, at);
        match placement.place(function, expected, origin, exclude) {
            Decision::Here => Route::Here,
            Decision::Refuse => Route::Refuse,
            Decision::Forward(peer) => match placement.view().get(peer.as_str()) {
                Some(member) => Route::Peer(peer.clone(), member.url().to_owned()),
                None => Route::Refuse,
            },
        }
    }

    /// Sends a call placed on `peer` (at `url`) there, and counts how it went; a call `moved`
    /// there (the peer pulled it) is marked so that it moves no more.
    pub async fn forward(
        &self,
        peer: &mote_cluster::NodeName,
        url: &str,
        function: &str,
        input: bytes::Bytes,
        content_type: Option<&hyper::header::HeaderValue>,
        moved: bool,
    ) -> Result<hyper::Response<hyper::body::Incoming>, ForwardError> {
        let start = Instant::now();
        let request =
            mote_wire::PeerRequest::invoke(function, input, content_type, &self.me_header);
        let request = match moved {
            true => request.moved(),
            false => request,
        };
        let result = self
            .wire
            .send(&mote_wire::Peer::named(peer.as_str(), url), request)
            .await
            .map_err(ForwardError::from)
            .and_then(
                |response| match response.headers().contains_key(NOT_DEPLOYED_HERE) {
                    true => Err(ForwardError::NotDeployed {
                        node: peer.as_str().to_owned(),
                        url: url.to_owned(),
                        function: function.to_owned(),
                    }),
                    false => Ok(response),
                },
            );
        {
            let mut placement = self.placement.lock();
            placement.answered(peer.as_str(), self.node.expected(function));
            if let Err(ForwardError::Unreachable { .. }) = &result {
                placement.unreachable(peer.as_str());
                self.recount(placement.view());
            }
        }
        let outcome = match &result {
            Ok(_) => {
                self.metrics.answered_after(start.elapsed().as_secs_f64());
                "answered"
            }
            // The peer answered, that it cannot take the call.
            Err(ForwardError::NotDeployed { .. }) => "answered",
            Err(ForwardError::Unreachable { .. }) => "unreachable",
            Err(ForwardError::Lost { .. }) => "lost",
        };
        self.metrics.forwarded(peer.as_str(), outcome);
        result
    }

    /// Another node's store replica at `url` introduced itself (edge set-up): this node's
    /// replica pulls from it. Says whether this node runs a replica that peers.
    pub fn introduced(&self, name: &str, url: &str) -> bool {
        match &self.config.store {
            Some((_, peering)) => {
                peering.pull_from(name, url);
                true
            }
            None => false,
        }
    }

    /// Whether this node has function `name` (a call of a function it does not know is not
    /// forwarded: records reach every node, so no node knows it).
    pub fn knows(&self, name: &str) -> bool {
        self.node.get(name).is_some()
    }

    /// The other members, by name, with their URLs.
    pub(crate) fn others(&self) -> Vec<(mote_cluster::NodeName, String)> {
        self.placement
            .lock()
            .view()
            .members()
            .filter(|m| m.name() != self.me.member())
            .map(|m| (m.name().clone(), m.url().to_owned()))
            .collect()
    }

    /// Writes the cluster's metrics (calls forwarded by peer and outcome, the time a forwarded
    /// call takes, the number of nodes) in the Prometheus text format, without an end marker.
    pub fn encode_metrics(&self, out: &mut String) {
        self.metrics.encode(out);
    }

    /// Whether the node is stopping ([`Peers::drain`] was called).
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    pub(crate) fn store_failed(&self, what: &str, error: &StateError) {
        let mut lost = self.store_lost.lock();
        if lost.is_none() {
            tracing::warn!(%error, "the state store failed ({what}); serving on with what this node knows");
            *lost = Some((Instant::now(), error.to_string()));
        }
    }

    pub(crate) fn store_answered(&self) {
        if self.store_lost.lock().take().is_some() {
            tracing::info!("the state store answers again");
        }
    }

    /// Applies a node key's new value; in the edge set-up, peers this node's replica with the
    /// node's, and introduces this node's replica to a node it sees for the first time.
    pub(crate) fn seen(self: &Arc<Self>, key: &str, value: &[u8]) {
        let Some(name) = key.strip_prefix(NODES_PREFIX) else {
            return;
        };
        let Ok(node) = NodeKey::from_json(value) else {
            tracing::warn!(%key, "a node key that is not a mote node's; ignored");
            return;
        };
        if let Err(e) = NodeName::new(name) {
            tracing::warn!(%key, error = %e, "a node key under a name no node may have; ignored");
            return;
        }
        if !self.is_fresh(&node) {
            // A key its node stopped rewriting long ago: in the edge set-up, a dead node's.
            return;
        }
        if name == self.me.as_str() {
            return self.apply(Event::Seen {
                report: node.report(name),
                at: self.origin.elapsed(),
            });
        }
        let new = self.placement.lock().view().get(name).is_none();
        if let (Some((mine, peering)), Some(theirs)) = (&self.config.store, &node.store_peer) {
            peering.pull_from(name, theirs);
            if new {
                let (wire, api, me, mine) = (
                    self.wire.clone(),
                    node.url.clone(),
                    self.me.to_string(),
                    mine.clone(),
                );
                tokio::spawn(async move {
                    if let Err(e) = crate::store_peering::introduce(&wire, &api, &me, &mine).await {
                        tracing::warn!(node = %api, error = %e, "cannot introduce this node's store replica; it learns of it from the others");
                    }
                });
            }
        }
        if new {
            tracing::info!(node = name, url = %node.url, "a node joined the cluster");
        }
        self.apply(Event::Seen {
            report: node.report(name),
            at: self.origin.elapsed(),
        });
    }

    /// Whether a node key was written recently enough to count: within two TTLs by the wall
    /// clock (the second TTL allows for the nodes' clocks to differ).
    pub(crate) fn is_fresh(&self, key: &NodeKey) -> bool {
        key.fresh(now_ms(), self.config.ttl * 2)
    }

    /// Drops the members not heard from for longer than a TTL. In the shared set-up a dead
    /// node's key expires and is deleted; in the edge set-up only the dead node's own replica
    /// could expire it, so a key that stops being rewritten is what says the node is gone, and
    /// this node's own view of it is all that can act on that. A node partitioned away is
    /// dropped too, and is back at its next report once the partition heals.
    pub(crate) fn drop_silent(&self) {
        let now = self.origin.elapsed();
        let mut placement = self.placement.lock();
        let silent: Vec<mote_cluster::NodeName> = placement
            .view()
            .members()
            .filter(|m| {
                m.name() != self.me.member() && now.saturating_sub(m.heard_at()) > self.config.ttl
            })
            .map(|m| m.name().clone())
            .collect();
        for name in silent {
            tracing::info!(node = %name, "a node was not heard from for a TTL; it takes no calls until it reports again");
            placement.apply(Event::Gone(name));
        }
        self.recount(placement.view());
    }

    /// Applies a change under `/mote/nodes/`.
    pub(crate) fn apply(&self, event: Event) {
        let mut placement = self.placement.lock();
        placement.apply(event);
        self.recount(placement.view());
    }

    fn recount(&self, view: &Membership) {
        let members = view.members().count();
        let others = view
            .members()
            .filter(|m| m.name() != self.me.member() && m.takes_calls())
            .count();
        self.others.store(others, Ordering::Release);
        self.metrics.members(members);
    }

    /// Replaces the view with a fresh listing of the node keys: a node missing from it left
    /// while this node was not watching.
    pub(crate) fn relist(self: &Arc<Self>, listing: Vec<(String, Vec<u8>)>) {
        let listed: Vec<&str> = listing
            .iter()
            .filter(|(_, value)| NodeKey::from_json(value).is_ok_and(|k| self.is_fresh(&k)))
            .filter_map(|(key, _)| key.strip_prefix(NODES_PREFIX))
            .collect();
        let mut placement = self.placement.lock();
        let gone: Vec<mote_cluster::NodeName> = placement
            .view()
            .members()
            .map(|m| m.name().clone())
            .filter(|name| !listed.contains(&name.as_str()))
            .collect();
        for name in gone {
            placement.apply(Event::Gone(name));
        }
        self.recount(placement.view());
        drop(placement);
        for (key, value) in &listing {
            self.seen(key, value);
        }
    }
}
