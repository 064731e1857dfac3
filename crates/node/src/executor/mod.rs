//! The executors: threads, each confined before its first call, that run the calls that could
//! not run where they were read: those that found every core busy or work waiting ahead of
//! them, WASI commands, and the calls of callers that may not run guest code themselves. A
//! spare executor parks on its seat until [`crate::cores`] hands it a core and a call; it runs
//! calls back to back while work waits, then joins the spares again and lets its core go.
//!
//! There are `cores` executors, `cores + max_suspended` under preemption (a suspended call
//! keeps its parked thread), and `baseline_cap` under `baseline`, whose calls start as they
//! arrive and share the CPUs through the OS, as OpenWhisk does by default (it counts that many
//! cores). How a blocking call is preempted is [`preempt`]'s; how any call runs, `crate::run`'s.
//!
//! An executor's reply goes out before the instance is torn down, so the caller does not wait
//! for the memory reset; its thread holds the core until the teardown is done.

use crate::cores::{Cores, OnCore, Seat, Work};
use crate::error::InvokeError;
use crate::ledger::Reply;
use crate::metrics::Outcome;
use crate::pending::{Next, Refused};
use crate::registry::Deployed;
use crate::run::{CallRef, Entry, Ran, Runner};
mod call;
mod preempt;

use bytes::Bytes;
pub(crate) use call::Call;
use mote_confine::{ConfineError, Filter, Role};
use mote_runtime::{CallInFlight, Function};
use mote_sched::Policy;
pub(crate) use preempt::ParkPreemption;
pub use preempt::PreemptConfig;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::oneshot;

/// How the executors are set up.
#[derive(Clone, Debug)]
pub struct ExecutorsConfig {
    /// Cores calls may use: one executor thread each (except under `baseline`).
    pub cores: usize,
    /// The order in which waiting calls run.
    pub policy: Policy,
    /// Fair-Choice counts a function's calls over this window (the paper's T).
    pub fc_window: Duration,
    /// Under `baseline`, the most calls that run at once (one thread each, sharing the cores).
    pub baseline_cap: usize,
    /// The most calls that may wait; more are refused with [`InvokeError::QueueFull`].
    pub max_queue: usize,
    /// How long a spare executor polls for a hand-off before it sleeps.
    pub spin: Duration,
    /// Run a call on the reader that read it when a core is free and nothing waits (`mote up
    /// --inline`); off: every call waits for an executor. Never under `baseline`, where the OS
    /// shares the cores.
    pub inline: bool,
    /// A function whose calls are killed for their budget this many times in a row is
    /// quarantined until released or redeployed; 0 never quarantines.
    pub quarantine_after: u32,
    /// Confine the threads that run guest code with seccomp ([`mote_confine`]).
    pub seccomp: bool,
    /// Preempt running calls for better-ranked ones (`None`: every call runs to its end).
    /// Only a ranking policy preempts: under `fifo` no waiting call ever outranks a running
    /// one, and under `baseline` the OS shares the cores.
    pub preempt: Option<PreemptConfig>,
}

impl ExecutorsConfig {
    /// Defaults for `cores` executors.
    pub fn new(cores: usize) -> Self {
        Self {
            cores: cores.max(1),
            policy: Policy::default(),
            fc_window: Duration::from_secs(60),
            baseline_cap: 4 * cores.max(1),
            max_queue: 100_000,
            spin: Duration::from_micros(50),
            inline: true,
            quarantine_after: 5,
            seccomp: cfg!(target_os = "linux"),
            preempt: Some(PreemptConfig::default()),
        }
    }

    /// The preemption calls run with: `preempt` under a ranking policy, else none.
    pub fn preemption(&self) -> Option<PreemptConfig> {
        self.preempt.filter(|_| !self.policy.arrival_order())
    }

    /// How many calls may hold a core at once: the cores, or `baseline_cap` under `baseline`.
    pub fn slots(&self) -> usize {
        match self.policy.oversubscribes() {
            true => self.baseline_cap.max(self.cores),
            false => self.cores,
        }
    }

    /// Whether calls run where they are read.
    pub fn runs_inline(&self) -> bool {
        self.inline && !self.policy.oversubscribes()
    }

