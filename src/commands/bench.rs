//! `mote bench`: the benchmarks of docs/benchmarks.md. Each subcommand turns its arguments into
//! its benchmark's configuration, runs it and prints its report; those that write files write
//! them where `--out` says, or to a fresh directory under the system's temp dir, never into the
//! repository (`output`). `cluster` has a file of its own.

mod cluster;
mod output;

use super::secrets::S3_SECRET_KEY;
use anyhow::Context;
use clap::{Args, Subcommand};
use cluster::ClusterArgs;
use mote_bench::burst::{self, BurstOptions, PaperLoad};
use mote_bench::call_path::{self, CallPathConfig, CallPathReport};
use mote_bench::http::{self, HttpBenchConfig, Pinning};
use mote_bench::jobs::{self, JobsBenchConfig};
use mote_bench::micro::{self, MicroConfig, MicroReport};
use mote_bench::sort::{self, ObjectServer, SortOptions};
use mote_bench::store::{self, StoreBenchConfig};
use mote_node::PreemptConfig;
use mote_objects::S3Endpoint;
use mote_platform::machine::{available_cores, baseline_cap};
use mote_sched::Policy;
use output::{Results, clear_progress, command_line, print_report, progress};
use std::path::PathBuf;
use std::time::Duration;

/// Which benchmark to run.
#[derive(Subcommand)]
pub enum BenchCommand {
    /// Latency and throughput of one call in process: dispatch, queue, executor, fresh
    /// instance, call, reply; side by side with the runtime alone.
    Call(CallArgs),
    /// The call-scheduling paper's burst experiment: the function suite under an open-loop
    /// burst, per policy; writes calls (CSV), summaries (JSON), Table III and ratio tables, and
    /// box plots. See docs/benchmarks/scheduling.md.
    Burst(BurstArgs),
    /// The microsecond path (docs/benchmarks/microseconds.md): warm and cold starts, throughput
    /// per core, budget kills and the cost of preemption, beside a process-isolation baseline.
    Micro(MicroArgs),
    /// mote store against etcd 3.6.8 under etcd's `benchmark` tool (docs/benchmarks/store.md):
    /// put and serializable range on 1, 3 and 5 nodes of each, side by side; writes a table,
    /// the floors, every run (report.md, results.json) and a figure (figure2.png).
    Store(StoreArgs),
    /// The microtask paper's sort (docs/benchmarks/microtasks.md): gensort records sorted in
    /// two stages of fanned-out calls against an S3 server, task-based and microtask-based
    /// side by side; writes every run (runs.json), a report with the floors (report.md) and
    /// ECDF plots of makespan, two sub-stages and the sort's per-call durations.
    Sort(SortArgs),
    /// What forwarding costs: calls sent to a node that forwards them to the node that runs
    /// them, against calls sent straight there, side by side (a store and two nodes on
    /// loopback). See docs/benchmarks/cluster.md.
    Cluster(ClusterArgs),
    /// Canary jobs (docs/benchmarks/jobs.md): the paper's Figure 4 (what scheduling a task costs
    /// on one core) and Figure 8 (LR against partitions per core), two workers against one, and
    /// the task rate and LR iteration beside Ray, Dask and Spark; real `mote up` processes on
    /// loopback. Writes results.json, report.md, figure4.png and figure8.png.
    Jobs(JobsArgs),
    /// The same wasi:http component (`http-hello`) under `mote up` and under `wasmtime serve`
    /// 48.0.8 (scripts/wasmtime-cli installs it), real processes on loopback driven by one
    /// keep-alive load generator at several concurrencies: requests/s and p50/p99 side by side,
    /// the ratios and the floor (docs/benchmarks/http.md). Writes results.json and
    /// report.md.
    Http(HttpArgs),
    /// A call that turns long where it was read, on `mote up --cores 1`: `hello`'s response
    /// times beside it, with `--preempt on` and, as the baseline, `off`, side by side in each
    /// round (docs/benchmarks/http.md). Writes results.json and report.md.
    Preempt(PreemptArgs),
    /// The process baseline's worker: answers requests on stdin (used by `bench micro`).
    #[command(hide = true)]
    ProcessWorker {
        /// Answer one request, then exit.
        #[arg(long)]
        once: bool,
    },
}

