//! [`Platform`]: the whole platform of one machine, started from a [`PlatformConfig`]: the
//! state store, the node, its cluster membership, the job engine, the API's and the dashboard's
//! listeners. It serves until drained ([`Platform::drain`]) and stopped ([`Platform::stop`]).

use crate::access::{AccessOptions, own_secret, set_up, tokens_required};
use crate::config::{ObjectsChoice, PlatformConfig, StoreChoice};
use crate::data_dir::{instance_id, write_url};
use crate::error::PlatformError;
use crate::machine::{available_cores, baseline_cap, host_name};
use crate::notice::Notice;
use crate::security::{Security, certificate_names};
use crate::state::{Edge, State, StateSource, local_addr, parse_store_peers};
use crate::workers::ClusterWorkers;
use mote_access::{Grants, HostAllowList};
use mote_cluster::PlacementConfig;
use mote_gateway::DashboardAt;
use mote_node::{MicrotaskMode, Node, PreemptConfig};
use mote_objects::{Objects, ObjectsConfig};
use mote_peers::{Peers, PeersConfig, StorePeering};
use mote_sched::Policy;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How long a draining node waits, once its key says it is draining, before it closes its
/// listeners: peers see the key change within milliseconds through their watches.
const DRAIN_NOTICE: Duration = Duration::from_millis(300);

/// A running platform.
///
/// Dropping it without [`Platform::stop`] leaves its listeners serving until the async runtime
/// ends; stop it to release them.
pub struct Platform {
    node: Arc<Node>,
    peers: Arc<Peers>,
    state: Option<State>,
    /// Set once the listeners are to stop taking connections.
    closing: watch::Sender<bool>,
    /// The API's and the dashboard's servers, until they have ended.
    servers: Option<JoinHandle<Result<(), PlatformError>>>,
    drained: bool,
    stop_timeout: Duration,
    serving: Serving,
}

/// What a started platform serves and how, for whoever started it to show.
#[derive(Clone, Debug)]
pub struct Serving {
    /// `http` or `https`.
    pub scheme: &'static str,
    /// Where the API listens.
    pub api: SocketAddr,
    /// Where the dashboard listens, unless it is off.
    pub dashboard: Option<SocketAddr>,
    /// The URL peers reach the API at.
    pub advertised: String,
    /// The node's name in its cluster.
    pub node_name: String,
    /// Executor cores.
    pub cores: usize,
    /// The scheduling policy.
    pub policy: Policy,
    /// Preemption, if the policy preempts.
    pub preemption: Option<PreemptConfig>,
    /// Microtask scheduling.
    pub microtasks: MicrotaskMode,
    /// The data directory.
    pub data: PathBuf,
    /// Where the state store is reached.
    pub store: Vec<String>,
    /// Where guests' objects are kept (a directory or a URL).
    pub objects: String,
    /// Whether requests need tokens.
    pub tokens_required: bool,
    /// The certificate served, if TLS is on.
    pub tls_cert: Option<PathBuf>,
    /// Whether the examples were deployed.
    pub examples: bool,
    /// What the operator should hear of.
    pub notices: Vec<Notice>,
}

impl Serving {
    /// The API's URL, as a process of this machine dials it.
    pub fn api_url(&self) -> String {
        format!(
            "{}://{}",
            self.scheme,
            crate::machine::dialled_here(self.api)
        )
    }

    /// The dashboard's URL, as a process of this machine dials it.
    pub fn dashboard_url(&self) -> Option<String> {
        self.dashboard
            .map(|ui| format!("{}://{}/ui", self.scheme, crate::machine::dialled_here(ui)))
    }
}

/// How a drain ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Drained {
    /// Every open call finished and every connection closed.
    Finished,
    /// Calls were still open at the stop timeout; [`Platform::stop`] ends them.
    TimedOut,
}

