//! A simulated node that preempts, as `mote up --preempt on` does: at most one call a core,
//! ranked by `mote_sched`'s preemptive [`CallQueue`]; at each epoch tick, a call that has run
//! its quantum in this slice gives its core to a waiting call that outranks it
//! ([`should_yield`]), and waits again, ranked by what it has attained. At most
//! [`PreemptSpec::max_suspended`] calls are suspended at once; a call that would be preempted
//! past the bound keeps its core, as on the node.
//!
//! A call's processing time, which its function's history records, is as the node measures it:
//! from its first start to its end, suspensions included.
//!
//! Times are nanoseconds of virtual time since the burst started.

use crate::CallId;
use mote_cluster::Backlog;
use mote_sched::{CallQueue, FunctionKey, Policy, RankBasis, should_yield};
use std::collections::HashMap;
use std::time::Duration;

/// How the simulated nodes preempt: `mote up`'s `PreemptConfig` and its epoch tick.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PreemptSpec {
    /// How long a call runs in a slice before a better-ranked call may take its core.
    pub quantum: Duration,
    /// The epoch tick at which running calls are looked at.
    pub tick: Duration,
    /// The most calls suspended at once.
    pub max_suspended: usize,
    /// The queue's aging factor (`mote_sched::DEFAULT_AGING` on a node).
    pub aging: u64,
}

impl PreemptSpec {
    /// `mote up --preempt on`'s defaults: a 2 ms quantum, the executors' 500 µs epoch tick,
    /// 32 calls suspended at most, `mote_sched::DEFAULT_AGING`.
    pub const NODE: PreemptSpec = PreemptSpec {
        quantum: Duration::from_millis(2),
        tick: Duration::from_micros(500),
        max_suspended: 32,
        aging: mote_sched::DEFAULT_AGING,
    };
}

/// A call on a core.
#[derive(Clone, Copy, Debug)]
struct OnCore {
    call: CallId,
    basis: RankBasis,
    /// Service attained before this slice.
    attained_ns: u64,
    /// When this slice began.
    slice_from_ns: u64,
}

/// What the node keeps of a call from its arrival to its end.
#[derive(Clone, Copy, Debug)]
struct Held {
    function: FunctionKey,
    work_ns: u64,
    first_start_ns: Option<u64>,
    /// Preempted and waiting to resume.
    suspended: bool,
    /// Its function's expected time when it arrived: what its rank's basis took, and what
    /// [`Preemptive::waiting`] counts of it until it starts.
    expected_ns: u64,
}

/// One node's calls, cores and histories under preemption.
pub(crate) struct Preemptive {
    queue: CallQueue<CallId>,
    cores: usize,
    running: Vec<OnCore>,
    held: HashMap<CallId, Held>,
    suspended: usize,
    spec: PreemptSpec,
    /// The expected remaining work of the waiting calls, kept as they come and go: what the
    /// node reports of them (with the running calls', [`Preemptive::backlog`]).
    waiting: Backlog,
}

impl Preemptive {
    pub(crate) fn new(policy: Policy, cores: u32, fc_window: Duration, spec: PreemptSpec) -> Self {
        Self {
            queue: CallQueue::preemptive(policy, fc_window, spec.aging),
            cores: cores.max(1) as usize,
            running: Vec::new(),
            held: HashMap::new(),
            suspended: 0,
            spec,
            waiting: Backlog::empty(!policy.arrival_order()),
        }
    }

    /// Takes a call of `function` that reached the node at `now_ns` and needs `work` of a core.
    pub(crate) fn admit(
        &mut self,
        now_ns: u64,
        function: FunctionKey,
        call: CallId,
        work: Duration,
    ) {
        // The rank's basis takes the function's expected time as the push finds it: this one.
        let expected_ns = self.expected_ns(function);
        self.held.insert(
            call,
            Held {
                function,
                work_ns: work.as_nanos() as u64,
                first_start_ns: None,
                suspended: false,
                expected_ns,
            },
        );
        self.waiting.queue(Duration::from_nanos(expected_ns));
        self.queue.push_at(function, now_ns, call);
        self.fill(now_ns);
    }

    /// Gives free cores to the best waiting calls.
    fn fill(&mut self, now_ns: u64) {
        while self.running.len() < self.cores {
            let Some(on) = self.seat_best(now_ns) else {
                return;
            };
            self.running.push(on);
        }
    }

    /// Takes the best waiting call from the queue to start or resume it on a core at `now_ns`.
    fn seat_best(&mut self, now_ns: u64) -> Option<OnCore> {
        let next = self.queue.pop_ranked()?;
        let left = next.basis.remaining(next.attained_ns);
        self.waiting.unqueue(Duration::from_nanos(left));
        let held = self
            .held
            .get_mut(&next.call)
            .expect("a queued call is held");
        held.first_start_ns.get_or_insert(now_ns);
        if std::mem::take(&mut held.suspended) {
            self.suspended -= 1;
        }
        Some(OnCore {
            call: next.call,
            basis: next.basis,
            attained_ns: next.attained_ns,
            slice_from_ns: now_ns,
        })
    }

