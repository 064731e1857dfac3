//! The platform's state store: an embedded mote store replica (alone, or peering with others in
//! the edge set-up), or any etcd-API endpoint.

use crate::error::PlatformError;
use crate::security::Security;
use mote_peers::{ReplicaLag, StorePeering};
use mote_state::{EtcdStore, StateStore};
use mote_store::replica::{Member, Replica, check_peer_url};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Where the platform keeps its function records.
pub enum StateSource {
    /// A mote store replica in this process, its data under the platform's data directory,
    /// serving the etcd API on `listen` so operators can inspect it with etcdctl; in the edge
    /// set-up it also serves its peers and pulls from theirs.
    Embedded {
        /// Where it serves the etcd API.
        listen: SocketAddr,
        /// In the edge set-up: its name and peer API address, and the replicas it pulls from.
        edge: Option<Edge>,
    },
    /// An etcd-API endpoint elsewhere (a mote store cluster or a real etcd), by URL.
    Remote(Vec<String>),
}

/// The embedded replica's part in the edge set-up (`mote up --store-peers`).
pub struct Edge {
    /// The replica's name: the node's.
    pub name: String,
    /// Where its peer API listens.
    pub peer_listen: SocketAddr,
    /// The other replicas it pulls from from the start.
    pub peers: Vec<Member>,
}

/// The platform's state store, and the embedded store's server if it runs one.
pub struct State {
    /// The store the node reads and writes through.
    pub store: Arc<dyn StateStore>,
    /// The same store's client, for what only the etcd API offers (leases, watches): how the
    /// node finds its peers.
    pub etcd: EtcdStore,
    /// The URLs the store is reached at.
    pub endpoints: Vec<String>,
    /// In the edge set-up: where the embedded replica serves its peers, and how it starts
    /// pulling from a replica it learns of.
    pub peering: Option<(String, Arc<ReplicaPeering>)>,
    embedded: Option<EmbeddedServer>,
}

impl State {
    /// Opens the state named by `source`: starts the embedded replica on `data/store`, or
    /// checks that the remote endpoint answers; TLS and the cluster secret as `security` says.
    pub async fn open(
        data: &Path,
        source: StateSource,
        security: &Security,
    ) -> Result<Self, PlatformError> {
        let (endpoints, embedded, peering) = match source {
            StateSource::Remote(urls) => (urls, None, None),
            StateSource::Embedded { listen, edge } => {
                let (url, server, peering) =
                    start_embedded_store(data, listen, edge, security).await?;
                (vec![url], Some(server), peering)
            }
        };
        let tls = Some(security.access.trust.tonic_client());
        let store = EtcdStore::connect(&endpoints, tls)
            .await
            .map_err(PlatformError::State)?;
        Ok(Self {
            store: Arc::new(store.clone()),
            etcd: store,
            endpoints,
            peering,
            embedded,
        })
    }

    /// Stops the embedded store's server and its background tasks, if any, once the platform
    /// has stopped using it.
    pub async fn close(self) -> Result<(), PlatformError> {
        if let Some((_, peering)) = &self.peering {
            peering.stop();
        }
        if let Some(embedded) = self.embedded {
            embedded.compactor.abort();
            let _ = embedded.stop.send(());
            embedded
                .server
                .await
                .map_err(|_| PlatformError::Panicked("embedded store's server"))??;
        }
        Ok(())
    }
}

/// Revisions of history the embedded store keeps.
const EMBEDDED_KEEP_REVISIONS: i64 = 10_000;

/// How often an embedded replica pulls from each peer when there were no changes.
const EDGE_PULL_INTERVAL: Duration = Duration::from_millis(20);

/// The embedded replica's side of the edge set-up: the replicas it pulls from (their peer URLs
/// by name), and the pull loops it starts for the ones it learns of from the node keys.
pub struct ReplicaPeering {
    replica: Arc<Replica>,
    pulled: Mutex<HashMap<String, String>>,
    /// The pull loops started for replicas learned of, stopped with the store.
    loops: Mutex<Vec<JoinHandle<()>>>,
}

impl ReplicaPeering {
    /// Stops the pull loops it started.
    fn stop(&self) {
        for pull in self.loops.lock().drain(..) {
            pull.abort();
        }
    }
}

impl StorePeering for ReplicaPeering {
    fn pull_from(&self, name: &str, url: &str) {
        if name == self.replica.me().name {
            return;
        }
        if let Err(e) = check_peer_url(url) {
            tracing::warn!(replica = name, %url, error = %e, "not a store replica's peer URL; not pulling from it");
            return;
        }
        let mut pulled = self.pulled.lock();
        if !pulled.contains_key(name) {
            pulled.insert(name.to_owned(), url.to_owned());
            tracing::info!(replica = name, %url, "the embedded store pulls from a replica it learned of");
            let pull = tokio::spawn(
                self.replica
                    .clone()
                    .run_pull_loop(url.to_owned(), EDGE_PULL_INTERVAL),
            );
            self.loops.lock().push(pull);
        }
    }

    fn lag(&self) -> Vec<ReplicaLag> {
        let pulled = self.pulled.lock().clone();
        let pulls = self.replica.pulls();
        let mut lags: Vec<ReplicaLag> = pulled
            .into_iter()
            .map(|(name, url)| {
                let pull = pulls.iter().find(|p| p.url == url);
                ReplicaLag {
                    merged_revision: pull.map_or(0, |p| p.merged_revision),
                    behind_ms: pull
                        .and_then(|p| p.caught_up_ago)
                        .map(|d| d.as_millis() as u64),
                    error: pull.and_then(|p| p.failing.as_ref().map(|(_, e)| e.clone())),
                    failing_ms: pull
                        .and_then(|p| p.failing.as_ref().map(|(d, _)| d.as_millis() as u64)),
                    name,
                    url,
                }
            })
            .collect();
        lags.sort_by(|a, b| a.name.cmp(&b.name));
        lags
    }
}

