//! What a job's worker on this node fails with. A failure while the job runs (a task, a load, a
//! store, an executor thread) ends the job: the controller is told, and the job's status shows
//! it. A failure of what the job service asked of the worker (prepare it, run it, give it a
//! message, restore it) is answered to whoever asked.

use crate::input::InputError;
use mote_confine::ConfineError;
use mote_jobs::{PartitionKey, WorkerId};
use mote_objects::ObjectError;
use mote_runtime::JobError;

/// A worker of a job failed, or refused what it was asked.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// No instance could be made for a partition (the job's module, or the node's memory).
    #[error(
        "worker {} cannot create the instance of partition {} of group {}: {source}",
        worker.0, key.index, key.group.0
    )]
    Instance {
        /// The worker.
        worker: WorkerId,
        /// The partition.
        key: PartitionKey,
        /// Why.
        source: JobError,
    },
    /// A partition's image from a snapshot does not load.
    #[error(
        "worker {} cannot restore partition {} of group {}: {source}",
        worker.0, key.index, key.group.0
    )]
    Restore {
        /// The worker.
        worker: WorkerId,
        /// The partition.
        key: PartitionKey,
        /// Why.
        source: JobError,
    },
    /// A restore gives the worker a partition whose image it was not sent.
    #[error(
        "the restore gives worker {} partition {} of group {} without its image; the snapshot it restores is incomplete",
        worker.0, key.index, key.group.0
    )]
    ImageMissing {
        /// The worker.
        worker: WorkerId,
        /// The partition.
        key: PartitionKey,
    },
    /// A partition moving here from another worker does not load.
    #[error(
        "partition {} of group {} from worker {} cannot be loaded here: {source}",
        key.index, key.group.0, from.0
    )]
    Transfer {
        /// The partition.
        key: PartitionKey,
        /// The worker it came from.
        from: WorkerId,
        /// Why.
        source: JobError,
    },
    /// A restore was sent to the worker itself, which cannot read the snapshot's images.
    #[error("a restore goes to the job service, which loads the images; send it to the node")]
    RestoreNotHere,
    /// The executor threads could not be started.
    #[error(
        "cannot start the job's executor threads: {0}; the node is short of threads or memory (see `ulimit -u` and its free memory)"
    )]
    Threads(#[source] std::io::Error),
    /// An executor thread could not be confined (its message says how to run without it).
    #[error("cannot confine the job's executor thread: {0}")]
    Confine(#[source] ConfineError),
    /// A task's guest code failed.
    #[error(
        "{kind} stage {stage} (function {function}) on partition {index} of [{datasets}] failed: {source}"
    )]
    Task {
        /// What the stage does (`compute`, `scatter`, `gather`, ...).
        kind: &'static str,
        /// The stage, by number.
        stage: u32,
        /// The guest function, by number.
        function: u32,
        /// The partition index.
        index: u32,
        /// The datasets it reads and writes, comma-separated.
        datasets: String,
        /// Why.
        source: JobError,
    },
    /// The node has no object storage for a load or store.
    #[error(
        "this node has no object storage for the job's input and output; start it with --objects-dir or --s3-endpoint"
    )]
    NoObjectStorage,
    /// A load or store names an argument the job was not given.
    #[error(
        "the job reads the argument `{arg}`, which was not given: add --arg {arg}=BUCKET/PREFIX"
    )]
    ArgMissing {
        /// The argument.
        arg: String,
    },
    /// A store's argument is not `BUCKET/PREFIX`.
    #[error("`{arg}={value}` is not BUCKET/PREFIX")]
    NotBucketPrefix {
        /// The argument.
        arg: String,
        /// Its value.
        value: String,
    },
    /// A load's input could not be read.
    #[error("the load of `{arg}`: {source}")]
    Load {
        /// The argument that names the input.
        arg: String,
        /// Why.
        source: Box<InputError>,
    },
    /// An output or snapshot object could not be written.
    #[error("cannot write {bucket}/{key}: {source}")]
    Write {
        /// Its bucket.
        bucket: String,
        /// Its key.
        key: String,
        /// Why.
        source: Box<ObjectError>,
    },
    /// The job service has no worker of the job.
    #[error("this node runs no worker of job {job}: it ended, or was never started here")]
    NoWorker {
        /// The job.
        job: String,
    },
    /// The job service runs a worker of the job already.
    #[error("this node already runs a worker of job {job}")]
    AlreadyRunning {
        /// The job.
        job: String,
    },
    /// The function was redeployed between the controller's start and this worker's.
    #[error(
        "this node has `{function}` as module {here}, the controller {controller}: the function was redeployed meanwhile; run the job again"
    )]
    Redeployed {
        /// The job function.
        function: String,
        /// Its module's sha256 here.
        here: String,
        /// Its module's sha256 at the controller.
        controller: String,
    },
    /// This worker's copy of the driver declared another program than the controller's.
    #[error(
        "this worker's copy of the driver declares {here} dataset groups, the controller's map {controller}: the driver must declare the same program everywhere (no clocks, randomness or environment)"
    )]
    GroupsDiffer {
        /// Groups here.
        here: usize,
        /// Groups in the controller's map.
        controller: usize,
    },
    /// A restore for a job without snapshots, or on a node without object storage.
    #[error(
        "a restore of a job without snapshots, or on a node without object storage: every worker of a job with snapshots needs the object storage they go to"
    )]
    RestoreWithoutSnapshots,
    /// A partition's image could not be read from the snapshot.
    #[error(
        "cannot read the snapshot of partition {} of group {} at {bucket}/{object}: {source} (every worker must share the object storage snapshots go to)",
        key.index, key.group.0
    )]
    SnapshotRead {
        /// The partition.
        key: PartitionKey,
        /// The snapshot's bucket.
        bucket: String,
        /// The image's key.
        object: String,
        /// Why.
        source: Box<ObjectError>,
    },
    /// The thread that started, restored or moved partitions of the worker died.
    #[error("{doing} failed: {source}")]
    Panicked {
        /// What it was doing.
        doing: &'static str,
        /// How it ended.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}
