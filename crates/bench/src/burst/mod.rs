//! The burst experiment of the call-scheduling paper (its section V): a node under an open-loop
//! burst of calls to a suite of functions, measured per call, so policies can be compared on
//! response time and stretch.
//!
//! One run: start a node with the policy, deploy the suite, measure each function's idle
//! response time (the median of a few calls on the idle node: the stretch denominator, as the
//! paper's Table I), warm up with `cores` parallel calls per function, then send the burst: every
//! function equally often, at times drawn uniformly over the window, each call sent at its time
//! whether or not earlier ones have returned. The load generator calls the node in process, as a
//! dispatcher would, so response times measure the node and not an HTTP client.
//!
//! Intensity follows the paper: with `c` cores and intensity `v`, each function gets
//! `c * v / 10` calls in a 60 s window, which with the paper's suite (mean idle response time
//! 1.042 s) keeps the cores busy about `v / 60` of the time. Our suite's functions are shorter,
//! so the count is scaled by `1.042 s / (mean idle time of our suite)` to give each intensity
//! the paper's load; a shorter window scales it down in proportion, for the same reason.
//! [`PaperLoad::Measured`] multiplies that load by the factor the paper's own FIFO results show
//! its nodes actually ran at. The schedule, the load scale and the summaries' [`Distribution`]
//! are `mote_cluster_sim`'s, which sends the same burst to simulated clusters.
//!
//! This file owns one run: the node, the schedule, the burst and its per-call records.
//! `experiment` owns what `mote bench burst` asks for ([`BurstOptions`]) and the experiment it
//! makes of it; `sequence` runs that experiment's runs, writing every file ([`run`]); `report`
//! owns the tables, the plots and the report.

mod experiment;
mod model;
mod report;
mod sequence;

pub use experiment::{BurstOptions, Preempt};
pub use mote_cluster_sim::{Distribution, PaperLoad, load_scale, schedule};
pub use sequence::run;

use crate::stats::median;
use bytes::Bytes;
use mote_node::{ExecutorsConfig, Node, PreemptConfig};
use mote_sched::Policy;
use mote_types::{FunctionName, Limits, Timeout};
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One function of the suite, as the experiment uses it.
#[derive(Clone, Copy, Debug)]
pub struct SuiteEntry {
    /// Its name.
    pub name: &'static str,
    /// Its module.
    pub wasm: &'static [u8],
    /// The request body each call sends.
    pub input: &'static [u8],
}

/// A policy and whether the node preempts under it: what a run compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scheduler {
    /// The node's policy.
    pub policy: Policy,
    /// Whether its executors preempt (only the ranking policies do).
    pub preempt: bool,
}

impl Scheduler {
    /// The name in results and file names: the policy's, with `-preempt` when it preempts.
    pub fn name(self) -> &'static str {
        match (self.policy, self.preempt && !self.policy.arrival_order()) {
            (Policy::Sept, true) => "sept-preempt",
            (Policy::Eect, true) => "eect-preempt",
            (Policy::Rect, true) => "rect-preempt",
            (Policy::Fc, true) => "fc-preempt",
            (policy, _) => policy.as_str(),
        }
    }
}

/// What to run.
#[derive(Clone, Debug)]
pub struct BurstConfig {
    /// The node's policy and whether it preempts.
    pub scheduler: Scheduler,
    /// The quantum under preemption.
    pub quantum: Duration,
    /// The aging factor under preemption.
    pub aging: u64,
    /// Executor cores.
    pub cores: usize,
    /// The paper's intensity `v`.
    pub intensity: u32,
    /// The burst window.
    pub window: Duration,
    /// Seed of the call sequence.
    pub seed: u64,
    /// Running calls allowed under the baseline policy.
    pub baseline_cap: usize,
    /// Fair-Choice's window `T`.
    pub fc_window: Duration,
    /// Calls per function in the idle measurement.
    pub idle_calls: usize,
    /// Relative call frequency of each suite function (all 1 in the paper's main experiment).
    pub weights: Vec<u32>,
    /// Which of the paper's loads an intensity stands for.
    pub load: PaperLoad,
}

/// One measured call. Times are seconds since the burst started.
#[derive(Clone, Debug, Serialize)]
pub struct CallRecord {
    /// The function called.
    pub function: &'static str,
    /// When the schedule said to send it.
    pub scheduled_s: f64,
    /// When it was sent.
    pub sent_s: f64,
    /// When an executor started it.
    pub started_s: f64,
    /// When its reply arrived.
    pub finished_s: f64,
    /// Time on the executor.
    pub processing_ms: f64,
    /// `finished - sent`.
    pub response_ms: f64,
    /// Response time over the function's idle response time.
    pub stretch: f64,
    /// Why it failed, if it did.
    pub error: Option<String>,
}

