//! What starting a job takes besides its request (`mote_api::RunRequest`): the nodes of
//! the cluster the controller may choose its workers from ([`ClusterNodes`]), and where its
//! snapshots go ([`snapshot_plan`]).

use crate::input;
use mote_jobs::message::SnapshotPlan;

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

/// The cluster's nodes as a controller sees them.
pub trait ClusterNodes: Send + Sync {
    /// The nodes a controller may choose workers from: every node that takes calls, this one
    /// first.
    fn nodes(&self) -> Vec<NodeInfo>;

    /// Every node whose lease is alive, draining and unreachable ones too: a job's worker on a
    /// node missing here left the cluster. None when the controller cannot tell (it never saw
    /// the cluster).
    fn live(&self) -> Vec<NodeInfo>;
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
