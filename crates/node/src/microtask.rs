//! Microtask scheduling (the microtask paper, `000_…`): calls of functions that declare phases
//! are admitted per share class, with the node's cores split across the classes.
//!
//! - [`ClassGate`]: per share class (1000, 500, 250, 100 permille of a core) a count of the
//!   microtasks running in it and a queue of those waiting, ordered by the node's policy (each
//!   class keeps the histories of how long its microtasks held their share, so SEPT inside a
//!   class ranks by expected microtask time). A class given `n` cores runs up to
//!   `n × 1000 / share` microtasks. Whenever a microtask enters or leaves a class, the cores
//!   are split again ([`mote_sched::CoreSplit`]: greedy from waiting and running microtasks ×
//!   share, or static) and waiting microtasks are admitted where there is room. A class that
//!   lost cores is not preempted: it drains to its new size.
//! - Under `--preempt on`, inside a class the executors' rule holds: a microtask that has held
//!   its share for a quantum while a better-ranked one waits in the same class gives the share
//!   up at the next epoch tick and queues again, ranked from the time it has held it
//!   (`mote_sched::preempt`); it waits without running until it is admitted again. Its slices
//!   add up to one microtask in the class's history.
//! - [`CallGate`]: one call's hold on the gate, handed to the runtime as its
//!   [`PhaseGate`]: `phase` moves the call to another class's queue; waits on storage or timers
//!   give the share up and queue for it again afterwards. Dropping it (the call ended, trapped,
//!   timed out, or was cancelled while queued) gives back whatever it held.
//! - `--microtasks off` is task-based scheduling for comparison: one class of whole cores, a
//!   call holds its core from start to end, waits included, and phases change nothing.
//! - [`Microtasks`]: the threads that poll these calls, one per core (a Tokio runtime with its
//!   timer and no I/O driver, confined by seccomp like the executors). Many calls share a
//!   thread: each runs until it waits, and yields at every epoch tick. Instance slots bound how
//!   many calls are alive at once.
//! - Requests to `wasi:http` components run here too, on the same threads, behind the same
//!   gate and slots: the call holds a whole core while the guest computes and gives it up
//!   while it waits on a body or an outbound response ([`gated`]).
//! - Object I/O runs on threads of its own at a lower CPU priority (nice
//!   [`OBJECT_IO_NICE`]). The gate grants shares of the cores to guests, but a call waiting on
//!   storage holds no share while its transfer is received, hashed and copied; at normal
//!   priority that work takes CPU from a phase that was granted a whole core. Measured with the
//!   sort (docs/benchmarks/microtasks.md), that made one sort call up to 22% slower once
//!   admitted; lowered, transfers use what the granted phases leave.

use crate::confine::ExecutorFilter;
use crate::error::{DeployError, InvokeError};
use crate::executor::ExecutorsConfig;
use crate::executor::PreemptConfig;
use crate::ledger::{Ledger, Reply};
use crate::metrics::Outcome;
use crate::registry::Deployed;
use bytes::Bytes;
use mote_objects::Objects;
use mote_runtime::{
    Call, CallError, CallOutput, Egress, Function, GateFuture, GuestLog, HostIo, PhaseGate,
    ProxyAnswer, ProxyCall, ProxyResponse, Runtime,
};
use mote_sched::{
    CLASSES, CallQueue, CoreSplit, FunctionKey, RankBasis, SHARE_LEVELS, ShareClass, SplitMismatch,
    SplitMode, should_yield,
};
use serde::Serialize;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, Semaphore, oneshot};

/// How calls that declare phases are scheduled.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MicrotaskMode {
    /// Per share class, with cores split across the classes as given.
    On(SplitMode),
    /// Task-based: a call holds a whole core for its whole duration, waits included.
    Off,
}

impl MicrotaskMode {
    /// `on` or `off`, as `mote up --microtasks` spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::On(_) => "on",
            Self::Off => "off",
        }
    }
}

/// Microtask scheduling and the object storage guests' host I/O uses.
#[derive(Clone, Debug)]
pub struct MicrotaskConfig {
    /// Per class, or task-based.
    pub mode: MicrotaskMode,
    /// Where guests' objects live; `None` fails their object calls with a message saying so.
    pub objects: Option<Arc<Objects>>,
    /// The most calls that declare phases alive at once (running, queued for a share, or
    /// waiting on storage); later ones wait for a slot. Each holds an instance: a node started
    /// with `Node::start_on` sizes the runtime's microtask slots to this.
    pub max_alive: usize,
}

