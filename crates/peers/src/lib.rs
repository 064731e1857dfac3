//! A mote node's dealings with the other nodes of its cluster. Nodes that share a state store
//! (one etcd-API endpoint, or replicas of mote store that peer with each other) are a cluster;
//! [`Peers`] is one node's side of it:
//!
//! - **Its key.** The node writes `/mote/nodes/NAME` (its URL, policy and load: [`wire`]) under
//!   a lease of `--lease-ttl-s` and rewrites it three times a TTL with its load, so that a node
//!   that dies leaves the store, and every routing table, a TTL later by itself.
//! - **The membership.** It watches `/mote/nodes/` and feeds every change to its
//!   [`mote_cluster::Placement`], the I/O-free state machine that decides where a call runs.
//! - **Records.** It watches the function records and has the node follow each change
//!   ([`mote_node::Node::follow`]), so a deploy or removal on any node reaches every node; the
//!   module of an adopted record is fetched from a peer by its sha256 (`fetch`), or from the
//!   object storage the deploying node copied it to, when the function is first loaded.
//! - **Forwarding** ([`Forwarder`]): a call placed on a peer is sent there over a kept-alive
//!   connection, once at most.
//!
//! Invariants:
//! - The call path takes no lock while this node knows no other taker (`others` is zero):
//!   a single node pays one atomic load for being able to join a cluster, and runs every
//!   call it is given, even while it stops.
//! - A node that lost the store keeps its last view and keeps serving; `/v1/cluster` and
//!   `/healthz` say the store is unreachable and since when.

mod fetch;
mod forward;
mod wire;

pub use forward::{FORWARDED_BY, ForwardError, Forwarder};

use mote_cluster::{
    Decision, Event, Load, Membership, NodeName, Origin, Placement, PlacementConfig,
};
use mote_node::Node;
use mote_state::{Change, EtcdStore, LeasedKey, StateError, StateStore};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use serde::Serialize;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};
use tokio::task::JoinHandle;
use wire::{NODES_PREFIX, NodeKey, node_key};

/// How a node introduces its store replica to a peer, in the edge set-up.
pub const STORE_PEERS_PATH: &str = "/v1/internal/store-peers";

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

/// How a node joins its cluster.
#[derive(Clone)]
pub struct PeersConfig {
    /// The node's name, unique in the cluster.
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
    #[error(
        "node name `{0}` is not valid: use 1 to 63 characters among a-z, A-Z, 0-9, '-', '_' and '.'"
    )]
    BadName(String),
    /// The store failed.
    #[error("cannot join the cluster: {0}")]
    State(#[from] StateError),
}

/// Where a call runs, as the gateway acts on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Route {
    /// On this node.
    Here,
    /// On the peer with this name, at this URL.
    Peer(NodeName, String),
    /// Nowhere: every node is stopping or could not be reached.
    Refuse,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ForwardLabels {
    peer: String,
    outcome: &'static str,
}

/// The cluster's metrics.
struct PeerMetrics {
    forwarded: Family<ForwardLabels, Counter>,
    forward_seconds: Histogram,
    nodes: Gauge,
}

impl PeerMetrics {
    fn registry(&self) -> prometheus_client::registry::Registry {
        let mut registry = prometheus_client::registry::Registry::with_prefix("mote");
        registry.register(
            "forwarded_calls",
            "Calls this node sent to a peer, by peer and outcome (answered; unreachable: not sent; lost: sent, no answer)",
            self.forwarded.clone(),
        );
        registry.register(
            "forward_seconds",
            "Time from sending a call to a peer to its response's headers",
            self.forward_seconds.clone(),
        );
        registry.register(
            "cluster_nodes",
            "Nodes this node sees in its cluster, itself included",
            self.nodes.clone(),
        );
        registry
    }
}

