//! `mote bench cluster`: forwarding between two nodes, the burst at one node of two, or
//! (`--simulate`) the scheduling paper's clusters in virtual time.

use super::output::progress;
use anyhow::Context;
use clap::Args;
use mote_bench::burst::PaperLoad;
use mote_bench::cluster::{self, ClusterBenchConfig, ClusterBurstConfig};
use mote_cluster_sim::{PreemptSpec, SimOptions};
use mote_sched::Policy;
use std::time::{Duration, Instant};

/// Options of `mote bench cluster`.
#[derive(Args)]
pub struct ClusterArgs {
    /// Calls per round and path.
    #[arg(long, default_value_t = 2000)]
    calls: usize,
    /// Rounds, alternating which path goes first.
    #[arg(long, default_value_t = 5)]
    rounds: usize,
    /// Print one JSON object instead of a table.
    #[arg(long)]
    json: bool,
    /// Instead of measuring forwarding, simulate clusters in virtual time (the real placement
    /// and queues, the suite's measured times): the call-scheduling paper's section VIII on
    /// 4, 3 and 2 nodes of 18 cores, one node of 72, and 100 nodes of 32.
    #[arg(long)]
    simulate: bool,
    /// Seeds of the simulated bursts.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "1,2,3",
        requires = "simulate"
    )]
    seeds: Vec<u64>,
    /// Intensities of the simulated bursts, on the largest cluster of each set-up
    /// [default: 30,40,60,90,120].
    #[arg(long, value_delimiter = ',', requires = "simulate")]
    intensity: Vec<u32>,
    /// Which of the paper's loads an intensity stands for (see `mote bench burst --load`).
    #[arg(long, default_value = "measured", requires = "simulate")]
    load: PaperLoad,
    /// Burst window of the paper's set-up, seconds.
    #[arg(long, default_value_t = 60.0, requires = "simulate")]
    window: f64,
    /// Burst window at 100 nodes, seconds (the call count scales with it, not the load).
    #[arg(long, default_value_t = 10.0, requires = "simulate")]
    scale_window: f64,
    /// What forwarding adds to a simulated call, µs.
    #[arg(long, default_value_t = 150, requires = "simulate")]
    forward_us: u64,
    /// How often each simulated node reports its load, ms (`mote up`: a third of the lease
    /// TTL).
    #[arg(long, default_value_t = 1000, requires = "simulate")]
    report_ms: u64,
    /// Home nodes per function in the simulation (`mote up --homes`).
    #[arg(long, default_value_t = 2, requires = "simulate")]
    homes: usize,
    /// Simulated nodes under SEPT, Fair-Choice, EECT and RECT run every call to its end, as the
    /// paper's, instead of preempting as `mote up --preempt on` does (its 2 ms quantum and
    /// 500 µs epoch tick).
    #[arg(long, requires = "simulate")]
    sim_no_preempt: bool,
    /// Simulated nodes never pull waiting calls from a peer when idle, as `mote up
    /// --pull-every-us 0`.
    #[arg(long, requires = "simulate")]
    sim_no_late_correction: bool,
    /// Which simulated set-ups to run [default: all]: `paper` (section VIII: 4, 3 and 2 nodes
    /// of 18 cores), `one-node` (one node of 72), `scale` (100 nodes of 32).
    #[arg(
        long,
        value_delimiter = ',',
        value_parser = clap::builder::PossibleValuesParser::new(mote_cluster_sim::SET_UPS),
        requires = "simulate"
    )]
    set_ups: Vec<String>,
    /// Busy nodes each simulated node draws at random to compare when no home of a call has a
    /// core free (0: every node).
    #[arg(long, default_value_t = mote_cluster::PlacementConfig::default().choices, requires = "simulate")]
    choices: usize,
    /// Instead of measuring forwarding, send the scheduling paper's burst to one node of a
    /// two-node cluster and to one node alone, per policy (real processes, `--cores 1` each).
    #[arg(long, conflicts_with = "simulate")]
    burst: bool,
    /// Policies the burst compares.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "fifo,sept,fc,baseline",
        requires = "burst"
    )]
    policies: Vec<Policy>,
    /// The burst's intensity (the paper's `v`, on the one node's core).
    #[arg(long, default_value_t = 60, requires = "burst")]
    burst_intensity: u32,
    /// The burst's window, seconds.
    #[arg(long, default_value_t = 30, requires = "burst")]
    burst_window_s: u64,
    /// The burst's seed.
    #[arg(long, default_value_t = 1, requires = "burst")]
    burst_seed: u64,
}

/// Runs `mote bench cluster` and prints its report.
pub fn run(args: ClusterArgs) -> anyhow::Result<()> {
    if args.simulate {
        let seconds =
            |s: f64| Duration::try_from_secs_f64(s).with_context(|| format!("a window of {s} s"));
        let options = SimOptions {
            seeds: args.seeds,
            intensities: args.intensity,
            load: args.load,
            window: seconds(args.window)?,
            scale_window: seconds(args.scale_window)?,
            forward_cost: Duration::from_micros(args.forward_us),
            report_interval: Duration::from_millis(args.report_ms.max(1)),
            homes: args.homes,
            fc_window: Duration::from_secs(60),
            preempt: (!args.sim_no_preempt).then_some(PreemptSpec::NODE),
            set_ups: args.set_ups,
            choices: args.choices,
            late_correction: !args.sim_no_late_correction,
        };
        let started = Instant::now();
        let report = mote_cluster_sim::run(&options, &mut progress);
        let took = started.elapsed();
        match args.json {
            true => println!("{}", serde_json::to_string(&report)?),
            false => print!("{}", report.table()),
        }
        progress(&format!(
            "simulated in {:.1} s of wall time",
            took.as_secs_f64()
        ));
        return Ok(());
    }
    if args.burst {
        let config = ClusterBurstConfig {
            mote: std::env::current_exe().context("finding the mote binary")?,
            policies: args.policies,
            intensity: args.burst_intensity,
            window: Duration::from_secs(args.burst_window_s.max(1)),
            seed: args.burst_seed,
            load: PaperLoad::Measured,
        };
        let report = cluster::run_burst(&config)?;
        match args.json {
            true => println!("{}", serde_json::to_string(&report)?),
            false => print!("{}", report.table()),
        }
        return Ok(());
    }
    let config = ClusterBenchConfig {
        mote: std::env::current_exe().context("finding the mote binary")?,
        calls: args.calls.max(1),
        rounds: args.rounds.max(1),
    };
    let report = cluster::run(&config)?;
    match args.json {
        true => println!("{}", serde_json::to_string(&report)?),
        false => print!("{}", report.table()),
    }
    Ok(())
}
