//! What a node reports of itself: its load (to its peers), its records, the schedule
//! (`GET /v1/node`), executor activity, function logs and metrics.

use super::Node;
use crate::activity::ExecutorSample;
use crate::logs::FunctionLogs;
use crate::metrics::NodeMetrics;
use crate::registry::Deployed;
use crate::schedule::{self, PreemptSnapshot, ScheduleSnapshot};
use mote_runtime::JobCores;
use mote_types::FunctionRecord;
use std::sync::Arc;
use std::time::Duration;

/// How busy a node is, as it reports itself to its peers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeLoad {
    /// Executor cores.
    pub cores: usize,
    /// Calls running.
    pub running: usize,
    /// Calls waiting for a core (or, for calls that declare phases, for a share).
    pub queued: usize,
    /// The work the node holds, estimated as its calls (running and queued) times
    /// `mean_expected`.
    pub work: Duration,
    /// The mean expected processing time of its functions that have run.
    pub mean_expected: Duration,
    /// Each call waiting for an executor core, by its expected remaining time, when the
    /// policy ranks calls; `None` under FIFO and `baseline`, which run them in arrival order.
    pub waiting_work: Option<Vec<Duration>>,
    /// How long a running call keeps its core before a better-ranked one may take it (the
    /// preemption quantum); `None` if calls run to their end.
    pub quantum: Option<Duration>,
}

impl Node {
    /// Calls waiting for a core (a lock-free read, for callers on the call path).
    pub fn queued(&self) -> usize {
        self.cores.pending().len()
    }

    /// How busy the node is now.
    pub fn load(&self) -> NodeLoad {
        let running = self.busy_executors();
        let queued = self.queued()
            + self
                .microtasks
                .classes()
                .iter()
                .map(|c| c.waiting)
                .sum::<usize>();
        let expected: Vec<f64> = self
            .registry
            .functions()
            .iter()
            .map(|f| f.expected_s())
            .filter(|s| *s > 0.0)
            .collect();
        let mean = match expected.len() {
            0 => 0.0,
            n => expected.iter().sum::<f64>() / n as f64,
        };
        NodeLoad {
            cores: self.cores(),
            running,
            queued,
            work: Duration::from_secs_f64(mean * (running + queued) as f64),
            mean_expected: Duration::from_secs_f64(mean),
            waiting_work: self.cores.pending().waiting_work(),
            quantum: self.executors.preemption().map(|p| p.quantum),
        }
    }

    /// The expected processing time of a call of `name` here, from its recent calls (zero
    /// before its first).
    pub fn expected(&self, name: &str) -> Duration {
        self.registry
            .get(name)
            .map(|f| Duration::from_secs_f64(f.expected_s()))
            .unwrap_or_default()
    }

    /// The record of `name`, if deployed.
    pub fn get(&self, name: &str) -> Option<FunctionRecord> {
        self.registry.get(name).map(|f| f.record().clone())
    }

    /// Every deployed function, by name.
    pub fn list(&self) -> Vec<FunctionRecord> {
        self.registry.list()
    }

    /// The scheduling state: policy, queue, and each function's expected time.
    pub fn schedule(&self) -> ScheduleSnapshot {
        schedule::snapshot(schedule::Sources {
            policy: self.executors.policy(),
            cores: self.executors.cores(),
            executor_threads: self.executors.threads(),
            inline: self.executors.runs_inline(),
            preempt: self.executors.preemption().map(|p| PreemptSnapshot {
                quantum_us: p.quantum.as_micros() as u64,
                max_suspended: p.max_suspended,
                suspended: self.executors.suspended(),
                preemptions: self.metrics.preemptions.get(),
                refused_at_bound: self.metrics.preemptions_refused.get(),
            }),
            pending: self.cores.pending(),
            microtasks: &self.microtasks,
            functions: &self.registry.functions(),
        })
    }

    /// Every deployed function, by name, with its call counters.
    pub fn functions(&self) -> Vec<Arc<Deployed>> {
        self.registry.functions()
    }

    /// What each core has run so far.
    pub fn executors_activity(&self) -> Vec<ExecutorSample> {
        self.runner.activity().sample()
    }

    /// Every function's log (`GET /v1/functions/NAME/logs`).
    pub fn logs(&self) -> &FunctionLogs {
        &self.logs
    }

    /// The node's metrics, for the gateway to expose.
    pub fn metrics(&self) -> &NodeMetrics {
        &self.metrics
    }

    /// How many executor cores the node runs calls on.
    pub fn cores(&self) -> usize {
        self.executors.cores()
    }

    /// The node's cores as its calls and its jobs' tasks take them: a job engine runs its
    /// tasks on these.
    pub fn job_cores(&self) -> &Arc<JobCores> {
        &self.job_cores
    }

    /// Cores running a call or tearing its instance down; a dispatcher that sends work only to
    /// free cores waits for this to fall below [`Node::cores`].
    pub fn busy_executors(&self) -> usize {
        usize::try_from(self.metrics.busy_executors.get()).unwrap_or(0)
    }
}
