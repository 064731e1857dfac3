//! Late correction in the simulated cluster, as the real node does it (`mote_peers`' `pull`,
//! `mote_node::Node::hand_over`): a node with a core free and no call waiting asks the peer its
//! placement finds furthest behind ([`mote_cluster::Placement::pull_from`]) for as many calls
//! as it has free cores. The pull reaches the peer half the forwarding cost later; the peer
//! hands over, from its queue, calls that did not move before (a client's, or one a peer
//! placed there) and that have not started, those that would start last while each would still wait
//! at least [`mote_cluster::Placement::pull_worth`] (`Local::release`), and forwards each: it
//! lands on the node that asked another half forwarding cost later and runs there whatever its
//! load, its response going back through the node it moved from and, if another node placed
//! it there, through that one too (a second trip back).
//! The peer's answer (how many moved) reaches the node that asked as the calls land; a peer
//! that gave none is not asked again until it reports ([`mote_cluster::Placement::pulled`]).
//!
//! A node has one pull outstanding at most, and does not pull again while calls handed to it
//! are on their way. A node looks for calls to pull whenever one of its cores may have come
//! free (a call ended), as it reports, and when a peer's report reaches it: the real node
//! looks every 2 ms, and between those events nothing it looks at changes but the age of the
//! reports, which only makes a peer's wait shorter.

use super::{Balancer, Sim, Step};
use crate::CallId;
use std::time::Duration;

impl Sim<'_> {
    /// Has `node` ask a peer for calls at `now` if it can take some: late correction is on,
    /// queues rank calls (an arrival-order queue hands over nothing: pulls would bring none),
    /// it has a core free, no call waiting, no pull outstanding and no call on its way.
    pub(super) fn maybe_pull(&mut self, node: usize, now: u64) {
        let spec = self.spec;
        if !spec.late_correction || spec.balancer != Balancer::Nodes || spec.policy.arrival_order()
        {
            return;
        }
        let n = &self.nodes[node];
        if n.pulling || n.promised > 0 {
            return;
        }
        let (running, queued) = n.local.calls();
        if queued > 0 || running >= spec.cores {
            return;
        }
        let load = self.load(node, now, n.mean_expected);
        let n = &mut self.nodes[node];
        n.placement.set_my_load(load, Duration::from_nanos(now));
        let Some(peer) = n.placement.pull_from() else {
            return;
        };
        n.pulling = true;
        self.pulls += 1;
        let step = Step::Pull {
            from: self.index[&peer],
            by: node,
            most: spec.cores - running,
        };
        self.agenda.at(now + self.there_ns(), step);
    }

    /// Node `by`'s pull for up to `most` calls reaches node `from` at `now`: `from` hands over
    /// what it may and answers.
    pub(super) fn hand_over(&mut self, from: usize, by: usize, most: u32, now: u64) {
        let calls = &self.calls;
        // A call that waits here and did not move before: a client's, or one a peer placed
        // here.
        let movable = |call: CallId| {
            let c = &calls[call];
            c.runs_on == from && !c.moved
        };
        let worth = self.nodes[from].placement.pull_worth();
        let taken = self.nodes[from]
            .local
            .release(most as usize, worth, movable);
        let there = self.there_ns();
        for &call in &taken {
            let c = &mut self.calls[call];
            assert!(!c.moved && c.runs_on == from, "call {call} may not move");
            c.moved = true;
            c.runs_on = by;
            c.relay = (c.entry != from).then_some(from);
            let function = c.function;
            let victim = &mut self.nodes[from];
            // As the real gateway: the call counts on the peer's load until it is answered.
            let expected = victim.local.expected(function as u64);
            victim
                .placement
                .handed_over(self.names[by].as_str(), expected);
            self.agenda.at(now + there, Step::Land(call));
        }
        if !taken.is_empty() {
            self.nodes[by].promised += taken.len() as u32;
            // A preemptive node that holds fewer calls may have less to look at.
            self.reschedule(from, now);
        }
        let moved = taken.len() as u32;
        self.agenda
            .at(now + there, Step::Pulled { by, from, moved });
    }

    /// Node `from`'s answer reaches node `by` at `now`: it handed over `moved` calls, which
    /// landed already. `by` may ask again (another peer, if this one gave none).
    pub(super) fn pulled(&mut self, by: usize, from: usize, moved: u32, now: u64) {
        let node = &mut self.nodes[by];
        node.pulling = false;
        node.placement.pulled(self.names[from].as_str(), moved);
        self.maybe_pull(by, now);
    }
}
