//! How a worker's executor threads run ([`JobThreads`]): how many, confined how, and whether in
//! `SCHED_IDLE`. How they give their cores to calls is the job engine's
//! (`mote_runtime::JobCores`).

use mote_confine::Filter;
use std::sync::Arc;

/// How a worker's executor threads run: how many, confined how, at what priority.
#[derive(Clone, Default)]
pub struct JobThreads {
    /// Executor threads per worker: the node's cores.
    pub cores: usize,
    /// The seccomp allow-list they run under, when confined.
    pub confine: Option<Arc<Filter>>,
    /// Run them in `SCHED_IDLE` (`--job-idle`, on by default).
    pub idle: bool,
}