impl Platform {
    /// Starts a platform: binds its listeners, opens (or reaches) its state store, starts the
    /// node and joins its cluster, deploys the examples if asked, and serves.
    pub async fn start(config: PlatformConfig) -> Result<Self, PlatformError> {
        let cores = config.cores.unwrap_or_else(available_cores);
        if cores == 0 {
            return Err(PlatformError::Config(
                "--cores must be at least 1".to_owned(),
            ));
        }
        let data = config.data.clone();
        let mut notices = Vec::new();
        let objects_config = match &config.objects {
            ObjectsChoice::S3 { endpoint, .. } => ObjectsConfig::S3(endpoint.clone()),
            ObjectsChoice::Directory(dir) => {
                ObjectsConfig::Directory(dir.clone().unwrap_or_else(|| data.join("objects")))
            }
        };
        let objects_at = match &objects_config {
            ObjectsConfig::S3(endpoint) => endpoint.url.clone(),
            ObjectsConfig::Directory(dir) => dir.display().to_string(),
        };
        let objects = Arc::new(Objects::new(objects_config).map_err(PlatformError::Objects)?);
        // Only a shared object store is somewhere another node can fetch a module from.
        let modules = match &config.objects {
            ObjectsChoice::S3 { modules_bucket, .. } => {
                Some((objects.clone(), modules_bucket.clone()))
            }
            ObjectsChoice::Directory(_) => None,
        };
        let baseline = config.baseline_cap.unwrap_or_else(|| baseline_cap(cores));
        let node_config = config.node_config(cores, baseline, objects.clone());
        let preemption = node_config.executors.preemption();
        let policy = node_config.executors.policy;
        let name = config.node_name.clone().unwrap_or_else(host_name);
        let source = state_source(&config.store, &name)?;
        let ui_listen = config.ui.address(config.listen)?;
        let store_listen = match config.store {
            StoreChoice::Embedded {
                listen,
                peer_listen,
                ..
            } => vec![Some(listen), peer_listen],
            StoreChoice::Remote(_) => Vec::new(),
        };
        let mut listening = vec![config.listen.ip()];
        listening.extend(store_listen.into_iter().flatten().map(|a| a.ip()));
        listening.extend(ui_listen.map(|a| a.ip()));
        let names = certificate_names(&listening, config.advertise.as_deref());
        let mut security = Security::resolve(&config.security, Some(&data), &names)?;
        // The dashboard serves the API's data: a node reachable beyond loopback on either
        // listener requires tokens.
        let exposed = match ui_listen {
            Some(ui) if config.listen.ip().is_loopback() && !ui.ip().is_loopback() => ui,
            _ => config.listen,
        };
        let tokens_required = tokens_required(
            exposed,
            config.access.require_tokens,
            config.access.insecure,
            &mut notices,
        );
        if tokens_required && security.access.secret.is_none() {
            security.access.secret = Some(own_secret(&data, &mut notices)?);
        }
        let scheme = security.scheme();
        // Listeners first: a taken port fails the start before anything else has begun.
        let listener = bind(config.listen, "the API", "choose another with --listen").await?;
        let addr = local_addr(&listener, config.listen)?;
        let ui_listener = match ui_listen {
            Some(ui) => Some(
                bind(
                    ui,
                    "the dashboard",
                    "choose another address with --ui-listen, or --ui-listen off",
                )
                .await?,
            ),
            None => None,
        };
        let ui_addr = match (&ui_listener, ui_listen) {
            (Some(listener), Some(asked)) => Some(local_addr(listener, asked)?),
            _ => None,
        };
        let state = State::open(&data, source, &security).await?;
        let url = config
            .advertise
            .clone()
            .unwrap_or_else(|| advertised(scheme, addr))
            .trim_end_matches('/')
            .to_owned();
        write_url(&data, &url)?;
        let peers_config = PeersConfig {
            name: name.clone(),
            url: url.clone(),
            instance: instance_id(&data)?,
            ttl: config.lease_ttl.max(Duration::from_secs(1)),
            placement: PlacementConfig {
                homes: config.homes,
                ..PlacementConfig::default()
            },
            pull_every: config.pull_every,
            policy: policy.to_string(),
            store: state
                .peering
                .clone()
                .map(|(url, peering)| (url, peering as Arc<dyn StorePeering>)),
            modules,
            access: security.access.clone(),
            tokens: Arc::new(Grants::new()),
        };
        // Before the node loads anything: a second node under a taken name must not start.
        Peers::check_name(&state.etcd, &peers_config)
            .await
            .map_err(PlatformError::Join)?;
        let listening: Vec<_> = std::iter::once(addr)
            .chain(ui_addr)
            .map(|a| a.ip())
            .collect();
        let hosts = HostAllowList::new(&listening, &url, &config.access.allow_host)
            .map_err(PlatformError::Hosts)?;
        let (access, tokens) = set_up(
            AccessOptions {
                tokens_required,
                failures_per_minute: config.access.auth_failures_per_minute,
                hosts,
            },
            &data,
            &state.etcd,
            &name,
            peers_config.tokens.clone(),
            &mut notices,
        )
        .await?;
        let node = Node::start_on(&data, state.store.clone(), node_config)
            .await
            .map_err(|source| PlatformError::Node {
                data: data.clone(),
                source,
            })?;
        let node = Arc::new(node);
        if config.examples {
            crate::examples::deploy(&node).await?;
        }
        let peers = Peers::join(node.clone(), state.etcd.clone(), peers_config)
            .await
            .map_err(PlatformError::Join)?;
        let confine = match config.seccomp {
            true => Some(Arc::new(
                mote_confine::Filter::new(mote_confine::Role::Guest)
                    .map_err(PlatformError::Confine)?,
            )),
            false => None,
        };
        let jobs = mote_job_service::JobService::new(
            node.clone(),
            Some(objects),
            Arc::new(ClusterWorkers(peers.clone())),
            mote_job_service::JobThreads {
                cores,
                confine,
                idle: config.job_idle,
            },
            &security.access,
            Some(mote_job_service::JobRecords::new(state.store.clone())),
        )
        .map_err(PlatformError::Jobs)?;
        jobs.watch_records();
        tracing::info!(
            %addr,
            cores,
            %policy,
            data = %data.display(),
            store = %state.endpoints.join(","),
            functions = node.list().len(),
            outbound_ceiling = %config.outbound_ceiling,
            "mote is up"
        );
        let tls = security.identity.as_ref().map(|i| i.server_config());
        let api = mote_gateway::Api {
            node: node.clone(),
            peers: peers.clone(),
            jobs,
            access,
            tokens,
            config: config.gateway,
            dashboard: ui_addr.map(|ui| DashboardAt::new(ui, addr, tls.is_some())),
        };
        let (closing, closed) = watch::channel(false);
        // Serving once this returns: "mote is up" means the readers take connections.
        let listener = listener.into_std().map_err(|source| PlatformError::Serve {
            what: "API",
            source,
        })?;
        let readers =
            mote_gateway::serve(listener, tls.clone(), api.clone()).map_err(|source| {
                PlatformError::Serve {
                    what: "API",
                    source,
                }
            })?;
        let servers = tokio::spawn(serve(readers, ui_listener, tls, api, closed));
        let serving = Serving {
            scheme,
            api: addr,
            dashboard: ui_addr,
            advertised: url,
            node_name: name,
            cores,
            policy,
            preemption,
            microtasks: config.microtasks,
            data,
            store: state.endpoints.clone(),
            objects: objects_at,
            tokens_required,
            tls_cert: security.identity.as_ref().map(|i| i.cert_path().to_owned()),
            examples: config.examples,
            notices,
        };
        Ok(Self {
            node,
            peers,
            state: Some(state),
            closing,
            servers: Some(servers),
            drained: false,
            stop_timeout: config.stop_timeout,
            serving,
        })
    }