/// Options of `mote bench micro`.
#[derive(Args)]
pub struct MicroArgs {
    /// A short run that exercises every part, for the test command; its figures are not the
    /// benchmark's.
    #[arg(long)]
    smoke: bool,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Whether the Fair-Choice node preempts, as `mote up` does by default.
    #[arg(long, default_value = "on", value_parser = ["on", "off"])]
    preempt: String,
}

/// Options of `mote bench sort`.
#[derive(Args)]
pub struct SortArgs {
    /// Data to sort, in GB (10^9 bytes) of 100-byte records.
    #[arg(long, default_value_t = 1.0)]
    size: f64,
    /// Input parts: stage 1's calls.
    #[arg(long, default_value_t = 16)]
    parts: usize,
    /// Categories: stage 2's calls.
    #[arg(long, default_value_t = 16)]
    categories: usize,
    /// Scheduling to run, `on` (microtask-based) or `off` (task-based); repeat for both
    /// [default: both, alternating].
    #[arg(long, value_parser = ["on", "off"])]
    microtasks: Vec<String>,
    /// The core split under microtasks: `dynamic`, or four core counts (see `mote up`).
    #[arg(long, default_value = "dynamic")]
    core_split: mote_sched::SplitMode,
    /// Repetitions of each mode.
    #[arg(long, default_value_t = 5)]
    reps: usize,
    /// Executor cores [default: all].
    #[arg(long)]
    cores: Option<usize>,
    /// The S3 server (scripts/remote-store starts one behind an emulated link); its bucket
    /// must exist. Without it, an s3s-fs on loopback is started (see --s3s-fs).
    #[arg(long, env = "MOTE_S3_ENDPOINT")]
    s3_endpoint: Option<String>,
    /// The S3 access key id.
    #[arg(
        long,
        env = "MOTE_S3_ACCESS_KEY",
        default_value = "mote",
        hide_env_values = true
    )]
    s3_access_key: String,
    /// A file holding the S3 secret access key, which MOTE_S3_SECRET_KEY may hold instead
    /// [default: mote-secret, scripts/remote-store's].
    #[arg(long, value_name = "FILE")]
    s3_secret_key_file: Option<PathBuf>,
    /// Refused, with what to use instead: every user of the machine reads a command line.
    #[arg(long = "s3-secret-key", value_name = "KEY", hide = true)]
    s3_secret_key_in_argv: Option<String>,
    /// The s3s-fs binary to start when there is no --s3-endpoint.
    #[arg(
        long,
        env = "MOTE_S3S_FS",
        default_value = "target/s3s-fs-0.14.1/bin/s3s-fs"
    )]
    s3s_fs: PathBuf,
    /// The bucket.
    #[arg(long, default_value = "sort")]
    bucket: String,
    /// Memory limit of each call, MiB.
    #[arg(long, default_value_t = 1024)]
    memory_mb: u32,
    /// Directory for the results [default: a new directory under the system's temp dir,
    /// printed at the end; with --smoke, one removed at exit].
    #[arg(long)]
    out: Option<PathBuf>,
    /// A short run of every part (2 MB, 4 parts and categories, one repetition of each mode)
    /// for the test command; its figures are not the benchmark's.
    #[arg(long)]
    smoke: bool,
}

