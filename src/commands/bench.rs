//! `mote bench`: the benchmarks of docs/benchmarks.md.

use super::platform::{available_cores, baseline_cap};
use anyhow::Context;
use clap::{Args, Subcommand};
use mote_bench::burst::{self, BurstConfig, Experiment, PaperLoad, SuiteEntry};
use mote_bench::call_path::{self, CallPathConfig};
use mote_bench::micro::{self, MicroConfig};
use mote_sched::Policy;
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
