//! Admission of microtasks to their share classes, and each call's hold on it.
//!
//! - [`ClassGate`]: the node's [`ClassAdmission`] (per class the running microtasks and a
//!   policy-ordered queue; the cores split across the classes) behind one lock, delivering each
//!   admission to the call that waits for it; under `--preempt on` it takes a share back for a
//!   better-ranked microtask in the same class.
//! - [`CallGate`]: one call's hold on the gate, handed to the runtime as its [`PhaseGate`].

use super::config::MicrotaskMode;
use crate::executor::{ExecutorsConfig, PreemptConfig};
use mote_runtime::{GateFuture, PhaseGate};
use mote_sched::{
    CLASSES, CallQueue, ClassAdmission, FunctionKey, RankBasis, Ranked, SHARE_LEVELS, ShareClass,
    SplitMismatch, should_yield,
};
use parking_lot::Mutex;
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{Notify, oneshot};

/// One share class's state, for `GET /v1/node`.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct ClassSnapshot {
    /// The class's share of a core, in permille.
    pub permille: u16,
    /// Cores the class has now.
    pub cores: u32,
    /// Microtasks it may run at once: cores × 1000 / permille.
    pub capacity: u32,
    /// Microtasks running in it.
    pub running: u32,
    /// Microtasks queued for it.
    pub waiting: usize,
    /// Microtasks that gave their share up to a better-ranked one in it (`--preempt on`).
    pub preemptions: u64,
}

/// A microtask's place in its class's queue: where its admission is sent, and, for one that was
/// preempted, what wakes the call waiting (without running) to be admitted again.
struct Admit {
    admitted: oneshot::Sender<Admitted>,
    wake: Option<Arc<Notify>>,
}

/// What a microtask learns when it is admitted.
struct Admitted {
    /// What its rank in the class is computed from.
    basis: RankBasis,
    /// When it was admitted: it holds the share from then.
    at: Instant,
}

/// Admits microtasks to their share classes: the decisions are [`ClassAdmission`]'s, taken
/// under one lock; the gate delivers each admission to the call waiting for it.
pub(crate) struct ClassGate {
    state: Mutex<ClassAdmission<Admit>>,
    pub(super) mode: MicrotaskMode,
    /// Preemption inside a class, if on.
    preempt: Option<PreemptConfig>,
}

