//! How one simulated node runs the calls placed on it: the real [`CallQueue`] with one call per
//! core under the ranking policies and FIFO, preemptive or not ([`crate::preempt`]), or
//! idealised processor sharing under `baseline`.
//!
//! Both keep the node's function histories as the real node does: each call's processing time
//! (time from start to end on the node) is recorded when it ends, and the expected time of a
//! function, which the placement and the ranking read, is the mean of its last ten.
//!
//! Times are nanoseconds of virtual time since the burst started.

use crate::CallId;
use crate::preempt::{PreemptSpec, Preemptive};
use mote_cluster::Backlog;
use mote_sched::{CallQueue, FunctionKey, Histories, Policy, remaining_ns};
use std::cmp::{Ordering, Reverse};
use std::collections::BinaryHeap;
use std::time::Duration;

/// One node's calls and histories.
pub(crate) enum Local {
    /// Non-preemptive: at most `cores` calls run, the rest wait in the policy's queue.
    Queue {
        /// The real queue, ranking each call once on arrival.
        queue: CallQueue<CallId>,
        /// Cores.
        cores: u32,
        /// Calls running, one per core: each with its expected time and when it started.
        running: Vec<(CallId, u64, u64)>,
    },
    /// At most `cores` calls run; a call that has run its quantum gives its core to a waiting
    /// one that outranks it.
    Preemptive {
        node: Box<Preemptive>,
        /// Calls that wait (the suite's `sleep`): they hold no core, as on the node, where a
        /// sleeping call gives its core up.
        waiting: u32,
    },
    /// Every call starts on arrival and the running calls share the cores.
    Sharing {
        /// The calls that compute, sharing the cores.
        sharing: Sharing,
        /// Calls that wait (the suite's `sleep`): they hold no share of a core, as a thread
        /// blocked in the OS holds none.
        waiting: u32,
        /// What the node measured of each function.
        histories: Histories,
    },
}

impl Local {
    /// An idle node with `cores` cores under `policy`, Fair-Choice counting calls over
    /// `fc_window`, preempting as `preempt` says if given (under a ranking policy).
    pub(crate) fn new(
        policy: Policy,
        cores: u32,
        fc_window: Duration,
        preempt: Option<PreemptSpec>,
    ) -> Self {
        match (policy.oversubscribes(), preempt) {
            (true, _) => Local::Sharing {
                sharing: Sharing::new(cores),
                waiting: 0,
                histories: Histories::default(),
            },
            (false, Some(spec)) => Local::Preemptive {
                node: Box::new(Preemptive::new(policy, cores, fc_window, spec)),
                waiting: 0,
            },
            (false, None) => Local::Queue {
                queue: CallQueue::new(policy, fc_window),
                cores,
                running: Vec::new(),
            },
        }
    }

    /// Takes a call of `function` that reached this node at `now_ns` and needs `work` of a core
    /// (or, if it `waits`, holds its core that long without computing).
    pub(crate) fn admit(
        &mut self,
        now_ns: u64,
        function: FunctionKey,
        call: CallId,
        work: Duration,
        waits: bool,
    ) -> Admitted {
        match self {
            Local::Queue {
                queue,
                cores,
                running,
            } => {
                queue.push_at(function, now_ns, call);
                // Calls wait only while every core is busy, so a free core takes this call.
                match (running.len() < *cores as usize)
                    .then(|| queue.pop_ranked())
                    .flatten()
                {
                    Some(first) => {
                        running.push((first.call, first.basis.remaining(0), now_ns));
                        Admitted::Runs(first.call)
                    }
                    None => Admitted::Waits,
                }
            }
            Local::Sharing { waiting, .. } | Local::Preemptive { waiting, .. } if waits => {
                *waiting += 1;
                Admitted::Runs(call)
            }
            Local::Preemptive { node, .. } => {
                node.admit(now_ns, function, call, work);
                Admitted::Rescheduled
            }
            Local::Sharing { sharing, .. } => {
                sharing.start(now_ns, call, work);
                Admitted::Rescheduled
            }
        }
    }

    /// Ends a call that was [`Admitted::Runs`] after `processing`; returns the call that takes
    /// its core, if one was waiting.
    pub(crate) fn end(
        &mut self,
        now_ns: u64,
        call: CallId,
        function: FunctionKey,
        processing: Duration,
    ) -> Option<CallId> {
        match self {
            Local::Queue { queue, running, .. } => {
                queue.complete(function, processing);
                running.retain(|(on, ..)| *on != call);
                let next = queue.pop_ranked()?;
                running.push((next.call, next.basis.remaining(0), now_ns));
                Some(next.call)
            }
            Local::Sharing {
                waiting, histories, ..
            } => {
                histories.complete(function, processing);
                *waiting -= 1;
                None
            }
            Local::Preemptive { node, waiting } => {
                node.warm(function, processing);
                *waiting -= 1;
                None
            }
        }
    }