impl Default for MicrotaskConfig {
    fn default() -> Self {
        Self {
            mode: MicrotaskMode::On(SplitMode::Dynamic),
            objects: None,
            max_alive: 256,
        }
    }
}

/// One share class's state, for `GET /v1/node`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ClassSnapshot {
    /// The class's share of a core, in permille.
    pub permille: u16,
    /// Cores the class has now.
    pub cores: u32,
    /// Microtasks it may run at once: cores × 1000 / permille.
    pub capacity: u32,
    /// Microtasks running in it.
    pub running: u32,
    /// Microtasks queued for it.
    pub waiting: usize,
    /// Microtasks that gave their share up to a better-ranked one in it (`--preempt on`).
    pub preemptions: u64,
}

/// A microtask's place in its class's queue: where its admission is sent, and, for one that was
/// preempted, what wakes the call waiting (without running) to be admitted again.
struct Admit {
    admitted: oneshot::Sender<Admitted>,
    wake: Option<Arc<Notify>>,
}

/// What a microtask learns when it is admitted.
struct Admitted {
    /// What its rank in the class is computed from.
    basis: RankBasis,
    /// When it was admitted: it holds the share from then.
    at: Instant,
}

struct GateState {
    /// `None` under `--microtasks off`.
    split: Option<CoreSplit>,
    /// The node's cores in permille: what the running microtasks' shares may add up to.
    budget: u32,
    cores: [u32; CLASSES],
    running: [u32; CLASSES],
    waiting: [CallQueue<Admit>; CLASSES],
    preemptions: [u64; CLASSES],
}

/// Admits microtasks to their share classes.
pub(crate) struct ClassGate {
    state: Mutex<GateState>,
    mode: MicrotaskMode,
    /// Preemption inside a class, if on.
    preempt: Option<PreemptConfig>,
}