impl ClassGate {
    pub(crate) fn new(
        executors: &ExecutorsConfig,
        mode: MicrotaskMode,
    ) -> Result<Self, SplitMismatch> {
        let split = match mode {
            MicrotaskMode::On(split) => Some(split),
            MicrotaskMode::Off => None,
        };
        let preempt = executors.preemption();
        let queue = || match preempt {
            Some(p) => CallQueue::preemptive(executors.policy, executors.fc_window, p.aging),
            None => CallQueue::new(executors.policy, executors.fc_window),
        };
        let state = ClassAdmission::new(executors.cores as u32, split, queue)?;
        Ok(Self {
            state: Mutex::new(state),
            mode,
            preempt,
        })
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, ClassAdmission<Admit>> {
        self.state.lock()
    }

    /// Whether waits give the share up: per class yes; task-based, a call holds its core.
    fn releases_on_wait(&self) -> bool {
        self.mode != MicrotaskMode::Off
    }

    /// The class a phase of `permille` runs in: its share class, or under `off` the one class.
    fn class_of(&self, permille: u16) -> usize {
        match self.releases_on_wait() {
            true => ShareClass::of(i32::from(permille))
                .map(ShareClass::index)
                .unwrap_or(0),
            false => 0,
        }
    }

    /// Admits a microtask of `function` to `class`: at once (`Ok`, with what its rank is
    /// computed from), or queued (`Err`: the receiver fires when it is admitted).
    fn acquire(
        &self,
        class: usize,
        function: FunctionKey,
        arrival: Instant,
    ) -> Result<RankBasis, oneshot::Receiver<Admitted>> {
        let mut state = self.lock();
        let (admit, admitted) = oneshot::channel();
        let admit = Admit {
            admitted: admit,
            wake: None,
        };
        match state.arrive(class, function, arrival, admit, deliver) {
            Some(basis) => Ok(basis),
            None => Err(admitted),
        }
    }

    /// A microtask of `function` that held a share of `class` for `held` has left it.
    fn release(&self, class: usize, function: FunctionKey, held: Duration) {
        self.lock().leave(class, function, held, deliver);
    }

    /// Takes the share of a microtask of `class`, ranked `rank` from `basis` after holding it
    /// for `held`, back for a better-ranked one waiting in the class, if one still waits: queues
    /// it again and returns where its admission will arrive (`wake` fires then too).
    fn preempt(
        &self,
        class: usize,
        basis: RankBasis,
        held: Duration,
        rank: u64,
        wake: Arc<Notify>,
    ) -> Option<oneshot::Receiver<Admitted>> {
        let mut state = self.lock();
        if !state.outranked(class, rank) {
            return None;
        }
        let (admit, admitted) = oneshot::channel();
        let admit = Admit {
            admitted: admit,
            wake: Some(wake),
        };
        state.preempt(class, basis, held, admit, deliver);
        Some(admitted)
    }

    /// The rank of the best microtask waiting in `class`.
    fn best_rank(&self, class: usize) -> Option<u64> {
        self.lock().best_rank(class)
    }

    /// Drops what the classes know about a function that was replaced or removed.
    pub(crate) fn forget(&self, function: FunctionKey) {
        self.lock().forget(function);
    }

    pub(crate) fn snapshot(&self) -> Vec<ClassSnapshot> {
        let state = self.lock();
        (0..CLASSES)
            .map(|c| ClassSnapshot {
                permille: SHARE_LEVELS[c],
                cores: state.cores(c),
                capacity: state.capacity(c),
                running: state.running(c),
                waiting: state.waiting(c),
                preemptions: state.preemptions(c),
            })
            .collect()
    }
}

/// Hands an admission to the microtask waiting for it; false if none waits (its call was
/// cancelled while it queued), so it takes no room.
fn deliver(taken: Ranked<Admit>) -> bool {
    let admitted = Admitted {
        basis: taken.basis,
        at: Instant::now(),
    };
    if taken.call.admitted.send(admitted).is_err() {
        return false;
    }
    if let Some(wake) = taken.call.wake {
        wake.notify_one();
    }
    true
}

/// Where a call stands with the gate.
enum Hold {
    /// Running in its class, ranked from this basis.
    Running(RankBasis),
    /// Queued for its class.
    Queued(oneshot::Receiver<Admitted>),
    /// Holding nothing: before its first admission, or while it waits on storage or a timer.
    Released,
}

/// One call's hold on the [`ClassGate`]; the runtime drives it through [`PhaseGate`].
pub(crate) struct CallGate {
    gate: Arc<ClassGate>,
    function: FunctionKey,
    arrival: Instant,
    class: usize,
    hold: Hold,
    /// When the current slice of its share began.
    since: Instant,
    /// How long it held its share in this microtask before the current slice (it was
    /// preempted in between).
    held_before: Duration,
    /// What wakes the call when it is admitted again after a preemption; made on the first.
    wake: Option<Arc<Notify>>,
}

impl CallGate {
    /// A call that holds nothing yet and will start in the whole-core class.
    pub(super) fn new(gate: Arc<ClassGate>, function: FunctionKey, arrival: Instant) -> Self {
        Self {
            gate,
            function,
            arrival,
            class: ShareClass::WHOLE_CORE.index(),
            hold: Hold::Released,
            since: arrival,
            held_before: Duration::ZERO,
            wake: None,
        }
    }

    /// Waits until the call runs in its class.
    pub(super) async fn acquire(&mut self) {
        self.held_before = Duration::ZERO;
        match self.gate.acquire(self.class, self.function, self.arrival) {
            Ok(basis) => {
                self.hold = Hold::Running(basis);
                self.since = Instant::now();
            }
            Err(admitted) => {
                self.hold = Hold::Queued(admitted);
                if let Hold::Queued(admitted) = &mut self.hold {
                    match admitted.await {
                        Ok(admitted) => {
                            self.hold = Hold::Running(admitted.basis);
                            self.since = admitted.at;
                        }
                        // The gate is gone: the node is shutting down and the call with it.
                        Err(_) => self.hold = Hold::Released,
                    }
                }
            }
        }
    }

    /// After a preemption: notes the admission the call waited for, if it has arrived.
    fn readmitted(&mut self) {
        if let Hold::Queued(admitted) = &mut self.hold
            && let Ok(admitted) = admitted.try_recv()
        {
            self.hold = Hold::Running(admitted.basis);
            self.since = admitted.at;
        }
    }

    /// How long the call has held its share in this microtask.
    fn held(&self) -> Duration {
        self.held_before + self.since.elapsed()
    }

