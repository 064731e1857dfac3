//! What workers and controllers say to each other. Workers exchange [`WorkerMessage`]s over the
//! node's internal service, each in an [`Envelope`] that names the job's generation; the
//! controller starts and stops workers with a [`JobSpec`], moves partitions and restores
//! snapshots with messages of its own, and hears from workers through [`Report`]s.
//!
//! A generation is one run of the job from a start or a restore: a restore begins the next one,
//! and whatever was said in an earlier one (pieces, signals, acknowledgements, reports) is
//! dropped on arrival.
//!
//! On the wire an [`Envelope`] is postcard ([`encode_envelope`], [`decode_envelope`]): scatter
//! pieces and images are bytes, and JSON would quadruple them. Specs and reports are JSON.

use crate::cursor::Cursor;
use crate::map::{Entry, PartitionKey, PartitionMap, WorkerId};
use crate::program::GroupId;
use serde::{Deserialize, Serialize};

/// A message on the wire, with the generation its sender was in.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Envelope {
    /// The sender's generation.
    pub generation: u32,
    /// The message.
    pub message: WorkerMessage,
}

/// Why bytes are not a worker message.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// postcard could not read an [`Envelope`] from them.
    #[error("not a job worker message: {0}")]
    Malformed(#[from] postcard::Error),
    /// An envelope was read, and bytes follow it.
    #[error("not a job worker message: {0} bytes follow the message")]
    Trailing(usize),
}

/// An envelope's wire form.
pub fn encode_envelope(envelope: &Envelope) -> Vec<u8> {
    postcard::to_stdvec(envelope).expect("postcard encodes every envelope into a Vec")
}

/// Reads an envelope from its wire form: all of `body`, nothing before or after it.
pub fn decode_envelope(body: &[u8]) -> Result<Envelope, DecodeError> {
    let (envelope, rest) = postcard::take_from_bytes(body)?;
    match rest.len() {
        0 => Ok(envelope),
        trailing => Err(DecodeError::Trailing(trailing)),
    }
}

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
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// From the controller to a move's destination: get instances ready for these partitions.
    Arrive {
        /// The partitions.
        keys: Vec<PartitionKey>,
    },
    /// From the controller to a move's source: send these partitions to the workers their new
    /// entries name once the tasks spawned on them here are done.
    Leave {
        /// The partitions and their new entries.
        entries: Vec<(PartitionKey, Entry)>,
    },
    /// A partition moving here from `from`.
    Transfer(Transfer),
    /// From the controller: roll back to a snapshot, holding the partitions `map` gives.
    Restore(Restore),
}

/// A piece that travels with a partition: the partition that emitted it, and its bytes (`None`
/// for an empty piece).
pub type WirePiece = (u32, Option<Vec<u8>>);

/// A partition on its way between workers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Transfer {
    /// The partition.
    pub key: PartitionKey,
    /// The worker it comes from.
    pub from_worker: WorkerId,
    /// Its new entry's version.
    pub version: u32,
    /// The first occurrence it has not run.
    pub from: u64,
    /// Pieces for its gathers from `from` on, by occurrence.
    pub early: Vec<(u64, Vec<WirePiece>)>,
    /// Its instance's image.
    pub image: Vec<u8>,
}

/// A rollback to a snapshot, which begins generation `generation`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Restore {
    /// The generation it begins.
    pub generation: u32,
    /// The snapshot's iteration.
    pub iteration: u64,
    /// The cursor as every worker had it at the snapshot.
    pub cursor: Cursor,
    /// Who holds what from now on.
    pub map: PartitionMap,
    /// The workers taking part, by [`WorkerId`]: the others are gone and get nothing.
    pub live: Vec<bool>,
    /// Every worker's base URL, by [`WorkerId`]: a worker that came back may have a new one.
    pub workers: Vec<String>,
}

/// Where and how often a job snapshots its partitions.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotPlan {
    /// Every this many iterations of the program's top-level loop.
    pub every: u64,
    /// The bucket.
    pub bucket: String,
    /// The key prefix, under which each job's snapshots get `JOB/ITERATION/`.
    pub prefix: String,
}

impl SnapshotPlan {
    /// The object key of partition `key`'s image in job `job`'s snapshot at `iteration`.
    pub fn object(&self, job: &str, iteration: u64, key: PartitionKey) -> String {
        format!(
            "{}{}-{}",
            self.snapshot_prefix(job, iteration),
            key.group.0,
            key.index
        )
    }

    /// The prefix of every object of job `job`'s snapshot at `iteration`: what a
    /// `supervisor::Action::DeleteSnapshot` deletes.
    pub fn snapshot_prefix(&self, job: &str, iteration: u64) -> String {
        format!("{}{iteration:010}/", self.job_prefix(job))
    }

    /// The prefix of every object of job `job`'s snapshots.
    pub fn job_prefix(&self, job: &str) -> String {
        format!("{}{job}/", self.prefix)
    }
}

/// Everything a worker needs to run its part of a job.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// The generation the worker starts in.
    pub generation: u32,
    /// The workers taking part, by [`WorkerId`].
    pub live: Vec<bool>,
    /// Snapshots, when asked for.
    pub snapshots: Option<SnapshotPlan>,
}

/// A worker's news for the controller.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// The worker stored its partitions' images of the snapshot at `iteration`.
    Snapshotted {
        /// The worker and its generation.
        progress: Progress,
        /// The snapshot's iteration.
        iteration: u64,
        /// The partitions stored.
        keys: Vec<PartitionKey>,
        /// Bytes stored.
        bytes: u64,
        /// Time from the barrier to the last object stored, in µs.
        write_us: u64,
        /// The cursor at the barrier, which a restore resumes from.
        cursor: Cursor,
        /// Why not every image was stored, if so.
        error: Option<String>,
    },
    /// Partitions moved here and run here from now on.
    Arrived {
        /// The worker and its generation.
        progress: Progress,
        /// The partitions and their new entries.
        entries: Vec<(PartitionKey, Entry)>,
        /// Bytes of their images.
        bytes: u64,
    },
    /// A message to another worker could not be delivered.
    Unreachable {
        /// The worker and its generation.
        progress: Progress,
        /// The worker it could not reach.
        peer: WorkerId,
        /// What went wrong.
        error: String,
    },
}

impl Report {
    /// The progress it carries.
    pub fn progress(&self) -> &Progress {
        match self {
            Report::Progress(p) | Report::Done(p) => p,
            Report::Failed { progress, .. }
            | Report::Snapshotted { progress, .. }
            | Report::Arrived { progress, .. }
            | Report::Unreachable { progress, .. } => progress,
        }
    }
}

/// How far a worker is.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Progress {
    /// The worker.
    pub worker: WorkerId,
    /// Its generation.
    pub generation: u32,
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
    /// Time since it ran, in µs.
    pub wall_us: u64,
    /// Its executor threads.
    pub cores: u32,
    /// Time spent in guest tasks on each partition it holds, in µs.
    pub partitions: Vec<(PartitionKey, u64)>,
}
