//! The [`Node`]: one registry of functions and the executors and microtask threads that run
//! their calls, started together ([`Node::start`]) and stopped together when dropped. Its
//! methods are split by what they serve:
//!
//! - `call`: the call path ([`Node::invoke_here`] and [`Node::serve_http`] for a [`Reader`],
//!   [`Node::invoke`] and [`Node::submit`] for any other caller): lookup, warm or cold code,
//!   then the reader's own thread, the executors or the microtask threads; [`PendingCall`];
//!   calls that have not started handed to another node ([`Node::hand_over`]).
//! - `control`: the control path: deploy, remove, follow another node's records, fetch
//!   modules, release from quarantine.
//! - `status`: what the node reports of itself: load ([`NodeLoad`]), records, the schedule,
//!   activity, logs and metrics.

mod call;
#[cfg(test)]
mod caller_tests;
mod control;
#[cfg(test)]
mod hand_over_tests;
#[cfg(test)]
mod reader_tests;
mod status;
#[cfg(test)]
mod tests;

pub use call::PendingCall;
pub use control::Followed;
pub use status::NodeLoad;

use crate::component::Components;
use crate::config::NodeConfig;
use crate::cores::{Cores, Seat, Work};
use crate::error::DeployError;
use crate::executor::Executors;
use crate::ledger::Ledger;
use crate::logs::FunctionLogs;
use crate::metrics::NodeMetrics;
use crate::microtask::Microtasks;
use crate::pending::Pending;
use crate::registry::Registry;
use crate::run::Runner;
use mote_confine::{Relay, Role};
use mote_runtime::{Egress, JobCores, Runtime, RuntimeConfig};
use mote_state::{EmbeddedStore, ModuleBlobs, StateError, StateStore};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

/// One node: a registry of functions, its cores, and the threads that run calls on them.
pub struct Node {
    registry: Registry,
    /// The cores, and the work waiting for them with the functions' run-time histories.
    cores: Arc<Cores>,
    runner: Arc<Runner>,
    executors: Executors,
    microtasks: Microtasks,
    /// Where components' outbound requests may go: its ceiling also bounds deploys.
    egress: Arc<Egress>,
    metrics: Arc<NodeMetrics>,
    logs: Arc<FunctionLogs>,
    /// The cores as calls and jobs' tasks take them: every call counts in while in flight.
    job_cores: Arc<JobCores>,
    /// Wakes and spawns for the confined threads.
    relay: Arc<Relay>,
    /// The runtime the node was started on: cold loads and components' outbound requests run
    /// there.
    io: tokio::runtime::Handle,
    /// What requests to components are served with.
    components: Arc<Components>,
}

/// A thread that reads requests and may run their calls where it read them: made by
/// [`Node::reader`] on a thread confined as a reader (or waived, `--seccomp off`), used for
/// the requests it reads. At most one call runs on it at a time (others go to the executors).
#[derive(Debug, Default)]
pub struct Reader {
    busy: AtomicBool,
}

impl Reader {
    /// The reader's turn to run a call, if no call of its own runs now.
    fn take_turn(&self) -> Option<Turn<'_>> {
        (!self.busy.swap(true, Ordering::Acquire)).then_some(Turn(self))
    }
}

/// A call running on a reader; the reader is free again when it drops.
struct Turn<'a>(&'a Reader);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        self.0.busy.store(false, Ordering::Release);
    }
}

/// A thread confined to run guest code that runs the calls it makes itself when a core is free
/// and nothing waits ([`Node::invoke_on`]), as a reader does with the calls it reads: made by
/// [`Node::caller`], used by that thread only. Its seat is where the thread parks while a call
/// of its own is suspended (preempted), until a core is handed back to it.
pub struct Caller {
    seat: Arc<Seat>,
}

/// A thread asked to run calls itself without being confined to run guest code.
#[derive(Debug, thiserror::Error)]
#[error(
    "this thread is not confined to run guest code, so it may not run calls itself; confine it with mote_confine::Filter::new(Role::Guest), or queue its calls with Node::submit"
)]
pub struct NotConfined;

