//! The call queue: waiting calls in priority order, and the function histories the priorities
//! are computed from.
//!
//! Invariants: a call's priority is computed once, on arrival, and changes only when a
//! preemptive queue takes it back after it ran ([`CallQueue::requeue`], ranked from the service
//! it attained: see [`crate::preempt`]); calls of equal priority leave in the order they were
//! queued (a sequence number breaks ties); push and pop are O(log n) on a binary heap, so tens
//! of thousands of waiting calls cost microseconds per operation.

use crate::{FunctionHistory, FunctionKey, Histories, Policy, PriorityPolicy, RankBasis};
use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::time::{Duration, Instant};

struct Waiting<T> {
    priority: u64,
    seq: u64,
    call: T,
    basis: RankBasis,
    attained_ns: u64,
}

/// A call as a queue hands it out: what its rank was computed from, the rank it left at and
/// the service it had attained (zero unless it was preempted).
#[derive(Debug)]
pub struct Ranked<T> {
    /// The call.
    pub call: T,
    /// What its rank is computed from; the executor recomputes the rank as the call runs.
    pub basis: RankBasis,
    /// The rank it had in the queue.
    pub rank: u64,
    /// How long it had run before it was queued again.
    pub attained_ns: u64,
}

impl<T> PartialEq for Waiting<T> {
    fn eq(&self, other: &Self) -> bool {
        (self.priority, self.seq) == (other.priority, other.seq)
    }
}

impl<T> Eq for Waiting<T> {}

impl<T> PartialOrd for Waiting<T> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Waiting<T> {
    // BinaryHeap is a max-heap; the call to run next is the lowest (priority, seq).
    fn cmp(&self, other: &Self) -> Ordering {
        (other.priority, other.seq).cmp(&(self.priority, self.seq))
    }
}

/// Waiting calls ordered by a [`Policy`], and the histories it ranks them by.
pub struct CallQueue<T> {
    policy: Policy,
    /// Ranks from [`RankBasis::rank`] aged by this factor, so that running calls can be compared
    /// with waiting ones; `None` ranks by the policy alone.
    aging: Option<u64>,
    ranking: Box<dyn PriorityPolicy>,
    waiting: BinaryHeap<Waiting<T>>,
    histories: Histories,
    seq: u64,
    origin: Instant,
    window_ns: u64,
}

impl<T> CallQueue<T> {
    /// An empty queue ordered by `policy`; Fair-Choice counts calls over the last `window`.
    pub fn new(policy: Policy, window: Duration) -> Self {
        Self::with_ranks(policy, window, None)
    }

    /// An empty queue ordered by `policy` made preemptive: a call's rank is its expected
    /// remaining time, aged by `aging` (see [`crate::preempt`]), and calls that were preempted
    /// come back through [`CallQueue::requeue`].
    pub fn preemptive(policy: Policy, window: Duration, aging: u64) -> Self {
        Self::with_ranks(policy, window, Some(aging))
    }

    fn with_ranks(policy: Policy, window: Duration, aging: Option<u64>) -> Self {
        Self {
            policy,
            aging,
            ranking: policy.ranking(),
            waiting: BinaryHeap::with_capacity(1024),
            histories: Histories::default(),
            seq: 0,
            origin: Instant::now(),
            window_ns: window.as_nanos() as u64,
        }
    }

    /// The policy ordering this queue.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Adds a call of `function` that arrived at `arrival`; returns its rank.
    pub fn push(&mut self, function: FunctionKey, arrival: Instant, call: T) -> u64 {
        let arrival_ns = self.nanos(arrival);
        self.push_at(function, arrival_ns, call)
    }

