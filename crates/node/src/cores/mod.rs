//! Who holds which of the node's cores, and how a core passes from thread to thread.
//!
//! [`OnCore`] is the one thing that says "this runs on a core": whoever runs guest code holds
//! one (an executor, a reader running a call where it read it, a confined caller's thread), and
//! one running call holds at most one, so no more calls run at once than there are cores. It
//! carries the call's count in [`JobCores`], so jobs' tasks give way to calls for as long as a
//! core is held, and moves with the core from holder to holder.
//!
//! Which core is free, and the protocol by which a core passes to waiting work, is
//! [`mote_sched::CoreSet`]'s (lock-free, checked with loom). This module carries the core to
//! whoever runs that work:
//!
//! - work waits in `pending` in the policy's order ([`Work`]): a call that has not started, or
//!   a [`Resumption`] of one that gave its core up (preempted, or waiting on I/O);
//! - a call that has not started runs on an executor thread: a *spare* (an executor without a
//!   core, parked on its [`Seat`]) is handed the core and the call;
//! - a resumption goes back to whoever waits for it: a parked thread ([`Resumption::Thread`],
//!   an executor's or a caller's blocking call), or a task ([`Resumption::Task`], a call run as
//!   a future, woken through the relay, since the thread handing the core on may be confined);
//! - a holder that is done gives its core to what waits next ([`Cores::release`]); an executor
//!   takes that work itself ([`Cores::next_or_idle`]), and joins the spares before it lets its
//!   core go, so that a spare is always there for a call: there are `cores + max_suspended`
//!   executors, at most `cores` hold a core and at most `max_suspended` are suspended, so
//!   whenever a thread that is not an executor holds a core, at least one executor is a spare.
//!
//! Modules: `seat` (a parked thread), `waiter` (a task waiting for a core, and the gate of a
//! call run as a future).

mod seat;
mod waiter;

pub(crate) use seat::{Seat, Woken};
pub(crate) use waiter::{CoreGate, CoreWaiter, gated};

use crate::executor::Call;
use crate::metrics::NodeMetrics;
use crate::pending::{Next, Pending, Refused};
use mote_confine::Relay;
use mote_runtime::{CallInFlight, JobCores};
use mote_sched::{CoreSet, FunctionKey, RankBasis, Waiting};
use parking_lot::Mutex;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// What waits for a core.
pub(crate) enum Work {
    /// A call that has not started.
    Call(Call),
    /// A call that gave its core up and waits to run again.
    Resume(Resumption),
}

/// Who a suspended call's core goes back to.
pub(crate) enum Resumption {
    /// A thread parked on its seat under `ticket` (a blocking call).
    Thread { seat: Arc<Seat>, ticket: u64 },
    /// A task (a call run as a future).
    Task(Arc<CoreWaiter>),
}

impl Resumption {
    /// Hands `on` to the call waiting for it; hands it back if the call no longer waits
    /// (stopped for its budget, or gone).
    fn resume(&self, on: OnCore) -> Result<(), OnCore> {
        match self {
            Self::Thread { seat, ticket } => seat.resume(*ticket, on),
            Self::Task(waiter) => waiter.give(on),
        }
    }
}

/// A core held: by the thread running a call on it, or on its way to the one that will.
#[derive(Debug)]
pub(crate) struct OnCore {
    index: usize,
    _counted: CallInFlight,
}

impl OnCore {
    /// Which core (numbered from 0): what runs is counted per core.
    pub(crate) fn index(&self) -> usize {
        self.index
    }
}

/// The queue as the hand-off protocol sees it.
struct Queue<'a>(&'a Pending<Work>);

impl Waiting for Queue<'_> {
    type Work = Next<Work>;

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn take(&self) -> Option<Next<Work>> {
        self.0.try_take()
    }
}

/// The node's cores, what waits for them, and the executors that wait for a core.
pub(crate) struct Cores {
    set: CoreSet,
    pending: Arc<Pending<Work>>,
    /// Executors without a core, parked on their seats.
    spares: Mutex<Vec<Arc<Seat>>>,
    /// Calls suspended now (preempted, or waiting in the host), and the most there may be.
    suspended: AtomicUsize,
    max_suspended: usize,
    job_cores: Arc<JobCores>,
    relay: Arc<Relay>,
    metrics: Arc<NodeMetrics>,
}

