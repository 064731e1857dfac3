//! The node's scheduling state as `GET /v1/node` shows it: the policy, the queue, the share
//! classes of microtask calls, and what the node has learned of each function's run times.

use crate::microtask::{ClassSnapshot, Microtasks};
use crate::pending::Pending;
use crate::registry::Deployed;
use mote_sched::Policy;
use serde::Serialize;
use std::sync::Arc;

/// A function's scheduling state, for `GET /v1/node`.
#[derive(Clone, Debug, Serialize)]
pub struct FunctionSchedule {
    /// The function.
    pub name: String,
    /// Mean of its last 10 processing times on this node, in milliseconds (0 before the first).
    pub expected_ms: f64,
    /// Its last processing times, oldest first, in milliseconds.
    pub recent_ms: Vec<f64>,
    /// Calls that arrived in the Fair-Choice window.
    pub recent_calls: usize,
}

/// Preemption on the executors, for `GET /v1/node`.
#[derive(Clone, Debug, Serialize)]
pub struct PreemptSnapshot {
    /// How long a call runs before a better-ranked one may take its core, in microseconds.
    pub quantum_us: u64,
    /// The most calls suspended at once.
    pub max_suspended: usize,
    /// Calls suspended now.
    pub suspended: usize,
    /// Calls suspended so far (a call suspended twice counts twice).
    pub preemptions: u64,
    /// Preemptions not made because `max_suspended` calls were suspended.
    pub refused_at_bound: u64,
}

/// The queue's state, for `GET /v1/node`.
#[derive(Clone, Debug, Serialize)]
pub struct ScheduleSnapshot {
    /// The running policy.
    pub policy: &'static str,
    /// Cores calls may use.
    pub cores: usize,
    /// Executor threads (more than cores under `baseline` and under preemption).
    pub executor_threads: usize,
    /// Whether a call runs on the thread that read it when a core is free and nothing waits
    /// (`--inline`; false: every call waits for an executor).
    pub inline: bool,
    /// Preemption, if the executors preempt (`null`: every call runs to its end).
    pub preempt: Option<PreemptSnapshot>,
    /// Calls waiting (preempted calls included).
    pub queue_length: usize,
    /// How calls that declare phases are scheduled: `on` (per share class) or `off`.
    pub microtasks: &'static str,
    /// The share classes' cores, room and queues (calls that declare phases).
    pub classes: Vec<ClassSnapshot>,
    /// Per-function state, for every function given.
    pub functions: Vec<FunctionSchedule>,
}

/// Where the node's scheduling state is read from.
pub(crate) struct Sources<'a, T> {
    pub policy: Policy,
    pub cores: usize,
    pub executor_threads: usize,
    pub inline: bool,
    pub preempt: Option<PreemptSnapshot>,
    pub pending: &'a Pending<T>,
    pub microtasks: &'a Microtasks,
    pub functions: &'a [Arc<Deployed>],
}

/// The scheduling state now.
pub(crate) fn snapshot<T>(from: Sources<'_, T>) -> ScheduleSnapshot {
    let ms = |ns: u64| ns as f64 / 1e6;
    let functions = from
        .functions
        .iter()
        .map(|f| {
            from.pending.history(f.key(), |history| FunctionSchedule {
                name: f.name().to_string(),
                expected_ms: history.map(|h| ms(h.expected_ns())).unwrap_or(0.0),
                recent_ms: history
                    .map(|h| h.recent_processing_ns().into_iter().map(ms).collect())
                    .unwrap_or_default(),
                recent_calls: history.map(|h| h.recent_calls()).unwrap_or(0),
            })
        })
        .collect();
    ScheduleSnapshot {
        policy: from.policy.as_str(),
        cores: from.cores,
        executor_threads: from.executor_threads,
        inline: from.inline,
        preempt: from.preempt,
        queue_length: from.pending.len(),
        microtasks: from.microtasks.mode().as_str(),
        classes: from.microtasks.classes(),
        functions,
    }
}
