//! What the scheduler remembers about each function.

use rustc_hash::FxHashMap;
use std::time::Duration;

/// Identifies a function (one deployment of it) to the scheduler.
pub type FunctionKey = u64;

/// How many recent processing times the estimate averages, as in the paper.
pub const HISTORY_LEN: usize = 10;

/// Fair-Choice's window is counted in this many buckets, so a function's arrival count takes a
/// fixed 0.5 KiB however often it is called (a list of timestamps held 144 MB for a function
/// called 300,000 times a second over a 60 s window). The count is exact to one bucket: it may
/// include arrivals up to `window / ARRIVAL_BUCKETS` older than the window.
pub const ARRIVAL_BUCKETS: usize = 32;

/// Arrivals counted per time bucket over a sliding window: bucket `id` holds the arrivals in
/// `[id * width, (id + 1) * width)`, and slot `id % (ARRIVAL_BUCKETS + 1)` holds bucket `id`
/// until a later bucket reuses the slot.
#[derive(Clone, Debug)]
struct ArrivalCounts {
    slots: [(u64, u32); ARRIVAL_BUCKETS + 1],
    /// The latest arrival, in nanoseconds.
    latest: u64,
    /// The window, in nanoseconds.
    window: u64,
    /// Bucket width in nanoseconds; 0 until the first arrival fixes it from the window.
    width: u64,
}

impl Default for ArrivalCounts {
    fn default() -> Self {
        Self {
            slots: [(0, 0); ARRIVAL_BUCKETS + 1],
            latest: 0,
            window: 0,
            width: 0,
        }
    }
}

impl ArrivalCounts {
    fn arrive(&mut self, now_ns: u64, window_ns: u64) {
        if self.width == 0 {
            self.width = window_ns.div_ceil(ARRIVAL_BUCKETS as u64).max(1);
            self.window = window_ns;
        }
        // Arrival times are taken before the queue's lock, so one may be a little older
        // than the latest; it counts as the latest rather than reopening an old bucket.
        self.latest = self.latest.max(now_ns);
        let id = self.latest / self.width;
        let slot = &mut self.slots[(id % self.slots.len() as u64) as usize];
        if slot.0 != id {
            *slot = (id, 0);
        }
        slot.1 = slot.1.saturating_add(1);
    }

    /// Arrivals in the buckets that overlap the window ending at the latest arrival. The window
    /// spans at most `ARRIVAL_BUCKETS + 1` buckets, as many as there are slots, so every such
    /// bucket is still in its slot.
    fn recent(&self) -> usize {
        if self.width == 0 {
            return 0;
        }
        let oldest = self.latest.saturating_sub(self.window) / self.width;
        let latest = self.latest / self.width;
        self.slots
            .iter()
            .filter(|&&(id, _)| id >= oldest && id <= latest)
            .map(|&(_, n)| n as usize)
            .sum()
    }
}

/// A function's recent history on this node. Times are nanoseconds on the queue's clock.
#[derive(Clone, Debug, Default)]
pub struct FunctionHistory {
    recent: [u64; HISTORY_LEN],
    recorded: usize,
    next: usize,
    sum: u64,
    previous_arrival: Option<u64>,
    arrivals: ArrivalCounts,
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

    /// When the last call of this function counted here arrived, if one did.
    pub(crate) fn last_arrival_ns(&self) -> Option<u64> {
        self.previous_arrival
    }

    /// Records an arrival at `now_ns` in a window of `window_ns` (the same for every call).
    /// Returns when the previous call of this function arrived (this one's time if it is the
    /// first).
    pub(crate) fn arrive(&mut self, now_ns: u64, window_ns: u64) -> u64 {
        let previous = self.previous_arrival.unwrap_or(now_ns);
        self.previous_arrival = Some(now_ns);
        self.arrivals.arrive(now_ns, window_ns);
        previous
    }

    /// Calls that arrived in the window ending at the latest arrival, counted to within one
    /// bucket (see [`ARRIVAL_BUCKETS`]).
    pub fn recent_calls(&self) -> usize {
        self.arrivals.recent()
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
}

/// Every function's history on a node, by key: what a [`crate::CallQueue`] ranks by, and what a
/// node that runs calls in arrival order keeps for its operators.
#[derive(Debug, Default)]
// Keys are small sequential numbers handed out by the node, so Fx's multiply is enough and
// costs a fraction of SipHash on the executor's per-call path.
pub struct Histories(FxHashMap<FunctionKey, FunctionHistory>);

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

    #[test]
    fn arrival_counts_stay_fixed_in_size_and_forget_old_buckets() {
        let mut h = FunctionHistory::default();
        let window = 60_000_000_000;
        for i in 0..1_000_000u64 {
            h.arrive(i * 1_000, window); // a million calls in one second
        }
        assert_eq!(h.recent_calls(), 1_000_000);
        h.arrive(200_000_000_000, window); // 200 s later: the first second left the window
        assert_eq!(h.recent_calls(), 1);
        assert!(std::mem::size_of::<FunctionHistory>() < 1024);
    }

    #[test]
    fn an_arrival_stamped_before_the_latest_counts_in_the_latest_bucket() {
        let mut h = FunctionHistory::default();
        let window = 32_000;
        h.arrive(100_000, window);
        h.arrive(10, window);
        assert_eq!(h.recent_calls(), 2);
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

        /// The arrival count covers every arrival within the window, and none older than the
        /// window plus one bucket.
        #[test]
        fn recent_calls_counts_the_window(mut gaps in prop::collection::vec(0u64..5_000, 1..300), window in 1u64..20_000) {
            let mut h = FunctionHistory::default();
            let mut now = 0;
            let mut arrivals = Vec::new();
            for gap in gaps.drain(..) {
                now += gap;
                h.arrive(now, window);
                arrivals.push(now);
            }
            let bucket = window.div_ceil(ARRIVAL_BUCKETS as u64);
            let since = |start: u64| arrivals.iter().filter(|&&t| t >= start).count();
            let counted = h.recent_calls();
            prop_assert!(counted >= since(now.saturating_sub(window)), "{counted} misses arrivals in the window");
            prop_assert!(counted <= since(now.saturating_sub(window + bucket)), "{counted} counts arrivals older than the window and a bucket");
        }
    }
}
