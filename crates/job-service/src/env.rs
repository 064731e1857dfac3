//! What a node gives its job workers ([`WorkerEnv`]).

use crate::threads::JobThreads;
use crate::transport::Transport;
use mote_confine::{ConfinedPool, Relay};
use mote_objects::Objects;
use mote_runtime::JobEngine;
use std::sync::Arc;

/// What a node gives its workers: the engine, its cores, the transport to other nodes, object
/// storage, the executor threads' confinement, the confined threads that run drivers and
/// initializers, and the relay their wake-ups go through.
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
    /// Where guest code that async code asks for runs: a driver, an instance's initializer, a
    /// partition's arrival or restore.
    pub guests: Arc<ConfinedPool>,
    /// How the executor threads' outbox and loads wake the tasks that serve them.
    pub relay: Arc<Relay>,
}
