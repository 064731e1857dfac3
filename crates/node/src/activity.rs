//! What the dashboard reads of a node's recent work: per function, a histogram of response times
//! and the sum of the calls' stretches ([`CallStats`]); per core, the calls run on it and the
//! time spent running them ([`ExecutorActivity`]).
//!
//! Both are counted on the call path, so they are relaxed atomics only: a settled call adds one
//! to one histogram bucket and its stretch to a sum (two `fetch_add`s on its function), and the
//! holder of a core writes only that core's cache line. Readers take cumulative counts
//! ([`LatencyCounts`], [`ExecutorSample`]) and difference two of them to see a window, so
//! nothing on the call path knows about windows or resets.
//!
//! Stretch is the scheduling paper's measure of how a call was treated: its response time
//! (arrival to end) over its processing time (start to end); 1 means it never waited.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Sub-buckets per power of two: a bucket spans a quarter of its lower bound, so a quantile
/// read from its middle is within about 11% of the true value.
const SUB_BITS: u32 = 2;
const SUB: usize = 1 << SUB_BITS;
/// Times under 2^10 ns (about 1 µs) share the first bucket.
const MIN_EXP: u32 = 10;
/// Times from 2^40 ns (about 18 minutes) share the last bucket: no call runs that long.
const MAX_EXP: u32 = 40;
/// Buckets of the response-time histogram.
pub const BUCKETS: usize = 1 + (MAX_EXP - MIN_EXP) as usize * SUB;

/// The bucket a time of `ns` nanoseconds falls in.
#[inline]
fn bucket(ns: u64) -> usize {
    if ns < 1 << MIN_EXP {
        return 0;
    }
    let exp = 63 - ns.leading_zeros();
    if exp >= MAX_EXP {
        return BUCKETS - 1;
    }
    let sub = (ns >> (exp - SUB_BITS)) as usize & (SUB - 1);
    1 + (exp - MIN_EXP) as usize * SUB + sub
}

/// The middle of bucket `i`, in nanoseconds.
fn bucket_middle(i: usize) -> f64 {
    if i == 0 {
        return (1u64 << (MIN_EXP - 1)) as f64;
    }
    let exp = MIN_EXP + ((i - 1) / SUB) as u32;
    let sub = ((i - 1) % SUB) as f64;
    let step = (1u64 << (exp - SUB_BITS)) as f64;
    (SUB as f64 + sub + 0.5) * step
}

/// A stretch is summed in thousandths; one call adds at most this many, so that a call that
/// waited absurdly long next to a sub-microsecond run cannot overflow the sum.
const MAX_STRETCH_MILLI: u64 = 1 << 32;

/// One function's response times and stretches, counted since it was deployed.
pub struct CallStats {
    latency: [AtomicU64; BUCKETS],
    stretch_milli: AtomicU64,
}

impl Default for CallStats {
    fn default() -> Self {
        Self {
            latency: std::array::from_fn(|_| AtomicU64::new(0)),
            stretch_milli: AtomicU64::new(0),
        }
    }
}

impl CallStats {
    /// Counts a call that took `response` from its arrival to its end, `processing` of it
    /// running.
    #[inline]
    pub(crate) fn record(&self, response: Duration, processing: Duration) {
        let response_ns = response.as_nanos() as u64;
        let processing_ns = (processing.as_nanos() as u64).max(1);
        self.latency[bucket(response_ns)].fetch_add(1, Ordering::Relaxed);
        let stretch = response_ns.max(processing_ns).saturating_mul(1000) / processing_ns;
        self.stretch_milli
            .fetch_add(stretch.min(MAX_STRETCH_MILLI), Ordering::Relaxed);
    }

    /// The counts so far.
    pub fn counts(&self) -> LatencyCounts {
        LatencyCounts {
            buckets: self
                .latency
                .iter()
                .map(|b| b.load(Ordering::Relaxed))
                .collect(),
            stretch_milli: self.stretch_milli.load(Ordering::Relaxed),
        }
    }
}

