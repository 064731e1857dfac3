//! The work waiting for a core, in the policy's order (who hands a core to it is
//! [`crate::cores`]'s).
//!
//! Under an arrival-order policy (`fifo` and `baseline`) calls wait in a lock-free queue
//! (crossbeam's `SegQueue`, which allocates one block per 31 calls), so a submitter and an
//! executor share no lock: handing a call over costs a few cache-line transfers and no system
//! call. Every other policy ranks calls by their function's history, so they wait in a
//! [`CallQueue`] heap behind a mutex.
//!
//! Invariants:
//! - `waiting` counts accepted calls that no executor has taken. A submitter increments it
//!   before it enqueues and an executor decrements it after it dequeues, so it may be ahead of
//!   the queue for an instant: a taker that sees it above zero and finds nothing tries again.
//!   It is the `mote_queue_length` gauge's own atomic, so the metric costs nothing extra.
//! - A submitter increments `waiting` (sequentially consistent) before it enqueues, which is
//!   what a core's releaser reads after it frees its core ([`Pending::is_empty`]): one of them
//!   sees the other (`mote_sched::cores`).
//! - Under arrival order, run times are kept in `histories` (for `GET /v1/node` and the
//!   expected-time gauge); only the threads that finish calls (executors, microtask threads)
//!   take that lock, never a submitter.
//! - Under preemption (`--preempt on`), `best` is the rank of the best waiting call, written
//!   under the heap's lock after every change, so that a running call can tell at an epoch tick
//!   whether anything waiting outranks it with one atomic load. A preempted call comes back
//!   through [`Pending::swap`], which queues it and takes the best call in one step under the
//!   lock, so two running calls never give their cores up for the same waiting call.

use crossbeam_queue::SegQueue;
use mote_sched::{CallQueue, FunctionHistory, FunctionKey, Histories, Policy, RankBasis};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Where finished calls' processing times are recorded: the histories the ranking policies
/// read, kept with the queue they rank.
pub(crate) trait RunTimes: Send + Sync {
    /// Records that a call of `function` ran for `processing`, and that it arrived at `arrived`
    /// if it was never queued (it ran where it was read); returns its new expected time.
    fn complete(
        &self,
        function: FunctionKey,
        processing: Duration,
        arrived: Option<Instant>,
    ) -> Duration;
}

impl<T: Send> RunTimes for Pending<T> {
    fn complete(
        &self,
        function: FunctionKey,
        processing: Duration,
        arrived: Option<Instant>,
    ) -> Duration {
        match &self.order {
            Order::Arrival { histories, .. } => histories.lock().complete(function, processing),
            Order::Ranked(queue) => {
                let mut queue = queue.lock();
                if let Some(arrival) = arrived {
                    queue.arrive(function, arrival);
                }
                queue.complete(function, processing)
            }
        }
    }
}

/// Why a call was not queued.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Refused {
    /// `waiting` calls were already queued, the most allowed.
    Full { waiting: usize, limit: usize },
    /// The executors are stopping.
    ShuttingDown,
}

/// A call taken from the queue and, under a ranking policy, what its rank is computed from.
pub(crate) struct Next<T> {
    pub(crate) work: T,
    pub(crate) basis: Option<RankBasis>,
}

enum Order<T> {
    Arrival {
        calls: SegQueue<T>,
        histories: Mutex<Histories>,
    },
    Ranked(Mutex<CallQueue<T>>),
}

/// Waiting work in its policy's order.
pub(crate) struct Pending<T> {
    order: Order<T>,
    /// The rank of the best waiting call under preemption; `u64::MAX` when none waits.
    best: AtomicU64,
    /// Whether running calls are compared with `best` (a preemptive ranking policy).
    preemptive: bool,
    waiting: prometheus_client::metrics::gauge::Gauge,
    limit: usize,
    shutdown: AtomicBool,
}

impl<T> Pending<T> {
    /// An empty queue for `policy` holding at most `limit` calls, counting them in `waiting`;
    /// `preemptive` (an aging factor) ranks calls so that running ones can be compared with them
    /// (see [`CallQueue::preemptive`]).
    pub(crate) fn new(
        policy: Policy,
        window: Duration,
        limit: usize,
        waiting: prometheus_client::metrics::gauge::Gauge,
        preemptive: Option<u64>,
    ) -> Self {
        let order = match (policy.arrival_order(), preemptive) {
            (true, _) => Order::Arrival {
                calls: SegQueue::new(),
                histories: Mutex::new(Histories::default()),
            },
            (false, None) => Order::Ranked(Mutex::new(CallQueue::new(policy, window))),
            (false, Some(aging)) => {
                Order::Ranked(Mutex::new(CallQueue::preemptive(policy, window, aging)))
            }
        };
        Self {
            preemptive: matches!(order, Order::Ranked(_)) && preemptive.is_some(),
            order,
            best: AtomicU64::new(u64::MAX),
            waiting,
            limit,
            shutdown: AtomicBool::new(false),
        }
    }

