//! `mote bench cluster --simulate`: the call-scheduling paper's cluster experiment (its section
//! VIII: the same burst on 4, 3 and 2 nodes of 18 cores, baseline against Fair-Choice) and the
//! same at 100 nodes of 32 cores, as a discrete-event simulation in virtual time.
//!
//! The decisions are mote's own code, not models of it: every node places calls with the real
//! [`mote_cluster::Placement`] over the real [`mote_cluster::Membership`], and the ranking
//! policies order calls with the real [`mote_sched::CallQueue`], expected times coming from
//! each node's own history as in a node. What is modelled: a call's processing time is its
//! function's idle response time as measured on mote ([`SUITE`]); `baseline` is ideal processor
//! sharing (what Linux gives the real baseline's threads, without its switching costs);
//! forwarding costs a fixed time; the store carries reports instantly. Not modelled: network
//! queueing, cold starts and memory, and the variation of processing times under load.
//!
//! - `engine`: one run, the event loop ([`ClusterSpec`], [`RunOutcome`]).
//! - `local`: how one node runs the calls placed on it (queue or processor sharing).
//! - `report`: the tables.
//!
//! This file owns the suite's data, what `mote bench cluster --simulate` asks for
//! ([`SimOptions`]), the configurations it runs and the aggregation of their calls ([`run`]).

mod engine;
mod local;
mod report;

pub use engine::{CallOutcome, ClusterSpec, RunOutcome, run as run_once};
pub use report::SimRatio;

use crate::burst::{self, Distribution, PaperLoad};
use mote_sched::Policy;
use serde::Serialize;
use std::collections::BTreeMap;
use std::time::Duration;

/// A function of the simulated suite.
#[derive(Clone, Copy, Debug)]
pub struct SimFunction {
    /// Its name (placement ranks its homes by it).
    pub name: &'static str,
    /// Its idle response time: its processing time in the simulation, and the stretch
    /// denominator.
    pub idle: Duration,
    /// Whether it waits rather than computes (it holds a core under the one-call-per-core
    /// policies, but no share of one under processor sharing).
    pub waits: bool,
}

const fn function(name: &'static str, idle_us: u64, waits: bool) -> SimFunction {
    SimFunction {
        name,
        idle: Duration::from_micros(idle_us),
        waits,
    }
}

/// mote's suite with its idle response times: the table in docs/benchmarks/scheduling.md,
/// measured by `mote bench burst` on 2026-11-22 (median of 3 calls on an idle node, 2 vCPU AMD
/// EPYC). Their mean, 0.655 s, sets the load scale as in the burst experiment.
pub const SUITE: [SimFunction; 8] = [
    function("graph-pagerank", 8_300, false),
    function("graph-bfs", 12_100, false),
    function("dynamic-html", 21_800, false),
    function("graph-mst", 41_100, false),
    function("thumbnailer", 83_700, false),
    function("sleep", 501_300, true),
    function("compression", 529_100, false),
    function("dna-visualisation", 4_040_000, false),
];

/// The intensities `mote bench burst --all` runs.
pub const INTENSITIES: [u32; 5] = [30, 40, 60, 90, 120];

/// What `mote bench cluster --simulate` runs.
#[derive(Clone, Debug)]
pub struct SimOptions {
    /// Seeds of the call sequences (each the same for every cluster).
    pub seeds: Vec<u64>,
    /// Intensities, of the largest cluster of each set-up (empty: [`INTENSITIES`]).
    pub intensities: Vec<u32>,
    /// Which of the paper's loads an intensity stands for.
    pub load: PaperLoad,
    /// The burst window of the paper's set-up (the paper's 60 s).
    pub window: Duration,
    /// The burst window at 100 nodes; the call count scales with it, so the load does not.
    pub scale_window: Duration,
    /// What forwarding adds to a call.
    pub forward_cost: Duration,
    /// How often each node reports its load.
    pub report_interval: Duration,
    /// Home nodes per function.
    pub homes: usize,
    /// Fair-Choice's window `T`.
    pub fc_window: Duration,
}

/// The clusters that share one burst; the burst's intensity is that of the reference cluster.
struct SetUp {
    name: &'static str,
    /// The cores the intensity is counted on: the paper's 4 × 18 in its section VIII.
    reference_cores: usize,
    window: Duration,
    clusters: Vec<(usize, u32, Policy)>,
}

