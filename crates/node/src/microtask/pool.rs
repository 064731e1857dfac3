//! The threads that run calls of functions with phases, one per core (a Tokio runtime with its
//! timer and no I/O driver, confined like the executors; what they start on the object I/O
//! threads goes through the relay), and the object I/O threads beside them. Many calls share a thread: each runs until it waits, and yields at every epoch
//! tick. Instance slots bound how many calls are alive at once; a call waits for a slot, then
//! for a whole core from the [`ClassGate`], before it starts.

use super::config::{MicrotaskConfig, MicrotaskMode};
use super::gate::{CallGate, ClassGate, ClassSnapshot};
use crate::error::{DeployError, InvokeError};
use crate::executor::{ExecutorsConfig, confine};
use crate::ledger::Reply;
use crate::metrics::Outcome;
use crate::registry::Deployed;
use crate::run::{CallRef, Entry, Runner};
use bytes::Bytes;
use mote_runtime::{Egress, Function, HostIo};
use mote_sched::FunctionKey;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;
use tokio::sync::{Semaphore, oneshot};

/// What the threads' calls share: the gate, what runs calls, host I/O and the bounds.
pub(super) struct Shared {
    gate: Arc<ClassGate>,
    runner: Arc<Runner>,
    pub(super) host: HostIo,
    alive: Semaphore,
    /// Calls submitted and not yet answered.
    submitted: AtomicUsize,
    max_waiting: usize,
}

/// The nice value of the object I/O threads: 10 gives them about a tenth of the CPU weight of a
/// thread running a guest, so they take what granted phases leave without being starved.
const OBJECT_IO_NICE: i32 = 10;

/// The threads that run calls of functions with phases, and the gate in front of them.
pub struct Microtasks {
    shared: Arc<Shared>,
    threads: Option<tokio::runtime::Runtime>,
    object_io: Option<tokio::runtime::Runtime>,
}

impl Microtasks {
    /// Starts one thread per core for guests and as many for object I/O (and components'
    /// outbound requests, through `egress`).
    pub(crate) fn start(
        runner: Arc<Runner>,
        executors: &ExecutorsConfig,
        config: MicrotaskConfig,
        egress: Arc<Egress>,
        relay: Arc<mote_confine::Relay>,
    ) -> Result<Self, DeployError> {
        let gate = Arc::new(
            ClassGate::new(executors, config.mode)
                .map_err(|e| DeployError::Config(format!("--core-split: {e}")))?,
        );
        let filter = executors.filter(mote_confine::Role::Guest)?;
        let threads = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(executors.cores)
            .thread_name("mote-microtask")
            .enable_time()
            .on_thread_start(move || {
                if let Err(e) = confine(filter.as_deref(), mote_confine::Role::Guest) {
                    // The same filter was compiled and tried a moment earlier, so this does
                    // not happen; if it does, guest code must not run unconfined.
                    tracing::error!(error = %e, "cannot confine a microtask thread");
                    std::process::abort();
                }
            })
            .build()
            .map_err(|e| {
                DeployError::Internal(format!("cannot start the microtask threads: {e}"))
            })?;
        let object_io = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(executors.cores)
            .thread_name("mote-object-io")
            .enable_all()
            .on_thread_start(|| lower_this_thread(OBJECT_IO_NICE))
            .build()
            .map_err(|e| {
                DeployError::Internal(format!("cannot start the object I/O threads: {e}"))
            })?;
        let shared = Arc::new(Shared {
            gate,
            runner,
            host: HostIo::new(config.objects, egress, object_io.handle().clone(), relay),
            alive: Semaphore::new(config.max_alive),
            submitted: AtomicUsize::new(0),
            max_waiting: executors.max_queue,
        });
        Ok(Self {
            shared,
            threads: Some(threads),
            object_io: Some(object_io),
        })
    }

    /// Queues a call of `function`, running `code`, that arrived at `arrival`.
    pub(crate) fn submit(
        &self,
        function: Arc<Deployed>,
        code: Arc<Function>,
        input: Bytes,
        arrival: Instant,
    ) -> Result<oneshot::Receiver<Reply>, InvokeError> {
        let (reply, rx) = oneshot::channel();
        self.enqueue(function, move |shared, function| async move {
            shared.run(function, code, input, reply, arrival).await;
        })?;
        Ok(rx)
    }

