//! A job's worker on this node (section 4): its copy of the program, the instances holding its
//! partitions, and the executor threads that spawn and run their tasks.
//!
//! Every decision is taken under one mutex over [`Local`]: the cursor (where this worker is in
//! the program), the task graph, the partition map's copy and the instances not running. An
//! executor thread takes the lock, declares stages until enough tasks are live, pops up to
//! [`BATCH`] ready tasks and takes their instances out, releases the lock while the guest runs
//! them, and takes it again to settle them. Nothing is said to the controller per task: scatter
//! pieces (one message per stage and worker) and signals go straight to the workers that need
//! them, through the outbox that the node's async runtime drains; loads and stores go to the
//! object I/O task. So what a task adds to the guest's time is a share of one lock round trip
//! and the graph's bookkeeping (`mote bench jobs` measures it: about 250 ns on one core).
//!
//! Invariants: an instance is either in `Local::instances` or owned by the one executor running
//! a task on it (the graph never hands out two tasks of one instance at once); the worker is
//! finished when its cursor is done, no task is live and nothing it sent or stored is
//! outstanding.

use crate::input;
use crate::transport::{Outgoing, Transport};
use bytes::Bytes;
use mote_jobs::message::{JobSpec, Piece, Progress, Report, WorkerMessage};
use mote_jobs::{
    Cursor, Exchange, GroupId, Input, Next, PartitionKey, Program, Routed, StageKind, TaskGraph,
    TaskKind, TaskRef, TaskView, WorkerId,
};
use mote_objects::Objects;
use mote_runtime::{JobContext, JobEngine, JobError, JobInstance, JobModule, TaskOutput};
use parking_lot::{Condvar, Mutex, MutexGuard};
use rustc_hash::FxHashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Live tasks a worker keeps declared ahead of the ones running: enough that every core finds
/// work while a stage's last tasks finish, few enough that the graph stays small.
const WINDOW: usize = 4096;

/// How long an executor with nothing ready waits for the others' tasks before it sleeps.
const SPIN: Duration = Duration::from_micros(50);

/// The most tasks an executor takes per lock acquisition.
const BATCH: usize = 8;

/// A task taken out of the shared state to run: its instance travels with it.
struct Taken {
    task: TaskRef,
    view: TaskView,
    inputs: Vec<Input>,
    instance: JobInstance,
    emit_to: u32,
}

/// Data in flight between workers, as the exchange holds it.
type PieceItem = (u64, u32, Option<Vec<u8>>);

/// What a worker runs: its copy of the program, the compiled module and the instances' context.
pub struct JobCode {
    /// The program its driver declared.
    pub program: Arc<Program>,
    /// The module, compiled for the job engine.
    pub module: Arc<JobModule>,
    /// The arguments, partition count and limits every instance shares.
    pub ctx: JobContext,
}

/// What a node gives its workers: the engine, its cores, the transport to other nodes, object
/// storage and the executor threads' confinement.
#[derive(Clone)]
pub struct WorkerEnv {
    /// The job engine.
    pub engine: Arc<JobEngine>,
    /// Executor threads per worker.
    pub cores: usize,
    /// How to reach other workers and the controller.
    pub transport: Arc<dyn Transport>,
    /// Where loads read and stores write.
    pub objects: Option<Arc<Objects>>,
    /// The seccomp allow-list for executor threads, when confined.
    pub confine: Option<Arc<mote_node::confine::ExecutorFilter>>,
}

/// A job's worker on this node.
pub struct Worker {
    spec: JobSpec,
    program: Arc<Program>,
    engine: Arc<JobEngine>,
    local: Mutex<Local>,
    wake: Condvar,
    stopped: AtomicBool,
    running: AtomicBool,
    /// Ready tasks as of the last change under the lock, for executors that wait without it.
    ready: AtomicUsize,
    env: WorkerEnv,
    outbox: mpsc::UnboundedSender<Outgoing>,
    io: mpsc::UnboundedSender<IoRequest>,
    started: Instant,
}

