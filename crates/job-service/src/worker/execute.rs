//! A worker's executor threads: each declares stages, takes a batch of ready tasks under the
//! lock, runs them without it, and settles what they produced (scatter pieces to their
//! partitions' holders, signals to every worker, stores to the I/O task); and the snapshot a
//! worker takes at a barrier and the partitions it sends away.

use super::{IoRequest, Local, SnapshotImages, Worker, WorkerError};
use bytes::Bytes;
use mote_jobs::message::{Piece, Report, Transfer, WorkerMessage};
use mote_jobs::{
    GroupId, Input, Next, PartitionKey, StageKind, TaskKind, TaskRef, TaskView, WorkerId,
};
use mote_node::Outcome;
use mote_runtime::{GuestLog, JobError, JobInstance, TaskCall, TaskOutput};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Live tasks a worker keeps declared ahead of the ones running: enough that every core finds
/// work while a stage's last tasks finish, few enough that the graph stays small.
const WINDOW: usize = 4096;

/// How many stage occurrences a worker declares past its oldest gather still waiting for
/// pieces from other workers.
const RUN_AHEAD: u64 = 64;

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
    /// What it produced, once it ran; its inputs are back in `inputs`. Kept here so that a
    /// task moves once into the batch and once out (measured: moves of tasks and results were
    /// a tenth of an empty task's cost).
    result: Option<Result<TaskOutput, WorkerError>>,
}

