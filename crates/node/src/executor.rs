//! The executors: one thread per core, each running at most one call at a time, fed from the
//! calls [`Pending`] in policy order. Guest code only ever runs on these threads. Under the
//! `baseline` policy there are more threads than cores (a memory-derived cap), so calls start
//! as they arrive and share cores through the OS, as OpenWhisk does by default.
//!
//! An executor replies before it tears the instance down, so the caller does not wait for the
//! memory reset; it counts as busy (`mote_busy_executors`) until the teardown is done. Before
//! sleeping an idle executor polls for `spin`, so back-to-back calls are picked up without a
//! futex wake-up.

use crate::activity::{ExecutorActivity, ExecutorSample};
use crate::confine::{ConfineError, ExecutorFilter};
use crate::error::InvokeError;
use crate::ledger::{Ledger, Reply};
use crate::metrics::{NodeMetrics, Outcome};
use crate::pending::{Pending, Refused};
use crate::registry::Deployed;
use bytes::Bytes;
use mote_runtime::{Call as RuntimeCall, Function, Runtime};
use mote_sched::Policy;
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

/// A call waiting in the queue.
pub(crate) struct Call {
    function: Arc<Deployed>,
    /// The function's code, held by the call so an eviction cannot unmap it before it runs.
    code: Arc<Function>,
    input: Bytes,
    reply: oneshot::Sender<Reply>,
    arrival: Instant,
}

struct Shared {
    pending: Arc<Pending<Call>>,
    runtime: Arc<Runtime>,
    ledger: Arc<Ledger>,
    metrics: Arc<NodeMetrics>,
    config: ExecutorsConfig,
    threads: usize,
    activity: ExecutorActivity,
}

/// The node's executor threads and the queue in front of them. Stops and joins them when dropped;
/// calls still queued then are answered with [`InvokeError::ShuttingDown`].
pub struct Executors {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Executors {
    /// Starts one executor thread per core, or `baseline_cap` threads under `baseline`, each
    /// confined by seccomp if the config asks for it, taking calls from `pending` and settling
    /// them in `ledger`; fails if a thread cannot be confined.
    pub(crate) fn start(
        runtime: Arc<Runtime>,
        metrics: Arc<NodeMetrics>,
        pending: Arc<Pending<Call>>,
        ledger: Arc<Ledger>,
        config: ExecutorsConfig,
    ) -> Result<Self, ConfineError> {
        let threads = Self::threads_for(&config);
        metrics.executors.set(threads as i64);
        metrics.set_policy(config.policy);
        let shared = Arc::new(Shared {
            pending,
            runtime,
            ledger,
            metrics,
            config,
            threads,
            activity: ExecutorActivity::new(threads),
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
                            shared.run_executor(i);
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
        function.admit()?;
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

    /// The order in which waiting calls run.
    pub fn policy(&self) -> Policy {
        self.shared.config.policy
    }

    /// Executor threads (more than cores only under `baseline`).
    pub fn threads(&self) -> usize {
        self.shared.threads
    }

    /// What each executor thread has run so far.
    pub fn activity(&self) -> Vec<ExecutorSample> {
        self.shared.activity.sample()
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
    /// Runs executor `i`'s calls until shutdown.
    fn run_executor(&self, i: usize) {
        let mut next = self.wait_for_call();
        while let Some(call) = next {
            next = self.run(i, call);
        }
    }

    /// Blocks until there is a call to run, or returns `None` at shutdown.
    fn wait_for_call(&self) -> Option<Call> {
        self.pending.take(self.config.spin)
    }

    /// Runs one call, settles it, replies, and returns the next call to run (`None` at
    /// shutdown). The reply goes out before the instance is torn down, and the next call is
    /// taken then too, so a call queued meanwhile is not missed by a sleep.
    fn run(&self, i: usize, call: Call) -> Option<Call> {
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
        if let Err(e) = function.admit() {
            // Quarantined while this call waited: do not give it another core.
            let _ = reply.send(Reply::unstarted(Err(e)));
            return self.wait_for_call();
        }
        self.metrics.busy_executors.inc();
        let started = Instant::now();
        self.activity.start(i, started);
        let mut reply = Some(reply);
        let mut next = None;
        let ran = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let call = RuntimeCall {
                function: &code,
                name: function.name(),
                limits: function.record().limits,
                started,
                input: &input,
            };
            self.runtime.call_then(call, |result, log| {
                let settled = self.ledger.settle(&function, result, log, arrival, started);
                self.activity.end(i, settled.processing);
                next = self.next_call();
                if let Some(reply) = reply.take() {
                    let _ = reply.send(settled);
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
                let error = InvokeError::Internal(what);
                let settled = self
                    .ledger
                    .settle_failure(&function, error, arrival, started);
                self.activity.end(i, settled.processing);
                next = self.next_call();
                let _ = reply.send(settled);
            }
        }
        next.or_else(|| self.wait_for_call())
    }

    /// The next call waiting, unless the executors are stopping.
    fn next_call(&self) -> Option<Call> {
        match self.pending.is_shut_down() {
            true => None,
            false => self.pending.try_take(),
        }
    }
}
