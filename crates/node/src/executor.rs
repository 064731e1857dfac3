//! The executors: one thread per core, each running at most one call at a time, fed from one
//! policy-ordered queue. Guest code only ever runs on these threads.
//!
//! Invariants of the shared state:
//! - `queue` holds every accepted call that has not started; `waiting` mirrors its length so
//!   idle executors can poll it without taking the lock.
//! - An executor increments `sleepers` only while holding the queue lock and after seeing the
//!   queue empty, then waits on `available` (which releases the lock atomically). A submitter
//!   pushes under the lock and notifies only if `sleepers > 0`; because both sides order through
//!   the lock, a push can never be missed by a sleeping executor.
//! - Before sleeping an executor spins for `spin` on `waiting`, so back-to-back calls are picked
//!   up without a futex wake-up.

use crate::error::InvokeError;
use crate::metrics::{NodeMetrics, Outcome};
use crate::registry::Deployed;
use bytes::Bytes;
use mote_runtime::Runtime;
use mote_sched::{CallQueue, Policy};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How the executors are set up.
#[derive(Clone, Debug)]
pub struct ExecutorsConfig {
    /// Executor threads, one per core calls may use.
    pub cores: usize,
    /// The order in which waiting calls run.
    pub policy: Policy,
    /// The most calls that may wait; more are refused with [`InvokeError::QueueFull`].
    pub max_queue: usize,
    /// How long an idle executor polls for work before it sleeps.
    pub spin: Duration,
}

impl ExecutorsConfig {
    /// Defaults for `cores` executors.
    pub fn new(cores: usize) -> Self {
        Self {
            cores: cores.max(1),
            policy: Policy::Fifo,
            max_queue: 100_000,
            spin: Duration::from_micros(50),
        }
    }
}

/// The reply to a call: its response body or why it failed.
pub type Reply = Result<Vec<u8>, InvokeError>;

/// A call waiting in the queue.
struct Call {
    function: Arc<Deployed>,
    input: Bytes,
    reply: oneshot::Sender<Reply>,
}

struct Shared {
    queue: Mutex<Box<dyn CallQueue<Call>>>,
    available: Condvar,
    waiting: AtomicUsize,
    sleepers: AtomicUsize,
    shutdown: AtomicBool,
    runtime: Arc<Runtime>,
    metrics: Arc<NodeMetrics>,
    config: ExecutorsConfig,
}

/// The node's executor threads and the queue in front of them. Stops and joins them when dropped;
/// calls still queued then are answered with [`InvokeError::ShuttingDown`].
pub struct Executors {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Executors {
    /// Starts `config.cores` executor threads.
    pub fn start(
        runtime: Arc<Runtime>,
        metrics: Arc<NodeMetrics>,
        config: ExecutorsConfig,
    ) -> Self {
        metrics.executors.set(config.cores as i64);
        let shared = Arc::new(Shared {
            queue: Mutex::new(config.policy.queue()),
            available: Condvar::new(),
            waiting: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            runtime,
            metrics,
            config,
        });
        let threads = (0..shared.config.cores)
            .map(|i| {
                let shared = shared.clone();
                std::thread::Builder::new()
                    .name(format!("mote-exec-{i}"))
                    .spawn(move || shared.run_executor())
                    .expect("spawning an executor thread")
            })
            .collect();
        Self { shared, threads }
    }

    /// Queues a call of `function`; the receiver yields its reply.
    pub fn submit(
        &self,
        function: Arc<Deployed>,
        input: Bytes,
    ) -> Result<oneshot::Receiver<Reply>, InvokeError> {
        let (reply, rx) = oneshot::channel();
        let shared = &*self.shared;
        {
            let mut queue = shared.lock_queue();
            if shared.shutdown.load(Ordering::Relaxed) {
                return Err(InvokeError::ShuttingDown);
            }
            let waiting = queue.len();
            if waiting >= shared.config.max_queue {
                function.count(Outcome::Rejected);
                return Err(InvokeError::QueueFull {
                    waiting,
                    limit: shared.config.max_queue,
                });
            }
            queue.push(Call {
                function,
                input,
                reply,
            });
            shared.waiting.store(queue.len(), Ordering::Release);
        }
        shared.metrics.queue_length.inc();
        if shared.sleepers.load(Ordering::Acquire) > 0 {
            shared.available.notify_one();
        }
        Ok(rx)
    }

    /// How many executor threads run calls.
    pub fn cores(&self) -> usize {
        self.shared.config.cores
    }
}

impl Drop for Executors {
    fn drop(&mut self) {
        {
            let _queue = self.shared.lock_queue();
            self.shared.shutdown.store(true, Ordering::Release);
        }
        self.shared.available.notify_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        let mut queue = self.shared.lock_queue();
        while let Some(call) = queue.pop() {
            let _ = call.reply.send(Err(InvokeError::ShuttingDown));
        }
    }
}

impl Shared {
    fn lock_queue(&self) -> MutexGuard<'_, Box<dyn CallQueue<Call>>> {
        // A panic while holding the lock cannot leave the queue half-updated (push and pop are
        // single operations), so a poisoned lock is still safe to use.
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn run_executor(&self) {
        while let Some(call) = self.next_call() {
            self.run(call);
        }
    }

    /// Blocks until there is a call to run, or returns `None` at shutdown.
    fn next_call(&self) -> Option<Call> {
        let spin_until = Instant::now() + self.config.spin;
        loop {
            if self.shutdown.load(Ordering::Acquire) {
                return None;
            }
            if self.waiting.load(Ordering::Acquire) > 0
                && let Some(call) = self.pop(&mut self.lock_queue())
            {
                return Some(call);
            }
            if Instant::now() >= spin_until {
                break;
            }
            for _ in 0..64 {
                std::hint::spin_loop();
            }
        }
        let mut queue = self.lock_queue();
        loop {
            if let Some(call) = self.pop(&mut queue) {
                return Some(call);
            }
            if self.shutdown.load(Ordering::Acquire) {
                return None;
            }
            self.sleepers.fetch_add(1, Ordering::AcqRel);
            queue = self
                .available
                .wait(queue)
                .unwrap_or_else(|p| p.into_inner());
            self.sleepers.fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn pop(&self, queue: &mut Box<dyn CallQueue<Call>>) -> Option<Call> {
        let call = queue.pop()?;
        self.waiting.store(queue.len(), Ordering::Release);
        self.metrics.queue_length.dec();
        Some(call)
    }

    fn run(&self, call: Call) {
        let Call {
            function,
            input,
            reply,
        } = call;
        if reply.is_closed() {
            // The caller went away while the call waited; running it would only burn a core.
            function.count(Outcome::Cancelled);
            return;
        }
        self.metrics.busy_executors.inc();
        let started = Instant::now();
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
            self.runtime.call(
                function.function(),
                function.name(),
                function.record().limits,
                &input,
            )
        }));
        let elapsed = started.elapsed();
        self.metrics.busy_executors.dec();
        let reply_value = match result {
            Ok(Ok(out)) => {
                function.count(Outcome::Ok);
                Ok(out.body)
            }
            Ok(Err(e)) => {
                function.count(Outcome::of(&e));
                Err(InvokeError::Call(e))
            }
            Err(panic) => {
                let what = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "unknown panic".into());
                tracing::error!(function = %function.name(), panic = %what, "executor caught a panic");
                function.count(Outcome::Internal);
                Err(InvokeError::Internal(what))
            }
        };
        function.observe_duration(elapsed);
        let _ = reply.send(reply_value);
    }
}
