//! The log fan-out: a node asked for a function's log asks every other member for its own
//! entries at once (the gateway builds each peer's path with [`mote_wire::Route::Logs`]) and
//! gives back each one's answer as it streams, or why it gave none.

use crate::forward::ForwardError;
use crate::membership::Peers;
use mote_cluster::NodeName;
use mote_wire::{Peer, PeerRequest};
use std::time::Duration;

impl Peers {
    /// Sends `GET` of the path `path_for` gives a member (a function's logs, asked with
    /// `local=true` so that a peer does not ask its own peers again) to every other member it
    /// gives one for, at once, and gives each one's response, or why it gave none within
    /// `wait`, by member.
    pub async fn fetch_logs(
        &self,
        path_for: impl Fn(&NodeName) -> Option<String>,
        wait: Duration,
    ) -> Vec<(
        NodeName,
        Result<hyper::Response<hyper::body::Incoming>, ForwardError>,
    )> {
        let mut asks = tokio::task::JoinSet::new();
        for (peer, url) in self.others() {
            let Some(path) = path_for(&peer) else {
                continue;
            };
            let (wire, me) = (self.wire.clone(), self.me_header.clone());
            asks.spawn(async move {
                let request = PeerRequest::logs(&path, &me).within(wait);
                let response = wire
                    .send(&Peer::named(peer.as_str(), &url), request)
                    .await
                    .map_err(ForwardError::from);
                (peer, response)
            });
        }
        let mut answers = Vec::new();
        while let Some(answer) = asks.join_next().await {
            if let Ok(answer) = answer {
                answers.push(answer);
            }
        }
        answers
    }
}
