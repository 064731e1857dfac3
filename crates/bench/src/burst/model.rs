//! The simulator's model of the node a burst ran on, run on the same burst: each call takes
//! its function's idle time as measured in this run, on as many cores (under `baseline`, the
//! machine's: its threads are not bound by `--cores`), under the same policy, quantum and aging
//! (`mote_cluster_sim`'s node, with its 500 µs tick). Beside the measured
//! figures, it says how far the cluster simulation's nodes are from a real one.

use super::BurstConfig;
use mote_cluster_sim::{Balancer, ClusterSpec, Distribution, PreemptSpec, SUITE, SimFunction};
use std::collections::BTreeMap;
use std::time::Duration;

/// What the model gives the burst `plan` (offsets and indices into `names`), `idle_ms` being
/// each function's idle time: response times (ms) and stretches of its calls.
pub(super) fn simulate(
    config: &BurstConfig,
    names: &[&'static str],
    idle_ms: &BTreeMap<&'static str, f64>,
    plan: &[(Duration, usize)],
) -> (Distribution, Distribution) {
    let suite: Vec<SimFunction> = names
        .iter()
        .map(|&name| SimFunction {
            name,
            idle: Duration::from_secs_f64(idle_ms.get(name).copied().unwrap_or(0.0) / 1e3),
            // The suite's `sleep` waits: it holds a core without computing.
            waits: SUITE.iter().any(|f| f.name == name && f.waits),
        })
        .collect();
    // `--cores` bounds the calls the ranked policies run at once; under `baseline` every call
    // has a thread, and the OS shares all of the machine's cores among them.
    let cores = match config.scheduler.policy.oversubscribes() {
        true => std::thread::available_parallelism().map_or(config.cores, |n| n.get()),
        false => config.cores,
    };
    let spec = ClusterSpec {
        nodes: 1,
        cores: cores as u32,
        policy: config.scheduler.policy,
        homes: 1,
        report_interval: Duration::from_secs(1),
        forward_cost: Duration::ZERO,
        fc_window: config.fc_window,
        preempt: config.scheduler.preempt.then_some(PreemptSpec {
            quantum: config.quantum,
            aging: config.aging,
            ..PreemptSpec::NODE
        }),
        balancer: Balancer::Nodes,
        choices: 0,
        // One node: nobody to pull from.
        late_correction: false,
    };
    let outcome = mote_cluster_sim::run_once(&spec, &suite, plan, config.seed);
    let response: Vec<f64> = outcome
        .calls
        .iter()
        .map(|c| c.response.as_secs_f64() * 1e3)
        .collect();
    let stretch: Vec<f64> = outcome
        .calls
        .iter()
        .map(|c| c.response.as_secs_f64() / suite[c.function].idle.as_secs_f64().max(1e-6))
        .collect();
    (Distribution::of(&response), Distribution::of(&stretch))
}
