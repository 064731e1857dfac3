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
//! The controller may move partitions away or here while the worker runs (`mote_jobs::Handoffs`,
//! section 4.4), and may restore the whole job to a snapshot, which begins a new generation:
//! the worker rebuilds its state from the snapshot and drops whatever belongs to an earlier
//! generation (running tasks' results, pieces, acknowledgements). With snapshots on, the cursor
//! pauses every N iterations at a barrier: once every task before it is done and everything sent
//! is taken, the worker copies its partitions' images, goes on, and stores them meanwhile.
//!
//! Invariants: an instance is either in `Local::instances` or owned by the one executor running
//! a task on it (the graph never hands out two tasks of one instance at once); the worker is
//! finished when its cursor is done, no task is live and nothing it sent or stored is
//! outstanding.

use crate::input;
use crate::transport::{Outgoing, Transport};
use bytes::Bytes;
use mote_jobs::message::{
    Envelope, JobSpec, Piece, Progress, Report, Restore, Transfer, WorkerMessage,
};
use mote_jobs::{
    Cursor, Entry, Exchange, GroupId, Handoffs, Input, Next, PartitionKey, PieceItem, Program,
    Routed, StageKind, TaskGraph, TaskKind, TaskRef, TaskView, WorkerId,
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
    generation: u32,
    task: TaskRef,
    view: TaskView,
    inputs: Vec<Input>,
    instance: JobInstance,
    emit_to: u32,
    /// Time it ran, in ns.
    ns: u64,
}

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
    module: Arc<JobModule>,
    ctx: JobContext,
    local: Mutex<Local>,
    wake: Condvar,
    stopped: AtomicBool,
    running: AtomicBool,
    /// Ready tasks as of the last change under the lock, for executors that wait without it.
    ready: AtomicUsize,
    env: WorkerEnv,
    outbox: mpsc::UnboundedSender<Outgoing>,
    io: mpsc::UnboundedSender<IoRequest>,
    /// When it ran.
    started: Mutex<Instant>,
    /// Snapshots handed to the I/O task and not yet stored.
    storing: AtomicUsize,
}

struct Local {
    /// The generation this worker is in: a restore begins the next.
    generation: u32,
    /// Which workers take part, by [`WorkerId`].
    live: Vec<bool>,
    /// Their base URLs.
    urls: Vec<String>,
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
    /// Partitions leaving for other workers.
    handoffs: Handoffs,
    /// Instances made ready for partitions about to arrive.
    arriving: FxHashMap<PartitionKey, JobInstance>,
    /// Time in guest tasks per partition held, by group and index, in ns.
    partition_ns: Vec<Vec<u64>>,
    /// The iteration the cursor paused at, until the snapshot there is taken.
    barrier: Option<u64>,
    /// Messages of a later generation, which arrived before this worker's restore.
    later: Vec<Envelope>,
}

impl Local {
    /// The state of worker `spec.me` at the start of `generation`: nothing declared, sent or
    /// held back, the partitions of `map` in `instances`.
    #[allow(clippy::too_many_arguments)]
    fn new(
        spec: &JobSpec,
        generation: u32,
        cursor: Cursor,
        graph: TaskGraph,
        map: mote_jobs::PartitionMap,
        instances: Vec<Vec<Option<JobInstance>>>,
        partition_ns: Vec<Vec<u64>>,
    ) -> Self {
        Self {
            generation,
            live: spec.live.clone(),
            urls: spec.workers.clone(),
            cursor,
            graph,
            exchange: Exchange::new(spec.me, map),
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
            handoffs: Handoffs::default(),
            arriving: FxHashMap::default(),
            partition_ns,
            barrier: None,
            later: Vec::new(),
        }
    }
}

/// A zero for every partition of every group of `program`.
fn zeros(program: &Program) -> Vec<Vec<u64>> {
    program
        .groups
        .sizes()
        .iter()
        .map(|&size| vec![0; size as usize])
        .collect()
}

