//! `mote store`: one replica of mote store, serving the etcd v3 API.

use super::security::SecurityArgs;
use super::signal::shutdown_signal;
use anyhow::Context;
use clap::Args;
use mote_platform::certificate_names;
use mote_platform::state::parse_store_peers;
use mote_store::replica::{Member, Replica};
use mote_store::service::serve;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Options of `mote store`.
#[derive(Args)]
pub struct StoreArgs {
    /// This replica's name; its member id is derived from it.
    #[arg(long, default_value = "default")]
    name: String,
    /// Address the etcd v3 gRPC API listens on (etcdctl's --endpoints).
    #[arg(long, default_value = "127.0.0.1:2379")]
    listen: SocketAddr,
    /// Address the peer API listens on, for the other replicas.
    #[arg(long, default_value = "127.0.0.1:2380")]
    peer_listen: SocketAddr,
    /// The replicas, as NAME=URL of their peer API, comma-separated (e.g.
    /// `a=http://127.0.0.1:2380,b=http://127.0.0.1:2480,c=http://127.0.0.1:2580`); this
    /// replica's own entry is skipped, so every replica can take the same list. None: a single
    /// replica.
    #[arg(long, value_delimiter = ',')]
    peers: Vec<String>,
    /// Directory the replica keeps its data in; every acknowledged write is on disk there.
    /// Without it the replica keeps everything in memory and forgets it on exit.
    #[arg(long)]
    data: Option<PathBuf>,
    /// How often to pull each peer's changes when there were none, in milliseconds.
    #[arg(long, default_value_t = 20)]
    pull_interval_ms: u64,
    /// Compact history automatically, keeping this many revisions (etcd's
    /// `--auto-compaction-mode revision`); 0 leaves compaction to clients, as etcd does by
    /// default (kube-apiserver compacts every 5 minutes).
    #[arg(long, default_value_t = 0)]
    auto_compact_keep: i64,
    /// How often automatic compaction runs, in seconds.
    #[arg(long, default_value_t = 300)]
    auto_compact_interval_s: u64,
    /// Log filter (tracing's EnvFilter syntax), e.g. `info` or `mote_store=debug`.
    #[arg(long, default_value = "info", env = "MOTE_LOG")]
    log: String,
    #[command(flatten)]
    security: SecurityArgs,
}

/// Runs the replica until Ctrl-C or SIGTERM.
pub fn run(args: StoreArgs) -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&args.log).context("bad --log filter")?,
        )
        .init();
    let peers = parse_store_peers(&args.peers, &args.name, "--peers")?;
    let names = certificate_names(&[args.listen.ip(), args.peer_listen.ip()], None);
    let security = args.security.resolve(args.data.as_deref(), &names)?;
    let scheme = security.scheme();
    let me = Member::new(
        &args.name,
        vec![format!("{scheme}://{}", args.listen)],
        vec![format!("{scheme}://{}", args.peer_listen)],
    );
    let mut members = vec![me];
    members.extend(peers);
    let access = security.store_access();
    let replica = match &args.data {
        Some(dir) => Replica::open_with(members, Some(dir), access)
            .with_context(|| format!("cannot open the store's data in {}", dir.display()))?,
        None => {
            tracing::warn!("no --data: this replica keeps its state in memory only");
            Replica::open_with(members, None, access)?
        }
    };
    let pull_interval = Duration::from_millis(args.pull_interval_ms.max(1));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("mote-store")
        .build()?;
    runtime.block_on(async {
        let clients = tokio::net::TcpListener::bind(args.listen)
            .await
            .with_context(|| format!("cannot listen on {} (--listen)", args.listen))?;
        let peers = tokio::net::TcpListener::bind(args.peer_listen)
            .await
            .with_context(|| format!("cannot listen on {} (--peer-listen)", args.peer_listen))?;
        let (client_addr, peer_addr) = (clients.local_addr()?, peers.local_addr()?);
        tracing::info!(name = %args.name, clients = %client_addr, peers = %peer_addr, "mote store is up");
        println!(
            "mote store {} is up: etcd v3 API on {scheme}://{client_addr}, peer API on {scheme}://{peer_addr}",
            args.name
        );
        if args.auto_compact_keep > 0 {
            let every = Duration::from_secs(args.auto_compact_interval_s.max(1));
            tokio::spawn(replica.clone().run_compactor(args.auto_compact_keep, every));
        }
        let tls = security.store_server();
        serve(
            replica,
            pull_interval,
            clients,
            Some(peers),
            tls.clone(),
            tls,
            shutdown_signal(),
        )
            .await
            .context("the store's server failed")?;
        tracing::info!("mote store stopped");
        Ok(())
    })
}
