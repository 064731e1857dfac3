//! `mote up`: the whole platform in one process.

use super::client::NODE_URL_FILE;
use super::machine::{dialled_here, host_name};
use super::platform::{
    Edge, State, StateSource, available_cores, baseline_cap, parse_store_peers, shutdown_signal,
    start_node,
};
use super::secrets::S3_SECRET_KEY;
use super::security::{SecurityArgs, certificate_names};
use anyhow::Context;
use bytes::Bytes;
use clap::Args;
use mote_access::{Grants, HostAllowList};
use mote_cluster::PlacementConfig;
use mote_gateway::{DashboardAt, GatewayConfig, ListenLimits};
use mote_node::{ExecutorsConfig, MicrotaskConfig, MicrotaskMode, NodeConfig, PreemptConfig};
use mote_objects::{Objects, ObjectsConfig, S3Endpoint};
use mote_peers::{Peers, PeersConfig, StorePeering};
use mote_types::{
    DeployOptions, FunctionName, Grantor, HttpSettings, Limits, OutboundCeiling, Route,
};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Options of `mote up`.
#[derive(Args)]
pub struct UpArgs {
    /// Address the HTTP API listens on.
    #[arg(long, default_value = "127.0.0.1:8080", env = "MOTE_LISTEN")]
    listen: SocketAddr,
    /// Address the live dashboard listens on, or `off` for none [default: the --listen address
    /// with the next port, e.g. 127.0.0.1:8081; port 0 stays 0, any free port]. It has a
    /// listener of its own so that no component, which the API's address serves, shares its
    /// origin (and the token it keeps there); the API's /ui redirects to it.
    #[arg(long, env = "MOTE_UI_LISTEN")]
    ui_listen: Option<UiListen>,
    /// Directory for the platform's state: the embedded store's data (function records),
    /// modules, compiled artefacts.
    #[arg(long, default_value = super::client::DEFAULT_DATA_DIR, env = "MOTE_DATA")]
    data: PathBuf,
    /// Keep function records in this etcd-API store (a mote store cluster or a real etcd),
    /// as comma-separated URLs, instead of the store embedded in this process.
    #[arg(long, value_delimiter = ',', env = "MOTE_STORE")]
    store: Vec<String>,
    /// Address the embedded store serves the etcd v3 API on, for etcdctl and other clients
    /// (unused with --store).
    #[arg(long, default_value = "127.0.0.1:2379")]
    store_listen: SocketAddr,
    /// Edge set-up: the address the embedded store replica serves its peers on. With it, the
    /// replica peers with the others named in --store-peers and with every replica it learns
    /// of from the node keys, so every node works on its own state through a partition.
    #[arg(long)]
    store_peer_listen: Option<SocketAddr>,
    /// Edge set-up: the replicas, as NAME=URL of their peer API (NAME is the node's --node),
    /// comma-separated; this node's own entry is skipped, so every node can take the same
    /// list. A node joining a running cluster needs to name only one member.
    #[arg(long, value_delimiter = ',')]
    store_peers: Vec<String>,
    /// Executor cores calls may use, one running call per core [default: all cores].
    #[arg(long)]
    cores: Option<usize>,
    /// Scheduling policy: fifo, sept, eect, rect, fc (Fair-Choice), or baseline (OpenWhisk-like:
    /// calls start at once, more running calls than cores). See docs/benchmarks/scheduling.md.
    #[arg(long, default_value = "fc")]
    policy: mote_sched::Policy,
    /// Fair-Choice counts each function's calls over this many seconds (the paper's T).
    #[arg(long, default_value_t = 60)]
    fc_window_s: u64,
    /// Under `--policy baseline`, the most calls running at once [default: memory / 256 MiB].
    #[arg(long)]
    baseline_cap: Option<usize>,
    /// Preempt running calls under the ranking policies (sept, eect, rect, fc): a call that has
    /// run for its quantum while a better-ranked call waits is suspended, keeping its instance,
    /// and resumed later; a call that outruns its function's expected time is demoted. `off`
    /// runs every call to its end, as the paper does. fifo and baseline never preempt.
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    preempt: String,
    /// Under --preempt on, how long a call runs before a better-ranked call may take its core,
    /// in microseconds (decided at the epoch ticks, every 0.5 ms).
    #[arg(long, default_value_t = PreemptConfig::default().quantum.as_micros() as u64)]
    quantum_us: u64,
    /// Under --preempt on, the most calls suspended at once. Each holds its instance (its memory)
    /// and a parked thread; at the bound, running calls are not preempted until one resumes.
    #[arg(long, default_value_t = PreemptConfig::default().max_suspended)]
    max_suspended: usize,
    #[arg(long, help = examples_help())]
    examples: bool,
    /// Largest request body for an invocation, in MiB.
    #[arg(long, default_value_t = 16)]
    max_body_mb: usize,
    /// Largest module for a deploy, in MiB.
    #[arg(long, default_value_t = 64)]
    max_module_mb: usize,
    /// Most calls that may wait for a core; more are refused with 503.
    #[arg(long, default_value_t = 100_000)]
    max_queue: usize,
    /// Quarantine a function after this many calls in a row are killed for their budget; it
    /// refuses calls (409) until redeployed or released (`mote release NAME`). 0: never.
    #[arg(long, default_value_t = 5)]
    quarantine_after: u32,
    /// Most compiled code kept resident, in MiB. Past it, the least recently called functions
    /// are evicted; their next call loads the compiled artefact from disk (a cold start).
    #[arg(long, default_value_t = NodeConfig::DEFAULT_RESIDENT_MB)]
    resident_mb: u64,
    /// Most bytes of each function's log kept in memory, in KiB: the lines its calls wrote
    /// (`mote.log`, stderr) and why failing calls failed (`mote logs NAME`). Past it the oldest
    /// entries go; 0 keeps none.
    #[arg(long, default_value_t = mote_node::DEFAULT_FUNCTION_LOG_BYTES >> 10)]
    function_log_kb: usize,
    /// Microtask scheduling for functions that declare phases (`mote.phase`): `on` queues each
    /// phase in its share class with cores split across the classes; `off` is task-based (a
    /// call holds a whole core from start to end, waits included), for comparison.
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    microtasks: String,
    /// How cores are split across the share classes under `--microtasks on`: `dynamic` (from
    /// the work in each class), or four core counts for the 1000, 500, 250 and 100 permille
    /// classes that add up to --cores, such as `1,0,0,1`.
    #[arg(long, default_value = "dynamic")]
    core_split: mote_sched::SplitMode,
    /// Most calls of functions that declare phases alive at once (running, or waiting on
    /// storage); later calls queue.
    #[arg(long, default_value_t = 256)]
    max_microtask_calls: usize,
    /// Keep guests' objects in this directory, a bucket per subdirectory (create a bucket with
    /// mkdir) [default: DATA/objects]. Ignored with --s3-endpoint.
    #[arg(long, env = "MOTE_OBJECTS_DIR")]
    objects_dir: Option<PathBuf>,
    /// Keep guests' objects in this S3-compatible server (path-style URL, e.g.
    /// http://127.0.0.1:9000), with the access key in MOTE_S3_ACCESS_KEY and the secret key in
    /// MOTE_S3_SECRET_KEY or --s3-secret-key-file.
    #[arg(long, env = "MOTE_S3_ENDPOINT")]
    s3_endpoint: Option<String>,
    /// With --s3-endpoint: the bucket (which must exist) that keeps a copy of every module
    /// deployed on this node, for nodes that adopt its record when no peer holds the module.
    #[arg(long, default_value = "mote-modules", env = "MOTE_MODULES_BUCKET")]
    modules_bucket: String,
    /// The region S3 requests are signed for.
    #[arg(long, default_value = "us-east-1", env = "MOTE_S3_REGION")]
    s3_region: String,
    /// The S3 access key id (an identifier, not a secret: every signed request names it).
    #[arg(long, env = "MOTE_S3_ACCESS_KEY", hide_env_values = true)]
    s3_access_key: Option<String>,
    /// A file holding the S3 secret access key, which MOTE_S3_SECRET_KEY may hold instead.
    #[arg(long, value_name = "FILE")]
    s3_secret_key_file: Option<PathBuf>,
    /// Refused, with what to use instead: every user of the machine reads a command line.
    #[arg(long = "s3-secret-key", value_name = "KEY", hide = true)]
    s3_secret_key_in_argv: Option<String>,
    /// Confine executor threads with a seccomp allow-list (Linux): code running there cannot
    /// open files, sockets or processes.
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    seccomp: String,
    /// This node's name in its cluster (nodes that share a state store are one cluster)
    /// [default: the host name].
    #[arg(long, env = "MOTE_NODE")]
    node: Option<String>,
    /// The URL peers reach this node's API at [default: http:// (https:// with TLS) and the
    /// --listen address, with the host name if it listens on every address].
    #[arg(long, env = "MOTE_ADVERTISE")]
    advertise: Option<String>,
    /// Seconds this node's key outlives it in the store: how long after a crash its peers
    /// still route calls to it. It is renewed three times a TTL.
    #[arg(long, default_value_t = 3)]
    lease_ttl_s: u64,
    /// Home nodes per function: calls run on them while they have free cores, so that their
    /// code stays resident (1 to 8).
    #[arg(long, default_value_t = 2)]
    homes: usize,
    /// On SIGTERM, the most seconds to wait for open calls to finish after this node left
    /// the routing table; then it exits anyway.
    #[arg(long, default_value_t = 30)]
    stop_timeout_s: u64,
    /// Require a token on every request (`Authorization: Bearer`) even when listening only on
    /// loopback. A node that listens on any other address always requires them, unless
    /// --insecure.
    #[arg(long)]
    require_tokens: bool,
    /// Take requests without tokens on an address beyond loopback: anyone who reaches the port
    /// may deploy and run code. Only for networks nobody else can reach.
    #[arg(long)]
    insecure: bool,
    /// The most any function's outbound requests may reach, comma-separated entries as
    /// `mote deploy --allow-outbound` takes them: `*` (any public address), names and
    /// `*.domain`, IP addresses and CIDR ranges (`10.0.0.0/8:5432`, `[fd00::/8]:443`), or
    /// `none`. Loopback, private, link-local and the node's own addresses are reached only
    /// through an IP or CIDR entry here that a function's grant (by an admin) names too. Deploys
    /// that grant more are refused, and every connection is checked against it.
    #[arg(
        long,
        default_value = "*",
        env = "MOTE_OUTBOUND_CEILING",
        value_name = "LIST"
    )]
    outbound_ceiling: OutboundCeiling,
    /// Failed authentications allowed per client (an IPv4 address, an IPv6 /64) and minute; past
    /// that every request it makes with or for credentials gets 429 until the minute ends, good
    /// credentials included (0: no limit).
    #[arg(long, default_value_t = 30)]
    auth_failures_per_minute: u32,
    /// More `Host` names the API answers to, comma-separated (`mote.example.com`,
    /// `*.example.com`, an IP address, or `*` for any). It always answers to loopback names and
    /// addresses, the --listen address and the --advertise host; a request naming any other host
    /// is refused (421), which is what keeps web pages that rename themselves (DNS rebinding)
    /// out. A node on every address (0.0.0.0) also answers to every IP address.
    #[arg(long, value_delimiter = ',', env = "MOTE_ALLOW_HOST")]
    allow_host: Vec<String>,
    /// Most connections open at once on each listener; past it the node accepts no more until
    /// one closes. A connection idle for 60 s without a request is closed.
    #[arg(long, default_value_t = ListenLimits::default().max_connections)]
    max_connections: usize,
    /// Most TLS handshakes in progress at once on each listener; each has 10 s, its wait
    /// included.
    #[arg(long, default_value_t = ListenLimits::default().max_handshakes)]
    max_tls_handshakes: usize,
    /// Log filter (tracing's EnvFilter syntax), e.g. `info` or `mote=debug`.
    #[arg(long, default_value = "info", env = "MOTE_LOG")]
    log: String,
    #[command(flatten)]
    security: SecurityArgs,
}

