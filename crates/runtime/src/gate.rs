//! What a call needs from the node that runs it: a call of a microtask function, a
//! [`PhaseGate`] that decides when each of its phases may run and the [`HostIo`] its object calls
//! run on; the calls of an executor thread that may be preempted, the thread's [`Preemption`].
//!
//! The runtime does not decide who runs. Every phase change, wait and resumption of a call goes
//! through its gate, which admits the call to the share class of its current phase (and may make
//! it wait there); around every wait on storage or a timer the call gives its share up
//! ([`PhaseGate::suspend`]) and asks for it back ([`PhaseGate::resume`]) before it touches guest
//! memory again. Object I/O runs on the node's I/O runtime, not on the thread polling the call:
//! the threads that run guest code may be confined by seccomp and hold no sockets.

use crate::outbound::Egress;
use mote_objects::Objects;
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

/// How an executor may take its core back from the calls it runs, registered once per executor
/// thread with [`preempt_calls_on_this_thread`].
///
/// The runtime asks at every epoch tick of a call on that thread, after the budget check, and
/// around a host call that may wait for a long time (WASI `poll_oneoff` on clocks only: a sleep).
/// The node decides (the runtime knows nothing of queues or ranks) and suspends a call by
/// blocking the thread: the call keeps its instance, its stack and its place in the guest, and
/// another thread runs on the core meanwhile. A call that ends within its first tick is never
/// asked.
pub trait Preemption {
    /// At an epoch tick at `now`, for a call whose budget ends at `deadline`: returns at once if
    /// the call keeps its core; otherwise suspends it until it may run again
    /// ([`Resumed::Running`]), or until `deadline` passes while it waits ([`Resumed::Expired`]:
    /// the call is stopped for its budget without running again).
    fn tick(&self, now: Instant, deadline: Instant) -> Resumed;
    /// The call is about to wait in the host (a sleep): gives its core to another call
    /// meanwhile if it can; true if it did.
    fn release_for_wait(&self) -> bool;
    /// The wait that [`Preemption::release_for_wait`] gave the core up for is over: blocks
    /// until the call may run again, or until `deadline`.
    fn wait_ended(&self, deadline: Instant) -> Resumed;
}

/// How a call left a suspension.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resumed {
    /// It runs on.
    Running,
    /// Its budget ran out while it was suspended.
    Expired,
}

thread_local! {
    static PREEMPTION: RefCell<Option<Rc<dyn Preemption>>> = const { RefCell::new(None) };
}

/// Makes every call run on this thread from now on preemptible by `preemption`.
pub fn preempt_calls_on_this_thread(preemption: Rc<dyn Preemption>) {
    PREEMPTION.with(|p| *p.borrow_mut() = Some(preemption));
}

/// This thread's preemption, if its calls are preemptible.
fn current() -> Option<Rc<dyn Preemption>> {
    PREEMPTION.with(|p| p.borrow().clone())
}

/// [`Preemption::tick`] for the call running on this thread.
pub(crate) fn tick(now: Instant, deadline: Instant) -> Resumed {
    current().map_or(Resumed::Running, |p| p.tick(now, deadline))
}

/// Runs `wait`, a host call that may wait a long time, with the core given up meanwhile if this
/// thread's calls are preemptible; `Err` if the call's budget ran out before it got a core back.
pub(crate) fn waiting<R>(deadline: Instant, wait: impl FnOnce() -> R) -> Result<R, Expired> {
    let Some(preemption) = current().filter(|p| p.release_for_wait()) else {
        return Ok(wait());
    };
    let waited = wait();
    match preemption.wait_ended(deadline) {
        Resumed::Running => Ok(waited),
        Resumed::Expired => Err(Expired),
    }
}

/// A call's budget ran out while it waited for a core.
#[derive(Debug)]
pub(crate) struct Expired;

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
    /// At an epoch tick at `now`, while the call runs in its phase: if the gate takes its share
    /// back for a better-ranked phase waiting in the same class, the future the call waits on
    /// (without running) until it may run again.
    fn preempt(&mut self, now: Instant) -> Option<GateFuture<'static>>;
}

/// What guests' host I/O runs on: the object storage, the node's side of outbound requests,
/// and the Tokio runtime that drives both.
#[derive(Clone)]
pub struct HostIo {
    pub(crate) objects: Option<Arc<Objects>>,
    pub(crate) egress: Arc<Egress>,
    pub(crate) io: tokio::runtime::Handle,
}

impl HostIo {
    /// Host I/O over `objects` (none: object calls fail and say storage is not configured) and
    /// `egress` (where components' outbound requests may go), run on `io`, a runtime with I/O
    /// enabled.
    pub fn new(
        objects: Option<Arc<Objects>>,
        egress: Arc<Egress>,
        io: tokio::runtime::Handle,
    ) -> Self {
        Self {
            objects,
            egress,
            io,
        }
    }
}

/// The microtask part of a call's state: its gate and its I/O.
pub(crate) struct MicrotaskState {
    pub(crate) gate: Box<dyn PhaseGate>,
    pub(crate) io: HostIo,
}