/// Options of `mote bench jobs`.
#[derive(Args)]
pub struct JobsArgs {
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    json: bool,
    /// Skip Ray, Dask and Spark (scripts/bench-jobs-peers installs them and runs for minutes).
    #[arg(long)]
    no_peers: bool,
    /// A short run of every part (small sizes, one repetition); its figures are not the
    /// benchmark's. Its files are removed at exit unless --out is given.
    #[arg(long)]
    smoke: bool,
    /// LR training points (20 features each) [default: 400000; 20000 with --smoke].
    #[arg(long)]
    points: Option<u64>,
    /// Repetitions of each measurement, whose median is reported [default: 3; 1 with --smoke].
    #[arg(long)]
    reps: Option<usize>,
    /// Slow and lost workers instead: LR iteration times with one worker's core loaded
    /// half-way (rebalancing on and off), the time from killing a worker to the job running
    /// again, and what a snapshot costs per GB (recovery.json, recovery.md, slowdown.png).
    #[arg(long)]
    recovery: bool,
    /// Calls beside a job instead: `hello`'s latency alone and while `lr` runs on the same
    /// 2-core node, and lr's iteration rate alone and beside the calls (sharing.json).
    #[arg(long, conflicts_with = "recovery")]
    sharing: bool,
    /// With --sharing: another `mote` binary measured in the same rounds, alternated, as the
    /// baseline.
    #[arg(long, value_name = "MOTE", requires = "sharing")]
    against: Option<PathBuf>,
    /// Word count instead: Zipf-distributed text counted by `wordcount` (the SDK's typed
    /// operators) and `wordcount-shuffle` (by hand) alternated on one node of every core, and by
    /// Ray, Dask and Spark, every result checked against the bench's own count
    /// (wordcount.json, wordcount.md).
    #[arg(long, conflicts_with_all = ["recovery", "sharing"])]
    wordcount: bool,
    /// With --wordcount: MiB of text [default: 256; 8 with --smoke].
    #[arg(long, value_name = "MIB", requires = "wordcount")]
    wordcount_mib: Option<u64>,
    /// With --wordcount: the job measured against wordcount-shuffle [default: wordcount]; any
    /// job the node deploys with wordcount's arguments and output, such as wordcount-shuffle
    /// itself to see the measurement's noise.
    #[arg(long, value_name = "JOB", requires = "wordcount")]
    wordcount_job: Option<String>,
    /// Directory for the results [default: a new directory under the system's temp dir,
    /// printed at the end; with --smoke, one removed at exit].
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Options of `mote bench http`.
#[derive(Args)]
pub struct HttpArgs {
    /// The `wasmtime` binary (48.0.8) whose `wasmtime serve` is the baseline
    /// (scripts/wasmtime-cli prints its directory). Without it, mote alone is measured.
    #[arg(long, conflicts_with = "smoke")]
    wasmtime: Option<PathBuf>,
    /// wasmtime serve's `-O` options (`wasmtime serve -O help` lists them); by default the
    /// pooling allocator with mote's memory reset.
    #[arg(long, default_value_t = http::wasmtime_optimize(), requires = "wasmtime")]
    wasmtime_optimize: String,
    /// The `mote` binary that serves [default: this one], to measure another build with the
    /// same harness (say, the one before a change).
    #[arg(long)]
    mote: Option<PathBuf>,
    /// Connections, comma-separated: one point per value and system [default: 1,8,32,64; 1,8
    /// with --smoke].
    #[arg(long)]
    concurrency: Option<String>,
    /// The measured window of each point, seconds [default: 5; 1 with --smoke].
    #[arg(long)]
    seconds: Option<f64>,
    /// Warm-up before each window, seconds [default: 1; 0.25 with --smoke].
    #[arg(long)]
    warmup: Option<f64>,
    /// Rounds of every point, whose median is reported [default: 5; 1 with --smoke].
    #[arg(long)]
    rounds: Option<usize>,
    /// Run the load generator on CPU 0 and each server on CPU 1 (CPU affinity), instead of all of
    /// them sharing every core.
    #[arg(long)]
    pin: bool,
    /// mote alone, 1 s per point at 1 and 8 connections, for the test command; fails if any
    /// request failed. Its figures are not the benchmark's. Its files are removed at exit
    /// unless --out is given.
    #[arg(long)]
    smoke: bool,
    /// Print one JSON object instead of the tables.
    #[arg(long)]
    json: bool,
    /// Directory for the results [default: a new directory under the system's temp dir,
    /// printed at the end; with --smoke, one removed at exit].
    #[arg(long)]
    out: Option<PathBuf>,
}

/// Options of `mote bench store`.
#[derive(Args)]
pub struct StoreArgs {
    /// A short run of every part (1 and 3 nodes, 1,000 requests, one run) for the test command;
    /// its figures are not the benchmark's. Its files are removed at exit unless --out is given.
    #[arg(long)]
    smoke: bool,
    /// Directory with etcd 3.6.8's `etcd`, `etcdctl` and `benchmark` (scripts/etcd-tools
    /// installs them) [default: ${ETCD_TOOLS_DIR:-target/etcd-v3.6.8}/bin].
    #[arg(long)]
    etcd_tools: Option<PathBuf>,
    /// The mote binary whose `mote store` is measured [default: this one].
    #[arg(long)]
    mote: Option<PathBuf>,
    /// Directory for the results [default: a new directory under the system's temp dir,
    /// printed at the end; with --smoke, one removed at exit].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Repetitions of the whole sequence (each size: etcd and mote back to back, the order
    /// alternating) [default: 3; 1 with --smoke].
    #[arg(long)]
    runs: Option<usize>,
    /// Requests per `benchmark` run, put and range alike [default: 50000; 1000 with --smoke].
    #[arg(long)]
    total: Option<u64>,
    /// Cluster sizes, comma-separated [default: 1,3,5; 1,3 with --smoke].
    #[arg(long, value_delimiter = ',')]
    sizes: Vec<usize>,
    /// gRPC connections of the benchmark client.
    #[arg(long, default_value_t = 100)]
    conns: u32,
    /// Concurrent clients of the benchmark client.
    #[arg(long, default_value_t = 100)]
    clients: u32,
    /// Value size of the puts (and of the value the range reads), bytes.
    #[arg(long, default_value_t = 256)]
    val_size: u32,
    /// Distinct keys the puts cycle through; 1 (the tool's default, as in the command)
    /// has every put overwrite the same key.
    #[arg(long, default_value_t = 1)]
    key_space_size: u64,
    /// Where the clusters' temporary data directories go [default: the system's temp dir].
    #[arg(long)]
    work_dir: Option<PathBuf>,
}

/// Options of `mote bench burst`.
#[derive(Args)]
pub struct BurstArgs {
    /// Policy to run; repeat for several [default: all, with --all].
    #[arg(long)]
    policy: Vec<Policy>,
    /// Every policy over intensities 30, 40, 60, 90 and 120 (unless --intensity is given).
    #[arg(long)]
    all: bool,
    /// Run the ranking policies (sept, eect, rect, fc) preemptive (`on`), to their end as the
    /// paper does (`off`), or both side by side; fifo and baseline never preempt.
    #[arg(long, default_value = "off")]
    preempt: burst::Preempt,
    /// The quantum under preemption, in microseconds.
    #[arg(long, default_value_t = PreemptConfig::default().quantum.as_micros() as u64)]
    quantum_us: u64,
    /// The aging factor under preemption: how many times its expected remaining time a call
    /// may wait before later calls can no longer overtake it.
    #[arg(long, default_value_t = PreemptConfig::default().aging)]
    aging: u64,
    /// Executor cores [default: all].
    #[arg(long)]
    cores: Option<usize>,
    /// The paper's intensity: each function gets cores * intensity / 10 calls per 60 s; repeat
    /// for several.
    #[arg(long)]
    intensity: Vec<u32>,
    /// Which load an intensity stands for: `nominal`, what the paper's intensities were meant to
    /// give, or `measured`, the 4.36 times heavier load its FIFO results show its nodes ran at.
    #[arg(long, default_value = "nominal")]
    load: PaperLoad,
    /// Burst window in seconds (the call count scales with it, so the load stays the same).
    #[arg(long, default_value_t = 60.0)]
    window: f64,
    /// Seed of the call sequence; repeat for several (the same for every policy).
    #[arg(long)]
    seed: Vec<u64>,
    /// Directory for the results [default: a new directory under the system's temp dir,
    /// printed at the end].
    #[arg(long)]
    out: Option<PathBuf>,
    /// Calls per function when measuring idle response times.
    #[arg(long, default_value_t = 3)]
    idle_calls: usize,
    /// Fair-Choice's window T in seconds.
    #[arg(long, default_value_t = 60)]
    fc_window_s: u64,
    /// Run only these suite functions (repeat) [default: the whole suite].
    #[arg(long)]
    function: Vec<String>,
    /// The fairness experiment (paper VII-D): one rare long function among frequent short ones,
    /// under SEPT and FC unless --policy says otherwise.
    #[arg(long)]
    fairness: bool,
}

/// Options of `mote bench call`.
#[derive(Args)]
pub struct CallArgs {
    /// Calls per measured run.
    #[arg(long, default_value_t = 100_000)]
    calls: u64,
    /// Executor cores in the latency runs; the caller needs a core of its own.
    #[arg(long, default_value_t = 1)]
    latency_cores: usize,
    /// Executor cores in the throughput run [default: all].
    #[arg(long)]
    cores: Option<usize>,
    /// Concurrent callers in the throughput run [default: 4 per core].
    #[arg(long)]
    concurrency: Option<usize>,
    /// Request body size in bytes.
    #[arg(long, default_value_t = 64)]
    body_bytes: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
}

/// Runs a benchmark and prints its report.
pub fn run(cmd: BenchCommand) -> anyhow::Result<()> {
    let result = run_bench(cmd);
    clear_progress();
    result
}

fn run_bench(cmd: BenchCommand) -> anyhow::Result<()> {
    match cmd {
        BenchCommand::Call(args) => run_call(args),
        BenchCommand::Burst(args) => run_burst(args),
        BenchCommand::Micro(args) => run_micro(args),
        BenchCommand::Store(args) => run_store(args),
        BenchCommand::Sort(args) => run_sort(args),
        BenchCommand::Cluster(args) => cluster::run(args),
        BenchCommand::Jobs(args) => run_jobs(args),
        BenchCommand::Http(args) => run_http(args),
        BenchCommand::Preempt(args) => run_preempt(args),
        BenchCommand::ProcessWorker { once } => Ok(micro::process_worker(once)?),
    }
}

fn run_jobs(args: JobsArgs) -> anyhow::Result<()> {
    let mote = std::env::current_exe().context("finding the mote binary")?;
    if args.recovery {
        let mut config = match args.smoke {
            true => jobs::recovery::RecoveryConfig::smoke(mote, command_line()),
            false => jobs::recovery::RecoveryConfig::full(mote, command_line()),
        };
        config.reps = args.reps.unwrap_or(config.reps).max(1);
        let out = Results::create(args.out, args.smoke, "jobs-recovery")?;
        let report = jobs::recovery::run(&config, out.path(), &mut progress)?;
        return print_report(&report, args.json, |r| r.table());
    }
    if args.sharing {
        let mut builds = vec![("this".to_owned(), mote)];
        builds.extend(args.against.map(|other| ("against".to_owned(), other)));
        let config = jobs::sharing::SharingConfig {
            builds,
            rate: 500,
            window: match args.smoke {
                true => Duration::from_secs(1),
                false => Duration::from_secs(8),
            },
            points: args.points.unwrap_or(200_000),
            rounds: args.reps.unwrap_or(if args.smoke { 1 } else { 3 }).max(1),
            command: command_line(),
        };
        let out = Results::create(args.out, args.smoke, "jobs-sharing")?;
        let report = jobs::sharing::run(&config, out.path(), &mut progress)?;
        std::fs::write(
            out.path().join("sharing.json"),
            serde_json::to_vec_pretty(&report)?,
        )?;
        return print_report(&report, args.json, |r| r.table());
    }
    let peers = match args.no_peers {
        true => None,
        false => Some(jobs::find_peers_script()?),
    };
    if args.wordcount {
        let mib = args
            .wordcount_mib
            .unwrap_or(if args.smoke { 8 } else { 256 });
        let config = jobs::wordcount::WordcountConfig {
            mote,
            peers,
            bytes: mib.max(1) << 20,
            reps: args.reps.unwrap_or(if args.smoke { 1 } else { 3 }).max(1),
            job: args.wordcount_job.unwrap_or_else(|| "wordcount".to_owned()),
            smoke: args.smoke,
            command: command_line(),
        };
        let out = Results::create(args.out, args.smoke, "jobs-wordcount")?;
        let report = jobs::wordcount::run(&config, out.path(), &mut progress)?;
        return print_report(&report, args.json, |r| r.table());
    }
    let mut config = match args.smoke {
        true => JobsBenchConfig::smoke(mote, peers, command_line()),
        false => JobsBenchConfig::full(mote, peers, command_line()),
    };
    config.points = args.points.unwrap_or(config.points).max(1);
    config.reps = args.reps.unwrap_or(config.reps).max(1);
    let out = Results::create(args.out, args.smoke, "jobs")?;
    let report = jobs::run(&config, out.path(), &mut progress)?;
    print_report(&report, args.json, |r| r.table())
}

fn run_http(args: HttpArgs) -> anyhow::Result<()> {
    let mote = match args.mote {
        Some(mote) => mote,
        None => std::env::current_exe().context("finding the mote binary")?,
    };
    let mut config = match args.smoke {
        true => HttpBenchConfig::smoke(mote, command_line()),
        false => HttpBenchConfig::full(mote, args.wasmtime, command_line()),
    };
    if let Some(list) = &args.concurrency {
        config.concurrencies = http::parse_concurrencies(list).context("--concurrency")?;
    }
    let seconds = |s: f64, what: &str| {
        Duration::try_from_secs_f64(s).with_context(|| format!("{what} {s}: not a duration"))
    };
    if let Some(s) = args.seconds {
        config.duration = seconds(s, "--seconds")?.max(Duration::from_millis(100));
    }
    if let Some(s) = args.warmup {
        config.warmup = seconds(s, "--warmup")?;
    }
    config.rounds = args.rounds.unwrap_or(config.rounds).max(1);
    config.pin = args.pin.then_some(Pinning::SPLIT);
    config.wasmtime_optimize = args.wasmtime_optimize;
    let out = Results::create(args.out, args.smoke, "http")?;
    let report = http::run(&config, out.path(), &mut progress)?;
    print_report(&report, args.json, |r| r.table())?;
    Ok(report.check()?)
}

/// Options of `mote bench preempt`.
#[derive(Args)]
pub struct PreemptArgs {
    /// The `mote` binary that serves [default: this one].
    #[arg(long)]
    mote: Option<PathBuf>,
    /// Calls of `hello` beside each long call.
    #[arg(long, default_value_t = 50)]
    calls: usize,
    /// Rounds, each measuring both settings.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Print one JSON object instead of the table.
    #[arg(long)]
    json: bool,
    /// Directory for the results [default: a new directory under the system's temp dir].
    #[arg(long)]
    out: Option<PathBuf>,
}

fn run_preempt(args: PreemptArgs) -> anyhow::Result<()> {
    let mote = match args.mote {
        Some(mote) => mote,
        None => std::env::current_exe().context("finding the mote binary")?,
    };
    let config = mote_bench::preempt::PreemptBenchConfig {
        mote,
        calls: args.calls.max(1),
        rounds: args.rounds.max(1),
        budget: Duration::from_secs(4),
        command: command_line(),
    };
    let out = Results::create(args.out, false, "preempt")?;
    let report = mote_bench::preempt::run(&config, out.path())?;
    print_report(&report, args.json, |r| r.table())
}

fn run_call(args: CallArgs) -> anyhow::Result<()> {
    let config = CallPathConfig::new(
        args.calls,
        args.latency_cores,
        args.cores.unwrap_or_else(available_cores),
        args.concurrency,
        args.body_bytes,
    );
    let report = call_path::run(&config)?;
    print_report(&report, args.json, CallPathReport::table)
}

fn run_micro(args: MicroArgs) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("finding the mote binary")?;
    let worker = vec![
        exe.to_string_lossy().into_owned(),
        "bench".into(),
        "process-worker".into(),
    ];
    let mut config = match args.smoke {
        true => MicroConfig::smoke(worker),
        false => MicroConfig::full(worker),
    };
    config.preempt = args.preempt == "on";
    let report = micro::run(&config)?;
    print_report(&report, args.json, MicroReport::table)
}

