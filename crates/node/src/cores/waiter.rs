//! Calls run as futures, on the threads that read them: how such a call waits for a core
//! ([`CoreWaiter`]), holds one while it runs and gives it up when it is preempted
//! ([`CoreGate`], the call's [`PhaseGate`]), or holds one only while it computes ([`gated`]: a
//! `wasi:http` component, which waits on bodies and outbound responses between polls).
//!
//! A task waiting for a core is a [`super::Resumption::Task`] in the queue; whoever takes it
//! hands it the core and wakes the task through the relay, since that thread may be confined
//! (an executor, or another reader).

use super::{Cores, OnCore, Resumption, Tally};
use mote_runtime::{GateFuture, PhaseGate};
use mote_sched::{FunctionKey, RankBasis, should_yield};
use parking_lot::Mutex;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

enum State {
    /// Waiting, with the task's waker once it has polled.
    Waiting(Option<Waker>),
    /// Handed a core, at this instant.
    Given(OnCore, Instant),
    /// The core was taken by the call.
    Taken,
    /// The call stopped waiting: a core handed now goes on.
    Left,
    /// The node stopped: the call runs on without a core.
    Stopped,
}

/// A task's place in the queue for a core.
pub(crate) struct CoreWaiter {
    state: Mutex<State>,
    relay: Arc<mote_confine::Relay>,
}

impl CoreWaiter {
    pub(crate) fn new(cores: &Cores) -> Arc<Self> {
        Arc::new(Self {
            state: Mutex::new(State::Waiting(None)),
            relay: cores.relay().clone(),
        })
    }

    /// Hands the waiting task `on`; hands it back if the task left.
    pub(crate) fn give(&self, on: OnCore) -> Result<(), OnCore> {
        let mut state = self.state.lock();
        match std::mem::replace(&mut *state, State::Left) {
            State::Waiting(waker) => {
                *state = State::Given(on, Instant::now());
                drop(state);
                if let Some(waker) = waker {
                    self.relay.wake(waker);
                }
                Ok(())
            }
            other => {
                *state = other;
                Err(on)
            }
        }
    }

    /// The node stopped: wakes the task, which runs on without a core.
    pub(crate) fn stop(&self) {
        let mut state = self.state.lock();
        if let State::Waiting(waker) = std::mem::replace(&mut *state, State::Stopped) {
            drop(state);
            if let Some(waker) = waker {
                self.relay.wake(waker);
            }
        }
    }

    /// The core handed over, and when, if one was.
    pub(super) fn take(&self) -> Option<(OnCore, Instant)> {
        let mut state = self.state.lock();
        match std::mem::replace(&mut *state, State::Taken) {
            State::Given(on, at) => Some((on, at)),
            other => {
                *state = other;
                None
            }
        }
    }

    /// Stops waiting: a core handed meanwhile is returned, to be let go.
    pub(super) fn leave(&self) -> Option<OnCore> {
        match std::mem::replace(&mut *self.state.lock(), State::Left) {
            State::Given(on, _) => Some(on),
            _ => None,
        }
    }

    /// Resolves once a core was handed over (it stays here until taken).
    fn given(self: Arc<Self>) -> Given {
        Given(self)
    }
}

/// The wait for [`CoreWaiter::give`].
struct Given(Arc<CoreWaiter>);

impl Future for Given {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.0.state.lock();
        match &mut *state {
            State::Waiting(waker) => {
                *waker = Some(cx.waker().clone());
                Poll::Pending
            }
            _ => Poll::Ready(()),
        }
    }
}

/// Waits in the queue for a core for a call of `function` that arrived at `arrival` (ranked
/// from `basis` after `attained_ns` if it ran before, else as a new arrival); `None` once the
/// node is stopping.
async fn queue_for_core(
    cores: &Cores,
    function: FunctionKey,
    arrival: Instant,
    basis: Option<RankBasis>,
    attained_ns: u64,
) -> Option<(OnCore, Instant)> {
    let waiter = CoreWaiter::new(cores);
    let resumption = Resumption::Task(waiter.clone());
    let queued = match basis {
        Some(basis) => cores.requeue(basis, attained_ns, resumption),
        None => cores.queue_resumption(function, arrival, resumption),
    };
    if queued.is_err() {
        return None;
    }
    // If this future is dropped here, the waiter is left in the queue: whoever takes it finds
    // nobody and hands the core on.
    let leave = LeaveOnDrop {
        waiter: &waiter,
        cores,
    };
    waiter.clone().given().await;
    std::mem::forget(leave);
    waiter.take()
}

