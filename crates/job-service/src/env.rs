//! What a node gives its job workers ([`WorkerEnv`]), and how their executor threads run
//! ([`JobThreads`]).

use crate::transport::Transport;
use mote_node::confine::ExecutorFilter;
use mote_node::priority::JobShare;
use mote_objects::Objects;
use mote_runtime::JobEngine;
use std::sync::Arc;

/// What a node gives its workers: the engine, its cores, the transport to other nodes, object
/// storage and the executor threads' confinement.
#[derive(Clone)]
pub struct WorkerEnv {
    /// The job engine.
    pub engine: Arc<JobEngine>,
    /// How the executor threads run.
    pub threads: JobThreads,
    /// How to reach other workers and the controller.
    pub transport: Arc<dyn Transport>,
    /// Where loads read and stores write.
    pub objects: Option<Arc<Objects>>,
}

/// How a worker's executor threads run: how many, confined how, and at what share of the
/// cores calls want too.
#[derive(Clone, Default)]
pub struct JobThreads {
    /// Executor threads per worker: the node's cores.
    pub cores: usize,
    /// The seccomp allow-list they run under, when confined.
    pub confine: Option<Arc<ExecutorFilter>>,
    /// What they keep of a core a call's executor wants.
    pub share: JobShare,
}