fn run_burst(args: BurstArgs) -> anyhow::Result<()> {
    let cores = args.cores.unwrap_or_else(available_cores);
    let options = BurstOptions {
        policies: args.policy,
        all: args.all,
        preempt: args.preempt,
        quantum: Duration::from_micros(args.quantum_us),
        aging: args.aging,
        cores,
        baseline_cap: baseline_cap(cores),
        intensities: args.intensity,
        load: args.load,
        window_s: args.window,
        seeds: args.seed,
        idle_calls: args.idle_calls,
        fc_window_s: args.fc_window_s,
        functions: args.function,
        fairness: args.fairness,
    };
    let out = Results::create(args.out, false, "burst")?;
    let report = burst::run(&options, out.path(), progress)?;
    println!("{report}");
    Ok(())
}

/// The secret key `scripts/remote-store` gives its S3 server unless told another.
const REMOTE_STORE_SECRET_KEY: &str = "mote-secret";

fn run_sort(args: SortArgs) -> anyhow::Result<()> {
    let secret_key = S3_SECRET_KEY
        .read(
            args.s3_secret_key_file.as_deref(),
            args.s3_secret_key_in_argv.as_deref(),
        )?
        .unwrap_or_else(|| REMOTE_STORE_SECRET_KEY.to_owned());
    let objects = match args.s3_endpoint {
        Some(url) => ObjectServer::Remote(S3Endpoint {
            url,
            region: "us-east-1".into(),
            access_key: args.s3_access_key,
            secret_key,
        }),
        None => ObjectServer::LocalS3(args.s3s_fs),
    };
    let options = SortOptions {
        size_gb: args.size,
        parts: args.parts,
        categories: args.categories,
        reps: args.reps,
        modes: sort::modes(&args.microtasks, args.core_split),
        cores: args.cores.unwrap_or_else(available_cores),
        objects,
        bucket: args.bucket,
        memory_mb: args.memory_mb,
        smoke: args.smoke,
    };
    let out = Results::create(args.out, args.smoke, "sort")?;
    let outcome = sort::run(&options, out.path(), &command_line(), progress)?;
    print!("{}", outcome.report);
    Ok(outcome.check()?)
}

