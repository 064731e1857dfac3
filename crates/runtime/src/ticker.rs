//! The epoch ticker: the thread that advances the engine's epoch, which is what stops a guest that
//! runs past its budget (every running call checks its wall-clock deadline when the epoch moves).
//!
//! It ticks at a coarse period (0.5 ms by default) while only long-budget calls run, and at a fine
//! period (25 µs) for a while after a call with a short budget starts, so a 100 µs budget is
//! enforced within tens of microseconds without paying for 40,000 wake-ups a second when no call
//! needs them. Periods under [`SPIN_BELOW`] are kept by spinning, since sleeping that briefly is
//! at the mercy of the kernel's timer slack and wake-up latency.
//!
//! Going fine costs a call two atomic operations, and one `unpark` only when the ticker was in a
//! coarse sleep: the ticker publishes `coarse_sleeping` before it rereads `fine_until`, and a
//! call writes `fine_until` before it reads `coarse_sleeping` (both sequentially consistent), so
//! one of them always sees the other and no request for fine ticks is missed.
//!
//! While no guest has run for [`IDLE_HOLD`], the ticker does not tick at all: an idle node would
//! otherwise wake 2,000 times a second for nothing, and each wake-up takes the core from a job's
//! executor for a moment (measured with the job's threads in `SCHED_IDLE`, which yield to any
//! thread: some 2,000 preemptions a second, a CPU-bound job 7% slower on an otherwise idle
//! node). Every guest holds a [`Running`] while it runs; the count is split in shards a cache
//! line apart, so that executors on different cores do not contend for one counter. The same handshake as for fine ticks keeps a guest from
//! starting unticked: a guest counts itself before it reads `dormant`, and the ticker sets
//! `dormant` before it counts the guests again.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::{JoinHandle, Thread};
use std::time::{Duration, Instant};
use wasmtime::Engine;

/// Periods shorter than this are timed by spinning rather than sleeping.
pub const SPIN_BELOW: Duration = Duration::from_micros(20);

/// How long the ticker goes on ticking once it finds no guest running: guests that come and go
/// between two ticks pay for waking it at most once in this long.
const IDLE_HOLD: Duration = Duration::from_millis(10);

/// How long fine ticking lasts after the last short-budget call started.
const FINE_HOLD: Duration = Duration::from_millis(10);

/// The ticker's two speeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TickerPeriods {
    /// The period while no short-budget call has started recently.
    pub coarse: Duration,
    /// The period after a short-budget call starts.
    pub fine: Duration,
}

impl TickerPeriods {
    /// A budget this short needs fine ticks to be enforced within a fraction of itself.
    pub fn needs_fine(&self, budget: Duration) -> bool {
        budget < self.coarse * 4
    }
}

/// Shards of the count of running guests.
const SHARDS: usize = 8;

/// One shard of the count, alone on its cache line.
#[repr(align(128))]
#[derive(Default)]
struct Shard(AtomicU64);

struct Shared {
    stop: AtomicBool,
    /// Guests running now, by shard.
    running: [Shard; SHARDS],
    /// No guest ran at the ticker's last look: it sleeps until one starts.
    dormant: AtomicBool,
    origin: Instant,
    /// Nanoseconds since `origin` until which the ticker runs fine.
    fine_until_ns: AtomicU64,
    /// The ticker is sleeping a coarse period and must be unparked to go fine.
    coarse_sleeping: AtomicBool,
    /// Ticks so far.
    ticks: AtomicU64,
}

/// Advances an engine's epoch until dropped.
pub struct EpochTicker {
    shared: Arc<Shared>,
    periods: TickerPeriods,
    thread: Thread,
    handle: Option<JoinHandle<()>>,
}