struct Local {
    cursor: Cursor,
    graph: TaskGraph,
    exchange: Exchange<PieceItem>,
    /// By group, then index: the instances of the partitions held, when no task runs on them.
    instances: Vec<Vec<Option<JobInstance>>>,
    /// Signal stages declared, by sequence number: their signal's number.
    signals: FxHashMap<u64, u64>,
    /// Scatter stages declared, by sequence number: their tasks here still to finish.
    scatters_left: FxHashMap<u64, u32>,
    /// Pieces for other workers, by scatter stage and worker, until the stage's tasks here
    /// are all done.
    outgoing: FxHashMap<(u64, WorkerId), Vec<Piece>>,
    /// Pieces, stores and broadcasts sent and not yet acknowledged.
    outstanding: usize,
    loads: Vec<TaskRef>,
    tasks: u64,
    /// Time executors spent inside guest tasks.
    task_ns: u64,
    /// Time executors spent awake: in guest tasks, declaring, spawning, settling and waiting
    /// for the lock; not waiting for work.
    busy_ns: u64,
    failed: Option<String>,
    finished: bool,
}

/// Object I/O the executors hand to the async side.
pub(crate) enum IoRequest {
    Load {
        arg: String,
        value: Option<String>,
        tasks: Vec<(TaskRef, u32)>,
        partitions: u32,
    },
    Store {
        value: Option<String>,
        arg: String,
        index: u32,
        bytes: Vec<u8>,
    },
}

impl Worker {
    /// Instantiates the partitions `spec` gives this worker and starts its I/O tasks (on the
    /// current Tokio runtime); it takes messages from now on, and runs tasks after
    /// [`Worker::run`].
    pub fn prepare(spec: JobSpec, code: JobCode, env: &WorkerEnv) -> Result<Arc<Self>, String> {
        let JobCode {
            program,
            module,
            ctx,
        } = code;
        let engine = env.engine.clone();
        let me = spec.me;
        let graph = TaskGraph::new(&program, &spec.map, me);
        let mut instances = Vec::with_capacity(program.groups.sizes().len());
        for (g, &size) in program.groups.sizes().iter().enumerate() {
            let mut row: Vec<Option<JobInstance>> = (0..size).map(|_| None).collect();
            for &index in graph.held(GroupId(g as u16)) {
                let instance = engine.instance(&module, &ctx).map_err(|e| {
                    format!("worker {} cannot create the instance of partition {index} of group {g}: {e}", me.0)
                })?;
                row[index as usize] = Some(instance);
            }
            instances.push(row);
        }
        let (outbox, outbox_rx) = mpsc::unbounded_channel();
        let (io, io_rx) = mpsc::unbounded_channel();
        let worker = Arc::new(Self {
            spec: spec.clone(),
            program,
            engine,
            local: Mutex::new(Local {
                cursor: Cursor::new(),
                graph,
                exchange: Exchange::new(me, spec.map.clone()),
                instances,
                signals: FxHashMap::default(),
                scatters_left: FxHashMap::default(),
                outgoing: FxHashMap::default(),
                outstanding: 0,
                loads: Vec::new(),
                tasks: 0,
                task_ns: 0,
                busy_ns: 0,
                failed: None,
                finished: false,
            }),
            wake: Condvar::new(),
            stopped: AtomicBool::new(false),
            running: AtomicBool::new(false),
            ready: AtomicUsize::new(0),
            env: env.clone(),
            outbox,
            io,
            started: Instant::now(),
        });
        crate::transport::drain_outbox(Arc::downgrade(&worker), outbox_rx, env.transport.clone());
        input::serve_io(Arc::downgrade(&worker), io_rx, env.objects.clone());
        Ok(worker)
    }

    /// Starts the executor threads, once every worker of the job is prepared: a worker that
    /// ran before the others were would send them pieces they could not take yet.
    pub fn run(self: &Arc<Self>) -> Result<(), String> {
        if self.running.swap(true, Ordering::SeqCst) {
            return Ok(());
        }
        crate::transport::report_progress(Arc::downgrade(self), self.env.transport.clone());
        for n in 0..self.env.cores.max(1) {
            let w = self.clone();
            let confine = self.env.confine.clone();
            std::thread::Builder::new()
                .name(format!("mote-job-{n}"))
                .spawn(move || {
                    if let Some(filter) = confine
                        && let Err(e) = filter.confine_this_thread()
                    {
                        w.fail(format!("cannot confine the job's executor thread: {e}"));
                        return;
                    }
                    w.execute();
                })
                .map_err(|e| format!("cannot start the job's executor threads: {e}"))?;
        }
        Ok(())
    }

    /// The job's spec as the controller sent it.
    pub fn spec(&self) -> &JobSpec {
        &self.spec
    }

