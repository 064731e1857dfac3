//! `mote bench`: the benchmarks of docs/benchmarks.md.

use super::platform::{available_cores, baseline_cap};
use anyhow::Context;
use clap::{Args, Subcommand};
use mote_bench::burst::{self, BurstConfig, Experiment, PaperLoad, SuiteEntry};
use mote_bench::call_path::{self, CallPathConfig};
use mote_bench::micro::{self, MicroConfig};
use mote_bench::sort;
use mote_bench::store::{self, StoreBenchConfig};
use mote_objects::{ObjectsConfig, S3Endpoint};
use mote_sched::Policy;
use mote_testbed::LocalS3;
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
    /// The S3 secret access key.
    #[arg(
        long,
        env = "MOTE_S3_SECRET_KEY",
        default_value = "mote-secret",
        hide_env_values = true
    )]
    s3_secret_key: String,
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
    /// Directory for the results [default: docs/benchmarks/microtasks; with --smoke, a
    /// temporary directory removed at exit].
    #[arg(long)]
    out: Option<PathBuf>,
    /// A short run of every part (2 MB, 4 parts and categories, one repetition of each mode)
    /// for the test command; its figures are not the benchmark's.
    #[arg(long)]
    smoke: bool,
}

/// Options of `mote bench store`.
#[derive(Args)]
pub struct StoreArgs {
    /// A short run of every part (1 and 3 nodes, 1,000 requests, one run) for the test command;
    /// its figures are not the benchmark's. Writes to a temporary directory unless --out is given.
    #[arg(long)]
    smoke: bool,
    /// Directory with etcd 3.6.8's `etcd`, `etcdctl` and `benchmark` (scripts/etcd-tools
    /// installs them) [default: ${ETCD_TOOLS_DIR:-target/etcd-v3.6.8}/bin].
    #[arg(long)]
    etcd_tools: Option<PathBuf>,
    /// The mote binary whose `mote store` is measured [default: this one].
    #[arg(long)]
    mote: Option<PathBuf>,
    /// Directory for the results [default: docs/benchmarks/store; with --smoke, a temporary
    /// directory removed at exit].
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
    /// Directory for the results.
    #[arg(long, default_value = "burst-results")]
    out: PathBuf,
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
    match cmd {
        BenchCommand::Burst(args) => run_burst(args)?,
        BenchCommand::Store(args) => run_store(args)?,
        BenchCommand::Sort(args) => run_sort(args)?,
        BenchCommand::ProcessWorker { once } => micro::process_worker(once)?,
        BenchCommand::Micro(args) => {
            let exe = std::env::current_exe().context("finding the mote binary")?;
            let worker = vec![
                exe.to_string_lossy().into_owned(),
                "bench".into(),
                "process-worker".into(),
            ];
            let config = match args.smoke {
                true => MicroConfig::smoke(worker),
                false => MicroConfig::full(worker),
            };
            let report = micro::run(&config)?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", report.table());
            }
        }
        BenchCommand::Call(args) => {
            let cores = args.cores.unwrap_or_else(available_cores);
            let config = CallPathConfig {
                latency_cores: args.latency_cores.max(1),
                throughput_cores: cores,
                calls: args.calls,
                concurrency: args.concurrency.unwrap_or(4 * cores).max(1),
                body_bytes: args.body_bytes,
            };
            let report = call_path::run(&config)?;
            if args.json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print!("{}", report.table());
            }
        }
    }
    Ok(())
}

/// Where a benchmark writes its results, created: `out` if given, else
/// `docs/benchmarks/{name}`, except that a smoke run, which must never overwrite the committed
/// results, gets a temporary directory removed when the guard drops.
fn results_dir(
    out: Option<PathBuf>,
    smoke: bool,
    name: &str,
) -> anyhow::Result<(PathBuf, Option<RemovedOnDrop>)> {
    let (out, guard) = match (out, smoke) {
        (Some(out), _) => (out, None),
        (None, false) => (PathBuf::from("docs/benchmarks").join(name), None),
        (None, true) => {
            let dir = std::env::temp_dir()
                .join(format!("mote-bench-{name}-smoke-{}", std::process::id()));
            (dir.clone(), Some(RemovedOnDrop(dir)))
        }
    };
    std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    Ok((out, guard))
}