/// This node's side of its cluster.
pub struct Peers {
    me: NodeName,
    config: PeersConfig,
    node: Arc<Node>,
    store: EtcdStore,
    placement: Mutex<Placement>,
    /// Other members that take calls; zero lets the call path skip placement.
    others: AtomicUsize,
    /// The mean expected processing time of this node's functions, in nanoseconds, as of its
    /// last report: the call path estimates this node's work from it without scanning them.
    mean_expected_ns: AtomicU64,
    draining: AtomicBool,
    origin: Instant,
    key: tokio::sync::Mutex<Option<LeasedKey>>,
    store_lost: Mutex<Option<(Instant, String)>>,
    forwarder: Forwarder,
    metrics: PeerMetrics,
    registry: prometheus_client::registry::Registry,
    shelf: Option<fetch::ModuleShelf>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// How long to wait before listing and watching again after the store failed.
const RETRY: Duration = Duration::from_secs(1);

impl Peers {
    /// Refuses a name that is not valid or that another live node holds (a node at another
    /// URL, with another instance id, that wrote its key within two TTLs). [`Peers::join`] checks again; this lets a node
    /// refuse before it starts.
    pub async fn check_name(store: &EtcdStore, config: &PeersConfig) -> Result<(), JoinError> {
        let valid = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
        if config.name.is_empty() || config.name.len() > 63 || !config.name.chars().all(valid) {
            return Err(JoinError::BadName(config.name.clone()));
        }
        if let Some(value) = store.get(&node_key(&config.name)).await?
            && let Ok(held) = NodeKey::from_json(&value)
            && held.url != config.url
            && held.instance != config.instance
            && held.fresh(wire::now_ms(), config.ttl * 2)
        {
            return Err(JoinError::NameTaken {
                name: config.name.clone(),
                url: held.url,
            });
        }
        Ok(())
    }

