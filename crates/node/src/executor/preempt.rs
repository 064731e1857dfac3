//! Preempting a blocking call (`mote up --preempt on`): a call that has run for its quantum
//! while a better-ranked call waits is suspended at the next epoch tick, and the better call
//! takes its core. Ranks and the decision are `mote_sched::preempt`'s; [`crate::cores`] moves
//! the core.
//!
//! A blocking call is suspended by parking the thread that runs it, inside the epoch callback
//! ([`ParkPreemption`], which the thread lends to the call): it keeps its instance, its stack
//! and its place in the guest, and the warm path pays for no fiber (a call that ends within its
//! quantum is never looked at). So:
//!
//! - to preempt, the call reserves room for one more suspension and a spare executor, swaps
//!   itself with the best waiting work in the queue (`Pending::swap`, one step under the
//!   queue's lock, so two calls never give their cores up for the same waiting one), hands its
//!   core to whoever runs that work, and parks until a thread that takes its resumption from
//!   the queue hands it a core back;
//! - at most `max_suspended` calls are suspended at once. At the bound, a call that would be
//!   preempted keeps its core until it ends or until a suspended call leaves, and the refusal
//!   is counted (`mote_preemptions_refused_total`);
//! - a call that sleeps (WASI `poll_oneoff` on clocks) gives its core to a spare for the sleep,
//!   then queues for one like a preempted call: a sleeping call is not a running one;
//! - a suspended call whose budget runs out is stopped on time: its thread wakes at the
//!   deadline, withdraws (the resumption it left in the queue is skipped when taken), and
//!   unwinds and settles the call without a core (platform work, not guest code), then
//!   becomes a spare;
//! - when the node stops, suspended calls run to their end without a core.

use crate::cores::{Cores, OnCore, Resumption, Seat, Tally, Woken};
use mote_runtime::{Preemption, Resumed};
use mote_sched::{RankBasis, should_yield};
use std::cell::Cell;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How the executors preempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PreemptConfig {
    /// How long a call runs before a better-ranked call may take its core.
    pub quantum: Duration,
    /// The most calls suspended at once (each holds its instance, and a parked thread or a
    /// fiber).
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

/// What a blocking call is preempted by: the core its thread holds for it, the thread's seat
/// to park on, and what the call's rank is computed from. Made for one call, on the stack of
/// the thread that runs it, and lent to the call.
pub(crate) struct ParkPreemption<'a> {
    cores: &'a Cores,
    seat: &'a Arc<Seat>,
    /// The core the thread holds for the call; `None` while the call is suspended, and for
    /// good if its budget ran out meanwhile.
    on: Cell<Option<OnCore>>,
    /// `None`: the call is not ranked (arrival order, or no preemption).
    running: Cell<Option<Running>>,
    quantum: Duration,
    tally: &'a Tally,
}

/// The call as preemption sees it.
#[derive(Clone, Copy)]
struct Running {
    basis: RankBasis,
    /// Service attained before the current slice.
    attained: Duration,
    /// When the current slice began, or when the call gave its core up to wait in the host.
    slice_start: Instant,
}

impl<'a> ParkPreemption<'a> {
    /// The preemption of a call that starts now on `on`, on the thread of `seat`, ranked from
    /// `basis` (`None`: never preempted), after `quantum`; its core and suspensions are noted
    /// in `tally`.
    pub(crate) fn new(
        cores: &'a Cores,
        seat: &'a Arc<Seat>,
        on: OnCore,
        basis: Option<RankBasis>,
        quantum: Duration,
        tally: &'a Tally,
    ) -> Self {
        Self {
            cores,
            seat,
            on: Cell::new(Some(on)),
            running: Cell::new(basis.map(|basis| Running {
                basis,
                attained: Duration::ZERO,
                slice_start: Instant::now(),
            })),
            quantum,
            tally,
        }
    }

    /// The call has ended: the core its thread holds now, if any.
    pub(crate) fn end(self) -> Option<OnCore> {
        self.on.take()
    }

    /// Parks until the call may run again or `deadline` passes, counting the time since
    /// `since` as suspended.
    fn park(&self, deadline: Instant, since: Instant) -> Resumed {
        let woken = self.seat.park(Some(deadline));
        self.tally.suspended(since.elapsed());
        self.cores.unsuspended();
        match woken {
            Woken::Core(on, _) => {
                self.tally.on_core(on.index());
                self.on.set(Some(on));
                Resumed::Running
            }
            Woken::Expired => Resumed::Expired,
            // Run on without a core: the node is stopping.
            Woken::Stopped => Resumed::Running,
        }
    }
}

impl Preemption for ParkPreemption<'_> {
    fn tick(&self, now: Instant, deadline: Instant) -> Resumed {
        let Some(mut call) = self.running.get() else {
            return Resumed::Running;
        };
        let slice = now.saturating_duration_since(call.slice_start);
        let attained = (call.attained + slice).as_nanos() as u64;
        let rank = call.basis.rank(attained);
        let quantum = self.quantum.as_nanos() as u64;
        if !should_yield(
            rank,
            self.cores.best_rank(),
            slice.as_nanos() as u64,
            quantum,
        ) {
            return Resumed::Running;
        }
        let Some(on) = self.on.take() else {
            return Resumed::Running;
        };
        let Some(spare) = self.cores.reserve(true) else {
            self.on.set(Some(on));
            return Resumed::Running;
        };
        let resumption = Resumption::Thread {
            seat: self.seat.clone(),
            ticket: self.seat.expect_resumption(),
        };
        let since = Instant::now();
        if let Err((on, spare)) = self
            .cores
            .swap(on, call.basis, attained, rank, resumption, spare)
        {
            // Another core took the better call first.
            self.seat.withdraw();
            self.cores.unreserve(spare);
            self.on.set(Some(on));
            return Resumed::Running;
        }
        self.cores.suspended_now();
        let resumed = self.park(deadline, since);
        call.attained += slice;
        call.slice_start = Instant::now();
        self.running.set(Some(call));
        resumed
    }

    fn release_for_wait(&self) -> bool {
        let Some(mut call) = self.running.get() else {
            return false;
        };
        let Some(on) = self.on.take() else {
            return false;
        };
        let Some(Some(spare)) = self.cores.reserve(true) else {
            self.on.set(Some(on));
            return false;
        };
        self.cores.suspended_now();
        self.cores.lend(spare, on);
        let now = Instant::now();
        call.attained += now.saturating_duration_since(call.slice_start);
        call.slice_start = now;
        self.running.set(Some(call));
        true
    }

    fn wait_ended(&self, deadline: Instant) -> Resumed {
        let Some(mut call) = self.running.get() else {
            return Resumed::Running;
        };
        let since = call.slice_start;
        let resumption = Resumption::Thread {
            seat: self.seat.clone(),
            ticket: self.seat.expect_resumption(),
        };
        let attained = call.attained.as_nanos() as u64;
        let resumed = match self.cores.requeue(call.basis, attained, resumption) {
            Ok(()) => self.park(deadline, since),
            Err(_) => {
                // The node is stopping: run on without a core.
                self.seat.withdraw();
                self.tally.suspended(since.elapsed());
                self.cores.unsuspended();
                Resumed::Running
            }
        };
        call.slice_start = Instant::now();
        self.running.set(Some(call));
        resumed
    }
}

#[cfg(test)]
mod tests;
