//! Late correction: a call placed on a node that then falls behind may still run sooner
//! elsewhere. A node with a core free and no call waiting asks a peer for calls
//! ([`Placement::pull_from`]); the peer hands over some that have not started, those that would
//! start last there while each would wait at least [`Placement::pull_worth`]
//! (`mote_node::Node::hand_over`), and forwards each once, marked so that it is never moved or
//! forwarded again. Pulling rather than pushing: the idle node knows first hand that it has a
//! core free, where a busy node knows it of a peer only from a report up to a second old.
//!
//! The peer asked is one with calls waiting where the last call to start would wait longest
//! ([`Member::longest_wait_at`]), if that is at least the pull's worth; one that gave nothing
//! is not asked again until it reports ([`Placement::pulled`]), so an idle node does not keep
//! asking a peer whose backlog its report overstated.

use super::Placement;
use crate::membership::NodeName;
use std::time::Duration;

impl Placement {
    /// The peer this node, which has a core free and no call waiting, should ask for calls:
    /// the one that takes calls and has some waiting, where the last to start is expected to
    /// wait longest, if
    /// that wait is worth a call's trip here ([`Placement::pull_worth`]). Ties go to the
    /// name's hash.
    pub fn pull_from(&self) -> Option<NodeName> {
        let now = self.view.now();
        let worth = self.pull_worth();
        let me = self.view.me();
        self.view
            .members()
            .filter(|m| m.name() != me && m.takes_calls() && !m.dry)
            // Running calls count in the wait but cannot move: a peer with none waiting has
            // nothing to give.
            .filter(|m| m.has_waiting_at(now))
            .map(|m| (m.longest_wait_at(now), m))
            .filter(|(wait, _)| *wait >= worth)
            .max_by_key(|(wait, m)| (*wait, m.seed))
            .map(|(_, m)| m.name().clone())
    }

    /// The least wait that makes a call worth moving to another node: the forwarding cost and
    /// the cost of running away from its homes ([`crate::PlacementConfig::away`]). The node
    /// asked applies it to each call it hands over.
    pub fn pull_worth(&self) -> Duration {
        self.forward + self.away
    }

    /// Counts a call of expected time `expected` that this node handed to `peer` (which asked
    /// for it) on the peer's load, as a call placed there is, until it is answered or the peer
    /// reports.
    pub fn handed_over(&mut self, peer: &str, expected: Duration) {
        self.view.sent(peer, expected);
    }

    /// Says that `peer`, asked for calls, handed over `moved`: if none, it is not asked again
    /// until it reports.
    pub fn pulled(&mut self, peer: &str, moved: u32) {
        if let Some(member) = self.view.get_mut(peer)
            && moved == 0
        {
            member.dry = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::membership::tests::{idle, seen};
    use crate::{Backlog, CLASSES, Event, Load, Membership, Placement, PlacementConfig, Report};
    use proptest::prelude::*;
    use std::time::Duration;

    const MS: Duration = Duration::from_millis(1);

    /// A node of `cores` cores reporting `work` waiting in its longest class.
    fn busy(name: &str, cores: u32, work: Duration) -> Report {
        let mut classes = [0; CLASSES];
        classes[CLASSES - 1] = work.as_nanos() as u64;
        let backlog = Backlog::from_classes(true, &classes);
        Report {
            load: Load {
                cores,
                running: cores,
                queued: 1,
                backlog,
            },
            ..idle(name, cores)
        }
    }

    fn placement(peers: Vec<Report>) -> Placement {
        let mut view = Membership::new(idle("me", 1), Duration::ZERO);
        for peer in peers {
            view.apply(seen(peer));
        }
        Placement::new(view, PlacementConfig::default())
    }

    #[test]
    fn the_peer_furthest_behind_is_asked_until_it_gives_nothing() {
        let mut p = placement(vec![
            busy("a", 2, 40 * MS),
            busy("b", 1, 30 * MS),
            idle("c", 4),
            busy("d", 4, 4 * MS),
        ]);
        // a: 20 ms a core, b: 30, d: 1 ms, below the 1.15 ms a pull is worth.
        assert_eq!(p.pull_from().unwrap().as_str(), "b");
        p.pulled("b", 2);
        assert_eq!(p.pull_from().unwrap().as_str(), "b");
        p.pulled("b", 0);
        assert_eq!(p.pull_from().unwrap().as_str(), "a");
        p.pulled("a", 0);
        assert_eq!(p.pull_from(), None);
        // A new report makes it worth asking again.
        p.apply(Event::Seen {
            report: busy("b", 1, 30 * MS),
            at: Duration::ZERO,
        });
        assert_eq!(p.pull_from().unwrap().as_str(), "b");
        // Its backlog ages: 29 ms on, b holds 1 ms, not worth a trip (and a gave nothing).
        p.set_my_calls(0, 0, 29 * MS);
        assert_eq!(p.pull_from(), None);
    }

    #[test]
    fn a_peer_that_stops_or_cannot_be_reached_is_not_asked() {
        let mut p = placement(vec![busy("a", 1, 40 * MS), busy("b", 1, 30 * MS)]);
        p.unreachable("a");
        assert_eq!(p.pull_from().unwrap().as_str(), "b");
        p.apply(Event::Seen {
            report: Report {
                draining: true,
                ..busy("b", 1, 30 * MS)
            },
            at: Duration::ZERO,
        });
        assert_eq!(p.pull_from(), None);
    }

    proptest! {
        /// The peer asked is never this node, one that does not take calls, one with no call
        /// waiting, or one that gave nothing since it reported; its wait is worth the trip, and
        /// no other peer's is longer.
        #[test]
        fn the_peer_asked_is_the_one_furthest_behind(
            peers in prop::collection::vec((1u32..8, 0u32..50, any::<bool>(), any::<bool>(), any::<bool>()), 0..12),
            now_ms in 0u32..30,
        ) {
            let reports: Vec<Report> = peers
                .iter()
                .enumerate()
                .map(|(i, &(cores, ms, draining, _, waiting))| {
                    let mut report = busy(&format!("p{i}"), cores, ms * MS);
                    report.draining = draining;
                    report.load.queued = u32::from(waiting);
                    report
                })
                .collect();
            let mut p = placement(reports);
            for (i, &(.., dry, _)) in peers.iter().enumerate() {
                if dry {
                    p.pulled(&format!("p{i}"), 0);
                }
            }
            p.set_my_calls(0, 0, now_ms * MS);
            let now = now_ms * MS;
            let waits: Vec<Option<Duration>> = peers
                .iter()
                .enumerate()
                .map(|(i, &(_, _, draining, dry, waiting))| {
                    let member = p.view().get(&format!("p{i}")).unwrap();
                    assert_eq!(member.has_waiting_at(now), member.load_at(now).queued > 0);
                    let wait = member.longest_wait_at(now);
                    (!draining && !dry && waiting).then_some(wait)
                })
                .collect();
            let longest = waits.iter().flatten().max().copied();
            match p.pull_from() {
                Some(asked) => {
                    let i: usize = asked.as_str()[1..].parse().unwrap();
                    let wait = waits[i];
                    prop_assert!(wait.is_some(), "asked {asked}, which stops or was dry");
                    prop_assert!(wait.unwrap() >= p.pull_worth());
                    prop_assert_eq!(wait, longest);
                }
                None => prop_assert!(longest.is_none_or(|w| w < p.pull_worth())),
            }
        }
    }
}