    /// The filter for threads in `role`, unless confinement is off.
    pub fn filter(&self, role: Role) -> Result<Option<Arc<Filter>>, ConfineError> {
        match self.seccomp {
            true => Ok(Some(Arc::new(Filter::new(role)?))),
            false => Ok(None),
        }
    }
}

/// Confines the calling thread with `filter`, or waives confinement when it is off.
pub(crate) fn confine(filter: Option<&Filter>, role: Role) -> Result<(), ConfineError> {
    match filter {
        Some(filter) => filter.confine_this_thread(),
        None => {
            mote_confine::waive(role);
            Ok(())
        }
    }
}

struct Shared {
    runner: Arc<Runner>,
    cores: Arc<Cores>,
    config: ExecutorsConfig,
    /// Each executor's seat.
    seats: Vec<Arc<Seat>>,
}

/// The node's executor threads. Stops and joins them when dropped; calls still queued then are
/// answered with [`InvokeError::ShuttingDown`].
pub struct Executors {
    shared: Arc<Shared>,
    threads: Vec<JoinHandle<()>>,
}

impl Executors {
    /// Starts the executor threads, each confined (unless the config turns seccomp off) before
    /// it parks as a spare; fails if a thread cannot be confined.
    pub(crate) fn start(
        runner: Arc<Runner>,
        cores: Arc<Cores>,
        config: ExecutorsConfig,
    ) -> Result<Self, ConfineError> {
        let threads = Self::threads_for(&config);
        let filter = config.filter(Role::Guest)?;
        let seats: Vec<_> = (0..threads)
            .map(|_| Arc::new(Seat::new(config.spin)))
            .collect();
        // Every executor is a spare from the start, so that a call queued before a thread has
        // started finds one.
        for seat in &seats {
            cores.join_spares(seat);
        }
        let shared = Arc::new(Shared {
            runner,
            cores,
            config,
            seats,
        });
        let (confined_tx, confined) = std::sync::mpsc::channel();
        let mut executors = Self {
            shared: shared.clone(),
            threads: Vec::new(),
        };
        for i in 0..threads {
            let (shared, confined_tx, filter) =
                (shared.clone(), confined_tx.clone(), filter.clone());
            let thread = std::thread::Builder::new()
                .name(format!("mote-exec-{i}"))
                .spawn(move || {
                    let result = confine(filter.as_deref(), Role::Guest);
                    let ok = result.is_ok();
                    let _ = confined_tx.send(result);
                    drop(confined_tx);
                    if ok {
                        shared.run_executor(&shared.seats[i]);
                    }
                })
                .expect("spawning an executor thread");
            executors.threads.push(thread);
        }
        drop(confined_tx);
        // Dropping `executors` on failure stops the threads that did start.
        for result in confined.iter() {
            result?;
        }
        Ok(executors)
    }

    /// How many executor threads `config` asks for.
    pub fn threads_for(config: &ExecutorsConfig) -> usize {
        match config.preemption() {
            Some(preempt) => config.slots() + preempt.max_suspended,
            None => config.slots(),
        }
    }

    /// Queues a call of `function`, running `code`, that arrived at `arrival` and holds its
    /// count in the node's cores (`counted`, let go when it starts); the receiver yields its
    /// reply.
    pub(crate) fn submit(
        &self,
        function: Arc<Deployed>,
        code: Arc<Function>,
        input: Bytes,
        arrival: Instant,
        counted: CallInFlight,
        movable: bool,
    ) -> Result<oneshot::Receiver<Reply>, InvokeError> {
        function.admit()?;
        let (reply, rx) = oneshot::channel();
        let key = function.key();
        let call = Call {
            function,
            code,
            input,
            reply,
            arrival,
            counted,
            movable,
        };
        match self.shared.cores.submit(key, arrival, Work::Call(call)) {
            Ok(()) => Ok(rx),
            Err((Refused::ShuttingDown, _)) => Err(InvokeError::ShuttingDown),
            Err((Refused::Full { waiting, limit }, work)) => {
                if let Work::Call(call) = work {
                    call.function.count(Outcome::Rejected);
                }
                Err(InvokeError::QueueFull { waiting, limit })
            }
        }
    }