/// The outcome of one run.
#[derive(Clone, Debug, Serialize)]
pub struct BurstSummary {
    /// The policy, `-preempt` when the node preempted.
    pub policy: &'static str,
    /// Calls suspended for a better-ranked one, warm-up included.
    pub preemptions: u64,
    /// Executor cores.
    pub cores: usize,
    /// Intensity.
    pub intensity: u32,
    /// Window in seconds.
    pub window_s: f64,
    /// Seed.
    pub seed: u64,
    /// The factor on the paper's call counts that gives our suite the paper's load.
    pub load_scale: f64,
    /// Which of the paper's loads that is.
    pub load: PaperLoad,
    /// Calls sent.
    pub calls: usize,
    /// Calls that failed.
    pub failed: usize,
    /// Response time, ms.
    pub response_ms: Distribution,
    /// Stretch.
    pub stretch: Distribution,
    /// When the last reply arrived, seconds after the burst started.
    pub last_completion_s: f64,
    /// Each function's idle response time (ms), the stretch denominator.
    pub idle_ms: BTreeMap<&'static str, f64>,
    /// Stretch of each function's successful calls.
    pub stretch_by_function: BTreeMap<&'static str, Distribution>,
    /// Response time (ms) of each function's successful calls.
    pub response_by_function: BTreeMap<&'static str, Distribution>,
    /// Response time (ms) the cluster simulation's model of this node gives the same burst.
    pub simulated_response_ms: Distribution,
    /// Stretch in that model.
    pub simulated_stretch: Distribution,
}

/// A run's summary and its calls.
pub struct BurstRun {
    /// Aggregates.
    pub summary: BurstSummary,
    /// Every call.
    pub calls: Vec<CallRecord>,
}

/// The distribution of `metric` over each function's calls among `calls`.
fn by_function(
    idle_ms: &BTreeMap<&'static str, f64>,
    calls: &[&CallRecord],
    metric: fn(&CallRecord) -> f64,
) -> BTreeMap<&'static str, Distribution> {
    idle_ms
        .keys()
        .map(|&f| {
            let of_f: Vec<f64> = calls
                .iter()
                .filter(|c| c.function == f)
                .map(|c| metric(c))
                .collect();
            (f, Distribution::of(&of_f))
        })
        .collect()
}

/// Starts a node for `config` in `dir` and deploys the suite with limits high enough that no
/// call times out, as in the paper.
pub async fn start(
    dir: &Path,
    config: &BurstConfig,
    suite: &[SuiteEntry],
) -> anyhow::Result<Arc<Node>> {
    let executors = ExecutorsConfig {
        policy: config.scheduler.policy,
        baseline_cap: config.baseline_cap,
        fc_window: config.fc_window,
        preempt: config.scheduler.preempt.then_some(PreemptConfig {
            quantum: config.quantum,
            aging: config.aging,
            ..PreemptConfig::default()
        }),
        ..ExecutorsConfig::new(config.cores)
    };
    let node = Node::start_embedded(dir, executors).await?;
    let limits = Limits::new(Some(Timeout::Ms(Limits::MAX_TIMEOUT_MS)), Some(512))?;
    for f in suite {
        node.deploy(
            FunctionName::new(f.name)?,
            Bytes::from_static(f.wasm),
            limits,
        )
        .await?;
    }
    Ok(Arc::new(node))
}

/// Each function's median response time over `calls` sequential calls on the idle node.
pub async fn idle_times(
    node: &Node,
    suite: &[SuiteEntry],
    calls: usize,
) -> anyhow::Result<BTreeMap<&'static str, f64>> {
    let mut idle = BTreeMap::new();
    for f in suite {
        node.invoke(f.name, Bytes::from_static(f.input)).await?;
        let mut times = Vec::with_capacity(calls);
        for _ in 0..calls.max(1) {
            let t = Instant::now();
            node.invoke(f.name, Bytes::from_static(f.input)).await?;
            times.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let idle_ms = median(&times)
            .ok_or_else(|| anyhow::anyhow!("no idle call of `{}` was timed", f.name))?;
        idle.insert(f.name, idle_ms);
    }
    Ok(idle)
}