impl Cores {
    /// `count` cores, all free, for the work in `pending`; at most `max_suspended` calls
    /// suspended at once.
    pub(crate) fn new(
        count: usize,
        max_suspended: usize,
        pending: Arc<Pending<Work>>,
        job_cores: Arc<JobCores>,
        relay: Arc<Relay>,
        metrics: Arc<NodeMetrics>,
    ) -> Self {
        Self {
            set: CoreSet::new(count),
            pending,
            spares: Mutex::new(Vec::new()),
            suspended: AtomicUsize::new(0),
            max_suspended,
            job_cores,
            relay,
            metrics,
        }
    }

    /// How many cores there are.
    pub(crate) fn count(&self) -> usize {
        self.set.count()
    }

    /// What waits for the cores.
    pub(crate) fn pending(&self) -> &Arc<Pending<Work>> {
        &self.pending
    }

    /// The relay that wakes tasks waiting for a core.
    pub(crate) fn relay(&self) -> &Arc<Relay> {
        &self.relay
    }

    /// Core `index`, taken free: counted busy, and in the jobs' count.
    fn on(&self, index: usize) -> OnCore {
        self.metrics.busy_executors.inc();
        OnCore {
            index,
            _counted: self.job_cores.call(),
        }
    }

    /// A core for a call that the policy would run next anyway: one is free and nothing waits.
    #[inline]
    pub(crate) fn take_if_idle(&self) -> Option<OnCore> {
        let index = self.set.take_if_idle(&Queue(&self.pending))?;
        Some(self.on(index))
    }

    /// Queues `work` of `function`, which arrived at `arrival`, and hands a free core (if any)
    /// to whatever should run next. A refused call is handed back with the reason.
    // The error hands the caller's work back by value; boxing it would allocate per refusal.
    #[allow(clippy::result_large_err)]
    pub(crate) fn submit(
        &self,
        function: FunctionKey,
        arrival: Instant,
        work: Work,
    ) -> Result<(), (Refused, Work)> {
        self.pending.push(function, arrival, work)?;
        self.dispatch();
        Ok(())
    }

    /// Queues the resumption of a call that gave its core up after running for `attained_ns`,
    /// at its rank from `basis`, beyond the bound on waiting calls (it was accepted already).
    /// Hands it back once the node is stopping, or under arrival order (which ranks nothing).
    pub(crate) fn requeue(
        &self,
        basis: RankBasis,
        attained_ns: u64,
        resumption: Resumption,
    ) -> Result<(), Resumption> {
        let queued = self
            .pending
            .requeue(basis, attained_ns, Work::Resume(resumption));
        self.queued(queued)
    }

    /// Queues the resumption of a call of `function` that arrived at `arrival` and has not
    /// been ranked (a request to a component, between its polls) as if it arrived then, beyond
    /// the bound on waiting calls. Hands it back once the node is stopping.
    pub(crate) fn queue_resumption(
        &self,
        function: FunctionKey,
        arrival: Instant,
        resumption: Resumption,
    ) -> Result<(), Resumption> {
        let queued = self
            .pending
            .push_accepted(function, arrival, Work::Resume(resumption));
        self.queued(queued)
    }

    fn queued(&self, queued: Result<(), Work>) -> Result<(), Resumption> {
        match queued {
            Ok(()) => {
                self.dispatch();
                Ok(())
            }
            Err(Work::Resume(r)) => Err(r),
            Err(Work::Call(_)) => unreachable!("a resumption was queued"),
        }
    }

    /// Hands a free core to what waits, if there are both.
    fn dispatch(&self) {
        if let Some((index, next)) = self.set.dispatch(&Queue(&self.pending)) {
            self.hand(self.on(index), next, None);
        }
    }

    /// A holder that does not run queued work itself (a reader, a confined caller's thread) is
    /// done with `on`: it goes to what waits next, or is free.
    pub(crate) fn release(&self, on: OnCore) {
        let OnCore { index, _counted } = on;
        // Counted idle before it is freed: a taker may count it busy at once.
        self.metrics.busy_executors.dec();
        if let Some((index, next)) = self.set.release(index, &Queue(&self.pending)) {
            self.metrics.busy_executors.inc();
            self.hand(OnCore { index, _counted }, next, None);
        }
    }

