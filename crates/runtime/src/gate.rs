//! What a call needs from the node that runs it: a call of a microtask function, a
//! [`PhaseGate`] that decides when each of its phases may run and the [`HostIo`] its object calls
//! run on; a call an executor may preempt, its [`Preemption`].
//!
//! The runtime does not decide who runs. Every phase change, wait and resumption of a call goes
//! through its gate, which admits the call to the share class of its current phase (and may make
//! it wait there); around every wait on storage or a timer the call gives its share up
//! ([`PhaseGate::suspend`]) and asks for it back ([`PhaseGate::resume`]) before it touches guest
//! memory again. Object I/O runs on the node's I/O runtime, not on the thread polling the call:
//! the threads that run guest code may be confined by seccomp and hold no sockets.

use mote_objects::Objects;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

/// How an executor may take its core back from a call it runs ([`Runtime::call_preemptible`]).
///
/// The runtime asks at every epoch tick, after the budget check, on the thread running the call.
/// The node decides (the runtime knows nothing of queues or ranks), and suspends the call by
/// blocking that thread: the call keeps its instance, its stack and its place in the guest, and
/// another thread runs on the core meanwhile. A call that ends within its first tick is never
/// asked.
///
/// [`Runtime::call_preemptible`]: crate::Runtime::call_preemptible
pub trait Preemption: Send + Sync + 'static {
    /// At an epoch tick at `now`, for a call whose budget ends at `deadline`: returns at once if
    /// the call keeps its core; otherwise suspends it until it may run again
    /// ([`Resumed::Running`]), or until `deadline` passes while it waits ([`Resumed::Expired`]:
    /// the call is stopped for its budget without running again).
    fn tick(&mut self, now: Instant, deadline: Instant) -> Resumed;
}

/// How a call left [`Preemption::tick`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resumed {
    /// It runs on.
    Running,
    /// Its budget ran out while it was suspended.
    Expired,
}

/// The preemption of a call no one preempts.
pub(crate) struct Unpreempted;

impl Preemption for Unpreempted {
    #[inline(always)]
    fn tick(&mut self, _now: Instant, _deadline: Instant) -> Resumed {
        Resumed::Running
    }
}

/// A future a gate hands back; boxed because the gate is a trait object chosen by the node.
pub type GateFuture<'a> = Pin<Box<dyn Future<Output = ()> + Send + 'a>>;

/// How a call's phases get a share of a core. The node implements it; the runtime calls it.
///
/// A gate is created holding the share the call starts with (a whole core, the phase of a call
/// that declared nothing yet) and gives whatever it holds back when dropped, so a call that
/// traps or times out in any phase releases its share.
pub trait PhaseGate: Send {
    /// The call's next phase needs `permille` of a core (1..=1000, checked by the runtime);
    /// resolves once the call may run in it.
    fn enter(&mut self, permille: u16) -> GateFuture<'_>;
    /// The call is about to wait for storage or a timer: it can give its share up meanwhile.
    fn suspend(&mut self);
    /// The wait is over; resolves once the call may run again in its current phase.
    fn resume(&mut self) -> GateFuture<'_>;
}

/// What guests' host I/O runs on: the object storage and the Tokio runtime that drives it.
#[derive(Clone)]
pub struct HostIo {
    pub(crate) objects: Option<Arc<Objects>>,
    pub(crate) io: tokio::runtime::Handle,
}

impl HostIo {
    /// Host I/O over `objects` (none: object calls fail and say storage is not configured),
    /// run on `io`, a runtime with I/O enabled.
    pub fn new(objects: Option<Arc<Objects>>, io: tokio::runtime::Handle) -> Self {
        Self { objects, io }
    }
}

/// The microtask part of a call's state: its gate and its I/O.
pub(crate) struct MicrotaskState {
    pub(crate) gate: Box<dyn PhaseGate>,
    pub(crate) io: HostIo,
}