/// Object I/O the executors hand to the async side.
pub(crate) enum IoRequest {
    Load {
        generation: u32,
        arg: String,
        value: Option<String>,
        tasks: Vec<(TaskRef, u32)>,
        partitions: u32,
    },
    Store {
        generation: u32,
        value: Option<String>,
        arg: String,
        index: u32,
        bytes: Vec<u8>,
    },
    /// The images of the partitions this worker held at a barrier.
    Snapshot(Box<SnapshotImages>),
}

/// What a worker stores at a barrier.
pub(crate) struct SnapshotImages {
    pub progress: Progress,
    pub iteration: u64,
    pub cursor: Cursor,
    pub images: Vec<(PartitionKey, Vec<u8>)>,
    pub barrier: Instant,
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
        let partition_ns = zeros(&program);
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
        let mut cursor = Cursor::new();
        cursor.resume(spec.snapshots.as_ref().map(|s| s.every));
        let (outbox, outbox_rx) = mpsc::unbounded_channel();
        let (io, io_rx) = mpsc::unbounded_channel();
        let worker = Arc::new(Self {
            spec: spec.clone(),
            program,
            engine,
            module,
            ctx,
            local: Mutex::new(Local::new(
                &spec,
                spec.generation,
                cursor,
                graph,
                spec.map.clone(),
                instances,
                partition_ns,
            )),
            wake: Condvar::new(),
            stopped: AtomicBool::new(false),
            running: AtomicBool::new(false),
            ready: AtomicUsize::new(0),
            env: env.clone(),
            outbox,
            io,
            started: Mutex::new(Instant::now()),
            storing: AtomicUsize::new(0),
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
        *self.started.lock() = Instant::now();
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
    /// the worker is stopped or fails. A finished worker's executors wait: a restore may give
    /// them work again.
    fn execute(self: &Arc<Self>) {
        let mut awake = Instant::now();
        let mut batch: Vec<Taken> = Vec::with_capacity(BATCH);
        let mut done: Vec<(Taken, Result<TaskOutput, JobError>, Vec<Input>)> =
            Vec::with_capacity(BATCH);
        let threads = self.env.cores.max(1);
        let mut local = self.lock();
        loop {
            if self.stopped.load(Ordering::Relaxed) || local.failed.is_some() {
                self.wake.notify_all();
                return;
            }
            if local.finished {
                self.wake.wait_for(&mut local, Duration::from_millis(100));
                awake = Instant::now();
                continue;
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
                let quiet = local.graph.live() == 0 && local.outstanding == 0;
                if quiet && local.barrier.is_some() && !local.handoffs.pending() {
                    self.snapshot(&mut local);
                    awake = Instant::now();
                    continue;
                }
                if quiet && local.cursor.is_done() && !local.handoffs.pending() {
                    local.finished = true;
                    let report = Report::Done(self.progress_of(&local));
                    drop(local);
                    let _ = self.outbox.send(Outgoing::report(&self.spec, report));
                    self.wake.notify_all();
                    local = self.lock();
                    continue;
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
                let took = ran.elapsed().as_nanos() as u64;
                guest_ns += took;
                t.ns = took;
                let (result, inputs) = match result {
                    Ok((output, inputs)) => (Ok(output), inputs),
                    Err(e) => (Err(e), Vec::new()),
                };
                done.push((t, result, inputs));
            }
            local = self.lock();
            let mut failure = None;
            for (t, result, inputs) in done.drain(..) {
                // A restore while it ran: its partition and its result belong to the past.
                if t.generation != local.generation {
                    continue;
                }
                let Taken {
                    task,
                    view,
                    instance,
                    ns,
                    ..
                } = t;
                local.instances[view.group.0 as usize][view.index as usize] = Some(instance);
                match result {
                    Ok(output) if failure.is_none() => {
                        local.graph.return_inputs(task, inputs);
                        self.settle(&mut local, view, output);
                        local.graph.complete(task);
                        local.tasks += 1;
                        local.partition_ns[view.group.0 as usize][view.index as usize] += ns;
                    }
                    Ok(_) => {}
                    Err(e) => {
                        failure.get_or_insert_with(|| self.describe(view, e));
                    }
                }
            }
            if local.handoffs.pending() {
                self.depart(&mut local);
            }
            local.task_ns += guest_ns;
            let now = Instant::now();
            local.busy_ns += (now - awake).as_nanos() as u64;
            awake = now;
            self.ready.store(local.graph.ready(), Ordering::Relaxed);
            if let Some(error) = failure {
                local.failed = Some(error.clone());
                let progress = self.progress_of(&local);
                drop(local);
                self.send_failure(progress, error);
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
            generation: local.generation,
            task,
            view,
            inputs,
            instance,
            emit_to,
            ns: 0,
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

    /// Declares stages until the window is full, the program waits at a signal, or the cursor
    /// pauses at a barrier.
    fn declare(&self, local: &mut Local) {
        while local.graph.live() < WINDOW {
            let Local {
                cursor,
                graph,
                loads,
                signals,
                scatters_left,
                barrier,
                ..
            } = local;
            match cursor.next(&self.program) {
                Next::Stage { seq, stage } => {
                    let spawned = graph.declare(&self.program, seq, stage, loads);
                    if let StageKind::Scatter { .. } = self.program.stage(stage).kind
                        && spawned > 0
                    {
                        scatters_left.insert(seq, spawned);
                    }
                    self.request_loads(local, stage);
                }
                Next::Signal { seq, stage, signal } => {
                    signals.insert(seq, signal);
                    graph.declare(&self.program, seq, stage, loads);
                }
                Next::Barrier { iteration } => {
                    *barrier = Some(iteration);
                    return;
                }
                Next::Wait | Next::Done => return,
            }
        }
    }

    /// Asks the I/O task for the input of the load tasks just spawned, if any.
    fn request_loads(&self, local: &mut Local, stage: mote_jobs::StageId) {
        if local.loads.is_empty() {
            return;
        }
        let stage = self.program.stage(stage);
        let StageKind::Load { arg } = &stage.kind else {
            unreachable!("only load stages wait for input")
        };
        let graph = &local.graph;
        let tasks = local
            .loads
            .drain(..)
            .map(|t| (t, graph.view(t).index))
            .collect();
        let _ = self.io.send(IoRequest::Load {
            generation: local.generation,
            value: self.arg(arg),
            arg: arg.clone(),
            tasks,
            partitions: self.program.groups.size(self.program.group_of(stage)),
        });
    }

    /// At a barrier with every task before it done and everything sent taken: copies the
    /// images of the partitions that are exactly there (not those that arrived from a worker
    /// already past it), hands them to the I/O task to store, and goes on.
    fn snapshot(&self, local: &mut Local) {
        let Some(iteration) = local.barrier.take() else {
            return;
        };
        let at = local.cursor.seq();
        let mut images = Vec::new();
        for g in 0..self.program.groups.sizes().len() {
            let group = GroupId(g as u16);
            for n in 0..local.graph.held(group).len() {
                let index = local.graph.held(group)[n];
                let key = PartitionKey { group, index };
                if local.graph.from(key) > at {
                    continue;
                }
                let instance = local.instances[g][index as usize]
                    .as_mut()
                    .expect("no task runs at a barrier");
                images.push((key, instance.image()));
            }
        }
        let cursor = local.cursor.clone();
        let every = self.spec.snapshots.as_ref().map(|s| s.every);
        local
            .cursor
            .resume(every.map(|every| iteration + every.max(1)));
        self.storing.fetch_add(1, Ordering::SeqCst);
        let _ = self.io.send(IoRequest::Snapshot(Box::new(SnapshotImages {
            progress: self.progress_of(local),
            iteration,
            cursor,
            images,
            barrier: Instant::now(),
        })));
    }

    /// Sends away the leaving partitions whose tasks here are done.
    fn depart(&self, local: &mut Local) {
        let Local {
            handoffs,
            graph,
            exchange,
            ..
        } = local;
        for d in handoffs.departures(graph, exchange) {
            let image = local.instances[d.key.group.0 as usize][d.key.index as usize]
                .take()
                .map(|mut i| i.image())
                .unwrap_or_default();
            local.partition_ns[d.key.group.0 as usize][d.key.index as usize] = 0;
            let transfer = Transfer {
                key: d.key,
                from_worker: self.spec.me,
                version: d.version,
                from: d.from,
                early: d
                    .early
                    .into_iter()
                    .map(|(seq, pieces)| {
                        let pieces = pieces
                            .into_iter()
                            .map(|(source, data)| (source, data.map(|b| b.to_vec())))
                            .collect();
                        (seq, pieces)
                    })
                    .collect(),
                image,
            };
            tracing::info!(
                job = self.spec.id,
                group = d.key.group.0,
                index = d.key.index,
                to = d.to.0,
                "a partition leaves this worker"
            );
            self.send(local, d.to, WorkerMessage::Transfer(transfer));
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
                            .piece(view.seq, to, dest, view.index, data.map(Bytes::from));
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
                    for w in 0..local.urls.len() as u16 {
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
                for w in 0..local.urls.len() as u16 {
                    if WorkerId(w) != self.spec.me && local.live[w as usize] {
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
                    generation: local.generation,
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
        let url = local.urls[to.0 as usize].clone();
        let _ = self.outbox.send(Outgoing::Worker {
            to: url,
            peer: to,
            envelope: Envelope {
                generation: local.generation,
                message,
            },
        });
    }

    fn arg(&self, key: &str) -> Option<String> {
        mote_jobs::arg(&self.spec.args, key).map(str::to_owned)
    }

    /// Takes a message from another worker or the controller. One of an earlier generation is
    /// dropped; one of a later generation waits for this worker's restore. Instances for
    /// arriving partitions are made outside the lock.
    pub fn deliver(&self, envelope: Envelope) -> Result<(), String> {
        let prepared = match &envelope.message {
            WorkerMessage::Arrive { keys, .. } => keys
                .iter()
                .map(|&k| Ok((k, self.fresh_instance(k)?)))
                .collect::<Result<Vec<_>, String>>()?,
            _ => Vec::new(),
        };
        let mut local = self.lock();
        if envelope.generation < local.generation {
            return Ok(());
        }
        if envelope.generation > local.generation {
            local.later.push(envelope);
            return Ok(());
        }
        self.take_message(&mut local, envelope.message, prepared)?;
        self.ready.store(local.graph.ready(), Ordering::Relaxed);
        drop(local);
        self.wake.notify_all();
        Ok(())
    }

    fn fresh_instance(&self, key: PartitionKey) -> Result<JobInstance, String> {
        self.engine.instance(&self.module, &self.ctx).map_err(|e| {
            format!(
                "worker {} cannot create an instance for partition {} of group {}: {e}",
                self.spec.me.0, key.index, key.group.0
            )
        })
    }

    fn take_message(
        &self,
        local: &mut Local,
        message: WorkerMessage,
        prepared: Vec<(PartitionKey, JobInstance)>,
    ) -> Result<(), String> {
        match message {
            WorkerMessage::Pieces { seq, group, pieces } => {
                for p in pieces {
                    let key = PartitionKey {
                        group,
                        index: p.index,
                    };
                    let item = (seq, p.source, p.data.map(Bytes::from));
                    let routed = local.exchange.receive(key, p.version, item);
                    self.take(local, routed);
                }
            }
            WorkerMessage::MapUpdate { entries } => {
                for (key, entry) in entries {
                    for routed in local.exchange.update(key, entry) {
                        self.take(local, Some(routed));
                    }
                }
            }
            WorkerMessage::Signal { signal, value } => local.cursor.resolve(signal, value),
            WorkerMessage::Arrive { .. } => local.arriving.extend(prepared),
            WorkerMessage::Leave { entries } => {
                let next = local.cursor.seq();
                for (key, entry) in entries {
                    // A controller's view cannot be older than this worker's, but a partition
                    // not held here has nothing to send.
                    if local.exchange.route(key).worker != self.spec.me {
                        continue;
                    }
                    let Local {
                        handoffs, graph, ..
                    } = local;
                    handoffs.leave(graph, key, entry.worker, entry.version, next);
                }
                self.depart(local);
            }
            WorkerMessage::Transfer(transfer) => self.arrive(local, transfer)?,
            WorkerMessage::Restore(_) => {
                return Err("a restore goes to the job service, which loads the images".into());
            }
        }
        Ok(())
    }

    /// A partition arrives: its instance takes the image, its tasks from `from` on are spawned
    /// here, and the controller hears of it.
    fn arrive(&self, local: &mut Local, transfer: Transfer) -> Result<(), String> {
        let key = transfer.key;
        let mut instance = match local.arriving.remove(&key) {
            Some(instance) => instance,
            None => self.fresh_instance(key)?,
        };
        instance.load_image(&transfer.image).map_err(|e| {
            format!(
                "partition {} of group {} from worker {}: {e}",
                key.index, key.group.0, transfer.from_worker.0
            )
        })?;
        let early = transfer
            .early
            .into_iter()
            .map(|(seq, pieces)| {
                let pieces = pieces
                    .into_iter()
                    .map(|(source, data)| (source, data.map(Bytes::from)))
                    .collect();
                (seq, pieces)
            })
            .collect();
        local.instances[key.group.0 as usize][key.index as usize] = Some(instance);
        local.partition_ns[key.group.0 as usize][key.index as usize] = 0;
        let Local {
            graph,
            cursor,
            exchange,
            ..
        } = local;
        let arrival = mote_jobs::arrive(
            &self.program,
            graph,
            cursor,
            exchange,
            self.spec.me,
            key,
            transfer.version,
            transfer.from,
            early,
        );
        for seq in arrival.scatters {
            *local.scatters_left.entry(seq).or_default() += 1;
        }
        for (seq, signal) in arrival.signals {
            local.signals.insert(seq, signal);
        }
        if !arrival.loads.is_empty() {
            let stage = local.graph.view(arrival.loads[0]).stage;
            local.loads = arrival.loads;
            self.request_loads(local, stage);
        }
        for routed in arrival.forward {
            self.take(local, Some(routed));
        }
        let report = Report::Arrived {
            progress: self.progress_of(local),
            entries: vec![(
                key,
                Entry {
                    worker: self.spec.me,
                    version: transfer.version,
                },
            )],
            bytes: transfer.image.len() as u64,
        };
        let _ = self.outbox.send(Outgoing::report(&self.spec, report));
        tracing::info!(
            job = self.spec.id,
            group = key.group.0,
            index = key.index,
            from = transfer.from_worker.0,
            "a partition arrived at this worker"
        );
        Ok(())
    }

    /// Rolls back to a snapshot: the partitions `restore.map` gives this worker come from
    /// `images` (every one of them), the cursor from the snapshot, and everything else starts
    /// empty in the new generation.
    pub fn restore(
        &self,
        restore: Restore,
        images: Vec<(PartitionKey, Vec<u8>)>,
    ) -> Result<(), String> {
        let me = self.spec.me;
        let mut instances: Vec<Vec<Option<JobInstance>>> = self
            .program
            .groups
            .sizes()
            .iter()
            .map(|&size| (0..size).map(|_| None).collect())
            .collect();
        let partition_ns = zeros(&self.program);
        for (key, image) in images {
            let instance = self
                .engine
                .restore(&self.module, &self.ctx, &image)
                .map_err(|e| {
                    format!(
                        "worker {} cannot restore partition {} of group {}: {e}",
                        me.0, key.index, key.group.0
                    )
                })?;
            instances[key.group.0 as usize][key.index as usize] = Some(instance);
        }
        let graph = TaskGraph::new(&self.program, &restore.map, me);
        for (g, row) in instances.iter().enumerate() {
            for &index in graph.held(GroupId(g as u16)) {
                if row[index as usize].is_none() {
                    return Err(format!(
                        "the restore gives worker {} partition {index} of group {g} without its image",
                        me.0
                    ));
                }
            }
        }
        let mut cursor = restore.cursor;
        let every = self.spec.snapshots.as_ref().map(|s| s.every);
        cursor.resume(every.map(|every| restore.iteration + every.max(1)));
        let mut local = self.lock();
        if restore.generation <= local.generation {
            return Ok(());
        }
        let later = std::mem::take(&mut local.later);
        let mut fresh = Local::new(
            &self.spec,
            restore.generation,
            cursor,
            graph,
            restore.map,
            instances,
            partition_ns,
        );
        fresh.live = restore.live;
        fresh.urls = restore.workers;
        (fresh.tasks, fresh.task_ns, fresh.busy_ns) = (local.tasks, local.task_ns, local.busy_ns);
        *local = fresh;
        for envelope in later {
            if envelope.generation == local.generation {
                self.take_message(&mut local, envelope.message, Vec::new())?;
            } else if envelope.generation > local.generation {
                local.later.push(envelope);
            }
        }
        self.ready.store(local.graph.ready(), Ordering::Relaxed);
        drop(local);
        self.wake.notify_all();
        Ok(())
    }

    /// Uses a piece this worker holds the partition of, or sends it on to the holder.
    fn take(&self, local: &mut Local, routed: Option<Routed<PieceItem>>) {
        match routed {
            Some(Routed::Accept(key, (seq, source, data))) => {
                local.graph.piece(seq, key.group, key.index, source, data)
            }
            Some(Routed::Forward(key, entry, (seq, source, data))) => {
                let piece = Piece {
                    index: key.index,
                    source,
                    version: entry.version,
                    data: data.map(|b| b.to_vec()),
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

    /// Something this worker sent or stored in `generation` was taken.
    pub(crate) fn acknowledged(&self, generation: u32) {
        let mut local = self.lock();
        if generation != local.generation {
            return;
        }
        local.outstanding -= 1;
        drop(local);
        self.wake.notify_all();
    }

    /// A load's input arrived.
    pub(crate) fn input(&self, generation: u32, task: TaskRef, data: Bytes) {
        let mut local = self.lock();
        if generation != local.generation {
            return;
        }
        local.graph.input(task, data);
        self.ready.store(local.graph.ready(), Ordering::Relaxed);
        drop(local);
        self.wake.notify_all();
    }

    /// A message to `peer` could not be delivered: the controller decides whether it is gone.
    pub(crate) fn unreachable(&self, generation: u32, peer: WorkerId, error: String) {
        let local = self.lock();
        if generation != local.generation {
            return;
        }
        let progress = self.progress_of(&local);
        drop(local);
        let report = Report::Unreachable {
            progress,
            peer,
            error,
        };
        let _ = self.outbox.send(Outgoing::report(&self.spec, report));
    }

    /// The job cannot go on here: stop, and tell the controller why.
    pub(crate) fn fail(&self, error: String) {
        let mut local = self.lock();
        if local.failed.is_some() || local.finished {
            return;
        }
        local.failed = Some(error.clone());
        let progress = self.progress_of(&local);
        drop(local);
        self.wake.notify_all();
        self.send_failure(progress, error);
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

    /// Whether it stopped or failed.
    pub fn ended(&self) -> bool {
        let local = self.lock();
        self.stopped.load(Ordering::Relaxed) || local.failed.is_some()
    }

    /// How far it is.
    pub fn progress(&self) -> Progress {
        let local = self.lock();
        self.progress_of(&local)
    }

    fn progress_of(&self, local: &Local) -> Progress {
        let mut partitions = Vec::new();
        for (g, row) in local.partition_ns.iter().enumerate() {
            let group = GroupId(g as u16);
            for &index in local.graph.held(group) {
                partitions.push((PartitionKey { group, index }, row[index as usize] / 1000));
            }
        }
        Progress {
            worker: self.spec.me,
            generation: local.generation,
            tasks: local.tasks,
            iterations: local.cursor.iterations(),
            stages: local.cursor.seq(),
            task_us: local.task_ns / 1000,
            scheduling_us: local.busy_ns.saturating_sub(local.task_ns) / 1000,
            wall_us: self.started.lock().elapsed().as_micros() as u64,
            cores: self.env.cores.max(1) as u32,
            partitions,
        }
    }

    /// Whether snapshot images are being stored.
    pub fn storing(&self) -> bool {
        self.storing.load(Ordering::SeqCst) > 0
    }

    /// A snapshot was stored, or failed to be.
    pub(crate) fn stored(&self) {
        self.storing.fetch_sub(1, Ordering::SeqCst);
    }

    /// A report for the controller.
    pub(crate) fn report(&self, report: Report) {
        let _ = self.outbox.send(Outgoing::report(&self.spec, report));
    }

    fn send_failure(&self, progress: Progress, error: String) {
        let report = Report::Failed { progress, error };
        let _ = self.outbox.send(Outgoing::report(&self.spec, report));
    }
}
