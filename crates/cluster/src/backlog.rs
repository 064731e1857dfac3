//! The work a node holds, arranged by what a new call would wait for ([`Backlog`]).
//!
//! A node under a ranking policy runs a call expected to take 5 ms before one expected to take
//! 2 s, and, when it preempts, takes a core from a long call for it after the quantum. So "how
//! long would a call wait there" depends on the call: a node holding one long call is busy for a
//! long one and nearly free for a short one. Counting calls, or calls times a mean, cannot tell
//! the two apart; a backlog can.
//!
//! A backlog keeps the expected work of a node's calls in [`CLASSES`] classes by the octave of
//! their function's expected time, cumulatively: `upto[c]` is the work of the classes up to `c`,
//! so the work ahead of a new call is one read ([`Backlog::ahead_of`]) and adding a call touches
//! at most [`CLASSES`] words. A node that runs calls in arrival order puts everything in the
//! first class: all of it is ahead of any new call.
//!
//! The node builds its backlog from what it knows: a waiting call counts its function's expected
//! time, a running call what remains of it after the service it attained (the part it runs
//! before it could yield its core counts as ahead of everything). A peer's backlog ages between
//! reports as its cores would work it off, best-ranked first ([`Backlog::drained`]).

use std::time::Duration;

/// Classes of expected time: octaves from 4 µs up, the last one open.
pub const CLASSES: usize = 24;

/// The class of a call expected to take `expected_ns`: below 4.1 µs the first; then one class
/// an octave; from 17 s on the last.
pub fn class_of(expected_ns: u64) -> usize {
    let octave = (u64::BITS - expected_ns.leading_zeros()) as usize;
    octave.saturating_sub(12).min(CLASSES - 1)
}

/// A node's expected work by the class of the calls it belongs to, cumulative.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backlog {
    /// `upto_ns[c]`: the work of classes `0..=c`, in nanoseconds.
    upto_ns: [u64; CLASSES],
    /// Whether the node runs waiting calls best-ranked first (by expected time) rather than in
    /// arrival order.
    ranked: bool,
}

impl Default for Backlog {
    fn default() -> Self {
        Self::ranked()
    }
}

impl Backlog {
    /// An empty backlog of a node that ranks calls by their expected time (SEPT, Fair-Choice,
    /// EECT, RECT) if `ranked`, else of one that runs them in arrival order or shares its cores
    /// among all of them, where everything it holds is ahead of a new call.
    pub fn empty(ranked: bool) -> Self {
        Self {
            upto_ns: [0; CLASSES],
            ranked,
        }
    }

    /// [`Backlog::empty`] of a node that ranks calls.
    pub fn ranked() -> Self {
        Self::empty(true)
    }

    /// [`Backlog::empty`] of a node that runs calls in arrival order.
    pub fn in_arrival_order() -> Self {
        Self::empty(false)
    }

    /// `work` that every new call waits behind, on a node that runs calls in arrival order.
    pub fn all_ahead(work: Duration) -> Self {
        let mut backlog = Self::in_arrival_order();
        backlog.queue(work);
        backlog
    }

    /// Whether the node ranks calls by their expected time.
    pub fn is_ranked(&self) -> bool {
        self.ranked
    }

    /// The class a call expected to take `expected` joins here.
    fn class(&self, expected: Duration) -> usize {
        match self.ranked {
            true => class_of(expected.as_nanos() as u64),
            false => 0,
        }
    }

    /// Counts a waiting call expected to take `expected`.
    pub fn queue(&mut self, expected: Duration) {
        self.add(self.class(expected), expected.as_nanos() as u64);
    }

    /// Takes back a waiting call counted by [`Backlog::queue`]; nothing goes below zero.
    pub fn unqueue(&mut self, expected: Duration) {
        let class = self.class(expected);
        let work = expected.as_nanos() as u64;
        for upto in &mut self.upto_ns[class..] {
            *upto = upto.saturating_sub(work);
        }
    }