    /// Joins the cluster that shares `store`: refuses a name another live node holds, writes
    /// this node's key, reads the members and starts following them and the function records.
    pub async fn join(
        node: Arc<Node>,
        store: EtcdStore,
        config: PeersConfig,
    ) -> Result<Arc<Self>, JoinError> {
        Self::check_name(&store, &config).await?;
        let origin = Instant::now();
        let me = NodeName::from(config.name.as_str());
        let first = NodeKey {
            url: config.url.clone(),
            policy: config.policy.clone(),
            cores: node.cores() as u32,
            running: 0,
            queued: 0,
            work_us: 0,
            draining: false,
            store_peer: config.store.as_ref().map(|(url, _)| url.clone()),
            instance: config.instance.clone(),
            written_ms: wire::now_ms(),
        };
        let key = store
            .lease_key(&node_key(&config.name), first.to_json(), config.ttl)
            .await?;
        let view = Membership::new(first.report(&config.name), Duration::ZERO);
        let metrics = PeerMetrics {
            forwarded: Family::default(),
            forward_seconds: Histogram::new(
                prometheus_client::metrics::histogram::exponential_buckets(2e-5, 2.0, 16),
            ),
            nodes: Gauge::default(),
        };
        metrics.nodes.set(1);
        let registry = metrics.registry();
        let shelf = config
            .modules
            .as_ref()
            .map(|(objects, bucket)| fetch::ModuleShelf {
                objects: objects.clone(),
                bucket: bucket.clone(),
                runtime: tokio::runtime::Handle::current(),
            });
        let peers = Arc::new(Self {
            forwarder: Forwarder::new(&config.name, &config.access),
            placement: Mutex::new(Placement::new(view, config.placement)),
            me,
            config,
            node,
            store,
            others: AtomicUsize::new(0),
            mean_expected_ns: AtomicU64::new(0),
            draining: AtomicBool::new(false),
            origin,
            key: tokio::sync::Mutex::new(Some(key)),
            store_lost: Mutex::new(None),
            metrics,
            registry,
            shelf: shelf.clone(),
            tasks: Mutex::new(Vec::new()),
        });
        let modules = fetch::PeerModules::new(Arc::downgrade(&peers), shelf, &peers.config.access);
        peers.node.fetch_modules_from(Arc::new(modules));
        let weak = Arc::downgrade(&peers);
        let tasks = vec![
            tokio::spawn(follow_nodes(weak.clone())),
            tokio::spawn(follow_functions(weak.clone())),
            tokio::spawn(follow_tokens(weak.clone())),
            tokio::spawn(report(weak)),
        ];
        *lock(&peers.tasks) = tasks;
        Ok(peers)
    }

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
    pub fn route(&self, function: &str, origin: Origin, exclude: &[NodeName]) -> Route {
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

    fn place(&self, function: &str, origin: Origin, exclude: &[NodeName]) -> Route {
        let expected = self.node.expected(function);
        let (running, queued) = (self.node.busy_executors(), self.node.queued());
        let mean = Duration::from_nanos(self.mean_expected_ns.load(Ordering::Relaxed));
        let load = Load {
            cores: self.node.cores() as u32,
            running: running as u32,
            queued: queued as u32,
            work: mean * (running + queued) as u32,
        };
        let at = self.origin.elapsed();
        let mut placement = lock(&self.placement);
        placement.set_my_load(load, at);
        match placement.place(function, expected, origin, exclude) {
            Decision::Here => Route::Here,
            Decision::Refuse => Route::Refuse,
            Decision::Forward(peer) => match placement.view().get(peer.as_str()) {
                Some(member) => Route::Peer(peer.clone(), member.url().to_owned()),
                None => Route::Refuse,
            },
        }
    }

    /// Sends a call placed on `peer` (at `url`) there, and counts how it went.
    pub async fn forward(
        &self,
        peer: &NodeName,
        url: &str,
        function: &str,
        input: bytes::Bytes,
        content_type: Option<&hyper::header::HeaderValue>,
    ) -> Result<hyper::Response<hyper::body::Incoming>, ForwardError> {
        let start = Instant::now();
        let result = self
            .forwarder
            .invoke(peer.as_str(), url, function, input, content_type)
            .await;
        {
            let mut placement = lock(&self.placement);
            placement.answered(peer.as_str(), self.node.expected(function));
            if let Err(ForwardError::Unreachable { .. }) = &result {
                placement.unreachable(peer.as_str());
                self.recount(placement.view());
            }
        }
        let outcome = match &result {
            Ok(_) => {
                self.metrics
                    .forward_seconds
                    .observe(start.elapsed().as_secs_f64());
                "answered"
            }
            Err(ForwardError::Unreachable { .. }) => "unreachable",
            Err(ForwardError::Lost { .. }) => "lost",
        };
        self.metrics
            .forwarded
            .get_or_create(&ForwardLabels {
                peer: peer.to_string(),
                outcome,
            })
            .inc();
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

    /// Puts a copy of a module this node took a deploy of in object storage, if it was given
    /// some, for nodes that adopt the record when no peer holds the module. The deploy stands
    /// without the copy (its peers can fetch the module from this node): a failure is logged.
    pub async fn keep_module(&self, sha256: &str, wasm: bytes::Bytes) {
        let Some(shelf) = &self.shelf else { return };
        let key = fetch::ModuleShelf::key(sha256);
        if let Err(e) = shelf.objects.put(&shelf.bucket, &key, wasm).await {
            tracing::warn!(module = sha256, bucket = %shelf.bucket, error = %e, "cannot copy a deployed module to object storage; peers fetch it from this node");
        }
    }

    /// Whether this node has function `name` (a call of a function it does not know is not
    /// forwarded: records reach every node, so no node knows it).
    pub fn knows(&self, name: &str) -> bool {
        self.node.get(name).is_some()
    }

    /// Sends `GET` of the path `path_for` gives a member (a function's logs, asked with
    /// `local=true` so that a peer does not ask its own peers again) to every other member it
    /// gives one for, at once, and gives each one's response, or why it gave none within
    /// `wait`, by member.
    pub async fn fetch_logs(
        &self,
        path_for: impl Fn(&NodeName) -> Option<String>,
        wait: Duration,
    ) -> Vec<(
        NodeName,
        Result<hyper::Response<hyper::body::Incoming>, ForwardError>,
    )> {
        let mut asks = tokio::task::JoinSet::new();
        for (peer, url) in self.others() {
            let Some(path) = path_for(&peer) else {
                continue;
            };
            let forwarder = self.forwarder.clone();
            asks.spawn(async move {
                let response =
                    tokio::time::timeout(wait, forwarder.get(peer.as_str(), &url, &path))
                        .await
                        .unwrap_or_else(|_| {
                            Err(ForwardError::Unreachable {
                                node: peer.to_string(),
                                url,
                                detail: format!("no answer within {} ms", wait.as_millis()),
                            })
                        });
                (peer, response)
            });
        }
        let mut answers = Vec::new();
        while let Some(answer) = asks.join_next().await {
            if let Ok(answer) = answer {
                answers.push(answer);
            }
        }
        answers
    }

    /// The other members, by name, with their URLs.
    pub(crate) fn others(&self) -> Vec<(NodeName, String)> {
        lock(&self.placement)
            .view()
            .members()
            .filter(|m| *m.name() != self.me)
            .map(|m| (m.name().clone(), m.url().to_owned()))
            .collect()
    }

    /// The cluster as this node sees it, for `GET /v1/cluster`.
    pub fn view(&self) -> ClusterView {
        let now = self.origin.elapsed();
        let placement = lock(&self.placement);
        let nodes = placement
            .view()
            .members()
            .map(|m| {
                let load = m.load();
                MemberView {
                    name: m.name().to_string(),
                    url: m.url().to_owned(),
                    state: match (m.draining(), m.unreachable()) {
                        (true, _) => "draining",
                        (false, true) => "unreachable",
                        (false, false) => "up",
                    },
                    me: *m.name() == self.me,
                    cores: load.cores,
                    running: load.running,
                    queued: load.queued,
                    work_ms: load.work.as_secs_f64() * 1e3,
                    heard_ms_ago: now.saturating_sub(m.heard_at()).as_millis() as u64,
                }
            })
            .collect();
        drop(placement);
        ClusterView {
            node: self.me.to_string(),
            store: self.store_view(),
            nodes,
        }
    }

    fn store_view(&self) -> StoreView {
        let lost = lock(&self.store_lost).clone();
        StoreView {
            endpoints: self.store.endpoints().to_owned(),
            reachable: lost.is_none(),
            unreachable_for_ms: lost
                .as_ref()
                .map(|(since, _)| since.elapsed().as_millis() as u64),
            error: lost.map(|(_, error)| error),
        }
    }

    /// The calls this node sent to each peer it sees, by outcome.
    pub fn forwarded(&self) -> Vec<Forwarded> {
        let count = |peer: &NodeName, outcome| {
            let labels = ForwardLabels {
                peer: peer.to_string(),
                outcome,
            };
            self.metrics.forwarded.get(&labels).map_or(0, |c| c.get())
        };
        self.others()
            .into_iter()
            .map(|(peer, _)| Forwarded {
                answered: count(&peer, "answered"),
                unreachable: count(&peer, "unreachable"),
                lost: count(&peer, "lost"),
                peer: peer.to_string(),
            })
            .collect()
    }

    /// In the edge set-up, the store replicas this node's replica pulls from and how far
    /// behind each it is; empty otherwise.
    pub fn store_replicas(&self) -> Vec<ReplicaLag> {
        match &self.config.store {
            Some((_, peering)) => peering.lag(),
            None => Vec::new(),
        }
    }

    /// `None` while the store answers; otherwise what `/healthz` says of it.
    pub fn store_trouble(&self) -> Option<String> {
        let lost = lock(&self.store_lost);
        lost.as_ref().map(|(since, error)| {
            format!(
                "the state store at {} has not answered for {} ms ({error}); serving the functions this node knows, with the last membership it saw",
                self.store.endpoints(),
                since.elapsed().as_millis()
            )
        })
    }

    /// Writes the cluster's metrics (calls forwarded by peer and outcome, the time a forwarded
    /// call takes, the number of nodes) in the Prometheus text format, without an end marker.
    pub fn encode_metrics(&self, out: &mut String) {
        prometheus_client::encoding::text::encode_registry(out, &self.registry)
            .expect("writing to a String cannot fail");
    }

    /// Whether the node is stopping ([`Peers::drain`] was called).
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Stops taking calls: the node's key says it is draining, so peers stop sending it calls,
    /// and its own client calls go to its peers.
    pub async fn drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        let key = self.current_key(true);
        lock(&self.placement).apply(Event::Seen {
            report: key.report(self.me.as_str()),
            at: self.origin.elapsed(),
        });
        if let Some(leased) = self.key.lock().await.as_ref()
            && let Err(e) = leased.update(key.to_json()).await
        {
            tracing::warn!(error = %e, "cannot tell the cluster this node is draining; it leaves when its lease expires");
        }
    }

    /// Leaves the cluster: stops following it and deletes this node's key.
    pub async fn leave(&self) {
        for task in lock(&self.tasks).drain(..) {
            task.abort();
        }
        if let Some(leased) = self.key.lock().await.take()
            && let Err(e) = leased.release().await
        {
            tracing::warn!(error = %e, "cannot delete this node's key; it goes when its lease expires");
        }
    }

    /// This node's key as it should read now.
    fn current_key(&self, draining: bool) -> NodeKey {
        let load = self.node.load();
        self.mean_expected_ns
            .store(load.mean_expected.as_nanos() as u64, Ordering::Relaxed);
        NodeKey {
            url: self.config.url.clone(),
            policy: self.config.policy.clone(),
            cores: load.cores as u32,
            running: load.running as u32,
            queued: load.queued as u32,
            work_us: load.work.as_micros() as u64,
            draining,
            store_peer: self.config.store.as_ref().map(|(url, _)| url.clone()),
            instance: self.config.instance.clone(),
            written_ms: wire::now_ms(),
        }
    }

    fn store_failed(&self, what: &str, error: &StateError) {
        let mut lost = lock(&self.store_lost);
        if lost.is_none() {
            tracing::warn!(%error, "the state store failed ({what}); serving on with what this node knows");
            *lost = Some((Instant::now(), error.to_string()));
        }
    }

    fn store_answered(&self) {
        if lock(&self.store_lost).take().is_some() {
            tracing::info!("the state store answers again");
        }
    }

    /// Applies a node key's new value; in the edge set-up, peers this node's replica with the
    /// node's, and introduces this node's replica to a node it sees for the first time.
    fn seen(self: &Arc<Self>, key: &str, value: &[u8]) {
        let Some(name) = key.strip_prefix(NODES_PREFIX) else {
            return;
        };
        let Ok(node) = NodeKey::from_json(value) else {
            tracing::warn!(%key, "a node key that is not a mote node's; ignored");
            return;
        };
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
        let new = lock(&self.placement).view().get(name).is_none();
        if let (Some((mine, peering)), Some(theirs)) = (&self.config.store, &node.store_peer) {
            peering.pull_from(name, theirs);
            if new {
                let (forwarder, api, me, mine) = (
                    self.forwarder.clone(),
                    node.url.clone(),
                    self.me.to_string(),
                    mine.clone(),
                );
                tokio::spawn(async move {
                    if let Err(e) = forwarder.introduce(&api, &me, &mine).await {
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
    fn is_fresh(&self, key: &NodeKey) -> bool {
        key.fresh(wire::now_ms(), self.config.ttl * 2)
    }

    /// Drops the members not heard from for longer than a TTL. In the shared set-up a dead
    /// node's key expires and is deleted; in the edge set-up only the dead node's own replica
    /// could expire it, so a key that stops being rewritten is what says the node is gone, and
    /// this node's own view of it is all that can act on that. A node partitioned away is
    /// dropped too, and is back at its next report once the partition heals.
    fn drop_silent(&self) {
        let now = self.origin.elapsed();
        let mut placement = lock(&self.placement);
        let silent: Vec<NodeName> = placement
            .view()
            .members()
            .filter(|m| *m.name() != self.me && now.saturating_sub(m.heard_at()) > self.config.ttl)
            .map(|m| m.name().clone())
            .collect();
        for name in silent {
            tracing::info!(node = %name, "a node was not heard from for a TTL; it takes no calls until it reports again");
            placement.apply(Event::Gone(name));
        }
        self.recount(placement.view());
    }

    /// Applies a change under `/mote/nodes/`.
    fn apply(&self, event: Event) {
        let mut placement = lock(&self.placement);
        placement.apply(event);
        self.recount(placement.view());
    }

    fn recount(&self, view: &Membership) {
        let members = view.members().count();
        let others = view
            .members()
            .filter(|m| *m.name() != self.me && m.takes_calls())
            .count();
        self.others.store(others, Ordering::Release);
        self.metrics.nodes.set(members as i64);
    }

    /// Replaces the view with a fresh listing of the node keys: a node missing from it left
    /// while this node was not watching.
    fn relist(self: &Arc<Self>, listing: Vec<(String, Vec<u8>)>) {
        let listed: Vec<&str> = listing
            .iter()
            .filter(|(_, value)| NodeKey::from_json(value).is_ok_and(|k| self.is_fresh(&k)))
            .filter_map(|(key, _)| key.strip_prefix(NODES_PREFIX))
            .collect();
        let mut placement = lock(&self.placement);
        let gone: Vec<NodeName> = placement
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

/// Lists `prefix`, then hands every change after the listing to `changed`; after a failure of
/// the store, says so (`what` was being followed) and lists again a second later. Each call
/// gets this node's `Peers` for its own duration only, so that following never keeps a node
/// that left alive; it ends once the node is gone.
async fn follow_prefix(
    peers: Weak<Peers>,
    prefix: &str,
    what: &str,
    mut listed: impl AsyncFnMut(&Arc<Peers>, Vec<(String, Vec<u8>)>),
    mut changed: impl AsyncFnMut(&Arc<Peers>, Change),
) {
    loop {
        let Some(store) = peers.upgrade().map(|p| p.store.clone()) else {
            return;
        };
        let failed = match store.watch_prefix(prefix).await {
            Ok((listing, mut watch)) => {
                let Some(p) = peers.upgrade() else { return };
                listed(&p, listing).await;
                drop(p);
                loop {
                    let change = watch.next().await;
                    let Some(p) = peers.upgrade() else { return };
                    match change {
                        Ok(change) => changed(&p, change).await,
                        Err(e) => break e,
                    }
                }
            }
            Err(e) => e,
        };
        match peers.upgrade() {
            Some(p) => p.store_failed(what, &failed),
            None => return,
        }
        tokio::time::sleep(RETRY).await;
    }
}

/// Follows the token records into the node's live tokens: a token made or revoked through any
/// node takes effect here as soon as the watch delivers the change.
async fn follow_tokens(peers: Weak<Peers>) {
    follow_prefix(
        peers,
        mote_access::TOKEN_PREFIX,
        "following the tokens",
        async |p, listing| p.config.tokens.relist(listing),
        async |p, change| p.config.tokens.apply(change),
    )
    .await;
}

/// Follows `/mote/nodes/` into the placement's view.
async fn follow_nodes(peers: Weak<Peers>) {
    follow_prefix(
        peers,
        NODES_PREFIX,
        "following the nodes",
        async |p, listing| p.relist(listing),
        async |p, change| match change {
            Change::Put { key, value } => p.seen(&key, &value),
            Change::Delete { key } => {
                if let Some(name) = key.strip_prefix(NODES_PREFIX) {
                    tracing::info!(node = name, "a node left the cluster");
                    p.apply(Event::Gone(NodeName::from(name)));
                }
            }
        },
    )
    .await;
}

/// Follows the function records: every record listed or changed, and every function the node
/// has (one may have been deleted while nobody watched), is one the node follows.
async fn follow_functions(peers: Weak<Peers>) {
    follow_prefix(
        peers,
        mote_node::RECORD_PREFIX,
        "following the function records",
        async |p, listing| {
            let mut names: Vec<String> = listing
                .iter()
                .filter_map(|(key, _)| record_name(key))
                .collect();
            names.extend(p.node.list().into_iter().map(|r| r.name.to_string()));
            names.sort();
            names.dedup();
            for name in names {
                follow(&p.node, &name).await;
            }
        },
        async |p, change| {
            let (Change::Put { key, .. } | Change::Delete { key }) = change;
            if let Some(name) = record_name(&key) {
                follow(&p.node, &name).await;
            }
        },
    )
    .await;
}

fn record_name(key: &str) -> Option<String> {
    key.strip_prefix(mote_node::RECORD_PREFIX)
        .map(str::to_owned)
}

async fn follow(node: &Node, name: &str) {
    match node.follow(name).await {
        Ok(mote_node::Followed::Unchanged) => {}
        Ok(followed) => tracing::info!(function = name, ?followed, "followed the store"),
        Err(e) => {
            tracing::warn!(function = name, error = %e, "cannot follow a function record; the next change or relisting tries again")
        }
    }
}

/// Rewrites this node's key with its load three times a TTL.
async fn report(peers: Weak<Peers>) {
    let Some(every) = peers.upgrade().map(|p| p.config.ttl / 3) else {
        return;
    };
    let mut tick = tokio::time::interval(every.max(Duration::from_millis(100)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(p) = peers.upgrade() else { return };
        let key = p.current_key(p.draining.load(Ordering::SeqCst));
        let written = match p.key.lock().await.as_ref() {
            Some(leased) => leased.update(key.to_json()).await,
            None => return,
        };
        match written {
            Ok(()) => p.store_answered(),
            Err(e) => p.store_failed("writing this node's key", &e),
        }
        p.drop_silent();
    }
}

/// The cluster as one node sees it.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterView {
    /// The node answering.
    pub node: String,
    /// Its state store.
    pub store: StoreView,
    /// Every node it sees, itself included, by name.
    pub nodes: Vec<MemberView>,
}

/// Whether a node reaches its state store.
#[derive(Clone, Debug, Serialize)]
pub struct StoreView {
    /// The store's URLs.
    pub endpoints: String,
    /// Whether its last request answered.
    pub reachable: bool,
    /// How long it has not answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreachable_for_ms: Option<u64>,
    /// The error it gave.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The calls one node sent to a peer, by how they went.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Forwarded {
    /// The peer.
    pub peer: String,
    /// Calls it answered.
    pub answered: u64,
    /// Calls not sent: it could not be reached.
    pub unreachable: u64,
    /// Calls sent that it did not answer.
    pub lost: u64,
}

/// A node as another sees it.
#[derive(Clone, Debug, Serialize)]
pub struct MemberView {
    /// Its name.
    pub name: String,
    /// Where its API is.
    pub url: String,
    /// `up` (takes calls), `draining` (stopping) or `unreachable` (this node could not connect
    /// to it since it last reported).
    pub state: &'static str,
    /// Whether it is the node answering.
    pub me: bool,
    /// Executor cores.
    pub cores: u32,
    /// Calls running, as last reported (plus those sent since).
    pub running: u32,
    /// Calls waiting.
    pub queued: u32,
    /// The expected work it holds, in milliseconds.
    pub work_ms: f64,
    /// How long ago its key was last written, as this node saw it.
    pub heard_ms_ago: u64,
}