    fn lock(&self) -> MutexGuard<'_, Local> {
        self.local.lock()
    }

    /// One executor thread: declare, take a batch of ready tasks, run them, settle them, until
    /// the worker is finished or stopped.
    fn execute(self: &Arc<Self>) {
        let mut awake = Instant::now();
        let mut batch: Vec<Taken> = Vec::with_capacity(BATCH);
        let mut done: Vec<(Taken, Result<TaskOutput, JobError>, Vec<Input>)> =
            Vec::with_capacity(BATCH);
        let threads = self.env.cores.max(1);
        let mut local = self.lock();
        loop {
            if self.stopped.load(Ordering::Relaxed) || local.failed.is_some() || local.finished {
                self.wake.notify_all();
                return;
            }
            self.declare(&mut local);
            // Several tasks a lock, so that executors of short tasks do not queue for it. Taking
            // a share of the ready tasks instead (ready / executors) left each executor smaller
            // batches and more lock round trips: measured slower on 2 cores (busy, 2 µs tasks:
            // 590k against 738k tasks/s); taking 32 starved the second executor.
            let take = local.graph.ready().clamp(1, BATCH);
            while batch.len() < take {
                let Some(task) = local.graph.pop() else {
                    break;
                };
                batch.push(self.take_task(&mut local, task));
            }
            if batch.is_empty() {
                local.busy_ns += awake.elapsed().as_nanos() as u64;
                if local.cursor.is_done() && local.graph.live() == 0 && local.outstanding == 0 {
                    local.finished = true;
                    drop(local);
                    self.send_report(true);
                    self.wake.notify_all();
                    return;
                }
                // Tasks running on the other executors will release more soon: wait for them
                // a little without the lock or a sleep, since waking a sleeping thread costs
                // more than a short task.
                if local.graph.live() > 0 && threads > 1 {
                    drop(local);
                    let until = Instant::now() + SPIN;
                    while self.ready.load(Ordering::Relaxed) == 0
                        && !self.stopped.load(Ordering::Relaxed)
                        && Instant::now() < until
                    {
                        std::hint::spin_loop();
                    }
                    local = self.lock();
                    if local.graph.ready() > 0 {
                        awake = Instant::now();
                        continue;
                    }
                }
                self.wake.wait_for(&mut local, Duration::from_millis(100));
                awake = Instant::now();
                continue;
            }
            self.ready.store(local.graph.ready(), Ordering::Relaxed);
            if local.graph.ready() > 0 {
                self.wake.notify_one();
            }
            drop(local);
            let mut guest_ns = 0;
            for mut t in batch.drain(..) {
                let inputs = std::mem::take(&mut t.inputs);
                let ran = Instant::now();
                let result =
                    t.instance
                        .run(&self.engine, t.view.func, t.view.index, inputs, t.emit_to);
                guest_ns += ran.elapsed().as_nanos() as u64;
                let (result, inputs) = match result {
                    Ok((output, inputs)) => (Ok(output), inputs),
                    Err(e) => (Err(e), Vec::new()),
                };
                done.push((t, result, inputs));
            }
            local = self.lock();
            let mut failure = None;
            for (t, result, inputs) in done.drain(..) {
                let Taken {
                    task,
                    view,
                    instance,
                    ..
                } = t;
                local.instances[view.group.0 as usize][view.index as usize] = Some(instance);
                match result {
                    Ok(output) if failure.is_none() => {
                        local.graph.return_inputs(task, inputs);
                        self.settle(&mut local, view, output);
                        local.graph.complete(task);
                        local.tasks += 1;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        failure.get_or_insert_with(|| self.describe(view, e));
                    }
                }
            }
            local.task_ns += guest_ns;
            let now = Instant::now();
            local.busy_ns += (now - awake).as_nanos() as u64;
            awake = now;
            self.ready.store(local.graph.ready(), Ordering::Relaxed);
            if let Some(error) = failure {
                local.failed = Some(error.clone());
                drop(local);
                self.send_failure(error);
                self.wake.notify_all();
                return;
            }
        }
    }

    /// Takes a popped task's instance and inputs out of the shared state.
    fn take_task(&self, local: &mut Local, task: TaskRef) -> Taken {
        let view = local.graph.view(task);
        let inputs = local.graph.take_inputs(task);
        let instance = local.instances[view.group.0 as usize][view.index as usize]
            .take()
            .expect("the graph runs one task per instance at a time");
        let emit_to = match view.kind {
            TaskKind::Scatter => {
                let stage = self.program.stage(view.stage);
                self.program
                    .groups
                    .size(self.program.gather_group_of(stage))
            }
            TaskKind::Store => 1,
            _ => 0,
        };
        Taken {
            task,
            view,
            inputs,
            instance,
            emit_to,
        }
    }

    /// A failed task's error, naming its stage, function, partition and datasets.
    fn describe(&self, view: TaskView, e: JobError) -> String {
        let stage = self.program.stage(view.stage);
        let datasets: Vec<&str> = stage
            .reads
            .iter()
            .chain(&stage.writes)
            .map(|d| self.program.dataset_name(*d))
            .collect();
        let kind = match view.kind {
            TaskKind::Gather => "gather",
            _ => stage.kind.name(),
        };
        format!(
            "{kind} stage {} (function {}) on partition {} of [{}] failed: {e}",
            view.stage.0,
            view.func,
            view.index,
            datasets.join(", ")
        )
    }

    /// Declares stages until the window is full or the program waits at a signal.
    fn declare(&self, local: &mut Local) {
        while local.graph.live() < WINDOW {
            let Local {
                cursor,
                graph,
                loads,
                signals,
                scatters_left,
                ..
            } = local;
            match cursor.next(&self.program) {
                Next::Stage { seq, stage } => {
                    graph.declare(&self.program, seq, stage, loads);
                    let stage = self.program.stage(stage);
                    if let StageKind::Scatter { .. } = stage.kind {
                        let tasks = graph.held(self.program.group_of(stage)).len() as u32;
                        if tasks > 0 {
                            scatters_left.insert(seq, tasks);
                        }
                    }
                    if !loads.is_empty() {
                        let StageKind::Load { arg } = &stage.kind else {
                            unreachable!("only load stages wait for input")
                        };
                        let tasks = loads.drain(..).map(|t| (t, graph.view(t).index)).collect();
                        let _ = self.io.send(IoRequest::Load {
                            value: self.arg(arg),
                            arg: arg.clone(),
                            tasks,
                            partitions: self.program.groups.size(self.program.group_of(stage)),
                        });
                    }
                }
                Next::Signal { seq, stage, signal } => {
                    signals.insert(seq, signal);
                    graph.declare(&self.program, seq, stage, loads);
                }
                Next::Wait | Next::Done => return,
            }
        }
    }

    /// A task's outputs go where they belong.
    fn settle(&self, local: &mut Local, view: TaskView, output: TaskOutput) {
        match view.kind {
            TaskKind::Scatter => {
                let stage = self.program.stage(view.stage);
                let to = self.program.gather_group_of(stage);
                let mut emitted = output.emitted;
                emitted.sort_unstable_by_key(|(dest, _)| *dest);
                let mut emitted = emitted.into_iter().peekable();
                for dest in 0..self.program.groups.size(to) {
                    let data = match emitted.peek() {
                        Some((d, _)) if *d == dest => emitted.next().map(|(_, b)| b),
                        _ => None,
                    };
                    let key = PartitionKey {
                        group: to,
                        index: dest,
                    };
                    let entry = local.exchange.route(key);
                    if entry.worker == self.spec.me {
                        local
                            .graph
                            .piece(view.seq, dest, view.index, data.map(Bytes::from));
                    } else {
                        local
                            .outgoing
                            .entry((view.seq, entry.worker))
                            .or_default()
                            .push(Piece {
                                index: dest,
                                source: view.index,
                                version: entry.version,
                                data,
                            });
                    }
                }
                // One message per stage and worker, sent when this worker's last scatter task
                // of the stage is done: a message per task would cost a request per partition.
                let left = local
                    .scatters_left
                    .get_mut(&view.seq)
                    .expect("scatter stages are counted when declared");
                *left -= 1;
                if *left == 0 {
                    local.scatters_left.remove(&view.seq);
                    for w in 0..self.spec.workers.len() as u16 {
                        if let Some(pieces) = local.outgoing.remove(&(view.seq, WorkerId(w))) {
                            let message = WorkerMessage::Pieces {
                                seq: view.seq,
                                group: to,
                                pieces,
                            };
                            self.send(local, WorkerId(w), message);
                        }
                    }
                }
            }
            TaskKind::Signal => {
                let value = output.value != 0;
                let signal = local
                    .signals
                    .remove(&view.seq)
                    .expect("signal stages are recorded when declared");
                local.cursor.resolve(signal, value);
                for w in 0..self.spec.workers.len() as u16 {
                    if WorkerId(w) != self.spec.me {
                        self.send(local, WorkerId(w), WorkerMessage::Signal { signal, value });
                    }
                }
            }
            TaskKind::Store => {
                let StageKind::Store { arg } = &self.program.stage(view.stage).kind else {
                    unreachable!("store tasks belong to store stages")
                };
                let bytes = output
                    .emitted
                    .into_iter()
                    .flat_map(|(_, b)| b)
                    .collect::<Vec<u8>>();
                local.outstanding += 1;
                let _ = self.io.send(IoRequest::Store {
                    value: self.arg(arg),
                    arg: arg.clone(),
                    index: view.index,
                    bytes,
                });
            }
            TaskKind::Compute | TaskKind::Gather | TaskKind::Load => {}
        }
    }

    fn send(&self, local: &mut Local, to: WorkerId, message: WorkerMessage) {
        local.outstanding += 1;
        let url = self.spec.workers[to.0 as usize].clone();
        let _ = self.outbox.send(Outgoing::Worker { to: url, message });
    }

    fn arg(&self, key: &str) -> Option<String> {
        mote_jobs::arg(&self.spec.args, key).map(str::to_owned)
    }

    /// Takes a message from another worker.
    pub fn deliver(&self, message: WorkerMessage) {
        let mut local = self.lock();
        match message {
            WorkerMessage::Pieces { seq, group, pieces } => {
                for p in pieces {
                    let key = PartitionKey {
                        group,
                        index: p.index,
                    };
                    let routed = local
                        .exchange
                        .receive(key, p.version, (seq, p.source, p.data));
                    self.take(&mut local, routed);
                }
            }
            WorkerMessage::MapUpdate { entries } => {
                for (key, entry) in entries {
                    for routed in local.exchange.update(key, entry) {
                        self.take(&mut local, Some(routed));
                    }
                }
            }
            WorkerMessage::Signal { signal, value } => local.cursor.resolve(signal, value),
        }
        self.ready.store(local.graph.ready(), Ordering::Relaxed);
        drop(local);
        self.wake.notify_all();
    }

    /// Uses a piece this worker holds the partition of, or sends it on to the holder.
    fn take(&self, local: &mut Local, routed: Option<Routed<PieceItem>>) {
        match routed {
            Some(Routed::Accept(key, (seq, source, data))) => {
                local
                    .graph
                    .piece(seq, key.index, source, data.map(Bytes::from))
            }
            Some(Routed::Forward(key, entry, (seq, source, data))) => {
                let piece = Piece {
                    index: key.index,
                    source,
                    version: entry.version,
                    data,
                };
                self.send(
                    local,
                    entry.worker,
                    WorkerMessage::Pieces {
                        seq,
                        group: key.group,
                        pieces: vec![piece],
                    },
                );
            }
            None => {}
        }
    }

    /// Something this worker sent or stored was taken.
    pub(crate) fn acknowledged(&self) {
        let mut local = self.lock();
        local.outstanding -= 1;
        drop(local);
        self.wake.notify_all();
    }

    /// A load's input arrived.
    pub(crate) fn input(&self, task: TaskRef, data: Bytes) {
        let mut local = self.lock();
        local.graph.input(task, data);
        self.ready.store(local.graph.ready(), Ordering::Relaxed);
        drop(local);
        self.wake.notify_all();
    }

    /// The job cannot go on here: stop, and tell the controller why.
    pub(crate) fn fail(&self, error: String) {
        let mut local = self.lock();
        if local.failed.is_some() || local.finished {
            return;
        }
        local.failed = Some(error.clone());
        drop(local);
        self.wake.notify_all();
        self.send_failure(error);
    }

    /// Stops the executors; the instances are dropped with the worker.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.wake.notify_all();
    }

    /// Whether it was stopped (the job ended, or its controller is gone).
    pub fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    /// Whether it stopped, failed or finished.
    pub fn ended(&self) -> bool {
        let local = self.lock();
        self.stopped.load(Ordering::Relaxed) || local.failed.is_some() || local.finished
    }

    /// How far it is.
    pub fn progress(&self) -> Progress {
        let local = self.lock();
        Progress {
            worker: self.spec.me,
            tasks: local.tasks,
            iterations: local.cursor.iterations(),
            stages: local.cursor.seq(),
            task_us: local.task_ns / 1000,
            scheduling_us: local.busy_ns.saturating_sub(local.task_ns) / 1000,
        }
    }

    /// Time since it started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    fn send_report(&self, done: bool) {
        let report = match done {
            true => Report::Done(self.progress()),
            false => Report::Progress(self.progress()),
        };
        let _ = self.outbox.send(Outgoing::report(&self.spec, report));
    }

    fn send_failure(&self, error: String) {
        let report = Report::Failed {
            progress: self.progress(),
            error,
        };
        let _ = self.outbox.send(Outgoing::report(&self.spec, report));
    }
}
