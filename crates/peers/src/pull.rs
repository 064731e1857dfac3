//! Late correction: calls placed on a node that then falls behind move, before they start, to
//! a node that has a core free (the decision is `mote_cluster`'s `placement::pull`).
//!
//! - **Asking** ([`pull`]): every `pull_every`, a node with a core free and no call waiting
//!   asks the peer with calls waiting where the last to start would wait longest for as many
//!   calls as it has free cores, one request at a time over the wire ([`mote_wire::Pull`]).
//!   The calls come as forwarded calls marked [`mote_wire::MOVED`], which run here whatever
//!   the load and never move again. A peer that gives none is not asked again until it
//!   reports.
//! - **Handing over** ([`Peers::hand_over`], behind the `PULL` route): the node asked takes
//!   from its queue calls that have not started and did not move before (a client's, or one a
//!   peer placed here), those that would start last while each would still wait at least what
//!   the trip costs ([`mote_node::Node::hand_over`]); the gateway's handler holding each
//!   forwards it to the node that asked, once.
//!
//! So a call moves at most once, and never after it started: it leaves the queue under the
//! queue's lock, where an executor would take it, and it is forwarded like any other call
//! (if the node that asked cannot be reached, it runs where it was after all).

use crate::membership::Peers;
use mote_wire::{Peer, PeerRequest, Pulled};
use std::sync::{Arc, Weak};
use std::time::Duration;

/// How long an answer to a pull may take: a node that answers later is not worth pulling from.
const PULL_TIMEOUT: Duration = Duration::from_millis(500);

impl Peers {
    /// Hands up to `calls` of this node's waiting calls to the peer `to`, which asked for them;
    /// returns how many. None to a node this node does not know to take calls.
    pub fn hand_over(&self, to: &str, calls: u32) -> u32 {
        let worth = {
            let placement = self.placement.lock();
            match placement.view().get(to) {
                Some(m) if m.takes_calls() && m.name() != self.me.member() => {
                    placement.pull_worth()
                }
                _ => return 0,
            }
        };
        let to: Arc<str> = Arc::from(to);
        let moved = self.node.hand_over(calls as usize, worth, &to) as u32;
        self.metrics.handed_over(moved);
        moved
    }

    /// The URL of member `name`, if this node knows it: where a call handed to it goes.
    pub fn url_of(&self, name: &str) -> Option<String> {
        let placement = self.placement.lock();
        placement.view().get(name).map(|m| m.url().to_owned())
    }

    /// Counts a call of `function` that this node handed to `peer` on the peer's load, as a
    /// call placed there would be, until it is answered or the peer reports.
    pub fn moving_to(&self, peer: &str, function: &str) {
        let expected = self.node.expected(function);
        self.placement.lock().handed_over(peer, expected);
    }

    /// Asks the peer furthest behind for calls, if this node has a core free and no call
    /// waiting; returns how many came.
    async fn pull_once(&self) -> u32 {
        let cores = self.node.cores();
        let (running, queued) = (self.node.busy_executors(), self.node.queued());
        if queued > 0 || running >= cores || self.is_draining() {
            return 0;
        }
        let free = (cores - running) as u32;
        let asked = {
            let mut placement = self.placement.lock();
            placement.set_my_calls(running as u32, 0, self.origin.elapsed());
            placement.pull_from().and_then(|peer| {
                Some((placement.view().get(peer.as_str())?.url().to_owned(), peer))
            })
        };
        let Some((url, peer)) = asked else {
            return 0;
        };
        let request = PeerRequest::pull(free, &self.me_header).within(PULL_TIMEOUT);
        let answer = self
            .wire
            .fetch(&Peer::named(peer.as_str(), &url), request, 1024)
            .await;
        let moved = match answer.map(|body| serde_json::from_slice::<Pulled>(&body)) {
            Ok(Ok(pulled)) => pulled.moved,
            Ok(Err(e)) => {
                tracing::warn!(peer = peer.as_str(), error = %e, "a peer's answer to a pull is not a count of calls");
                0
            }
            Err(e) => {
                tracing::debug!(error = %e, "a pull got no answer");
                0
            }
        };
        self.placement.lock().pulled(peer.as_str(), moved);
        self.metrics.pulled(moved);
        moved
    }
}

/// Asks for calls every `pull_every` while the node can take them (see the module's doc).
pub(crate) async fn pull(peers: Weak<Peers>) {
    let Some(every) = peers.upgrade().and_then(|p| p.config.pull_every) else {
        return;
    };
    let mut tick = tokio::time::interval(every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(p) = peers.upgrade() else { return };
        if !p.has_others() {
            continue;
        }
        // The calls that come are on their way: the next look at the cores must find them.
        if p.pull_once().await > 0 {
            tick.reset();
        }
    }
}