    fn waiting(&self) -> &AtomicI64 {
        self.waiting.inner()
    }

    /// Queues `call` of `function`, which arrived at `arrival`. A refused call is handed back
    /// with the reason.
    pub(crate) fn push(
        &self,
        function: FunctionKey,
        arrival: Instant,
        call: T,
    ) -> Result<(), (Refused, T)> {
        if self.shutdown.load(Ordering::Acquire) {
            return Err((Refused::ShuttingDown, call));
        }
        let before = self.waiting().fetch_add(1, Ordering::SeqCst);
        let before = usize::try_from(before).unwrap_or(0);
        if before >= self.limit {
            self.waiting().fetch_sub(1, Ordering::SeqCst);
            let full = Refused::Full {
                waiting: before,
                limit: self.limit,
            };
            return Err((full, call));
        }
        self.enqueue(function, arrival, call);
        Ok(())
    }

    /// Queues `call`, which was accepted already (a call that waited before), beyond the bound
    /// on waiting calls: as [`Pending::push`] otherwise. Hands it back once shut down.
    pub(crate) fn push_accepted(
        &self,
        function: FunctionKey,
        arrival: Instant,
        call: T,
    ) -> Result<(), T> {
        if self.shutdown.load(Ordering::Acquire) {
            return Err(call);
        }
        self.waiting().fetch_add(1, Ordering::SeqCst);
        self.enqueue(function, arrival, call);
        Ok(())
    }

    fn enqueue(&self, function: FunctionKey, arrival: Instant, call: T) {
        match &self.order {
            Order::Arrival { calls, .. } => calls.push(call),
            Order::Ranked(queue) => {
                let mut queue = queue.lock();
                queue.push(function, arrival, call);
                self.publish_best(&queue);
            }
        }
    }

    fn publish_best(&self, queue: &CallQueue<T>) {
        if self.preemptive {
            let best = queue.best_rank().unwrap_or(u64::MAX);
            self.best.store(best, Ordering::Relaxed);
        }
    }

    /// The rank of the best waiting call (`u64::MAX` if none waits, or without preemption).
    #[inline]
    pub(crate) fn best_rank(&self) -> u64 {
        self.best.load(Ordering::Relaxed)
    }

    /// What a call of `function` that arrived at `arrival` and started at once is ranked from
    /// while it runs, under a preemptive ranking policy (`None` otherwise).
    pub(crate) fn basis_now(&self, function: FunctionKey, arrival: Instant) -> Option<RankBasis> {
        match &self.order {
            Order::Ranked(queue) if self.preemptive => queue.lock().basis(function, arrival),
            _ => None,
        }
    }

    /// Takes the call that should run next, if one is waiting.
    pub(crate) fn try_take(&self) -> Option<Next<T>> {
        if self.waiting().load(Ordering::Acquire) <= 0 {
            return None;
        }
        let next = match &self.order {
            Order::Arrival { calls, .. } => calls.pop().map(|work| Next { work, basis: None }),
            Order::Ranked(queue) => {
                let mut queue = queue.lock();
                let next = queue.pop_ranked().map(|r| Next {
                    work: r.call,
                    basis: Some(r.basis),
                });
                self.publish_best(&queue);
                next
            }
        }?;
        self.waiting().fetch_sub(1, Ordering::AcqRel);
        Some(next)
    }

    /// Queues a call that has run for `attained_ns` (`work` resumes it) at its rank from
    /// `basis`, beyond the bound on waiting calls: it was already accepted. Hands `work` back
    /// once the queue is shut down, or under arrival order.
    pub(crate) fn requeue(&self, basis: RankBasis, attained_ns: u64, work: T) -> Result<(), T> {
        let Order::Ranked(queue) = &self.order else {
            return Err(work);
        };
        if self.is_shut_down() {
            return Err(work);
        }
        self.waiting().fetch_add(1, Ordering::SeqCst);
        let mut queue = queue.lock();
        queue.requeue(basis, attained_ns, work);
        self.publish_best(&queue);
        Ok(())
    }

    /// Preempts a running call, ranked `rank` from `basis` after `attained_ns` of service, if a
    /// waiting call still outranks it: queues `work` (what resumes it) at that rank and takes
    /// the best waiting call in the same step. Hands `work` back if nothing outranks the call
    /// any more (another core took the better call first), or under arrival order.
    pub(crate) fn swap(
        &self,
        basis: RankBasis,
        attained_ns: u64,
        rank: u64,
        work: T,
    ) -> Result<Next<T>, T> {
        let Order::Ranked(queue) = &self.order else {
            return Err(work);
        };
        let mut queue = queue.lock();
        if queue.best_rank().is_none_or(|best| best >= rank) || self.is_shut_down() {
            return Err(work);
        }
        queue.requeue(basis, attained_ns, work);
        let taken = queue.pop_ranked().expect("a better call was waiting");
        self.publish_best(&queue);
        Ok(Next {
            work: taken.call,
            basis: Some(taken.basis),
        })
    }

