//! What a node gives its job workers ([`WorkerEnv`]).

use crate::transport::Transport;
use mote_node::confine::ExecutorFilter;
use mote_objects::Objects;
use mote_runtime::JobEngine;
use std::sync::Arc;

/// What a node gives its workers: the engine, its cores, the transport to other nodes, object
/// storage and the executor threads' confinement.
#[derive(Clone)]
pub struct WorkerEnv {
    /// The job engine.
    pub engine: Arc<JobEngine>,
    /// Executor threads per worker.
    pub cores: usize,
    /// How to reach other workers and the controller.
    pub transport: Arc<dyn Transport>,
    /// Where loads read and stores write.
    pub objects: Option<Arc<Objects>>,
    /// The seccomp allow-list for executor threads, when confined.
    pub confine: Option<Arc<ExecutorFilter>>,
}
