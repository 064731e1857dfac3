//! What the job service refuses or fails with, by kind of operation: finding and compiling a
//! job's code ([`CodeError`]), starting a job as its controller ([`RunError`]), and this node's
//! worker of a job ([`WorkerError`]); each converts into the crate's [`JobServiceError`], whose
//! [`ErrorKind`] is what an API answers with. Every message names the function, job, worker or
//! argument at fault and, where there is one, the fix.

use crate::transport::TransportError;
use crate::worker::WorkerError;
use mote_objects::ObjectError;
use mote_runtime::{CompileError, JobError};
use mote_types::GuestKind;

/// What kind of refusal an error is, for an API to answer with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// No such function, job or worker.
    NotFound,
    /// The request is wrong; the message says how.
    Invalid,
    /// The request conflicts with what is there (an output prefix in use, a worker running).
    Conflict,
    /// A worker or a module could not be reached or started.
    Unavailable,
}

/// A job request or message is refused.
#[derive(Debug, thiserror::Error)]
pub enum JobServiceError {
    /// The job's function or module.
    #[error(transparent)]
    Code(#[from] CodeError),
    /// Starting a job as its controller.
    #[error(transparent)]
    Run(#[from] RunError),
    /// This node's worker of a job.
    #[error(transparent)]
    Worker(#[from] WorkerError),
    /// No job of that id is known: this node does not control it and the cluster's store
    /// has no record of it.
    #[error("no job `{id}` is known to the cluster; mote job ls lists the jobs there are")]
    NoSuchJob {
        /// The id asked for.
        id: String,
    },
    /// The cluster's job records could not be read or written.
    #[error("the cluster's store could not be reached for the job records: {0}; try again")]
    Records(String),
    /// The job engine could not be built.
    #[error(transparent)]
    Engine(#[from] mote_runtime::RuntimeError),
    /// The threads that run jobs' guest code could not be confined.
    #[error(transparent)]
    Confine(#[from] mote_confine::ConfineError),
}

impl JobServiceError {
    /// What kind of refusal it is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::Code(e) => e.kind(),
            Self::Run(e) => e.kind(),
            Self::Worker(e) => e.kind(),
            Self::NoSuchJob { .. } => ErrorKind::NotFound,
            Self::Records(_) | Self::Engine(_) | Self::Confine(_) => ErrorKind::Unavailable,
        }
    }
}

/// A job's function or module cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum CodeError {
    /// No function of that name is deployed.
    #[error(
        "no function named `{function}` is deployed; deploy the job module first (mote deploy {function} FILE)"
    )]
    NotDeployed {
        /// Its name.
        function: String,
    },
    /// The function is not a job.
    #[error(
        "`{function}` is a {kind} function, not a job; a job module exports `mote_job_driver` and `mote_job_task` (docs/jobs.md)"
    )]
    NotAJob {
        /// Its name.
        function: String,
        /// What it is.
        kind: GuestKind,
    },
    /// The module is neither on this node nor to be fetched from its peers or object storage.
    #[error("{0}")]
    Fetch(String),
    /// The module does not compile for the job engine.
    #[error("the job module does not compile for jobs: {0}")]
    Compile(#[source] CompileError),
    /// The driver failed, or declared an invalid program.
    #[error("the job's driver failed: {0}")]
    Driver(#[source] JobError),
    /// The thread that fetched the module or ran the driver died.
    #[error("{doing} failed: {source}")]
    Panicked {
        /// What it was doing.
        doing: &'static str,
        /// How it ended.
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl CodeError {
    /// What kind of refusal it is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::NotDeployed { .. } => ErrorKind::NotFound,
            Self::NotAJob { .. } | Self::Compile(_) | Self::Driver(_) => ErrorKind::Invalid,
            Self::Fetch(_) | Self::Panicked { .. } => ErrorKind::Unavailable,
        }
    }
}

/// A job cannot start: its request asks for what cannot be, or its workers did not start.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The partitions per core are out of range.
    #[error("--partitions-per-core {0}: choose 1 to 1000")]
    PartitionsPerCore(u32),
    /// No workers were asked for.
    #[error("--workers 0: a job needs at least one worker")]
    NoWorkers,
    /// More workers were asked for than the cluster has nodes.
    #[error(
        "--workers {asked}: the cluster has {} live nodes ({}); ask for at most {}",
        live.len(), live.join(", "), live.len()
    )]
    TooFewNodes {
        /// Workers asked for.
        asked: usize,
        /// The live nodes, by name.
        live: Vec<String>,
    },
    /// A worker named is not a live node.
    #[error(
        "--workers names `{name}`, which is not a live node of the cluster; live nodes: {}",
        live.join(", ")
    )]
    UnknownWorker {
        /// The name or URL given.
        name: String,
        /// The live nodes, by name.
        live: Vec<String>,
    },
    /// The program loads from an argument that was not given.
    #[error(
        "the job loads its input from the argument `{arg}`, which was not given: add --arg {arg}=BUCKET/PREFIX"
    )]
    InputMissing {
        /// The argument.
        arg: String,
    },
    /// The program stores its output under an argument that was not given.
    #[error(
        "the job stores its output under the argument `{arg}`, which was not given: add --arg {arg}=BUCKET/PREFIX"
    )]
    OutputMissing {
        /// The argument.
        arg: String,
    },
    /// A load's or store's argument is not `BUCKET/PREFIX`.
    #[error("--arg {arg}={value}: expected BUCKET/PREFIX")]
    NotBucketPrefix {
        /// The argument.
        arg: String,
        /// Its value.
        value: String,
    },
    /// The job loads or stores, and the node has no object storage.
    #[error(
        "this node has no object storage for the job's input and output; start it with --objects-dir or --s3-endpoint"
    )]
    NoObjectStorage,
    /// The objects under a load's or store's prefix could not be listed.
    #[error("--arg {arg}={value}: {source}")]
    List {
        /// The argument.
        arg: String,
        /// Its value.
        value: String,
        /// Why.
        source: Box<ObjectError>,
    },
    /// An output prefix holds objects already.
    #[error(
        "--arg {arg}={value}: the output directory already holds {count} objects (the first is {bucket}/{first}); choose another directory or delete them"
    )]
    OutputNotEmpty {
        /// The argument.
        arg: String,
        /// Its value.
        value: String,
        /// Objects under the prefix.
        count: usize,
        /// The bucket.
        bucket: String,
        /// The first object's key.
        first: String,
    },
    /// An input prefix holds nothing.
    #[error("--arg {arg}={value}: no objects under that prefix; put the input there first")]
    InputEmpty {
        /// The argument.
        arg: String,
        /// Its value.
        value: String,
    },
    /// Snapshots every 0 iterations.
    #[error("--snapshot-every 0: give a number of iterations, 1 or more")]
    SnapshotEveryZero,
    /// Snapshots without a place.
    #[error(
        "--snapshot-every needs --snapshot-to BUCKET/PREFIX: where in object storage the snapshots go"
    )]
    SnapshotsNowhere,
    /// A place for snapshots without how often.
    #[error("--snapshot-to needs --snapshot-every N: how many iterations apart snapshots are")]
    SnapshotsNever,
    /// Snapshots of a program without a loop.
    #[error(
        "--snapshot-every {every}: `{function}`'s program has no loop, and snapshots are taken between its loop's iterations; run it without snapshots"
    )]
    SnapshotsNeedLoop {
        /// The iterations asked for.
        every: u64,
        /// The job function.
        function: String,
    },
    /// The place for snapshots is not `BUCKET/PREFIX`.
    #[error("--snapshot-to {to}: expected BUCKET/PREFIX")]
    SnapshotsNotBucketPrefix {
        /// What was given.
        to: String,
    },
    /// Snapshots, and the node has no object storage.
    #[error(
        "this node has no object storage for snapshots; start it with --objects-dir or --s3-endpoint"
    )]
    NoSnapshotStorage,
    /// The place for snapshots cannot be written.
    #[error(
        "--snapshot-to {to}: cannot write there ({source}); create the bucket or choose another"
    )]
    SnapshotsNotWritable {
        /// What was given.
        to: String,
        /// Why.
        source: Box<ObjectError>,
    },
    /// A worker did not take the job.
    #[error("worker {worker} could not start the job: {source}")]
    WorkerStart {
        /// The worker's node.
        worker: String,
        /// Why.
        source: TransportError,
    },
    /// A prepared worker did not run.
    #[error("worker {worker} could not run the job: {source}")]
    WorkerRun {
        /// The worker's node.
        worker: String,
        /// Why.
        source: TransportError,
    },
    /// The workers chosen and the map computed disagree, which is a fault of this node's
    /// (the cluster changed while the job was set up, at worst): running again chooses anew.
    #[error("the job's supervision could not be set up ({0}); run the job again")]
    Supervision(#[source] mote_jobs::supervisor::SetupError),
}

