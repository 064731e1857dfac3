//! The nodes a job's controller may choose as workers, from the cluster's view.

use std::sync::Arc;

/// The nodes a job's controller may choose as workers: this node first, then the others that
/// take calls, by name.
pub(crate) struct ClusterWorkers(pub Arc<mote_peers::Peers>);

impl mote_job_service::ClusterNodes for ClusterWorkers {
    fn nodes(&self) -> Vec<mote_job_service::NodeInfo> {
        let mut nodes: Vec<_> = self
            .0
            .view()
            .nodes
            .into_iter()
            .filter(|n| n.me || n.state == "up")
            .collect();
        nodes.sort_by(|a, b| b.me.cmp(&a.me).then_with(|| a.name.cmp(&b.name)));
        nodes
            .into_iter()
            .map(|n| mote_job_service::NodeInfo {
                name: n.name,
                url: n.url,
                cores: n.cores,
            })
            .collect()
    }
}
