//! The executors: one thread per core, each running at most one call at a time, fed from the
//! calls [`Pending`] in policy order. Guest code only ever runs on these threads. Under the
//! `baseline` policy there are more threads than cores (a memory-derived cap), so calls start
//! as they arrive and share cores through the OS, as OpenWhisk does by default.
//!
//! Under preemption (`preempt`, ranking policies only) there are `cores + max_suspended` threads
//! and at most `cores` of them run calls at once; how a core passes between them is
//! [`preempt`]'s.
//!
//! An executor replies before it tears the instance down, so the caller does not wait for the
//! memory reset; it counts as busy (`mote_busy_executors`) until the teardown is done. Before
//! sleeping an idle executor polls for up to `spin`, so back-to-back calls are picked up without
//! a futex wake-up. How long it polls adapts: it halves after a sleep that a thread on its own
//! CPU ended (a node pinned to fewer CPUs than it runs threads, where polling only keeps the
//! thread that would queue the next call off the CPU) and doubles up to `spin` after any other
//! (a longer poll would have found the call without a wake-up).
//!
//! A call that the policy would run next anyway, on an idle core, skips the queue and runs on
//! its caller's thread ([`inline`]); `cores` counts which cores are idle.

use crate::activity::{ExecutorActivity, ExecutorSample};
use crate::confine::{ConfineError, ExecutorFilter};
use crate::error::InvokeError;
use crate::ledger::{Ledger, Reply};
use crate::metrics::{NodeMetrics, Outcome};
use crate::pending::{Found, Next, Pending, Refused};
mod call;
mod cores;
mod inline;
mod preempt;

use crate::registry::Deployed;
use bytes::Bytes;
use call::Call;
use cores::IdleCores;
use inline::Inline;
use mote_runtime::{
    Call as RuntimeCall, CallError, CallInFlight, CallOutput, Function, GuestLog, Runtime,
};
use mote_sched::Policy;
pub use preempt::PreemptConfig;
pub(crate) use preempt::Work;
use preempt::{ExecutorPreemption, Seat, Suspensions};
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
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
    /// The longest an idle executor polls for work before it sleeps.
    pub spin: Duration,
    /// A call of a function whose calls are expected to run for less than this runs on its
    /// caller's thread when a core is idle and no call waits ([`inline`]); zero queues every
    /// call. Ignored under `baseline`, where the OS shares the cores.
    pub inline_below: Duration,
    /// A function whose calls are killed for their budget this many times in a row is
    /// quarantined until released or redeployed; 0 never quarantines.
    pub quarantine_after: u32,
    /// Confine executor threads with the seccomp allow-list of [`crate::confine`].
    pub seccomp: bool,
    /// Preempt running calls for better-ranked ones (`None`: every call runs to its end).
    /// Only a ranking policy preempts: under `fifo` no waiting call ever outranks a running
    /// one, and under `baseline` the OS shares the cores.
    pub preempt: Option<PreemptConfig>,
}

impl ExecutorsConfig {
    /// Defaults for `cores` executors.
    pub fn new(cores: usize) -> Self {
        Self {
            cores: cores.max(1),
            policy: Policy::default(),
            fc_window: Duration::from_secs(60),
            baseline_cap: 4 * cores.max(1),
            max_queue: 100_000,
            spin: Duration::from_micros(50),
            inline_below: Duration::from_millis(1),
            quarantine_after: 5,
            seccomp: cfg!(target_os = "linux"),
            preempt: Some(PreemptConfig::default()),
        }
    }

    /// The preemption the executors run with: `preempt` under a ranking policy, else none.
    pub fn preemption(&self) -> Option<PreemptConfig> {
        self.preempt.filter(|_| !self.policy.arrival_order())
    }
}

struct Shared {
    pending: Arc<Pending<Work>>,
    runtime: Arc<Runtime>,
    ledger: Arc<Ledger>,
    metrics: Arc<NodeMetrics>,
    config: ExecutorsConfig,
    threads: usize,
    activity: ExecutorActivity,
    /// Under preemption: who is suspended and which threads are spare.
    suspensions: Option<Arc<Suspensions>>,
    /// Under preemption: each thread's seat, by thread index.
    seats: Vec<Arc<Seat>>,
    /// Which cores run no call, for calls run on their caller's thread.
    idle: IdleCores,
    /// Which calls run on their caller's thread.
    inline: Inline,
}