    /// Adds a call that arrived `arrival_ns` after the queue was created; returns its rank.
    pub fn push_at(&mut self, function: FunctionKey, arrival_ns: u64, call: T) -> u64 {
        let history = self.histories.entry(function);
        let previous = history.arrive(arrival_ns, self.window_ns);
        // Only a preemptive Fair-Choice rank needs the arrival count, which is a scan of the
        // function's buckets: the others skip it.
        let recent_calls = match (self.aging, self.policy) {
            (Some(_), Policy::Fc) => history.recent_calls(),
            _ => 1,
        };
        let basis = RankBasis::new(
            self.policy,
            arrival_ns,
            previous,
            history.expected_ns(),
            recent_calls,
            self.aging.unwrap_or(0),
        );
        let priority = match self.aging {
            Some(_) => basis.rank(0),
            None => self.ranking.priority(arrival_ns, previous, history),
        };
        self.insert(priority, basis, 0, call);
        priority
    }

    /// Counts the arrival of a call of `function` at `arrival` that started at once, without
    /// waiting here (it ran where it was read): the policies' histories see every call.
    pub fn arrive(&mut self, function: FunctionKey, arrival: Instant) {
        let arrival_ns = self.nanos(arrival);
        self.histories
            .entry(function)
            .arrive(arrival_ns, self.window_ns);
    }

    /// What a call of `function` that arrived at `arrival` and started at once is ranked from,
    /// to compare it with waiting calls while it runs; `None` in a queue that does not
    /// preempt.
    pub fn basis(&mut self, function: FunctionKey, arrival: Instant) -> Option<RankBasis> {
        let aging = self.aging?;
        let arrival_ns = self.nanos(arrival);
        let history = self.histories.entry(function);
        // Its own arrival is counted when it ends: it is counted in here.
        let recent_calls = match self.policy {
            Policy::Fc => history.recent_calls() + 1,
            _ => 1,
        };
        Some(RankBasis::new(
            self.policy,
            arrival_ns,
            history.last_arrival_ns().unwrap_or(arrival_ns),
            history.expected_ns(),
            recent_calls,
            aging,
        ))
    }

    /// Queues again a call that was preempted after running for `attained_ns`, ranked from
    /// `basis` (what [`CallQueue::pop_ranked`] handed out with it); returns its new rank.
    pub fn requeue(&mut self, basis: RankBasis, attained_ns: u64, call: T) -> u64 {
        let priority = basis.rank(attained_ns);
        self.insert(priority, basis, attained_ns, call);
        priority
    }

    fn insert(&mut self, priority: u64, basis: RankBasis, attained_ns: u64, call: T) {
        self.seq += 1;
        self.waiting.push(Waiting {
            priority,
            seq: self.seq,
            call,
            basis,
            attained_ns,
        });
    }

    /// Takes the call that should run next.
    pub fn pop(&mut self) -> Option<T> {
        self.waiting.pop().map(|w| w.call)
    }

    /// Takes the call that should run next, with its rank and what it was computed from.
    pub fn pop_ranked(&mut self) -> Option<Ranked<T>> {
        self.waiting.pop().map(|w| Ranked {
            call: w.call,
            basis: w.basis,
            rank: w.priority,
            attained_ns: w.attained_ns,
        })
    }

    /// The rank of the call that would run next.
    pub fn best_rank(&self) -> Option<u64> {
        self.waiting.peek().map(|w| w.priority)
    }

