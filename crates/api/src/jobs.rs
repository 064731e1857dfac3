//! Jobs: the request that starts one (`POST /v1/jobs`, [`RunRequest`]) and a job's status as
//! the API shows it (`GET /v1/jobs/{id}`, [`JobStatus`] and its parts).

use serde::{Deserialize, Serialize};

/// Which workers a job runs on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum WorkerChoice {
    /// The first N nodes (this one first, then the others by name).
    Count(usize),
    /// These nodes, by name or URL.
    List(Vec<String>),
}

/// `POST /v1/jobs`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRequest {
    /// The deployed job function.
    pub function: String,
    /// The workers; every node of the cluster if absent.
    #[serde(default)]
    pub workers: Option<WorkerChoice>,
    /// Partitions per worker core (the paper's micropartitioning); 10 if absent.
    #[serde(default)]
    pub partitions_per_core: Option<u32>,
    /// `--arg K=V`, in order.
    #[serde(default)]
    pub args: Vec<(String, String)>,
    /// Snapshot the partitions every this many iterations of the program's top-level loop, so
    /// that the job survives a lost worker; with `snapshot_to`.
    #[serde(default)]
    pub snapshot_every: Option<u64>,
    /// Where snapshots go: `BUCKET/PREFIX` in the nodes' object storage, which every worker
    /// must share.
    #[serde(default)]
    pub snapshot_to: Option<String>,
    /// Move partitions off workers that run markedly slower; on if absent.
    #[serde(default)]
    pub rebalance: Option<bool>,
}

impl RunRequest {
    /// A job of `function` with `args`, everything else as the server has it when absent.
    pub fn new(function: &str, args: Vec<(String, String)>) -> Self {
        Self {
            function: function.to_owned(),
            workers: None,
            partitions_per_core: None,
            args,
            snapshot_every: None,
            snapshot_to: None,
            rebalance: None,
        }
    }
}

/// Where a job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Its workers are running it.
    Running,
    /// Every worker ran the whole program.
    Succeeded,
    /// A task failed or a worker was lost.
    Failed,
    /// A user cancelled it.
    Cancelled,
}

/// One worker as the controller sees it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkerStatus {
    /// The node's name.
    pub name: String,
    /// Its URL.
    pub url: String,
    /// Its cores.
    pub cores: u32,
    /// Whether it takes part (false once it is gone).
    pub live: bool,
    /// Partitions it holds, of every group.
    pub partitions: usize,
    /// Which: per group, index ranges (`g0: 0-9, g1: 0`).
    pub holds: String,
    /// Tasks it ran.
    pub tasks: u64,
    /// Tasks per second over the last second or so; none until it has reported twice a
    /// second apart (and again after its clock began anew, as a restored worker's does).
    pub tasks_per_s: Option<f64>,
    /// Share of its executors' time spent waiting for work over the last second or so; none
    /// when `tasks_per_s` is.
    pub idle_share: Option<f64>,
    /// Share of its executors' busy time spent outside guest code.
    pub scheduling_share: f64,
    /// Whether it ran the whole program.
    pub done: bool,
}

/// A move of partitions between workers.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MigrationStatus {
    /// When it started, in ms since the job ran.
    pub at_ms: u64,
    /// The source.
    pub from: String,
    /// The destination.
    pub to: String,
    /// Partitions moved (every group's at each index moved).
    pub partitions: usize,
    /// Bytes of their images.
    pub bytes: u64,
    /// Time until the last one arrived, in ms; none while moving.
    pub ms: Option<u64>,
    /// Why.
    pub reason: String,
}

/// Where a snapshot is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SnapshotState {
    /// Workers are storing it.
    Storing,
    /// Every partition is stored: a restore may use it.
    Complete,
    /// It will not complete (a partition was not stored, or a restore overtook it).
    Incomplete,
    /// A newer one completed, or the job ended: its objects were deleted.
    Deleted,
}

/// One snapshot.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SnapshotStatus {
    /// The iteration it was taken at.
    pub iteration: u64,
    /// Where it is.
    pub state: SnapshotState,
    /// Partitions stored.
    pub stored: usize,
    /// Partitions the job has.
    pub of: usize,
    /// Bytes stored.
    pub bytes: u64,
    /// The longest time a worker took from the barrier to its last image stored, in ms.
    pub write_ms: f64,
    /// Why it is incomplete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One rollback to a snapshot.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RestoreStatus {
    /// When it was decided, in ms since the job ran.
    pub at_ms: u64,
    /// Why.
    pub reason: String,
    /// The snapshot's iteration.
    pub iteration: u64,
    /// The generation it began.
    pub generation: u32,
    /// Time until every worker ran again from the snapshot, in ms.
    pub ms: Option<u64>,
}

