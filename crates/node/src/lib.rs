//! A mote node: takes calls for deployed functions and runs each on one of its executor cores.
//!
//! The call path is [`Node::invoke`] (or [`Node::submit`] for a caller that may block) →
//! [`Registry`] lookup (lock-free) → the function's resident code, or a cold load on a thread
//! that may block → [`Executors`] (the policy queue) → an executor thread →
//! [`mote_runtime::Runtime::call_then`] → the `ledger` settles the call → reply over a oneshot
//! channel, sent before the instance is torn down. The control path is
//! `Node::deploy`/`Node::remove` → compile and check → write (module blob, compiled artefact) →
//! commit the record → publish to the registry.
//!
//! - [`Executors`]: one thread per core, at most one running call each (no oversubscription),
//!   fed from the waiting calls of `pending` (lock-free under arrival order, a
//!   [`mote_sched::CallQueue`] heap under the ranking policies, which also keeps each
//!   function's run-time history). Under `--preempt on` its `preempt` module suspends a call
//!   that a better-ranked one outranks after its quantum, parking its thread, and passes the
//!   cores between threads.
//! - [`Microtasks`]: calls of functions that declare phases (`docs/abi.md`) skip the executors:
//!   they run as futures on their own per-core threads, admitted per share class by the
//!   `microtask` module's gate (the microtask paper), or task-based under `--microtasks off`.
//! - `ledger`: where every call that ran is settled, whichever path ran it: its outcome,
//!   duration, quarantine and run-time history, and its [`Reply`].
//! - [`Registry`]: deployed functions ([`Deployed`]), backed by a [`mote_state::StateStore`] so
//!   they survive restarts; each holds its `resident` slot (within a memory budget their code
//!   stays resident, the least recently called are evicted past it, cold starts map the
//!   checked artefact, one load per function at a time) and its `quarantine`.
//! - `activity`: what the dashboard reads of recent calls (response-time histograms and
//!   stretch per function, calls and busy time per executor), relaxed atomics on the call path.
//! - `logs`: each function's [`LogRing`] ([`FunctionLogs`]), bounded in bytes: the lines its
//!   calls wrote and why failing calls failed, each under its call's [`CallId`], written by the
//!   ledger when the call settles, read and followed by the gateway.
//! - `schedule`: what `GET /v1/node` shows ([`ScheduleSnapshot`]); [`NodeMetrics`]: the
//!   Prometheus metrics; [`confine`]: the seccomp allow-list executor threads run under.
//!
//! Modules depend one way: `activity`, `metrics`, `logs`, `quarantine`, `resident`, `pending`,
//! `confine` <-
//! `registry` <- `ledger` <- `executor` <- `microtask` <- `schedule` <- the [`Node`] here.

mod activity;
pub mod confine;
mod error;
mod executor;
#[cfg(test)]
mod fixtures;
mod ledger;
mod logs;
mod metrics;
mod microtask;
mod pending;
mod quarantine;
mod registry;
mod resident;
mod schedule;

pub use activity::{BUCKETS, CallStats, ExecutorSample, LatencyCounts};
pub use error::{DeployError, InvokeError};
pub use executor::{Executors, ExecutorsConfig, PreemptConfig};
pub use ledger::Reply;
pub use logs::{
    CallId, DEFAULT_FUNCTION_LOG_BYTES, ENTRY_BYTES, EntryStream, FunctionLogs, LogEntry,
    LogFollower, LogRing,
};
pub use metrics::{NodeMetrics, Outcome};
pub use microtask::{ClassSnapshot, MicrotaskConfig, MicrotaskMode, Microtasks};
pub use registry::{Deployed, RECORD_PREFIX, Registry};
pub use resident::ModuleSource;
pub use schedule::{FunctionSchedule, PreemptSnapshot, ScheduleSnapshot};

use bytes::Bytes;
use executor::Work;
use ledger::Ledger;
use mote_runtime::{CallError, Egress, Function, ProxyResponse, Runtime, RuntimeConfig};
use mote_state::{EmbeddedStore, ModuleBlobs, StateError, StateStore};
use mote_types::{DeployOptions, FunctionName, FunctionRecord, GuestKind, Limits, OutboundCeiling};
use pending::Pending;
use resident::Code;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::oneshot::{self, error::TryRecvError};

/// How a node is set up.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// The executors and their queue.
    pub executors: ExecutorsConfig,
    /// The most compiled code kept resident, in MiB; past it the least recently called
    /// functions are evicted and their next call is a cold start.
    pub resident_mb: u64,
    /// How calls of functions that declare phases are scheduled, and their object storage.
    pub microtasks: MicrotaskConfig,
    /// The most bytes each function's log keeps; past it the oldest entries go.
    pub function_log_bytes: usize,
    /// The most any function's outbound requests may reach (`--outbound-ceiling`): deploys
    /// that grant more are refused, and every connection is checked against it.
    pub outbound_ceiling: OutboundCeiling,
}

impl NodeConfig {
    /// The default resident budget.
    pub const DEFAULT_RESIDENT_MB: u64 = 1024;
}

