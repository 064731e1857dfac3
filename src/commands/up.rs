//! `mote up`: the whole platform in one process. The flags become a [`PlatformConfig`] (their
//! defaults are its), [`Platform::start`] starts it, this prints what it serves, and on Ctrl-C
//! or SIGTERM the platform drains and stops.

use super::secrets::S3_SECRET_KEY;
use super::security::SecurityArgs;
use super::signal::shutdown_signal;
use anyhow::Context;
use clap::{Args, ValueEnum};
use mote_gateway::{GatewayConfig, ListenLimits};
use mote_node::{JobShare, MAX_JOB_SHARE};
use mote_node::{MicrotaskMode, PreemptConfig};
use mote_objects::S3Endpoint;
use mote_platform::data_dir::ADMIN_TOKEN_FILE;
use mote_platform::examples::EXAMPLE_ROUTE;
use mote_platform::machine::dialled_here;
use mote_platform::{
    AccessConfig, DEFAULT_DATA_DIR, DEFAULT_LISTEN, DEFAULT_STORE_LISTEN, ObjectsChoice, Platform,
    PlatformConfig, Serving, StoreChoice, UiListen,
};
use mote_types::OutboundCeiling;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

/// Options of `mote up`.
#[derive(Args)]
pub struct UpArgs {
    /// Address the HTTP API listens on.
    #[arg(long, default_value = DEFAULT_LISTEN, env = "MOTE_LISTEN")]
    listen: SocketAddr,
    /// Address the live dashboard listens on, or `off` for none [default: the --listen address
    /// with the next port, e.g. 127.0.0.1:8081; port 0 stays 0, any free port]. It has a
    /// listener of its own so that no component, which the API's address serves, shares its
    /// origin (and the token it keeps there); the API's /ui redirects to it.
    #[arg(long, env = "MOTE_UI_LISTEN")]
    ui_listen: Option<UiListen>,
    /// Directory for the platform's state: the embedded store's data (function records),
    /// modules, compiled artefacts.
    #[arg(long, default_value = DEFAULT_DATA_DIR, env = "MOTE_DATA")]
    data: PathBuf,
    /// Keep function records in this etcd-API store (a mote store cluster or a real etcd),
    /// as comma-separated URLs, instead of the store embedded in this process.
    #[arg(long, value_delimiter = ',', env = "MOTE_STORE")]
    store: Vec<String>,
    /// Address the embedded store serves the etcd v3 API on, for etcdctl and other clients
    /// (unused with --store).
    #[arg(long, default_value = DEFAULT_STORE_LISTEN)]
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
    #[arg(long, value_enum, default_value_t = defaults().policy)]
    policy: mote_sched::Policy,
    /// Fair-Choice counts each function's calls over this many seconds (the paper's T).
    #[arg(long, default_value_t = defaults().fc_window.as_secs())]
    fc_window_s: u64,
    /// Under `--policy baseline`, the most calls running at once [default: memory / 256 MiB].
    #[arg(long)]
    baseline_cap: Option<usize>,
    /// Preempt running calls under the ranking policies (sept, eect, rect, fc): a call that has
    /// run for its quantum while a better-ranked call waits is suspended, keeping its instance,
    /// and resumed later; a call that outruns its function's expected time is demoted. `off`
    /// runs every call to its end, as the paper does. fifo and baseline never preempt.
    #[arg(long, value_enum, default_value_t = Switch::from(defaults().preempt.is_some()))]
    preempt: Switch,
    /// Under --preempt on, how long a call runs before a better-ranked call may take its core,
    /// in microseconds (decided at the epoch ticks, every 0.5 ms).
    #[arg(long, default_value_t = PreemptConfig::default().quantum.as_micros() as u64)]
    quantum_us: u64,
    /// Under --preempt on, the most calls suspended at once. Each holds its instance (its memory)
    /// and a parked thread or a fiber; at the bound, running calls are not preempted until one
    /// resumes.
    #[arg(long, default_value_t = PreemptConfig::default().max_suspended)]
    max_suspended: usize,
    /// Run a call on the thread that read its request (a reader, confined like every thread
    /// that runs guest code, and preemptible at its epoch ticks) when a core is free and no call
    /// waits, skipping the hand-off to an executor; off queues every call for an executor.
    #[arg(long, value_enum, default_value_t = Switch::from(defaults().inline))]
    inline: Switch,
    #[arg(long, help = examples_help())]
    examples: bool,
    /// Largest request body for an invocation, in MiB.
    #[arg(long, default_value_t = GatewayConfig::default().max_body_bytes >> 20)]
    max_body_mb: usize,
    /// Largest module for a deploy, in MiB.
    #[arg(long, default_value_t = GatewayConfig::default().max_module_bytes >> 20)]
    max_module_mb: usize,
    /// Most calls that may wait for a core; more are refused with 503.
    #[arg(long, default_value_t = defaults().max_queue)]
    max_queue: usize,
    /// Quarantine a function after this many calls in a row are killed for their budget; it
    /// refuses calls (409) until redeployed or released (`mote release NAME`). 0: never.
    #[arg(long, default_value_t = defaults().quarantine_after)]
    quarantine_after: u32,
    /// Most compiled code kept resident, in MiB. Past it, the least recently called functions
    /// are evicted; their next call loads the compiled artefact from disk (a cold start).
    #[arg(long, default_value_t = defaults().resident_mb)]
    resident_mb: u64,
    /// Most bytes of each function's log kept in memory, in KiB: the lines its calls wrote
    /// (`mote.log`, stderr) and why failing calls failed (`mote logs NAME`). Past it the oldest
    /// entries go; 0 keeps none.
    #[arg(long, default_value_t = defaults().function_log_bytes >> 10)]
    function_log_kb: usize,
    /// Microtask scheduling for functions that declare phases (`mote.phase`): `on` queues each
    /// phase in its share class with cores split across the classes; `off` is task-based (a
    /// call holds a whole core from start to end, waits included), for comparison.
    #[arg(long, value_enum, default_value_t = Switch::from(matches!(defaults().microtasks, MicrotaskMode::On(_))))]
    microtasks: Switch,
    /// How cores are split across the share classes under `--microtasks on`: `dynamic` (from
    /// the work in each class), or four core counts for the 1000, 500, 250 and 100 permille
    /// classes that add up to --cores, such as `1,0,0,1`.
    #[arg(long, default_value = "dynamic")]
    core_split: mote_sched::SplitMode,
    /// Most calls of functions that declare phases alive at once (running, or waiting on
    /// storage); later calls queue.
    #[arg(long, default_value_t = defaults().max_microtask_calls)]
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
    #[arg(long, default_value = ObjectsChoice::DEFAULT_MODULES_BUCKET, env = "MOTE_MODULES_BUCKET")]
    modules_bucket: String,
    /// The region S3 requests are signed for.
    #[arg(long, default_value = ObjectsChoice::DEFAULT_S3_REGION, env = "MOTE_S3_REGION")]
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
    /// Percent of the node's cores (rounded down) that running jobs keep while calls want
    /// every core, 0 to 100. At 0, the default, a job's tasks give their cores to calls as
    /// they arrive and take them back as calls end. A job uses every core calls leave whatever
    /// its share.
    #[arg(long, env = "MOTE_JOB_SHARE", value_name = "PERCENT", default_value_t = defaults().job_share.percent(),
          value_parser = clap::value_parser!(u8).range(0..=i64::from(MAX_JOB_SHARE)))]
    job_share: u8,
    /// Run jobs' executor threads in SCHED_IDLE: every other thread of the machine takes their
    /// core at once, a call's on its way through the gateway too, so a short call beside a job
    /// keeps its latency. On a core another process keeps busy a job then gets next to
    /// nothing, and its partitions move to other nodes once it ran the tasks it had declared
    /// (tens of seconds): turn it off on machines mote shares. Off, a job's threads compete
    /// with the node's on the kernel's terms, which a --job-share above 0 needs [default: on,
    /// off with a --job-share above 0].
    #[arg(long, env = "MOTE_JOB_IDLE", value_enum)]
    job_idle: Option<Switch>,
    /// Confine every thread that runs guest code (readers, executors, microtask and job threads)
    /// with a seccomp allow-list (Linux): code running there cannot open files, create or
    /// connect sockets, execute, or start threads or processes.
    #[arg(long, value_enum, default_value_t = Switch::from(defaults().seccomp))]
    seccomp: Switch,
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
    #[arg(long, default_value_t = defaults().lease_ttl.as_secs())]
    lease_ttl_s: u64,
    /// Home nodes per function: calls run on them while they have free cores, so that their
    /// code stays resident (1 to 8).
    #[arg(long, default_value_t = defaults().homes)]
    homes: usize,
    /// Microseconds between a node's looks for waiting calls to take: while it has a core
    /// free and no call waiting, it asks the peer where calls wait longest for some that have
    /// not started (late correction, docs/cluster.md); 0 never asks.
    #[arg(long, default_value_t = defaults().pull_every.map_or(0, |d| d.as_micros() as u64))]
    pull_every_us: u64,
    /// On SIGTERM, the most seconds to wait for open calls to finish after this node left
    /// the routing table; then it exits anyway.
    #[arg(long, default_value_t = PlatformConfig::DEFAULT_STOP_TIMEOUT.as_secs())]
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
        default_value_t = OutboundCeiling::default(),
        env = "MOTE_OUTBOUND_CEILING",
        value_name = "LIST"
    )]
    outbound_ceiling: OutboundCeiling,
    /// Failed authentications allowed per client (an IPv4 address, an IPv6 /64) and minute; past
    /// that every request it makes with or for credentials gets 429 until the minute ends, good
    /// credentials included (0: no limit).
    #[arg(long, default_value_t = AccessConfig::DEFAULT_AUTH_FAILURES_PER_MINUTE)]
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