/// Cumulative response-time counts of one function: subtract an earlier reading
/// ([`LatencyCounts::since`]) for a window.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LatencyCounts {
    buckets: Vec<u64>,
    stretch_milli: u64,
}

impl LatencyCounts {
    /// The calls counted.
    pub fn calls(&self) -> u64 {
        self.buckets.iter().sum()
    }

    /// What was counted after `earlier` (a reading of the same function).
    pub fn since(&self, earlier: &LatencyCounts) -> LatencyCounts {
        LatencyCounts {
            buckets: self
                .buckets
                .iter()
                .zip(earlier.buckets.iter().chain(std::iter::repeat(&0)))
                .map(|(now, then)| now.saturating_sub(*then))
                .collect(),
            stretch_milli: self.stretch_milli.saturating_sub(earlier.stretch_milli),
        }
    }

    /// The response time below which a share `q` (0 to 1) of the calls ended, from the middle
    /// of its bucket; `None` without calls.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let calls = self.calls();
        if calls == 0 {
            return None;
        }
        // The rank of the call at quantile q, counting from 1.
        let rank = ((q * calls as f64).ceil() as u64).clamp(1, calls);
        let mut seen = 0;
        for (i, count) in self.buckets.iter().enumerate() {
            seen += count;
            if seen >= rank {
                return Some(Duration::from_nanos(bucket_middle(i) as u64));
            }
        }
        None
    }

    /// The calls' mean stretch; `None` without calls.
    pub fn mean_stretch(&self) -> Option<f64> {
        match self.calls() {
            0 => None,
            calls => Some(self.stretch_milli as f64 / 1000.0 / calls as f64),
        }
    }
}

/// One core's counters, alone on its cache line so that cores do not share one.
#[repr(align(128))]
#[derive(Default)]
struct Slot {
    calls: AtomicU64,
    busy_ns: AtomicU64,
    /// When its running call started, in ns since the activity's origin plus one; 0 when idle.
    running_since: AtomicU64,
}

/// What each core has run, whichever thread ran it there.
pub(crate) struct ExecutorActivity {
    origin: Instant,
    slots: Box<[Slot]>,
}

impl ExecutorActivity {
    pub(crate) fn new(cores: usize) -> Self {
        Self {
            origin: Instant::now(),
            slots: (0..cores).map(|_| Slot::default()).collect(),
        }
    }

    /// A call started on core `i` at `started`.
    #[inline]
    pub(crate) fn start(&self, i: usize, started: Instant) {
        let since = started.saturating_duration_since(self.origin).as_nanos() as u64 + 1;
        self.slots[i].running_since.store(since, Ordering::Relaxed);
    }

    /// A call that ran for `processing` ended on core `i`.
    #[inline]
    pub(crate) fn end(&self, i: usize, processing: Duration) {
        let slot = &self.slots[i];
        slot.running_since.store(0, Ordering::Relaxed);
        // One thread at a time writes slot `i`, the one that holds core `i` (a core's hand-off
        // orders its holders), so a load and a store count without the locked
        // read-modify-write a `fetch_add` costs on every call.
        let calls = slot.calls.load(Ordering::Relaxed);
        slot.calls.store(calls + 1, Ordering::Relaxed);
        let busy = slot.busy_ns.load(Ordering::Relaxed);
        slot.busy_ns
            .store(busy + processing.as_nanos() as u64, Ordering::Relaxed);
    }

    /// Every core's counters now; a running call counts as busy up to now.
    pub(crate) fn sample(&self) -> Vec<ExecutorSample> {
        let now = self.origin.elapsed().as_nanos() as u64 + 1;
        self.slots
            .iter()
            .enumerate()
            .map(|(index, slot)| {
                let since = slot.running_since.load(Ordering::Relaxed);
                let running = since != 0;
                let ongoing = match running {
                    true => now.saturating_sub(since),
                    false => 0,
                };
                ExecutorSample {
                    index,
                    running,
                    calls: slot.calls.load(Ordering::Relaxed),
                    busy_ns: slot.busy_ns.load(Ordering::Relaxed) + ongoing,
                }
            })
            .collect()
    }
}