    /// Takes up to `most` waiting calls that `movable` accepts, for a peer with a core free to
    /// run: those that would start last here while each would wait at least `min_wait`
    /// ([`CallQueue::release`] on the node's cores). Never a call that started; none under
    /// FIFO (the real node's arrival-order queue hands over nothing) nor processor sharing,
    /// where every call starts on arrival.
    pub(crate) fn release(
        &mut self,
        most: usize,
        min_wait: Duration,
        movable: impl Fn(CallId) -> bool,
    ) -> Vec<CallId> {
        match self {
            Local::Queue { queue, cores, .. } => {
                queue.release(most, *cores, min_wait, |call| movable(*call))
            }
            Local::Preemptive { node, .. } => node.release(most, min_wait, movable),
            Local::Sharing { .. } => Vec::new(),
        }
    }

    /// When something next happens on the node if nothing arrives (a sharing call ends; a
    /// preemptive node's call ends or is looked at), as of `now_ns`.
    pub(crate) fn next_event(&self, now_ns: u64) -> Option<u64> {
        match self {
            Local::Queue { .. } => None,
            Local::Preemptive { node, .. } => node.next_event(now_ns),
            Local::Sharing { sharing, .. } => sharing.next_end(),
        }
    }

    /// Brings a sharing or preemptive node to `now_ns`; returns the calls that ended.
    /// `function` and `landed` say of each call what it was and when it reached this node, for
    /// a sharing call's processing time.
    pub(crate) fn advance(
        &mut self,
        now_ns: u64,
        function: impl Fn(CallId) -> FunctionKey,
        landed: impl Fn(CallId) -> u64,
    ) -> Vec<CallId> {
        let (sharing, histories) = match self {
            Local::Queue { .. } => return Vec::new(),
            Local::Preemptive { node, .. } => {
                return node
                    .advance(now_ns)
                    .into_iter()
                    .map(|(call, _)| call)
                    .collect();
            }
            Local::Sharing {
                sharing, histories, ..
            } => (sharing, histories),
        };
        let ended = sharing.end_due(now_ns);
        for &call in &ended {
            // What the real node measures: the call's time on its thread, sharing included.
            let processing = Duration::from_nanos(now_ns.saturating_sub(landed(call)));
            histories.complete(function(call), processing);
        }
        ended
    }

    /// Records a processing time without a call, as the burst experiment's warm-up does.
    pub(crate) fn warm(&mut self, function: FunctionKey, processing: Duration) {
        match self {
            Local::Queue { queue, .. } => {
                queue.complete(function, processing);
            }
            Local::Preemptive { node, .. } => node.warm(function, processing),
            Local::Sharing { histories, .. } => {
                histories.complete(function, processing);
            }
        }
    }

    /// The expected processing time of `function` here (zero before its first call).
    pub(crate) fn expected(&self, function: FunctionKey) -> Duration {
        let history = match self {
            Local::Queue { queue, .. } => queue.history(function),
            Local::Preemptive { node, .. } => {
                return Duration::from_nanos(node.expected_ns(function));
            }
            Local::Sharing { histories, .. } => histories.get(function),
        };
        Duration::from_nanos(history.map_or(0, |h| h.expected_ns()))
    }

    /// Calls running and calls waiting for a core, as the node reports them.
    pub(crate) fn calls(&self) -> (u32, u32) {
        match self {
            Local::Queue { queue, running, .. } => (running.len() as u32, queue.len() as u32),
            Local::Preemptive { node, waiting } => {
                let (running, queued) = node.calls();
                (running + waiting, queued)
            }
            Local::Sharing {
                sharing, waiting, ..
            } => (sharing.len() as u32 + waiting, 0),
        }
    }

    /// The node's expected work at `now_ns` as it reports it ([`Backlog`]); a sharing node,
    /// which ranks nothing, as its calls times `mean`, its mean expected time.
    pub(crate) fn backlog(&self, now_ns: u64, mean: Duration) -> Backlog {
        match self {
            Local::Queue { queue, running, .. } => {
                let mut backlog = Backlog::empty(!queue.policy().arrival_order());
                for left in queue.waiting_work() {
                    backlog.queue(left);
                }
                for &(_, expected, started) in running {
                    let left = remaining_ns(expected, now_ns.saturating_sub(started));
                    let left = Duration::from_nanos(left);
                    backlog.running(left, left, Duration::MAX);
                }
                backlog
            }
            Local::Preemptive { node, .. } => node.backlog(now_ns),
            Local::Sharing { .. } => {
                let (running, queued) = self.calls();
                Backlog::all_ahead(mean * (running + queued))
            }
        }
    }
}

/// What became of a call that reached a node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Admitted {
    /// This call (the one admitted, or under a queue the first in line) holds a core, or waits
    /// without one, until its work is done.
    Runs(CallId),
    /// It shares the cores, or waits on a preemptive node: the node's next event may have
    /// moved ([`Local::next_event`]).
    Rescheduled,
    /// It waits in the queue for a core.
    Waits,
}

/// A running call's place in processor sharing: when its work is done, in the service each
/// running call has received.
#[derive(Clone, Copy, Debug)]
struct Finish {
    service_ns: f64,
    call: CallId,
}