    /// An executor, on `seat`, is done with its call on `on`: the next work to run on the core
    /// it holds, or `None` once it has joined the spares and let the core go (perhaps back to
    /// itself, with work that came meanwhile: it finds it when it parks).
    pub(crate) fn next_or_idle(
        &self,
        on: OnCore,
        seat: &Arc<Seat>,
    ) -> Option<(OnCore, Next<Work>)> {
        // Once the node stops, what is queued is answered, not run.
        if !self.pending.is_shut_down()
            && let Some(next) = self.pending.try_take()
        {
            return Some((on, next));
        }
        self.join_spares(seat);
        self.release(on);
        None
    }

    /// `seat`'s executor, which holds no core, waits as a spare from now: it may be handed a
    /// core (and a call) before it parks.
    pub(crate) fn join_spares(&self, seat: &Arc<Seat>) {
        seat.expect_core();
        self.spares.lock().push(seat.clone());
    }

    /// Hands `on` to the call `resumption` resumes; hands it back if that call no longer
    /// waits.
    pub(crate) fn resume(&self, resumption: Resumption, on: OnCore) -> Result<(), OnCore> {
        resumption.resume(on)
    }

    /// Hands `on` and `next` to whoever runs `next`: the call it resumes, else a spare
    /// executor (`spare`, if the caller reserved one).
    fn hand(&self, on: OnCore, next: Next<Work>, spare: Option<Arc<Seat>>) {
        let Next { work, basis } = next;
        match work {
            Work::Resume(resumption) => match resumption.resume(on) {
                Ok(()) => {
                    if let Some(spare) = spare {
                        self.spares.lock().push(spare);
                    }
                }
                // Left behind by a call that stopped meanwhile: the core goes on.
                Err(on) => match spare {
                    Some(spare) => self.give(spare, on, None),
                    None => self.release(on),
                },
            },
            Work::Call(call) => {
                let next = Some(Next {
                    work: Work::Call(call),
                    basis,
                });
                match spare.or_else(|| self.spares.lock().pop()) {
                    Some(spare) => self.give(spare, on, next),
                    None => self.no_spare(on, next),
                }
            }
        }
    }

    /// Lends `on` to `spare` while the call that holds it waits in the host: the spare runs
    /// what waits, and the call queues for a core when its wait is over.
    pub(crate) fn lend(&self, spare: Arc<Seat>, on: OnCore) {
        self.give(spare, on, None);
    }

    /// Gives a spare a core, and the work to start with; a spare that stopped (the node is
    /// stopping) hands them back, and the work is answered as the queue's is at shutdown.
    fn give(&self, spare: Arc<Seat>, on: OnCore, next: Option<Next<Work>>) {
        if let Err((on, next)) = spare.give(on, next) {
            drop(on);
            if let Some(Next {
                work: Work::Call(call),
                ..
            }) = next
            {
                call.shut_down();
            }
        }
    }

    /// No spare for a call: the accounting above says this cannot happen; if it does, the call
    /// goes back to the queue and the core is let go, so that nothing is lost.
    fn no_spare(&self, on: OnCore, next: Option<Next<Work>>) {
        debug_assert!(false, "no spare executor for a call");
        tracing::error!("no spare executor for a call; it waits for the next core");
        if let Some(Next {
            work: Work::Call(call),
            ..
        }) = next
        {
            let (key, arrival) = (call.function.key(), call.arrival);
            if let Err(Work::Call(call)) =
                self.pending.push_accepted(key, arrival, Work::Call(call))
            {
                call.shut_down();
            }
        }
        self.release(on);
    }

    /// Parks `seat`'s executor, which has no core, until it is handed one (with the work to
    /// start with, if any); `None` once the executors stop.
    pub(crate) fn wait_as_spare(&self, seat: &Seat) -> Option<(OnCore, Option<Next<Work>>)> {
        match seat.park(None) {
            Woken::Core(on, work) => Some((on, work)),
            Woken::Expired | Woken::Stopped => None,
        }
    }