    /// Hands up to `most` movable calls that have not started to node `to`, those that would
    /// start last while each would wait at least `min_wait` here (`Pending::release`): each
    /// caller is answered [`InvokeError::Moved`]. Returns how many moved.
    pub(crate) fn hand_over(&self, most: usize, min_wait: Duration, to: &Arc<str>) -> usize {
        let cores = self.shared.cores.count() as u32;
        let movable = |work: &Work| matches!(work, Work::Call(call) if call.movable);
        let calls = self
            .shared
            .cores
            .pending()
            .release(most, cores, min_wait, movable);
        let moved = calls.len();
        for work in calls {
            if let Work::Call(call) = work {
                let to = to.clone();
                let _ = call
                    .reply
                    .send(Reply::unstarted(Err(InvokeError::Moved { to })));
            }
        }
        moved
    }

    /// Cores calls may use.
    pub fn cores(&self) -> usize {
        self.shared.config.cores
    }

    /// The order in which waiting calls run.
    pub fn policy(&self) -> Policy {
        self.shared.config.policy
    }

    /// Executor threads (more than cores under `baseline` and under preemption).
    pub fn threads(&self) -> usize {
        self.shared.seats.len()
    }

    /// Whether calls run where they are read.
    pub fn runs_inline(&self) -> bool {
        self.shared.config.runs_inline()
    }

    /// How long a thread parked on a seat polls before it sleeps.
    pub(crate) fn spin(&self) -> Duration {
        self.shared.config.spin
    }

    /// The preemption calls run with, if any.
    pub fn preemption(&self) -> Option<PreemptConfig> {
        self.shared.runner.preemption()
    }

    /// Whether the threads that run guest code are confined.
    pub(crate) fn confines(&self) -> bool {
        self.shared.config.seccomp
    }

    /// Calls suspended now.
    pub fn suspended(&self) -> usize {
        self.shared.cores.suspended()
    }
}

impl Drop for Executors {
    fn drop(&mut self) {
        self.shared.cores.stop(&self.shared.seats);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.shared.cores.drain_stopped();
    }
}

impl Shared {
    /// Runs the executor on `seat` until the node stops: parked as a spare until it is handed
    /// a core, then the calls it is handed and those that wait, back to back.
    fn run_executor(&self, seat: &Arc<Seat>) {
        while let Some((on, first)) = self.cores.wait_as_spare(seat) {
            self.run_on(on, first, seat);
        }
    }

    /// Runs `first` (if any) and then what waits, on `on`, until nothing waits or the thread
    /// no longer holds a core; it is then a spare again.
    fn run_on(&self, on: OnCore, first: Option<Next<Work>>, seat: &Arc<Seat>) {
        let mut on = on;
        let mut next = first;
        loop {
            let Next { work, basis } = match next.take() {
                Some(work) => work,
                None => match self.cores.next_or_idle(on, seat) {
                    Some((core, work)) => {
                        on = core;
                        work
                    }
                    // It joined the spares as it let the core go.
                    None => return,
                },
            };
            match work {
                Work::Call(call) => match self.run(on, call, basis, seat) {
                    Some(core) => on = core,
                    None => break,
                },
                Work::Resume(resumption) => match self.cores.resume(resumption, on) {
                    // The suspended call's thread or task runs on this core now.
                    Ok(()) => break,
                    // Left behind by a call that stopped meanwhile: take the next one.
                    Err(core) => on = core,
                },
            }
        }
        self.cores.join_spares(seat);
    }

    /// Runs `call` on `on`; the core this thread holds afterwards, if any (none if the call's
    /// budget ran out while it was suspended).
    fn run(
        &self,
        on: OnCore,
        call: Call,
        basis: Option<mote_sched::RankBasis>,
        seat: &Arc<Seat>,
    ) -> Option<OnCore> {
        let Call {
            function,
            code,
            input,
            reply,
            arrival,
            counted,
            movable: _,
        } = call;
        // The core counts itself in the jobs' count from here.
        drop(counted);
        if reply.is_closed() {
            // The caller went away while the call waited; running it would only burn a core.
            function.count(Outcome::Cancelled);
            return Some(on);
        }
        let call = CallRef {
            function: &function,
            code: &code,
            input: &input,
            arrival,
        };
        let entry = Entry::Blocking { seat, on, basis };
        let ran = crate::run::block_on(self.runner.run(call, entry, |settled| {
            let _ = reply.send(settled);
        }));
        match ran {
            Ran::Answered(on) => on,
            Ran::Elsewhere => unreachable!("only a call on a reader runs elsewhere"),
        }
    }
}