impl ClassGate {
    pub(crate) fn new(
        executors: &ExecutorsConfig,
        mode: MicrotaskMode,
    ) -> Result<Self, SplitMismatch> {
        let cores = executors.cores as u32;
        let (split, cores_per_class) = match mode {
            MicrotaskMode::On(split) => (Some(CoreSplit::new(cores, split)?), [0; CLASSES]),
            MicrotaskMode::Off => (None, [cores, 0, 0, 0]),
        };
        let preempt = executors.preemption();
        let queue = || match preempt {
            Some(p) => CallQueue::preemptive(executors.policy, executors.fc_window, p.aging),
            None => CallQueue::new(executors.policy, executors.fc_window),
        };
        let mut state = GateState {
            split,
            budget: cores * 1000,
            cores: cores_per_class,
            running: [0; CLASSES],
            waiting: std::array::from_fn(|_| queue()),
            preemptions: [0; CLASSES],
        };
        state.rebalance();
        Ok(Self {
            state: Mutex::new(state),
            mode,
            preempt,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.state
            .lock()
            .expect("the gate's lock is never poisoned")
    }

    /// Whether waits give the share up: per class yes; task-based, a call holds its core.
    fn releases_on_wait(&self) -> bool {
        self.mode != MicrotaskMode::Off
    }

    /// The class a phase of `permille` runs in: its share class, or under `off` the one class.
    fn class_of(&self, permille: u16) -> usize {
        match self.releases_on_wait() {
            true => ShareClass::of(i32::from(permille))
                .map(ShareClass::index)
                .unwrap_or(0),
            false => 0,
        }
    }

    /// Admits a microtask of `function` to `class`: at once (`Ok`, with what its rank is
    /// computed from), or queued (`Err`: the receiver fires when it is admitted).
    fn acquire(
        &self,
        class: usize,
        function: FunctionKey,
        arrival: Instant,
    ) -> Result<RankBasis, oneshot::Receiver<Admitted>> {
        let mut state = self.lock();
        let (admit, admitted) = oneshot::channel();
        let admit = Admit {
            admitted: admit,
            wake: None,
        };
        state.waiting[class].push(function, arrival, admit);
        if state.waiting[class].len() == 1 && state.has_room(class) {
            let taken = state.waiting[class].pop_ranked().expect("just queued");
            state.running[class] += 1;
            state.rebalance();
            return Ok(taken.basis);
        }
        state.rebalance();
        Err(admitted)
    }

    /// A microtask of `function` that held a share of `class` for `held` has left it.
    fn release(&self, class: usize, function: FunctionKey, held: Duration) {
        let mut state = self.lock();
        state.running[class] -= 1;
        state.waiting[class].complete(function, held);
        state.rebalance();
    }

    /// Takes the share of a microtask of `class`, ranked `rank` from `basis` after holding it
    /// for `held`, back for a better-ranked one waiting in the class, if one still waits: queues
    /// it again and returns where its admission will arrive (`wake` fires then too).
    fn preempt(
        &self,
        class: usize,
        basis: RankBasis,
        held: Duration,
        rank: u64,
        wake: Arc<Notify>,
    ) -> Option<oneshot::Receiver<Admitted>> {
        let mut state = self.lock();
        if state.waiting[class]
            .best_rank()
            .is_none_or(|best| best >= rank)
        {
            return None;
        }
        let (admit, admitted) = oneshot::channel();
        let admit = Admit {
            admitted: admit,
            wake: Some(wake),
        };
        state.running[class] -= 1;
        state.preemptions[class] += 1;
        state.waiting[class].requeue(basis, held.as_nanos() as u64, admit);
        state.rebalance();
        Some(admitted)
    }

    /// The rank of the best microtask waiting in `class`.
    fn best_rank(&self, class: usize) -> Option<u64> {
        self.lock().waiting[class].best_rank()
    }

    /// Drops what the classes know about a function that was replaced or removed.
    pub(crate) fn forget(&self, function: FunctionKey) {
        let mut state = self.lock();
        for queue in &mut state.waiting {
            queue.forget(function);
        }
    }

    pub(crate) fn snapshot(&self) -> Vec<ClassSnapshot> {
        let state = self.lock();
        (0..CLASSES)
            .map(|c| ClassSnapshot {
                permille: SHARE_LEVELS[c],
                cores: state.cores[c],
                capacity: state.capacity(c),
                running: state.running[c],
                waiting: state.waiting[c].len(),
                preemptions: state.preemptions[c],
            })
            .collect()
    }
}

impl GateState {
    /// Microtasks `class` may run at once: its cores × 1000 / share (under `off`, one per core).
    fn capacity(&self, class: usize) -> u32 {
        self.cores[class] * (1000 / u32::from(SHARE_LEVELS[class]))
    }

    /// Whether one more microtask fits in `class`: under its capacity, and within the node's
    /// cores counting every class's running shares. A class that lost cores at a split may
    /// still run more than its new capacity; the second check keeps the others from adding
    /// to that until it has drained, so the cores are never oversubscribed.
    fn has_room(&self, class: usize) -> bool {
        let committed: u32 = (0..CLASSES)
            .map(|c| self.running[c] * u32::from(SHARE_LEVELS[c]))
            .sum();
        self.running[class] < self.capacity(class)
            && committed + u32::from(SHARE_LEVELS[class]) <= self.budget
    }

    /// Splits the cores again from the work in each class and admits what now fits.
    fn rebalance(&mut self) {
        if let Some(split) = &mut self.split {
            let microtasks: [u64; CLASSES] =
                std::array::from_fn(|c| u64::from(self.running[c]) + self.waiting[c].len() as u64);
            self.cores = split.split(microtasks);
        }
        for c in 0..CLASSES {
            while self.has_room(c) {
                let Some(taken) = self.waiting[c].pop_ranked() else {
                    break;
                };
                let admitted = Admitted {
                    basis: taken.basis,
                    at: Instant::now(),
                };
                // A receiver that is gone belongs to a call cancelled while it queued.
                if taken.call.admitted.send(admitted).is_ok() {
                    self.running[c] += 1;
                    if let Some(wake) = taken.call.wake {
                        wake.notify_one();
                    }
                }
            }
        }
    }
}

/// Where a call stands with the gate.
enum Hold {
    /// Running in its class, ranked from this basis.
    Running(RankBasis),
    /// Queued for its class.
    Queued(oneshot::Receiver<Admitted>),
    /// Holding nothing: before its first admission, or while it waits on storage or a timer.
    Released,
}

/// One call's hold on the [`ClassGate`]; the runtime drives it through [`PhaseGate`].
pub(crate) struct CallGate {
    gate: Arc<ClassGate>,
    function: FunctionKey,
    arrival: Instant,
    class: usize,
    hold: Hold,
    /// When the current slice of its share began.
    since: Instant,
    /// How long it held its share in this microtask before the current slice (it was
    /// preempted in between).
    held_before: Duration,
    /// What wakes the call when it is admitted again after a preemption; made on the first.
    wake: Option<Arc<Notify>>,
}

impl CallGate {
    /// A call that holds nothing yet and will start in the whole-core class.
    fn new(gate: Arc<ClassGate>, function: FunctionKey, arrival: Instant) -> Self {
        Self {
            gate,
            function,
            arrival,
            class: ShareClass::WHOLE_CORE.index(),
            hold: Hold::Released,
            since: arrival,
            held_before: Duration::ZERO,
            wake: None,
        }
    }

    /// Waits until the call runs in its class.
    async fn acquire(&mut self) {
        self.held_before = Duration::ZERO;
        match self.gate.acquire(self.class, self.function, self.arrival) {
            Ok(basis) => {
                self.hold = Hold::Running(basis);
                self.since = Instant::now();
            }
            Err(admitted) => {
                self.hold = Hold::Queued(admitted);
                if let Hold::Queued(admitted) = &mut self.hold {
                    match admitted.await {
                        Ok(admitted) => {
                            self.hold = Hold::Running(admitted.basis);
                            self.since = admitted.at;
                        }
                        // The gate is gone: the node is shutting down and the call with it.
                        Err(_) => self.hold = Hold::Released,
                    }
                }
            }
        }
    }

    /// After a preemption: notes the admission the call waited for, if it has arrived.
    fn readmitted(&mut self) {
        if let Hold::Queued(admitted) = &mut self.hold
            && let Ok(admitted) = admitted.try_recv()
        {
            self.hold = Hold::Running(admitted.basis);
            self.since = admitted.at;
        }
    }

    /// How long the call has held its share in this microtask.
    fn held(&self) -> Duration {
        self.held_before + self.since.elapsed()
    }

    fn release(&mut self) {
        self.readmitted();
        if let Hold::Running(_) = self.hold {
            self.gate.release(self.class, self.function, self.held());
        }
        self.hold = Hold::Released;
    }
}

impl PhaseGate for CallGate {
    fn enter(&mut self, permille: u16) -> GateFuture<'_> {
        Box::pin(async move {
            let class = self.gate.class_of(permille);
            self.readmitted();
            if class != self.class {
                self.release();
                self.class = class;
            }
            if !matches!(self.hold, Hold::Running(_)) {
                self.acquire().await;
            }
        })
    }

    fn suspend(&mut self) {
        if self.gate.releases_on_wait() {
            self.release();
        }
    }

    fn resume(&mut self) -> GateFuture<'_> {
        Box::pin(async move {
            if let Hold::Released = self.hold {
                self.acquire().await;
            }
        })
    }