    /// What the platform serves and how.
    pub fn serving(&self) -> &Serving {
        &self.serving
    }

    /// The node, for callers in the same process.
    pub fn node(&self) -> &Arc<Node> {
        &self.node
    }

    /// Serves until `signal` resolves (then `Ok`), or a listener fails (its error).
    pub async fn serve_until(
        &mut self,
        signal: impl std::future::Future<Output = ()>,
    ) -> Result<(), PlatformError> {
        let Some(servers) = self.servers.as_mut() else {
            return Ok(());
        };
        tokio::select! {
            () = signal => Ok(()),
            ended = servers => {
                self.servers = None;
                ended.map_err(|_| PlatformError::Panicked("API's server"))?
            }
        }
    }

    /// Stops taking new work and lets open calls finish: the node leaves the routing table
    /// (peers stop sending it calls), then both listeners close (a new connection is refused)
    /// while the requests in progress on open connections finish, within the configured stop
    /// timeout.
    pub async fn drain(&mut self) -> Result<Drained, PlatformError> {
        if !self.drained {
            self.drained = true;
            tracing::info!("stopping: leaving the routing table, then finishing open calls");
            self.peers.drain().await;
            // Peers that were about to send a call learn of the drain from the store's watch
            // first, so that no call meets a closed listener.
            if self.peers.has_others() {
                tokio::time::sleep(DRAIN_NOTICE).await;
            }
            self.closing.send_replace(true);
        }
        let Some(servers) = self.servers.as_mut() else {
            return Ok(Drained::Finished);
        };
        match tokio::time::timeout(self.stop_timeout, servers).await {
            Ok(ended) => {
                self.servers = None;
                ended.map_err(|_| PlatformError::Panicked("API's server"))??;
                Ok(Drained::Finished)
            }
            Err(_) => {
                tracing::warn!(
                    seconds = self.stop_timeout.as_secs(),
                    "calls were still open at the stop timeout; exiting without them"
                );
                Ok(Drained::TimedOut)
            }
        }
    }