fn set_ups(options: &SimOptions) -> Vec<SetUp> {
    use Policy::{Baseline, Fc, Fifo, Sept};
    vec![
        SetUp {
            name: "paper VIII",
            reference_cores: 4 * 18,
            window: options.window,
            // FIFO on 4 nodes: a baseline that, like OpenWhisk's measured one, gains nothing
            // from sharing the cores.
            clusters: vec![
                (4, 18, Baseline),
                (4, 18, Fifo),
                (4, 18, Fc),
                (3, 18, Baseline),
                (3, 18, Fc),
                (2, 18, Baseline),
                (2, 18, Fc),
            ],
        },
        // The same burst on one node with all 72 cores: what spreading it over nodes costs.
        SetUp {
            name: "one node",
            reference_cores: 72,
            window: options.window,
            clusters: vec![(1, 72, Baseline), (1, 72, Fc)],
        },
        SetUp {
            name: "at scale",
            reference_cores: 100 * 32,
            window: options.scale_window,
            clusters: vec![
                (100, 32, Baseline),
                (100, 32, Fc),
                (100, 32, Fifo),
                (100, 32, Sept),
            ],
        },
    ]
}

/// The figures of one cluster at one intensity, over every seed's calls.
#[derive(Clone, Debug, Serialize)]
pub struct SimRow {
    /// The set-up it belongs to.
    pub setup: &'static str,
    /// Nodes.
    pub nodes: usize,
    /// Cores per node.
    pub cores: u32,
    /// Every node's policy.
    pub policy: &'static str,
    /// The burst's intensity, on the set-up's reference cluster.
    pub intensity: u32,
    /// The same burst's intensity on this cluster's cores.
    pub core_intensity: f64,
    /// Calls answered, over all seeds.
    pub calls: usize,
    /// Response time, seconds.
    pub response_s: Distribution,
    /// Response time over the function's idle time.
    pub stretch: Distribution,
    /// Share of the calls forwarded to another node than the one the client called.
    pub forwarded: f64,
    /// Work (the idle times of the calls it ran) of the busiest node over the mean per node: 1
    /// is an even spread.
    pub busiest: f64,
    /// When the last response left, mean over seeds, seconds.
    pub last_response_s: f64,
    /// Calls refused.
    pub refused: usize,
}

/// What the simulation found.
#[derive(Clone, Debug, Serialize)]
pub struct SimReport {
    /// The factor on the paper's call counts (our suite's shorter functions, times the load).
    pub load_scale: f64,
    /// Which of the paper's loads.
    pub load: PaperLoad,
    /// The paper set-up's window, seconds.
    pub window_s: f64,
    /// The 100-node window, seconds.
    pub scale_window_s: f64,
    /// Seeds.
    pub seeds: Vec<u64>,
    /// Forwarding cost, µs.
    pub forward_us: f64,
    /// Report interval, ms.
    pub report_ms: f64,
    /// Home nodes per function.
    pub homes: usize,
    /// Every cluster at every intensity.
    pub rows: Vec<SimRow>,
    /// Fair-Choice against the baseline, and one node against several.
    pub ratios: Vec<SimRatio>,
}