/// Leaves a wait that was dropped, letting go of a core handed meanwhile.
struct LeaveOnDrop<'a> {
    waiter: &'a CoreWaiter,
    cores: &'a Cores,
}

impl Drop for LeaveOnDrop<'_> {
    fn drop(&mut self) {
        if let Some(on) = self.waiter.leave() {
            self.cores.release(on);
        }
    }
}

/// How a call run as a future is preempted: what its rank is computed from and what it has
/// attained.
#[derive(Clone, Copy)]
struct Running {
    basis: RankBasis,
    /// Service attained before the current slice.
    attained: Duration,
    /// When the current slice began.
    slice_start: Instant,
}

/// The gate of a call run as a future on a reader: it holds a core from its start; under a
/// preemptive policy, once it has run for its quantum while a better-ranked call waits, it
/// hands its core to that call at an epoch tick and waits (without running) until it is handed
/// one back.
pub(crate) struct CoreGate<'a> {
    cores: &'a Cores,
    function: FunctionKey,
    arrival: Instant,
    on: Option<OnCore>,
    /// Where a core comes back after the call gave its own up, and since when it waits.
    waiter: Option<(Arc<CoreWaiter>, Instant)>,
    /// Set once the call is ranked: when it first runs past its quantum.
    running: Option<Running>,
    /// When the call started, and its quantum if it may be preempted.
    started: Instant,
    quantum: Option<Duration>,
    /// Where the call's core and time suspended are noted.
    tally: &'a Tally,
    /// When the call last let its reader's other tasks run (at first: when it started).
    yielded: Instant,
}

/// How long a call runs on its reader before it lets the reader's other connections be served
/// at an epoch tick. Shorter calls never yield: a yield costs a trip through the runtime's I/O
/// driver, which is more than most calls take.
const YIELD_EVERY: Duration = Duration::from_micros(200);

impl<'a> CoreGate<'a> {
    /// The gate of a call of `function` that arrived at `arrival` and started at `started` on
    /// `on`, preemptible after `quantum` (`None`: never); its core and time suspended are noted
    /// in `tally`. The call is ranked (a lock on the queue) only once it has run its quantum.
    pub(crate) fn new(
        cores: &'a Cores,
        on: OnCore,
        function: FunctionKey,
        arrival: Instant,
        started: Instant,
        quantum: Option<Duration>,
        tally: &'a Tally,
    ) -> Self {
        Self {
            cores,
            function,
            arrival,
            on: Some(on),
            waiter: None,
            running: None,
            started,
            quantum,
            tally,
            yielded: started,
        }
    }

    /// How the call is ranked, once it has run `slice` of its first quantum or more.
    fn ranked(&mut self, now: Instant) -> Option<Running> {
        if let Some(running) = self.running {
            return Some(running);
        }
        let quantum = self.quantum?;
        if now.saturating_duration_since(self.started) < quantum {
            return None;
        }
        let basis = self
            .cores
            .pending()
            .basis_now(self.function, self.arrival)?;
        let running = Running {
            basis,
            attained: Duration::ZERO,
            slice_start: self.started,
        };
        self.running = Some(running);
        Some(running)
    }

    /// Takes the core handed back while the call waited, if it was.
    fn adopt(&mut self) {
        let Some((waiter, since)) = &self.waiter else {
            return;
        };
        if let Some((on, at)) = waiter.take() {
            self.tally.on_core(on.index());
            self.tally.suspended(at.saturating_duration_since(*since));
            self.on = Some(on);
            self.waiter = None;
            self.cores.unsuspended();
            if let Some(running) = &mut self.running {
                running.slice_start = at;
            }
        }
    }
}