    /// Counts a running call expected to take `expected` in all, of which `remaining` is left
    /// and `before_yield` will run before it could give its core to a better-ranked call (all of
    /// `remaining` on a node that does not preempt).
    pub fn running(&mut self, expected: Duration, remaining: Duration, before_yield: Duration) {
        let first = before_yield.min(remaining);
        self.add(0, first.as_nanos() as u64);
        self.add(self.class(expected), (remaining - first).as_nanos() as u64);
    }

    fn add(&mut self, class: usize, work_ns: u64) {
        for upto in &mut self.upto_ns[class..] {
            *upto = upto.saturating_add(work_ns);
        }
    }

    /// The work that runs before a call expected to take `expected` would start: the work of
    /// its class and the classes before.
    #[inline]
    pub fn ahead_of(&self, expected: Duration) -> Duration {
        Duration::from_nanos(self.upto_ns[self.class(expected)])
    }

    /// All the work.
    pub fn total(&self) -> Duration {
        Duration::from_nanos(self.upto_ns[CLASSES - 1])
    }

    /// Whether it holds no work.
    pub fn is_empty(&self) -> bool {
        self.upto_ns[CLASSES - 1] == 0
    }

    /// What is left after cores did `done` of work, best-ranked first: the classes ahead go
    /// first, so each cumulative sum loses all of `done` it can.
    pub fn drained(&self, done: Duration) -> Self {
        let done = done.as_nanos() as u64;
        let mut left = *self;
        for upto in &mut left.upto_ns {
            *upto = upto.saturating_sub(done);
        }
        left
    }

    /// The work of each class, first to last: what a node writes in its report.
    pub fn by_class(&self) -> [u64; CLASSES] {
        let mut previous = 0;
        self.upto_ns.map(|upto| {
            let own = upto - previous;
            previous = upto;
            own
        })
    }

    /// The backlog whose classes hold `by_class` (nanoseconds, first to last; classes beyond
    /// [`CLASSES`] are added to the last), as read from a report.
    pub fn from_classes(ranked: bool, by_class: &[u64]) -> Self {
        let mut backlog = Self::empty(ranked);
        for (class, &work) in by_class.iter().enumerate() {
            backlog.add(class.min(CLASSES - 1), work);
        }
        backlog
    }

    /// This backlog with `other`'s work added.
    pub(crate) fn plus(&self, other: &Backlog) -> Self {
        let mut sum = *self;
        for (upto, more) in sum.upto_ns.iter_mut().zip(other.upto_ns) {
            *upto = upto.saturating_add(more);
        }
        sum
    }