/// `--preempt`, `--microtasks`, `--seccomp` and `--job-idle`: on or off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Switch {
    On,
    Off,
}

impl From<bool> for Switch {
    fn from(on: bool) -> Self {
        match on {
            true => Self::On,
            false => Self::Off,
        }
    }
}

impl Switch {
    fn on(self) -> bool {
        self == Self::On
    }
}

/// The platform's defaults, which the flags' defaults are.
fn defaults() -> PlatformConfig {
    PlatformConfig::default()
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
    let config = config(args, s3_secret_key)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("mote-io")
        .build()?;
    runtime.block_on(serve(config))
}

/// The platform the flags describe.
fn config(args: UpArgs, s3_secret_key: Option<String>) -> anyhow::Result<PlatformConfig> {
    let objects = match args.s3_endpoint {
        Some(url) => ObjectsChoice::S3 {
            endpoint: S3Endpoint {
                url,
                region: args.s3_region,
                access_key: args
                    .s3_access_key
                    .context("--s3-endpoint needs an access key: set MOTE_S3_ACCESS_KEY")?,
                secret_key: s3_secret_key.context(
                    "--s3-endpoint needs a secret key: set MOTE_S3_SECRET_KEY or give --s3-secret-key-file FILE",
                )?,
            },
            modules_bucket: args.modules_bucket,
        },
        None => ObjectsChoice::Directory(args.objects_dir),
    };
    let store = match (args.store.is_empty(), args.store_peer_listen) {
        (true, peer_listen) => StoreChoice::Embedded {
            listen: args.store_listen,
            peer_listen,
            peers: args.store_peers,
        },
        (false, None) => StoreChoice::Remote(args.store),
        (false, Some(_)) => anyhow::bail!(
            "--store-peer-listen is for the store this node embeds; with --store the node uses another"
        ),
    };
    Ok(PlatformConfig {
        listen: args.listen,
        ui: args.ui_listen.unwrap_or_default(),
        advertise: args.advertise,
        data: args.data,
        node_name: args.node,
        store,
        cores: args.cores,
        policy: args.policy,
        fc_window: Duration::from_secs(args.fc_window_s),
        baseline_cap: args.baseline_cap,
        preempt: args.preempt.on().then_some(PreemptConfig {
            quantum: Duration::from_micros(args.quantum_us),
            max_suspended: args.max_suspended,
            ..PreemptConfig::default()
        }),
        seccomp: args.seccomp.on(),
        inline: args.inline.on(),
        job_share: JobShare::new(args.job_share)?,
        job_idle: args.job_idle.map_or(args.job_share == 0, Switch::on),
        max_queue: args.max_queue,
        quarantine_after: args.quarantine_after,
        resident_mb: args.resident_mb,
        function_log_bytes: args.function_log_kb.saturating_mul(1 << 10),
        microtasks: match args.microtasks {
            Switch::On => MicrotaskMode::On(args.core_split),
            Switch::Off => MicrotaskMode::Off,
        },
        max_microtask_calls: args.max_microtask_calls,
        outbound_ceiling: args.outbound_ceiling,
        objects,
        gateway: GatewayConfig {
            max_body_bytes: args.max_body_mb << 20,
            max_module_bytes: args.max_module_mb << 20,
            listen: ListenLimits {
                max_connections: args.max_connections,
                max_handshakes: args.max_tls_handshakes,
                ..ListenLimits::default()
            },
        },
        security: args.security.config(),
        access: AccessConfig {
            require_tokens: args.require_tokens,
            insecure: args.insecure,
            auth_failures_per_minute: args.auth_failures_per_minute,
            allow_host: args.allow_host,
        },
        lease_ttl: Duration::from_secs(args.lease_ttl_s),
        homes: args.homes,
        pull_every: (args.pull_every_us > 0).then(|| Duration::from_micros(args.pull_every_us)),
        stop_timeout: Duration::from_secs(args.stop_timeout_s),
        examples: args.examples,
    })
}