impl PhaseGate for CoreGate<'_> {
    fn enter(&mut self, _permille: u16) -> GateFuture<'_> {
        // Only microtask functions declare phases; they run on the microtask threads.
        Box::pin(std::future::ready(()))
    }

    fn suspend(&mut self) {
        self.adopt();
        if let Some(on) = self.on.take() {
            let now = Instant::now();
            if let Some(running) = &mut self.running {
                running.attained += now.saturating_duration_since(running.slice_start);
            }
            self.cores.release(on);
        }
    }

    fn resume(&mut self) -> GateFuture<'_> {
        Box::pin(async move {
            self.adopt();
            if self.on.is_some() {
                return;
            }
            if let Some(on) = self.cores.take_if_idle() {
                self.on = Some(on);
                return;
            }
            let (basis, attained) = self
                .running
                .map_or((None, 0), |r| (Some(r.basis), r.attained.as_nanos() as u64));
            let since = Instant::now();
            let got =
                queue_for_core(self.cores, self.function, self.arrival, basis, attained).await;
            if let Some((on, at)) = got {
                self.tally.on_core(on.index());
                self.tally.suspended(at.saturating_duration_since(since));
                self.on = Some(on);
                if let Some(running) = &mut self.running {
                    running.slice_start = at;
                }
            }
        })
    }

    fn preempt(&mut self, now: Instant) -> Option<GateFuture<'static>> {
        self.adopt();
        let running = self.ranked(now)?;
        let slice = now.saturating_duration_since(running.slice_start);
        let attained = (running.attained + slice).as_nanos() as u64;
        let rank = running.basis.rank(attained);
        let quantum = self.quantum?.as_nanos() as u64;
        if !should_yield(
            rank,
            self.cores.best_rank(),
            slice.as_nanos() as u64,
            quantum,
        ) {
            return None;
        }
        let on = self.on.take()?;
        if self.cores.reserve(false).is_none() {
            self.on = Some(on);
            return None;
        }
        let waiter = CoreWaiter::new(self.cores);
        let resumption = Resumption::Task(waiter.clone());
        match self
            .cores
            .swap(on, running.basis, attained, rank, resumption, None)
        {
            Ok(()) => {
                self.cores.suspended_now();
                self.running = Some(Running {
                    attained: running.attained + slice,
                    ..running
                });
                self.waiter = Some((waiter.clone(), now));
                Some(Box::pin(waiter.given()))
            }
            Err((on, _)) => {
                self.cores.unreserve(None);
                self.on = Some(on);
                None
            }
        }
    }

    fn yields(&mut self, now: Instant) -> bool {
        if now.saturating_duration_since(self.yielded) < YIELD_EVERY {
            return false;
        }
        self.yielded = now;
        true
    }
}

impl Drop for CoreGate<'_> {
    fn drop(&mut self) {
        self.adopt();
        if let Some((waiter, _)) = self.waiter.take() {
            // Dropped while it waited for its core (cancelled, or out of budget).
            self.cores.unsuspended();
            if let Some(on) = waiter.leave() {
                self.cores.release(on);
            }
        }
        if let Some(on) = self.on.take() {
            self.cores.release(on);
        }
    }
}

/// Polls `call` (a request to a component of `function`, which arrived at `arrival`) only while
/// it holds a core: between polls, while the guest waits on a body or an outbound response or
/// has yielded at an epoch tick, the core goes to what waits, and the call queues for one
/// again when it is woken.
pub(crate) async fn gated<F: Future>(
    cores: &Cores,
    function: FunctionKey,
    arrival: Instant,
    call: F,
) -> F::Output {
    let mut call = std::pin::pin!(call);
    loop {
        let on = match cores.take_if_idle() {
            Some(on) => Some(on),
            None => queue_for_core(cores, function, arrival, None, 0)
                .await
                .map(|(on, _)| on),
        };
        // `None` only when the node stops: the call then runs on without a core.
        let polled = std::future::poll_fn(|cx| Poll::Ready(call.as_mut().poll(cx))).await;
        if let Some(on) = on {
            cores.release(on);
        }
        if let Poll::Ready(output) = polled {
            return output;
        }
        // The call registered this task's waker for what it waits on: the next poll of this
        // task is that wake (or a spurious one, which costs one more turn of the loop).
        let mut waited = false;
        std::future::poll_fn(|_| match std::mem::replace(&mut waited, true) {
            true => Poll::Ready(()),
            false => Poll::Pending,
        })
        .await;
    }
}