impl EpochTicker {
    /// Starts ticking `engine`.
    pub fn start(engine: Engine, periods: TickerPeriods) -> Self {
        let shared = Arc::new(Shared {
            stop: AtomicBool::new(false),
            origin: Instant::now(),
            fine_until_ns: AtomicU64::new(0),
            coarse_sleeping: AtomicBool::new(false),
            ticks: AtomicU64::new(0),
            running: Default::default(),
            dormant: AtomicBool::new(false),
        });
        let state = shared.clone();
        let handle = std::thread::Builder::new()
            .name("mote-epoch".into())
            .spawn(move || run(&state, &engine, periods))
            .expect("spawning the epoch ticker thread");
        Self {
            shared,
            periods,
            thread: handle.thread().clone(),
            handle: Some(handle),
        }
    }

    /// Ticks so far.
    pub fn ticks(&self) -> u64 {
        self.shared.ticks.load(Ordering::Relaxed)
    }

    /// Called as a guest with `budget` starts: the ticker ticks until the [`Running`] is
    /// dropped, and fine ticks if the budget needs them.
    #[inline]
    pub fn call_starting(&self, budget: Duration) -> Running<'_> {
        let shard = SHARD.with(|s| *s);
        self.shared.running[shard].0.fetch_add(1, Ordering::SeqCst);
        if self.shared.dormant.load(Ordering::SeqCst) {
            self.thread.unpark();
        }
        if self.periods.needs_fine(budget) {
            self.go_fine();
        }
        Running {
            shared: &self.shared,
            shard,
        }
    }

    fn go_fine(&self) {
        let until = (self.shared.origin.elapsed() + FINE_HOLD).as_nanos() as u64;
        self.shared.fine_until_ns.fetch_max(until, Ordering::SeqCst);
        if self.shared.coarse_sleeping.load(Ordering::SeqCst) {
            self.thread.unpark();
        }
    }
}

fn run(shared: &Shared, engine: &Engine, periods: TickerPeriods) {
    set_timer_slack_to_minimum();
    let mut busy_at = Instant::now();
    while !shared.stop.load(Ordering::Relaxed) {
        if !shared.idle() {
            busy_at = Instant::now();
        } else if busy_at.elapsed() >= IDLE_HOLD {
            shared.dormant.store(true, Ordering::SeqCst);
            if shared.idle() && !shared.stop.load(Ordering::SeqCst) {
                std::thread::park();
            }
            shared.dormant.store(false, Ordering::SeqCst);
            busy_at = Instant::now();
            continue;
        }
        let now = shared.origin.elapsed().as_nanos() as u64;
        let fine = shared.fine_until_ns.load(Ordering::SeqCst) > now;
        if fine {
            wait(periods.fine);
        } else {
            shared.coarse_sleeping.store(true, Ordering::SeqCst);
            if shared.fine_until_ns.load(Ordering::SeqCst) <= now {
                wait(periods.coarse);
            }
            shared.coarse_sleeping.store(false, Ordering::SeqCst);
        }
        engine.increment_epoch();
        shared.ticks.fetch_add(1, Ordering::Relaxed);
    }
}

impl Shared {
    /// Whether no guest runs.
    fn idle(&self) -> bool {
        self.running.iter().all(|s| s.0.load(Ordering::SeqCst) == 0)
    }
}

std::thread_local! {
    /// The shard this thread counts its guests in.
    static SHARD: usize = {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        NEXT.fetch_add(1, Ordering::Relaxed) as usize % SHARDS
    };
}

/// A guest running: the ticker ticks while one is held.
#[must_use = "the ticker stops when no guest holds a `Running`"]
pub struct Running<'a> {
    shared: &'a Shared,
    shard: usize,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.shared.running[self.shard]
            .0
            .fetch_sub(1, Ordering::Release);
    }
}

/// Waits `period`: spinning if it is short, else parked (so `unpark` can cut a coarse wait).
fn wait(period: Duration) {
    if period < SPIN_BELOW {
        let until = Instant::now() + period;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    } else {
        std::thread::park_timeout(period);
    }
}

