//! The state one call keeps inside its wasmtime `Store`: its limits and deadline, its name and
//! log, its standard I/O when it uses WASI, and its gate when it declares microtasks.
//! Host functions read and write it through `Caller::data`; the entry path reads it afterwards
//! to tell a timeout or a memory limit from an ordinary trap. A job instance's is `job`'s
//! ([`JobState`]), with the same [`CallLimiter`].

mod job;

pub use job::JobContext;
pub(crate) use job::{JobState, Mode, TaskIo};

use crate::gate::{GateFuture, Lent, MicrotaskState};
use crate::guest_log::GuestLog;
use bytes::Bytes;
use std::sync::Arc;
use std::time::Instant;
use wasmtime::ResourceLimiter;
use wasmtime_wasi::p1::WasiP1Ctx;
use wasmtime_wasi::p2::pipe::{MemoryInputPipe, MemoryOutputPipe};

/// How much of a WASI guest's stderr is kept (and quoted in errors).
const STDERR_CAPACITY: usize = 64 << 10;
/// The most table elements an instance may grow to.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// What the epoch callback of a call's store reads and marks: every call's state (a module's
/// [`CallState`], a component's `ProxyState`) has a deadline and says whether it fired.
pub(crate) trait Deadline {
    /// When the call's budget ends.
    fn deadline(&self) -> Instant;
    /// Records that the call was stopped for its budget.
    fn time_out(&mut self);
    /// At an epoch tick of a call that is a future: what it must wait on, without running,
    /// if its gate preempted it ([`crate::PhaseGate::preempt`]).
    fn preempted(&mut self, _now: Instant) -> Option<GateFuture<'static>> {
        None
    }
    /// At an epoch tick of a call that is a future and keeps its share: whether it lets its
    /// thread run other tasks first ([`crate::PhaseGate::yields`]).
    fn yields(&mut self, _now: Instant) -> bool {
        true
    }
    /// The preemption a blocking call was lent, if any.
    fn preemption(&self) -> Option<Lent> {
        None
    }
}

impl Deadline for CallState {
    fn deadline(&self) -> Instant {
        self.deadline
    }

    fn time_out(&mut self) {
        self.timed_out = true;
    }

    fn preempted(&mut self, now: Instant) -> Option<GateFuture<'static>> {
        self.microtask.as_mut()?.gate.preempt(now)
    }

    fn yields(&mut self, now: Instant) -> bool {
        self.microtask.as_mut().is_none_or(|m| m.gate.yields(now))
    }

    fn preemption(&self) -> Option<Lent> {
        self.preemption
    }
}

/// Per-call state inside the wasmtime `Store`.
pub(crate) struct CallState {
    pub(crate) limiter: CallLimiter,
    pub(crate) deadline: Instant,
    /// Set when the call was stopped for its budget, by the epoch callback or by the timer of
    /// a microtask call.
    pub(crate) timed_out: bool,
    pub(crate) function: Arc<str>,
    /// What the guest wrote to its log; empty (and unallocated) unless it wrote something.
    pub(crate) log: GuestLog,
    /// What a WASI command reads on stdin.
    stdin: Bytes,
    pub(crate) max_response_bytes: usize,
    /// Created on the guest's first WASI call: most mote ABI guests import WASI (Rust's standard
    /// library does) but never call it, and building a context costs more than the whole call.
    wasi: Option<(WasiP1Ctx, Stdio)>,
    /// The gate and host I/O of a call run as a future; `None` on the blocking path.
    pub(crate) microtask: Option<MicrotaskState>,
    /// What a blocking call's thread lent it to preempt it; `None` if nothing may.
    pub(crate) preemption: Option<Lent>,
}

/// The guest's stdio pipes when it uses WASI; read after the call.
pub(crate) struct Stdio {
    pub(crate) stdout: MemoryOutputPipe,
    pub(crate) stderr: MemoryOutputPipe,
}

impl CallState {
    /// The state of a call of `function` that must end by `deadline`; `stdin` is what a WASI
    /// command reads.
    pub(crate) fn new(
        function: Arc<str>,
        memory_limit: usize,
        deadline: Instant,
        stdin: Bytes,
        max_response_bytes: usize,
        microtask: Option<MicrotaskState>,
        preemption: Option<Lent>,
    ) -> Self {
        Self {
            limiter: CallLimiter {
                memory_limit,
                denied: None,
            },
            deadline,
            timed_out: false,
            function,
            log: GuestLog::default(),
            stdin,
            max_response_bytes,
            wasi: None,
            microtask,
            preemption,
        }
    }

    /// The WASI context, built on first use.
    pub(crate) fn wasi_ctx(&mut self) -> &mut WasiP1Ctx {
        &mut self.wasi().0
    }

    /// The guest's stdio, set up on first use.
    pub(crate) fn stdio(&mut self) -> &Stdio {
        &self.wasi().1
    }

    /// The guest's stdio if it used WASI at all.
    pub(crate) fn stdio_if_used(&self) -> Option<&Stdio> {
        self.wasi.as_ref().map(|(_, io)| io)
    }

    fn wasi(&mut self) -> &mut (WasiP1Ctx, Stdio) {
        self.wasi.get_or_insert_with(|| {
            let io = Stdio {
                stdout: MemoryOutputPipe::new(self.max_response_bytes),
                stderr: MemoryOutputPipe::new(STDERR_CAPACITY),
            };
            let ctx = wasmtime_wasi::WasiCtxBuilder::new()
                .stdin(MemoryInputPipe::new(self.stdin.clone()))
                .stdout(io.stdout.clone())
                .stderr(io.stderr.clone())
                .arg(self.function.as_ref())
                .build_p1();
            (ctx, io)
        })
    }
}

/// Enforces the memory limit and remembers whether it had to say no, so a trap that follows can
/// be reported as what it is.
pub(crate) struct CallLimiter {
    pub(crate) memory_limit: usize,
    pub(crate) denied: Option<usize>,
}

impl ResourceLimiter for CallLimiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired > self.memory_limit {
            self.denied = Some(desired);
            return Ok(false);
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}