/// What a call on an executor thread that preempts runs with: the thread's preemption (and
/// through it its seat), and what the call's rank is computed from.
struct Preempted<'a> {
    preemption: &'a ExecutorPreemption,
    basis: Option<mote_sched::RankBasis>,
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
        pending: Arc<Pending<Work>>,
        ledger: Arc<Ledger>,
        config: ExecutorsConfig,
    ) -> Result<Self, ConfineError> {
        let threads = Self::threads_for(&config);
        metrics.executors.set(threads as i64);
        metrics.set_policy(config.policy);
        let suspensions = config
            .preemption()
            .map(|p| Arc::new(Suspensions::new(p, pending.clone(), metrics.clone())));
        let seats = match suspensions {
            Some(_) => (0..threads)
                .map(|i| Arc::new(Seat::new(i < config.cores, i.min(config.cores - 1))))
                .collect(),
            None => Vec::new(),
        };
        // Under preemption a core passes between threads, and activity is counted per core.
        // Calls on their callers' threads count in slots after the executors'.
        let slots = match suspensions {
            Some(_) => config.cores,
            None => threads,
        };
        let inline_below = match config.policy.oversubscribes() {
            true => Duration::ZERO,
            false => config.inline_below,
        };
        let inline = Inline::new(inline_below, config.cores, slots);
        let activity = ExecutorActivity::new(slots, inline.slots());
        let shared = Arc::new(Shared {
            pending,
            runtime,
            ledger,
            metrics,
            config,
            threads,
            activity,
            suspensions,
            seats,
            idle: IdleCores::new(),
            inline,
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
        } else if let Some(preempt) = config.preemption() {
            config.cores + preempt.max_suspended
        } else {
            config.cores
        }
    }

    /// Queues a call of `function`, running `code`, that arrived at `arrival` and holds its
    /// count in the node's cores (`counted`, which its executor takes over); the receiver
    /// yields its reply.
    pub(crate) fn submit(
        &self,
        function: Arc<Deployed>,
        code: Arc<Function>,
        input: Bytes,
        arrival: Instant,
        counted: CallInFlight,
        movable: bool,
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
            counted,
            movable,
        };
        match self.shared.pending.push(key, arrival, Work::Call(call)) {
            Ok(()) => {}
            Err((Refused::ShuttingDown, _)) => return Err(InvokeError::ShuttingDown),
            Err((Refused::Full { waiting, limit }, work)) => {
                if let Work::Call(call) = work {
                    call.function.count(Outcome::Rejected);
                }
                return Err(InvokeError::QueueFull { waiting, limit });
            }
        }
        Ok(rx)
    }

    /// Hands up to `most` movable calls that have not started to node `to`, those that would
    /// start last while each would wait at least `min_wait` here ([`Pending::release`]): each
    /// caller is answered [`InvokeError::Moved`]. Returns how many moved.
    pub(crate) fn hand_over(&self, most: usize, min_wait: Duration, to: &Arc<str>) -> usize {
        let cores = self.shared.config.cores as u32;
        let movable = |work: &Work| matches!(work, Work::Call(call) if call.movable);
        let calls = self.shared.pending.release(most, cores, min_wait, movable);
        let moved = calls.len();
        for work in calls {
            if let Work::Call(call) = work {
                let to = to.clone();
                let _ = call
                    .reply
                    .send(Reply::unstarted(Err(InvokeError::Moved { to })));
            }
        }
        moved
    }

    /// Cores calls may use.
    pub fn cores(&self) -> usize {
        self.shared.config.cores
    }

    /// The order in which waiting calls run.
    pub fn policy(&self) -> Policy {
        self.shared.config.policy
    }

    /// Executor threads (more than cores under `baseline` and under preemption).
    pub fn threads(&self) -> usize {
        self.shared.threads
    }

    /// Calls of functions expected under this run on the thread that read them; zero when none
    /// do (`--inline-below-us 0`, or a policy that oversubscribes).
    pub fn inline_below(&self) -> Duration {
        self.shared.inline.below()
    }

    /// The preemption the executors run with, if any.
    pub fn preemption(&self) -> Option<PreemptConfig> {
        self.shared.suspensions.as_ref().map(|s| s.config())
    }

    /// Calls suspended now.
    pub fn suspended(&self) -> usize {
        self.shared
            .suspensions
            .as_ref()
            .map_or(0, |s| s.suspended())
    }

    /// What each executor thread (each core, under preemption) has run so far.
    pub fn activity(&self) -> Vec<ExecutorSample> {
        self.shared.activity.sample()
    }
}

