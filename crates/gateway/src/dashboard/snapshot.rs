//! What a dashboard snapshot shows and how it is taken: [`Samples`] keeps the node's cumulative
//! counters read in the last [`WINDOW`], and [`Snapshot::take`] differences the newest reading
//! against the oldest, so nothing on the call path knows about windows.

use mote_job_service::{JobService, JobStatus};
use mote_node::{ClassSnapshot, ExecutorSample, LatencyCounts, Node, Outcome};
use mote_peers::{Forwarded, MemberView, Peers, ReplicaLag, StoreView};
use parking_lot::Mutex;
use serde::Serialize;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How far back rates and percentiles look.
pub const WINDOW: Duration = Duration::from_secs(10);
/// Readings closer together than this are not both kept (several pages may be open).
const MIN_SPACING: Duration = Duration::from_millis(500);
/// The most jobs a snapshot lists, the latest.
const MAX_JOBS: usize = 20;

impl Snapshot {
    /// A snapshot of `node`, a member of `peers` running `jobs`, with rates over the readings
    /// `samples` keeps.
    pub(super) fn take(node: &Node, peers: &Peers, jobs: &JobService, samples: &Samples) -> Self {
        let (now, base) = samples.read(node);
        let schedule = node.schedule();
        let view = peers.view();
        let jobs = jobs.list();
        let window = now.at.saturating_duration_since(base.at);
        let secs = window.as_secs_f64();
        let rate = |n: u64| match secs > 0.0 {
            true => n as f64 / secs,
            false => 0.0,
        };
        let expected: HashMap<&str, f64> = schedule
            .functions
            .iter()
            .map(|f| (f.name.as_str(), f.expected_ms))
            .collect();
        let functions: Vec<FunctionRow> = now
            .functions
            .iter()
            .map(|(name, f)| {
                let then = base.functions.get(name).filter(|b| b.key == f.key);
                let calls = f.calls();
                let in_window = calls - then.map_or(0, |b| b.calls().min(calls));
                let latency = match then {
                    Some(b) => f.latency.since(&b.latency),
                    None => f.latency.clone(),
                };
                let ms = |d: Duration| d.as_secs_f64() * 1e3;
                FunctionRow {
                    name: name.clone(),
                    kind: f.kind,
                    calls,
                    calls_per_s: rate(in_window),
                    p50_ms: latency.quantile(0.5).map(ms),
                    p99_ms: latency.quantile(0.99).map(ms),
                    stretch: latency.mean_stretch(),
                    expected_ms: expected.get(name.as_str()).copied().unwrap_or(0.0),
                    outcomes: Outcome::ALL
                        .iter()
                        .zip(f.outcomes)
                        .filter(|(_, n)| *n > 0)
                        .map(|(o, n)| (o.as_str(), n))
                        .collect(),
                    quarantined: f.quarantined,
                    resident: f.resident,
                }
            })
            .collect();
        let executors: Vec<ExecutorRow> = now
            .executors
            .iter()
            .map(|e| {
                let then = base.executors.get(e.index);
                let busy = e.busy_ns - then.map_or(0, |b| b.busy_ns.min(e.busy_ns));
                let calls = e.calls - then.map_or(0, |b| b.calls.min(e.calls));
                ExecutorRow {
                    index: e.index,
                    running: e.running,
                    calls: e.calls,
                    calls_per_s: rate(calls),
                    busy_share: match window.is_zero() {
                        true => 0.0,
                        false => (busy as f64 / window.as_nanos() as f64).min(1.0),
                    },
                }
            })
            .collect();
        let forwarded = peers.forwarded();
        let ran_here: u64 = now.functions.values().map(FunctionReading::calls).sum();
        let nodes = view
            .nodes
            .into_iter()
            .map(|member| {
                let sent = forwarded.iter().find(|f| f.peer == member.name).cloned();
                NodeRow {
                    ran_here: member.me.then_some(ran_here),
                    forwarded: sent,
                    member,
                }
            })
            .collect();
        let skip = jobs.len().saturating_sub(MAX_JOBS);
        Snapshot {
            node: view.node,
            at_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            window_s: secs,
            policy: schedule.policy,
            cores: schedule.cores,
            executor_threads: schedule.executor_threads,
            queue_length: schedule.queue_length,
            microtasks: schedule.microtasks,
            calls_per_s: functions.iter().map(|f| f.calls_per_s).sum(),
            busy_cores: executors.iter().map(|e| e.busy_share).sum(),
            functions,
            executors,
            classes: schedule.classes,
            store: StorePanel {
                state: view.store,
                replicas: peers.store_replicas(),
            },
            nodes,
            jobs: jobs.into_iter().skip(skip).collect(),
        }
    }
}

/// What `GET /v1/dashboard` answers and each server-sent event carries.
#[derive(Debug, Serialize)]
pub struct Snapshot {
    /// The node answering.
    pub node: String,
    /// When the snapshot was taken, in ms since the Unix epoch.
    pub at_ms: u64,
    /// The window rates and percentiles are over, in seconds.
    pub window_s: f64,
    /// The scheduling policy.
    pub policy: &'static str,
    /// Executor cores.
    pub cores: usize,
    /// Executor threads (more than cores only under `baseline`).
    pub executor_threads: usize,
    /// Calls waiting for an executor.
    pub queue_length: usize,
    /// `on` or `off`.
    pub microtasks: &'static str,
    /// Calls per second over the window, every function's.
    pub calls_per_s: f64,
    /// Executor cores busy on average over the window.
    pub busy_cores: f64,
    /// Every deployed function, by name.
    pub functions: Vec<FunctionRow>,
    /// Every executor thread.
    pub executors: Vec<ExecutorRow>,
    /// The microtask share classes.
    pub classes: Vec<ClassSnapshot>,
    /// The state store.
    pub store: StorePanel,
    /// The cluster's nodes, this one included.
    pub nodes: Vec<NodeRow>,
    /// The latest jobs this node controls.
    pub jobs: Vec<JobStatus>,
}

