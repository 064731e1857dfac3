//! A job's worker on this node (section 4): its copy of the program, the instances holding its
//! partitions, and the executor threads that spawn and run their tasks.
//!
//! Every decision is taken under one mutex over [`Local`]: the cursor (where this worker is in
//! the program), the task graph, the partition map's copy and the instances not running. Only
//! the executors wait for it: the node's threads post what they bring (`inbox`) and read how
//! far the worker is from atomics (`tally`), so that an executor starved while it holds the
//! lock cannot stall the node. An executor thread takes the lock, declares stages until enough tasks are live, pops up to
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
//!
//! This module holds the worker's state and what every part of it uses; `start` prepares and
//! runs it, `execute` is the executor threads, `messages` what it is told, `inbox` how it is
//! told and how its executors sleep, `tally` its counts, `io` its object I/O task, and `error`
//! what it fails with. It hands what it sends to an `Outbox`, which `start`
//! makes over the node's transport, so that the worker itself knows nothing of the network.

mod error;
mod execute;
mod inbox;
mod io;
mod messages;
mod start;
mod tally;
#[cfg(test)]
mod tests;

pub use error::WorkerError;

use crate::threads::JobThreads;
use bytes::Bytes;
use crossbeam_queue::SegQueue;
use inbox::{Doorbell, Inbound};
use mote_jobs::message::{Envelope, JobSpec, Piece, Progress, Report, WorkerMessage};
use mote_jobs::{
    Cursor, Exchange, Handoffs, PartitionKey, PieceItem, Program, TaskGraph, TaskRef, WorkerId,
};
use mote_node::LogRing;
use mote_runtime::{JobContext, JobEngine, JobInstance, JobModule};
use parking_lot::Mutex;
use rustc_hash::FxHashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;
use tally::Tally;
use tokio::sync::mpsc;

/// What a worker runs: its copy of the program, the compiled module and the instances' context.
pub struct JobCode {
    /// The program its driver declared.
    pub program: Arc<Program>,
    /// The module, compiled for the job engine.
    pub module: Arc<JobModule>,
    /// The arguments, partition count and limits every instance shares.
    pub ctx: JobContext,
    /// The job function's log on this node, where its tasks' lines and failures go.
    pub log: Option<Arc<LogRing>>,
}

/// Where a worker's messages go: to the other workers and to the job's controller. The worker
/// only hands them over; the node's outbox (`start`) sends them, so that no executor thread
/// waits for the network.
trait Outbox: Send + Sync {
    /// `envelope`, for worker `peer` at `to`; acknowledged to the worker when taken.
    fn to_worker(&self, to: String, peer: WorkerId, envelope: Envelope);
    /// `report`, for the controller of `spec`'s job.
    fn to_controller(&self, spec: &JobSpec, report: Report);
    /// Tells the controller how far `worker` is, from now until it ends.
    fn report_progress(&self, worker: Weak<Worker>);
}

/// A job's worker on this node.
pub struct Worker {
    spec: JobSpec,
    program: Arc<Program>,
    engine: Arc<JobEngine>,
    module: Arc<JobModule>,
    ctx: JobContext,
    log: Option<Arc<LogRing>>,
    local: Mutex<Local>,
    /// What the node's threads brought while the lock was held.
    inbox: SegQueue<Inbound>,
    bell: Doorbell,
    /// How far it is, for reports.
    tally: Tally,
    stopped: AtomicBool,
    /// Whether it failed; the error went to the controller.
    failed: AtomicBool,
    running: AtomicBool,
    /// Ready tasks as of the last change under the lock, for executors that wait without it.
    ready: AtomicUsize,
    /// How the executor threads run.
    threads: JobThreads,
    outbox: Box<dyn Outbox>,
    io: mpsc::UnboundedSender<IoRequest>,
    /// Snapshots and output partitions handed to the I/O task and not yet written: a stopping
    /// worker waits for them, so that the controller's clean-up after it finds them all.
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
    finished: bool,
    /// Partitions leaving for other workers.
    handoffs: Handoffs,
    /// Instances made ready for partitions about to arrive.
    arriving: FxHashMap<PartitionKey, JobInstance>,
    /// The iteration the cursor paused at, until the snapshot there is taken.
    barrier: Option<u64>,
    /// Messages of a later generation, which arrived before this worker's restore.
    later: Vec<Envelope>,
}