    fn release(&mut self) {
        self.readmitted();
        if let Hold::Running(_) = self.hold {
            self.gate.release(self.class, self.function, self.held());
        }
        self.hold = Hold::Released;
    }
}

impl PhaseGate for CallGate {
    fn enter(&mut self, permille: u16) -> GateFuture<'_> {
        Box::pin(async move {
            let class = self.gate.class_of(permille);
            self.readmitted();
            if class != self.class {
                self.release();
                self.class = class;
            }
            if !matches!(self.hold, Hold::Running(_)) {
                self.acquire().await;
            }
        })
    }

    fn suspend(&mut self) {
        if self.gate.releases_on_wait() {
            self.release();
        }
    }

    fn resume(&mut self) -> GateFuture<'_> {
        Box::pin(async move {
            if let Hold::Released = self.hold {
                self.acquire().await;
            }
        })
    }

    fn preempt(&mut self, now: Instant) -> Option<GateFuture<'static>> {
        let quantum = self.gate.preempt?.quantum;
        self.readmitted();
        let Hold::Running(basis) = self.hold else {
            return None;
        };
        let slice = now.saturating_duration_since(self.since);
        let held = self.held_before + slice;
        let rank = basis.rank(held.as_nanos() as u64);
        let best = self.gate.best_rank(self.class).unwrap_or(u64::MAX);
        let slice_ns = slice.as_nanos() as u64;
        if !should_yield(rank, best, slice_ns, quantum.as_nanos() as u64) {
            return None;
        }
        let wake = self.wake.get_or_insert_with(Default::default).clone();
        let admitted = self
            .gate
            .preempt(self.class, basis, held, rank, wake.clone())?;
        self.held_before = held;
        self.hold = Hold::Queued(admitted);
        Some(Box::pin(async move { wake.notified().await }))
    }
}