/// Runs the platform until Ctrl-C or SIGTERM.
pub fn run(args: UpArgs) -> anyhow::Result<()> {
    let s3_secret_key = S3_SECRET_KEY.read(
        args.s3_secret_key_file.as_deref(),
        args.s3_secret_key_in_argv.as_deref(),
    )?;
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_new(&args.log).context("bad --log filter")?,
        )
        .init();
    let cores = args.cores.unwrap_or_else(available_cores);
    anyhow::ensure!(cores > 0, "--cores must be at least 1");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("mote-gateway")
        .build()?;
    runtime.block_on(serve(args, cores, s3_secret_key))
}

async fn serve(args: UpArgs, cores: usize, s3_secret_key: Option<String>) -> anyhow::Result<()> {
    let executors = ExecutorsConfig {
        policy: args.policy,
        fc_window: std::time::Duration::from_secs(args.fc_window_s.max(1)),
        baseline_cap: args.baseline_cap.unwrap_or_else(|| baseline_cap(cores)),
        max_queue: args.max_queue,
        quarantine_after: args.quarantine_after,
        seccomp: args.seccomp == "on",
        preempt: (args.preempt == "on").then_some(PreemptConfig {
            quantum: Duration::from_micros(args.quantum_us),
            max_suspended: args.max_suspended,
            ..PreemptConfig::default()
        }),
        ..ExecutorsConfig::new(cores)
    };
    let preemption = match executors.preemption() {
        Some(p) => format!(
            "preemption on (quantum {} µs, at most {} suspended)",
            p.quantum.as_micros(),
            p.max_suspended
        ),
        None => "preemption off".to_owned(),
    };
    let policy = executors.policy;
    let objects = match &args.s3_endpoint {
        Some(url) => ObjectsConfig::S3(S3Endpoint {
            url: url.clone(),
            region: args.s3_region.clone(),
            access_key: args
                .s3_access_key
                .clone()
                .context("--s3-endpoint needs an access key: set MOTE_S3_ACCESS_KEY")?,
            secret_key: s3_secret_key.context(
                "--s3-endpoint needs a secret key: set MOTE_S3_SECRET_KEY or give --s3-secret-key-file FILE",
            )?,
        }),
        None => ObjectsConfig::Directory(
            args.objects_dir
                .clone()
                .unwrap_or_else(|| args.data.join("objects")),
        ),
    };
    let objects_at = match &objects {
        ObjectsConfig::S3(endpoint) => endpoint.url.clone(),
        ObjectsConfig::Directory(dir) => dir.display().to_string(),
    };
    let objects = Arc::new(Objects::new(objects)?);
    // Only a shared object store is somewhere another node can fetch a module from.
    let modules = args
        .s3_endpoint
        .is_some()
        .then(|| (objects.clone(), args.modules_bucket.clone()));
    let microtasks = MicrotaskConfig {
        mode: match args.microtasks.as_str() {
            "off" => MicrotaskMode::Off,
            _ => MicrotaskMode::On(args.core_split),
        },
        objects: Some(objects.clone()),
        max_alive: args.max_microtask_calls.max(1),
    };
    let config = NodeConfig {
        executors,
        resident_mb: args.resident_mb,
        microtasks,
        function_log_bytes: args.function_log_kb.saturating_mul(1 << 10),
        outbound_ceiling: args.outbound_ceiling.clone(),
    };
    let name = args.node.clone().unwrap_or_else(host_name);
    let source = match (&args.store[..], args.store_peer_listen) {
        ([], None) => {
            anyhow::ensure!(
                args.store_peers.is_empty(),
                "--store-peers needs --store-peer-listen: the address this node's replica serves its peers on"
            );
            StateSource::Embedded {
                listen: args.store_listen,
                edge: None,
            }
        }
        ([], Some(peer_listen)) => StateSource::Embedded {
            listen: args.store_listen,
            edge: Some(Edge {
                name: name.clone(),
                peer_listen,
                peers: parse_store_peers(&args.store_peers, &name, "--store-peers")?,
            }),
        },
        (_, None) => StateSource::Remote(args.store.clone()),
        (_, Some(_)) => anyhow::bail!(
            "--store-peer-listen is for the store this node embeds; with --store the node uses another"
        ),
    };
    let ui_listen = dashboard_address(args.ui_listen, args.listen)?;
    let mut listening = vec![args.listen.ip(), args.store_listen.ip()];
    listening.extend(args.store_peer_listen.map(|a| a.ip()));
    listening.extend(ui_listen.map(|a| a.ip()));
    let names = certificate_names(&listening, args.advertise.as_deref());
    let mut security = args.security.resolve(Some(&args.data), &names)?;
    // The dashboard serves the API's data: a node reachable beyond loopback on either listener
    // requires tokens.
    let exposed = match ui_listen {
        Some(ui) if args.listen.ip().is_loopback() && !ui.ip().is_loopback() => ui,
        _ => args.listen,
    };
    let tokens_required =
        super::access::tokens_required(exposed, args.require_tokens, args.insecure);
    if tokens_required && security.access.secret.is_none() {
        security.access.secret = Some(super::access::own_secret(&args.data)?);
    }
    let scheme = security.scheme();
    let state = State::open(&args.data, source, &security).await?;
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {} (choose another with --listen)",
                args.listen
            )
        })?;
    let addr = listener.local_addr()?;
    let ui_listener = match ui_listen {
        Some(ui) => Some(tokio::net::TcpListener::bind(ui).await.with_context(|| {
            format!(
                "cannot listen on {ui} for the dashboard (choose another address with --ui-listen, or --ui-listen off)"
            )
        })?),
        None => None,
    };
    let ui_addr = ui_listener
        .as_ref()
        .map(tokio::net::TcpListener::local_addr)
        .transpose()?;
    let url = args
        .advertise
        .clone()
        .unwrap_or_else(|| advertised(scheme, addr))
        .trim_end_matches('/')
        .to_owned();
    write_url(&args.data, &url)?;
    let peers_config = PeersConfig {
        name: name.clone(),
        url: url.clone(),
        instance: instance_id(&args.data)?,
        ttl: Duration::from_secs(args.lease_ttl_s.max(1)),
        placement: PlacementConfig { homes: args.homes },
        policy: policy.to_string(),
        store: state
            .peering
            .clone()
            .map(|(url, peering)| (url, peering as Arc<dyn StorePeering>)),
        modules,
        access: security.access.clone(),
        tokens: Arc::new(Grants::new()),
    };
    // Before the node loads anything: a second node under a taken name must not start at all.
    Peers::check_name(&state.etcd, &peers_config)
        .await
        .context("cannot join the cluster")?;
    let listening: Vec<_> = std::iter::once(addr)
        .chain(ui_addr)
        .map(|a| a.ip())
        .collect();
    let hosts = HostAllowList::new(&listening, &url, &args.allow_host)
        .context("--allow-host takes host names, `*.domain` patterns and IP addresses")?;
    let (access, tokens) = super::access::set_up(
        super::access::AccessOptions {
            tokens_required,
            failures_per_minute: args.auth_failures_per_minute,
            hosts,
        },
        &args.data,
        &state.etcd,
        &name,
        peers_config.tokens.clone(),
    )
    .await?;
    let node = start_node(&args.data, state.store.clone(), config).await?;
    if args.examples {
        for example in mote_guests::ALL.into_iter().chain(mote_guests::JOBS) {
            let name = FunctionName::new(example.name)?;
            node.deploy(name, Bytes::from_static(example.wasm), Limits::default())
                .await
                .with_context(|| format!("deploying the example `{}`", example.name))?;
        }
        let example = mote_guests::HTTP_HELLO;
        let options = DeployOptions {
            http: HttpSettings {
                route: Some(Route::parse(EXAMPLE_ROUTE)?),
                allow_outbound: Vec::new(),
            },
            public: false,
            grantor: Grantor::Admin,
        };
        node.deploy_with(
            FunctionName::new(example.name)?,
            Bytes::from_static(example.wasm),
            Limits::default(),
            options,
        )
        .await
        .with_context(|| format!("deploying the example `{}`", example.name))?;
    }
    let peers = Peers::join(node.clone(), state.etcd.clone(), peers_config)
        .await
        .context("cannot join the cluster")?;
    let confine = match args.seccomp == "on" {
        true => Some(Arc::new(
            mote_node::confine::ExecutorFilter::new().context("confining job threads")?,
        )),
        false => None,
    };
    let jobs = mote_job_service::JobService::new(
        node.clone(),
        Some(objects.clone()),
        Arc::new(super::platform::ClusterWorkers(peers.clone())),
        cores,
        confine,
        &security.access,
    )
    .context("starting the job engine")?;
    let functions = node.list();
    tracing::info!(
        %addr,
        cores,
        %policy,
        data = %args.data.display(),
        store = %state.endpoints.join(","),
        functions = functions.len(),
        outbound_ceiling = %args.outbound_ceiling,
        "mote is up"
    );
    let store = state.endpoints.join(",");
    println!(
        "mote is up on {scheme}://{addr} with {cores} executor cores, policy {policy}, \
         {preemption}, microtasks {}; data in {}, function records in the etcd-API store at \
         {store}, objects in {objects_at}",
        args.microtasks,
        args.data.display()
    );
    if let Some(ui) = ui_addr {
        println!("dashboard on {scheme}://{ui}/ui");
    }
    if args.examples {
        let mut curl = match &security.identity {
            Some(identity) => format!("curl --cacert {}", identity.cert_path().display()),
            None => "curl".to_owned(),
        };
        if tokens_required {
            curl = format!(
                "{curl} -H \"authorization: Bearer $(cat {})\"",
                args.data.join(super::client::ADMIN_TOKEN_FILE).display()
            );
        }
        let at = dialled_here(addr);
        println!("try:  {curl} -X POST --data-binary 'mote' {scheme}://{at}/v1/invoke/hello");
        println!(
            "      {curl} {scheme}://{at}/hello-http/echo?q=1 -d 'a wasi:http component'   ({} on {EXAMPLE_ROUTE})",
            mote_guests::HTTP_HELLO.name
        );
    }
    println!("node `{name}` is in its cluster at {url} (see GET /v1/cluster or `mote nodes`)");
    let config = GatewayConfig {
        max_body_bytes: args.max_body_mb << 20,
        max_module_bytes: args.max_module_mb << 20,
        listen: ListenLimits {
            max_connections: args.max_connections,
            max_handshakes: args.max_tls_handshakes,
            ..ListenLimits::default()
        },
    };
    let stopping = Arc::new(tokio::sync::Notify::new());
    // The dashboard's listener stops with the API's.
    let (stopped, mut on_stop) = tokio::sync::watch::channel(false);
    let signal = {
        let (peers, stopping) = (peers.clone(), stopping.clone());
        async move {
            shutdown_signal().await;
            tracing::info!("stopping: leaving the routing table, then finishing open calls");
            peers.drain().await;
            // Peers that were about to send a call learn of the drain from the store's watch
            // first, so that no call meets a closed listener.
            if peers.has_others() {
                tokio::time::sleep(DRAIN_NOTICE).await;
            }
            stopping.notify_one();
            stopped.send_replace(true);
        }
    };
    let tls = security.identity.as_ref().map(|i| i.server_config());
    let api = mote_gateway::Api {
        node,
        peers: peers.clone(),
        jobs,
        access,
        tokens,
        config,
        dashboard: ui_addr.map(|ui| DashboardAt::new(ui, addr, tls.is_some())),
    };
    let server = mote_gateway::serve(listener, tls.clone(), api.clone(), signal);
    let dashboard = async move {
        let Some(listener) = ui_listener else {
            return Ok(());
        };
        let shutdown = async move {
            // An error means the API's server is gone, signal and all: stop too.
            let _ = on_stop.wait_for(|stopped| *stopped).await;
        };
        mote_gateway::serve_dashboard(listener, tls, api, shutdown).await
    };
    let servers = async { tokio::try_join!(server, dashboard) };
    let stop_timeout = Duration::from_secs(args.stop_timeout_s);
    tokio::select! {
        served = servers => {
            served?;
        }
        _ = async { stopping.notified().await; tokio::time::sleep(stop_timeout).await } => {
            tracing::warn!(seconds = args.stop_timeout_s, "calls were still open at the stop timeout; exiting without them");
        }
    }
    peers.leave().await;
    state.close().await?;
    tracing::info!("mote stopped");
    Ok(())
}

