//! The executors: one thread per core, each running at most one call at a time, fed from the
//! calls [`Pending`] in policy order. Guest code only ever runs on these threads. Under the
//! `baseline` policy there are more threads than cores (a memory-derived cap), so calls start
//! as they arrive and share cores through the OS, as OpenWhisk does by default.
//!
//! An executor replies before it tears the instance down, so the caller does not wait for the
//! memory reset; it counts as busy (`mote_busy_executors`) until the teardown is done. Before
//! sleeping an idle executor polls for `spin`, so back-to-back calls are picked up without a
//! futex wake-up.

use crate::confine::{ConfineError, ExecutorFilter};
use crate::error::InvokeError;
use crate::metrics::{NodeMetrics, Outcome};
use crate::microtask::{ClassSnapshot, Microtasks};
use crate::pending::{Pending, Refused};
use crate::registry::Deployed;
use bytes::Bytes;
use mote_runtime::{Function, Runtime};
use mote_sched::Policy;
use serde::Serialize;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How the executors are set up.
#[derive(Clone, Debug)]
pub struct ExecutorsConfig {
    /// Cores calls may use: one executor thread each (except under `baseline`).
    pub cores: usize,
    /// The order in which waiting calls run.
    pub policy: Policy,
    /// Fair-Choice counts a function's calls over this window (the paper's T).
    pub fc_window: Duration,
    /// Under `baseline`, the most calls that run at once (one thread each, sharing the cores).
    pub baseline_cap: usize,
    /// The most calls that may wait; more are refused with [`InvokeError::QueueFull`].
    pub max_queue: usize,
    /// How long an idle executor polls for work before it sleeps.
    pub spin: Duration,
    /// A function whose calls are killed for their budget this many times in a row is
    /// quarantined until released or redeployed; 0 never quarantines.
    pub quarantine_after: u32,
    /// Confine executor threads with the seccomp allow-list of [`crate::confine`].
    pub seccomp: bool,
}

impl ExecutorsConfig {
    /// Defaults for `cores` executors.
    pub fn new(cores: usize) -> Self {
        Self {
            cores: cores.max(1),
            policy: Policy::Fifo,
            fc_window: Duration::from_secs(60),
            baseline_cap: 4 * cores.max(1),
            max_queue: 100_000,
            spin: Duration::from_micros(50),
            quarantine_after: 5,
            seccomp: cfg!(target_os = "linux"),
        }
    }
}

/// The reply to a call: its response body or why it failed, and where its time went.
#[derive(Debug)]
pub struct Reply {
    /// The response body, or why the call failed.
    pub result: Result<Vec<u8>, InvokeError>,
    /// Time from submission until an executor started it.
    pub queued: Duration,
    /// Time it ran on the executor (instantiate and call); zero if it never ran.
    pub processing: Duration,
    /// When the guest's entry point was called, if the call got that far and succeeded.
    pub entered: Option<Instant>,
    /// If the function was not resident: how long loading its code took before the call was
    /// queued (a cold start).
    pub cold_start: Option<Duration>,
}

impl Reply {
    pub(crate) fn unstarted(result: Result<Vec<u8>, InvokeError>) -> Self {
        Self {
            result,
            queued: Duration::ZERO,
            processing: Duration::ZERO,
            entered: None,
            cold_start: None,
        }
    }
}

/// A call waiting in the queue.
struct Call {
    function: Arc<Deployed>,
    /// The function's code, held by the call so an eviction cannot unmap it before it runs.
    code: Arc<Function>,
    input: Bytes,
    reply: oneshot::Sender<Reply>,
    arrival: Instant,
}

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

/// The queue's state, for `GET /v1/node`.
#[derive(Clone, Debug, Serialize)]
pub struct ScheduleSnapshot {
    /// The running policy.
    pub policy: &'static str,
    /// Cores calls may use.
    pub cores: usize,
    /// Executor threads (more than cores only under `baseline`).
    pub executor_threads: usize,
    /// Calls waiting.
    pub queue_length: usize,
    /// How calls that declare phases are scheduled: `on` (per share class) or `off`.
    pub microtasks: &'static str,
    /// The share classes' cores, room and queues (calls that declare phases).
    pub classes: Vec<ClassSnapshot>,
    /// Per-function state, for every function given.
    pub functions: Vec<FunctionSchedule>,
}

struct Shared {
    pending: Pending<Call>,
    runtime: Arc<Runtime>,
    metrics: Arc<NodeMetrics>,
    config: ExecutorsConfig,
    threads: usize,
}

