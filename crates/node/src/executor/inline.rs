//! Run-to-completion: a call runs on the thread that received it, with no hand-off to an
//! executor and back, when the scheduling policy would run it next anyway: a core is idle
//! ([`IdleCores::borrow`]), no call waits, and its function's calls are expected to end
//! within `inline_below` (a call that preemption could not have cut short; its last ten runs
//! say so; a function that never ran may be long, and a caller of `Node::submit` may queue
//! several calls before it waits for any). Otherwise it is queued as before. A hand-off costs
//! two cross-thread wake-ups or an executor spinning on a core the receiving thread needs; a
//! microsecond call costs less than either (`docs/benchmarks/http.md`).
//!
//! What still holds: one call per core (the borrowed core is counted busy, and an executor that
//! takes a call meanwhile waits for it), budgets and memory limits (the runtime's, on any
//! thread), quarantine, the ledger and the policy's histories. What differs: a call on the
//! receiving thread is not preempted, and it runs outside the executors' seccomp filter.
//!
//! A function whose calls turn long stops being run this way at its next call (its expected
//! time rises). The one call that turned long must not stall the async runtime whose worker it
//! runs on: a Tokio worker that blocks also keeps the runtime's I/O from being polled until it
//! returns. So once such a call has run for `inline_below`, at its next epoch tick (or before
//! it sleeps), the worker hands its duties to another thread ([`tokio::task::block_in_place`])
//! and the call finishes on this one as a plain blocking thread ([`WorkerHandOff`]).
//!
//! A worker may not block on an async runtime, and WASI preview1's synchronous host functions
//! do: the first time one is called from a call on a worker, it panics before doing anything.
//! Such a call had no effect outside its instance yet (an ABI guest's only other effects, its
//! log lines, go with the instance), so it is queued and runs again on an executor, and its
//! function's calls no longer run on workers. Such a panic is expected, so it is logged at
//! debug level rather than printed by the process's panic hook ([`quiet_panics`]).

use super::cores::IdleCores;
use super::{Executors, Shared};
use crate::error::InvokeError;
use crate::ledger::Reply;
use crate::registry::Deployed;
use mote_runtime::{Call as RuntimeCall, Function, Preemption, Resumed};
use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::rc::Rc;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};
use tokio::runtime::{Handle, RuntimeFlavor};

/// Which calls run on their caller's thread, and the slots those calls are counted in.
pub(super) struct Inline {
    /// Calls of functions expected to run for less than this run here; zero runs none so.
    below: Duration,
    /// Bit `i` is set while a caller's call counts its activity in slot `first_slot + i`.
    slots: AtomicU64,
    /// How many slots there are: at most one per core, as each such call holds a core.
    count: u32,
    /// Where these slots start among the executors' activity slots.
    pub(super) first_slot: usize,
}

impl Inline {
    /// Runs calls expected under `below` (none if zero) on up to `cores` callers' threads at
    /// once, counting their activity from slot `first_slot`.
    pub(super) fn new(below: Duration, cores: usize, first_slot: usize) -> Self {
        Self {
            below,
            slots: AtomicU64::new(0),
            count: cores.min(64) as u32,
            first_slot,
        }
    }

    /// Calls of functions expected to run for less than this run here.
    pub(super) fn below(&self) -> Duration {
        self.below
    }

    /// How many activity slots these calls need.
    pub(super) fn slots(&self) -> usize {
        match !self.below.is_zero() {
            true => self.count as usize,
            false => 0,
        }
    }

    /// Whether a function expected to run for `expected_s` (0: never ran) may run here.
    #[inline]
    fn expects_short(&self, expected_s: f64) -> bool {
        expected_s > 0.0 && expected_s < self.below.as_secs_f64()
    }

    /// A free slot, if any.
    fn take_slot(&self) -> Option<u32> {
        let mut taken = self.slots.load(Ordering::Acquire);
        loop {
            let free = (!taken).trailing_zeros();
            if free >= self.count {
                return None;
            }
            match self.slots.compare_exchange_weak(
                taken,
                taken | 1 << free,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Some(free),
                Err(now) => taken = now,
            }
        }
    }

    fn free_slot(&self, slot: u32) {
        self.slots.fetch_and(!(1 << slot), Ordering::Release);
    }

    /// Whether this thread may block for a call: a thread of its own (`Some(false)`), or a
    /// worker of a multi-threaded async runtime (`Some(true)`), which hands its duties over if
    /// the call runs long; not a single-threaded runtime's only thread (`None`).
    #[inline]
    fn may_block(&self) -> Option<bool> {
        match Handle::try_current() {
            Err(_) => Some(false),
            Ok(handle) => (handle.runtime_flavor() == RuntimeFlavor::MultiThread).then_some(true),
        }
    }
}

