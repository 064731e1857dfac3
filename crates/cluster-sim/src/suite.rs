//! The simulated suite: mote's burst functions with the idle response times measured on mote,
//! each call's processing time in the simulation.

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