    fn preempt(&mut self, now: Instant) -> Option<GateFuture<'static>> {
        let quantum = self.gate.preempt?.quantum;
        self.readmitted();
        let Hold::Running(basis) = self.hold else {
            return None;
        };
        let slice = now.saturating_duration_since(self.since);
        let held = self.held_before + slice;
        let rank = basis.rank(held.as_nanos() as u64);
        let best = self.gate.best_rank(self.class).unwrap_or(u64::MAX);
        let slice_ns = slice.as_nanos() as u64;
        if !should_yield(rank, best, slice_ns, quantum.as_nanos() as u64) {
            return None;
        }
        let wake = self.wake.get_or_insert_with(Default::default).clone();
        let admitted = self
            .gate
            .preempt(self.class, basis, held, rank, wake.clone())?;
        self.held_before = held;
        self.hold = Hold::Queued(admitted);
        Some(Box::pin(async move { wake.notified().await }))
    }
}

impl Drop for CallGate {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.hold, Hold::Released) {
            Hold::Running(basis) => {
                self.hold = Hold::Running(basis);
                self.release();
            }
            Hold::Queued(mut admitted) => {
                // Admitted after it stopped waiting: give the share straight back.
                admitted.close();
                if let Ok(admitted) = admitted.try_recv() {
                    self.hold = Hold::Running(admitted.basis);
                    self.since = admitted.at;
                    self.release();
                }
            }
            Hold::Released => {}
        }
    }
}