/// Where `mote up --ui-listen` serves the dashboard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum UiListen {
    /// Nowhere.
    Off,
    /// On this address.
    At(SocketAddr),
}

impl std::str::FromStr for UiListen {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "off" => Ok(Self::Off),
            _ => s.parse().map(Self::At).map_err(|_| {
                format!("`{s}` is not an address to serve the dashboard on: give IP:PORT, or `off`")
            }),
        }
    }
}

/// Where the dashboard listens: `--ui-listen` as given, else the API's address `listen` with the
/// next port (port 0, any free port, stays 0); `None` for `off`.
fn dashboard_address(
    ui_listen: Option<UiListen>,
    listen: SocketAddr,
) -> anyhow::Result<Option<SocketAddr>> {
    match ui_listen {
        Some(UiListen::Off) => Ok(None),
        Some(UiListen::At(addr)) => Ok(Some(addr)),
        None if listen.port() == 0 => Ok(Some(listen)),
        None => {
            let port = listen.port().checked_add(1).with_context(|| {
                format!(
                    "--listen {listen} leaves no next port for the dashboard: give it an address with --ui-listen, or --ui-listen off"
                )
            })?;
            Ok(Some(SocketAddr::new(listen.ip(), port)))
        }
    }
}

/// `--examples`' help, naming what it deploys.
fn examples_help() -> String {
    let names = |examples: &[mote_guests::Example]| {
        examples
            .iter()
            .map(|e| e.name)
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "Deploy the example functions at start-up: {} (functions), {} (jobs) and {} (a wasi:http \
         component on {EXAMPLE_ROUTE})",
        names(&mote_guests::ALL),
        names(&mote_guests::JOBS),
        mote_guests::HTTP_HELLO.name
    )
}