/// The node's executor threads and the queue in front of them. Stops and joins them when dropped;
/// calls still queued then are answered with [`InvokeError::ShuttingDown`].
pub struct Executors {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Executors {
    /// Starts one executor thread per core, or `baseline_cap` threads under `baseline`, each
    /// confined by seccomp if the config asks for it; fails if a thread cannot be confined.
    pub fn start(
        runtime: Arc<Runtime>,
        metrics: Arc<NodeMetrics>,
        config: ExecutorsConfig,
    ) -> Result<Self, ConfineError> {
        let threads = Self::threads_for(&config);
        metrics.executors.set(threads as i64);
        metrics.set_policy(config.policy);
        let shared = Arc::new(Shared {
            pending: Pending::new(
                config.policy,
                config.fc_window,
                config.max_queue,
                metrics.queue_length.clone(),
            ),
            runtime,
            metrics,
            config,
            threads,
        });
        let filter = match shared.config.seccomp {
            true => Some(Arc::new(ExecutorFilter::new()?)),
            false => None,
        };
        let (confined_tx, confined) = std::sync::mpsc::channel();
        let threads = (0..threads)
            .map(|i| {
                let shared = shared.clone();
                let confined_tx = confined_tx.clone();
                let filter = filter.clone();
                std::thread::Builder::new()
                    .name(format!("mote-exec-{i}"))
                    .spawn(move || {
                        let result = filter.map_or(Ok(()), |f| f.confine_this_thread());
                        let ok = result.is_ok();
                        let _ = confined_tx.send(result);
                        drop(confined_tx);
                        if ok {
                            shared.run_executor();
                        }
                    })
                    .expect("spawning an executor thread")
            })
            .collect();
        let executors = Self { shared, threads };
        drop(confined_tx);
        // Dropping `executors` on failure stops the threads that did start.
        for result in confined.iter() {
            result?;
        }
        Ok(executors)
    }

    /// How many executor threads `config` asks for.
    pub fn threads_for(config: &ExecutorsConfig) -> usize {
        if config.policy.oversubscribes() {
            config.baseline_cap.max(config.cores)
        } else {
            config.cores
        }
    }

    /// Queues a call of `function`, running `code`, that arrived at `arrival`; the receiver
    /// yields its reply.
    pub(crate) fn submit(
        &self,
        function: Arc<Deployed>,
        code: Arc<Function>,
        input: Bytes,
        arrival: Instant,
    ) -> Result<oneshot::Receiver<Reply>, InvokeError> {
        refuse_if_quarantined(&function)?;
        let (reply, rx) = oneshot::channel();
        let key = function.key();
        let call = Call {
            function,
            code,
            input,
            reply,
            arrival,
        };
        match self.shared.pending.push(key, arrival, call) {
            Ok(()) => {}
            Err((Refused::ShuttingDown, _)) => return Err(InvokeError::ShuttingDown),
            Err((Refused::Full { waiting, limit }, call)) => {
                call.function.count(Outcome::Rejected);
                return Err(InvokeError::QueueFull { waiting, limit });
            }
        }
        Ok(rx)
    }

    /// Cores calls may use.
    pub fn cores(&self) -> usize {
        self.shared.config.cores
    }

    /// Drops the history of a function that was replaced or removed.
    pub fn forget(&self, function: &Deployed) {
        self.release(function);
        self.shared.pending.forget(function.key());
    }

    /// Lets a quarantined function's calls in again; returns whether it was quarantined.
    pub fn release(&self, function: &Deployed) -> bool {
        let released = function.release();
        if released {
            self.shared.metrics.quarantined.dec();
        }
        released
    }

