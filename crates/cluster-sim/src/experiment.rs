//! What `mote bench cluster --simulate` asks for ([`SimOptions`]), the set-ups it runs (the
//! paper's section VIII on 4, 3 and 2 nodes of 18 cores, one node of 72, and 100 nodes of 32),
//! and the aggregation of their calls into the report's rows ([`run`]).

use crate::bound;
use crate::distribution::Distribution;
use crate::engine::{Balancer, CallOutcome, ClusterSpec, RunOutcome, run as run_once};
use crate::preempt::PreemptSpec;
use crate::report::{self, SimReport, SimRow};
use crate::suite::{INTENSITIES, SUITE};
use crate::workload::{self, PaperLoad};
use mote_sched::Policy;
use std::collections::BTreeMap;
use std::time::Duration;

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
    /// How nodes under a ranking policy preempt; `None`: they run every call to its end.
    pub preempt: Option<PreemptSpec>,
    /// Which set-ups to run, by [`SET_UPS`] name (empty: all).
    pub set_ups: Vec<String>,
    /// Busy nodes each node draws at random to compare (`mote_cluster::PlacementConfig`'s
    /// `choices`; 0: all).
    pub choices: usize,
    /// Whether mote's nodes ([`Balancer::Nodes`]) pull calls that would wait from the peer
    /// furthest behind when they have a core free (late correction, as `mote up` does by
    /// default); Hermod's balancer binds each call once.
    pub late_correction: bool,
}

/// The set-ups' names: the paper's section VIII on 4, 3 and 2 nodes, its burst on one node of
/// 72 cores, and 100 nodes of 32.
pub const SET_UPS: [&str; 3] = ["paper", "one-node", "scale"];

/// The clusters that share one burst; the burst's intensity is that of the reference cluster.
struct SetUp {
    /// Its name in [`SET_UPS`].
    key: &'static str,
    name: &'static str,
    /// The cores the intensity is counted on: the paper's 4 × 18 in its section VIII.
    reference_cores: usize,
    window: Duration,
    clusters: Vec<(usize, u32, Policy, Balancer)>,
}

fn set_ups(options: &SimOptions) -> Vec<SetUp> {
    use Balancer::{Hermod, Nodes};
    use Policy::{Baseline, Fc, Fifo, Sept};
    vec![
        SetUp {
            key: SET_UPS[0],
            name: "paper VIII",
            reference_cores: 4 * 18,
            window: options.window,
            // FIFO on 4 nodes: a baseline that, like OpenWhisk's measured one, gains nothing
            // from sharing the cores.
            clusters: vec![
                (4, 18, Baseline, Nodes),
                (4, 18, Baseline, Hermod),
                (4, 18, Fifo, Nodes),
                (4, 18, Fc, Nodes),
                (3, 18, Baseline, Nodes),
                (3, 18, Fc, Nodes),
                (2, 18, Baseline, Nodes),
                (2, 18, Fc, Nodes),
            ],
        },
        // The same burst on one node with all 72 cores: what spreading it over nodes costs.
        SetUp {
            key: SET_UPS[1],
            name: "one node",
            reference_cores: 72,
            window: options.window,
            clusters: vec![(1, 72, Baseline, Nodes), (1, 72, Fc, Nodes)],
        },
        SetUp {
            key: SET_UPS[2],
            name: "at scale",
            reference_cores: 100 * 32,
            window: options.scale_window,
            clusters: vec![
                (100, 32, Baseline, Nodes),
                (100, 32, Baseline, Hermod),
                (100, 32, Fc, Nodes),
                (100, 32, Fifo, Nodes),
                (100, 32, Sept, Nodes),
            ],
        },
    ]
}

