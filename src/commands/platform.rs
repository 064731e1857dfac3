//! Assembles the single-machine platform from its crates: the state store (an embedded mote
//! store replica, or any etcd-API endpoint), the runtime and the node.

use anyhow::Context;
use mote_node::{Node, NodeConfig};
use mote_state::{EtcdStore, StateStore};
use mote_store::replica::{Member, Replica};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// Where the platform keeps its function records.
pub enum StateSource {
    /// A mote store replica in this process, its data under the platform's data directory,
    /// serving the etcd API on this address so operators can inspect it with etcdctl.
    Embedded(SocketAddr),
    /// An etcd-API endpoint elsewhere (a mote store cluster or a real etcd), by URL.
    Remote(Vec<String>),
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
    embedded: Option<(oneshot::Sender<()>, JoinHandle<anyhow::Result<()>>)>,
}

impl State {
    /// Opens the state named by `source`: starts the embedded replica on `data/store`, or
    /// checks that the remote endpoint answers.
    pub async fn open(data: &Path, source: StateSource) -> anyhow::Result<Self> {
        let (endpoints, embedded) = match source {
            StateSource::Remote(urls) => (urls, None),
            StateSource::Embedded(listen) => {
                let (url, server) = start_embedded_store(data, listen).await?;
                (vec![url], Some(server))
            }
        };
        let store = EtcdStore::connect(&endpoints)
            .await
            .context("cannot reach the state store (point --store at a running etcd-API endpoint, or leave it out to embed one)")?;
        Ok(Self {
            store: Arc::new(store.clone()),
            etcd: store,
            endpoints,
            embedded,
        })
    }

    /// Stops the embedded store's server, if any, once the platform has stopped using it.
    pub async fn close(self) -> anyhow::Result<()> {
        if let Some((stop, server)) = self.embedded {
            let _ = stop.send(());
            server
                .await
                .context("the embedded store's server panicked")??;
        }
        Ok(())
    }
}

/// Revisions of history the embedded store keeps.
const EMBEDDED_KEEP_REVISIONS: i64 = 10_000;

/// Starts one mote store replica with its data in `data/store`, serving the etcd API on
/// `listen`; returns its URL and the handle that stops it.
async fn start_embedded_store(
    data: &Path,
    listen: SocketAddr,
) -> anyhow::Result<(
    String,
    (oneshot::Sender<()>, JoinHandle<anyhow::Result<()>>),
)> {
    let dir = data.join("store");
    let clients = tokio::net::TcpListener::bind(listen).await.with_context(|| {
        format!("the embedded store cannot listen on {listen} (choose another with --store-listen, or use --store URL)")
    })?;
    let url = format!("http://{}", clients.local_addr()?);
    let me = Member::new("mote", vec![url.clone()], Vec::new());
    let replica = Replica::open(vec![me], Some(&dir)).with_context(|| {
        format!(
            "cannot open the embedded store in {} (is another `mote up` using it?)",
            dir.display()
        )
    })?;
    // Nobody else compacts the platform's own store; a deploy is a revision, so this keeps
    // a long history for inspection while bounding the disk.
    tokio::spawn(
        replica
            .clone()
            .run_compactor(EMBEDDED_KEEP_REVISIONS, Duration::from_secs(300)),
    );
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        let shutdown = async {
            let _ = stopped.await;
        };
        // Nobody pulls from the embedded replica, so it serves no peer API; the pull interval
        // only matters for peers, of which it has none.
        mote_store::service::serve(replica, Duration::from_secs(1), clients, None, shutdown)
            .await
            .context("the embedded store's server failed")
    });
    Ok((url, (stop, server)))
}

/// Starts a node set up by `config`, its records in `store` and its modules and compiled code
/// under `data`.
pub async fn start_node(
    data: &Path,
    store: Arc<dyn StateStore>,
    config: NodeConfig,
) -> anyhow::Result<Arc<Node>> {
    let node = Node::start_on(data, store, config)
        .await
        .with_context(|| format!("cannot start the node on {}", data.display()))?;
    Ok(Arc::new(node))
}

/// Resolves on Ctrl-C or SIGTERM.
pub async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending().await,
        }
    };
    tokio::select! { _ = ctrl_c => {}, _ = term => {} }
}

/// The number of cores this machine offers.
pub fn available_cores() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

/// OpenWhisk's default memory per action container; the baseline policy allows as many running
/// calls as fit the machine's memory at this size, as OpenWhisk's invoker does.
const BASELINE_CALL_MEMORY: u64 = 256 << 20;

/// The baseline policy's cap on running calls: physical memory / 256 MiB, at least one per core,
/// at most 256 (threads beyond that only measure the OS scheduler).
pub fn baseline_cap(cores: usize) -> usize {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            let line = m.lines().find(|l| l.starts_with("MemTotal:"))?;
            line.split_whitespace().nth(1)?.parse::<u64>().ok()
        })
        .map(|kib| kib * 1024)
        .unwrap_or(4 << 30);
    ((total / BASELINE_CALL_MEMORY) as usize).clamp(cores, 256)
}
