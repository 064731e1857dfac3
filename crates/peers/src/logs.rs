//! The log fan-out: a node asked for a function's log asks every other member for its own
//! entries at once (from where the gateway says for each peer) and gives back each one's answer
//! as it streams, or why it gave none.

use crate::forward::ForwardError;
use crate::membership::Peers;
use mote_cluster::NodeName;
use mote_wire::{LogsFrom, Peer, PeerRequest};
use std::time::Duration;

impl Peers {
    /// Asks every other member that `from` gives a starting point for, at once, for its own
    /// entries of `function` (the internal route, so that a peer does not ask its own peers
    /// again), and gives each one's response, or why it gave none within `wait`, by member.
    pub async fn fetch_logs(
        &self,
        function: &str,
        from: impl Fn(&NodeName) -> Option<LogsFrom>,
        wait: Duration,
    ) -> Vec<(
        NodeName,
        Result<hyper::Response<hyper::body::Incoming>, ForwardError>,
    )> {
        let mut asks = tokio::task::JoinSet::new();
        for (peer, url) in self.others() {
            let Some(from) = from(&peer) else {
                continue;
            };
            let (wire, me, function) = (
                self.wire.clone(),
                self.me_header.clone(),
                function.to_owned(),
            );
            asks.spawn(async move {
                let request = PeerRequest::logs(&function, from, &me).within(wait);
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