/// Runs every set-up at every intensity and seed; `progress` hears of each cluster as it
/// finishes.
pub fn run(options: &SimOptions, progress: &mut dyn FnMut(&str)) -> SimReport {
    let idle_ms: BTreeMap<&'static str, f64> = SUITE
        .iter()
        .map(|f| (f.name, f.idle.as_secs_f64() * 1e3))
        .collect();
    let scale = workload::load_scale(&idle_ms) * options.load.factor();
    let intensities = match options.intensities.is_empty() {
        true => INTENSITIES.to_vec(),
        false => options.intensities.clone(),
    };
    let mut rows = Vec::new();
    let chosen = |setup: &SetUp| {
        options.set_ups.is_empty() || options.set_ups.iter().any(|k| k == setup.key)
    };
    for setup in set_ups(options).into_iter().filter(chosen) {
        for &intensity in &intensities {
            let plans: Vec<(u64, Vec<(Duration, usize)>)> = options
                .seeds
                .iter()
                .map(|&seed| {
                    let weights = [1; SUITE.len()];
                    let plan = workload::schedule(
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
            for &(nodes, cores, policy, balancer) in &setup.clusters {
                let spec = ClusterSpec {
                    nodes,
                    cores,
                    policy,
                    homes: options.homes,
                    report_interval: options.report_interval,
                    forward_cost: options.forward_cost,
                    fc_window: options.fc_window,
                    preempt: options.preempt,
                    balancer,
                    choices: options.choices,
                    late_correction: options.late_correction && balancer == Balancer::Nodes,
                };
                let outcomes: Vec<RunOutcome> = plans
                    .iter()
                    .map(|(seed, plan)| run_once(&spec, &SUITE, plan, *seed))
                    .collect();
                let mut row = aggregate(&setup, &spec, intensity, &outcomes);
                let burst: Vec<&[(Duration, usize)]> =
                    plans.iter().map(|(_, plan)| plan.as_slice()).collect();
                row.p99_floor_s = bound::p99_floor(&burst, &SUITE, nodes * cores as usize);
                progress(&format!(
                    "{}: {} × {} {} at intensity {}: {} calls, avg response {:.2} s, {} moved",
                    row.setup,
                    nodes,
                    cores,
                    row.policy,
                    intensity,
                    row.calls,
                    row.response_s.avg,
                    row.moved
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
        late_correction: options.late_correction,
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
        policy: match spec.balancer {
            Balancer::Nodes => spec.policy.as_str(),
            Balancer::Hermod => "hermod",
        },
        intensity,
        core_intensity: f64::from(intensity) * setup.reference_cores as f64 / cluster_cores as f64,
        calls: calls.len(),
        response_s: Distribution::of(&response),
        stretch: Distribution::of(&stretch),
        forwarded: calls.iter().filter(|c| c.forwarded).count() as f64 / calls.len().max(1) as f64,
        moved: calls.iter().filter(|c| c.moved).count(),
        busiest,
        last_response_s: outcomes
            .iter()
            .map(|o| o.last_response.as_secs_f64())
            .sum::<f64>()
            / outcomes.len().max(1) as f64,
        refused: outcomes.iter().map(|o| o.refused).sum(),
        p99_floor_s: 0.0,
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
            preempt: Some(PreemptSpec::NODE),
            set_ups: Vec::new(),
            choices: 2,
            late_correction: true,
        };
        let mut heard = 0;
        let report = run(&options, &mut |_| heard += 1);
        assert_eq!(report.rows.len(), 15);
        assert_eq!(heard, 15);
        for row in &report.rows {
            assert!(row.calls > 0 && row.refused == 0, "{row:?}");
            // No call runs faster than on an idle node.
            assert!(row.stretch.p50 >= 1.0, "{row:?}");
            // Arrival-order queues hand over nothing, and Hermod binds each call once.
            if ["baseline", "fifo", "hermod"].contains(&row.policy) {
                assert_eq!(row.moved, 0, "{row:?}");
            }
        }
        let three = report.rows.iter().find(|r| r.nodes == 3).unwrap();
        assert_eq!(three.core_intensity, 40.0);
        assert_eq!(report.ratios.len(), 12);
        assert_eq!(report.ratios[0].comparison, "fc 3 × 18 / baseline 4 × 18");
        let table = report.table();
        assert!(
            table.contains("| paper VIII | fc 3 × 18 | 30 (40) |"),
            "{table}"
        );
        assert!(table.contains("| forwarded | moved |"), "{table}");
    }
}
