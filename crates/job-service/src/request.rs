//! What starting a job takes: the request (`POST /v1/jobs`, [`RunRequest`]) and the nodes of
//! the cluster the controller may choose its workers from ([`ClusterNodes`]), and where its
//! snapshots go ([`snapshot_plan`]).

use crate::input;
use mote_jobs::message::SnapshotPlan;
use serde::{Deserialize, Serialize};

/// A node that can be a worker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeInfo {
    /// Its name.
    pub name: String,
    /// Its base URL.
    pub url: String,
    /// Its cores.
    pub cores: u32,
}

/// The nodes a controller may choose workers from: this node first.
pub trait ClusterNodes: Send + Sync {
    /// Every live node, this one first.
    fn nodes(&self) -> Vec<NodeInfo>;
}

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

/// Where a job's snapshots go, from `--snapshot-to BUCKET/PREFIX` and `--snapshot-every N`.
pub fn snapshot_plan(every: u64, to: &str) -> Option<SnapshotPlan> {
    let (bucket, prefix) = input::bucket_and_prefix(to)?;
    let prefix = match prefix.trim_end_matches('/') {
        "" => String::new(),
        p => format!("{p}/"),
    };
    Some(SnapshotPlan {
        every,
        bucket: bucket.to_owned(),
        prefix,
    })
}