impl Worker {
    /// One executor thread: declare, take a batch of ready tasks, run them, settle them, until
    /// the worker is stopped or fails. A finished worker's executors wait: a restore may give
    /// them work again. `me` numbers the executor among the worker's.
    pub(super) fn execute(self: &Arc<Self>, me: usize) {
        let mut awake = Instant::now();
        let mut batch: Vec<Taken> = Vec::with_capacity(BATCH);
        let threads = self.threads.cores.max(1);
        self.bell.register(me);
        let mut local = self.lock();
        loop {
            if self.ended() {
                self.bell.ring_all();
                return;
            }
            if local.finished {
                local = self.sleep(me, local, Duration::from_millis(100));
                awake = Instant::now();
                continue;
            }
            self.declare(&mut local);
            self.show_cursor(&local);
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
                let busy = awake.elapsed().as_nanos() as u64;
                self.tally.busy_ns.fetch_add(busy, Ordering::Relaxed);
                let quiet = local.graph.live() == 0 && local.outstanding == 0;
                if quiet && local.barrier.is_some() && !local.handoffs.pending() {
                    self.snapshot(&mut local);
                    awake = Instant::now();
                    continue;
                }
                if quiet && local.cursor.is_done() && !local.handoffs.pending() {
                    local.finished = true;
                    let report = Report::Done(self.progress());
                    drop(local);
                    self.outbox.to_controller(&self.spec, report);
                    self.bell.ring_all();
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
                local = self.sleep(me, local, Duration::from_millis(100));
                awake = Instant::now();
                continue;
            }
            self.ready.store(local.graph.ready(), Ordering::Relaxed);
            if local.graph.ready() > 0 {
                self.bell.ring_one();
            }
            self.tally.batch_began(me);
            drop(local);
            let mut guest_ns = 0;
            // The batch keeps the engine's ticker going and holds a core of the node's: taken
            // once, not per task.
            let running = self.engine.running(self.ctx.limits.timeout());
            // One clock read a task: a task begins when the one before it ended (a read is
            // some 30 ns here, and three a task were a tenth of an empty task's cost).
            let mut mark = Instant::now();
            for t in &mut batch {
                let inputs = std::mem::take(&mut t.inputs);
                let call = TaskCall {
                    func: t.view.func,
                    index: t.view.index,
                    stage: self.program.stage(t.view.stage),
                    inputs,
                    emit_to: t.emit_to,
                    started: mark,
                };
                let result = t.instance.run(&running, call);
                let ended = Instant::now();
                t.ns = (ended - mark).as_nanos() as u64;
                guest_ns += t.ns;
                mark = ended;
                let result = match result {
                    Ok((output, inputs)) => {
                        t.inputs = inputs;
                        Ok(output)
                    }
                    Err(e) => Err(self.describe(t.view, e)),
                };
                let log = t.instance.take_log();
                // A task the stop interrupted did not fail: the job ended.
                let interrupted = result.is_err() && self.stopped.load(Ordering::Relaxed);
                if !interrupted && (!log.is_empty() || result.is_err()) {
                    self.keep_log(t.view, result.as_ref().err(), log);
                }
                t.result = Some(result);
            }
            drop(running);
            local = self.lock();
            let mut failure = None;
            let mut finished = 0;
            for t in batch.drain(..) {
                // A restore while it ran: its partition and its result belong to the past.
                if t.generation != local.generation {
                    continue;
                }
                let Taken {
                    task,
                    view,
                    instance,
                    ns,
                    inputs,
                    result,
                    ..
                } = t;
                local.instances[view.group.0 as usize][view.index as usize] = Some(instance);
                match result.expect("every task of the batch ran") {
                    Ok(output) if failure.is_none() => {
                        local.graph.return_inputs(task, inputs);
                        self.settle(&mut local, view, output);
                        local.graph.complete(task);
                        finished += 1;
                        let key = PartitionKey {
                            group: view.group,
                            index: view.index,
                        };
                        self.tally.ran(key, ns);
                    }
                    Ok(_) => {}
                    Err(e) => {
                        failure.get_or_insert(e);
                    }
                }
            }
            if local.handoffs.pending() {
                self.depart(&mut local);
            }
            self.tally.batch_ended(me, guest_ns, finished);
            let now = Instant::now();
            let busy = (now - awake).as_nanos() as u64;
            self.tally.busy_ns.fetch_add(busy, Ordering::Relaxed);
            awake = now;
            self.ready.store(local.graph.ready(), Ordering::Relaxed);
            if let Some(error) = failure {
                drop(local);
                if !self.stopped.load(Ordering::Relaxed) {
                    self.fail(error);
                }
                self.bell.ring_all();
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
            result: None,
        }
    }

    /// Keeps what a task logged, and why it failed if it did, in the job function's log.
    fn keep_log(&self, view: TaskView, failed: Option<&WorkerError>, log: GuestLog) {
        let Some(ring) = &self.log else {
            return;
        };
        let kind = match view.kind {
            TaskKind::Gather => "gather",
            _ => self.program.stage(view.stage).kind.name(),
        };
        let task = format!(
            "job {}, {kind} stage {}, partition {}",
            self.spec.id, view.stage.0, view.index
        );
        let outcome = match failed {
            None => Outcome::Ok,
            Some(WorkerError::Task {
                source: JobError::Timeout { .. },
                ..
            }) => Outcome::Timeout,
            Some(WorkerError::Task {
                source: JobError::MemoryLimit { .. },
                ..
            }) => Outcome::MemoryLimit,
            Some(_) => Outcome::Trap,
        };
        ring.record_task(task.into(), outcome, failed.map(ToString::to_string), log);
    }

    /// A failed task's error, naming its stage, function, partition and datasets.
    fn describe(&self, view: TaskView, source: JobError) -> WorkerError {
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
        WorkerError::Task {
            kind,
            stage: view.stage.0,
            function: view.func,
            index: view.index,
            datasets: datasets.join(", "),
            source,
        }
    }

    /// Declares stages until the window is full, the program waits at a signal, or the cursor
    /// pauses at a barrier.
    fn declare(&self, local: &mut Local) {
        while local.graph.live() < WINDOW {
            // A loop without a signal would otherwise let this worker's scatters run ahead of
            // gathers that wait for the others, holding their pieces without bound.
            if let Some(oldest) = local.graph.oldest_waiting_gather()
                && local.cursor.seq() >= oldest + RUN_AHEAD
            {
                return;
            }
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
    pub(super) fn request_loads(&self, local: &mut Local, stage: mote_jobs::StageId) {
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
            progress: self.progress(),
            iteration,
            cursor,
            images,
            barrier: Instant::now(),
        })));
    }

    /// Sends away the leaving partitions whose tasks here are done.
    pub(super) fn depart(&self, local: &mut Local) {
        let Local {
            handoffs,
            graph,
            exchange,
            ..
        } = local;
        let departures = handoffs.departures(graph, exchange);
        if departures.is_empty() {
            return;
        }
        for d in departures {
            let image = local.instances[d.key.group.0 as usize][d.key.index as usize]
                .take()
                .map(|mut i| i.image())
                .unwrap_or_default();
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
        self.tally.hold(&local.graph, false);
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
                self.storing.fetch_add(1, Ordering::SeqCst);
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
}