    /// When `on` ends if it keeps its core.
    fn end_of(&self, on: &OnCore) -> u64 {
        let work = self.held[&on.call].work_ns;
        on.slice_from_ns + work.saturating_sub(on.attained_ns)
    }

    /// When something next happens on the node if nothing arrives: a call ends, or, while calls
    /// wait, the first tick at which a running call has run its quantum.
    pub(crate) fn next_event(&self, now_ns: u64) -> Option<u64> {
        let end = self.running.iter().map(|on| self.end_of(on)).min();
        let check = match self.queue.is_empty() || self.suspended >= self.spec.max_suspended {
            true => None,
            false => {
                let tick = self.spec.tick.as_nanos().max(1) as u64;
                let quantum = self.spec.quantum.as_nanos() as u64;
                self.running
                    .iter()
                    .map(|on| (on.slice_from_ns + quantum).max(now_ns + 1).div_ceil(tick) * tick)
                    .min()
            }
        };
        end.into_iter().chain(check).min()
    }

    /// Brings the node to `now_ns`: ends the calls done by then (returning each with its
    /// processing time), and at a tick preempts where [`should_yield`] says so.
    pub(crate) fn advance(&mut self, now_ns: u64) -> Vec<(CallId, Duration)> {
        let mut ended = Vec::new();
        let mut at = 0;
        while at < self.running.len() {
            let on = self.running[at];
            if self.end_of(&on) <= now_ns {
                self.running.swap_remove(at);
                let held = self.held.remove(&on.call).expect("a running call is held");
                let first = held.first_start_ns.expect("a running call started");
                let processing = Duration::from_nanos(now_ns - first);
                self.queue.complete(held.function, processing);
                ended.push((on.call, processing));
            } else {
                at += 1;
            }
        }
        self.fill(now_ns);
        if now_ns.is_multiple_of(self.spec.tick.as_nanos().max(1) as u64) {
            self.preempt(now_ns);
        }
        ended
    }

    /// At a tick: each running call that should yield to the best waiting one does, while
    /// fewer than the bound are suspended.
    fn preempt(&mut self, now_ns: u64) {
        let quantum = self.spec.quantum.as_nanos() as u64;
        for at in 0..self.running.len() {
            let Some(best) = self.queue.best_rank() else {
                return;
            };
            if self.suspended >= self.spec.max_suspended {
                return;
            }
            let on = self.running[at];
            let slice = now_ns - on.slice_from_ns;
            let attained = on.attained_ns + slice;
            if !should_yield(on.basis.rank(attained), best, slice, quantum) {
                continue;
            }
            self.queue.requeue(on.basis, attained, on.call);
            let left = on.basis.remaining(attained);
            self.waiting.queue(Duration::from_nanos(left));
            self.held.get_mut(&on.call).expect("held").suspended = true;
            self.suspended += 1;
            self.running[at] = self.seat_best(now_ns).expect("a better call waits");
        }
    }

    /// Takes up to `most` waiting calls that `movable` accepts for another node to run, those
    /// that would start last here while each would wait at least `min_wait`
    /// ([`CallQueue::release`] on this node's cores): never one that started (a suspended
    /// call stays), and none in arrival order, as on the node. The node forgets them.
    pub(crate) fn release(
        &mut self,
        most: usize,
        min_wait: Duration,
        movable: impl Fn(CallId) -> bool,
    ) -> Vec<CallId> {
        let held = &self.held;
        let never_ran = |call: &CallId| held.get(call).is_some_and(|h| h.first_start_ns.is_none());
        let cores = self.cores as u32;
        let taken = self.queue.release(most, cores, min_wait, |call| {
            never_ran(call) && movable(*call)
        });
        for call in &taken {
            let held = self.held.remove(call).expect("a queued call is held");
            assert!(
                held.first_start_ns.is_none() && !held.suspended,
                "call {call} started here: it cannot move"
            );
            self.waiting.unqueue(Duration::from_nanos(held.expected_ns));
        }
        taken
    }

    /// Records a processing time without a call.
    pub(crate) fn warm(&mut self, function: FunctionKey, processing: Duration) {
        self.queue.complete(function, processing);
    }

    /// The expected processing time of `function` here, in ns (0 before its first call).
    pub(crate) fn expected_ns(&self, function: FunctionKey) -> u64 {
        self.queue.history(function).map_or(0, |h| h.expected_ns())
    }

    /// The node's expected work at `now_ns` as it would report it: the waiting calls' expected
    /// remaining times, and what remains of each running call by its expected time and the
    /// service it attained, the part up to its next chance to yield (its quantum's end, at a
    /// tick) ahead of every new call.
    pub(crate) fn backlog(&self, now_ns: u64) -> Backlog {
        let mut backlog = self.waiting;
        let quantum = self.spec.quantum.as_nanos() as u64;
        let tick = self.spec.tick.as_nanos().max(1) as u64;
        for on in &self.running {
            let attained = on.attained_ns + now_ns.saturating_sub(on.slice_from_ns);
            let left = on.basis.remaining(attained);
            let may_yield = (on.slice_from_ns + quantum).max(now_ns).div_ceil(tick) * tick;
            let before_yield = match backlog.is_ranked() {
                true => may_yield - now_ns,
                false => u64::MAX,
            };
            backlog.running(
                Duration::from_nanos(left),
                Duration::from_nanos(left),
                Duration::from_nanos(before_yield),
            );
        }
        backlog
    }