impl From<ExecutorsConfig> for NodeConfig {
    fn from(executors: ExecutorsConfig) -> Self {
        Self {
            executors,
            resident_mb: Self::DEFAULT_RESIDENT_MB,
            microtasks: MicrotaskConfig::default(),
            function_log_bytes: DEFAULT_FUNCTION_LOG_BYTES,
            outbound_ceiling: OutboundCeiling::default(),
        }
    }
}

/// What [`Node::follow`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Followed {
    /// The node already had what the store holds.
    Unchanged,
    /// The store's record is now the node's.
    Adopted,
    /// The record is gone from the store, so the function is gone from the node.
    Removed,
}

/// How busy a node is, as it reports itself to its peers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
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
}

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
}

/// A call that has been queued; [`PendingCall::wait`] or `.await` gives its reply.
#[derive(Debug)]
pub struct PendingCall {
    reply: oneshot::Receiver<Reply>,
    cold_start: Option<Duration>,
    /// Code this call's cold start evicted: unmapped when the call is done, not while it starts.
    evicted: Vec<Arc<Function>>,
}

impl PendingCall {
    /// Waits for the reply on this thread, for a synchronous caller that owns a core (a
    /// benchmark, a dispatcher thread): polls for up to `spin`, then blocks. Polling saves the
    /// futex wake-up that dominates a microsecond call.
    pub fn wait(self, spin: Duration) -> Result<Reply, InvokeError> {
        let Self {
            mut reply,
            cold_start,
            evicted: _evicted,
        } = self;
        let until = Instant::now() + spin;
        let reply = loop {
            match reply.try_recv() {
                Ok(reply) => break reply,
                Err(TryRecvError::Closed) => return Err(dropped()),
                Err(TryRecvError::Empty) if Instant::now() < until => std::hint::spin_loop(),
                Err(TryRecvError::Empty) => break reply.blocking_recv().map_err(|_| dropped())?,
            }
        };
        Ok(Self::complete(cold_start, reply))
    }

    /// The executor's reply with what only the submitting side knows: the cold start.
    fn complete(cold_start: Option<Duration>, reply: Reply) -> Reply {
        Reply {
            cold_start,
            ..reply
        }
    }
}

impl std::future::Future for PendingCall {
    type Output = Result<Reply, InvokeError>;

    fn poll(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Self::Output> {
        let cold_start = self.cold_start;
        std::pin::Pin::new(&mut self.reply).poll(cx).map(|r| {
            r.map(|reply| Self::complete(cold_start, reply))
                .map_err(|_| dropped())
        })
    }
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

    /// Runs `name` with `input` as the request body and returns the response body.
    pub async fn invoke(&self, name: &str, input: Bytes) -> Result<Vec<u8>, InvokeError> {
        self.invoke_traced(name, input).await?.result
    }

    /// Like [`Node::invoke`], and also says how long the call waited and ran. If the function is
    /// not resident its code is loaded first on the blocking pool of the async runtime this is
    /// polled on (a cold start), never on the caller's own thread.
    pub async fn invoke_traced(&self, name: &str, input: Bytes) -> Result<Reply, InvokeError> {
        let arrival = Instant::now();
        let function = self.lookup(name)?;
        let code = match self.registry.warm(&function, arrival) {
            Some(code) => Code {
                function: code,
                cold_start: None,
            },
            None => self.registry.load_aside(&function, arrival).await?,
        };
        self.queue(function, code, input, arrival)?.await
    }

    /// Serves `request` with `name`, a `wasi:http` component: resolves to the response as soon
    /// as the guest sets it (its body streams while the guest runs) or to why there is none. A
    /// component that is not resident is loaded first on the blocking pool (a cold start).
    pub async fn serve_http<B>(
        &self,
        name: &str,
        request: http::Request<B>,
    ) -> Result<ProxyResponse, InvokeError>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let arrival = Instant::now();
        let function = self.lookup(name)?;
        let code = match self.registry.warm(&function, arrival) {
            Some(code) => code,
            None => {
                let code = self.registry.load_aside(&function, arrival).await?.function;
                drop(self.registry.sweep(&function));
                code
            }
        };
        if !code.is_proxy() {
            return Err(InvokeError::Call(CallError::NotProxy));
        }
        let reply = self
            .microtasks
            .submit_http(function, code, request, arrival)?;
        reply.await.map_err(|_| InvokeError::ShuttingDown)?
    }

    /// The kind of the function deployed as `name`, if there is one; a lookup without locks.
    pub fn kind(&self, name: &str) -> Option<GuestKind> {
        self.registry.kind(name)
    }

    /// Whether `name` is deployed and may be called without a token; a lookup without locks.
    pub fn is_public(&self, name: &str) -> bool {
        self.registry.is_public(name)
    }

    /// The component mounted on the most specific route that serves `path`, if any.
    pub fn route(&self, path: &str) -> Option<Arc<Deployed>> {
        self.registry.route(path)
    }