/// Runs one burst on `node` (already warm) and measures every call.
pub async fn burst(
    node: Arc<Node>,
    config: &BurstConfig,
    suite: &[SuiteEntry],
    idle_ms: &BTreeMap<&'static str, f64>,
) -> anyhow::Result<BurstRun> {
    // Warm-up: `cores` parallel calls of each function, not measured.
    let warmups: Vec<_> = suite
        .iter()
        .flat_map(|f| std::iter::repeat_n(*f, config.cores))
        .map(|f| {
            let node = node.clone();
            tokio::spawn(async move { node.invoke(f.name, Bytes::from_static(f.input)).await })
        })
        .collect();
    for w in warmups {
        w.await??;
    }

    let scale = load_scale(idle_ms) * config.load.factor();
    let plan = schedule(
        &config.weights,
        scale,
        config.cores,
        config.intensity,
        config.window,
        config.seed,
    );
    let names: Vec<&'static str> = suite.iter().map(|f| f.name).collect();
    let (simulated_response_ms, simulated_stretch) =
        model::simulate(config, &names, idle_ms, &plan);
    let start = tokio::time::Instant::now();
    let origin = start.into_std();
    let mut pending = Vec::with_capacity(plan.len());
    for (offset, f) in plan {
        tokio::time::sleep_until(start + offset).await;
        let (node, entry) = (node.clone(), suite[f]);
        pending.push(tokio::spawn(async move {
            let sent = Instant::now();
            let reply = node
                .invoke_traced(entry.name, Bytes::from_static(entry.input))
                .await;
            (entry.name, offset, sent, reply, Instant::now())
        }));
    }
    let secs = |t: Instant| t.saturating_duration_since(origin).as_secs_f64();
    let mut calls = Vec::with_capacity(pending.len());
    for p in pending {
        let (function, offset, sent, reply, finished) = p.await?;
        let response_ms = finished.saturating_duration_since(sent).as_secs_f64() * 1e3;
        let (started_s, processing_ms, error) = match reply {
            Ok(r) => (
                secs(sent + r.queued),
                r.processing.as_secs_f64() * 1e3,
                r.result.err().map(|e| e.to_string()),
            ),
            Err(e) => (secs(sent), 0.0, Some(e.to_string())),
        };
        calls.push(CallRecord {
            function,
            scheduled_s: offset.as_secs_f64(),
            sent_s: secs(sent),
            started_s,
            finished_s: secs(finished),
            processing_ms,
            response_ms,
            stretch: response_ms / idle_ms.get(function).copied().unwrap_or(1.0).max(1e-3),
            error,
        });
    }
    let ok: Vec<&CallRecord> = calls.iter().filter(|c| c.error.is_none()).collect();
    let summary = BurstSummary {
        policy: config.scheduler.name(),
        preemptions: node.schedule().preempt.map_or(0, |p| p.preemptions),
        cores: config.cores,
        intensity: config.intensity,
        window_s: config.window.as_secs_f64(),
        seed: config.seed,
        load_scale: scale,
        load: config.load,
        calls: calls.len(),
        failed: calls.len() - ok.len(),
        response_ms: Distribution::of(&ok.iter().map(|c| c.response_ms).collect::<Vec<_>>()),
        stretch: Distribution::of(&ok.iter().map(|c| c.stretch).collect::<Vec<_>>()),
        last_completion_s: calls.iter().map(|c| c.finished_s).fold(0.0, f64::max),
        idle_ms: idle_ms.clone(),
        stretch_by_function: by_function(idle_ms, &ok, |c| c.stretch),
        response_by_function: by_function(idle_ms, &ok, |c| c.response_ms),
        simulated_response_ms,
        simulated_stretch,
    };
    Ok(BurstRun { summary, calls })
}

/// Writes a run's calls as CSV.
pub fn write_csv(path: &Path, calls: &[CallRecord]) -> std::io::Result<()> {
    let mut out = String::from(
        "function,scheduled_s,sent_s,started_s,finished_s,processing_ms,response_ms,stretch,error\n",
    );
    for c in calls {
        out += &format!(
            "{},{:.6},{:.6},{:.6},{:.6},{:.3},{:.3},{:.4},{}\n",
            c.function,
            c.scheduled_s,
            c.sent_s,
            c.started_s,
            c.finished_s,
            c.processing_ms,
            c.response_ms,
            c.stretch,
            c.error.as_deref().unwrap_or("").replace([',', '\n'], " ")
        );
    }
    std::fs::write(path, out)
}

/// Stops a node's executors off the async threads (joining them blocks).
async fn shut_down(node: Arc<Node>) {
    let _ = tokio::task::spawn_blocking(move || drop(node)).await;
}