/// The command line as typed, for the report.
fn command_line() -> String {
    std::iter::once("mote".to_owned())
        .chain(std::env::args().skip(1))
        .collect::<Vec<_>>()
        .join(" ")
}

fn run_sort(args: SortArgs) -> anyhow::Result<()> {
    let (size, parts, categories, reps) = match args.smoke {
        true => (0.002, 4, 4, 1),
        false => (args.size, args.parts, args.categories, args.reps),
    };
    anyhow::ensure!(size > 0.0, "--size must be positive");
    anyhow::ensure!(
        parts > 0 && categories > 0 && reps > 0,
        "--parts, --categories and --reps must be at least 1"
    );
    let local = match &args.s3_endpoint {
        Some(_) => None,
        None => Some(LocalS3::start(&args.s3s_fs, &args.bucket)?),
    };
    let endpoint = match (&local, &args.s3_endpoint) {
        (Some(local), _) => S3Endpoint {
            url: local.url().to_owned(),
            region: LocalS3::REGION.into(),
            access_key: LocalS3::ACCESS_KEY.into(),
            secret_key: LocalS3::SECRET_KEY.into(),
        },
        (None, Some(url)) => S3Endpoint {
            url: url.clone(),
            region: "us-east-1".into(),
            access_key: args.s3_access_key.clone(),
            secret_key: args.s3_secret_key.clone(),
        },
        (None, None) => unreachable!("a local server is started without an endpoint"),
    };
    let config = sort::SortConfig {
        size_bytes: (size * 1e9) as u64,
        parts,
        categories,
        cores: args.cores.unwrap_or_else(available_cores),
        objects: ObjectsConfig::S3(endpoint.clone()),
        bucket: args.bucket.clone(),
        memory_mb: args.memory_mb,
    };
    let modes: Vec<String> = match args.microtasks.is_empty() {
        true => vec!["on".into(), "off".into()],
        false => args.microtasks.clone(),
    };
    let (out, _smoke_dir) = results_dir(args.out, args.smoke, "microtasks")?;
    let command = command_line();
    eprintln!(
        "sort: {size} GB in {parts} parts and {categories} categories on {} cores, {reps} rep(s) of {modes:?}, objects at {}",
        config.cores, endpoint.url
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let modes: Vec<_> = modes
        .iter()
        .map(|m| sort::mode(m, args.core_split))
        .collect();
    let runs = rt.block_on(sort::run(&config, &modes, reps, |run| {
        eprintln!(
            "  rep {} microtasks {:<3} makespan {:>7.2} s  stage 1 {:>6.2} s (write {:>6.2})  stage 2 {:>6.2} s (sort {:>6.2}, one call once admitted {:>5})  valid {}",
            run.rep,
            run.microtasks,
            run.makespan_s,
            run.stage1_s,
            run.span("stage1.write"),
            run.stage2_s,
            run.span("stage2.sort"),
            mote_bench::stats::median(&run.sort_admitted_s)
                .map_or("-".to_owned(), |s| format!("{s:.3}")),
            run.valid
        )
    }))?;
    std::fs::write(out.join("runs.json"), serde_json::to_string_pretty(&runs)?)?;
    let mut report = format!(
        "# mote bench sort\n\n`{command}` on {} cores: {size} GB ({} records), {parts} parts, {categories} categories, objects at {}\n\n",
        config.cores,
        config.size_bytes / sort::RECORD_BYTES,
        endpoint.url
    );
    if modes.len() == 2 {
        report += &sort::floors(&runs);
        for png in sort::write_plots(&out, &runs)? {
            let file = png.file_name().unwrap_or_default().to_string_lossy();
            report += &format!("\n![{file}]({file})\n");
        }
    }
    std::fs::write(out.join("report.md"), &report)?;
    print!("{report}");
    anyhow::ensure!(
        runs.iter().all(|r| r.valid),
        "a sorted output did not validate (see above)"
    );
    Ok(())
}

fn run_store(args: StoreArgs) -> anyhow::Result<()> {
    let mote = match args.mote {
        Some(path) => path,
        None => std::env::current_exe().context("finding the mote binary")?,
    };
    let etcd_tools = args.etcd_tools.unwrap_or_else(|| {
        let dir = std::env::var_os("ETCD_TOOLS_DIR")
            .map_or_else(|| PathBuf::from("target/etcd-v3.6.8"), PathBuf::from);
        dir.join("bin")
    });
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
    let (out, smoke_dir) = results_dir(args.out, args.smoke, "store")?;
    let command = command_line();
    eprintln!(
        "store: {} run(s) of sizes {:?}, {} requests each, etcd tools from {}; results in {}",
        config.runs,
        config.sizes,
        config.total,
        config.etcd_tools.display(),
        out.display()
    );
    let report = store::run(&config, command, |m| match &m.summary {
        Some(s) => eprintln!(
            "  run {} {:>10} x{} {:<5} {:>9.0} req/s  p10 {:>7.2} p50 {:>7.2} p90 {:>7.2} ms  cpu s: server {:.1} client {:.1} others {:.1}  load {:.1}",
            m.run + 1,
            m.system.name(),
            m.size,
            format!("{:?}", m.operation).to_lowercase(),
            s.requests_per_s,
            s.percentile_ms(10.0).unwrap_or(f64::NAN),
            s.percentile_ms(50.0).unwrap_or(f64::NAN),
            s.percentile_ms(90.0).unwrap_or(f64::NAN),
            m.server_cpu_s,
            m.client_cpu_s,
            m.other_cpu_s,
            m.load_before,
        ),
        None => eprintln!(
            "  run {} {:>10} x{} {:?}: FAILED: {}",
            m.run + 1,
            m.system.name(),
            m.size,
            m.operation,
            m.error.as_deref().unwrap_or("?")
        ),
    })?;
    let plot = "figure2.png";
    let plotted = match report.write_plot(&out.join(plot)) {
        Ok(()) => Some(plot),
        Err(e) => {
            eprintln!("no figure: {e}");
            None
        }
    };
    let markdown = report.markdown(plotted);
    std::fs::write(out.join("report.md"), &markdown).context("writing report.md")?;
    std::fs::write(
        out.join("results.json"),
        serde_json::to_string_pretty(&report)?,
    )
    .context("writing results.json")?;
    println!("{markdown}");
    if smoke_dir.is_some() {
        eprintln!(
            "(the smoke run's files were in {}, removed at exit; pass --out to keep them)",
            out.display()
        );
    }
    let failures = report.failures();
    anyhow::ensure!(
        failures.is_empty(),
        "{} measurement(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    Ok(())
}

/// A directory removed, with its contents, when this is dropped.
struct RemovedOnDrop(PathBuf);

impl Drop for RemovedOnDrop {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The suite the burst experiment runs: `mote_guests::SUITE` (shortest first), or the named
/// functions of it.
fn suite(only: &[String]) -> anyhow::Result<Vec<SuiteEntry>> {
    let known: Vec<&str> = mote_guests::SUITE.iter().map(|f| f.name).collect();
    if let Some(unknown) = only.iter().find(|n| !known.contains(&n.as_str())) {
        anyhow::bail!(
            "--function {unknown}: not in the suite; choose from {}",
            known.join(", ")
        );
    }
    Ok(mote_guests::SUITE
        .iter()
        .filter(|f| only.is_empty() || only.iter().any(|n| n == f.name))
        .map(|f| SuiteEntry {
            name: f.name,
            wasm: f.wasm,
            input: f.default_input,
        })
        .collect())
}

/// The fairness experiment's mix: the longest function is rare (weight 1), every other function
/// is called ten times as often.
fn fairness_weights(suite: &[SuiteEntry]) -> Vec<u32> {
    let rare = suite.len() - 1;
    (0..suite.len())
        .map(|i| if i == rare { 1 } else { 10 })
        .collect()
}

fn run_burst(args: BurstArgs) -> anyhow::Result<()> {
    let cores = args.cores.unwrap_or_else(available_cores);
    let suite = suite(&args.function)?;
    let policies = match (args.policy.is_empty(), args.fairness) {
        (false, _) => args.policy.clone(),
        (true, true) => vec![Policy::Sept, Policy::Fc],
        (true, false) if args.all => Policy::ALL.to_vec(),
        (true, false) => anyhow::bail!("name a --policy (or several), or run them all with --all"),
    };
    let intensities = match (args.intensity.is_empty(), args.all) {
        (false, _) => args.intensity.clone(),
        (true, true) => vec![30, 40, 60, 90, 120],
        (true, false) => vec![40],
    };
    let weights = match args.fairness {
        true => fairness_weights(&suite),
        false => vec![1; suite.len()],
    };
    anyhow::ensure!(args.window > 0.0, "--window must be positive");
    let experiment = Experiment {
        policies,
        intensities,
        seeds: if args.seed.is_empty() {
            vec![1]
        } else {
            args.seed.clone()
        },
        base: BurstConfig {
            policy: Policy::Fifo,
            cores,
            intensity: 0,
            window: Duration::from_secs_f64(args.window),
            seed: 0,
            baseline_cap: baseline_cap(cores),
            fc_window: Duration::from_secs(args.fc_window_s.max(1)),
            idle_calls: args.idle_calls,
            weights,
            load: args.load,
        },
    };
    eprintln!(
        "burst: {} policies x {} intensities x {} seeds on {cores} cores, {} s windows; results in {}",
        experiment.policies.len(),
        experiment.intensities.len(),
        experiment.seeds.len(),
        args.window,
        args.out.display()
    );
    let runs = burst::run_experiment(&experiment, &suite, &args.out, |s| {
        eprintln!(
            "  {:>8} v={:<3} seed={:<3} calls={:<4} failed={} avg response {:.2} s, avg stretch {:.1}, last completion {:.1} s",
            s.policy,
            s.intensity,
            s.seed,
            s.calls,
            s.failed,
            s.response_ms.avg / 1e3,
            s.stretch.avg,
            s.last_completion_s
        );
    })?;
    burst::write_plots(&args.out, &runs)?;
    let summaries: Vec<_> = runs.into_iter().map(|r| r.summary).collect();
    let json = serde_json::to_string_pretty(&summaries)?;
    std::fs::write(args.out.join("summary.json"), json).context("writing summary.json")?;
    let mut report = format!(
        "# Burst results\n\n{cores} cores, window {} s, {} load, seeds {:?}, {}\n",
        args.window,
        args.load.as_str(),
        experiment.seeds,
        if args.fairness {
            "fairness mix (rare long function)"
        } else {
            "every function equally often"
        }
    );
    for &v in &experiment.intensities {
        for &seed in &experiment.seeds {
            let runs: Vec<_> = summaries
                .iter()
                .filter(|s| s.intensity == v && s.seed == seed)
                .collect();
            report += &format!("\n## Intensity {v}, seed {seed}\n\n{}", burst::table(&runs));
        }
    }
    report += &format!(
        "\n## Ratios (averaged over seeds)\n\n{}",
        burst::ratios(&summaries)
    );
    if args.fairness {
        report += &format!(
            "\n## The rare function\n\n{}",
            rare_function_table(&summaries, suite[suite.len() - 1].name)
        );
    }
    std::fs::write(args.out.join("report.md"), &report).context("writing report.md")?;
    println!("{report}");
    Ok(())
}

/// Stretch of the rare function alone in each run.
fn rare_function_table(summaries: &[burst::BurstSummary], rare: &str) -> String {
    let mut table = format!(
        "| policy | intensity | seed | `{rare}` avg stretch | its p99 stretch | all calls' avg stretch |\n|---|---|---|---|---|---|\n"
    );
    for s in summaries {
        let Some(d) = s.stretch_by_function.get(rare) else {
            continue;
        };
        table += &format!(
            "| {} | {} | {} | {:.1} | {:.1} | {:.1} |\n",
            s.policy, s.intensity, s.seed, d.avg, d.p99, s.stretch.avg
        );
    }
    table
}