    /// Queues a call of `name` with `input` as the request body, for a caller that may block:
    /// if the function is not resident its code is loaded first, on this thread (a cold start;
    /// a compile if its artefact is gone). Async callers use [`Node::invoke`].
    pub fn submit(&self, name: &str, input: Bytes) -> Result<PendingCall, InvokeError> {
        let arrival = Instant::now();
        let function = self.lookup(name)?;
        let code = match self.registry.warm(&function, arrival) {
            Some(code) => Code {
                function: code,
                cold_start: None,
            },
            None => self.registry.load_here(&function, arrival)?,
        };
        self.queue(function, code, input, arrival)
    }

    #[inline]
    fn lookup(&self, name: &str) -> Result<Arc<Deployed>, InvokeError> {
        self.registry
            .get(name)
            .ok_or_else(|| InvokeError::NotFound(name.to_owned()))
    }

    /// Hands a call of `function` running `code` to the path its kind takes.
    #[inline]
    fn queue(
        &self,
        function: Arc<Deployed>,
        code: Code,
        input: Bytes,
        arrival: Instant,
    ) -> Result<PendingCall, InvokeError> {
        // Only a cold load can push the resident set over budget; a warm call skips the clone.
        let loaded = code.cold_start.is_some().then(|| function.clone());
        let reply = match code.function.is_microtask() {
            true => self
                .microtasks
                .submit(function, code.function, input, arrival)?,
            false => self
                .executors
                .submit(function, code.function, input, arrival)?,
        };
        let evicted = match loaded {
            Some(loaded) => self.registry.sweep(&loaded),
            None => Vec::new(),
        };
        Ok(PendingCall {
            reply,
            cold_start: code.cold_start,
            evicted,
        })
    }

    /// Runs a call for a synchronous caller: [`Node::submit`], then [`PendingCall::wait`].
    pub fn invoke_blocking(
        &self,
        name: &str,
        input: Bytes,
        spin: Duration,
    ) -> Result<Reply, InvokeError> {
        self.submit(name, input)?.wait(spin)
    }

    /// Deploys (or replaces) `name` with the module `wasm`.
    pub async fn deploy(
        &self,
        name: FunctionName,
        wasm: Bytes,
        limits: Limits,
    ) -> Result<FunctionRecord, DeployError> {
        self.deploy_with(name, wasm, limits, DeployOptions::default())
            .await
    }

    /// Deploys (or replaces) `name` with `wasm`; a `wasi:http` component may be mounted on a
    /// route and allowed outbound hosts with `options.http` (within the node's outbound
    /// ceiling, and `*`, addresses and ranges only if `options.grantor` is an admin);
    /// `options.public` lets anyone call it.
    pub async fn deploy_with(
        &self,
        name: FunctionName,
        wasm: Bytes,
        limits: Limits,
        options: DeployOptions,
    ) -> Result<FunctionRecord, DeployError> {
        let ceiling = self.egress.ceiling();
        let (record, replaced) = self
            .registry
            .deploy(name, wasm, limits, options, ceiling)
            .await?;
        if let Some(old) = replaced {
            self.forget(&old);
        }
        Ok(record)
    }

    /// Removes `name`; calls already queued for it still run.
    pub async fn remove(&self, name: &str) -> Result<FunctionRecord, DeployError> {
        let removed = self.registry.remove(name).await?;
        self.forget(&removed);
        self.logs.remove(name);
        Ok(removed.record().clone())
    }

    /// Drops what the schedulers learned of a function that was replaced or removed.
    fn forget(&self, function: &Deployed) {
        self.pending.forget(function.key());
        self.microtasks.forget(function.key());
    }

    /// Brings `name` in line with its record in the state store, which another node of the
    /// cluster may have written or deleted: a new or newer record is adopted (and its code
    /// loaded now, fetched from a peer if needed, when the resident set has room, so that its
    /// first call here is warm), a deleted one is removed. Says what changed.
    pub async fn follow(&self, name: &str) -> Result<Followed, DeployError> {
        Ok(match self.registry.follow(name).await? {
            registry::Followed::Unchanged => Followed::Unchanged,
            registry::Followed::Removed(removed) => {
                self.forget(&removed);
                self.logs.remove(name);
                Followed::Removed
            }
            registry::Followed::Adopted { adopted, replaced } => {
                if let Some(old) = replaced {
                    self.forget(&old);
                }
                if self.registry.has_room()
                    && let Err(e) = self.registry.load_aside(&adopted, Instant::now()).await
                {
                    tracing::warn!(function = name, error = %e, "cannot load an adopted function yet; its first call tries again");
                }
                Followed::Adopted
            }
        })
    }

    /// Fetches the modules of adopted records that this node does not hold from `source`.
    pub fn fetch_modules_from(&self, source: Arc<dyn ModuleSource>) {
        self.registry.fetch_from(source);
    }

    /// The bytes of the module with this sha256, if this node holds them (for peers that
    /// adopted a record and need its module).
    pub fn module(&self, sha256: &str) -> Option<Vec<u8>> {
        self.registry.module(sha256)
    }