    /// The work ahead of a class once `done` of this backlog's was worked off, with `extra`
    /// (the calls sent since) added: one class's read of `self.drained(done).plus(extra)`.
    #[inline]
    pub(crate) fn ahead_after(&self, expected: Duration, done_ns: u64, extra: &Backlog) -> u64 {
        let class = self.class(expected);
        self.upto_ns[class]
            .saturating_sub(done_ns)
            .saturating_add(extra.upto_ns[class])
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn classes_are_octaves_from_four_microseconds_to_seventeen_seconds() {
        assert_eq!(class_of(0), 0);
        assert_eq!(class_of(4095), 0);
        assert_eq!(class_of(4096), 1);
        assert_eq!(class_of(8191), 1);
        assert_eq!(class_of(8192), 2);
        assert_eq!(class_of(1 << 33), 22);
        assert_eq!(class_of(1 << 34), 23);
        assert_eq!(class_of(u64::MAX), 23);
    }

    #[test]
    fn a_ranked_node_puts_only_shorter_calls_ahead_of_a_new_one() {
        let mut b = Backlog::ranked();
        b.queue(2000 * MS);
        b.queue(5 * MS);
        assert_eq!(b.ahead_of(MS), Duration::ZERO);
        assert_eq!(b.ahead_of(5 * MS), 5 * MS, "its own class counts");
        assert_eq!(b.ahead_of(100 * MS), 5 * MS);
        assert_eq!(b.ahead_of(3000 * MS), 2005 * MS);
        assert_eq!(b.total(), 2005 * MS);

        let mut fifo = Backlog::in_arrival_order();
        fifo.queue(2000 * MS);
        assert_eq!(fifo.ahead_of(MS), 2000 * MS);
    }

    #[test]
    fn a_running_call_is_ahead_of_everything_until_it_could_yield() {
        let mut b = Backlog::ranked();
        // 1.5 s left of a 2 s call that yields after 2 ms more.
        b.running(2000 * MS, 1500 * MS, 2 * MS);
        assert_eq!(b.ahead_of(Duration::ZERO), 2 * MS);
        assert_eq!(b.ahead_of(10 * MS), 2 * MS);
        assert_eq!(b.ahead_of(2000 * MS), 1500 * MS);
        // A call that does not preempt: all of it.
        let mut b = Backlog::ranked();
        b.running(2000 * MS, 1500 * MS, Duration::MAX);
        assert_eq!(b.ahead_of(Duration::ZERO), 1500 * MS);
    }

    #[test]
    fn the_backlog_drains_best_ranked_first() {
        let mut b = Backlog::ranked();
        b.queue(5 * MS);
        b.queue(1000 * MS);
        let d = b.drained(3 * MS);
        assert_eq!(d.ahead_of(5 * MS), 2 * MS);
        assert_eq!(d.total(), 1002 * MS);
        assert!(b.drained(2 * Duration::from_secs(1)).is_empty());
    }

    #[test]
    fn a_report_with_more_classes_than_there_are_adds_the_rest_to_the_last_and_saturates() {
        // What a forged or newer node's key could hold: 30 classes, the last ones near u64::MAX.
        let mut by_class = vec![1u64; 30];
        by_class[28] = u64::MAX - 1;
        by_class[29] = u64::MAX - 1;
        let b = Backlog::from_classes(true, &by_class);
        assert_eq!(b.by_class()[..CLASSES - 1], [1; CLASSES - 1]);
        assert_eq!(b.total(), Duration::from_nanos(u64::MAX));
        assert_eq!(b.ahead_of(Duration::ZERO), Duration::from_nanos(1));
    }

    proptest! {
        /// The report's per-class form reads back to the same backlog, and queueing then
        /// unqueueing a call leaves it as it was.
        #[test]
        fn classes_round_trip_and_unqueue_undoes_queue(
            calls in proptest::collection::vec(0u64..40_000_000_000, 0..50),
            extra in 0u64..40_000_000_000,
            ranked: bool,
        ) {
            let mut b = Backlog::empty(ranked);
            for &ns in &calls {
                b.queue(Duration::from_nanos(ns));
            }
            prop_assert_eq!(Backlog::from_classes(ranked, &b.by_class()), b);
            let before = b;
            b.queue(Duration::from_nanos(extra));
            b.unqueue(Duration::from_nanos(extra));
            prop_assert_eq!(b, before);
            // Work ahead grows with the expected time, and is never more than all of it.
            let mut last = Duration::ZERO;
            for class in 0..CLASSES {
                let ahead = b.ahead_of(Duration::from_nanos(1u64 << (class + 11)));
                prop_assert!(ahead >= last && ahead <= b.total());
                last = ahead;
            }
            // The read of a drained backlog with calls added equals the backlog built so.
            let done = calls.first().copied().unwrap_or(0);
            let mut sent = b;
            sent.queue(Duration::from_nanos(extra));
            for class in 0..CLASSES {
                let e = Duration::from_nanos(1u64 << (class + 11));
                prop_assert_eq!(
                    b.ahead_after(e, done, &sent),
                    b.drained(Duration::from_nanos(done)).plus(&sent).ahead_of(e).as_nanos() as u64
                );
            }
        }
    }
}