    /// Makes room for one more suspended call, and finds the spare that will take its core:
    /// `None` (the call keeps its core) at the bound, or if no spare is there. A task's
    /// suspension (`for_thread` false) needs no spare of its own but still counts.
    pub(crate) fn reserve(&self, for_thread: bool) -> Option<Option<Arc<Seat>>> {
        if self.suspended.fetch_add(1, Ordering::Relaxed) >= self.max_suspended {
            self.suspended.fetch_sub(1, Ordering::Relaxed);
            self.metrics.preemptions_refused.inc();
            return None;
        }
        if !for_thread {
            return Some(None);
        }
        let spare = self.spares.lock().pop();
        if spare.is_none() {
            self.suspended.fetch_sub(1, Ordering::Relaxed);
        }
        spare.map(Some)
    }

    /// Gives back what [`Cores::reserve`] made room with.
    pub(crate) fn unreserve(&self, spare: Option<Arc<Seat>>) {
        if let Some(spare) = spare {
            self.spares.lock().push(spare);
        }
        self.suspended.fetch_sub(1, Ordering::Relaxed);
    }

    /// A suspended call is no longer suspended (it got a core back, or gave up waiting).
    pub(crate) fn unsuspended(&self) {
        self.suspended.fetch_sub(1, Ordering::Relaxed);
        self.metrics.suspended_calls.dec();
    }

    /// Counts a call as suspended from now.
    pub(crate) fn suspended_now(&self) {
        self.metrics.suspended_calls.inc();
        self.metrics.preemptions.inc();
    }

    /// Calls suspended now.
    pub(crate) fn suspended(&self) -> usize {
        self.suspended.load(Ordering::Relaxed)
    }

    /// Preempts the call running on `on`, ranked `rank` from `basis` after `attained_ns`, if a
    /// waiting call still outranks it: queues `resumption` at that rank and hands the core to
    /// the best waiting work (with `spare` to run it if it is a call). Hands the core (and the
    /// spare) back if nothing outranks the call any more.
    pub(crate) fn swap(
        &self,
        on: OnCore,
        basis: RankBasis,
        attained_ns: u64,
        rank: u64,
        resumption: Resumption,
        spare: Option<Arc<Seat>>,
    ) -> Result<(), (OnCore, Option<Arc<Seat>>)> {
        match self
            .pending
            .swap(basis, attained_ns, rank, Work::Resume(resumption))
        {
            Ok(next) => {
                self.hand(on, next, spare);
                Ok(())
            }
            Err(_) => Err((on, spare)),
        }
    }

    /// The rank of the best waiting work (`u64::MAX` if none, or without preemption).
    #[inline]
    pub(crate) fn best_rank(&self) -> u64 {
        self.pending.best_rank()
    }

    /// Stops: refuses new work, and wakes every parked thread (a spare stops, a suspended
    /// call runs on to its end without a core).
    pub(crate) fn stop(&self, seats: &[Arc<Seat>]) {
        self.pending.shut_down();
        for seat in seats {
            seat.stop();
        }
    }

    /// Once the executors stopped: answers every call still queued (it never ran), and lets
    /// every task still waiting for a core run on without one.
    pub(crate) fn drain_stopped(&self) {
        while let Some(next) = self.pending.try_take() {
            match next.work {
                Work::Call(call) => call.shut_down(),
                Work::Resume(Resumption::Task(waiter)) => waiter.stop(),
                // Its thread was woken by `stop`.
                Work::Resume(Resumption::Thread { .. }) => {}
            }
        }
    }
}

/// Where a call's preemption or gate notes which core it runs on and how long it was
/// suspended, for the run function to read as the call settles.
#[derive(Default)]
pub(crate) struct Tally {
    core: AtomicUsize,
    suspended_ns: AtomicU64,
}

impl Tally {
    /// The call runs on `core` from now.
    pub(crate) fn on_core(&self, core: usize) {
        self.core.store(core, Ordering::Relaxed);
    }

    /// The call was suspended for `d` more.
    pub(crate) fn suspended(&self, d: Duration) {
        self.suspended_ns
            .fetch_add(d.as_nanos() as u64, Ordering::Relaxed);
    }

    pub(crate) fn core(&self) -> usize {
        self.core.load(Ordering::Relaxed)
    }

    pub(crate) fn suspended_for(&self) -> Duration {
        Duration::from_nanos(self.suspended_ns.load(Ordering::Relaxed))
    }
}

#[cfg(test)]
mod tests;
