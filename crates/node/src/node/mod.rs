//! The [`Node`]: one registry of functions and the executors and microtask threads that run
//! their calls, started together ([`Node::start`]) and stopped together when dropped. Its
//! methods are split by what they serve:
//!
//! - `call`: the call path ([`Node::invoke`], [`Node::submit`], [`Node::serve_http`]): lookup,
//!   warm or cold code, then the executors or the microtask threads; [`PendingCall`]; calls
//!   that have not started handed to another node ([`Node::hand_over`]).
//! - `control`: the control path: deploy, remove, follow another node's records, fetch
//!   modules, release from quarantine.
//! - `status`: what the node reports of itself: load ([`NodeLoad`]), records, the schedule,
//!   activity, logs and metrics.

mod call;
mod control;
#[cfg(test)]
mod hand_over_tests;
#[cfg(test)]
mod inline_tests;
mod status;
#[cfg(test)]
mod tests;

pub use call::PendingCall;
pub use control::Followed;
pub use status::NodeLoad;

use crate::config::NodeConfig;
use crate::error::DeployError;
use crate::executor::{Executors, Work};
use crate::ledger::Ledger;
use crate::logs::FunctionLogs;
use crate::metrics::NodeMetrics;
use crate::microtask::Microtasks;
use crate::pending::Pending;
use crate::registry::Registry;
use mote_runtime::{Egress, JobCores, Runtime, RuntimeConfig};
use mote_state::{EmbeddedStore, ModuleBlobs, StateError, StateStore};
use std::path::Path;
use std::sync::Arc;

/// One node: a registry of functions and the executors that run their calls.
pub struct Node {
    registry: Registry,
    /// Calls waiting for an executor, and the functions' run-time histories.
    pending: Arc<Pending<Work>>,
    executors: Executors,
    microtasks: Microtasks,
    /// Where components' outbound requests may go: its ceiling also bounds deploys.
    egress: Arc<Egress>,
    metrics: Arc<NodeMetrics>,
    logs: Arc<FunctionLogs>,
    /// The cores as calls and jobs' tasks take them: every call counts in while in flight.
    job_cores: Arc<JobCores>,
}

fn create_dir(dir: &Path) -> Result<(), StateError> {
    std::fs::create_dir_all(dir).map_err(|source| StateError::Blob {
        path: dir.display().to_string(),
        source,
    })
}

impl Node {
    /// Starts the executors and loads every function recorded in `store`.
    pub async fn start(
        runtime: Arc<Runtime>,
        store: Arc<dyn StateStore>,
        blobs: ModuleBlobs,
        config: impl Into<NodeConfig>,
    ) -> Result<Self, DeployError> {
        let config = config.into();
        let metrics = Arc::new(NodeMetrics::new());
        let logs = Arc::new(FunctionLogs::new(config.function_log_bytes));
        let registry = Registry::new(
            runtime.clone(),
            store,
            blobs,
            metrics.clone(),
            config.resident_mb.saturating_mul(1 << 20),
            config.executors.quarantine_after,
            logs.clone(),
        );
        registry.load_all().await?;
        let pending = Arc::new(Pending::new(
            config.executors.policy,
            config.executors.fc_window,
            config.executors.max_queue,
            metrics.queue_length.clone(),
            config.executors.preemption().map(|p| p.aging),
        ));
        let ledger = Arc::new(Ledger::new(pending.clone()));
        let egress = Arc::new(Egress::new(config.outbound_ceiling));
        let job_cores = Arc::new(JobCores::new(config.executors.cores, config.job_share));
        let microtasks = Microtasks::start(
            runtime.clone(),
            ledger.clone(),
            &config.executors,
            config.microtasks,
            egress.clone(),
        )?;
        let executors = Executors::start(
            runtime,
            metrics.clone(),
            pending.clone(),
            ledger,
            config.executors,
        )?;
        Ok(Self {
            registry,
            pending,
            executors,
            microtasks,
            egress,
            metrics,
            logs,
            job_cores,
        })
    }

    /// Starts a single-machine node whose state (records, module blobs, compiled artefacts) lives
    /// under `data`, its records in an in-process redb file: a node without a store server.
    pub async fn start_embedded(
        data: &Path,
        config: impl Into<NodeConfig>,
    ) -> Result<Self, DeployError> {
        create_dir(data)?;
        let store = EmbeddedStore::open(&data.join("state.redb"))?;
        Self::start_on(data, Arc::new(store), config).await
    }

    /// Starts a node whose function records live in `store` and whose module blobs and
    /// compiled artefacts live under `data`.
    pub async fn start_on(
        data: &Path,
        store: Arc<dyn StateStore>,
        config: impl Into<NodeConfig>,
    ) -> Result<Self, DeployError> {
        let config = config.into();
        create_dir(data)?;
        let threads = Executors::threads_for(&config.executors);
        let mut runtime_config = match config.executors.preemption() {
            // Slots for the calls running on the cores, as without preemption, and one more
            // for each call that may be suspended.
            Some(preempt) => {
                let mut c = RuntimeConfig::new(data.join("artifacts"), config.executors.cores);
                let suspended = u32::try_from(preempt.max_suspended).unwrap_or(u32::MAX);
                c.instance_slots = c.instance_slots.saturating_add(suspended);
                c
            }
            None => RuntimeConfig::new(data.join("artifacts"), threads),
        };
        // Every call that declares phases holds an instance while it is alive.
        runtime_config.microtask_slots =
            u32::try_from(config.microtasks.max_alive).unwrap_or(u32::MAX);
        // Requests to components share those slots' bound (`MicrotaskConfig::max_alive`).
        runtime_config.proxy_slots = runtime_config.microtask_slots;
        let runtime = Runtime::new(runtime_config)?;
        let blobs = ModuleBlobs::open(&data.join("modules"))?;
        Self::start(Arc::new(runtime), store, blobs, config).await
    }
}