async fn serve(config: PlatformConfig) -> anyhow::Result<()> {
    let mut platform = Platform::start(config).await?;
    print_started(platform.serving());
    platform.serve_until(shutdown_signal()).await?;
    platform.drain().await?;
    platform.stop().await?;
    Ok(())
}

/// What the operator reads once the platform is up; the e2e tests and the dashboard's test read
/// the `mote is up on` and `dashboard on` lines, and first_use the `try:` one.
fn print_started(s: &Serving) {
    for notice in &s.notices {
        println!("{notice}");
    }
    let (scheme, addr) = (s.scheme, s.api);
    let preemption = match s.preemption {
        Some(p) => format!(
            "preemption on (quantum {} µs, at most {} suspended)",
            p.quantum.as_micros(),
            p.max_suspended
        ),
        None => "preemption off".to_owned(),
    };
    println!(
        "mote is up on {scheme}://{addr} with {} executor cores, policy {}, {preemption}, \
         microtasks {}; data in {}, function records in the etcd-API store at {}, objects in {}",
        s.cores,
        s.policy,
        s.microtasks.as_str(),
        s.data.display(),
        s.store.join(","),
        s.objects
    );
    if let Some(ui) = s.dashboard {
        println!("dashboard on {scheme}://{ui}/ui");
    }
    if s.examples {
        let mut curl = match &s.tls_cert {
            Some(cert) => format!("curl --cacert {}", cert.display()),
            None => "curl".to_owned(),
        };
        if s.tokens_required {
            curl = format!(
                "{curl} -H \"authorization: Bearer $(cat {})\"",
                s.data.join(ADMIN_TOKEN_FILE).display()
            );
        }
        let at = dialled_here(addr);
        println!("try:  {curl} -X POST --data-binary 'mote' {scheme}://{at}/v1/invoke/hello");
        println!(
            "      {curl} {scheme}://{at}/hello-http/echo?q=1 -d 'a wasi:http component'   ({} on {EXAMPLE_ROUTE})",
            mote_guests::HTTP_HELLO.name
        );
    }
    println!(
        "node `{}` is in its cluster at {} (see GET /v1/cluster or `mote nodes`)",
        s.node_name, s.advertised
    );
}

/// `--examples`' help, naming what it deploys.
fn examples_help() -> String {
    let (functions, jobs, component) = mote_platform::examples::names();
    format!(
        "Deploy the example functions at start-up: {} (functions), {} (jobs) and {component} (a \
         wasi:http component on {EXAMPLE_ROUTE})",
        functions.join(", "),
        jobs.join(", "),
    )
}
