//! The cluster as one node sees it, for `GET /v1/cluster`, `/healthz` and the dashboard: its
//! members and their load, its state store, the calls it forwarded to each peer, and the store
//! replicas it pulls from.

use crate::membership::Peers;
use crate::store_peering::ReplicaLag;
use mote_api::{ClusterView, MemberState, MemberView, StoreView};
use serde::Serialize;

/// The calls one node sent to a peer, by how they went.
#[derive(Clone, Debug, Serialize, PartialEq, Eq)]
pub struct Forwarded {
    /// The peer.
    pub peer: String,
    /// Calls it answered.
    pub answered: u64,
    /// Calls not sent: it could not be reached.
    pub unreachable: u64,
    /// Calls sent that it did not answer.
    pub lost: u64,
}

impl Peers {
    /// The cluster as this node sees it, for `GET /v1/cluster`.
    pub fn view(&self) -> ClusterView {
        let now = self.origin.elapsed();
        let placement = self.placement.lock();
        let nodes = placement
            .view()
            .members()
            .map(|m| {
                let load = m.load();
                MemberView {
                    name: m.name().to_string(),
                    url: m.url().to_owned(),
                    state: match (m.draining(), m.unreachable()) {
                        (true, _) => MemberState::Draining,
                        (false, true) => MemberState::Unreachable,
                        (false, false) => MemberState::Up,
                    },
                    me: m.name() == self.me.member(),
                    cores: load.cores,
                    running: load.running,
                    queued: load.queued,
                    work_ms: load.work().as_secs_f64() * 1e3,
                    heard_ms_ago: now.saturating_sub(m.heard_at()).as_millis() as u64,
                }
            })
            .collect();
        drop(placement);
        ClusterView {
            node: self.me.to_string(),
            store: self.store_view(),
            nodes,
        }
    }

    fn store_view(&self) -> StoreView {
        let lost = self.store_lost.lock().clone();
        StoreView {
            endpoints: self.store.endpoints().to_owned(),
            reachable: lost.is_none(),
            unreachable_for_ms: lost
                .as_ref()
                .map(|(since, _)| since.elapsed().as_millis() as u64),
            error: lost.map(|(_, error)| error),
        }
    }

    /// The calls this node sent to each peer it sees, by outcome.
    pub fn forwarded(&self) -> Vec<Forwarded> {
        self.others()
            .into_iter()
            .map(|(peer, _)| Forwarded {
                answered: self.metrics.count(peer.as_str(), "answered"),
                unreachable: self.metrics.count(peer.as_str(), "unreachable"),
                lost: self.metrics.count(peer.as_str(), "lost"),
                peer: peer.to_string(),
            })
            .collect()
    }

    /// In the edge set-up, the store replicas this node's replica pulls from and how far
    /// behind each it is; empty otherwise.
    pub fn store_replicas(&self) -> Vec<ReplicaLag> {
        match &self.config.store {
            Some((_, peering)) => peering.lag(),
            None => Vec::new(),
        }
    }

    /// `None` while the store answers; otherwise what `/healthz` says of it.
    pub fn store_trouble(&self) -> Option<String> {
        let lost = self.store_lost.lock();
        lost.as_ref().map(|(since, error)| {
            format!(
                "the state store at {} has not answered for {} ms ({error}); serving the functions this node knows, with the last membership it saw",
                self.store.endpoints(),
                since.elapsed().as_millis()
            )
        })
    }
}
