//! Preemption on the executors (`mote up --preempt on`): a call that has run for its quantum
//! while a better-ranked call waits is suspended at the next epoch tick, and the better call
//! takes its core. Ranks and the decision are `mote_sched::preempt`'s; this module moves the
//! cores.
//!
//! A call is suspended by parking the thread that runs it, inside the epoch callback (each
//! executor thread registers an [`ExecutorPreemption`], a [`mote_runtime::Preemption`]): it keeps
//! its instance, its stack and its place in the guest, and the warm path pays for no fiber (a
//! call that ends within its quantum is never looked at).
//! So under preemption there are more executor threads than cores, `cores + max_suspended`, and
//! a thread runs guest code only while it holds one of the `cores` *cores*. A core passes from
//! thread to thread by hand-off, never by the OS scheduler:
//!
//! - a thread with a core takes calls from [`Pending`]; a thread without one is a *spare* and
//!   waits on its [`Seat`] until it is given a core, and maybe a call to start with it;
//! - to preempt, the running call's thread takes a spare, swaps itself with the best waiting
//!   call ([`Pending::swap`]), hands its core to whoever runs that one (the spare, for a call that
//!   has not started; its own thread, for a suspended call), and parks until a thread that takes
//!   its resumption from the queue hands it a core back;
//! - at most `max_suspended` calls are suspended at once. At the bound, a call that would be
//!   preempted keeps its core until it ends or until a suspended call leaves, and the refusal is
//!   counted (`mote_preemptions_refused_total`);
//! - a call that sleeps (WASI `poll_oneoff` on clocks) gives its core to a spare for the sleep,
//!   then queues for one like a preempted call: a sleeping call is not a running one;
//! - a suspended call whose budget runs out is stopped on time: its thread wakes at the deadline,
//!   withdraws (the resumption it left in the queue is skipped when taken), and unwinds and
//!   settles the call without a core (platform work, not guest code), then becomes a spare;
//! - when the executors stop, suspended calls run to their end without a core.

use super::call::Call;
use crate::metrics::NodeMetrics;
use crate::pending::{Next, Pending};
use mote_runtime::{Preemption, Resumed};
use mote_sched::{RankBasis, should_yield};
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::cell::Cell;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// How the executors preempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PreemptConfig {
    /// How long a call runs before a better-ranked call may take its core.
    pub quantum: Duration,
    /// The most calls suspended at once (each holds its instance and a parked thread).
    pub max_suspended: usize,
    /// How many times its expected remaining time a call may wait before later calls can no
    /// longer overtake it (`mote_sched::preempt`).
    pub aging: u64,
}

impl Default for PreemptConfig {
    fn default() -> Self {
        Self {
            quantum: Duration::from_millis(2),
            max_suspended: 32,
            aging: mote_sched::DEFAULT_AGING,
        }
    }
}

/// What waits in the executors' queue: a call that has not started, or the resumption of one
/// that was preempted.
pub(crate) enum Work {
    Call(Call),
    Resume(Resumption),
}

/// A suspended call's place in the queue: its thread's seat and which suspension it is, so an
/// entry left behind by a call that was stopped meanwhile resumes nothing.
pub(crate) struct Resumption {
    seat: Arc<Seat>,
    ticket: u64,
}

impl Resumption {
    /// Hands the suspended call `core`, the core of the thread that took this from the queue;
    /// false if the call is no longer waiting for it (stopped for its budget, or the executors
    /// stopping).
    pub(crate) fn resume(&self, core: usize) -> bool {
        let mut state = self.seat.lock();
        if state.stopped || state.waiting != Some(self.ticket) {
            return false;
        }
        state.waiting = None;
        state.given = Some((core, None));
        self.seat.wake.notify_one();
        true
    }
}

/// The ticket a spare waits under: resumptions carry tickets from 1 up.
const SPARE: u64 = 0;

struct SeatState {
    /// The ticket the thread is parked under, if it is.
    waiting: Option<u64>,
    /// A core (by index) handed to the parked thread, with a call to start for a spare.
    given: Option<(usize, Option<Next<Work>>)>,
    /// The executors are stopping.
    stopped: bool,
    /// The last ticket used.
    tickets: u64,
}

/// How a parked thread woke.
enum Woken {
    /// It was handed a core, with a call to start if it was a spare.
    Core(Option<Next<Work>>),
    /// Its deadline passed first.
    Expired,
    /// The executors are stopping.
    Stopped,
}

