//! One set of cores for a node's calls and its jobs ([`JobCores`]): a job's tasks run on the
//! cores its calls leave, and never on fewer than the operator keeps for jobs ([`JobShare`]).
//!
//! Calls and tasks share one count. A call counts itself from the moment it is queued until its
//! executor is free again (back-to-back calls on one executor count once; a call with phases,
//! whose I/O shares cores, until it is answered); a job's executor thread counts itself while
//! it holds a core for a batch of tasks. Where the count ends was measured
//! (`docs/benchmarks/jobs.md`, job threads in `SCHED_IDLE`): until the call was answered, its
//! reply's way out held a core too and the job lost 26% of its rate beside 18% of the CPU in
//! calls; from the executor's start only, tasks gave way too late and a short call's p99
//! beside a job was 4.9 times its p99 alone; queued until the executor is free, 2.4 times, and
//! the job keeps 0.82 of its rate. A call that finds the tasks over their allowance advances the
//! job engine's epoch, and every running task's epoch callback checks the count: the tasks over
//! the allowance give up their cores within microseconds and wait until calls leave one. A
//! task's budget counts CPU time (`clock`), so the time it waits spends none of it. A call never
//! waits for a task's thread: tasks wait for a core in a lock-free queue of parked threads, which
//! a call wakes without a lock, since a job's thread in `SCHED_IDLE` that held a lock on a busy
//! core could keep it for seconds.
//!
//! The count alone is not enough: beside an LR job whose threads ran at nice 0, a short call's
//! p99 was 8.5-9.4 times its p99 on an idle node, since the kernel lets a running thread finish
//! its slice before the call's thread on its way in runs. So a node also runs its jobs' threads
//! in `SCHED_IDLE` by default (2.3-2.8 times; `docs/benchmarks/jobs.md`, `docs/jobs.md`),
//! which is why nothing here makes a call wait for them.

use crossbeam_queue::SegQueue;
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::Duration;
use wasmtime::Engine;

/// The most of the node's cores, in percent, that jobs may keep while calls want them.
pub const MAX_JOB_SHARE: u8 = 100;

/// How much of the node's cores jobs keep while calls want every core, in percent, rounded
/// down to whole cores: 0 (the default) runs jobs only on cores calls leave. A job uses every
/// core calls leave whatever its share.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct JobShare(u8);

/// A share out of range.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "a job share of {0}% is out of range: give 0 to {MAX_JOB_SHARE} (the share of the node's cores jobs keep while calls want them; 0: jobs run only on cores calls leave)"
)]
pub struct ShareOutOfRange(pub u8);

impl JobShare {
    /// `percent` of the node's cores.
    pub fn new(percent: u8) -> Result<Self, ShareOutOfRange> {
        match percent <= MAX_JOB_SHARE {
            true => Ok(Self(percent)),
            false => Err(ShareOutOfRange(percent)),
        }
    }

    /// The share, in percent.
    pub fn percent(self) -> u8 {
        self.0
    }

    /// The cores jobs keep of `cores`.
    pub fn of(self, cores: usize) -> usize {
        cores * usize::from(self.0) / 100
    }
}

/// Calls in flight are the count's low half, tasks on a core its high half.
const TASK: u64 = 1 << 32;

fn calls(count: u64) -> u64 {
    count & (TASK - 1)
}

fn tasks(count: u64) -> u64 {
    count >> 32
}

/// How long a waiting task sleeps before it looks again whether its job stopped.
const STOP_CHECK: Duration = Duration::from_millis(10);

std::thread_local! {
    /// Whether this thread's tasks hold a core in the count. A thread takes cores from one
    /// count only: a worker's executor threads belong to one node's job engine.
    static HOLDS: Cell<bool> = const { Cell::new(false) };
}

/// A node's cores as its calls and its jobs' tasks take them.
pub struct JobCores {
    count: AtomicU64,
    cores: u64,
    keep: u64,
    /// Tasks waiting for a core.
    waiting: AtomicU64,
    /// Their threads, to wake one when a core comes free; with entries of threads that
    /// stopped waiting, which waking skips.
    waiters: SegQueue<Arc<Waiter>>,
    /// Tasks that gave their core to a call.
    yields: AtomicU64,
    /// The job engine whose running tasks a call asks to look at the count.
    engine: OnceLock<Engine>,
}

/// A thread waiting for a core, until a core's release takes it out of the queue.
struct Waiter {
    thread: Thread,
    queued: AtomicBool,
}

impl Waiter {
    fn queue(cores: &JobCores) -> Arc<Self> {
        let waiter = Arc::new(Self {
            thread: std::thread::current(),
            queued: AtomicBool::new(true),
        });
        cores.waiters.push(waiter.clone());
        waiter
    }
}

/// The job stopped while its task waited for a core.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Stopped;

impl JobCores {
    /// `cores` shared by calls and tasks, `keep` of them for tasks whatever the calls want.
    pub fn new(cores: usize, share: JobShare) -> Self {
        let cores = cores.max(1);
        Self {
            count: AtomicU64::new(0),
            cores: cores as u64,
            keep: share.of(cores) as u64,
            waiting: AtomicU64::new(0),
            waiters: SegQueue::new(),
            yields: AtomicU64::new(0),
            engine: OnceLock::new(),
        }
    }