std::thread_local! {
    /// The hand-off of this async worker thread, registered with its first call.
    static HAND_OFF: Cell<Option<Rc<WorkerHandOff>>> = const { Cell::new(None) };
    /// Whether a panic on this thread now is one [`Executors::run_here`] handles.
    static EXPECTED_PANIC: Cell<bool> = const { Cell::new(false) };
}

/// Wraps the process's panic hook, once, so that it stays quiet about the panics of calls on
/// async workers, which are handled (and logged) where they are caught.
fn quiet_panics() {
    static WRAPPED: std::sync::Once = std::sync::Once::new();
    WRAPPED.call_once(|| {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !EXPECTED_PANIC.get() {
                hook(info);
            }
        }));
    });
}

/// The longest a worker that hands its duties over waits to see another thread take them (the
/// thread tokio starts for them, or a worker it wakes): on a busy machine a new thread may
/// wait a scheduler tick or more (4 ms here) for a core. The call waits meanwhile; it has
/// already run past what its function's calls take.
const HAND_OFF_WAIT: Duration = Duration::from_millis(50);

/// An async worker thread's [`Preemption`] for the calls it runs: never preempts, but once the
/// call has run past `after`, gives the worker's duties to another thread, so that the
/// runtime's other tasks and its I/O go on while the call finishes here.
struct WorkerHandOff {
    /// When the running call should hand the worker over; `None` once it did, or between calls.
    after: Cell<Option<Instant>>,
}

impl WorkerHandOff {
    /// This thread's hand-off, armed for a call that started at `started` and is expected to
    /// end within `within`; disarmed when the returned guard drops.
    fn arm(started: Instant, within: Duration) -> Armed {
        let hand_off = HAND_OFF.take().unwrap_or_else(|| {
            let hand_off = Rc::new(WorkerHandOff {
                after: Cell::new(None),
            });
            mote_runtime::preempt_calls_on_this_thread(hand_off.clone());
            hand_off
        });
        hand_off.after.set(Some(started + within));
        HAND_OFF.set(Some(hand_off.clone()));
        Armed(hand_off)
    }

    /// Hands the worker over now, once per call.
    fn hand_over(&self) {
        if self.after.take().is_none() {
            return;
        }
        let Ok(handle) = Handle::try_current() else {
            return;
        };
        let taken = Arc::new(AtomicBool::new(false));
        tokio::task::block_in_place(|| {
            // Whichever thread runs this task is polling the runtime: the one started to take
            // this worker's duties, or another worker it woke.
            let marker = taken.clone();
            drop(handle.spawn(async move { marker.store(true, Ordering::Release) }));
            let until = Instant::now() + HAND_OFF_WAIT;
            while !taken.load(Ordering::Acquire) && Instant::now() < until {
                std::thread::sleep(Duration::from_micros(20));
            }
        });
        tracing::debug!(
            "a call ran past its expected time on an async worker, which handed its duties over"
        );
    }
}

impl Preemption for WorkerHandOff {
    fn tick(&self, now: Instant, _deadline: Instant) -> Resumed {
        if self.after.get().is_some_and(|after| now >= after) {
            self.hand_over();
        }
        Resumed::Running
    }

    fn release_for_wait(&self) -> bool {
        // A sleep on a worker would hold up the runtime for all of it.
        self.hand_over();
        false
    }

    fn wait_ended(&self, _deadline: Instant) -> Resumed {
        Resumed::Running
    }
}

/// A worker's hand-off armed for one call.
struct Armed(Rc<WorkerHandOff>);

impl Drop for Armed {
    fn drop(&mut self) {
        self.0.after.set(None);
    }
}

/// A borrowed core, given back when dropped (a panic included).
struct Borrowed<'a> {
    cores: &'a IdleCores,
    inline: &'a Inline,
    slot: u32,
}

impl Drop for Borrowed<'_> {
    fn drop(&mut self) {
        self.inline.free_slot(self.slot);
        self.cores.give_back();
    }
}

impl Executors {
    /// Runs a call of `function` on this thread now if the policy would run it next anyway (see
    /// the module's doc): `None` if it must be queued ([`Executors::submit`]) instead
    /// (untouched, or stopped at its first WASI call on a worker, without effect).
    #[inline]
    pub(crate) fn run_here(
        &self,
        function: &Deployed,
        code: &Function,
        input: &[u8],
        arrival: Instant,
    ) -> Option<Result<Reply, InvokeError>> {
        let shared = &*self.shared;
        if !shared.inline.expects_short(function.expected_s()) || shared.pending.len() > 0 {
            return None;
        }
        let on_worker = shared.inline.may_block()?;
        if on_worker && !function.runs_on_workers() {
            return None;
        }
        if !shared.idle.borrow() {
            return None;
        }
        let Some(slot) = shared.inline.take_slot() else {
            shared.idle.give_back();
            return None;
        };
        let borrowed = Borrowed {
            cores: &shared.idle,
            inline: &shared.inline,
            slot,
        };
        if let Err(e) = function.admit() {
            return Some(Err(e));
        }
        let reply = shared.run_borrowed(&borrowed, on_worker, function, code, input, arrival);
        drop(borrowed);
        reply.map(Ok)
    }
}