    /// The bytes of the module with this sha256: this node's copy, or else fetched from its
    /// module source (its peers, then object storage; `Node::fetch_modules_from`) and checked
    /// against the hash, as a cold load does. Blocks while it fetches.
    pub fn module_or_fetch(&self, sha256: &str) -> Result<Vec<u8>, String> {
        let bytes = self
            .registry
            .module_or_fetch(sha256)
            .map_err(|e| format!("module {sha256}: {e}"))?;
        let found = mote_runtime::ArtifactCache::digest(&bytes);
        if found != sha256 {
            return Err(format!(
                "module {sha256} was fetched, but its bytes hash to {found}"
            ));
        }
        Ok(bytes)
    }

    /// Calls waiting for an executor core (a lock-free read, for callers on the call path).
    pub fn queued(&self) -> usize {
        self.pending.len()
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

    /// Lets calls of a quarantined function in again; says whether it was quarantined.
    pub fn release(&self, name: &str) -> Result<bool, DeployError> {
        let function = self
            .registry
            .get(name)
            .ok_or_else(|| DeployError::NotFound(name.to_owned()))?;
        let released = function.quarantine().release();
        if released {
            tracing::info!(function = name, "released from quarantine");
        }
        Ok(released)
    }

    /// Whether `name` is quarantined, and after how many budget kills in a row.
    pub fn quarantined(&self, name: &str) -> Option<u32> {
        self.registry.get(name)?.quarantined()
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
            preempt: self.executors.preemption().map(|p| PreemptSnapshot {
                quantum_us: p.quantum.as_micros() as u64,
                max_suspended: p.max_suspended,
                suspended: self.executors.suspended(),
                preemptions: self.metrics.preemptions.get(),
                refused_at_bound: self.metrics.preemptions_refused.get(),
            }),
            pending: &self.pending,
            microtasks: &self.microtasks,
            functions: &self.registry.functions(),
        })
    }

    /// Every deployed function, by name, with its call counters.
    pub fn functions(&self) -> Vec<Arc<Deployed>> {
        self.registry.functions()
    }

    /// What each executor thread has run so far.
    pub fn executors_activity(&self) -> Vec<ExecutorSample> {
        self.executors.activity()
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

    /// Executors running a call or tearing its instance down; a dispatcher that sends work
    /// only to free cores waits for this to fall below [`Node::cores`].
    pub fn busy_executors(&self) -> usize {
        usize::try_from(self.metrics.busy_executors.get()).unwrap_or(0)
    }
}