impl Drop for Executors {
    fn drop(&mut self) {
        self.shared.pending.shut_down();
        // Spares wake and stop; suspended calls run to their end without a core.
        for seat in &self.shared.seats {
            seat.stop();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        while let Some(next) = self.shared.pending.try_take() {
            // A resumption's thread was woken above and answered its call.
            if let Work::Call(call) = next.work {
                let _ = call
                    .reply
                    .send(Reply::unstarted(Err(InvokeError::ShuttingDown)));
            }
        }
    }
}

std::thread_local! {
    /// This executor thread's count in the node's cores, taken over from its first call and
    /// kept until it waits for another.
    static ON_CORE: std::cell::Cell<Option<CallInFlight>> = const { std::cell::Cell::new(None) };
    /// How long this executor thread polls for its next call before it sleeps.
    static SPIN: std::cell::Cell<Duration> = const { std::cell::Cell::new(MIN_SPIN) };
}

/// The shortest poll an adaptive spin shrinks to.
const MIN_SPIN: Duration = Duration::from_micros(1);

/// The next poll after one of `spin` that came by its call as `found`: halved down to
/// [`MIN_SPIN`] if polling kept the call's submitter off this CPU, else doubled up to `most`.
fn next_spin(spin: Duration, found: Found, most: Duration) -> Duration {
    match found {
        Found::WokenHere => (spin / 2).max(MIN_SPIN).min(most),
        Found::Polling | Found::WokenElsewhere => (spin * 2).min(most),
    }
}

impl Shared {
    /// Runs executor `i`'s calls until shutdown.
    fn run_executor(&self, i: usize) {
        SPIN.set(self.config.spin);
        if let Some(suspensions) = &self.suspensions {
            return self.run_preemptible(i, suspensions);
        }
        let mut next = self.wait_for_call();
        while let Some(taken) = next {
            next = match taken.work {
                Work::Call(call) => self.run(i, call, None),
                Work::Resume(_) => unreachable!("nothing is suspended without preemption"),
            };
        }
    }

    /// Runs executor `i` under preemption: calls while its thread holds a core, waiting as a
    /// spare while it does not, until shutdown.
    fn run_preemptible(&self, i: usize, suspensions: &Arc<Suspensions>) {
        let seat = &self.seats[i];
        let preemption = Rc::new(ExecutorPreemption::new(seat.clone(), suspensions.clone()));
        mote_runtime::preempt_calls_on_this_thread(preemption.clone());
        let mut next = None;
        loop {
            if !seat.holds_core() {
                drop(ON_CORE.take());
                match suspensions.wait_as_spare(seat) {
                    Some(given) => next = given,
                    None => return,
                }
            }
            let Some(taken) = next.take().or_else(|| self.wait_for_call()) else {
                return;
            };
            next = match taken.work {
                Work::Call(call) => {
                    let preempted = Preempted {
                        preemption: &preemption,
                        basis: taken.basis,
                    };
                    self.run(i, call, Some(preempted))
                }
                Work::Resume(resumption) => match resumption.resume(seat.core()) {
                    true => {
                        seat.hand_over_core();
                        None
                    }
                    // Left behind by a call stopped meanwhile: take the next one instead.
                    false => self.wait_for_call(),
                },
            };
        }
    }

    /// Blocks until there is a call to run, or returns `None` at shutdown. A thread that waits
    /// leaves its core to jobs' tasks, and to callers that run a call on their own thread
    /// meanwhile: it takes the core back (waiting for such a call to end) when it has a call.
    fn wait_for_call(&self) -> Option<Next<Work>> {
        drop(ON_CORE.take());
        self.idle.idle();
        let spin = SPIN.get();
        let (next, found) = self.pending.take(spin)?;
        SPIN.set(next_spin(spin, found, self.config.spin));
        self.idle.busy();
        Some(next)
    }