    /// The policy, the queue and what it knows about each of `functions`, with the share
    /// classes of `microtasks`.
    pub fn snapshot(
        &self,
        functions: &[Arc<Deployed>],
        microtasks: &Microtasks,
    ) -> ScheduleSnapshot {
        let pending = &self.shared.pending;
        let ms = |ns: u64| ns as f64 / 1e6;
        let functions = functions
            .iter()
            .map(|f| {
                pending.history(f.key(), |history| FunctionSchedule {
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
            policy: self.shared.config.policy.as_str(),
            cores: self.shared.config.cores,
            executor_threads: self.shared.threads,
            queue_length: pending.len(),
            microtasks: microtasks.mode().as_str(),
            classes: microtasks.classes(),
            functions,
        }
    }
}

impl Drop for Executors {
    fn drop(&mut self) {
        self.shared.pending.shut_down();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        while let Some(call) = self.shared.pending.try_take() {
            let _ = call
                .reply
                .send(Reply::unstarted(Err(InvokeError::ShuttingDown)));
        }
    }
}

impl Shared {
    fn run_executor(&self) {
        let mut next = self.wait_for_call();
        while let Some(call) = next {
            next = self.run(call);
        }
    }

    /// Blocks until there is a call to run, or returns `None` at shutdown.
    fn wait_for_call(&self) -> Option<Call> {
        self.pending.take(self.config.spin)
    }

    /// Runs one call, records its processing time, replies, and returns the next call to run
    /// (`None` at shutdown). The reply goes out before the instance is torn down, and the next
    /// call is taken then too, so a call queued meanwhile is not missed by a sleep.
    fn run(&self, call: Call) -> Option<Call> {
        let Call {
            function,
            code,
            input,
            reply,
            arrival,
        } = call;
        if reply.is_closed() {
            // The caller went away while the call waited; running it would only burn a core.
            function.count(Outcome::Cancelled);
            return self.wait_for_call();
        }
        if let Err(e) = refuse_if_quarantined(&function) {
            // Quarantined while this call waited: do not give it another core.
            let _ = reply.send(Reply::unstarted(Err(e)));
            return self.wait_for_call();
        }
        self.metrics.busy_executors.inc();
        let started = Instant::now();
        let mut reply = Some(reply);
        let mut next = None;
        let ran = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let limits = function.record().limits;
            self.runtime
                .call_then(&code, function.name(), limits, started, &input, |result| {
                    let processing = started.elapsed();
                    let (outcome, entered, result) = match result {
                        Ok(out) => (Outcome::Ok, Some(out.entered), Ok(out.body)),
                        Err(e) => (Outcome::of(&e), None, Err(InvokeError::Call(e))),
                    };
                    next = self.settle(&function, outcome, processing);
                    if let Some(reply) = reply.take() {
                        let _ = reply.send(Reply {
                            result,
                            queued: started.saturating_duration_since(arrival),
                            processing,
                            entered,
                            cold_start: None,
                        });
                    }
                })
        }));
        self.metrics.busy_executors.dec();
        if let Err(panic) = ran {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            tracing::error!(function = %function.name(), panic = %what, "executor caught a panic");
            // A panic after the reply went out (in the teardown) has nothing left to answer.
            if let Some(reply) = reply.take() {
                let processing = started.elapsed();
                next = self.settle(&function, Outcome::Internal, processing);
                let _ = reply.send(Reply {
                    result: Err(InvokeError::Internal(what)),
                    queued: started.saturating_duration_since(arrival),
                    processing,
                    entered: None,
                    cold_start: None,
                });
            }
        }
        next.or_else(|| self.wait_for_call())
    }

    /// Books a finished call (outcome, duration, budget kills, processing time for the policy)
    /// and takes the next call, unless the executors are stopping.
    fn settle(&self, function: &Deployed, outcome: Outcome, processing: Duration) -> Option<Call> {
        book(
            &self.metrics,
            function,
            outcome,
            processing,
            self.config.quarantine_after,
        );
        function.set_expected(self.pending.complete(function.key(), processing));
        match self.pending.is_shut_down() {
            true => None,
            false => self.pending.try_take(),
        }
    }
}

/// Books a finished call's outcome and duration, and quarantines its function if this was one
/// budget kill too many.
pub(crate) fn book(
    metrics: &NodeMetrics,
    function: &Deployed,
    outcome: Outcome,
    processing: Duration,
    quarantine_after: u32,
) {
    function.count(outcome);
    function.observe_duration(processing);
    if function.note_budget(outcome == Outcome::Timeout, quarantine_after) {
        tracing::warn!(
            function = %function.name(),
            kills = quarantine_after,
            "function quarantined: its calls keep running past their budget"
        );
        metrics.quarantined.inc();
    }
}

/// Refuses (and counts) a call of a quarantined function.
pub(crate) fn refuse_if_quarantined(function: &Deployed) -> Result<(), InvokeError> {
    match function.quarantined() {
        None => Ok(()),
        Some(kills) => {
            function.count(Outcome::Rejected);
            Err(InvokeError::Quarantined {
                name: function.name().to_string(),
                kills,
                budget_us: function.record().limits.timeout_us,
            })
        }
    }
}
