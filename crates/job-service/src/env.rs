//! What a node gives its job workers ([`WorkerEnv`]).

use crate::threads::JobThreads;
use crate::transport::Transport;
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
