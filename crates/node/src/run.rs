//! Running one call on a core: the one function ([`Runner::run`]) that every thread that runs a
//! call goes through, whichever it is. How calls differ is the [`Entry`] passed in, not a copy
//! of this code:
//!
//! - [`Entry::Blocking`]: on a thread with a seat (an executor, or a confined caller's thread),
//!   through [`mote_runtime::Runtime::call_then`], preempted by parking the thread
//!   ([`crate::executor::ParkPreemption`], lent to the call); the reply goes out before the
//!   instance is torn down, and the thread keeps its core for what it runs next.
//! - [`Entry::Future`]: on a reader, through [`mote_runtime::Runtime::call_async`] on a fiber,
//!   preempted by its [`CoreGate`] at epoch ticks (it hands its core on and waits without
//!   running); the core is let go when the call ends, or when it is dropped (its client left).
//!
//! Either way the call runs only on a thread confined to run guest code
//! ([`mote_confine::role`]), only if its function is not quarantined, on the core the entry
//! holds, counted in the activity of that core, under its budget and memory limit, and is
//! settled by the ledger (outcome, run time, history, log).
//!
//! A call on a reader that calls one of WASI's synchronous host functions cannot go on there:
//! they block on an async runtime, which a reader's own thread may not. The first such call
//! panics before the host function does anything, so the call had no effect outside its
//! instance; it is handed back ([`Ran::Elsewhere`]) to run on an executor, and its function's
//! calls no longer run on readers ([`Deployed::keep_off_readers`]). That panic is expected, so
//! the process's panic hook stays quiet about it ([`quiet_panics`]).

use crate::activity::ExecutorActivity;
use crate::cores::{CoreGate, Cores, OnCore, Seat, Tally};
use crate::error::InvokeError;
use crate::executor::{ParkPreemption, PreemptConfig};
use crate::ledger::{Ledger, Reply};
use crate::metrics::NodeMetrics;
use crate::registry::Deployed;
use futures_util::FutureExt;
use mote_runtime::{
    Call as RuntimeCall, CallError, CallOutput, Function, GuestLog, HostIo, PhaseGate, Runtime,
};
use mote_sched::RankBasis;
use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What runs calls on cores: the runtime, where calls are settled and counted, and the cores.
pub(crate) struct Runner {
    pub(crate) runtime: Arc<Runtime>,
    ledger: Arc<Ledger>,
    metrics: Arc<NodeMetrics>,
    activity: ExecutorActivity,
    cores: Arc<Cores>,
    /// Preemption, under a ranking policy that preempts.
    preempt: Option<PreemptConfig>,
}

/// One call to run.
#[derive(Clone, Copy)]
pub(crate) struct CallRef<'a> {
    pub(crate) function: &'a Deployed,
    pub(crate) code: &'a Function,
    pub(crate) input: &'a [u8],
    pub(crate) arrival: Instant,
}

/// How the thread that runs a call holds its core and reaches the guest.
pub(crate) enum Entry<'a> {
    /// Blocking, on a thread that parks on `seat` while the call is suspended.
    Blocking {
        seat: &'a Arc<Seat>,
        on: OnCore,
        basis: Option<RankBasis>,
    },
    /// As a future, on the reader that read it (never queued, so not ranked until it runs
    /// past its quantum).
    Reader { on: OnCore },
    /// As a future whose share of a core is `gate`'s, and whose object calls go through `io`
    /// (a microtask function's, on the microtask threads).
    Gated {
        gate: &'a mut (dyn PhaseGate + Send),
        io: HostIo,
    },
}

/// How a call ended, for its thread.
pub(crate) enum Ran {
    /// It was answered; a blocking call's thread holds this core now (none if the call's
    /// budget ran out while it was suspended: it ended without one).
    Answered(Option<OnCore>),
    /// It must run again on an executor, untouched (see the module's doc).
    Elsewhere,
}

impl Runner {
    pub(crate) fn new(
        runtime: Arc<Runtime>,
        ledger: Arc<Ledger>,
        metrics: Arc<NodeMetrics>,
        cores: Arc<Cores>,
        preempt: Option<PreemptConfig>,
    ) -> Self {
        Self {
            activity: ExecutorActivity::new(cores.count()),
            runtime,
            ledger,
            metrics,
            cores,
            preempt,
        }
    }

    /// Where calls are settled.
    pub(crate) fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    /// Calls run and time spent running them, per core.
    pub(crate) fn activity(&self) -> &ExecutorActivity {
        &self.activity
    }

    /// The preemption calls run under, if any.
    pub(crate) fn preemption(&self) -> Option<PreemptConfig> {
        self.preempt
    }