    /// Nanoseconds from the queue's creation to `t`: the clock ranks are on.
    fn nanos(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.origin).as_nanos() as u64
    }

    /// Records that a call of `function` ran for `processing`; returns the new expected time.
    pub fn complete(&mut self, function: FunctionKey, processing: Duration) -> Duration {
        self.histories.complete(function, processing)
    }

    /// What the queue knows about `function`.
    pub fn history(&self, function: FunctionKey) -> Option<&FunctionHistory> {
        self.histories.get(function)
    }

    /// Drops the history of a function that is gone.
    pub fn forget(&mut self, function: FunctionKey) {
        self.histories.forget(function);
    }

    /// Each waiting call's expected remaining time, in no particular order: what a node reports
    /// of the work it holds.
    pub fn waiting_work(&self) -> impl Iterator<Item = Duration> + '_ {
        self.waiting
            .iter()
            .map(|w| Duration::from_nanos(w.basis.remaining(w.attained_ns)))
    }

    /// Takes up to `most` calls for another node to run: the calls that would start last here,
    /// among those that never ran (a preempted call stays) and that `movable` accepts, as long
    /// as the work ranked ahead of each (the expected remaining times of the calls before it,
    /// spread over `cores`) is at least `min_wait`; a call with less ahead starts here soon
    /// enough. The calls left keep their ranks and their order. Running calls are not counted
    /// ahead, so the wait is underestimated and a call moves only when it surely waits.
    ///
    /// Under FIFO and `baseline` none: in arrival order the call that waited longest is the
    /// next to run here anyway.
    ///
    /// Sorts the queue: O(n log n) in the waiting calls, paid only when a peer asks.
    pub fn release(
        &mut self,
        most: usize,
        cores: u32,
        min_wait: Duration,
        movable: impl Fn(&T) -> bool,
    ) -> Vec<T> {
        let mut taken = Vec::new();
        if most == 0 || self.waiting.is_empty() || self.policy.arrival_order() {
            return taken;
        }
        let mut all = std::mem::take(&mut self.waiting).into_vec();
        all.sort_unstable_by_key(|w| (w.priority, w.seq));
        let total: u64 = all.iter().map(|w| w.basis.remaining(w.attained_ns)).sum();
        let min_ahead = (min_wait.as_nanos() as u64).saturating_mul(u64::from(cores.max(1)));
        // The work of the calls ranked at or after the one looked at, walking from the last.
        let mut behind = 0u64;
        let mut at = all.len();
        while at > 0 && taken.len() < most {
            at -= 1;
            let call = &all[at];
            behind += call.basis.remaining(call.attained_ns);
            if total - behind < min_ahead {
                break;
            }
            if call.attained_ns == 0 && movable(&call.call) {
                // Every call after `at` was looked at already: the one swapped in stays.
                taken.push(all.swap_remove(at).call);
            }
        }
        self.waiting = BinaryHeap::from(all);
        taken
    }

    /// How many calls are waiting.
    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    /// Whether no call is waiting.
    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: u64 = 1_000_000;
    const WINDOW: Duration = Duration::from_secs(60);

    /// A queue whose functions have the given expected times (each recorded once).
    fn queue(policy: Policy, expected_ms: &[(FunctionKey, u64)]) -> CallQueue<(FunctionKey, u64)> {
        let mut q = CallQueue::new(policy, WINDOW);
        for &(f, ms) in expected_ms {
            q.complete(f, Duration::from_millis(ms));
        }
        q
    }

    fn drain(q: &mut CallQueue<(FunctionKey, u64)>) -> Vec<(FunctionKey, u64)> {
        std::iter::from_fn(|| q.pop()).collect()
    }

    #[test]
    fn waiting_work_is_each_waiting_calls_expected_time_less_what_it_attained() {
        let mut q = CallQueue::preemptive(Policy::Sept, WINDOW, 16);
        q.complete(1, Duration::from_millis(10));
        q.complete(2, Duration::from_millis(40));
        q.push_at(1, 0, (1, 0));
        q.push_at(2, 0, (2, 0));
        let mut work: Vec<Duration> = q.waiting_work().collect();
        work.sort();
        assert_eq!(work, [Duration::from_millis(10), Duration::from_millis(40)]);
        // The 10 ms call runs 4 ms and is preempted: 6 ms of it is left.
        let first = q.pop_ranked().unwrap();
        q.requeue(first.basis, 4 * MS, first.call);
        let mut work: Vec<Duration> = q.waiting_work().collect();
        work.sort();
        assert_eq!(work, [Duration::from_millis(6), Duration::from_millis(40)]);
    }

    #[test]
    fn fifo_runs_in_arrival_order() {
        let mut q = queue(Policy::Fifo, &[(1, 1000), (2, 1)]);
        q.push_at(1, 0, (1, 0));
        q.push_at(2, MS, (2, 1));
        q.push_at(1, 2 * MS, (1, 2));
        assert_eq!(drain(&mut q), [(1, 0), (2, 1), (1, 2)]);
    }

    #[test]
    fn sept_runs_short_functions_first_and_unknown_ones_before_all() {
        let mut q = queue(Policy::Sept, &[(1, 1000), (2, 10)]);
        q.push_at(1, 0, (1, 0));
        q.push_at(2, MS, (2, 1));
        q.push_at(3, 2 * MS, (3, 2));
        q.push_at(2, 3 * MS, (2, 3));
        assert_eq!(drain(&mut q), [(3, 2), (2, 1), (2, 3), (1, 0)]);
    }

    #[test]
    fn eect_orders_by_expected_completion() {
        let mut q = queue(Policy::Eect, &[(1, 100), (2, 10)]);
        q.push_at(1, 0, (1, 0)); // completes at 100 ms
        q.push_at(2, 50 * MS, (2, 50)); // completes at 60 ms
        q.push_at(2, 95 * MS, (2, 95)); // completes at 105 ms
        assert_eq!(drain(&mut q), [(2, 50), (1, 0), (2, 95)]);
    }

    #[test]
    fn rect_uses_the_previous_arrival_of_the_function() {
        let mut q = queue(Policy::Rect, &[(1, 100), (2, 10)]);
        q.push_at(1, 0, (1, 0)); // first call: 0 + 100
        q.push_at(2, 20 * MS, (2, 20)); // first call: 20 + 10 = 30
        q.push_at(2, 200 * MS, (2, 200)); // previous at 20: 20 + 10 = 30 (ties: arrival order)
        q.push_at(1, 300 * MS, (1, 300)); // previous at 0: 0 + 100 = 100
        assert_eq!(drain(&mut q), [(2, 20), (2, 200), (1, 0), (1, 300)]);
    }

    #[test]
    fn fair_choice_favours_rarely_called_functions() {
        // Function 1 is short but called often; function 2 is five times longer but rare. Call k
        // of function 1 ranks k * 10 ms; the one call of function 2 ranks 1 * 50 ms, so it
        // overtakes the fifteen calls of function 1 ranked above 50 that arrived before it.
        let mut q = queue(Policy::Fc, &[(1, 10), (2, 50)]);
        for i in 0..20 {
            q.push_at(1, i * MS, (1, i));
        }
        q.push_at(2, 20 * MS, (2, 20));
        let order = drain(&mut q);
        assert_eq!(order.iter().position(|c| c.0 == 2), Some(5));
    }

    #[test]
    fn fair_choice_forgets_calls_older_than_its_window() {
        let mut q = CallQueue::new(Policy::Fc, Duration::from_millis(100));
        q.complete(1, Duration::from_millis(10));
        q.complete(2, Duration::from_millis(25));
        for i in 0..5 {
            q.push_at(1, i * MS, (1, i)); // ranks 10, 20, 30, 40, 50
        }
        q.push_at(2, 4 * MS, (2, 4)); // ranks 25
        assert_eq!(q.history(1).unwrap().recent_calls(), 5);
        q.push_at(1, 500 * MS, (1, 500)); // the earlier five left the window: ranks 1 * 10
        assert_eq!(q.history(1).unwrap().recent_calls(), 1);
        assert_eq!(drain(&mut q)[..4], [(1, 0), (1, 500), (1, 1), (2, 4)]);
    }

    #[test]
    fn forgetting_a_function_resets_its_estimate() {
        let mut q = queue(Policy::Sept, &[(1, 100)]);
        q.forget(1);
        assert!(q.history(1).is_none());
    }

    #[test]
    fn a_deep_queue_stays_ordered() {
        let mut q = CallQueue::new(Policy::Sept, WINDOW);
        for f in 0..50u64 {
            q.complete(f, Duration::from_micros(f * 37 % 50));
        }
        for i in 0..50_000u64 {
            q.push_at(i % 50, i, i);
        }
        let order: Vec<u64> = std::iter::from_fn(|| q.pop()).collect();
        let expected: Vec<u64> = order
            .iter()
            .map(|i| q.history(i % 50).unwrap().expected_ns())
            .collect();
        assert_eq!(order.len(), 50_000);
        assert!(expected.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn release_takes_the_calls_that_start_last_while_they_would_wait() {
        // Functions of 10 ms and 40 ms under SEPT on two cores: four short calls, then three
        // long ones, one of them not movable.
        let mut q = queue(Policy::Sept, &[(1, 10), (2, 40)]);
        for i in 0..4 {
            q.push_at(1, i, (1, i));
        }
        for i in 4..7 {
            q.push_at(2, i, (2, i));
        }
        let wait = Duration::from_millis(20);
        let taken = q.release(5, 2, wait, |&(_, i)| i != 6);
        // Call 6 is last but stays; call 5 has 4 * 10 + 2 * 40 ms ahead over two cores, call 4
        // has 4 * 10 + 40 over two; call 3 would wait 15 ms, less than 20: it and the rest stay.
        assert_eq!(taken, [(2, 5), (2, 4)]);
        assert_eq!(drain(&mut q), [(1, 0), (1, 1), (1, 2), (1, 3), (2, 6)]);
        drain(&mut q);
        assert!(q.release(5, 2, Duration::ZERO, |_| true).is_empty());
    }

    #[test]
    fn release_leaves_a_call_that_already_ran() {
        let mut q = CallQueue::preemptive(Policy::Sept, WINDOW, 1);
        q.complete(1, Duration::from_millis(10));
        q.push_at(1, 0, 0u64);
        q.push_at(1, 1, 1);
        let first = q.pop_ranked().unwrap();
        q.requeue(first.basis, 2 * MS, first.call);
        let taken = q.release(2, 1, Duration::ZERO, |_| true);
        assert_eq!(taken, [1], "the preempted call 0 stays");
        assert_eq!(q.pop(), Some(0));
    }

    /// What a queue is asked to do in [`release_never_loses_nor_repeats_a_call`].
    #[derive(Clone, Debug)]
    enum Op {
        /// A call of a function (0..4) arrives; the flag says whether it may move.
        Push(FunctionKey, bool),
        /// A core takes the best call; it is preempted after the given ms, or ends.
        Pop(Option<u64>),
        /// A peer asks for this many calls that would wait at least the given ms.
        Release(usize, u64),
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        let op = prop_oneof![
            4 => (0u64..4, any::<bool>()).prop_map(|(f, m)| Op::Push(f, m)),
            3 => prop::option::of(1u64..20).prop_map(Op::Pop),
            1 => (0usize..4, 0u64..60).prop_map(|(n, w)| Op::Release(n, w)),
        ];
        prop::collection::vec(op, 1..150)
    }

    proptest! {
        /// Every call leaves the queue exactly once, to end here or to move; only a movable
        /// call that never ran moves; and the calls a release leaves run in the order they
        /// would have run without it.
        #[test]
        fn release_never_loses_nor_repeats_a_call(ops in ops(), policy in prop_oneof![Just(Policy::Sept), Just(Policy::Fc), Just(Policy::Eect)]) {
            let mut q = CallQueue::preemptive(policy, WINDOW, 4);
            for f in 0..4 {
                q.complete(f, Duration::from_millis(f * 10 + 1));
            }
            // Calls: (id, movable); ran: ids that got a core.
            let (mut next, mut ended, mut moved) = (0u64, Vec::new(), Vec::new());
            let mut ran = std::collections::HashSet::new();
            let mut movable = std::collections::HashSet::new();
            for (now, op) in ops.into_iter().enumerate() {
                let now = now as u64 * MS;
                match op {
                    Op::Push(f, may_move) => {
                        if may_move {
                            movable.insert(next);
                        }
                        q.push_at(f, now, next);
                        next += 1;
                    }
                    Op::Pop(preempted) => if let Some(call) = q.pop_ranked() {
                        ran.insert(call.call);
                        match preempted {
                            Some(ms) => { q.requeue(call.basis, call.attained_ns + ms * MS, call.call); }
                            None => ended.push(call.call),
                        }
                    },
                    Op::Release(most, wait_ms) => {
                        let mut before = Vec::new();
                        let mut copy = CallQueue::preemptive(policy, WINDOW, 4);
                        std::mem::swap(&mut copy.waiting, &mut q.waiting);
                        while let Some(w) = copy.waiting.pop() {
                            before.push((w.priority, w.seq, w.call));
                            q.waiting.push(w);
                        }
                        let taken = q.release(most, 2, Duration::from_millis(wait_ms), |c| movable.contains(c));
                        prop_assert!(taken.len() <= most);
                        for call in &taken {
                            prop_assert!(movable.contains(call), "call {call} may not move");
                            prop_assert!(!ran.contains(call), "call {call} already ran");
                        }
                        let left: Vec<u64> = before.iter().map(|b| b.2).filter(|c| !taken.contains(c)).collect();
                        let mut after = Vec::new();
                        while let Some(w) = q.waiting.pop() {
                            after.push(w);
                        }
                        prop_assert_eq!(after.iter().map(|w| w.call).collect::<Vec<_>>(), left);
                        q.waiting.extend(after);
                        moved.extend(taken);
                    }
                }
            }
            ended.extend(std::iter::from_fn(|| q.pop()));
            let mut all: Vec<u64> = ended.iter().chain(&moved).copied().collect();
            all.sort_unstable();
            prop_assert_eq!(all, (0..next).collect::<Vec<_>>());
        }
    }

    /// Arrivals: (function, gap since the previous arrival in ms).
    fn arrivals() -> impl Strategy<Value = Vec<(FunctionKey, u64)>> {
        prop::collection::vec((0u64..5, 0u64..40), 1..120)
    }

    /// Pushes `arrivals` into a queue whose functions take 0..4 * 30 ms, and returns the pop
    /// order with each call's (function, arrival, expected) and the queue.
    fn run(policy: Policy, arrivals: &[(FunctionKey, u64)]) -> Vec<(FunctionKey, u64, u64)> {
        let mut q = CallQueue::new(policy, WINDOW);
        for f in 0..5 {
            q.complete(f, Duration::from_millis(f * 30));
        }
        let mut now = 0;
        for &(f, gap) in arrivals {
            now += gap * MS;
            q.push_at(f, now, (f, now, f * 30 * MS));
        }
        std::iter::from_fn(|| q.pop()).collect()
    }

    proptest! {
        /// EECT cannot starve a call: one that arrives after another's expected completion
        /// runs after it.
        #[test]
        fn eect_is_starvation_free(arrivals in arrivals()) {
            let order = run(Policy::Eect, &arrivals);
            for (pos_i, &(_, r_i, e_i)) in order.iter().enumerate() {
                for &(_, r_j, _) in &order[..pos_i] {
                    prop_assert!(r_j <= r_i + e_i, "a call arriving at {r_j} overtook one due at {}", r_i + e_i);
                }
            }
        }

        /// RECT cannot starve a call: once the clock passes a call's arrival plus its expected
        /// time, each other function can overtake it at most once more (its next call ranks by
        /// an arrival that is already later), and its own function never.
        #[test]
        fn rect_is_starvation_free(arrivals in arrivals()) {
            let order = run(Policy::Rect, &arrivals);
            for (pos_i, &(f_i, r_i, e_i)) in order.iter().enumerate() {
                let late: Vec<_> = order[..pos_i].iter().filter(|c| c.1 > r_i + e_i).collect();
                prop_assert!(late.iter().all(|c| c.0 != f_i), "own later call overtook: {late:?}");
                let mut functions: Vec<_> = late.iter().map(|c| c.0).collect();
                functions.sort();
                functions.dedup();
                prop_assert_eq!(functions.len(), late.len(), "a function overtook twice: {:?}", late);
            }
        }

        /// Every policy hands out each call exactly once, and FIFO in arrival order.
        #[test]
        fn every_call_leaves_exactly_once(arrivals in arrivals()) {
            for policy in Policy::ALL {
                let order = run(policy, &arrivals);
                prop_assert_eq!(order.len(), arrivals.len());
                if matches!(policy, Policy::Fifo | Policy::Baseline) {
                    prop_assert!(order.windows(2).all(|w| w[0].1 <= w[1].1));
                }
            }
        }
    }
}