/// One core's counters since the node started: the calls run on it, by executors and by the
/// readers that ran calls where they read them.
#[derive(Clone, Copy, Debug, Serialize, PartialEq, Eq)]
pub struct ExecutorSample {
    /// The core's index.
    pub index: usize,
    /// Whether it is running a call now.
    pub running: bool,
    /// Calls it ran.
    pub calls: u64,
    /// Time it spent running them, in ns, the running call's so far included.
    pub busy_ns: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_ordered_and_cover_every_time() {
        let mut last = 0;
        for ns in [
            0,
            500,
            1023,
            1024,
            1279,
            1280,
            2047,
            2048,
            1 << 20,
            1 << 39,
            u64::MAX,
        ] {
            let b = bucket(ns);
            assert!(b >= last, "{ns} ns fell in bucket {b}, before {last}");
            assert!(b < BUCKETS);
            last = b;
        }
        assert_eq!(bucket(1024), 1);
        assert_eq!(bucket(1280), 2);
        assert_eq!(bucket(u64::MAX), BUCKETS - 1);
        // Each bucket's middle falls in that bucket.
        for i in 1..BUCKETS - 1 {
            assert_eq!(bucket(bucket_middle(i) as u64), i, "bucket {i}");
        }
    }

    #[test]
    fn quantiles_come_within_a_bucket_of_the_true_value() {
        let stats = CallStats::default();
        // 98 calls of 1 ms, 2 of 100 ms.
        for _ in 0..98 {
            stats.record(Duration::from_millis(1), Duration::from_millis(1));
        }
        for _ in 0..2 {
            stats.record(Duration::from_millis(100), Duration::from_millis(50));
        }
        let counts = stats.counts();
        assert_eq!(counts.calls(), 100);
        let p50 = counts.quantile(0.5).unwrap().as_secs_f64();
        let p99 = counts.quantile(0.99).unwrap().as_secs_f64();
        assert!((p50 - 1e-3).abs() / 1e-3 < 0.13, "p50 {p50}");
        assert!((p99 - 0.1).abs() / 0.1 < 0.13, "p99 {p99}");
        // (98 × 1 + 2 × 2) / 100.
        assert!((counts.mean_stretch().unwrap() - 1.02).abs() < 1e-9);
    }

    #[test]
    fn a_window_holds_only_the_calls_after_its_start() {
        let stats = CallStats::default();
        stats.record(Duration::from_secs(1), Duration::from_millis(100));
        let before = stats.counts();
        stats.record(Duration::from_micros(10), Duration::from_micros(10));
        let window = stats.counts().since(&before);
        assert_eq!(window.calls(), 1);
        assert_eq!(window.mean_stretch(), Some(1.0));
        let p = window.quantile(0.99).unwrap();
        assert!(p < Duration::from_micros(12), "{p:?}");
        assert_eq!(LatencyCounts::default().quantile(0.5), None);
        assert_eq!(stats.counts().since(&LatencyCounts::default()).calls(), 2);
    }

    #[test]
    fn cores_count_their_calls_and_busy_time() {
        let activity = ExecutorActivity::new(3);
        activity.start(1, Instant::now());
        let sample = activity.sample();
        assert!(!sample[0].running && sample[1].running);
        activity.end(1, Duration::from_millis(3));
        activity.start(2, Instant::now());
        activity.end(2, Duration::from_millis(1));
        let sample = activity.sample();
        assert_eq!(sample[1].calls, 1);
        assert!(!sample[1].running);
        assert_eq!(sample[1].busy_ns, 3_000_000);
        assert_eq!(sample[0].calls, 0);
        assert_eq!((sample[2].index, sample[2].calls), (2, 1));
    }
}