/// One function's row.
#[derive(Debug, Serialize)]
pub struct FunctionRow {
    name: String,
    kind: &'static str,
    /// Calls since it was deployed (or this node started), every outcome.
    calls: u64,
    calls_per_s: f64,
    /// Response time (arrival to end) percentiles over the window.
    p50_ms: Option<f64>,
    p99_ms: Option<f64>,
    /// Mean response time over processing time of the window's calls.
    stretch: Option<f64>,
    /// Mean of its last 10 processing times: what the policies rank by.
    expected_ms: f64,
    /// Calls by outcome, the ones that happened.
    outcomes: BTreeMap<&'static str, u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    quarantined: Option<u32>,
    resident: bool,
}

/// One executor thread's row, or one slot's of the calls run on their callers' threads.
#[derive(Debug, Serialize)]
pub struct ExecutorRow {
    index: usize,
    running: bool,
    calls: u64,
    calls_per_s: f64,
    /// Share of the window it spent running calls.
    busy_share: f64,
}

/// The state store this node uses, and in the edge set-up the replicas its own pulls from.
#[derive(Debug, Serialize)]
pub struct StorePanel {
    #[serde(flatten)]
    state: StoreView,
    replicas: Vec<ReplicaLag>,
}

/// One node of the cluster, with where calls ran.
#[derive(Debug, Serialize)]
pub struct NodeRow {
    #[serde(flatten)]
    member: MemberView,
    /// For this node: the calls it ran.
    #[serde(skip_serializing_if = "Option::is_none")]
    ran_here: Option<u64>,
    /// For a peer: the calls this node sent it.
    #[serde(skip_serializing_if = "Option::is_none")]
    forwarded: Option<Forwarded>,
}

/// One function's cumulative counters at one moment.
#[derive(Clone, Debug)]
struct FunctionReading {
    /// The deployment: a redeploy starts its counters over.
    key: u64,
    kind: &'static str,
    outcomes: [u64; Outcome::ALL.len()],
    latency: LatencyCounts,
    quarantined: Option<u32>,
    resident: bool,
}

impl FunctionReading {
    fn calls(&self) -> u64 {
        self.outcomes.iter().sum()
    }
}

/// The node's cumulative counters at one moment.
#[derive(Clone, Debug)]
pub(super) struct Reading {
    at: Instant,
    functions: BTreeMap<String, FunctionReading>,
    executors: Vec<ExecutorSample>,
}

impl Reading {
    fn of(node: &Node) -> Self {
        let functions = node
            .functions()
            .iter()
            .map(|f| {
                let reading = FunctionReading {
                    key: f.key(),
                    kind: f.record().kind.as_str(),
                    outcomes: f.outcomes(),
                    latency: f.call_stats().counts(),
                    quarantined: f.quarantined(),
                    resident: f.is_resident(),
                };
                (f.name().to_string(), reading)
            })
            .collect();
        Self {
            at: Instant::now(),
            functions,
            executors: node.executors_activity(),
        }
    }
}

/// The readings of the last [`WINDOW`], oldest first.
#[derive(Default)]
pub(super) struct Samples {
    recent: Mutex<VecDeque<Arc<Reading>>>,
}

impl Samples {
    /// Reads the node's counters now; returns that reading and the oldest kept within the
    /// window (the reading itself if there is none yet).
    pub(super) fn read(&self, node: &Node) -> (Arc<Reading>, Arc<Reading>) {
        let now = Arc::new(Reading::of(node));
        let mut recent = self.recent.lock();
        remember(&mut recent, now.clone());
        let base = recent.front().cloned().unwrap_or_else(|| now.clone());
        (now, base)
    }
}

/// Keeps `reading` unless the last kept one is too recent, and forgets those older than the
/// window.
fn remember(recent: &mut VecDeque<Arc<Reading>>, reading: Arc<Reading>) {
    let at = reading.at;
    let spaced = recent
        .back()
        .is_none_or(|last| at.saturating_duration_since(last.at) >= MIN_SPACING);
    if spaced {
        recent.push_back(reading);
    }
    while recent
        .front()
        .is_some_and(|first| at.saturating_duration_since(first.at) > WINDOW)
    {
        recent.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(at: Instant) -> Arc<Reading> {
        Arc::new(Reading {
            at,
            functions: BTreeMap::new(),
            executors: Vec::new(),
        })
    }

    #[test]
    fn readings_are_kept_spaced_and_within_the_window() {
        let start = Instant::now();
        let mut recent = VecDeque::new();
        remember(&mut recent, reading(start));
        // Too close to the last one: not kept.
        remember(&mut recent, reading(start + Duration::from_millis(100)));
        assert_eq!(recent.len(), 1);
        for s in 1..=12 {
            remember(&mut recent, reading(start + Duration::from_secs(s)));
        }
        // Readings at 2..=12 s are within 10 s of the last.
        assert_eq!(recent.len(), 11);
        assert_eq!(recent[0].at, start + Duration::from_secs(2));
    }
}