impl RunError {
    /// What kind of refusal it is.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::OutputNotEmpty { .. } => ErrorKind::Conflict,
            Self::WorkerStart { .. } | Self::WorkerRun { .. } | Self::Supervision(_) => {
                ErrorKind::Unavailable
            }
            _ => ErrorKind::Invalid,
        }
    }
}

impl WorkerError {
    /// What kind of refusal it is, when the job service answers with it.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::NoWorker { .. } => ErrorKind::NotFound,
            Self::AlreadyRunning { .. } | Self::Redeployed { .. } => ErrorKind::Conflict,
            Self::GroupsDiffer { .. } | Self::RestoreWithoutSnapshots => ErrorKind::Invalid,
            _ => ErrorKind::Unavailable,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mote_jobs::{GroupId, PartitionKey, WorkerId};

    /// The refusals the API answers with keep the kind (the HTTP status) and the words that
    /// clients and the end-to-end tests look for, and name what is at fault.
    #[test]
    fn refusals_keep_their_kind_and_name_what_is_at_fault() {
        let live = || vec!["n1".to_owned()];
        let cases: Vec<(JobServiceError, ErrorKind, &[&str])> = vec![
            (
                CodeError::NotDeployed {
                    function: "nothing".into(),
                }
                .into(),
                ErrorKind::NotFound,
                &["`nothing`", "mote deploy nothing FILE"],
            ),
            (
                CodeError::NotAJob {
                    function: "hello".into(),
                    kind: GuestKind::MoteAbiV1,
                }
                .into(),
                ErrorKind::Invalid,
                &["`hello`", "not a job"],
            ),
            (
                RunError::TooFewNodes {
                    asked: 2,
                    live: live(),
                }
                .into(),
                ErrorKind::Invalid,
                &["--workers 2", "n1", "at most 1"],
            ),
            (
                RunError::UnknownWorker {
                    name: "n9".into(),
                    live: live(),
                }
                .into(),
                ErrorKind::Invalid,
                &["`n9`", "live nodes: n1"],
            ),
            (
                RunError::PartitionsPerCore(0).into(),
                ErrorKind::Invalid,
                &["--partitions-per-core 0", "1 to 1000"],
            ),
            (
                RunError::InputMissing {
                    arg: "input".into(),
                }
                .into(),
                ErrorKind::Invalid,
                &["`input`", "was not given", "input=BUCKET/PREFIX"],
            ),
            (
                RunError::InputEmpty {
                    arg: "input".into(),
                    value: "data/none".into(),
                }
                .into(),
                ErrorKind::Invalid,
                &["data/none", "no objects"],
            ),
            (
                RunError::OutputNotEmpty {
                    arg: "output".into(),
                    value: "results/lr".into(),
                    count: 1,
                    bucket: "results".into(),
                    first: "lr/part-00000".into(),
                }
                .into(),
                ErrorKind::Conflict,
                &[
                    "results/lr",
                    "already holds 1 objects",
                    "results/lr/part-00000",
                ],
            ),
            (
                RunError::SnapshotsNowhere.into(),
                ErrorKind::Invalid,
                &["--snapshot-every needs --snapshot-to"],
            ),
            (
                JobServiceError::NoSuchJob { id: "nope".into() },
                ErrorKind::NotFound,
                &["no job `nope`", "mote job ls"],
            ),
            (
                WorkerError::NoWorker { job: "7-1".into() }.into(),
                ErrorKind::NotFound,
                &["job 7-1"],
            ),
            (
                WorkerError::AlreadyRunning { job: "7-1".into() }.into(),
                ErrorKind::Conflict,
                &["job 7-1"],
            ),
            (
                WorkerError::Redeployed {
                    function: "lr".into(),
                    here: "aa".into(),
                    controller: "bb".into(),
                }
                .into(),
                ErrorKind::Conflict,
                &["`lr`", "aa", "bb", "run the job again"],
            ),
            (
                WorkerError::GroupsDiffer {
                    here: 2,
                    controller: 3,
                }
                .into(),
                ErrorKind::Invalid,
                &["declares 2", "map 3"],
            ),
            (
                WorkerError::RestoreNotHere.into(),
                ErrorKind::Unavailable,
                &["restore"],
            ),
        ];
        for (error, kind, words) in cases {
            let message = error.to_string();
            assert_eq!(error.kind(), kind, "{message}");
            for word in words {
                assert!(message.contains(word), "{word:?} is not in: {message}");
            }
        }
    }

    /// A failed task's error, which the job's status shows, names the stage, its function, the
    /// partition and the datasets, then the guest's own message.
    #[test]
    fn a_failed_task_names_its_stage_partition_and_datasets() {
        let error = WorkerError::Task {
            kind: "compute",
            stage: 0,
            function: 1,
            index: 3,
            datasets: "blocks, sums".into(),
            source: JobError::Trap("wasm trap: unreachable".into()),
        };
        assert_eq!(
            error.to_string(),
            "compute stage 0 (function 1) on partition 3 of [blocks, sums] failed: wasm trap: unreachable"
        );
        let key = PartitionKey {
            group: GroupId(1),
            index: 4,
        };
        let missing = WorkerError::ImageMissing {
            worker: WorkerId(2),
            key,
        };
        assert!(
            missing
                .to_string()
                .contains("worker 2 partition 4 of group 1 without its image"),
            "{missing}"
        );
    }
}
