//! The cluster as one node sees it (`GET /v1/cluster`): its members and their load, and its
//! state store.

use serde::{Deserialize, Serialize};
use std::fmt;

/// The cluster as one node sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClusterView {
    /// The node answering.
    pub node: String,
    /// Its state store.
    pub store: StoreView,
    /// Every node it sees, itself included, by name.
    pub nodes: Vec<MemberView>,
}

/// Whether a node reaches its state store.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StoreView {
    /// The store's URLs.
    pub endpoints: String,
    /// Whether its last request answered.
    pub reachable: bool,
    /// How long it has not answered.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unreachable_for_ms: Option<u64>,
    /// The error it gave.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A node as another sees it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MemberView {
    /// Its name.
    pub name: String,
    /// Where its API is.
    pub url: String,
    /// Whether it takes calls.
    pub state: MemberState,
    /// Whether it is the node answering.
    pub me: bool,
    /// Executor cores.
    pub cores: u32,
    /// Calls running, as last reported (plus those sent since).
    pub running: u32,
    /// Calls waiting.
    pub queued: u32,
    /// The expected work it holds, in milliseconds.
    pub work_ms: f64,
    /// How long ago its key was last written, as this node saw it.
    pub heard_ms_ago: u64,
}

/// Whether a node takes calls, as another sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum MemberState {
    /// It takes calls.
    Up,
    /// It is stopping.
    Draining,
    /// The node answering could not connect to it since it last reported.
    Unreachable,
}

impl MemberState {
    /// The name the API gives it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Draining => "draining",
            Self::Unreachable => "unreachable",
        }
    }
}

/// A state compares with the name the API gives it, as code that read the name compares.
impl PartialEq<&str> for MemberState {
    fn eq(&self, name: &&str) -> bool {
        self.as_str() == *name
    }
}

impl fmt::Display for MemberState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cluster_view_round_trips_with_its_members_states_as_the_api_names_them() {
        let view = ClusterView {
            node: "n1".into(),
            store: StoreView {
                endpoints: "http://127.0.0.1:2379".into(),
                reachable: true,
                unreachable_for_ms: None,
                error: None,
            },
            nodes: [
                MemberState::Up,
                MemberState::Draining,
                MemberState::Unreachable,
            ]
            .into_iter()
            .enumerate()
            .map(|(i, state)| MemberView {
                name: format!("n{i}"),
                url: format!("http://127.0.0.1:{}", 8080 + i),
                state,
                me: i == 0,
                cores: 2,
                running: 1,
                queued: 0,
                work_ms: 0.5,
                heard_ms_ago: 10,
            })
            .collect(),
        };
        let written = serde_json::to_value(&view).unwrap();
        let states: Vec<&str> = written["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n["state"].as_str().unwrap())
            .collect();
        assert_eq!(states, ["up", "draining", "unreachable"]);
        assert!(written["store"].get("error").is_none(), "{written}");
        let again: ClusterView = serde_json::from_value(written).unwrap();
        assert_eq!(again, view);
        assert_eq!(format!("{:<9}|", MemberState::Up), "up       |");
        assert!(MemberState::Draining == "draining" && MemberState::Up != "draining");
    }
}