/// One executor thread's place: where it parks without a core, and what its current call spent
/// suspended.
pub(crate) struct Seat {
    state: Mutex<SeatState>,
    wake: Condvar,
    /// Whether the thread holds a core; written only by the thread itself.
    holds_core: AtomicBool,
    /// Which core it holds (or last held): cores are numbered so that what each runs can be
    /// counted per core as it passes between threads.
    core: AtomicUsize,
    /// How long the thread's current call has been suspended, so its processing time counts
    /// only the time it ran.
    suspended_ns: AtomicU64,
}

impl Seat {
    /// The seat of an executor thread holding core `core` if `holds_core`.
    pub(crate) fn new(holds_core: bool, core: usize) -> Self {
        Self {
            state: Mutex::new(SeatState {
                waiting: None,
                given: None,
                stopped: false,
                tickets: SPARE,
            }),
            wake: Condvar::new(),
            holds_core: AtomicBool::new(holds_core),
            core: AtomicUsize::new(core),
            suspended_ns: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, SeatState> {
        // Every update under this lock is a few field writes a panic cannot leave half done.
        self.state.lock()
    }

    /// Whether the thread holds a core.
    pub(crate) fn holds_core(&self) -> bool {
        self.holds_core.load(Ordering::Relaxed)
    }

    /// The core the thread holds (or last held).
    pub(crate) fn core(&self) -> usize {
        self.core.load(Ordering::Relaxed)
    }

    /// Records that the thread handed its core to a suspended call it resumed.
    pub(crate) fn hand_over_core(&self) {
        self.holds_core.store(false, Ordering::Relaxed);
    }

    /// Takes (and resets) how long the current call was suspended. Only the seat's own thread
    /// writes the count, so a plain load and store do: no read-modify-write on the warm path.
    pub(crate) fn take_suspended(&self) -> Duration {
        let ns = self.suspended_ns.load(Ordering::Relaxed);
        if ns != 0 {
            self.suspended_ns.store(0, Ordering::Relaxed);
        }
        Duration::from_nanos(ns)
    }

    /// Adds `d` to the time the current call was suspended (on the seat's own thread).
    fn add_suspended(&self, d: Duration) {
        let ns = self.suspended_ns.load(Ordering::Relaxed);
        self.suspended_ns
            .store(ns + d.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Marks the thread as waiting under a new suspension ticket, before its resumption is
    /// queued (a thread could take it at once).
    fn expect_resumption(&self) -> u64 {
        let mut state = self.lock();
        state.tickets += 1;
        state.waiting = Some(state.tickets);
        state.tickets
    }

    /// Parks until the thread is handed a core, until `deadline`, or until the executors stop.
    fn park(&self, deadline: Option<Instant>) -> Woken {
        let mut state = self.lock();
        loop {
            if let Some((core, work)) = state.given.take() {
                state.waiting = None;
                self.core.store(core, Ordering::Relaxed);
                self.holds_core.store(true, Ordering::Relaxed);
                return Woken::Core(work);
            }
            if state.stopped {
                state.waiting = None;
                return Woken::Stopped;
            }
            match deadline {
                None => self.wake.wait(&mut state),
                Some(deadline) => {
                    if Instant::now() >= deadline {
                        state.waiting = None;
                        return Woken::Expired;
                    }
                    self.wake.wait_until(&mut state, deadline);
                }
            }
        }
    }

    /// Hands this spare `core` and `work` to start with it; hands `work` back if the thread is
    /// not a waiting spare.
    // The error is the caller's own work handed back by value; boxing it would allocate at
    // every hand-off to a spare.
    #[allow(clippy::result_large_err)]
    fn give(&self, core: usize, work: Option<Next<Work>>) -> Result<(), Option<Next<Work>>> {
        let mut state = self.lock();
        if state.waiting != Some(SPARE) || state.stopped {
            return Err(work);
        }
        state.waiting = None;
        state.given = Some((core, work));
        self.wake.notify_one();
        Ok(())
    }

    /// Wakes the thread if it is parked, and keeps it from parking again.
    pub(crate) fn stop(&self) {
        self.lock().stopped = true;
        self.wake.notify_all();
    }
}

/// The executors' preemption state shared by their threads.
pub(crate) struct Suspensions {
    config: PreemptConfig,
    pending: Arc<Pending<Work>>,
    metrics: Arc<NodeMetrics>,
    /// Threads without a core, waiting to be handed one.
    spares: Mutex<Vec<Arc<Seat>>>,
    suspended: AtomicUsize,
}

impl Suspensions {
    pub(crate) fn new(
        config: PreemptConfig,
        pending: Arc<Pending<Work>>,
        metrics: Arc<NodeMetrics>,
    ) -> Self {
        Self {
            config,
            pending,
            metrics,
            spares: Mutex::new(Vec::new()),
            suspended: AtomicUsize::new(0),
        }
    }

    pub(crate) fn config(&self) -> PreemptConfig {
        self.config
    }

    /// Calls suspended now.
    pub(crate) fn suspended(&self) -> usize {
        self.suspended.load(Ordering::Relaxed)
    }

    fn spares(&self) -> MutexGuard<'_, Vec<Arc<Seat>>> {
        self.spares.lock()
    }

    /// Parks `seat`'s thread, which has no core, until it is handed one (with the call to start,
    /// if any); `None` once the executors stop.
    pub(crate) fn wait_as_spare(&self, seat: &Arc<Seat>) -> Option<Option<Next<Work>>> {
        seat.holds_core.store(false, Ordering::Relaxed);
        seat.lock().waiting = Some(SPARE);
        self.spares().push(seat.clone());
        match seat.park(None) {
            Woken::Core(work) => Some(work),
            Woken::Expired | Woken::Stopped => None,
        }
    }

    /// Makes room for one more suspended call: a place under the bound and a spare thread to
    /// take the core. `None` (the call keeps its core) at the bound, or if no spare is back in
    /// the pool yet.
    fn reserve(&self) -> Option<Arc<Seat>> {
        if self.suspended.fetch_add(1, Ordering::Relaxed) >= self.config.max_suspended {
            self.suspended.fetch_sub(1, Ordering::Relaxed);
            self.metrics.preemptions_refused.inc();
            return None;
        }
        let spare = self.spares().pop();
        if spare.is_none() {
            self.suspended.fetch_sub(1, Ordering::Relaxed);
        }
        spare
    }

    /// Gives back what [`Suspensions::reserve`] made room with.
    fn unreserve(&self, spare: Arc<Seat>) {
        self.spares().push(spare);
        self.suspended.fetch_sub(1, Ordering::Relaxed);
    }

    /// Counts `seat`'s call as suspended from now: its thread no longer holds a core.
    fn suspended_now(&self, seat: &Seat) {
        seat.holds_core.store(false, Ordering::Relaxed);
        self.metrics.suspended_calls.inc();
        self.metrics.busy_executors.dec();
    }

    /// Parks `seat`'s suspended call until it is handed a core or `deadline` passes, counting the
    /// time since `since` as suspended.
    fn park(&self, seat: &Seat, deadline: Instant, since: Instant) -> Resumed {
        let woken = seat.park(Some(deadline));
        seat.add_suspended(since.elapsed());
        self.suspended.fetch_sub(1, Ordering::Relaxed);
        self.metrics.suspended_calls.dec();
        match woken {
            Woken::Core(_) => {
                self.metrics.busy_executors.inc();
                Resumed::Running
            }
            Woken::Expired => Resumed::Expired,
            // Run on without a core: the executors are stopping.
            Woken::Stopped => Resumed::Running,
        }
    }

    /// Suspends the call running on `seat`'s thread, ranked `rank` from `basis` after
    /// `attained_ns`, if a better call waits and the bound allows: parks the thread until the
    /// call may run again. `None` if the call was not suspended.
    fn suspend(
        &self,
        seat: &Arc<Seat>,
        basis: RankBasis,
        attained_ns: u64,
        rank: u64,
        deadline: Instant,
    ) -> Option<Resumed> {
        let spare = self.reserve()?;
        let resumption = Work::Resume(Resumption {
            seat: seat.clone(),
            ticket: seat.expect_resumption(),
        });
        let Ok(next) = self.pending.swap(basis, attained_ns, rank, resumption) else {
            seat.lock().waiting = None;
            self.unreserve(spare);
            return None;
        };
        let since = Instant::now();
        self.suspended_now(seat);
        self.metrics.preemptions.inc();
        self.hand_core(next, spare, seat.core());
        Some(self.park(seat, deadline, since))
    }

    /// Hands `core`, the core of a thread that was just suspended, to whoever runs `next`.
    fn hand_core(&self, next: Next<Work>, spare: Arc<Seat>, core: usize) {
        let given = match &next.work {
            Work::Resume(resumption) if resumption.resume(core) => {
                self.spares().push(spare);
                return;
            }
            // A resumption left behind by a call stopped meanwhile: the spare takes the core
            // and the next call from the queue.
            Work::Resume(_) => spare.give(core, None),
            Work::Call(_) => spare.give(core, Some(next)),
        };
        assert!(given.is_ok(), "spares in the pool wait for a core");
    }

    /// Gives the core of `seat`'s thread to a spare while its call waits in the host; false (it
    /// keeps the core) at the bound.
    fn release_for_wait(&self, seat: &Seat) -> bool {
        let Some(spare) = self.reserve() else {
            return false;
        };
        self.suspended_now(seat);
        let given = spare.give(seat.core(), None);
        assert!(given.is_ok(), "spares in the pool wait for a core");
        true
    }

    /// After a wait in the host that [`Suspensions::release_for_wait`] gave the core up for:
    /// queues the call at `rank` from `basis` after `attained_ns` and parks until it may run
    /// again. `since` is when it gave the core up.
    fn wait_ended(
        &self,
        seat: &Arc<Seat>,
        basis: RankBasis,
        attained_ns: u64,
        deadline: Instant,
        since: Instant,
    ) -> Resumed {
        let resumption = Work::Resume(Resumption {
            seat: seat.clone(),
            ticket: seat.expect_resumption(),
        });
        if self
            .pending
            .requeue(basis, attained_ns, resumption)
            .is_err()
        {
            // The executors are stopping: run on without a core.
            seat.lock().waiting = None;
            seat.add_suspended(since.elapsed());
            self.suspended.fetch_sub(1, Ordering::Relaxed);
            self.metrics.suspended_calls.dec();
            return Resumed::Running;
        }
        self.park(seat, deadline, since)
    }
}

/// What an executor thread registers with the runtime
/// ([`mote_runtime::preempt_calls_on_this_thread`]): its seat, and the call it runs now.
pub(crate) struct ExecutorPreemption {
    seat: Arc<Seat>,
    suspensions: Arc<Suspensions>,
    call: Cell<Option<Running>>,
}

/// The call an executor thread runs, as preemption sees it.
#[derive(Clone, Copy)]
struct Running {
    basis: RankBasis,
    /// Service attained before the current slice.
    attained: Duration,
    /// When the current slice began, or when the call gave its core up to wait in the host.
    slice_start: Instant,
}

impl ExecutorPreemption {
    pub(crate) fn new(seat: Arc<Seat>, suspensions: Arc<Suspensions>) -> Self {
        Self {
            seat,
            suspensions,
            call: Cell::new(None),
        }
    }

    /// The seat of the thread this preemption was registered on.
    pub(crate) fn seat(&self) -> &Arc<Seat> {
        &self.seat
    }

    /// A call ranked from `basis` starts on this thread at `started` (`None`: it cannot be
    /// preempted).
    pub(crate) fn start(&self, basis: Option<RankBasis>, started: Instant) {
        self.call.set(basis.map(|basis| Running {
            basis,
            attained: Duration::ZERO,
            slice_start: started,
        }));
    }

    /// The call has ended.
    pub(crate) fn end(&self) {
        self.call.set(None);
    }
}

impl Preemption for ExecutorPreemption {
    fn tick(&self, now: Instant, deadline: Instant) -> Resumed {
        let Some(mut call) = self.call.get() else {
            return Resumed::Running;
        };
        let slice = now.saturating_duration_since(call.slice_start);
        let attained = (call.attained + slice).as_nanos() as u64;
        let rank = call.basis.rank(attained);
        let best = self.suspensions.pending.best_rank();
        let quantum = self.suspensions.config.quantum.as_nanos() as u64;
        if !should_yield(rank, best, slice.as_nanos() as u64, quantum) {
            return Resumed::Running;
        }
        let Some(resumed) = self
            .suspensions
            .suspend(&self.seat, call.basis, attained, rank, deadline)
        else {
            return Resumed::Running;
        };
        call.attained += slice;
        call.slice_start = Instant::now();
        self.call.set(Some(call));
        resumed
    }

    fn release_for_wait(&self) -> bool {
        let Some(mut call) = self.call.get() else {
            return false;
        };
        if !self.suspensions.release_for_wait(&self.seat) {
            return false;
        }
        let now = Instant::now();
        call.attained += now.saturating_duration_since(call.slice_start);
        call.slice_start = now;
        self.call.set(Some(call));
        true
    }

    fn wait_ended(&self, deadline: Instant) -> Resumed {
        let Some(mut call) = self.call.get() else {
            return Resumed::Running;
        };
        let attained = call.attained.as_nanos() as u64;
        let resumed = self.suspensions.wait_ended(
            &self.seat,
            call.basis,
            attained,
            deadline,
            call.slice_start,
        );
        call.slice_start = Instant::now();
        self.call.set(Some(call));
        resumed
    }
}

#[cfg(test)]
mod tests;
