//! A task's budget in the CPU time of its thread ([`TaskClock`]), so that the time a task waits
//! for a core does not spend it: behind a call (`JobCores`), or behind another process while
//! job threads run in `SCHED_IDLE`, where a task may wait for seconds.
//!
//! Reading a thread's CPU clock is a system call (about 250 ns here, as much as an empty task
//! costs the worker), so a task does not read it when it starts, nor a batch: the clock is read
//! at epoch ticks only. A task's count begins at its first tick, from the thread's CPU time at
//! its previous tick plus all the wall time between that tick and the task's start, as if the
//! thread had run throughout (on a thread without an earlier tick, from the first tick itself).
//! That never counts more than the thread ran since the task's start, which a worker puts at the
//! end of the task before (one clock read a task), so a task is never stopped early by more
//! than the worker's bookkeeping between two tasks; it is stopped late by at most one tick's
//! period.
//!
//! A task asleep in a host call (WASI's `poll_oneoff`) spends no CPU time, so its sleep does
//! not count either: the budget stops runaway computation, and a cancel stops the rest.

use std::cell::Cell;
use std::time::{Duration, Instant};

thread_local! {
    /// When this thread last read its CPU clock at a tick, and what it read.
    static MARK: Cell<Option<(Instant, Duration)>> = const { Cell::new(None) };
}

/// The calling thread's CPU time.
fn thread_cpu_time() -> Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec, which lives across the call.
    let failed = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) } != 0;
    // The clock exists on every Linux since 2.6.12; a failure would be a kernel without it.
    assert!(!failed, "CLOCK_THREAD_CPUTIME_ID is not readable");
    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
}

/// How much of its budget a task (or a driver) has run, counted in its thread's CPU time.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TaskClock {
    budget: Duration,
    started: Instant,
    /// The thread's CPU time where the task's count begins, fixed at its first tick.
    base: Option<Duration>,
}

impl TaskClock {
    /// A task with `budget` starts on this thread now.
    pub(crate) fn start(budget: Duration) -> Self {
        Self::start_at(budget, Instant::now())
    }

    /// A task with `budget` started on this thread at `started`, not after it. An earlier
    /// `started` counts the thread's work since then against the task: the worker's
    /// bookkeeping between two tasks, far below any budget.
    pub(crate) fn start_at(budget: Duration, started: Instant) -> Self {
        Self {
            budget,
            started,
            base: None,
        }
    }

    /// At an epoch tick on the task's thread: whether it has run its budget out.
    pub(crate) fn ran_out(&mut self) -> bool {
        let cpu = thread_cpu_time();
        let at = Instant::now();
        let base = *self.base.get_or_insert_with(|| match MARK.get() {
            // The thread ran at most the wall time between its last tick and the task's start.
            Some((marked, cpu_then)) => {
                (cpu_then + self.started.saturating_duration_since(marked)).min(cpu)
            }
            None => cpu,
        });
        MARK.set(Some((at, cpu)));
        cpu - base >= self.budget
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spin_for(cpu: Duration) {
        let from = thread_cpu_time();
        while thread_cpu_time() - from < cpu {
            std::hint::spin_loop();
        }
    }

    #[test]
    fn a_spinning_task_runs_out_once_its_cpu_time_passes_the_budget() {
        let mut clock = TaskClock::start(Duration::from_millis(30));
        assert!(!clock.ran_out(), "out before it ran");
        spin_for(Duration::from_millis(15));
        assert!(!clock.ran_out(), "out after half its budget");
        spin_for(Duration::from_millis(20));
        assert!(clock.ran_out(), "not out after its budget");
    }

    #[test]
    fn wall_time_off_the_cpu_does_not_count() {
        let mut clock = TaskClock::start(Duration::from_millis(30));
        assert!(!clock.ran_out());
        spin_for(Duration::from_millis(5));
        // Off the CPU as a starved thread is, or one asleep in a host call.
        std::thread::sleep(Duration::from_millis(100));
        assert!(!clock.ran_out(), "100 ms off the CPU spent a 30 ms budget");
        spin_for(Duration::from_millis(30));
        assert!(clock.ran_out());
    }

    #[test]
    fn the_first_tick_never_counts_what_the_thread_ran_before_the_task() {
        // An earlier task's tick, then 50 ms of earlier tasks with no tick between.
        assert!(!TaskClock::start(Duration::from_millis(30)).ran_out());
        spin_for(Duration::from_millis(50));
        let mut clock = TaskClock::start(Duration::from_millis(30));
        spin_for(Duration::from_millis(10));
        assert!(!clock.ran_out(), "the earlier tasks' CPU time was counted");
        // The first tick's base is at most the thread's CPU time then (less when the thread
        // waited for a core before the task, as under a loaded test run), so a whole budget
        // after it runs out whatever the wall clock did.
        spin_for(Duration::from_millis(30));
        assert!(clock.ran_out());
    }

    #[test]
    fn a_thread_without_an_earlier_tick_counts_from_the_first() {
        spin_for(Duration::from_millis(50));
        let mut clock = TaskClock::start(Duration::from_millis(30));
        assert!(!clock.ran_out());
        spin_for(Duration::from_millis(35));
        assert!(clock.ran_out());
    }
}