    /// Cores tasks may hold while `calls` calls are in flight.
    fn allowance(&self, calls: u64) -> u64 {
        self.cores.saturating_sub(calls).max(self.keep)
    }

    fn over(&self, count: u64) -> bool {
        tasks(count) > self.allowance(calls(count))
    }

    /// A call is in flight until the returned guard drops: tasks give way to it.
    #[inline]
    pub fn call(self: &Arc<Self>) -> CallInFlight {
        let before = self.count.fetch_add(1, Ordering::SeqCst);
        if self.over(before + 1)
            && let Some(engine) = self.engine.get()
        {
            engine.increment_epoch();
        }
        CallInFlight(self.clone())
    }

    /// Times a task gave its core to calls so far.
    #[cfg(test)]
    pub(crate) fn yields(&self) -> u64 {
        self.yields.load(Ordering::Relaxed)
    }

    /// Cores tasks hold now.
    #[cfg(test)]
    pub(crate) fn tasks_on_cores(&self) -> u64 {
        tasks(self.count.load(Ordering::Relaxed))
    }

    /// Sets the engine a call pokes; the first engine attached keeps it.
    pub(crate) fn attach(&self, engine: &Engine) {
        let _ = self.engine.set(engine.clone());
    }

    /// Makes this thread hold a core for its tasks: takes one, waiting while calls want them
    /// all, or, if it holds one and the tasks are over their allowance, gives it up and waits
    /// for another. Fails if `stopped` is set meanwhile.
    pub(crate) fn hold(&self, stopped: &AtomicBool) -> Result<(), Stopped> {
        if HOLDS.get() {
            if !self.give_up_if_over() {
                return Ok(());
            }
            self.yields.fetch_add(1, Ordering::Relaxed);
        }
        if self.try_take() {
            HOLDS.set(true);
            return Ok(());
        }
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let mut me = Waiter::queue(self);
        let taken = loop {
            // Queued before it looks, so that a core freed after the look wakes it (or its
            // thread's park token does, if the wake comes before the park).
            if !me.queued.load(Ordering::SeqCst) {
                me = Waiter::queue(self);
            }
            if self.try_take() {
                break true;
            }
            if stopped.load(Ordering::Relaxed) {
                break false;
            }
            std::thread::park_timeout(STOP_CHECK);
        };
        let woken = !me.queued.swap(false, Ordering::SeqCst);
        self.waiting.fetch_sub(1, Ordering::SeqCst);
        if woken && !taken {
            // A stopped waiter passes on the wake-up it got, which another waiter may need.
            // (One that took a core on its own look, as a wake-up came, keeps it: another
            // waiter then looks again within `STOP_CHECK`.)
            self.wake_one();
        }
        HOLDS.set(taken);
        match taken {
            true => Ok(()),
            false => Err(Stopped),
        }
    }

    /// Whether this thread holds a core and the tasks are over their allowance.
    pub(crate) fn asked_to_yield(&self) -> bool {
        HOLDS.get() && self.over(self.count.load(Ordering::Relaxed))
    }

    /// Gives up this thread's core, if it holds one.
    pub(crate) fn release(&self) {
        if HOLDS.replace(false) {
            self.count.fetch_sub(TASK, Ordering::SeqCst);
            self.wake_one();
        }
    }

    fn try_take(&self) -> bool {
        self.count
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |count| {
                (tasks(count) < self.allowance(calls(count))).then_some(count + TASK)
            })
            .is_ok()
    }

    /// Gives up this thread's core if the tasks hold more than their allowance; several
    /// threads may look at once, and only as many as are over give up.
    fn give_up_if_over(&self) -> bool {
        let gave = self
            .count
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |count| {
                self.over(count).then_some(count - TASK)
            })
            .is_ok();
        if gave {
            HOLDS.set(false);
        }
        gave
    }

    /// A core came free: one waiting task may take it. The waiter queues itself before it
    /// looks at the count, and this looks at the queue after it changed the count, so either
    /// the waiter sees the free core or this sees the waiter.
    fn wake_one(&self) {
        if self.waiting.load(Ordering::SeqCst) == 0 {
            return;
        }
        while let Some(waiter) = self.waiters.pop() {
            if waiter.queued.swap(false, Ordering::SeqCst) {
                waiter.thread.unpark();
                return;
            }
        }
    }
}

/// A call in flight on the node, from [`JobCores::call`]: tasks give way to it until dropped.
#[must_use = "tasks give way to a call only while its guard lives"]
pub struct CallInFlight(Arc<JobCores>);

impl Drop for CallInFlight {
    #[inline]
    fn drop(&mut self) {
        self.0.count.fetch_sub(1, Ordering::SeqCst);
        self.0.wake_one();
    }
}

impl std::fmt::Debug for CallInFlight {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("CallInFlight")
    }
}

#[cfg(test)]
pub(super) mod tests;