fn dropped() -> InvokeError {
    InvokeError::Internal("the executor dropped the call".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mote_sched::SplitMode;
    use mote_state::EmbeddedStore;

    /// Busy-loops long enough to keep an executor occupied while the test queues more calls.
    const SLOW: &str = r#"(module (memory (export "memory") 1)
        (func (export "mote_alloc") (param i32) (result i32) i32.const 0)
        (func (export "mote_handle") (param i32 i32) (result i64) (local $i i32)
          (local.set $i (i32.const 300000000))
          (loop $l (local.set $i (i32.sub (local.get $i) (i32.const 1))) (br_if $l (local.get $i)))
          i64.const 0))"#;

    async fn node(dir: &std::path::Path, config: impl Into<NodeConfig>) -> Node {
        let node = Node::start_embedded(dir, config).await.unwrap();
        deploy(&node, "slow", SLOW).await;
        node
    }

    /// Deploys the module written in `wat` as `name`, with default limits.
    async fn deploy(node: &Node, name: &str, wat: &str) {
        let wasm = Bytes::from(wat::parse_str(wat).unwrap());
        node.deploy(FunctionName::new(name).unwrap(), wasm, Limits::default())
            .await
            .unwrap();
    }

    /// A node of one executor with no resident budget: only the function loaded last stays
    /// resident.
    fn no_resident_budget() -> NodeConfig {
        NodeConfig {
            resident_mb: 0,
            ..ExecutorsConfig::new(1).into()
        }
    }

    fn wait_until_busy(node: &Node) {
        while node.metrics.busy_executors.get() == 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Declares a light phase, then waits 200 ms on a timer, or traps if the body is not empty.
    const SLEEPER: &str = r#"(module
        (import "mote" "phase" (func $phase (param i32)))
        (import "mote" "sleep_us" (func $sleep (param i64)))
        (memory (export "memory") 1)
        (func (export "mote_alloc") (param i32) (result i32) i32.const 0)
        (func (export "mote_handle") (param i32 i32) (result i64)
          (call $phase (i32.const 100))
          (if (local.get 1) (then unreachable))
          (call $sleep (i64.const 200000))
          i64.const 0))"#;

    /// How long 4 calls of `SLEEPER` take on one core under `mode`.
    async fn four_sleepers(mode: MicrotaskMode) -> Duration {
        let dir = tempfile::tempdir().unwrap();
        let mut config = NodeConfig::from(ExecutorsConfig::new(1));
        config.microtasks.mode = mode;
        let node = Node::start_embedded(dir.path(), config).await.unwrap();
        deploy(&node, "sleeper", SLEEPER).await;
        let started = Instant::now();
        let calls: Vec<_> = (0..4)
            .map(|_| node.submit("sleeper", Bytes::new()).unwrap())
            .collect();
        for call in calls {
            call.await.unwrap().result.unwrap();
        }
        started.elapsed()
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn calls_waiting_on_a_timer_hold_no_core_unless_task_based() {
        let task_based = four_sleepers(MicrotaskMode::Off).await;
        assert!(
            task_based >= Duration::from_millis(800),
            "one core, each call holds it for 200 ms: {task_based:?}"
        );
        let microtasks = four_sleepers(MicrotaskMode::On(SplitMode::Dynamic)).await;
        assert!(
            microtasks < Duration::from_millis(700),
            "the four waits overlap: {microtasks:?}"
        );
    }

    /// The nice value of every thread of this process named `name`.
    fn nice_of_threads(name: &str) -> Vec<i64> {
        let mut nice = Vec::new();
        for task in std::fs::read_dir("/proc/self/task").unwrap() {
            let task = task.unwrap().path();
            // A thread that ended since the listing has no files left: skip it.
            let (Ok(comm), Ok(stat)) = (
                std::fs::read_to_string(task.join("comm")),
                std::fs::read_to_string(task.join("stat")),
            ) else {
                continue;
            };
            if comm.trim_end() == name {
                // Field 19 of stat is nice; the fields after the `)` ending the name start at 3.
                let after_name = &stat[stat.rfind(')').unwrap() + 1..];
                nice.push(
                    after_name
                        .split_whitespace()
                        .nth(16)
                        .unwrap()
                        .parse()
                        .unwrap(),
                );
            }
        }
        nice
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn object_io_runs_below_the_threads_that_run_guests() {
        let dir = tempfile::tempdir().unwrap();
        let _node = Node::start_embedded(dir.path(), ExecutorsConfig::new(1))
            .await
            .unwrap();
        // The threads set their priority as they start, which may be just after the node did.
        let deadline = Instant::now() + Duration::from_secs(5);
        let io = loop {
            let io = nice_of_threads("mote-object-io");
            if (!io.is_empty() && io.iter().all(|&n| n == 10)) || Instant::now() > deadline {
                break io;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        assert!(
            !io.is_empty() && io.iter().all(|&n| n == 10),
            "object I/O threads: {io:?}"
        );
        let guests = nice_of_threads("mote-microtask");
        assert!(
            !guests.is_empty() && guests.iter().all(|&n| n == 0),
            "guest threads: {guests:?}"
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_call_that_fails_mid_phase_gives_its_share_back() {
        let dir = tempfile::tempdir().unwrap();
        let node = Node::start_embedded(dir.path(), ExecutorsConfig::new(1))
            .await
            .unwrap();
        deploy(&node, "sleeper", SLEEPER).await;
        for _ in 0..3 {
            let err = node
                .invoke("sleeper", Bytes::from_static(b"trap"))
                .await
                .unwrap_err()
                .to_string();
            assert!(err.contains("unreachable"), "{err}");
        }
        let schedule = node.schedule();
        assert_eq!(schedule.microtasks, "on");
        assert!(
            schedule
                .classes
                .iter()
                .all(|c| c.running == 0 && c.waiting == 0),
            "{:?}",
            schedule.classes
        );
        // With nothing running, the whole-core class has every core again.
        assert_eq!(schedule.classes[0].cores, 1);
        node.invoke("sleeper", Bytes::new()).await.unwrap();
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_full_queue_refuses_calls_with_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let config = ExecutorsConfig {
            max_queue: 2,
            ..ExecutorsConfig::new(1)
        };
        let node = node(dir.path(), config).await;
        let running = node.submit("slow", Bytes::new()).unwrap();
        wait_until_busy(&node);
        let queued: Vec<_> = (0..2)
            .map(|_| node.submit("slow", Bytes::new()).unwrap())
            .collect();
        let err = node.submit("slow", Bytes::new()).unwrap_err();
        assert!(
            matches!(
                err,
                InvokeError::QueueFull {
                    waiting: 2,
                    limit: 2
                }
            ),
            "{err}"
        );
        assert!(err.to_string().contains("retry later"));
        let metrics = node.metrics.encode();
        assert!(
            metrics.contains(r#"mote_invocations_total{function="slow",outcome="rejected"} 1"#),
            "{metrics}"
        );
        running.await.unwrap().result.unwrap();
        for reply in queued {
            reply.await.unwrap().result.unwrap();
        }
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn calls_whose_caller_left_are_not_run() {
        let dir = tempfile::tempdir().unwrap();
        let node = node(dir.path(), ExecutorsConfig::new(1)).await;
        let running = node.submit("slow", Bytes::new()).unwrap();
        wait_until_busy(&node);
        drop(node.submit("slow", Bytes::new()).unwrap());
        running.await.unwrap().result.unwrap();
        // The abandoned call is dropped as soon as the executor reaches it.
        let finished = node.submit("slow", Bytes::new()).unwrap();
        finished.await.unwrap().result.unwrap();
        let metrics = node.metrics.encode();
        assert!(
            metrics.contains(r#"mote_invocations_total{function="slow",outcome="cancelled"} 1"#),
            "{metrics}"
        );
        assert!(metrics.contains(r#"mote_invocations_total{function="slow",outcome="ok"} 2"#));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn shutdown_finishes_running_calls_and_answers_queued_ones() {
        let dir = tempfile::tempdir().unwrap();
        let node = node(dir.path(), ExecutorsConfig::new(1)).await;
        let running = node.submit("slow", Bytes::new()).unwrap();
        wait_until_busy(&node);
        let queued = node.submit("slow", Bytes::new()).unwrap();
        tokio::task::spawn_blocking(move || drop(node))
            .await
            .unwrap();
        running.await.unwrap().result.unwrap();
        assert!(matches!(
            queued.await.unwrap().result,
            Err(InvokeError::ShuttingDown)
        ));
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_rejected_redeploy_keeps_the_running_function() {
        let dir = tempfile::tempdir().unwrap();
        let node = node(dir.path(), ExecutorsConfig::new(1)).await;
        let before = node.get("slow").unwrap();
        let err = node
            .deploy(
                FunctionName::new("slow").unwrap(),
                Bytes::from_static(b"junk"),
                Limits::default(),
            )
            .await
            .unwrap_err();
        assert!(matches!(err, DeployError::Compile(_)), "{err}");
        assert_eq!(node.get("slow").unwrap(), before);
        assert!(node.invoke("slow", Bytes::new()).await.is_ok());
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_corrupt_record_is_skipped_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        drop(node(dir.path(), ExecutorsConfig::new(1)).await);
        let path = dir.path().join("state.redb");
        {
            let store = EmbeddedStore::open(&path).unwrap();
            store
                .put("/mote/functions/broken", b"{not json".to_vec())
                .await
                .unwrap();
        }
        let node = node(dir.path(), ExecutorsConfig::new(1)).await;
        let names: Vec<_> = node
            .list()
            .into_iter()
            .map(|r| r.name.to_string())
            .collect();
        assert_eq!(names, ["slow"]);
        drop(node);
        let store = EmbeddedStore::open(&path).unwrap();
        assert!(store.get("/mote/functions/broken").await.unwrap().is_some());
    }

    const FAST: &str = r#"(module (memory (export "memory") 1)
        (func (export "mote_alloc") (param i32) (result i32) i32.const 0)
        (func (export "mote_handle") (param i32 i32) (result i64) i64.const 0))"#;

    #[tokio::test(flavor = "multi_thread")]
    async fn sept_runs_the_short_function_ahead_of_queued_long_calls() {
        let dir = tempfile::tempdir().unwrap();
        let config = ExecutorsConfig {
            policy: mote_sched::Policy::Sept,
            ..ExecutorsConfig::new(1)
        };
        let node = node(dir.path(), config).await;
        deploy(&node, "fast", FAST).await;
        // Teach the node both functions' processing times.
        node.invoke("slow", Bytes::new()).await.unwrap();
        node.invoke("fast", Bytes::new()).await.unwrap();

        let running = node.submit("slow", Bytes::new()).unwrap();
        wait_until_busy(&node);
        let queued_slow = node.submit("slow", Bytes::new()).unwrap();
        let queued_fast = node.submit("fast", Bytes::new()).unwrap();
        running.await.unwrap().result.unwrap();
        let fast = queued_fast.await.unwrap();
        let slow = queued_slow.await.unwrap();
        // The fast call started before the long call queued ahead of it.
        assert!(fast.queued < slow.queued, "the long call ran first");
        slow.result.unwrap();

        let schedule = node.schedule();
        assert_eq!(schedule.policy, "sept");
        let by_name = |n: &str| {
            schedule
                .functions
                .iter()
                .find(|f| f.name == n)
                .unwrap()
                .clone()
        };
        assert!(by_name("slow").expected_ms > 10.0 * by_name("fast").expected_ms.max(0.001));
        assert_eq!(by_name("slow").recent_ms.len(), 3);
        assert!(
            node.metrics
                .encode()
                .contains(r#"mote_policy{policy="sept"} 1"#)
        );
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn past_the_resident_budget_the_least_recently_called_are_evicted_and_load_cold() {
        let dir = tempfile::tempdir().unwrap();
        let node = Node::start_embedded(dir.path(), no_resident_budget())
            .await
            .unwrap();
        for name in ["a", "b"] {
            deploy(&node, name, FAST).await;
        }
        let resident = |n: &str| node.registry.get(n).unwrap().is_resident();
        assert!(!resident("a") && resident("b"));

        let warm = node.invoke_traced("b", Bytes::new()).await.unwrap();
        assert!(warm.result.is_ok() && warm.cold_start.is_none());
        let cold = node.invoke_traced("a", Bytes::new()).await.unwrap();
        assert!(cold.result.is_ok() && cold.cold_start.is_some());
        assert!(resident("a") && !resident("b"));
        let again = node.invoke_traced("a", Bytes::new()).await.unwrap();
        assert!(again.cold_start.is_none(), "a second call is warm");

        let metrics = node.metrics.encode();
        assert!(metrics.contains("mote_cold_starts_total 1"), "{metrics}");
        assert!(metrics.contains("mote_functions_resident 1"), "{metrics}");

        // Removing functions takes their code out of the resident set and its accounting.
        node.remove("a").await.unwrap();
        node.remove("b").await.unwrap();
        let metrics = node.metrics.encode();
        assert!(metrics.contains("mote_functions_resident 0"), "{metrics}");
        assert!(metrics.contains("mote_resident_bytes 0"), "{metrics}");
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_function_whose_code_is_gone_fails_with_a_load_error_and_others_still_run() {
        let dir = tempfile::tempdir().unwrap();
        let node = Node::start_embedded(dir.path(), no_resident_budget())
            .await
            .unwrap();
        deploy(&node, "gone", FAST).await;
        deploy(&node, "slow", SLOW).await;
        // Both the compiled artefact and the module blob of `gone` disappear from disk.
        for sub in ["artifacts", "modules"] {
            for entry in std::fs::read_dir(dir.path().join(sub)).unwrap() {
                let path = entry.unwrap().path();
                let sha = node.get("gone").unwrap().sha256;
                if path
                    .file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with(&sha)
                {
                    std::fs::remove_file(path).unwrap();
                }
            }
        }
        let err = node.invoke("gone", Bytes::new()).await.unwrap_err();
        assert!(matches!(err, InvokeError::Load { .. }), "{err}");
        assert!(err.to_string().contains("redeploy"), "{err}");
        assert!(node.invoke("slow", Bytes::new()).await.is_ok());
    }

    /// A module that takes a while to compile: `functions` functions of arithmetic, and a
    /// handler that answers nothing.
    fn slow_to_compile(functions: usize) -> String {
        let mut wat = String::from(
            r#"(module (memory (export "memory") 1)
            (func (export "mote_alloc") (param i32) (result i32) i32.const 0)
            (func (export "mote_handle") (param i32 i32) (result i64) i64.const 0)"#,
        );
        for i in 0..functions {
            wat.push_str(&format!("(func $f{i} (param i64) (result i64) local.get 0"));
            for k in 0..40 {
                wat.push_str(&format!(" i64.const {k} i64.mul local.get 0 i64.xor"));
            }
            wat.push(')');
        }
        wat.push(')');
        wat
    }

    /// Deletes the compiled artefact of `name`, so that its next cold start compiles.
    fn delete_artefact(node: &Node, dir: &Path, name: &str) {
        let sha = node.get(name).unwrap().sha256;
        for entry in std::fs::read_dir(dir.join("artifacts")).unwrap() {
            let path = entry.unwrap().path();
            if path
                .file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&sha)
            {
                std::fs::remove_file(path).unwrap();
            }
        }
    }

    /// A node of one executor with `big` (slow to compile) deployed but not resident, and its
    /// artefact gone, so that its next call compiles it.
    async fn big_and_cold(dir: &Path) -> Node {
        let node = Node::start_embedded(dir, no_resident_budget())
            .await
            .unwrap();
        deploy(&node, "big", &slow_to_compile(3000)).await;
        deploy(&node, "fast", FAST).await;
        assert!(!node.registry.get("big").unwrap().is_resident());
        delete_artefact(&node, dir, "big");
        node
    }

    /// The regression of issue 18: a cold start that compiled ran on the caller's async thread,
    /// so nothing else on that runtime moved meanwhile.
    #[tokio::test(flavor = "current_thread")]
    async fn a_cold_start_that_compiles_leaves_the_callers_thread_free() {
        let dir = tempfile::tempdir().unwrap();
        let node = big_and_cold(dir.path()).await;
        let beats = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let heart = tokio::spawn({
            let beats = beats.clone();
            async move {
                loop {
                    tokio::time::sleep(Duration::from_millis(1)).await;
                    beats.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
            }
        });
        tokio::task::yield_now().await;
        let before = beats.load(std::sync::atomic::Ordering::Relaxed);
        let reply = node.invoke_traced("big", Bytes::new()).await.unwrap();
        let during = beats.load(std::sync::atomic::Ordering::Relaxed) - before;
        heart.abort();
        reply.result.unwrap();
        let cold = reply.cold_start.expect("a cold start");
        assert!(
            cold >= Duration::from_millis(30),
            "the compile took {cold:?}: too short to tell whether the thread was free"
        );
        assert!(
            during >= 5,
            "the runtime's only thread beat {during} times during a {cold:?} cold start"
        );
    }

    /// The regression of issue 18: concurrent cold calls of one function each compiled it.
    #[test]
    fn concurrent_cold_calls_of_a_function_wait_for_one_load() {
        let dir = tempfile::tempdir().unwrap();
        let rt = tokio::runtime::Runtime::new().unwrap();
        let node = rt.block_on(big_and_cold(dir.path()));
        let start = std::sync::Barrier::new(4);
        let replies: Vec<Reply> = std::thread::scope(|scope| {
            let calls: Vec<_> = (0..4)
                .map(|_| {
                    scope.spawn(|| {
                        start.wait();
                        node.invoke_blocking("big", Bytes::new(), Duration::ZERO)
                    })
                })
                .collect();
            calls
                .into_iter()
                .map(|c| c.join().unwrap().unwrap())
                .collect()
        });
        for reply in &replies {
            assert!(reply.result.is_ok() && reply.cold_start.is_some());
        }
        let metrics = node.metrics().encode();
        assert!(metrics.contains("mote_cold_starts_total 1\n"), "{metrics}");
        drop(node);
        drop(rt);
    }

    /// The regression of issue 18: calls of microtask functions never recorded their
    /// processing time, so the node showed 0 ms expected for them.
    #[tokio::test(flavor = "multi_thread")]
    async fn microtask_calls_record_their_processing_time() {
        let dir = tempfile::tempdir().unwrap();
        let node = Node::start_embedded(dir.path(), ExecutorsConfig::new(1))
            .await
            .unwrap();
        deploy(&node, "sleeper", SLEEPER).await;
        for _ in 0..2 {
            node.invoke("sleeper", Bytes::new()).await.unwrap();
        }
        let schedule = node.schedule();
        let sleeper = schedule
            .functions
            .iter()
            .find(|f| f.name == "sleeper")
            .unwrap();
        assert_eq!(sleeper.recent_ms.len(), 2, "{sleeper:?}");
        assert!(sleeper.expected_ms >= 190.0, "{sleeper:?}");
        let metrics = node.metrics().encode();
        let expected = metrics
            .lines()
            .find(|l| l.starts_with(r#"mote_expected_processing_seconds{function="sleeper"}"#))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .unwrap();
        assert!(expected >= 0.19, "{metrics}");
    }

    /// The files under `dir/sub`.
    fn files_in(dir: &Path, sub: &str) -> Vec<String> {
        std::fs::read_dir(dir.join(sub))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }

    /// The regression of issue 18: a deploy refused for its memory limit had already written
    /// its compiled artefact.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_deploy_refused_for_its_memory_limit_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let node = Node::start_embedded(dir.path(), ExecutorsConfig::new(1))
            .await
            .unwrap();
        let big_memory = r#"(module (memory (export "memory") 512)
            (func (export "mote_alloc") (param i32) (result i32) i32.const 0)
            (func (export "mote_handle") (param i32 i32) (result i64) i64.const 0))"#;
        let limits = Limits {
            memory_mb: 16,
            ..Limits::default()
        };
        let wasm = Bytes::from(wat::parse_str(big_memory).unwrap());
        let err = node
            .deploy(FunctionName::new("big").unwrap(), wasm, limits)
            .await
            .unwrap_err();
        assert!(matches!(err, DeployError::MemoryTooSmall { .. }), "{err}");
        assert_eq!(files_in(dir.path(), "artifacts"), Vec::<String>::new());
        assert_eq!(files_in(dir.path(), "modules"), Vec::<String>::new());
    }

    /// A store whose writes all fail, as a full disk or an unreachable store would.
    struct RefusingWrites(EmbeddedStore);

    #[async_trait::async_trait]
    impl StateStore for RefusingWrites {
        async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StateError> {
            self.0.get(key).await
        }
        async fn put(&self, _key: &str, _value: Vec<u8>) -> Result<(), StateError> {
            Err(StateError::Storage {
                path: "test".into(),
                message: "no space left on device".into(),
            })
        }
        async fn delete(&self, key: &str) -> Result<bool, StateError> {
            self.0.delete(key).await
        }
        async fn list(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StateError> {
            self.0.list(prefix).await
        }
    }

    /// The regression of issue 18: a deploy whose record could not be written left its module
    /// blob and compiled artefact behind.
    #[tokio::test(flavor = "multi_thread")]
    async fn a_deploy_whose_record_cannot_be_written_leaves_no_files() {
        let dir = tempfile::tempdir().unwrap();
        let store = RefusingWrites(EmbeddedStore::open(&dir.path().join("state.redb")).unwrap());
        let runtime = Runtime::new(RuntimeConfig::new(dir.path().join("artifacts"), 1)).unwrap();
        let blobs = ModuleBlobs::open(&dir.path().join("modules")).unwrap();
        let node = Node::start(
            Arc::new(runtime),
            Arc::new(store),
            blobs,
            ExecutorsConfig::new(1),
        )
        .await
        .unwrap();
        let wasm = Bytes::from(wat::parse_str(FAST).unwrap());
        let err = node
            .deploy(FunctionName::new("f").unwrap(), wasm, Limits::default())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("no space left"), "{err}");
        assert!(node.list().is_empty());
        assert_eq!(files_in(dir.path(), "artifacts"), Vec::<String>::new());
        assert_eq!(files_in(dir.path(), "modules"), Vec::<String>::new());
    }
}