    /// Drops the history of a function that is gone.
    pub(crate) fn forget(&self, function: FunctionKey) {
        match &self.order {
            Order::Arrival { histories, .. } => histories.lock().forget(function),
            Order::Ranked(queue) => queue.lock().forget(function),
        }
    }

    /// Runs `read` on what is known of `function`.
    pub(crate) fn history<R>(
        &self,
        function: FunctionKey,
        read: impl FnOnce(Option<&FunctionHistory>) -> R,
    ) -> R {
        match &self.order {
            Order::Arrival { histories, .. } => read(histories.lock().get(function)),
            Order::Ranked(queue) => read(queue.lock().history(function)),
        }
    }

    /// Takes up to `most` waiting calls that `movable` accepts for another node to run, those
    /// that would start last while each would wait at least `min_wait` on `cores`
    /// ([`CallQueue::release`]). Under arrival order none: its lock-free queue hands calls out
    /// only from the front, and the oldest call is the next to run here.
    pub(crate) fn release(
        &self,
        most: usize,
        cores: u32,
        min_wait: Duration,
        movable: impl Fn(&T) -> bool,
    ) -> Vec<T> {
        let Order::Ranked(queue) = &self.order else {
            return Vec::new();
        };
        let taken = {
            let mut queue = queue.lock();
            let taken = queue.release(most, cores, min_wait, movable);
            self.publish_best(&queue);
            taken
        };
        self.waiting()
            .fetch_sub(taken.len() as i64, Ordering::AcqRel);
        taken
    }

    /// Each waiting call's expected remaining time, if the queue ranks calls (`None` in arrival
    /// order, which keeps no ranks): one pass over the queue under its lock, for the node's
    /// report.
    pub(crate) fn waiting_work(&self) -> Option<Vec<Duration>> {
        match &self.order {
            Order::Arrival { .. } => None,
            Order::Ranked(queue) => Some(queue.lock().waiting_work().collect()),
        }
    }

    /// How many calls are waiting.
    pub(crate) fn len(&self) -> usize {
        usize::try_from(self.waiting().load(Ordering::Acquire)).unwrap_or(0)
    }

