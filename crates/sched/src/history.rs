//! What the scheduler remembers about each function.

use crate::FunctionKey;
use std::collections::{HashMap, VecDeque};
use std::time::Duration;

/// How many recent processing times the estimate averages, as in the paper.
pub const HISTORY_LEN: usize = 10;

/// A function's recent history on this node. Times are nanoseconds on the queue's clock.
#[derive(Clone, Debug, Default)]
pub struct FunctionHistory {
    recent: [u64; HISTORY_LEN],
    recorded: usize,
    next: usize,
    sum: u64,
    previous_arrival: Option<u64>,
    arrivals: VecDeque<u64>,
}

impl FunctionHistory {
    /// The expected processing time: the mean of the last [`HISTORY_LEN`] completed calls, or 0
    /// before the first completes (so a new function is tried early, as in the paper).
    pub fn expected_ns(&self) -> u64 {
        match self.recorded {
            0 => 0,
            n => self.sum / n as u64,
        }
    }

    /// Records a completed call's processing time.
    pub fn complete(&mut self, processing_ns: u64) {
        if self.recorded == HISTORY_LEN {
            self.sum -= self.recent[self.next];
        } else {
            self.recorded += 1;
        }
        self.recent[self.next] = processing_ns;
        self.sum += processing_ns;
        self.next = (self.next + 1) % HISTORY_LEN;
    }

    /// Records an arrival at `now_ns`, forgetting arrivals older than `window_ns`. Returns when
    /// the previous call of this function arrived (this one's time if it is the first).
    pub(crate) fn arrive(&mut self, now_ns: u64, window_ns: u64) -> u64 {
        let previous = self.previous_arrival.unwrap_or(now_ns);
        self.previous_arrival = Some(now_ns);
        self.arrivals.push_back(now_ns);
        self.forget_before(now_ns.saturating_sub(window_ns));
        previous
    }

    /// Calls that arrived in the window ending at the latest arrival.
    pub fn recent_calls(&self) -> usize {
        self.arrivals.len()
    }

    /// The last processing times, oldest first.
    pub fn recent_processing_ns(&self) -> Vec<u64> {
        let start = if self.recorded == HISTORY_LEN {
            self.next
        } else {
            0
        };
        (0..self.recorded)
            .map(|i| self.recent[(start + i) % HISTORY_LEN])
            .collect()
    }

    fn forget_before(&mut self, cutoff_ns: u64) {
        while self.arrivals.front().is_some_and(|&t| t < cutoff_ns) {
            self.arrivals.pop_front();
        }
    }
}

/// Every function's history on a node, by key: what a [`crate::CallQueue`] ranks by, and what a
/// node that runs calls in arrival order keeps for its operators.
#[derive(Debug, Default)]
pub struct Histories(HashMap<FunctionKey, FunctionHistory>);

impl Histories {
    /// Records that a call of `function` ran for `processing`; returns its new expected time.
    pub fn complete(&mut self, function: FunctionKey, processing: Duration) -> Duration {
        let history = self.entry(function);
        history.complete(processing.as_nanos() as u64);
        Duration::from_nanos(history.expected_ns())
    }

    /// What is known of `function`.
    pub fn get(&self, function: FunctionKey) -> Option<&FunctionHistory> {
        self.0.get(&function)
    }

    /// Drops the history of a function that is gone.
    pub fn forget(&mut self, function: FunctionKey) {
        self.0.remove(&function);
    }

    pub(crate) fn entry(&mut self, function: FunctionKey) -> &mut FunctionHistory {
        self.0.entry(function).or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn expected_is_zero_before_the_first_call() {
        assert_eq!(FunctionHistory::default().expected_ns(), 0);
    }

    proptest! {
        /// The estimate is always the mean of exactly the last ten recorded times.
        #[test]
        fn expected_is_the_mean_of_the_last_ten(times in prop::collection::vec(0u64..1_000_000_000, 1..60)) {
            let mut h = FunctionHistory::default();
            for &t in &times {
                h.complete(t);
            }
            let window = &times[times.len().saturating_sub(HISTORY_LEN)..];
            prop_assert_eq!(h.recent_processing_ns(), window.to_vec());
            prop_assert_eq!(h.expected_ns(), window.iter().sum::<u64>() / window.len() as u64);
        }

        /// The arrival count covers exactly the arrivals within the window.
        #[test]
        fn recent_calls_counts_the_window(mut gaps in prop::collection::vec(0u64..5_000, 1..100), window in 1u64..20_000) {
            let mut h = FunctionHistory::default();
            let mut now = 0;
            let mut arrivals = Vec::new();
            for gap in gaps.drain(..) {
                now += gap;
                h.arrive(now, window);
                arrivals.push(now);
            }
            let expected = arrivals.iter().filter(|&&t| t >= now.saturating_sub(window)).count();
            prop_assert_eq!(h.recent_calls(), expected);
        }
    }
}