    /// Admits a call of `function` within the bound on waiting calls and spawns what `call`
    /// makes of it on the threads.
    pub(super) fn enqueue<F>(
        &self,
        function: Arc<Deployed>,
        call: impl FnOnce(Arc<Shared>, Arc<Deployed>) -> F,
    ) -> Result<(), InvokeError>
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        function.admit()?;
        let waiting = self.shared.submitted.fetch_add(1, Ordering::Relaxed);
        if waiting >= self.shared.max_waiting {
            self.shared.submitted.fetch_sub(1, Ordering::Relaxed);
            function.count(Outcome::Rejected);
            return Err(InvokeError::QueueFull {
                waiting,
                limit: self.shared.max_waiting,
            });
        }
        let shared = self.shared.clone();
        let call = call(shared.clone(), function);
        let threads = self.threads.as_ref().expect("running until dropped");
        threads.spawn(async move {
            call.await;
            shared.submitted.fetch_sub(1, Ordering::Relaxed);
        });
        Ok(())
    }

    /// Where guests' host I/O runs: object storage, and components' outbound requests.
    pub(crate) fn host_io(&self) -> &HostIo {
        &self.shared.host
    }

    /// Drops what the classes know about a function that was replaced or removed.
    pub(crate) fn forget(&self, function: FunctionKey) {
        self.shared.gate.forget(function);
    }

    /// `on` or `off`.
    pub fn mode(&self) -> MicrotaskMode {
        self.shared.gate.mode
    }

    /// Each share class's cores, room and queue.
    pub fn classes(&self) -> Vec<ClassSnapshot> {
        self.shared.gate.snapshot()
    }
}

impl Drop for Microtasks {
    fn drop(&mut self) {
        // Calls still running are cancelled: their futures, instances and gates are dropped
        // on the threads as they stop. Not waited for: a node may be dropped on a thread of
        // an async runtime, which must not block.
        if let Some(threads) = self.threads.take() {
            threads.shutdown_background();
        }
        if let Some(object_io) = self.object_io.take() {
            object_io.shutdown_background();
        }
    }
}

/// Lowers the calling object I/O thread's priority.
fn lower_this_thread(nice: i32) {
    if let Err(error) = crate::priority::set_this_thread_nice(nice) {
        // Only raising priority needs privileges, so this does not happen; object I/O still
        // works at normal priority, it just competes with granted phases.
        tracing::warn!(%error, "cannot lower the priority of an object I/O thread");
    }
}

impl Shared {
    /// Waits for an instance slot and then a whole core for a call of `function`: `Err(None)`
    /// if its caller left meanwhile (or the node stopped), `Err(Some(..))` if the function was
    /// quarantined meanwhile.
    pub(super) async fn admit<R>(
        &self,
        function: &Deployed,
        arrival: Instant,
        reply: &mut oneshot::Sender<R>,
    ) -> Result<(tokio::sync::SemaphorePermit<'_>, CallGate), Option<InvokeError>> {
        let Ok(slot) = self.alive.acquire().await else {
            return Err(None);
        };
        let mut gate = CallGate::new(self.gate.clone(), function.key(), arrival);
        tokio::select! {
            () = gate.acquire() => {}
            () = reply.closed() => {
                function.count(Outcome::Cancelled);
                return Err(None);
            }
        }
        function.admit().map_err(Some)?;
        Ok((slot, gate))
    }

    async fn run(
        &self,
        function: Arc<Deployed>,
        code: Arc<Function>,
        input: Bytes,
        mut reply: oneshot::Sender<Reply>,
        arrival: Instant,
    ) {
        let (_slot, mut gate) = match self.admit(&function, arrival, &mut reply).await {
            Ok(admitted) => admitted,
            Err(Some(e)) => {
                let _ = reply.send(Reply::unstarted(Err(e)));
                return;
            }
            Err(None) => return,
        };
        let call = CallRef {
            function: &function,
            code: &code,
            input: &input,
            arrival,
        };
        let entry = Entry::Gated {
            gate: &mut gate,
            io: self.host.clone(),
        };
        let (settled_tx, mut settled) = oneshot::channel();
        let run = self.runner.run(call, entry, |r| {
            let _ = settled_tx.send(r);
        });
        let ran = tokio::select! {
            biased;
            _ = run => true,
            () = reply.closed() => {
                // The caller went away: stop the call rather than let it hold its share.
                function.count(Outcome::Cancelled);
                false
            }
        };
        // Answered once its share is back, so a caller that sees the answer sees the classes as
        // they are after the call.
        drop(gate);
        if let (true, Ok(answered)) = (ran, settled.try_recv()) {
            let _ = reply.send(answered);
        }
    }
}