fn run_store(args: StoreArgs) -> anyhow::Result<()> {
    let mote = match args.mote {
        Some(path) => path,
        None => std::env::current_exe().context("finding the mote binary")?,
    };
    let etcd_tools = args
        .etcd_tools
        .unwrap_or_else(StoreBenchConfig::default_etcd_tools);
    let mut config = match args.smoke {
        true => StoreBenchConfig::smoke(mote, etcd_tools),
        false => StoreBenchConfig::full(mote, etcd_tools),
    };
    config.runs = args.runs.unwrap_or(config.runs);
    config.total = args.total.unwrap_or(config.total);
    if !args.sizes.is_empty() {
        config.sizes = args.sizes;
    }
    config.conns = args.conns;
    config.clients = args.clients;
    config.val_size = args.val_size;
    config.key_space_size = args.key_space_size.max(1);
    if let Some(dir) = args.work_dir {
        config.work_dir = dir;
    }
    let out = Results::create(args.out, args.smoke, "store")?;
    let outcome = store::run(&config, out.path(), command_line(), progress)?;
    println!("{}", outcome.report);
    Ok(outcome.check()?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::{CommandFactory, Parser};

    #[derive(Parser)]
    struct Bench {
        #[command(subcommand)]
        command: BenchCommand,
    }

    /// A benchmark without `--out` writes where `ResultsDir` says (outside the repository): no
    /// subcommand may bring back a default of its own, such as the `docs/` paths there were.
    #[test]
    fn no_benchmark_has_a_results_directory_of_its_own() {
        let command = Bench::command();
        let with_out: Vec<&str> = command
            .get_subcommands()
            .filter_map(|sub| {
                let out = sub.get_arguments().find(|a| a.get_id() == "out")?;
                assert!(
                    out.get_default_values().is_empty(),
                    "mote bench {} --out defaults to {:?}",
                    sub.get_name(),
                    out.get_default_values()
                );
                Some(sub.get_name())
            })
            .collect();
        assert_eq!(
            with_out,
            ["burst", "store", "sort", "jobs", "http", "preempt"]
        );
        let Bench {
            command: BenchCommand::Burst(burst),
        } = Bench::parse_from(["bench", "burst", "--all"])
        else {
            panic!("not burst");
        };
        assert_eq!(burst.out, None);
    }
}
