//! What a node writes under its key, `/mote/nodes/NAME`, as JSON: readable with `etcdctl get`,
//! and the one format every node of a cluster must agree on.

use mote_cluster::{Backlog, Load, NodeName, Report};
use serde::{Deserialize, Serialize};
use std::time::{Duration, SystemTime};

/// Now, in milliseconds since the Unix epoch.
pub(crate) fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// Where node keys live, under the store's `/mote/` prefix.
pub(crate) const NODES_PREFIX: &str = "nodes/";

/// The key of the node called `name`.
pub(crate) fn node_key(name: &str) -> String {
    format!("{NODES_PREFIX}{name}")
}

/// A node key's value.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct NodeKey {
    /// Where its peers reach its API.
    pub url: String,
    /// Its scheduling policy, for operators.
    pub policy: String,
    /// Executor cores.
    pub cores: u32,
    /// Calls running when it wrote this.
    pub running: u32,
    /// Calls waiting.
    pub queued: u32,
    /// The work it holds, in microseconds.
    pub work_us: u64,
    /// Whether it ranks calls by their expected time (SEPT, Fair-Choice, EECT, RECT).
    #[serde(default)]
    pub ranked: bool,
    /// The work it holds by class of expected time, in nanoseconds
    /// ([`mote_cluster::Backlog::by_class`]): what a new call would wait for there. Empty from
    /// a node that predates it: then all of `work_us` counts as ahead of a new call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backlog_ns: Vec<u64>,
    /// Whether it is stopping.
    pub draining: bool,
    /// Where its embedded store replica serves its peers, in the edge set-up: the other
    /// nodes' replicas pull from it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_peer: Option<String>,
    /// Which node this is beyond its name: an id kept in its data directory, so that a node
    /// restarted on another address after a crash takes its name back at once, while another
    /// node given the same name is refused.
    #[serde(default)]
    pub instance: String,
    /// When it wrote this, in milliseconds since the Unix epoch: in the edge set-up a dead
    /// node's key is never deleted on the other replicas (only the replica that granted a
    /// lease expires it), so a name is free again once its key is old.
    #[serde(default)]
    pub written_ms: u64,
}

impl NodeKey {
    /// The report this key makes for the node called `name`.
    pub(crate) fn report(&self, name: &str) -> Report {
        Report {
            name: NodeName::from(name),
            url: self.url.clone(),
            load: self.load(),
            draining: self.draining,
        }
    }

    pub(crate) fn load(&self) -> Load {
        let backlog = match self.backlog_ns.is_empty() {
            true => Backlog::all_ahead(Duration::from_micros(self.work_us)),
            false => Backlog::from_classes(self.ranked, &self.backlog_ns),
        };
        Load {
            cores: self.cores,
            running: self.running,
            queued: self.queued,
            backlog,
        }
    }

    /// Whether the node wrote this within `within` of `now_ms`.
    pub(crate) fn fresh(&self, now_ms: u64, within: Duration) -> bool {
        now_ms.saturating_sub(self.written_ms) < within.as_millis() as u64
    }

    pub(crate) fn to_json(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a node key always serialises")
    }

    pub(crate) fn from_json(value: &[u8]) -> Result<Self, serde_json::Error> {
        serde_json::from_slice(value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_reads_back_as_the_report_it_was_written_from() {
        let key = NodeKey {
            url: "http://127.0.0.1:8081".into(),
            policy: "fc".into(),
            cores: 2,
            running: 1,
            queued: 3,
            work_us: 1500,
            ranked: true,
            backlog_ns: vec![0, 500_000, 0, 1_000_000],
            draining: false,
            store_peer: Some("http://127.0.0.1:2380".into()),
            instance: "c0ffee".into(),
            written_ms: 1,
        };
        let read = NodeKey::from_json(&key.to_json()).unwrap();
        assert_eq!(read, key);
        let report = read.report("n1");
        assert_eq!(report.name.as_str(), "n1");
        assert_eq!(report.load.work(), Duration::from_micros(1500));
        let backlog = report.load.backlog;
        assert!(backlog.is_ranked());
        assert_eq!(backlog.by_class()[..4], [0, 500_000, 0, 1_000_000]);
        assert_eq!(report.load.queued, 3);
        assert!(NodeKey::from_json(b"{\"url\":1}").is_err());
        assert!(read.fresh(1_000, Duration::from_secs(1)));
        assert!(!read.fresh(1_001, Duration::from_secs(1)));
    }

    #[test]
    fn a_key_without_the_edge_fields_reads_as_written_long_ago() {
        let old = br#"{"url":"http://a","policy":"fc","cores":1,"running":0,"queued":0,"work_us":0,"draining":false}"#;
        let read = NodeKey::from_json(old).unwrap();
        assert_eq!((read.store_peer, read.written_ms), (None, 0));
        assert!(read.instance.is_empty());
        let old = br#"{"url":"http://a","policy":"fc","cores":1,"running":1,"queued":0,"work_us":7,"draining":false}"#;
        let load = NodeKey::from_json(old).unwrap().load();
        assert_eq!(
            load.backlog.ahead_of(Duration::ZERO),
            Duration::from_micros(7),
            "all of an old node's work is ahead of a new call"
        );
    }
}