    /// Runs `call` through `entry` (see the module's doc) and gives its reply to `respond`
    /// before the instance is torn down.
    pub(crate) async fn run(
        &self,
        call: CallRef<'_>,
        entry: Entry<'_>,
        respond: impl FnOnce(Reply),
    ) -> Ran {
        let CallRef {
            function, arrival, ..
        } = call;
        let refused = match mote_confine::role() {
            None => Some(InvokeError::Internal(
                "a call reached a thread that was not confined to run guest code; it was not run"
                    .into(),
            )),
            // Quarantined while this call waited: it does not start.
            Some(_) => function.admit().err(),
        };
        if let Some(e) = refused {
            respond(Reply::unstarted(Err(e)));
            return match entry {
                Entry::Blocking { on, .. } => Ran::Answered(Some(on)),
                Entry::Reader { on } => {
                    self.cores.release(on);
                    Ran::Answered(None)
                }
                Entry::Gated { .. } => Ran::Answered(None),
            };
        }
        let started = Instant::now();
        let tally = Tally::default();
        let core = match &entry {
            Entry::Blocking { on, .. } | Entry::Reader { on } => Some(on.index()),
            Entry::Gated { .. } => None,
        };
        if let Some(core) = core {
            tally.on_core(core);
            self.activity.start(core, started);
        }
        let on_reader = matches!(entry, Entry::Reader { .. });
        let finish = |finished: Finished| {
            let resumed = started + tally.suspended_for();
            let settled = match finished {
                Finished::Ran(result, log) => self
                    .ledger
                    .settle(function, result, log, arrival, resumed, on_reader),
                Finished::Panicked(what) => {
                    let error = InvokeError::Internal(what);
                    self.ledger
                        .settle_failure(function, error, arrival, resumed, on_reader)
                }
            };
            if core.is_some() {
                self.activity.end(tally.core(), settled.processing);
            }
            respond(settled);
        };
        let (ran, held) = self.enter(call, entry, started, &tally, finish).await;
        match ran {
            Ok(()) => {
                if on_reader {
                    self.metrics.inline_calls.inc();
                }
                Ran::Answered(held)
            }
            Err(panic) if on_reader => {
                tracing::debug!(function = %function.name(), panic = %panic_message(&*panic), "a call could not run on a reader; it runs on an executor, and so do the function's next calls");
                function.keep_off_readers();
                Ran::Elsewhere
            }
            Err(panic) => {
                let what = panic_message(&*panic);
                tracing::error!(function = %function.name(), panic = %what, "a call's thread caught a panic");
                Ran::Answered(held)
            }
        }
    }

    /// Enters the guest as `entry` says, with `finish` given the result before the instance is
    /// torn down (or the panic that ended the call first, unless the call was a reader's, which
    /// runs again elsewhere): `Err` if it panicked, and the core a blocking entry's thread
    /// holds afterwards.
    async fn enter(
        &self,
        call: CallRef<'_>,
        entry: Entry<'_>,
        started: Instant,
        tally: &Tally,
        finish: impl FnOnce(Finished),
    ) -> (std::thread::Result<()>, Option<OnCore>) {
        let CallRef {
            function,
            code,
            input,
            arrival,
        } = call;
        let runtime_call = RuntimeCall {
            function: code,
            name: function.name(),
            limits: function.record().limits,
            started,
            input,
        };
        let quantum = self.preempt.map(|p| p.quantum);
        let on_reader = matches!(entry, Entry::Reader { .. });
        let mut finish = Some(finish);
        let mut ran = |result, log| {
            if let Some(finish) = finish.take() {
                finish(Finished::Ran(result, log));
            }
        };
        let (result, held) = match entry {
            Entry::Blocking { seat, on, basis } => {
                let basis = basis.filter(|_| quantum.is_some());
                let quantum = quantum.unwrap_or(Duration::MAX);
                let park = ParkPreemption::new(&self.cores, seat, on, basis, quantum, tally);
                let preemption = basis.map(|_| &park as &dyn mote_runtime::Preemption);
                let result = std::panic::catch_unwind(AssertUnwindSafe(|| {
                    self.runtime.call_then(runtime_call, preemption, &mut ran)
                }));
                (result, park.end())
            }
            Entry::Reader { on } => {
                let key = function.key();
                let mut gate =
                    CoreGate::new(&self.cores, on, key, arrival, started, quantum, tally);
                let call = self
                    .runtime
                    .call_async(runtime_call, &mut gate, None, &mut ran);
                (
                    Quiet::new(AssertUnwindSafe(call)).catch_unwind().await,
                    None,
                )
            }
            Entry::Gated { gate, io } => {
                let call = self
                    .runtime
                    .call_async(runtime_call, gate, Some(io), &mut ran);
                (AssertUnwindSafe(call).catch_unwind().await, None)
            }
        };
        if let (Err(panic), Some(finish)) = (&result, finish.take())
            && !on_reader
        {
            finish(Finished::Panicked(panic_message(&**panic)));
        }
        (result, held)
    }
}

/// How a call's run ended, for its settling.
enum Finished {
    /// The guest ran: its result and what it logged.
    Ran(Result<CallOutput, CallError>, GuestLog),
    /// The host failed to run it to its end (a bug in mote, not in the function).
    Panicked(String),
}

std::thread_local! {
    /// Whether a panic on this thread now is one [`Runner::run`] hands back to an executor:
    /// set only while a call on a reader is polled.
    static EXPECTED_PANIC: Cell<bool> = const { Cell::new(false) };
}

pin_project_lite::pin_project! {
    /// A call on a reader, polled with the panic hook quiet ([`quiet_panics`]).
    struct Quiet<F> {
        #[pin]
        inner: F,
    }
}

impl<F> Quiet<F> {
    fn new(inner: F) -> Self {
        quiet_panics();
        Self { inner }
    }
}

impl<F: std::future::Future> std::future::Future for Quiet<F> {
    type Output = F::Output;

    fn poll(
        self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        /// Clears the flag however the poll ends, a panic included.
        struct Clear;
        impl Drop for Clear {
            fn drop(&mut self) {
                EXPECTED_PANIC.set(false);
            }
        }
        EXPECTED_PANIC.set(true);
        let _clear = Clear;
        self.project().inner.poll(cx)
    }
}

/// Wraps the process's panic hook, once, so that it stays quiet about the panics of calls on
/// readers that go to an executor instead, which are logged where they are caught.
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

/// Polls `future`, which never waits (a blocking call's run: every step happens on this
/// thread), to its end.
pub(crate) fn block_on<F: std::future::Future>(future: F) -> F::Output {
    let future = std::pin::pin!(future);
    match future.poll(&mut std::task::Context::from_waker(std::task::Waker::noop())) {
        std::task::Poll::Ready(output) => output,
        std::task::Poll::Pending => unreachable!("a blocking call's run never waits"),
    }
}

/// What a caught panic says.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}