/// A thread asked to be a reader without being confined as one.
#[derive(Debug, thiserror::Error)]
#[error(
    "this thread is not confined as a reader, so it may not run calls; confine it with mote_confine::Filter::new(Role::Reader)"
)]
pub struct NotAReader;

fn create_dir(dir: &Path) -> Result<(), StateError> {
    std::fs::create_dir_all(dir).map_err(|source| StateError::Blob {
        path: dir.display().to_string(),
        source,
    })
}

impl Node {
    /// The calling thread's standing as a reader: it must be confined as one.
    pub fn reader(&self) -> Result<Reader, NotAReader> {
        match mote_confine::role() {
            Some(Role::Reader) => Ok(Reader::default()),
            _ => Err(NotAReader),
        }
    }

    /// The calling thread's standing as a caller that runs its calls itself: it must be
    /// confined to run guest code ([`Role::Guest`], or waived: `--seccomp off`).
    pub fn caller(&self) -> Result<Caller, NotConfined> {
        match mote_confine::role() {
            Some(Role::Guest) => Ok(Caller {
                seat: Arc::new(Seat::new(self.executors.spin())),
            }),
            _ => Err(NotConfined),
        }
    }

    /// Whether the threads that run guest code are confined (else the operator turned
    /// confinement off, `mote up --seccomp off`): readers are confined by a filter of their
    /// own ([`mote_confine::Filter::reader`]), made once their runtime is.
    pub fn confines(&self) -> bool {
        self.executors.confines()
    }

    /// The relay through which the node's confined threads wake tasks and reach the I/O
    /// runtime.
    pub fn relay(&self) -> &Arc<Relay> {
        &self.relay
    }

    /// Starts the executors and loads every function recorded in `store`. The runtime it is
    /// called on is the node's I/O runtime (cold loads, outbound requests).
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
        let relay = Arc::new(
            Relay::start("mote-relay")
                .map_err(|e| DeployError::Internal(format!("cannot start the relay: {e}")))?,
        );
        let io = tokio::runtime::Handle::current();
        let executors_config = &config.executors;
        let preempt = executors_config.preemption();
        let pending: Arc<Pending<Work>> = Arc::new(Pending::new(
            executors_config.policy,
            executors_config.fc_window,
            executors_config.max_queue,
            metrics.queue_length.clone(),
            preempt.map(|p| p.aging),
        ));
        let ledger = Arc::new(Ledger::new(pending.clone()));
        let egress = Arc::new(Egress::new(config.outbound_ceiling));
        let job_cores = Arc::new(JobCores::new(executors_config.cores, config.job_share));
        metrics
            .executors
            .set(Executors::threads_for(executors_config) as i64);
        metrics.set_policy(executors_config.policy);
        let cores = Arc::new(Cores::new(
            executors_config.slots(),
            preempt.map_or(0, |p| p.max_suspended),
            pending,
            job_cores.clone(),
            relay.clone(),
            metrics.clone(),
        ));
        let runner = Arc::new(Runner::new(
            runtime,
            ledger,
            metrics.clone(),
            cores.clone(),
            preempt,
        ));
        let slots = Arc::new(tokio::sync::Semaphore::new(config.microtasks.max_alive));
        let microtasks = Microtasks::start(
            runner.clone(),
            executors_config,
            config.microtasks,
            egress.clone(),
            relay.clone(),
        )?;
        let components = Arc::new(Components {
            cores: cores.clone(),
            runner: runner.clone(),
            relay: relay.clone(),
            job_cores: job_cores.clone(),
            slots,
            host: microtasks.host_io().clone(),
        });
        let executors = Executors::start(runner.clone(), cores.clone(), config.executors)?;
        Ok(Self {
            registry,
            cores,
            runner,
            executors,
            microtasks,
            egress,
            metrics,
            logs,
            job_cores,
            relay,
            io,
            components,
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
        // Slots for the calls running on the cores, and one more for each call that may be
        // suspended.
        let executors = &config.executors;
        let mut runtime_config = RuntimeConfig::new(data.join("artifacts"), executors.slots());
        let suspended = executors.preemption().map_or(0, |p| p.max_suspended);
        runtime_config.instance_slots = runtime_config
            .instance_slots
            .saturating_add(u32::try_from(suspended).unwrap_or(u32::MAX));
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