    /// Runs one call, preemptible on a thread that preempts (`preempted`), settles it, replies,
    /// and returns the next call to run: `None` at shutdown, or if the thread no longer holds a
    /// core (the call's budget ran out while it was suspended). The reply goes out before the
    /// instance is torn down, and the next call is taken then too, so a call queued meanwhile
    /// is not missed by a sleep.
    fn run(&self, i: usize, call: Call, preempted: Option<Preempted<'_>>) -> Option<Next<Work>> {
        let Call {
            function,
            code,
            input,
            reply,
            arrival,
            counted,
            movable: _,
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
        // The thread keeps the call's count until it waits for another call (`wait_for_call`),
        // and back-to-back calls count once: a thread already counted lets this call's go. A
        // suspended call's thread keeps its count: the tasks then give up a core more than
        // they must, never one less.
        let held = ON_CORE.take();
        ON_CORE.set(Some(held.unwrap_or(counted)));
        self.metrics.busy_executors.inc();
        let started = Instant::now();
        let seat = preempted.as_ref().map(|p| p.preemption.seat());
        // A call's budget may run out while it is suspended: it then ends without a core.
        let holds_core = || seat.is_none_or(|s| s.holds_core());
        // Under preemption activity is counted per core, and a call may end on another core.
        let slot = || seat.map_or(i, |s| s.core());
        self.activity.start(slot(), started);
        if let Some(p) = &preempted {
            p.preemption.start(p.basis, started);
        }
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
            let finish = |result: Result<CallOutput, CallError>, log: GuestLog| {
                // Time spent suspended counts as waiting, not as processing.
                let resumed = started + seat.map_or(Duration::ZERO, |s| s.take_suspended());
                let settled = self.ledger.settle(&function, result, log, arrival, resumed);
                if holds_core() {
                    self.activity.end(slot(), settled.processing);
                }
                next = self.next_call(seat);
                if let Some(reply) = reply.take() {
                    let _ = reply.send(settled);
                }
            };
            self.runtime.call_then(call, finish)
        }));
        if let Some(p) = &preempted {
            p.preemption.end();
        }
        if holds_core() {
            self.metrics.busy_executors.dec();
        }
        if let Err(panic) = ran {
            let what = panic_message(&*panic);
            tracing::error!(function = %function.name(), panic = %what, "executor caught a panic");
            // A panic after the reply went out (in the teardown) has nothing left to answer.
            if let Some(reply) = reply.take() {
                let error = InvokeError::Internal(what);
                let resumed = started + seat.map_or(Duration::ZERO, |s| s.take_suspended());
                let settled = self
                    .ledger
                    .settle_failure(&function, error, arrival, resumed);
                if holds_core() {
                    self.activity.end(slot(), settled.processing);
                }
                next = self.next_call(seat);
                let _ = reply.send(settled);
            }
        }
        match holds_core() {
            true => next.or_else(|| self.wait_for_call()),
            false => None,
        }
    }

    /// The next call waiting, unless the executors are stopping or the thread on `seat` holds
    /// no core.
    fn next_call(&self, seat: Option<&Arc<Seat>>) -> Option<Next<Work>> {
        if self.pending.is_shut_down() || seat.is_some_and(|s| !s.holds_core()) {
            return None;
        }
        self.pending.try_take()
    }
}

/// What a caught panic says.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spin_shrinks_only_while_it_keeps_the_submitter_off_its_cpu() {
        let most = Duration::from_micros(50);
        let mut spin = MIN_SPIN;
        for _ in 0..10 {
            spin = next_spin(spin, Found::WokenElsewhere, most);
        }
        assert_eq!(spin, most);
        for _ in 0..10 {
            spin = next_spin(spin, Found::WokenHere, most);
        }
        assert_eq!(spin, MIN_SPIN);
        for _ in 0..10 {
            spin = next_spin(spin, Found::Polling, most);
        }
        assert_eq!(spin, most);
        let off = Duration::ZERO;
        assert_eq!(next_spin(MIN_SPIN, Found::WokenHere, off), off);
        assert_eq!(next_spin(MIN_SPIN, Found::WokenElsewhere, off), off);
    }
}