impl Local {
    /// The state of worker `spec.me` at the start of `generation`: nothing declared, sent or
    /// held back, the partitions of `map` in `instances`.
    fn new(
        spec: &JobSpec,
        generation: u32,
        cursor: Cursor,
        graph: TaskGraph,
        map: mote_jobs::PartitionMap,
        instances: Vec<Vec<Option<JobInstance>>>,
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
            finished: false,
            handoffs: Handoffs::default(),
            arriving: FxHashMap::default(),
            barrier: None,
            later: Vec::new(),
        }
    }
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
    /// The job's spec as the controller sent it.
    pub fn spec(&self) -> &JobSpec {
        &self.spec
    }

    fn send(&self, local: &mut Local, to: WorkerId, message: WorkerMessage) {
        local.outstanding += 1;
        let url = local.urls[to.0 as usize].clone();
        let envelope = Envelope {
            generation: local.generation,
            message,
        };
        self.outbox.to_worker(url, to, envelope);
    }

    fn arg(&self, key: &str) -> Option<String> {
        mote_jobs::arg(&self.spec.args, key).map(str::to_owned)
    }

    /// Something this worker sent or stored in `generation` was taken.
    pub(crate) fn acknowledged(&self, generation: u32) {
        self.post(Inbound::Acknowledged(generation));
    }

    /// A load's input arrived.
    pub(crate) fn input(&self, generation: u32, task: TaskRef, data: Bytes) {
        self.post(Inbound::Input(generation, task, data));
    }

    /// A message to `peer` could not be delivered: the controller decides whether it is gone.
    pub(crate) fn unreachable(&self, generation: u32, peer: WorkerId, error: String) {
        if generation != self.tally.generation.load(Ordering::Relaxed) {
            return;
        }
        let report = Report::Unreachable {
            progress: self.progress(),
            peer,
            error,
        };
        self.outbox.to_controller(&self.spec, report);
    }

    /// The job cannot go on here: stop, and tell the controller why (once).
    pub(crate) fn fail(&self, error: WorkerError) {
        if self.failed.swap(true, Ordering::SeqCst) {
            return;
        }
        self.bell.ring_all();
        self.send_failure(error.to_string());
    }

    /// Stops the executors; the instances are dropped with the worker.
    pub fn stop(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.ctx.stopped.store(true, Ordering::Relaxed);
        self.bell.ring_all();
    }

    /// Whether it was stopped (the job ended, or its controller is gone).
    pub fn stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    /// Whether it stopped or failed.
    pub fn ended(&self) -> bool {
        self.stopped.load(Ordering::Relaxed) || self.failed.load(Ordering::Relaxed)
    }

    /// How far it is, read without the lock.
    pub fn progress(&self) -> Progress {
        let cores = self.threads.cores.max(1) as u32;
        self.tally.progress(self.spec.me, cores)
    }

    /// Shows where the cursor is in reports.
    fn show_cursor(&self, local: &Local) {
        let tally = &self.tally;
        tally
            .iterations
            .store(local.cursor.iterations(), Ordering::Relaxed);
        tally.stages.store(local.cursor.seq(), Ordering::Relaxed);
    }

    /// Whether snapshot images or output partitions are being written.
    pub fn storing(&self) -> bool {
        self.storing.load(Ordering::SeqCst) > 0
    }

    /// A snapshot or an output partition was written, or failed to be.
    pub(crate) fn stored(&self) {
        self.storing.fetch_sub(1, Ordering::SeqCst);
    }

    /// A report for the controller.
    pub(crate) fn report(&self, report: Report) {
        self.outbox.to_controller(&self.spec, report);
    }

    fn send_failure(&self, error: String) {
        let report = Report::Failed {
            progress: self.progress(),
            error,
        };
        self.outbox.to_controller(&self.spec, report);
    }
}