impl Shared {
    /// Runs the call on the borrowed core: its reply, or `None` if it must run again on an
    /// executor (it panicked on a worker, as WASI preview1 does there).
    fn run_borrowed(
        &self,
        borrowed: &Borrowed<'_>,
        on_worker: bool,
        function: &Deployed,
        code: &Function,
        input: &[u8],
        arrival: Instant,
    ) -> Option<Reply> {
        let slot = self.inline.first_slot + borrowed.slot as usize;
        self.metrics.busy_executors.inc();
        let started = Instant::now();
        self.activity.start(slot, started);
        let _armed = on_worker.then(|| WorkerHandOff::arm(started, self.inline.below));
        if on_worker {
            quiet_panics();
            EXPECTED_PANIC.set(true);
        }
        let ran = std::panic::catch_unwind(AssertUnwindSafe(|| {
            let call = RuntimeCall {
                function: code,
                name: function.name(),
                limits: function.record().limits,
                started,
                input,
            };
            self.runtime.call_then(call, |result, log| {
                self.ledger.settle(function, result, log, arrival, started)
            })
        }));
        EXPECTED_PANIC.set(false);
        let reply = match ran {
            Ok(reply) => Some(reply),
            Err(panic) if on_worker => {
                tracing::debug!(function = %function.name(), panic = %super::panic_message(&*panic), "a call could not run on an async worker; it runs on an executor, and so do the function's next calls");
                function.keep_off_workers();
                None
            }
            Err(panic) => {
                let what = super::panic_message(&*panic);
                tracing::error!(function = %function.name(), panic = %what, "a call on its caller's thread panicked");
                let error = InvokeError::Internal(what);
                Some(
                    self.ledger
                        .settle_failure(function, error, arrival, started),
                )
            }
        };
        self.activity.end(
            slot,
            reply.as_ref().map_or(started.elapsed(), |r| r.processing),
        );
        self.metrics.busy_executors.dec();
        if reply.is_some() {
            self.metrics.inline_calls.inc();
        }
        reply
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_taken_once_each_and_come_back() {
        let inline = Inline::new(Duration::from_millis(1), 2, 4);
        assert_eq!(inline.slots(), 2);
        let a = inline.take_slot().unwrap();
        let b = inline.take_slot().unwrap();
        assert_ne!(a, b);
        assert_eq!(inline.take_slot(), None, "two cores, two slots");
        inline.free_slot(a);
        assert_eq!(inline.take_slot(), Some(a));
    }

    #[test]
    fn only_functions_known_to_be_short_run_here() {
        let inline = Inline::new(Duration::from_millis(1), 1, 0);
        assert!(!inline.expects_short(0.0), "a function that never ran");
        assert!(inline.expects_short(20e-6));
        assert!(!inline.expects_short(1e-3));
        let off = Inline::new(Duration::ZERO, 1, 0);
        assert!(!off.expects_short(0.0));
        assert!(!off.expects_short(20e-6));
        assert_eq!(off.slots(), 0);
    }

    #[test]
    fn a_single_threaded_runtime_never_blocks_for_a_call() {
        let inline = Inline::new(Duration::from_millis(1), 4, 0);
        assert_eq!(inline.may_block(), Some(false), "a thread of its own");
        let one = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        one.block_on(async { assert_eq!(inline.may_block(), None) });
        let two = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .build()
            .unwrap();
        two.block_on(async { assert_eq!(inline.may_block(), Some(true)) });
    }

    /// A worker that blocks hands its duties over: a task spawned meanwhile still runs.
    #[test]
    fn a_worker_that_runs_long_hands_its_duties_over() {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .build()
            .unwrap();
        let ran = runtime.block_on(async {
            tokio::spawn(async {
                let _armed = WorkerHandOff::arm(Instant::now(), Duration::ZERO);
                let hand_off = HAND_OFF.take().unwrap();
                HAND_OFF.set(Some(hand_off.clone()));
                // The only worker blocks, as a call does; first it hands its duties over.
                assert_eq!(
                    hand_off.tick(Instant::now(), Instant::now()),
                    Resumed::Running
                );
                let other = tokio::spawn(async {});
                let until = Instant::now() + Duration::from_secs(5);
                while !other.is_finished() && Instant::now() < until {
                    std::thread::sleep(Duration::from_millis(1));
                }
                other.is_finished()
            })
            .await
            .unwrap()
        });
        assert!(ran, "the task waited for the blocked worker");
    }
}