/// Where `mote up --examples` mounts the example `wasi:http` component.
const EXAMPLE_ROUTE: &str = "/hello-http/...";

/// How long a stopping node waits, once its key says it is draining, before it closes its
/// listener: peers see the key change within milliseconds through their watches.
const DRAIN_NOTICE: Duration = Duration::from_millis(300);

/// The URL peers reach `addr` at: itself, or the host name if it is every address.
fn advertised(scheme: &str, addr: SocketAddr) -> String {
    match addr.ip().is_unspecified() {
        true => format!("{scheme}://{}:{}", host_name(), addr.port()),
        false => format!("{scheme}://{addr}"),
    }
}

/// Writes the URL this node advertises to `DATA/url`, where the CLI looks before it sends the
/// admin token to a server that is not on loopback. Whole or not at all (a rename), so that a
/// command never reads half of it.
fn write_url(data: &std::path::Path, url: &str) -> anyhow::Result<()> {
    let path = data.join(NODE_URL_FILE);
    let partial = data.join(format!("{NODE_URL_FILE}.partial"));
    // With `--store URL` nothing else may have made the data directory yet.
    std::fs::create_dir_all(data)
        .and_then(|()| std::fs::write(&partial, format!("{url}\n")))
        .and_then(|()| std::fs::rename(&partial, &path))
        .with_context(|| format!("cannot write the node's URL to {}", path.display()))
}