/// Linux rounds a sleeping thread's timer up by its "timer slack", 50 µs by default, which would
/// double a 25 µs fine period; the ticker asks for the minimum.
fn set_timer_slack_to_minimum() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_TIMERSLACK takes an integer and only affects the calling thread.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong);
    }
}

impl Drop for EpochTicker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::Relaxed);
        self.thread.unpark();
        if let Some(t) = self.handle.take() {
            let _ = t.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ticks_during(ticker: &EpochTicker, span: Duration) -> u64 {
        let start = ticker.ticks();
        std::thread::sleep(span);
        ticker.ticks() - start
    }

    fn ticker(coarse: Duration, fine: Duration) -> EpochTicker {
        let mut config = wasmtime::Config::new();
        config.epoch_interruption(true);
        let engine = Engine::new(&config).unwrap();
        EpochTicker::start(engine, TickerPeriods { coarse, fine })
    }

    #[test]
    fn short_budgets_switch_the_ticker_to_fine_ticks() {
        let periods = TickerPeriods {
            coarse: Duration::from_millis(20),
            fine: Duration::from_micros(200),
        };
        let ticker = ticker(periods.coarse, periods.fine);
        assert!(periods.needs_fine(Duration::from_micros(100)));
        assert!(!periods.needs_fine(Duration::from_secs(1)));
        let long = ticker.call_starting(Duration::from_secs(1));
        let coarse = ticks_during(&ticker, Duration::from_millis(100));
        drop(long);
        // Short-budget guests keep starting for 50 ms: about 250 fine ticks on a quiet machine.
        let start = ticker.ticks();
        for _ in 0..50 {
            let _running = ticker.call_starting(Duration::from_micros(100));
            std::thread::sleep(Duration::from_millis(1));
        }
        let fine = ticker.ticks() - start;
        assert!(
            (2..=8).contains(&coarse),
            "coarse ticks in 100 ms: {coarse}"
        );
        assert!(fine >= 25, "fine ticks in 50 ms: {fine}");
    }

    #[test]
    fn the_ticker_sleeps_while_no_guest_runs_and_ticks_while_one_does() {
        let ticker = ticker(Duration::from_millis(5), Duration::from_micros(200));
        // It ticks on for IDLE_HOLD after it last saw a guest, then sleeps.
        std::thread::sleep(IDLE_HOLD * 4);
        assert_eq!(ticks_during(&ticker, Duration::from_millis(100)), 0);
        let running = ticker.call_starting(Duration::from_secs(1));
        let ticked = ticks_during(&ticker, Duration::from_millis(100));
        assert!(ticked >= 5, "ticks in 100 ms while a guest runs: {ticked}");
        drop(running);
        std::thread::sleep(IDLE_HOLD * 4);
        assert_eq!(ticks_during(&ticker, Duration::from_millis(100)), 0);
    }

    #[test]
    fn no_guest_that_starts_as_the_ticker_falls_asleep_goes_unticked() {
        // Guests start on three threads after pauses around IDLE_HOLD, so that some find the
        // ticker asleep or falling asleep, and each waits for a tick while it runs: a start the
        // ticker missed would wait for good, since nothing else wakes it.
        let ticker = ticker(Duration::from_micros(200), Duration::from_micros(50));
        std::thread::scope(|scope| {
            for thread in 0..3u64 {
                let ticker = &ticker;
                scope.spawn(move || {
                    for round in 0..40u64 {
                        let pause = (round * 7 + thread * 3) % 16;
                        std::thread::sleep(Duration::from_millis(pause));
                        let _running = ticker.call_starting(Duration::from_secs(1));
                        let (start, at) = (ticker.ticks(), Instant::now());
                        while ticker.ticks() == start {
                            assert!(
                                at.elapsed() < Duration::from_secs(2),
                                "no tick in 2 s for a running guest (round {round})"
                            );
                            std::hint::spin_loop();
                        }
                    }
                });
            }
        });
    }
}