/// A job's status, as `GET /v1/jobs/{id}` shows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobStatus {
    /// Its id.
    pub id: String,
    /// The job function.
    pub function: String,
    /// Where it is.
    pub state: JobState,
    /// The node controlling it: the one it started on, or the one that took it over when that
    /// node left the cluster (empty from a server that does not say).
    #[serde(default)]
    pub controller: String,
    /// Why it failed, naming the stage, the partition and the cause.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The job's partition count.
    pub partitions: u32,
    /// Iterations of the program's top-level loops every worker has reached.
    pub iteration: u64,
    /// Tasks run so far, on every worker.
    pub tasks: u64,
    /// Tasks per second over the last second (over the whole run once it ended).
    pub tasks_per_s: f64,
    /// Time from when every worker ran until it ended, in ms.
    pub elapsed_ms: u64,
    /// When it started, in ms since the Unix epoch.
    pub started_ms: u64,
    /// Time the executors spent in guest tasks, in µs, on every worker.
    pub task_us: u64,
    /// Time the executors spent scheduling (declaring, spawning, settling), in µs.
    pub scheduling_us: u64,
    /// Restores so far, each beginning a generation.
    pub generation: u32,
    /// Whether the controller moves partitions off slow workers.
    pub rebalance: bool,
    /// Where snapshots go (`BUCKET/PREFIX`), when they are on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_to: Option<String>,
    /// Snapshot every this many iterations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_every: Option<u64>,
    /// Snapshot objects that could not be deleted when the job ended, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshots_left: Option<String>,
    /// The workers, by worker id.
    pub workers: Vec<WorkerStatus>,
    /// The latest moves of partitions, oldest first.
    pub migrations: Vec<MigrationStatus>,
    /// Moves older than those listed.
    pub older_migrations: usize,
    /// The latest snapshots, oldest first.
    pub snapshots: Vec<SnapshotStatus>,
    /// Snapshots older than those listed.
    pub older_snapshots: usize,
    /// Rollbacks, oldest first.
    pub restores: Vec<RestoreStatus>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A job's status as a node serves it before its one worker reported twice.
    const STARTING: &str = include_str!("../testdata/starting_job.json");

    #[test]
    fn a_worker_with_no_rate_yet_reads_as_none_and_writes_back_as_null() {
        let status: JobStatus = serde_json::from_str(STARTING).unwrap();
        assert_eq!(status.state, JobState::Running);
        assert_eq!(status.error, None);
        assert_eq!(status.workers[0].tasks_per_s, None);
        assert_eq!(status.workers[0].idle_share, None);
        let written = serde_json::to_value(&status).unwrap();
        assert!(written["workers"][0]["tasks_per_s"].is_null());
        assert!(written.get("error").is_none(), "{written}");
        let again: JobStatus = serde_json::from_value(written).unwrap();
        assert_eq!(again.workers[0].tasks_per_s, None);
        assert_eq!(again.id, "j1");
    }

    #[test]
    fn a_worker_s_rate_once_known_round_trips() {
        let mut status: JobStatus = serde_json::from_str(STARTING).unwrap();
        status.workers[0].tasks_per_s = Some(1234.5);
        status.workers[0].idle_share = Some(0.25);
        status.state = JobState::Failed;
        status.error = Some("partition 3 trapped".into());
        let again: JobStatus =
            serde_json::from_str(&serde_json::to_string(&status).unwrap()).unwrap();
        assert_eq!(again.workers[0].tasks_per_s, Some(1234.5));
        assert_eq!(again.workers[0].idle_share, Some(0.25));
        assert_eq!(again.state, JobState::Failed);
        assert_eq!(again.error.as_deref(), Some("partition 3 trapped"));
    }

    #[test]
    fn a_run_request_takes_only_the_function_and_workers_as_a_count_or_a_list() {
        let bare: RunRequest = serde_json::from_str(r#"{"function": "lr"}"#).unwrap();
        assert_eq!(bare.workers, None);
        assert!(bare.args.is_empty());
        let counted: RunRequest =
            serde_json::from_str(r#"{"function": "lr", "workers": 2}"#).unwrap();
        assert_eq!(counted.workers, Some(WorkerChoice::Count(2)));
        let listed: RunRequest =
            serde_json::from_str(r#"{"function": "lr", "workers": ["a", "b"]}"#).unwrap();
        assert_eq!(
            listed.workers,
            Some(WorkerChoice::List(vec!["a".into(), "b".into()]))
        );
        let written = serde_json::to_string(&listed).unwrap();
        let again: RunRequest = serde_json::from_str(&written).unwrap();
        assert_eq!(again.workers, listed.workers);
    }
}