    /// Whether nothing waits (or is about to be queued): sequentially consistent, for the
    /// hand-off protocol.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.waiting().load(Ordering::SeqCst) <= 0
    }

    /// Whether [`Pending::shut_down`] was called.
    pub(crate) fn is_shut_down(&self) -> bool {
        self.shutdown.load(Ordering::Acquire)
    }

    /// Refuses new calls; calls already queued stay until [`Pending::try_take`] drains them.
    pub(crate) fn shut_down(&self) {
        self.shutdown.store(true, Ordering::SeqCst);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::sync::Arc;

    fn pending(policy: Policy, limit: usize) -> Pending<(u64, u32)> {
        Pending::new(
            policy,
            Duration::from_secs(60),
            limit,
            Default::default(),
            None,
        )
    }

    #[test]
    fn a_full_queue_refuses_and_hands_the_call_back() {
        let q = pending(Policy::Fifo, 2);
        let now = Instant::now();
        q.push(1, now, (1, 0)).unwrap();
        q.push(1, now, (1, 1)).unwrap();
        assert_eq!(
            q.push(1, now, (1, 2)),
            Err((
                Refused::Full {
                    waiting: 2,
                    limit: 2
                },
                (1, 2)
            ))
        );
        assert_eq!(q.len(), 2);
        assert_eq!(q.try_take().map(|n| n.work), Some((1, 0)));
        q.push(1, now, (1, 3)).unwrap();
        assert_eq!(q.len(), 2);
    }

    #[test]
    fn shut_down_refuses_new_calls_and_keeps_queued_ones() {
        let q = pending(Policy::Sept, 8);
        q.push(1, Instant::now(), (1, 0)).unwrap();
        q.shut_down();
        assert_eq!(
            q.push(1, Instant::now(), (1, 1)),
            Err((Refused::ShuttingDown, (1, 1)))
        );
        assert_eq!(q.try_take().map(|n| n.work), Some((1, 0)));
        assert_eq!(q.push_accepted(1, Instant::now(), (1, 2)), Err((1, 2)));
    }

    #[test]
    fn histories_are_kept_under_every_policy() {
        for policy in Policy::ALL {
            let q = pending(policy, 8);
            q.complete(7, Duration::from_micros(10), None);
            assert_eq!(
                q.complete(7, Duration::from_micros(30), None),
                Duration::from_micros(20)
            );
            assert_eq!(q.history(7, |h| h.map(|h| h.expected_ns())), Some(20_000));
            q.forget(7);
            assert!(q.history(7, |h| h.is_none()), "{policy}");
        }
    }

    #[test]
    fn a_swap_queues_the_running_call_and_takes_a_better_one_in_one_step() {
        let q = Pending::new(
            Policy::Sept,
            Duration::from_secs(60),
            8,
            Default::default(),
            Some(mote_sched::DEFAULT_AGING),
        );
        let now = Instant::now();
        assert_eq!(q.best_rank(), u64::MAX);
        q.push(1, now, (1, 0)).unwrap();
        let first = q.try_take().unwrap();
        let basis = first.basis.unwrap();
        q.push(2, now, (2, 0)).unwrap();
        let waiting = q.best_rank();
        // Neither function has a history: the running call has outrun its estimate of zero and
        // ranks by what it attained, behind the one that has not started.
        let rank = basis.rank(5_000_000);
        assert!(waiting < rank);
        let swapped = q.swap(basis, 5_000_000, rank, (1, 1)).ok().unwrap();
        assert_eq!(swapped.work, (2, 0));
        assert_eq!(q.best_rank(), rank);
        assert_eq!(q.len(), 1);
        // Nothing better waits now: the call keeps its core and gets its resumption back.
        assert_eq!(q.swap(basis, 5_000_000, rank, (1, 2)).err(), Some((1, 2)));
        assert_eq!(q.try_take().map(|n| n.work), Some((1, 1)));
        assert_eq!(q.best_rank(), u64::MAX);
    }

    /// Producers and consumers on real threads: every call is taken exactly once, each
    /// producer's calls in the order it sent them.
    #[test]
    fn no_call_is_lost_or_repeated_across_threads() {
        for policy in [Policy::Fifo, Policy::Sept] {
            let q = Arc::new(pending(policy, usize::MAX));
            let (producers, per_producer) = (3u64, 20_000u32);
            let consumers: Vec<_> = (0..2)
                .map(|_| {
                    let q = q.clone();
                    std::thread::spawn(move || {
                        let mut taken = Vec::new();
                        loop {
                            match q.try_take() {
                                Some(n) => taken.push(n.work),
                                None if q.is_shut_down() && q.is_empty() => return taken,
                                None => std::thread::yield_now(),
                            }
                        }
                    })
                })
                .collect();
            let senders: Vec<_> = (0..producers)
                .map(|p| {
                    let q = q.clone();
                    std::thread::spawn(move || {
                        for i in 0..per_producer {
                            q.push(p, Instant::now(), (p, i)).unwrap();
                            if i % 1000 == 0 {
                                std::thread::sleep(Duration::from_micros(200));
                            }
                        }
                    })
                })
                .collect();
            senders.into_iter().for_each(|s| s.join().unwrap());
            while !q.is_empty() {
                std::thread::sleep(Duration::from_millis(1));
            }
            q.shut_down();
            let taken: Vec<Vec<(u64, u32)>> =
                consumers.into_iter().map(|c| c.join().unwrap()).collect();
            let total: usize = taken.iter().map(Vec::len).sum();
            assert_eq!(
                total,
                (producers * per_producer as u64) as usize,
                "{policy}"
            );
            if policy == Policy::Fifo {
                for consumer in &taken {
                    for p in 0..producers {
                        let seen: Vec<u32> =
                            consumer.iter().filter(|c| c.0 == p).map(|c| c.1).collect();
                        assert!(seen.windows(2).all(|w| w[0] < w[1]), "out of order: {p}");
                    }
                }
            }
            let mut all: Vec<_> = taken.into_iter().flatten().collect();
            all.sort_unstable();
            all.dedup();
            assert_eq!(all.len(), total, "a call was taken twice");
        }
    }

    proptest! {
        /// Under arrival order, one thread's pushes and takes behave as a bounded FIFO queue.
        #[test]
        fn arrival_order_is_a_bounded_fifo(ops in proptest::collection::vec(any::<bool>(), 0..200), limit in 1usize..8) {
            let q = pending(Policy::Fifo, limit);
            let mut model = std::collections::VecDeque::new();
            for (i, push) in ops.into_iter().enumerate() {
                if push {
                    let pushed = q.push(0, Instant::now(), (0, i as u32));
                    if model.len() < limit {
                        prop_assert!(pushed.is_ok());
                        model.push_back((0, i as u32));
                    } else {
                        prop_assert_eq!(pushed, Err((Refused::Full { waiting: limit, limit }, (0, i as u32))));
                    }
                } else {
                    prop_assert_eq!(q.try_take().map(|n| n.work), model.pop_front());
                }
                prop_assert_eq!(q.len(), model.len());
            }
        }
    }
}
