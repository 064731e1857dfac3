//! What the simulation found ([`SimReport`]: a [`SimRow`] per cluster and intensity) and its
//! tables: every cluster at every intensity, and the comparisons the paper makes (Fair-Choice on
//! fewer nodes against the baseline on more), as ratios ([`SimRatio`]).

use crate::distribution::Distribution;
use crate::workload::PaperLoad;
use serde::Serialize;
use std::fmt::Write;

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
    /// Share of the calls forwarded to another node than the one the client called (moved
    /// calls included).
    pub forwarded: f64,
    /// Calls that waited on the node the client called until a peer with a core free pulled
    /// them (late correction), over all seeds.
    pub moved: usize,
    /// Work (the idle times of the calls it ran) of the busiest node over the mean per node: 1
    /// is an even spread.
    pub busiest: f64,
    /// When the last response left, mean over seeds, seconds.
    pub last_response_s: f64,
    /// The least p99 response any schedule could give this burst on this many cores
    /// (`bound::p99_floor`), seconds.
    pub p99_floor_s: f64,
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
    /// Whether mote's nodes pulled calls that would wait (late correction).
    pub late_correction: bool,
    /// Every cluster at every intensity.
    pub rows: Vec<SimRow>,
    /// Fair-Choice against the baseline, and one node against several.
    pub ratios: Vec<SimRatio>,
}

/// One cluster's figures over another's at one intensity: below 1, the first did better.
#[derive(Clone, Debug, Serialize)]
pub struct SimRatio {
    /// What is compared, e.g. `fc 3 × 18 / baseline 4 × 18`.
    pub comparison: String,
    /// The burst's intensity on the set-up's reference cluster.
    pub intensity: u32,
    /// Average response time.
    pub avg: f64,
    /// Median response time.
    pub p50: f64,
    /// 75th percentile.
    pub p75: f64,
    /// 95th percentile.
    pub p95: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Average stretch.
    pub stretch: f64,
}

/// (set-up, nodes, policy) of each side of a comparison.
type Side = (&'static str, usize, &'static str);

const COMPARISONS: [(Side, Side); 12] = [
    (("paper VIII", 3, "fc"), ("paper VIII", 4, "baseline")),
    (("paper VIII", 3, "fc"), ("paper VIII", 4, "fifo")),
    (("paper VIII", 2, "fc"), ("paper VIII", 4, "baseline")),
    (("paper VIII", 4, "fc"), ("paper VIII", 4, "baseline")),
    (("paper VIII", 3, "fc"), ("paper VIII", 3, "baseline")),
    (("paper VIII", 4, "fc"), ("one node", 1, "fc")),
    (("one node", 1, "fc"), ("one node", 1, "baseline")),
    (("paper VIII", 4, "fc"), ("paper VIII", 4, "hermod")),
    (("at scale", 100, "fc"), ("at scale", 100, "baseline")),
    (("at scale", 100, "fc"), ("at scale", 100, "hermod")),
    (("at scale", 100, "sept"), ("at scale", 100, "baseline")),
    (("at scale", 100, "sept"), ("at scale", 100, "hermod")),
];

/// The comparisons whose both sides were run, at every intensity.
pub(crate) fn ratios(rows: &[SimRow]) -> Vec<SimRatio> {
    let find = |(setup, nodes, policy): Side, intensity: u32| {
        rows.iter().find(|r| {
            (r.setup, r.nodes, r.policy, r.intensity) == (setup, nodes, policy, intensity)
        })
    };
    let mut intensities: Vec<u32> = rows.iter().map(|r| r.intensity).collect();
    intensities.sort();
    intensities.dedup();
    COMPARISONS
        .iter()
        .flat_map(|&(ours, theirs)| {
            intensities.iter().filter_map(move |&v| {
                let (a, b) = (find(ours, v)?, find(theirs, v)?);
                let ratio = |x: f64, y: f64| x / y.max(f64::MIN_POSITIVE);
                Some(SimRatio {
                    comparison: format!("{} / {}", label(a), label(b)),
                    intensity: v,
                    avg: ratio(a.response_s.avg, b.response_s.avg),
                    p50: ratio(a.response_s.p50, b.response_s.p50),
                    p75: ratio(a.response_s.p75, b.response_s.p75),
                    p95: ratio(a.response_s.p95, b.response_s.p95),
                    p99: ratio(a.response_s.p99, b.response_s.p99),
                    stretch: ratio(a.stretch.avg, b.stretch.avg),
                })
            })
        })
        .collect()
}

fn label(row: &SimRow) -> String {
    format!("{} {} × {}", row.policy, row.nodes, row.cores)
}

impl SimReport {
    /// The report as markdown: the parameters, every row, then the ratios.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let seeds: Vec<String> = self.seeds.iter().map(u64::to_string).collect();
        let _ = writeln!(
            out,
            "Simulated: {} load (calls × {:.2}), {} s window ({} s at 100 nodes), seeds {}, \
             forwarding {:.0} µs, reports every {:.0} ms, {} homes per function, late correction \
             {}.\n",
            self.load.as_str(),
            self.load_scale,
            self.window_s,
            self.scale_window_s,
            seeds.join(", "),
            self.forward_us,
            self.report_ms,
            self.homes,
            match self.late_correction {
                true => "on",
                false => "off",
            },
        );
        out += "| set-up | cluster | intensity (per core) | calls | avg response (s) | p50 (s) \
                | p75 (s) | p95 (s) | p99 (s) | p99 floor (s) | avg stretch | forwarded | moved \
                | busiest node's work / mean | last response (s) |\n\
                |---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
        for r in &self.rows {
            let _ = writeln!(
                out,
                "| {} | {} | {} ({:.0}) | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.1} \
                 | {:.0}% | {} | {:.2} | {:.1} |",
                r.setup,
                label(r),
                r.intensity,
                r.core_intensity,
                r.calls,
                r.response_s.avg,
                r.response_s.p50,
                r.response_s.p75,
                r.response_s.p95,
                r.response_s.p99,
                r.p99_floor_s,
                r.stretch.avg,
                r.forwarded * 100.0,
                r.moved,
                r.busiest,
                r.last_response_s,
            );
        }
        if self.rows.iter().any(|r| r.refused > 0) {
            out += "\nSome calls were refused: no node took them.\n";
        }
        out += "\nRatios (below 1: the first did better):\n\n\
                | comparison | intensity | avg response | p50 | p75 | p95 | p99 | avg stretch |\n\
                |---|---|---|---|---|---|---|---|\n";
        for r in &self.ratios {
            let _ = writeln!(
                out,
                "| {} | {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
                r.comparison, r.intensity, r.avg, r.p50, r.p75, r.p95, r.p99, r.stretch
            );
        }
        out
    }
}
