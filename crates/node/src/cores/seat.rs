//! A thread's seat: where a thread that runs blocking calls (an executor, a confined caller's
//! thread) parks while it has no core, until one is handed to it.
//!
//! A spare executor parks under the ticket [`SPARE`] and is handed a core and maybe a call to
//! start; a thread whose call gave its core up parks under a fresh ticket, which its
//! [`super::Resumption`] in the queue carries, and is handed a core back by whoever takes that
//! resumption. A resumption whose ticket is stale (the call was stopped for its budget
//! meanwhile, or the thread gave up waiting) is refused, and the core goes on.
//!
//! A parked thread first polls for up to its `spin` (a core handed over within microseconds
//! costs no futex wake-up), then sleeps on a condvar.

use super::{OnCore, Work};
use crate::pending::Next;
use parking_lot::{Condvar, Mutex};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The ticket a spare waits under: resumptions carry tickets from 1 up.
const SPARE: u64 = 0;

struct SeatState {
    /// The ticket the thread is parked under, if it is.
    waiting: Option<u64>,
    /// A core handed to the parked thread, with the work to start for a spare.
    given: Option<(OnCore, Option<Next<Work>>)>,
    /// The node is stopping.
    stopped: bool,
    /// The last ticket used.
    tickets: u64,
}

/// How a parked thread woke.
pub(crate) enum Woken {
    /// It was handed a core, with the work to start if it was a spare.
    Core(OnCore, Option<Next<Work>>),
    /// Its deadline passed first.
    Expired,
    /// The node is stopping.
    Stopped,
}

/// One thread's place to park.
pub(crate) struct Seat {
    state: Mutex<SeatState>,
    wake: Condvar,
    /// Set with `given`, so that a polling thread sees a hand-off without the lock.
    handed: AtomicBool,
    /// How long a parked thread polls before it sleeps.
    spin: Duration,
}

impl Seat {
    /// A seat whose thread polls for `spin` before it sleeps.
    pub(crate) fn new(spin: Duration) -> Self {
        Self {
            state: Mutex::new(SeatState {
                waiting: None,
                given: None,
                stopped: false,
                tickets: SPARE,
            }),
            wake: Condvar::new(),
            handed: AtomicBool::new(false),
            spin,
        }
    }

    /// The thread is about to wait as a spare: it may be handed a core (and a call) from now.
    pub(crate) fn expect_core(&self) {
        self.state.lock().waiting = Some(SPARE);
    }

    /// The thread's call is about to give its core up: marks it as waiting under a new ticket,
    /// before its resumption is queued (a thread could take it at once).
    pub(crate) fn expect_resumption(&self) -> u64 {
        let mut state = self.state.lock();
        state.tickets += 1;
        state.waiting = Some(state.tickets);
        state.tickets
    }

    /// The thread no longer waits (its resumption could not be queued, or it gave up).
    pub(crate) fn withdraw(&self) {
        self.state.lock().waiting = None;
    }

    /// Hands a spare `on` and `work` to start with it; hands them back if the thread is not a
    /// waiting spare (the node is stopping).
    // The error is the caller's own work handed back by value; boxing it would allocate at
    // every hand-off.
    #[allow(clippy::result_large_err, clippy::type_complexity)]
    pub(crate) fn give(
        &self,
        on: OnCore,
        work: Option<Next<Work>>,
    ) -> Result<(), (OnCore, Option<Next<Work>>)> {
        let mut state = self.state.lock();
        if state.waiting != Some(SPARE) || state.stopped {
            return Err((on, work));
        }
        self.hand(&mut state, on, work);
        Ok(())
    }

    /// Hands `on` back to the thread parked under `ticket`; hands it back if the thread no
    /// longer waits under it.
    pub(crate) fn resume(&self, ticket: u64, on: OnCore) -> Result<(), OnCore> {
        let mut state = self.state.lock();
        if state.stopped || state.waiting != Some(ticket) {
            return Err(on);
        }
        self.hand(&mut state, on, None);
        Ok(())
    }

    fn hand(&self, state: &mut SeatState, on: OnCore, work: Option<Next<Work>>) {
        state.waiting = None;
        state.given = Some((on, work));
        self.handed.store(true, Ordering::Release);
        self.wake.notify_one();
    }

    /// Parks until the thread is handed a core, until `deadline`, or until the node stops.
    pub(crate) fn park(&self, deadline: Option<Instant>) -> Woken {
        if !self.spin.is_zero() {
            let until = Instant::now() + self.spin;
            let mut polls = 0u32;
            while !self.handed.load(Ordering::Acquire) {
                // Reading the clock costs as much as a poll: look at it every 16th.
                polls = polls.wrapping_add(1);
                if polls.is_multiple_of(16) && Instant::now() >= until {
                    break;
                }
                std::hint::spin_loop();
            }
        }
        let mut state = self.state.lock();
        loop {
            if let Some((on, work)) = state.given.take() {
                self.handed.store(false, Ordering::Relaxed);
                return Woken::Core(on, work);
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

    /// Wakes the thread if it is parked, and keeps it from parking again.
    pub(crate) fn stop(&self) {
        self.state.lock().stopped = true;
        self.wake.notify_all();
    }
}