impl PartialEq for Finish {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Finish {}

impl PartialOrd for Finish {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Finish {
    fn cmp(&self, other: &Self) -> Ordering {
        self.service_ns
            .total_cmp(&other.service_ns)
            .then(self.call.cmp(&other.call))
    }
}

/// Idealised processor sharing: `n` running calls on `c` cores each progress at `min(1, c/n)`
/// of a core, with no switching cost.
///
/// Every running call receives service at the same rate, so one clock serves them all: the
/// service a call present since the start would have received (`service_ns`). A call arriving
/// when that clock reads `s` with work `w` is done when it reads `s + w`; the heap orders calls
/// by that, so arrivals and completions cost O(log n) however many calls share the cores.
pub(crate) struct Sharing {
    cores: f64,
    service_ns: f64,
    /// When `service_ns` was last brought up to date.
    at_ns: u64,
    running: BinaryHeap<Reverse<Finish>>,
}

/// Service below this (a nanosecond of work) counts as done: completion times are rounded up
/// to whole nanoseconds, so the clock may stop a hair short of a call's finish.
const DONE_SLACK_NS: f64 = 1.0;

impl Sharing {
    fn new(cores: u32) -> Self {
        Self {
            cores: f64::from(cores.max(1)),
            service_ns: 0.0,
            at_ns: 0,
            running: BinaryHeap::new(),
        }
    }

    /// Calls running.
    pub(crate) fn len(&self) -> usize {
        self.running.len()
    }

    /// The share of a core each running call gets.
    fn rate(&self) -> f64 {
        match self.running.len() {
            0 => 1.0,
            n => (self.cores / n as f64).min(1.0),
        }
    }

    fn advance(&mut self, now_ns: u64) {
        self.service_ns += now_ns.saturating_sub(self.at_ns) as f64 * self.rate();
        self.at_ns = self.at_ns.max(now_ns);
    }

    /// Starts `call`, which needs `work` of a core, at `now_ns`.
    pub(crate) fn start(&mut self, now_ns: u64, call: CallId, work: Duration) {
        self.advance(now_ns);
        self.running.push(Reverse(Finish {
            service_ns: self.service_ns + work.as_nanos() as f64,
            call,
        }));
    }

    /// When the next running call ends, if nothing arrives before.
    pub(crate) fn next_end(&self) -> Option<u64> {
        let Reverse(first) = self.running.peek()?;
        let left = (first.service_ns - self.service_ns).max(0.0);
        Some(self.at_ns + (left / self.rate()).ceil() as u64)
    }

    /// Ends the calls whose work is done at `now_ns`, in the order they finish.
    pub(crate) fn end_due(&mut self, now_ns: u64) -> Vec<CallId> {
        self.advance(now_ns);
        let mut ended = Vec::new();
        while let Some(Reverse(first)) = self.running.peek()
            && first.service_ns <= self.service_ns + DONE_SLACK_NS
        {
            ended.push(first.call);
            self.running.pop();
        }
        ended
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: u64 = 1_000_000_000;

    #[test]
    fn two_equal_calls_sharing_one_core_both_end_at_twice_their_work() {
        let mut ps = Sharing::new(1);
        ps.start(0, 0, Duration::from_secs(1));
        ps.start(0, 1, Duration::from_secs(1));
        assert_eq!(ps.next_end(), Some(2 * S));
        assert_eq!(ps.end_due(2 * S), [0, 1]);
        assert_eq!(ps.next_end(), None);
    }

    #[test]
    fn a_short_call_joining_a_long_one_slows_it_by_its_own_work() {
        // One core: a 2 s call alone for 1 s, then a 0.5 s call joins. Both run at half speed:
        // the short one ends at 2 s, the long one (1 s of work left at 1 s, 0.5 s done by 2 s)
        // alone again ends at 2.5 s.
        let mut ps = Sharing::new(1);
        ps.start(0, 0, Duration::from_secs(2));
        ps.start(S, 1, Duration::from_millis(500));
        assert_eq!(ps.next_end(), Some(2 * S));
        assert_eq!(ps.end_due(2 * S), [1]);
        assert_eq!(ps.next_end(), Some(5 * S / 2));
        assert_eq!(ps.end_due(5 * S / 2), [0]);
    }

    #[test]
    fn calls_no_more_than_cores_run_at_full_speed() {
        let mut ps = Sharing::new(4);
        for call in 0..4 {
            ps.start(0, call, Duration::from_secs(1 + call as u64));
        }
        assert_eq!(ps.next_end(), Some(S));
        assert_eq!(ps.end_due(S), [0]);
        assert_eq!(ps.next_end(), Some(2 * S));
    }

    #[test]
    fn each_node_keeps_its_own_history_under_every_policy() {
        for policy in [Policy::Fc, Policy::Baseline] {
            let mut local = Local::new(policy, 2, Duration::from_secs(60), None);
            assert_eq!(local.expected(3), Duration::ZERO);
            local.warm(3, Duration::from_millis(10));
            local.warm(3, Duration::from_millis(30));
            assert_eq!(local.expected(3), Duration::from_millis(20), "{policy}");
            assert_eq!(local.calls(), (0, 0));
        }
    }
}