    /// Calls on a core, and calls waiting for one (suspended ones included).
    pub(crate) fn calls(&self) -> (u32, u32) {
        (self.running.len() as u32, self.queue.len() as u32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn node(cores: u32) -> Preemptive {
        let spec = PreemptSpec {
            quantum: Duration::from_millis(2),
            tick: Duration::from_millis(1),
            max_suspended: 32,
            aging: mote_sched::DEFAULT_AGING,
        };
        let mut node = Preemptive::new(Policy::Sept, cores, Duration::from_secs(60), spec);
        node.warm(0, Duration::from_millis(100));
        node.warm(1, Duration::from_millis(1));
        node
    }

    /// Runs the node until every call ended; the calls in the order they ended, with when.
    fn drain(node: &mut Preemptive, mut now: u64) -> Vec<(CallId, u64)> {
        let mut ended = Vec::new();
        while let Some(at) = node.next_event(now) {
            now = at;
            ended.extend(node.advance(now).into_iter().map(|(call, _)| (call, now)));
        }
        ended
    }

    #[test]
    fn a_short_call_takes_a_long_ones_core_at_the_first_tick_after_its_quantum() {
        let mut n = node(1);
        n.admit(0, 0, 10, Duration::from_millis(100));
        n.advance(0);
        // Arrives 0.5 ms in: the long call has run less than its 2 ms quantum.
        n.admit(MS / 2, 1, 11, Duration::from_millis(1));
        assert_eq!(n.next_event(MS / 2), Some(2 * MS));
        let ended = drain(&mut n, MS / 2);
        // The short call runs from the tick at 2 ms to 3 ms; the long one resumes and ends
        // after its 100 ms of work plus the 1 ms it gave up.
        assert_eq!(ended, [(11, 3 * MS), (10, 101 * MS)]);
    }

    #[test]
    fn without_a_better_call_waiting_nobody_is_preempted() {
        let mut n = node(1);
        n.admit(0, 1, 10, Duration::from_millis(1));
        n.admit(0, 0, 11, Duration::from_millis(100));
        assert_eq!(drain(&mut n, 0), [(10, MS), (11, 101 * MS)]);
    }

    #[test]
    fn a_call_that_outran_its_estimate_goes_behind_the_calls_that_wait() {
        // Expected 1 ms, takes 50: once past its estimate it ranks by attained service, and a
        // 1 ms call arriving at 10 ms gets the core at the next tick, 11 ms.
        let mut n = node(1);
        n.admit(0, 1, 10, Duration::from_millis(50));
        n.admit(10 * MS, 1, 11, Duration::from_millis(1));
        let ended = drain(&mut n, 10 * MS);
        assert_eq!(ended[0], (11, 12 * MS));
        assert_eq!(ended[1], (10, 51 * MS));
    }

    #[test]
    fn release_hands_over_calls_that_never_ran_and_keeps_the_backlog_exact() {
        let mut n = node(1);
        n.admit(0, 0, 10, Duration::from_millis(100));
        n.admit(MS / 2, 1, 11, Duration::from_millis(1));
        // At 2 ms the short call takes the core: the long one is suspended.
        n.advance(2 * MS);
        assert_eq!(n.suspended, 1);
        n.admit(2 * MS, 0, 12, Duration::from_millis(100));
        n.admit(2 * MS, 0, 13, Duration::from_millis(100));
        // Call 13 may not move; call 10 ran, so it stays whatever `movable` says.
        let taken = n.release(5, Duration::ZERO, |call| call != 13);
        assert_eq!(taken, [12]);
        assert_eq!(n.calls(), (1, 2));
        // What it reports of its waiting calls is what a node that never held call 12 would.
        let mut expected = Backlog::empty(true);
        expected.queue(Duration::from_millis(100));
        expected.queue(Duration::from_millis(98));
        assert_eq!(n.waiting, expected);
        // The rest run as if call 12 had never come.
        let ended: Vec<CallId> = drain(&mut n, 2 * MS).into_iter().map(|(c, _)| c).collect();
        assert_eq!(ended, [11, 10, 13]);
        assert!(n.held.is_empty() && n.waiting.is_empty());
    }

    #[test]
    fn the_processing_time_recorded_runs_from_the_first_start_to_the_end() {
        let mut n = node(1);
        n.admit(0, 0, 10, Duration::from_millis(100));
        n.admit(0, 0, 12, Duration::from_millis(100));
        n.admit(MS / 2, 1, 11, Duration::from_millis(1));
        let mut now = MS / 2;
        let mut processing = HashMap::new();
        while let Some(at) = n.next_event(now) {
            now = at;
            processing.extend(n.advance(now));
        }
        assert_eq!(processing[&10], Duration::from_millis(101));
        assert_eq!(processing[&11], Duration::from_millis(1));
        assert_eq!(n.calls(), (0, 0));
    }
}
