//! The cluster's nodes as a job's controller sees them, from the cluster's view: the ones it
//! may choose as workers, and the ones whose leases are alive.

use mote_job_service::NodeInfo;
use std::sync::Arc;

/// The cluster's nodes for a job's controller, from this node's view of the cluster.
pub(crate) struct ClusterWorkers(pub Arc<mote_peers::Peers>);

impl ClusterWorkers {
    /// The members, this node first, then by name: only those that take calls unless `all`.
    fn members(&self, all: bool) -> Vec<NodeInfo> {
        let mut nodes: Vec<_> = self
            .0
            .view()
            .nodes
            .into_iter()
            .filter(|n| all || n.me || n.state == "up")
            .collect();
        nodes.sort_by(|a, b| b.me.cmp(&a.me).then_with(|| a.name.cmp(&b.name)));
        nodes
            .into_iter()
            .map(|n| NodeInfo {
                name: n.name,
                url: n.url,
                cores: n.cores,
            })
            .collect()
    }
}

impl mote_job_service::ClusterNodes for ClusterWorkers {
    fn nodes(&self) -> Vec<NodeInfo> {
        self.members(false)
    }

    fn live(&self) -> Vec<NodeInfo> {
        // A member is listed while its lease is alive, whatever its state.
        self.members(true)
    }
}