    /// Stops everything: drains first if not yet drained, ends what is still open, leaves the
    /// cluster, stops the embedded store, and waits for the node's threads once nothing else
    /// holds the node. Every listener is closed when it returns.
    pub async fn stop(mut self) -> Result<(), PlatformError> {
        if !self.drained {
            self.drain().await?;
        }
        if let Some(servers) = self.servers.take() {
            servers.abort();
            // Aborted, or ended with the error drain already had no time to see.
            if let Ok(Err(e)) = servers.await {
                tracing::warn!(error = %e, "a listener failed while stopping");
            }
        }
        self.peers.leave().await;
        if let Some(state) = self.state.take() {
            state.close().await?;
        }
        let Self { node, peers, .. } = self;
        drop(peers);
        // The last reference joins the executor threads, which must not block the runtime.
        tokio::task::spawn_blocking(move || drop(node))
            .await
            .map_err(|_| PlatformError::Panicked("node's shutdown"))?;
        tracing::info!("mote stopped");
        Ok(())
    }

    /// The data directory.
    pub fn data(&self) -> &Path {
        &self.serving.data
    }
}

/// Serves the API on `readers` and the dashboard on `ui` until `closed` says so, then lets
/// their open requests finish.
async fn serve(
    readers: mote_gateway::Readers,
    ui: Option<TcpListener>,
    tls: Option<Arc<mote_tls::ServerConfig>>,
    api: mote_gateway::Api,
    closed: watch::Receiver<bool>,
) -> Result<(), PlatformError> {
    let until = |mut closed: watch::Receiver<bool>| async move {
        // An error means the platform is gone: stop too.
        let _ = closed.wait_for(|closed| *closed).await;
    };
    let server = readers.serve_until(until(closed.clone()));
    let server = async {
        server.await.map_err(|source| PlatformError::Serve {
            what: "API",
            source,
        })
    };
    let dashboard = async move {
        let Some(ui) = ui else {
            return Ok(());
        };
        mote_gateway::serve_dashboard(ui, tls, api, until(closed))
            .await
            .map_err(|source| PlatformError::Serve {
                what: "dashboard",
                source,
            })
    };
    tokio::try_join!(server, dashboard).map(|_| ())
}

/// Binds `addr` for `what`; `fix` says which setting chooses another.
async fn bind(
    addr: SocketAddr,
    what: &'static str,
    fix: &'static str,
) -> Result<TcpListener, PlatformError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| PlatformError::Listen {
            addr,
            what,
            fix,
            source,
        })
}

/// Where the node keeps its records, from the configured `store`; `name` is the node's.
fn state_source(store: &StoreChoice, name: &str) -> Result<StateSource, PlatformError> {
    match store {
        StoreChoice::Embedded {
            listen,
            peer_listen: None,
            peers,
        } => {
            if !peers.is_empty() {
                return Err(PlatformError::Config(
                    "--store-peers needs --store-peer-listen: the address this node's replica serves its peers on".to_owned(),
                ));
            }
            Ok(StateSource::Embedded {
                listen: *listen,
                edge: None,
            })
        }
        StoreChoice::Embedded {
            listen,
            peer_listen: Some(peer_listen),
            peers,
        } => Ok(StateSource::Embedded {
            listen: *listen,
            edge: Some(Edge {
                name: name.to_owned(),
                peer_listen: *peer_listen,
                peers: parse_store_peers(peers, name, "--store-peers")?,
            }),
        }),
        StoreChoice::Remote(urls) => Ok(StateSource::Remote(urls.clone())),
    }
}

/// The URL peers reach `addr` at: itself, or the host name if it is every address.
fn advertised(scheme: &str, addr: SocketAddr) -> String {
    match addr.ip().is_unspecified() {
        true => format!("{scheme}://{}:{}", host_name(), addr.port()),
        false => format!("{scheme}://{addr}"),
    }
}
