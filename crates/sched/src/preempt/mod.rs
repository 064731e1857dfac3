//! Preemptive ordering: how a call that has already run ranks against the calls waiting, and when
//! a running call gives its core up.
//!
//! The paper ranks a call once, on arrival, and never preempts, so one long call holding a core
//! keeps every shorter one waiting however wrong its estimate was. Under preemption a call's rank
//! is recomputed from the service it has *attained* so far:
//!
//! - its expected remaining time is the function's expected time minus the time it has run;
//! - once it has run longer than expected, the estimate is known to be wrong, and it ranks by its
//!   attained service instead (least-attained-service), so the longer it runs the further back it
//!   goes, instead of holding the core.
//!
//! A policy whose rank is a duration (SEPT's expected time, Fair-Choice's weighted one) would let
//! a stream of short calls starve a long one for ever. Here those ranks are *aged*: a call's rank
//! is its arrival time plus the queue's aging factor ([`DEFAULT_AGING`] unless configured) times
//! the remaining duration, so every rank is a point in time, and a call that arrived after
//! another's rank can never overtake it. Calls arriving together still run shortest first, and a
//! call overtakes an older one only while the older one has waited less than the aging factor
//! times its remaining time. The policies whose rank is already a time (FIFO, EECT, RECT) use it
//! with the remaining time in place of the expected one.
//!
//! A running call gives its core up ([`should_yield`]) only once it has run for its quantum in
//! this slice and only for a waiting call of strictly lower rank; equal ranks never preempt, so
//! two calls cannot hand a core back and forth without one of them having moved.

use crate::Policy;

/// How many times its expected remaining time a call may wait before calls that arrive later
/// can no longer overtake it (for the policies whose rank is a duration: SEPT, Fair-Choice).
///
/// Large enough that calls arriving within a burst are ordered shortest first; small enough
/// that a long call's wait is bounded by a multiple of its own length, not by the arrival rate.
pub const DEFAULT_AGING: u64 = 16;

/// What a call's rank is computed from. It is fixed when the call arrives, so the executor
/// running the call can recompute the rank at every epoch tick without the queue's lock.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RankBasis {
    pub(crate) policy: Policy,
    /// When the call arrived, on the queue's clock.
    pub(crate) arrival_ns: u64,
    /// When the previous call of its function arrived (RECT's anchor).
    pub(crate) previous_ns: u64,
    /// Its function's expected processing time when it arrived.
    pub(crate) expected_ns: u64,
    /// Fair-Choice's weight: its function's calls in the last `T` seconds, this one included.
    pub(crate) weight: u64,
    /// The queue's aging factor.
    pub(crate) aging: u64,
}

impl RankBasis {
    /// The basis of a call of `policy` arriving at `arrival_ns` (the previous call of its
    /// function at `previous_ns`), whose function is expected to take `expected_ns` and was
    /// called `recent_calls` times in Fair-Choice's window, in a queue aging ranks by `aging`.
    pub fn new(
        policy: Policy,
        arrival_ns: u64,
        previous_ns: u64,
        expected_ns: u64,
        recent_calls: usize,
        aging: u64,
    ) -> Self {
        Self {
            policy,
            arrival_ns,
            previous_ns,
            expected_ns,
            weight: (recent_calls as u64).max(1),
            aging,
        }
    }

    /// What is expected to be left of the call once it has run for `attained_ns`
    /// ([`remaining_ns`] of its function's expected time when it arrived).
    pub fn remaining(&self, attained_ns: u64) -> u64 {
        remaining_ns(self.expected_ns, attained_ns)
    }

    /// The call's rank once it has run for `attained_ns`: lower runs first.
    pub fn rank(&self, attained_ns: u64) -> u64 {
        let left = remaining_ns(self.expected_ns, attained_ns);
        let aged = |duration: u64| {
            self.arrival_ns
                .saturating_add(self.aging.saturating_mul(duration))
        };
        match self.policy {
            Policy::Fifo | Policy::Baseline => self.arrival_ns,
            Policy::Sept => aged(left),
            Policy::Fc => aged(self.weight.saturating_mul(left)),
            Policy::Eect => self.arrival_ns.saturating_add(left),
            Policy::Rect => self.previous_ns.saturating_add(left),
        }
    }
}

/// What is expected to be left of a call expected to take `expected_ns` that has run for
/// `attained_ns`; once it has outrun the estimate, its attained service, which only grows.
pub fn remaining_ns(expected_ns: u64, attained_ns: u64) -> u64 {
    match attained_ns <= expected_ns {
        true => expected_ns - attained_ns,
        false => attained_ns,
    }
}

/// Whether a running call of rank `running` that has run `slice_ns` since it last got its core
/// gives it up to the best waiting call, of rank `best_waiting`: only after a whole `quantum_ns`,
/// and only to a strictly better call.
pub fn should_yield(running: u64, best_waiting: u64, slice_ns: u64, quantum_ns: u64) -> bool {
    slice_ns >= quantum_ns && best_waiting < running
}

#[cfg(test)]
mod tests;