/// This node's instance id, kept in `DATA/node-id` (made on first start): a restart on the
/// same data takes its name back at once, wherever it listens now.
fn instance_id(data: &std::path::Path) -> anyhow::Result<String> {
    let path = data.join("node-id");
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => Ok(id.trim().to_owned()),
        _ => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos());
            let id = format!("{:x}-{:x}", nanos, std::process::id());
            std::fs::create_dir_all(data)
                .and_then(|()| std::fs::write(&path, &id))
                .with_context(|| format!("cannot write the node's id to {}", path.display()))?;
            Ok(id)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn the_dashboard_listens_on_the_next_port_unless_told() {
        let listen = addr("127.0.0.1:8080");
        assert_eq!(
            dashboard_address(None, listen).unwrap(),
            Some(addr("127.0.0.1:8081"))
        );
        let every = addr("[::]:9000");
        assert_eq!(
            dashboard_address(None, every).unwrap(),
            Some(addr("[::]:9001"))
        );
        let any = addr("127.0.0.1:0");
        assert_eq!(dashboard_address(None, any).unwrap(), Some(any));
        let told: UiListen = "10.0.0.1:7000".parse().unwrap();
        assert_eq!(
            dashboard_address(Some(told), listen).unwrap(),
            Some(addr("10.0.0.1:7000"))
        );
        let off: UiListen = "off".parse().unwrap();
        assert_eq!(dashboard_address(Some(off), listen).unwrap(), None);
        let last = dashboard_address(None, addr("127.0.0.1:65535")).unwrap_err();
        assert!(last.to_string().contains("--ui-listen"), "{last}");
        let bad = "8081".parse::<UiListen>().unwrap_err();
        assert!(bad.contains("`8081`") && bad.contains("IP:PORT"), "{bad}");
    }
}
