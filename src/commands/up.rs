//! `mote up`: the whole platform in one process.

use super::platform::{
    State, StateSource, available_cores, baseline_cap, shutdown_signal, start_node,
};
use anyhow::Context;
use bytes::Bytes;
use clap::Args;
use mote_gateway::GatewayConfig;
use mote_node::{ExecutorsConfig, NodeConfig};
use mote_types::{FunctionName, Limits};
use std::net::SocketAddr;
use std::path::PathBuf;

/// Options of `mote up`.
#[derive(Args)]
pub struct UpArgs {
    /// Address the HTTP API listens on.
    #[arg(long, default_value = "127.0.0.1:8080", env = "MOTE_LISTEN")]
    listen: SocketAddr,
    /// Directory for the platform's state: the embedded store's data (function records),
    /// modules, compiled artefacts.
    #[arg(long, default_value = "mote.data", env = "MOTE_DATA")]
    data: PathBuf,
    /// Keep function records in this etcd-API store (a mote store cluster or a real etcd),
    /// as comma-separated URLs, instead of the store embedded in this process.
    #[arg(long, value_delimiter = ',', env = "MOTE_STORE")]
    store: Vec<String>,
    /// Address the embedded store serves the etcd v3 API on, for etcdctl and other clients
    /// (unused with --store).
    #[arg(long, default_value = "127.0.0.1:2379")]
    store_listen: SocketAddr,
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
    /// Deploy the example functions (hello, echo, wc) at start-up.
    #[arg(long)]
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
    /// Confine executor threads with a seccomp allow-list (Linux): code running there cannot
    /// open files, sockets or processes.
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    seccomp: String,
    /// Log filter (tracing's EnvFilter syntax), e.g. `info` or `mote=debug`.
    #[arg(long, default_value = "info", env = "MOTE_LOG")]
    log: String,
}

/// Runs the platform until Ctrl-C or SIGTERM.
pub fn run(args: UpArgs) -> anyhow::Result<()> {
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
    runtime.block_on(serve(args, cores))
}

async fn serve(args: UpArgs, cores: usize) -> anyhow::Result<()> {
    let executors = ExecutorsConfig {
        policy: args.policy,
        fc_window: std::time::Duration::from_secs(args.fc_window_s.max(1)),
        baseline_cap: args.baseline_cap.unwrap_or_else(|| baseline_cap(cores)),
        max_queue: args.max_queue,
        quarantine_after: args.quarantine_after,
        seccomp: args.seccomp == "on",
        ..ExecutorsConfig::new(cores)
    };
    let policy = executors.policy;
    let config = NodeConfig {
        executors,
        resident_mb: args.resident_mb,
    };
    let source = if args.store.is_empty() {
        StateSource::Embedded(args.store_listen)
    } else {
        StateSource::Remote(args.store.clone())
    };
    let state = State::open(&args.data, source).await?;
    let node = start_node(&args.data, state.store.clone(), config).await?;
    if args.examples {
        for example in mote_guests::ALL {
            let name = FunctionName::new(example.name)?;
            node.deploy(name, Bytes::from_static(example.wasm), Limits::default())
                .await
                .with_context(|| format!("deploying the example `{}`", example.name))?;
        }
    }
    let listener = tokio::net::TcpListener::bind(args.listen)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {} (choose another with --listen)",
                args.listen
            )
        })?;
    let addr = listener.local_addr()?;
    let functions = node.list();
    tracing::info!(
        %addr,
        cores,
        %policy,
        data = %args.data.display(),
        store = %state.endpoints.join(","),
        functions = functions.len(),
        "mote is up"
    );
    let store = state.endpoints.join(",");
    println!(
        "mote is up on http://{addr} with {cores} executor cores, policy {policy}; data in {}, \
         function records in the etcd-API store at {store}",
        args.data.display()
    );
    if args.examples {
        println!("try:  curl -X POST --data-binary 'mote' http://{addr}/v1/invoke/hello");
    }
    let config = GatewayConfig {
        max_body_bytes: args.max_body_mb << 20,
        max_module_bytes: args.max_module_mb << 20,
    };
    mote_gateway::serve(listener, node, config, shutdown_signal()).await?;
    state.close().await?;
    tracing::info!("mote stopped");
    Ok(())
}