struct Shared {
    gate: Arc<ClassGate>,
    runtime: Arc<Runtime>,
    host: HostIo,
    ledger: Arc<Ledger>,
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
        runtime: Arc<Runtime>,
        ledger: Arc<Ledger>,
        executors: &ExecutorsConfig,
        config: MicrotaskConfig,
        egress: Arc<Egress>,
    ) -> Result<Self, DeployError> {
        let gate = Arc::new(
            ClassGate::new(executors, config.mode)
                .map_err(|e| DeployError::Config(format!("--core-split: {e}")))?,
        );
        let filter = match executors.seccomp {
            true => Some(Arc::new(ExecutorFilter::new()?)),
            false => None,
        };
        let threads = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(executors.cores)
            .thread_name("mote-microtask")
            .enable_time()
            .on_thread_start(move || {
                if let Some(filter) = &filter
                    && let Err(e) = filter.confine_this_thread()
                {
                    // The executors were confined by the same filter a moment earlier, so
                    // this does not happen; if it does, guest code must not run unconfined.
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
            runtime,
            host: HostIo::new(config.objects, egress, object_io.handle().clone()),
            ledger,
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

    /// Queues `request` to `function`, a `wasi:http` component running `code`, that arrived at
    /// `arrival`. The receiver gets the response as soon as the guest sets it (its body streams
    /// while the guest runs), or why there is none.
    pub(crate) fn submit_http<B>(
        &self,
        function: Arc<Deployed>,
        code: Arc<Function>,
        request: http::Request<B>,
        arrival: Instant,
    ) -> Result<oneshot::Receiver<Result<ProxyResponse, InvokeError>>, InvokeError>
    where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let (reply, rx) = oneshot::channel();
        self.enqueue(function, move |shared, function| async move {
            shared.serve(function, code, request, reply, arrival).await;
        })?;
        Ok(rx)
    }

    /// Admits a call of `function` within the bound on waiting calls and spawns what `call`
    /// makes of it on the threads.
    fn enqueue<F>(
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

/// Sets the calling thread's nice value (on Linux, nice is per thread).
fn lower_this_thread(nice: i32) {
    // SAFETY: gettid and setpriority take and return plain integers and touch no memory.
    let failed = unsafe {
        let tid = libc::gettid() as libc::id_t;
        libc::setpriority(libc::PRIO_PROCESS, tid, nice) != 0
    };
    if failed {
        // Only raising priority needs privileges, so this does not happen; object I/O still
        // works at normal priority, it just competes with granted phases.
        tracing::warn!(
            error = %std::io::Error::last_os_error(),
            "cannot lower the priority of an object I/O thread"
        );
    }
}

impl Shared {
    /// Waits for an instance slot and then a whole core for a call of `function`: `Err(None)`
    /// if its caller left meanwhile (or the node stopped), `Err(Some(..))` if the function was
    /// quarantined meanwhile.
    async fn admit<R>(
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
        let (_slot, gate) = match self.admit(&function, arrival, &mut reply).await {
            Ok(admitted) => admitted,
            Err(Some(e)) => {
                let _ = reply.send(Reply::unstarted(Err(e)));
                return;
            }
            Err(None) => return,
        };
        let started = Instant::now();
        let call = Call {
            function: &code,
            name: function.name(),
            limits: function.record().limits,
            started,
            input: &input,
        };
        let call = self
            .runtime
            .call_microtask(call, Box::new(gate), self.host.clone());
        let (result, log) = tokio::select! {
            result = call => result,
            () = reply.closed() => {
                // The caller went away: stop the call rather than let it hold its share.
                function.count(Outcome::Cancelled);
                return;
            }
        };
        let _ = reply.send(self.ledger.settle(&function, result, log, arrival, started));
    }
}

impl Shared {
    /// Serves one request to a component: waits for a slot and a core like any microtask call,
    /// replies with the response head as soon as the guest sets it, and settles the call when
    /// the guest returns.
    async fn serve<B>(
        &self,
        function: Arc<Deployed>,
        code: Arc<Function>,
        request: http::Request<B>,
        mut reply: oneshot::Sender<Result<ProxyResponse, InvokeError>>,
        arrival: Instant,
    ) where
        B: http_body::Body<Data = Bytes> + Send + 'static,
        B::Error: std::error::Error + Send + Sync + 'static,
    {
        let (_slot, gate) = match self.admit(&function, arrival, &mut reply).await {
            Ok(admitted) => admitted,
            Err(Some(e)) => {
                let _ = reply.send(Err(e));
                return;
            }
            Err(None) => return,
        };
        let started = Instant::now();
        let call_id = self.ledger.call_id();
        let (respond, mut answer) = oneshot::channel::<ProxyAnswer>();
        let call = ProxyCall {
            function: &code,
            name: function.name(),
            limits: function.record().limits,
            started,
            http: function.http().clone(),
        };
        let serving = gated(
            gate,
            self.runtime.serve_http(call, request, respond, &self.host),
        );
        let mut serving = std::pin::pin!(serving);
        let first = tokio::select! {
            biased;
            answered = &mut answer => First::Answered(answered.ok()),
            result = &mut serving => First::Ended(result),
            () = reply.closed() => First::Gone,
        };
        let answered = |answer: ProxyAnswer| {
            answer
                .map(|mut response| {
                    response.extensions_mut().insert(call_id);
                    response
                })
                .map_err(|code| CallError::Answered(code).into())
        };
        let ((outcome, error), log) = match first {
            First::Answered(Some(answer)) => {
                // The head goes out now; the body streams while the guest goes on.
                let _ = reply.send(answered(answer));
                let (result, log) = serving.await;
                if let Err(e) = &result {
                    tracing::warn!(function = %function.name(), error = %e, "a component failed after it sent its response head; the client's body was cut short");
                }
                (outcome_of(&result), log)
            }
            // Dropped unset: the call is ending without a response.
            First::Answered(None) => {
                let (result, log) = serving.await;
                (unanswered(reply, result), log)
            }
            First::Ended((result, log)) => match answer.try_recv() {
                // It set its response and returned at once: the body is already whole.
                Ok(answer) => {
                    let _ = reply.send(answered(answer));
                    (outcome_of(&result), log)
                }
                Err(_) => (unanswered(reply, result), log),
            },
            First::Gone => {
                function.count(Outcome::Cancelled);
                return;
            }
        };
        let error = error.as_ref().map(|e| e as &dyn std::fmt::Display);
        self.ledger
            .keep_log(&function, call_id, outcome, error, log);
        let now = Instant::now();
        self.ledger.book(
            &function,
            outcome,
            now.saturating_duration_since(arrival),
            now.saturating_duration_since(started),
        );
    }
}

/// What a request to a component came to first.
enum First {
    /// The guest set its response (or dropped the outparam unset: `None`).
    Answered(Option<ProxyAnswer>),
    /// The guest returned or failed, having logged what it did.
    Ended((Result<CallOutput, CallError>, GuestLog)),
    /// The client left before the response head: the call is dropped, which stops the guest.
    Gone,
}

/// How a call ended, and why if it failed.
fn outcome_of(result: &Result<CallOutput, CallError>) -> (Outcome, Option<String>) {
    match result {
        Ok(_) => (Outcome::Ok, None),
        Err(e) => (Outcome::of(e), Some(e.to_string())),
    }
}

/// Replies to a request whose guest ended without a response with why, and returns how it ended
/// and why.
fn unanswered(
    reply: oneshot::Sender<Result<ProxyResponse, InvokeError>>,
    result: Result<CallOutput, CallError>,
) -> (Outcome, Option<String>) {
    let error = match result {
        Ok(_) => CallError::NoResponse,
        Err(e) => e,
    };
    let outcome = (Outcome::of(&error), Some(error.to_string()));
    let _ = reply.send(Err(error.into()));
    outcome
}

/// Polls `call` only while holding a share of a core: between polls, while the guest waits on
/// a body or an outbound response, the share goes back to the gate, and the call queues for it
/// again when its wait is over. (Under `--microtasks off` the call keeps its core throughout.)
async fn gated<F: std::future::Future>(mut gate: CallGate, call: F) -> F::Output {
    let mut call = std::pin::pin!(call);
    loop {
        gate.resume().await;
        let polled =
            std::future::poll_fn(|cx| std::task::Poll::Ready(call.as_mut().poll(cx))).await;
        match polled {
            std::task::Poll::Ready(output) => return output,
            std::task::Poll::Pending => gate.suspend(),
        }
        // The call registered this task's waker for what it waits on: the next poll of this
        // task is that wake (or a spurious one, which costs one more turn of the loop).
        let mut waited = false;
        std::future::poll_fn(|_| match std::mem::replace(&mut waited, true) {
            true => std::task::Poll::Ready(()),
            false => std::task::Poll::Pending,
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mote_sched::Policy;

    fn gate(cores: usize, mode: MicrotaskMode) -> Arc<ClassGate> {
        let mut config = ExecutorsConfig::new(cores);
        config.policy = Policy::Fifo;
        Arc::new(ClassGate::new(&config, mode).unwrap())
    }

    fn call(gate: &Arc<ClassGate>) -> CallGate {
        CallGate::new(gate.clone(), 1, Instant::now())
    }

    fn running(gate: &ClassGate) -> Vec<u32> {
        gate.snapshot().iter().map(|c| c.running).collect()
    }

    #[tokio::test]
    async fn a_tenth_share_class_runs_ten_microtasks_per_core() {
        let gate = gate(2, MicrotaskMode::On(SplitMode::Dynamic));
        let mut calls: Vec<CallGate> = (0..25).map(|_| call(&gate)).collect();
        for c in &mut calls[..20] {
            c.enter(100).await;
        }
        // 20 microtasks of 100‰ fill both cores.
        assert_eq!(running(&gate), [0, 0, 0, 20]);
        let classes = gate.snapshot();
        assert_eq!((classes[3].cores, classes[3].capacity), (2, 20));
        // The 21st queues until one leaves.
        let mut extra = calls.pop().unwrap();
        let mut admitted = Box::pin(extra.enter(100));
        assert!(futures_poll_once(&mut admitted).is_pending());
        assert_eq!(gate.snapshot()[3].waiting, 1);
        drop(calls.remove(0));
        assert!(futures_poll_once(&mut admitted).is_ready());
        drop(admitted);
        assert_eq!(running(&gate), [0, 0, 0, 20]);
    }

    #[tokio::test]
    async fn a_whole_core_phase_waits_for_a_core_the_light_class_gives_back() {
        let gate = gate(2, MicrotaskMode::On(SplitMode::Dynamic));
        let mut light: Vec<CallGate> = (0..15).map(|_| call(&gate)).collect();
        for c in &mut light {
            c.enter(100).await;
        }
        // 15 light microtasks need 1.5 cores: the class holds both.
        assert_eq!(gate.snapshot()[3].cores, 2);
        let mut heavy = call(&gate);
        let mut admitted = Box::pin(heavy.enter(1000));
        // One core goes to the busy whole-core class at once, but the light class still runs
        // 15 microtasks (1.5 cores) until it drains to 10, and the cores are not oversubscribed
        // meanwhile.
        assert!(futures_poll_once(&mut admitted).is_pending());
        let classes = gate.snapshot();
        assert_eq!((classes[0].cores, classes[3].cores), (1, 1));
        for _ in 0..5 {
            drop(light.pop());
        }
        assert!(futures_poll_once(&mut admitted).is_ready());
        drop(admitted);
        assert_eq!(running(&gate), [1, 0, 0, 10]);
    }

    #[tokio::test]
    async fn waits_give_the_share_up_and_dropping_a_gate_gives_everything_back() {
        let gate = gate(1, MicrotaskMode::On(SplitMode::Dynamic));
        let mut a = call(&gate);
        a.acquire().await;
        assert_eq!(running(&gate), [1, 0, 0, 0]);
        a.suspend();
        assert_eq!(running(&gate), [0, 0, 0, 0]);
        a.resume().await;
        a.enter(250).await;
        assert_eq!(running(&gate), [0, 0, 1, 0]);
        drop(a);
        assert_eq!(running(&gate), [0, 0, 0, 0]);
        // A call dropped while it queued holds nothing afterwards, even if it was admitted
        // in between.
        let mut first = call(&gate);
        first.acquire().await;
        let mut second = call(&gate);
        let mut queued = Box::pin(second.acquire());
        assert!(futures_poll_once(&mut queued).is_pending());
        drop(queued);
        drop(first);
        drop(second);
        assert_eq!(running(&gate), [0, 0, 0, 0]);
        assert_eq!(gate.snapshot()[0].waiting, 0);
    }

    #[tokio::test]
    async fn task_based_calls_hold_a_whole_core_through_phases_and_waits() {
        let gate = gate(2, MicrotaskMode::Off);
        let mut a = call(&gate);
        a.acquire().await;
        a.enter(100).await;
        a.suspend();
        a.resume().await;
        assert_eq!(running(&gate), [1, 0, 0, 0]);
        let mut b = call(&gate);
        b.acquire().await;
        let mut c = call(&gate);
        let mut queued = Box::pin(c.enter(100));
        assert!(
            futures_poll_once(&mut queued).is_pending(),
            "two cores, two calls, whatever their phases"
        );
        drop(a);
        assert!(futures_poll_once(&mut queued).is_ready());
    }

    #[tokio::test]
    async fn a_gated_call_holds_its_core_only_while_it_is_polled_and_ready_to_run() {
        let gate = gate(1, MicrotaskMode::On(SplitMode::Dynamic));
        let mut a = call(&gate);
        a.acquire().await;
        let (tx, rx) = oneshot::channel::<u32>();
        let mut gated_call = Box::pin(gated(a, async move { rx.await.unwrap() + 1 }));
        // Waiting on its channel, the call gives the only core back...
        assert!(futures_poll_once(&mut gated_call).is_pending());
        assert_eq!(running(&gate), [0, 0, 0, 0]);
        // ...which another call takes meanwhile.
        let mut b = call(&gate);
        b.acquire().await;
        tx.send(41).unwrap();
        // Woken, it queues for the core again and runs once b gives it back.
        assert!(futures_poll_once(&mut gated_call).is_pending());
        assert!(futures_poll_once(&mut gated_call).is_pending());
        assert_eq!(gate.snapshot()[0].waiting, 1);
        drop(b);
        match futures_poll_once(&mut gated_call) {
            std::task::Poll::Ready(v) => assert_eq!(v, 42),
            std::task::Poll::Pending => panic!("the call did not run once the core was free"),
        }
        assert_eq!(
            running(&gate),
            [0, 0, 0, 0],
            "the finished call holds nothing"
        );
    }

    #[tokio::test]
    async fn inside_a_class_a_microtask_gives_its_share_to_a_better_one_after_its_quantum() {
        let mut config = ExecutorsConfig::new(1);
        config.policy = Policy::Sept;
        config.preempt = Some(PreemptConfig {
            quantum: Duration::from_millis(1),
            ..PreemptConfig::default()
        });
        let gate =
            Arc::new(ClassGate::new(&config, MicrotaskMode::On(SplitMode::Dynamic)).unwrap());
        let mut a = CallGate::new(gate.clone(), 1, Instant::now());
        a.acquire().await;
        std::thread::sleep(Duration::from_millis(3));
        assert!(a.preempt(Instant::now()).is_none(), "nothing waits");
        // Neither function has a history: `a` ranks by the time it has held its share, behind
        // `b`, which has held none.
        let mut b = CallGate::new(gate.clone(), 2, Instant::now());
        let mut b_queued = Box::pin(b.acquire());
        assert!(futures_poll_once(&mut b_queued).is_pending());
        let mut waiting = a.preempt(Instant::now()).expect("b outranks a");
        assert!(futures_poll_once(&mut b_queued).is_ready());
        drop(b_queued);
        assert_eq!(
            running(&gate),
            [1, 0, 0, 0],
            "b holds the one core, a waits"
        );
        assert_eq!(gate.snapshot()[0].preemptions, 1);
        assert!(futures_poll_once(&mut waiting).is_pending());
        std::thread::sleep(Duration::from_millis(2));
        drop(b);
        assert!(
            futures_poll_once(&mut waiting).is_ready(),
            "a is admitted again"
        );
        assert!(
            a.preempt(Instant::now()).is_none(),
            "a new slice runs for its quantum first"
        );
        drop(a);
        assert_eq!(running(&gate), [0, 0, 0, 0]);
        // a's two slices are one microtask of at least 3 ms in its history.
        let state = gate.lock();
        let history = state.waiting[0].history(1).unwrap().recent_processing_ns();
        assert_eq!(history.len(), 1);
        assert!(history[0] >= 3_000_000, "{history:?}");
    }

    /// On one core under SEPT: teaches the node a long and a short phased function, then sends
    /// the short one while the long one runs. Returns whether the short call ended first.
    async fn short_phase_beside_a_long_one(preempt: Option<PreemptConfig>) -> bool {
        let dir = tempfile::tempdir().unwrap();
        let mut config = ExecutorsConfig::new(1);
        config.policy = Policy::Sept;
        config.preempt = preempt;
        let node = crate::Node::start_embedded(dir.path(), config)
            .await
            .unwrap();
        let wasm = Bytes::from(wat::parse_str(crate::fixtures::fold(true)).unwrap());
        for name in ["long", "short"] {
            node.deploy(
                mote_types::FunctionName::new(name).unwrap(),
                wasm.clone(),
                mote_types::Limits::default(),
            )
            .await
            .unwrap();
        }
        let body = |n: u32| Bytes::copy_from_slice(&n.to_le_bytes());
        node.invoke("long", body(200)).await.unwrap();
        node.invoke("short", body(2)).await.unwrap();
        let long = tokio::spawn(node.submit("long", body(200)).unwrap());
        while node.microtasks.classes()[0].running == 0 {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        node.submit("short", body(2))
            .unwrap()
            .await
            .unwrap()
            .result
            .unwrap();
        let short_first = !long.is_finished();
        long.await.unwrap().unwrap().result.unwrap();
        short_first
    }

    #[tokio::test(flavor = "multi_thread")]
    async fn a_short_phase_takes_the_core_from_a_long_one_only_under_preemption() {
        let preempt = Some(PreemptConfig {
            quantum: Duration::from_millis(1),
            ..PreemptConfig::default()
        });
        assert!(short_phase_beside_a_long_one(preempt).await);
        assert!(!short_phase_beside_a_long_one(None).await);
    }

    /// Polls a future once with a waker that does nothing.
    fn futures_poll_once<F: std::future::Future + Unpin>(f: &mut F) -> std::task::Poll<F::Output> {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        std::pin::Pin::new(f).poll(&mut cx)
    }
}
