//! How far a worker is, in atomics ([`Tally`]): the executors write it as they go (most of it
//! under the worker's lock, where it changes), and anyone reads it without the lock. A progress
//! report is then never late behind an executor that holds the lock, which matters when that
//! executor is starved of CPU (`SCHED_IDLE` beside a busy process): the controller must see such
//! a worker slow, and the node's threads must not wait for it.

use mote_jobs::message::Progress;
use mote_jobs::{GroupId, PartitionKey, TaskGraph, WorkerId};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::time::Instant;

/// A partition's time that marks it not held here.
const NOT_HELD: u64 = u64::MAX;

/// A worker's counts as its reports show them.
pub(super) struct Tally {
    /// The generation the worker is in.
    pub generation: AtomicU32,
    pub tasks: AtomicU64,
    /// Time executors spent inside guest tasks, counted as each batch ends.
    pub task_ns: AtomicU64,
    /// Time executors spent awake: in guest tasks, declaring, spawning, settling and waiting
    /// for the lock; not waiting for work.
    pub busy_ns: AtomicU64,
    pub iterations: AtomicU64,
    pub stages: AtomicU64,
    /// By executor: when its running batch began, in ns after `origin`, plus one; zero while
    /// it runs none. A report counts a batch's time so far as task time, so that a worker whose
    /// tasks run for seconds (or wait for a core behind another process) is seen to be slow
    /// before they end.
    batches: Vec<AtomicU64>,
    origin: Instant,
    /// When the worker began to run, in ns after `origin`.
    ran: AtomicU64,
    /// By group, then index: time in guest tasks of each partition held here, in ns, or
    /// [`NOT_HELD`].
    partitions: Vec<Vec<AtomicU64>>,
}

impl Tally {
    /// Nothing done yet by `executors` executors, over groups of `sizes` partitions, holding
    /// those `graph` holds.
    pub fn new(generation: u32, executors: usize, sizes: &[u32], graph: &TaskGraph) -> Self {
        let tally = Self {
            generation: AtomicU32::new(generation),
            tasks: AtomicU64::new(0),
            task_ns: AtomicU64::new(0),
            busy_ns: AtomicU64::new(0),
            iterations: AtomicU64::new(0),
            stages: AtomicU64::new(0),
            batches: (0..executors.max(1)).map(|_| AtomicU64::new(0)).collect(),
            origin: Instant::now(),
            ran: AtomicU64::new(0),
            partitions: sizes
                .iter()
                .map(|&size| (0..size).map(|_| AtomicU64::new(NOT_HELD)).collect())
                .collect(),
        };
        tally.hold(graph, true);
        tally
    }

    /// Marks held what `graph` holds and nothing else; a partition newly held, or every one
    /// held if `fresh`, starts from zero.
    pub fn hold(&self, graph: &TaskGraph, fresh: bool) {
        for (g, row) in self.partitions.iter().enumerate() {
            let mut held = vec![false; row.len()];
            for &index in graph.held(GroupId(g as u16)) {
                held[index as usize] = true;
            }
            for (ns, held) in row.iter().zip(held) {
                let was = ns.load(Relaxed);
                let now = match held {
                    true if fresh || was == NOT_HELD => 0,
                    true => was,
                    false => NOT_HELD,
                };
                ns.store(now, Relaxed);
            }
        }
    }

    /// Adds `ns` of guest time to partition `key`, held here.
    pub fn ran(&self, key: PartitionKey, ns: u64) {
        let slot = &self.partitions[key.group.0 as usize][key.index as usize];
        // Written only under the worker's lock, so a plain add cannot lose a count.
        let was = slot.load(Relaxed);
        if was != NOT_HELD {
            slot.store(was + ns, Relaxed);
        }
    }

    /// The worker begins to run.
    pub fn run(&self) {
        let now = self.origin.elapsed().as_nanos() as u64;
        self.ran.store(now, Relaxed);
    }

    /// Executor `me` begins a batch.
    pub fn batch_began(&self, me: usize) {
        let at = self.origin.elapsed().as_nanos() as u64 + 1;
        self.batches[me].store(at, Relaxed);
    }

    /// Executor `me`'s batch ended after `guest_ns` in guest tasks, `tasks` of which finished.
    pub fn batch_ended(&self, me: usize, guest_ns: u64, tasks: u64) {
        self.task_ns.fetch_add(guest_ns, Relaxed);
        self.tasks.fetch_add(tasks, Relaxed);
        self.batches[me].store(0, Relaxed);
    }

    /// The report of worker `me`, running on `cores` cores.
    pub fn progress(&self, me: WorkerId, cores: u32) -> Progress {
        let mut partitions = Vec::new();
        for (g, row) in self.partitions.iter().enumerate() {
            for (index, ns) in row.iter().enumerate() {
                let ns = ns.load(Relaxed);
                if ns != NOT_HELD {
                    let key = PartitionKey {
                        group: GroupId(g as u16),
                        index: index as u32,
                    };
                    partitions.push((key, ns / 1000));
                }
            }
        }
        let now = self.origin.elapsed().as_nanos() as u64;
        let running: u64 = self
            .batches
            .iter()
            .map(|b| b.load(Relaxed))
            .filter(|&began| began > 0)
            .map(|began| now.saturating_sub(began - 1))
            .sum();
        let task_ns = self.task_ns.load(Relaxed);
        Progress {
            worker: me,
            generation: self.generation.load(Relaxed),
            tasks: self.tasks.load(Relaxed),
            iterations: self.iterations.load(Relaxed),
            stages: self.stages.load(Relaxed),
            task_us: (task_ns + running) / 1000,
            scheduling_us: self.busy_ns.load(Relaxed).saturating_sub(task_ns) / 1000,
            wall_us: now.saturating_sub(self.ran.load(Relaxed)) / 1000,
            cores,
            partitions,
        }
    }
}