impl Drop for CallGate {
    fn drop(&mut self) {
        match std::mem::replace(&mut self.hold, Hold::Released) {
            Hold::Running(basis) => {
                self.hold = Hold::Running(basis);
                self.release();
            }
            Hold::Queued(mut admitted) => {
                // Admitted after it stopped waiting: give the share straight back.
                admitted.close();
                if let Ok(admitted) = admitted.try_recv() {
                    self.hold = Hold::Running(admitted.basis);
                    self.since = admitted.at;
                    self.release();
                }
            }
            Hold::Released => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::executor::ExecutorsConfig;
    use mote_sched::{Policy, SplitMode};

    fn gate(cores: usize, mode: MicrotaskMode) -> Arc<ClassGate> {
        let mut config = ExecutorsConfig::new(cores);
        config.policy = Policy::Fifo;
        Arc::new(ClassGate::new(&config, mode).unwrap())
    }

    fn call(gate: &Arc<ClassGate>) -> CallGate {
        CallGate::new(gate.clone(), 1, Instant::now())
    }

    fn running(gate: &ClassGate) -> Vec<u32> {
        gate.snapshot().iter().map(|c| c.running).collect()
    }

    #[tokio::test]
    async fn a_tenth_share_class_runs_ten_microtasks_per_core() {
        let gate = gate(2, MicrotaskMode::On(SplitMode::Dynamic));
        let mut calls: Vec<CallGate> = (0..25).map(|_| call(&gate)).collect();
        for c in &mut calls[..20] {
            c.enter(100).await;
        }
        // 20 microtasks of 100‰ fill both cores.
        assert_eq!(running(&gate), [0, 0, 0, 20]);
        let classes = gate.snapshot();
        assert_eq!((classes[3].cores, classes[3].capacity), (2, 20));
        // The 21st queues until one leaves.
        let mut extra = calls.pop().unwrap();
        let mut admitted = Box::pin(extra.enter(100));
        assert!(futures_poll_once(&mut admitted).is_pending());
        assert_eq!(gate.snapshot()[3].waiting, 1);
        drop(calls.remove(0));
        assert!(futures_poll_once(&mut admitted).is_ready());
        drop(admitted);
        assert_eq!(running(&gate), [0, 0, 0, 20]);
    }

    #[tokio::test]
    async fn a_whole_core_phase_waits_for_a_core_the_light_class_gives_back() {
        let gate = gate(2, MicrotaskMode::On(SplitMode::Dynamic));
        let mut light: Vec<CallGate> = (0..15).map(|_| call(&gate)).collect();
        for c in &mut light {
            c.enter(100).await;
        }
        // 15 light microtasks need 1.5 cores: the class holds both.
        assert_eq!(gate.snapshot()[3].cores, 2);
        let mut heavy = call(&gate);
        let mut admitted = Box::pin(heavy.enter(1000));
        // One core goes to the busy whole-core class at once, but the light class still runs
        // 15 microtasks (1.5 cores) until it drains to 10, and the cores are not oversubscribed
        // meanwhile.
        assert!(futures_poll_once(&mut admitted).is_pending());
        let classes = gate.snapshot();
        assert_eq!((classes[0].cores, classes[3].cores), (1, 1));
        for _ in 0..5 {
            drop(light.pop());
        }
        assert!(futures_poll_once(&mut admitted).is_ready());
        drop(admitted);
        assert_eq!(running(&gate), [1, 0, 0, 10]);
    }

    #[tokio::test]
    async fn waits_give_the_share_up_and_dropping_a_gate_gives_everything_back() {
        let gate = gate(1, MicrotaskMode::On(SplitMode::Dynamic));
        let mut a = call(&gate);
        a.acquire().await;
        assert_eq!(running(&gate), [1, 0, 0, 0]);
        a.suspend();
        assert_eq!(running(&gate), [0, 0, 0, 0]);
        a.resume().await;
        a.enter(250).await;
        assert_eq!(running(&gate), [0, 0, 1, 0]);
        drop(a);
        assert_eq!(running(&gate), [0, 0, 0, 0]);
        // A call dropped while it queued holds nothing afterwards, even if it was admitted
        // in between.
        let mut first = call(&gate);
        first.acquire().await;
        let mut second = call(&gate);
        let mut queued = Box::pin(second.acquire());
        assert!(futures_poll_once(&mut queued).is_pending());
        drop(queued);
        drop(first);
        drop(second);
        assert_eq!(running(&gate), [0, 0, 0, 0]);
        assert_eq!(gate.snapshot()[0].waiting, 0);
    }

    #[tokio::test]
    async fn task_based_calls_hold_a_whole_core_through_phases_and_waits() {
        let gate = gate(2, MicrotaskMode::Off);
        let mut a = call(&gate);
        a.acquire().await;
        a.enter(100).await;
        a.suspend();
        a.resume().await;
        assert_eq!(running(&gate), [1, 0, 0, 0]);
        let mut b = call(&gate);
        b.acquire().await;
        let mut c = call(&gate);
        let mut queued = Box::pin(c.enter(100));
        assert!(
            futures_poll_once(&mut queued).is_pending(),
            "two cores, two calls, whatever their phases"
        );
        drop(a);
        assert!(futures_poll_once(&mut queued).is_ready());
    }

    #[tokio::test]
    async fn inside_a_class_a_microtask_gives_its_share_to_a_better_one_after_its_quantum() {
        let mut config = ExecutorsConfig::new(1);
        config.policy = Policy::Sept;
        config.preempt = Some(PreemptConfig {
            quantum: Duration::from_millis(1),
            ..PreemptConfig::default()
        });
        let gate =
            Arc::new(ClassGate::new(&config, MicrotaskMode::On(SplitMode::Dynamic)).unwrap());
        let mut a = CallGate::new(gate.clone(), 1, Instant::now());
        a.acquire().await;
        std::thread::sleep(Duration::from_millis(3));
        assert!(a.preempt(Instant::now()).is_none(), "nothing waits");
        // Neither function has a history: `a` ranks by the time it has held its share, behind
        // `b`, which has held none.
        let mut b = CallGate::new(gate.clone(), 2, Instant::now());
        let mut b_queued = Box::pin(b.acquire());
        assert!(futures_poll_once(&mut b_queued).is_pending());
        let mut waiting = a.preempt(Instant::now()).expect("b outranks a");
        assert!(futures_poll_once(&mut b_queued).is_ready());
        drop(b_queued);
        assert_eq!(
            running(&gate),
            [1, 0, 0, 0],
            "b holds the one core, a waits"
        );
        assert_eq!(gate.snapshot()[0].preemptions, 1);
        assert!(futures_poll_once(&mut waiting).is_pending());
        std::thread::sleep(Duration::from_millis(2));
        drop(b);
        assert!(
            futures_poll_once(&mut waiting).is_ready(),
            "a is admitted again"
        );
        assert!(
            a.preempt(Instant::now()).is_none(),
            "a new slice runs for its quantum first"
        );
        drop(a);
        assert_eq!(running(&gate), [0, 0, 0, 0]);
        // a's two slices are one microtask of at least 3 ms in its history.
        let state = gate.lock();
        let history = state.history(0, 1).unwrap().recent_processing_ns();
        assert_eq!(history.len(), 1);
        assert!(history[0] >= 3_000_000, "{history:?}");
    }

    /// Polls a future once with a waker that does nothing.
    fn futures_poll_once<F: std::future::Future + Unpin>(f: &mut F) -> std::task::Poll<F::Output> {
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        std::pin::Pin::new(f).poll(&mut cx)
    }
}