/// The embedded store's server and compactor, and what stops the server.
struct EmbeddedServer {
    stop: oneshot::Sender<()>,
    server: JoinHandle<Result<(), PlatformError>>,
    compactor: JoinHandle<()>,
}

/// Starts one mote store replica with its data in `data/store`, serving the etcd API on
/// `listen` (and, in the edge set-up, its peers); returns its URL, the handle that stops it and
/// its peering. With TLS, the peer API serves it, and so does the etcd API unless it listens
/// on loopback: there only this machine reaches it, and an operator's certificate need not
/// name 127.0.0.1.
async fn start_embedded_store(
    data: &Path,
    listen: SocketAddr,
    edge: Option<Edge>,
    security: &Security,
) -> Result<
    (
        String,
        EmbeddedServer,
        Option<(String, Arc<ReplicaPeering>)>,
    ),
    PlatformError,
> {
    let dir = data.join("store");
    let clients = tokio::net::TcpListener::bind(listen)
        .await
        .map_err(|source| PlatformError::Listen {
            addr: listen,
            what: "the embedded store",
            fix: "choose another with --store-listen, or use --store URL",
            source,
        })?;
    let client_tls = security
        .store_server()
        .filter(|_| !listen.ip().is_loopback());
    let client_scheme = if client_tls.is_some() {
        "https"
    } else {
        "http"
    };
    // The node dials its own replica: on loopback when it listens on every address, so that
    // the URL names an address a certificate can hold.
    let dialled = crate::machine::dialled_here(local_addr(&clients, listen)?);
    let url = format!("{client_scheme}://{dialled}");
    let (members, peer_listener) = match edge {
        None => (
            vec![Member::new("mote", vec![url.clone()], Vec::new())],
            None,
        ),
        Some(edge) => {
            let peers = tokio::net::TcpListener::bind(edge.peer_listen)
                .await
                .map_err(|source| PlatformError::Listen {
                    addr: edge.peer_listen,
                    what: "the embedded store's peers",
                    fix: "choose another with --store-peer-listen",
                    source,
                })?;
            let peer_url = format!(
                "{}://{}",
                security.scheme(),
                local_addr(&peers, edge.peer_listen)?
            );
            let me = Member::new(&edge.name, vec![url.clone()], vec![peer_url]);
            let mut members = vec![me];
            members.extend(edge.peers);
            (members, Some(peers))
        }
    };
    let replica =
        Replica::open_with(members, Some(&dir), security.store_access()).map_err(|source| {
            PlatformError::EmbeddedStore {
                dir: dir.clone(),
                source,
            }
        })?;
    let peering = peer_listener.as_ref().map(|_| {
        let me = replica.me();
        let peering = ReplicaPeering {
            replica: replica.clone(),
            pulled: Mutex::new(
                replica.members()[1..]
                    .iter()
                    .filter_map(|m| Some((m.name.clone(), m.peer_urls.first()?.clone())))
                    .collect(),
            ),
            loops: Mutex::new(Vec::new()),
        };
        (me.peer_urls[0].clone(), Arc::new(peering))
    });
    // Nobody else compacts the platform's own store; a deploy is a revision, so this keeps
    // a long history for inspection while bounding the disk.
    let compactor = tokio::spawn(
        replica
            .clone()
            .run_compactor(EMBEDDED_KEEP_REVISIONS, Duration::from_secs(300)),
    );
    let (stop, stopped) = oneshot::channel::<()>();
    let peer_tls = security.store_server();
    let server = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        mote_store::service::serve(
            replica,
            EDGE_PULL_INTERVAL,
            clients,
            peer_listener,
            client_tls,
            peer_tls,
            shutdown,
        )
        .await
        .map_err(PlatformError::StoreServer)
    });
    let embedded = EmbeddedServer {
        stop,
        server,
        compactor,
    };
    Ok((url, embedded, peering))
}

/// The address `listener`, bound to `asked`, listens on.
pub(crate) fn local_addr(
    listener: &tokio::net::TcpListener,
    asked: SocketAddr,
) -> Result<SocketAddr, PlatformError> {
    listener
        .local_addr()
        .map_err(|source| PlatformError::Listen {
            addr: asked,
            what: "a listener that has no address",
            fix: "the operating system refused to say where it listens",
            source,
        })
}

/// Parses a replica list (`NAME=URL,...`, each URL a replica's peer API) into the members a
/// replica called `me` pulls from: every entry but its own, so that every replica can be given
/// the same list.
pub fn parse_store_peers(
    list: &[String],
    me: &str,
    flag: &str,
) -> Result<Vec<Member>, PlatformError> {
    list.iter()
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (name, url) = p.split_once('=').ok_or_else(|| {
                PlatformError::Config(format!("{flag} entry `{p}` is not NAME=URL, e.g. b=http://127.0.0.1:2480 (https:// for replicas serving TLS)"))
            })?;
            check_peer_url(url)
                .map_err(|e| PlatformError::Config(format!("{flag} entry `{p}`: {e}")))?;
            Ok((name, url))
        })
        .filter(|entry| !matches!(entry, Ok((name, _)) if *name == me))
        .map(|entry| entry.map(|(name, url)| Member::new(name, Vec::new(), vec![url.to_owned()])))
        .collect()
}
