//! What workers and controllers say to each other. Workers exchange [`WorkerMessage`]s over the
//! node's internal service; the controller starts and stops workers with a [`JobSpec`] and
//! hears from them through [`Report`]s.

use crate::map::{Entry, PartitionKey, PartitionMap, WorkerId};
use crate::program::GroupId;
use serde::{Deserialize, Serialize};

/// A piece of scatter data for one partition of a gather.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Piece {
    /// The partition index it is for.
    pub index: u32,
    /// The partition index that emitted it.
    pub source: u32,
    /// The version of the map entry the sender routed it by.
    pub version: u32,
    /// The bytes, or `None` for "nothing for you from this partition".
    pub data: Option<Vec<u8>>,
}

/// A message from one worker of a job to another.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WorkerMessage {
    /// Pieces for the gather of occurrence `seq`, whose partitions are in `group`.
    Pieces {
        /// The scatter stage's occurrence.
        seq: u64,
        /// The gather's group.
        group: GroupId,
        /// The pieces.
        pieces: Vec<Piece>,
    },
    /// New entries of the partition map, from the controller: data held for partitions that
    /// move here is taken, and data for partitions that moved elsewhere is forwarded.
    MapUpdate {
        /// The entries that changed.
        entries: Vec<(PartitionKey, Entry)>,
    },
    /// A signal's value, broadcast by the worker that computed it.
    Signal {
        /// The signal's number in the program's run.
        signal: u64,
        /// Its value.
        value: bool,
    },
}

/// Everything a worker needs to run its part of a job.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobSpec {
    /// The job's id.
    pub id: String,
    /// The deployed job function.
    pub function: String,
    /// The sha256 of its module, so every worker runs the same code.
    pub sha256: String,
    /// `--arg K=V`, in order.
    pub args: Vec<(String, String)>,
    /// The job's partition count.
    pub partitions: u32,
    /// Every worker's base URL, by [`WorkerId`].
    pub workers: Vec<String>,
    /// Which of them the receiver is.
    pub me: WorkerId,
    /// The initial partition map.
    pub map: PartitionMap,
    /// The controller's base URL, where reports go.
    pub controller: String,
}

/// A worker's news for the controller.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum Report {
    /// Periodic progress.
    Progress(Progress),
    /// The worker ran its whole program and every piece and output it sent was taken.
    Done(Progress),
    /// A task failed; the job cannot go on.
    Failed {
        /// Progress until then.
        progress: Progress,
        /// The stage's kind and function and the dataset partition, with the cause.
        error: String,
    },
}

/// How far a worker is.
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Progress {
    /// The worker.
    pub worker: WorkerId,
    /// Tasks run so far.
    pub tasks: u64,
    /// Iterations of the program's top-level loops declared so far.
    pub iterations: u64,
    /// Stages declared so far.
    pub stages: u64,
    /// Time its executors spent inside guest tasks, in µs.
    pub task_us: u64,
    /// Time its executors were busy scheduling (everything but guest code and idling), in µs.
    pub scheduling_us: u64,
}
