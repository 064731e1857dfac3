//! What a call needs from the node that runs it: a call that is a future (a microtask
//! function's, or any call run where it was read), a [`PhaseGate`] that decides when it may run
//! (each phase, after each wait, after each tick) and the [`HostIo`] its object calls run on; a
//! blocking call that may be preempted, the [`Preemption`] its thread lends it.
//!
//! The runtime does not decide who runs. Every phase change, wait and resumption of a call goes
//! through its gate, which admits the call to the share class of its current phase (and may make
//! it wait there); around every wait on storage or a timer the call gives its share up
//! ([`PhaseGate::suspend`]) and asks for it back ([`PhaseGate::resume`]) before it touches guest
//! memory again. Object I/O runs on the node's I/O runtime, not on the thread polling the call:
//! the threads that run guest code may be confined by seccomp and hold no sockets.

use crate::outbound::Egress;
use mote_confine::Relay;
use mote_objects::Objects;
use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::Instant;

/// How the thread that runs a blocking call may take its core back from it, lent to the call
/// by [`crate::Runtime::call_then`].
///
/// The runtime asks at every epoch tick of a call run with one, after the budget check, and
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

/// The [`Preemption`] a call was lent, kept in its store. Only [`crate::Runtime::call_then`]
/// makes one, from the `&dyn Preemption` its caller lends for the call, and the store it lives
/// in is dropped before `call_then` returns.
#[derive(Clone, Copy)]
pub(crate) struct Lent(NonNull<dyn Preemption + 'static>);

// SAFETY: a `Lent` is only dereferenced by the epoch callback and the host functions of the
// call's own store, which run on the thread inside `call_then` (a blocking call is never a
// future, so its store does not move between threads while the call runs).
unsafe impl Send for Lent {}
// SAFETY: as above: nothing dereferences it from another thread.
unsafe impl Sync for Lent {}

impl Lent {
    /// Lends `preemption` for as long as the store that keeps the returned value.
    ///
    /// # Safety
    /// The store must be dropped before `preemption`'s borrow ends, and only used on this
    /// thread meanwhile.
    pub(crate) unsafe fn new(preemption: &dyn Preemption) -> Self {
        // SAFETY: the caller promises the store (and with it this pointer) ends first; the
        // lifetime is erased only to keep the pointer in a `'static` store.
        let erased: &'static dyn Preemption = unsafe { std::mem::transmute(preemption) };
        Self(NonNull::from(erased))
    }

    fn get(&self) -> &dyn Preemption {
        // SAFETY: `Lent::new`'s caller keeps the preemption alive while the store lives.
        unsafe { self.0.as_ref() }
    }
}

/// [`Preemption::tick`] for a call lent `preemption`.
pub(crate) fn tick(preemption: Option<Lent>, now: Instant, deadline: Instant) -> Resumed {
    preemption.map_or(Resumed::Running, |p| p.get().tick(now, deadline))
}

/// Runs `wait`, a host call that may wait a long time, with the core given up meanwhile if the
/// call was lent a `preemption`; `Err` if the call's budget ran out before it got a core back.
pub(crate) fn waiting<R>(
    preemption: Option<Lent>,
    deadline: Instant,
    wait: impl FnOnce() -> R,
) -> Result<R, Expired> {
    let Some(preemption) = preemption.filter(|p| p.get().release_for_wait()) else {
        return Ok(wait());
    };
    let waited = wait();
    match preemption.get().wait_ended(deadline) {
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
    /// At an epoch tick at `now` at which the call keeps its share: whether it lets its thread
    /// run the runtime's other tasks before it goes on (by default at every tick).
    fn yields(&mut self, now: Instant) -> bool {
        let _ = now;
        true
    }
}

/// What guests' host I/O runs on: the object storage, the node's side of outbound requests,
/// the Tokio runtime that drives both, and the relay that starts work there for the confined
/// threads guests run on (which may not wake that runtime themselves).
#[derive(Clone)]
pub struct HostIo {
    pub(crate) objects: Option<Arc<Objects>>,
    pub(crate) egress: Arc<Egress>,
    pub(crate) io: tokio::runtime::Handle,
    pub(crate) relay: Arc<Relay>,
}

impl HostIo {
    /// Host I/O over `objects` (none: object calls fail and say storage is not configured) and
    /// `egress` (where components' outbound requests may go), run on `io`, a runtime with I/O
    /// enabled, through `relay`.
    pub fn new(
        objects: Option<Arc<Objects>>,
        egress: Arc<Egress>,
        io: tokio::runtime::Handle,
        relay: Arc<Relay>,
    ) -> Self {
        Self {
            objects,
            egress,
            io,
            relay,
        }
    }

    /// Runs `future` on the I/O runtime, relayed, for a confined thread: its output, or
    /// [`mote_confine::Lost`] if it panicked.
    pub(crate) fn spawn<F>(&self, future: F) -> mote_confine::Spawned<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.relay.spawn(&self.io, future)
    }
}

/// The part of a call's state that only a call run as a future has: its gate, and its I/O
/// (a microtask function's; none for another function, which has no object calls).
pub(crate) struct MicrotaskState {
    pub(crate) gate: LentGate,
    pub(crate) io: Option<HostIo>,
}

/// The [`PhaseGate`] a call run as a future was lent: [`crate::Runtime::call_async`] borrows
/// it mutably for as long as its future lives, and the store that keeps this pointer is
/// dropped inside that future, so the node keeps its gate (no allocation per call, and it can
/// read it afterwards) and the runtime reaches it while the call runs.
pub(crate) struct LentGate(NonNull<dyn PhaseGate + 'static>);

// SAFETY: the gate is `Send` (`PhaseGate: Send`) and mutably borrowed by the call's future,
// which is what moves between threads; only that future's store dereferences the pointer.
unsafe impl Send for LentGate {}

impl LentGate {
    /// Lends `gate` to a store.
    ///
    /// # Safety
    /// The store must be dropped before `gate`'s mutable borrow ends, and nothing else may use
    /// the gate meanwhile.
    pub(crate) unsafe fn new(gate: &mut (dyn PhaseGate + '_)) -> Self {
        // SAFETY: the caller promises the store (and with it this pointer) ends first; the
        // lifetime is erased only to keep the pointer in a `'static` store.
        let erased: &'static mut dyn PhaseGate = unsafe { std::mem::transmute(gate) };
        Self(NonNull::from(erased))
    }
}

impl std::ops::Deref for LentGate {
    type Target = dyn PhaseGate;

    fn deref(&self) -> &Self::Target {
        // SAFETY: `LentGate::new`'s caller keeps the gate borrowed for the store's life.
        unsafe { self.0.as_ref() }
    }
}

impl std::ops::DerefMut for LentGate {
    fn deref_mut(&mut self) -> &mut Self::Target {
        // SAFETY: as above, and the store's `&mut` access is the only one meanwhile.
        unsafe { self.0.as_mut() }
    }
}