/// Runs every set-up at every intensity and seed; `progress` hears of each cluster as it
/// finishes.
pub fn run(options: &SimOptions, progress: &mut dyn FnMut(&str)) -> SimReport {
    let idle_ms: BTreeMap<&'static str, f64> = SUITE
        .iter()
        .map(|f| (f.name, f.idle.as_secs_f64() * 1e3))
        .collect();
    let scale = burst::load_scale(&idle_ms) * options.load.factor();
    let intensities = match options.intensities.is_empty() {
        true => INTENSITIES.to_vec(),
        false => options.intensities.clone(),
    };
    let mut rows = Vec::new();
    for setup in set_ups(options) {
        for &intensity in &intensities {
            let plans: Vec<(u64, Vec<(Duration, usize)>)> = options
                .seeds
                .iter()
                .map(|&seed| {
                    let weights = [1; SUITE.len()];
                    let plan = burst::schedule(
                        &weights,
                        scale,
                        setup.reference_cores,
                        intensity,
                        setup.window,
                        seed,
                    );
                    (seed, plan)
                })
                .collect();
            for &(nodes, cores, policy) in &setup.clusters {
                let spec = ClusterSpec {
                    nodes,
                    cores,
                    policy,
                    homes: options.homes,
                    report_interval: options.report_interval,
                    forward_cost: options.forward_cost,
                    fc_window: options.fc_window,
                };
                let outcomes: Vec<RunOutcome> = plans
                    .iter()
                    .map(|(seed, plan)| run_once(&spec, &SUITE, plan, *seed))
                    .collect();
                let row = aggregate(&setup, &spec, intensity, &outcomes);
                progress(&format!(
                    "{}: {} × {} {} at intensity {}: {} calls, avg response {:.2} s",
                    row.setup, nodes, cores, row.policy, intensity, row.calls, row.response_s.avg
                ));
                rows.push(row);
            }
        }
    }
    SimReport {
        load_scale: scale,
        load: options.load,
        window_s: options.window.as_secs_f64(),
        scale_window_s: options.scale_window.as_secs_f64(),
        seeds: options.seeds.clone(),
        forward_us: options.forward_cost.as_secs_f64() * 1e6,
        report_ms: options.report_interval.as_secs_f64() * 1e3,
        homes: options.homes,
        ratios: report::ratios(&rows),
        rows,
    }
}

fn aggregate(setup: &SetUp, spec: &ClusterSpec, intensity: u32, outcomes: &[RunOutcome]) -> SimRow {
    let calls: Vec<&CallOutcome> = outcomes.iter().flat_map(|o| &o.calls).collect();
    let response: Vec<f64> = calls.iter().map(|c| c.response.as_secs_f64()).collect();
    let stretch: Vec<f64> = calls
        .iter()
        .map(|c| c.response.as_secs_f64() / SUITE[c.function].idle.as_secs_f64())
        .collect();
    // Work, not calls: a home of a short function may run many of its calls and still carry
    // less than its share.
    let mut work = vec![0.0f64; spec.nodes];
    for c in &calls {
        work[c.node] += SUITE[c.function].idle.as_secs_f64();
    }
    let mean_work = work.iter().sum::<f64>() / spec.nodes as f64;
    let busiest = work.iter().copied().fold(0.0, f64::max) / mean_work.max(f64::MIN_POSITIVE);
    let cluster_cores = spec.nodes * spec.cores as usize;
    SimRow {
        setup: setup.name,
        nodes: spec.nodes,
        cores: spec.cores,
        policy: spec.policy.as_str(),
        intensity,
        core_intensity: f64::from(intensity) * setup.reference_cores as f64 / cluster_cores as f64,
        calls: calls.len(),
        response_s: Distribution::of(&response),
        stretch: Distribution::of(&stretch),
        forwarded: calls.iter().filter(|c| c.forwarded).count() as f64 / calls.len().max(1) as f64,
        busiest,
        last_response_s: outcomes
            .iter()
            .map(|o| o.last_response.as_secs_f64())
            .sum::<f64>()
            / outcomes.len().max(1) as f64,
        refused: outcomes.iter().map(|o| o.refused).sum(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_set_up_runs_and_the_ratios_compare_what_ran() {
        let options = SimOptions {
            seeds: vec![1, 2],
            intensities: vec![30],
            load: PaperLoad::Measured,
            window: Duration::from_secs(2),
            scale_window: Duration::from_millis(200),
            forward_cost: Duration::from_micros(150),
            report_interval: Duration::from_secs(1),
            homes: 2,
            fc_window: Duration::from_secs(60),
        };
        let mut heard = 0;
        let report = run(&options, &mut |_| heard += 1);
        assert_eq!(report.rows.len(), 13);
        assert_eq!(heard, 13);
        for row in &report.rows {
            assert!(row.calls > 0 && row.refused == 0, "{row:?}");
            // No call runs faster than on an idle node.
            assert!(row.stretch.p50 >= 1.0, "{row:?}");
        }
        let three = report.rows.iter().find(|r| r.nodes == 3).unwrap();
        assert_eq!(three.core_intensity, 40.0);
        assert_eq!(report.ratios.len(), 8);
        assert_eq!(report.ratios[0].comparison, "fc 3 × 18 / baseline 4 × 18");
        let table = report.table();
        assert!(
            table.contains("| paper VIII | fc 3 × 18 | 30 (40) |"),
            "{table}"
        );
    }
}
