//! Where a call that arrived at this node runs.
//!
//! Each function has a few *home* nodes, the first [`PlacementConfig::homes`] of the nodes that
//! take calls, ranked by rendezvous hashing of the function's name with each node's: every node
//! computes the same homes from the same members, a node joining or leaving moves only the
//! functions it is (or becomes) a home of, and a home that cannot take calls is replaced by the
//! next node in the function's ranking. Keeping a function on its homes keeps its code resident
//! there, as OpenWhisk's home invoker does.
//!
//! A call from a client runs, in this order of preference:
//! 1. here, if this node is a home with a free core (no forwarding cost);
//! 2. on the first home with a free core: for a peer, one of the free cores its last report
//!    showed, of which each of the cluster's nodes may fill its share until the next report;
//! 3. on the node with a free core and the least expected work per core;
//! 4. when no node has a core free, on the node with the least expected work per core (homes,
//!    then this node, first among equals).
//!
//! A call a peer forwarded runs here, whatever this node's load: it is never forwarded twice.
//! Nodes that are stopping, and those the caller could not reach for this call (`exclude`),
//! take no call; when no node can, the call is refused.

use crate::membership::{Member, Membership, NodeName};
use std::collections::HashMap;
use std::time::Duration;

/// The most home nodes a function can have.
pub const MAX_HOMES: usize = 8;

/// How calls are placed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlacementConfig {
    /// Home nodes per function (1 to [`MAX_HOMES`]).
    pub homes: usize,
}

impl Default for PlacementConfig {
    fn default() -> Self {
        Self { homes: 2 }
    }
}

/// Where a call came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Origin {
    /// A client: the call may be forwarded.
    Client,
    /// A peer that forwarded it: it runs here.
    Peer,
}

/// Where a call runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// On this node.
    Here,
    /// On this peer.
    Forward(NodeName),
    /// Nowhere: every node is stopping or was unreachable for this call.
    Refuse,
}

/// Places calls over this node's view of the cluster.
#[derive(Clone, Debug)]
pub struct Placement {
    view: Membership,
    homes: usize,
    /// Each function's homes while the set of takers stays as it was at `ranked_at`: ranking
    /// hashes the function with every node, a cost that grows with the cluster (measured in
    /// `benches/placement.rs`), while the set changes only when nodes join, leave or stop. One
    /// entry per function placed: the node places only calls of functions it knows.
    ranked: HashMap<Box<str>, Vec<NodeName>>,
    ranked_at: u64,
    /// The nodes that take calls, as of `ranked_at`: each may send to a peer its share of
    /// the peer's free cores.
    senders: u32,
}

impl Placement {
    /// Places calls over `view`.
    pub fn new(view: Membership, config: PlacementConfig) -> Self {
        let senders = view.members().filter(|m| m.takes_calls()).count();
        Self {
            ranked_at: view.takers_changed(),
            senders: u32::try_from(senders).unwrap_or(u32::MAX),
            view,
            homes: config.homes.clamp(1, MAX_HOMES),
            ranked: HashMap::new(),
        }
    }

    /// This node's view of the cluster.
    pub fn view(&self) -> &Membership {
        &self.view
    }

    /// Applies a change in the cluster.
    pub fn apply(&mut self, event: crate::Event) {
        self.view.apply(event);
    }

    /// Says that `peer` could not be reached: it takes no call until it reports again.
    pub fn unreachable(&mut self, peer: &str) {
        self.view.unreachable(peer);
    }

    /// Says that a call of expected time `expected` forwarded to `peer` has been answered: it
    /// no longer counts on the peer's load.
    pub fn answered(&mut self, peer: &str, expected: Duration) {
        self.view.answered(peer, expected);
    }

    /// Sets this node's own load, measured at `at` (see [`Membership::set_my_load`]).
    pub fn set_my_load(&mut self, load: crate::Load, at: Duration) {
        self.view.set_my_load(load, at);
    }

    /// The home nodes of `function`, best first.
    pub fn homes(&self, function: &str) -> Vec<NodeName> {
        let homes = self.ranked_homes(function, &[]);
        homes.iter().flatten().map(|m| m.name().clone()).collect()
    }

    /// Where a call of `function`, expected to take `expected`, runs; `exclude` names the nodes
    /// already tried for this call that could not be reached. The call counts on the chosen
    /// node's load until that node reports again.
    pub fn place(
        &mut self,
        function: &str,
        expected: Duration,
        origin: Origin,
        exclude: &[NodeName],
    ) -> Decision {
        let me = self.view.me().clone();
        let chosen = match origin {
            Origin::Peer => me.clone(),
            Origin::Client => match self.choose(function, exclude) {
                Some(name) => name,
                None => return Decision::Refuse,
            },
        };
        self.view.sent(chosen.as_str(), expected);
        match chosen == me {
            true => Decision::Here,
            false => Decision::Forward(chosen),
        }
    }

    fn choose(&mut self, function: &str, exclude: &[NodeName]) -> Option<NodeName> {
        self.refresh();
        let homes = match exclude.is_empty() {
            true => {
                self.rank(function);
                self.ranked_homes_cached(function)
            }
            false => self.ranked_homes(function, exclude),
        };
        let homes = || homes.iter().flatten().copied();
        let me = self.view.me();
        let now = self.view.now();
        let senders = self.senders;
        // This node knows its own load first hand; a peer's free cores are shared among the
        // nodes that send to it.
        let free = |m: &&Member| match m.name() == me {
            true => m.load_at(now).has_free_core(),
            false => m.free_for(now, senders),
        };
        let is_home = |m: &Member| homes().any(|h| h.name() == m.name());
        let chosen = homes()
            .find(|m| m.name() == me && free(m))
            .or_else(|| homes().find(free))
            .or_else(|| {
                self.takers(exclude).filter(free).min_by_key(|m| {
                    let load = m.load_at(now);
                    (
                        load.work_per_core(),
                        load.calls_per_core_milli(),
                        m.name() != me,
                    )
                })
            })
            .or_else(|| {
                self.takers(exclude).min_by_key(|m| {
                    let load = m.load_at(now);
                    (
                        load.work_per_core(),
                        load.calls_per_core_milli(),
                        !is_home(m),
                        m.name() != me,
                    )
                })
            })?;
        Some(chosen.name().clone())
    }

    /// Forgets the rankings and recounts the takers once the set of takers changed.
    fn refresh(&mut self) {
        if self.ranked_at != self.view.takers_changed() {
            self.ranked.clear();
            self.ranked_at = self.view.takers_changed();
            self.senders = u32::try_from(self.takers(&[]).count()).unwrap_or(u32::MAX);
        }
    }

    /// Ranks `function`'s homes among every taker, unless they are ranked for this set of
    /// takers already ([`Placement::refresh`] first).
    fn rank(&mut self, function: &str) {
        if !self.ranked.contains_key(function) {
            let homes = self.homes(function);
            self.ranked.insert(function.into(), homes);
        }
    }

    /// `function`'s homes as [`Placement::rank`] left them.
    fn ranked_homes_cached(&self, function: &str) -> [Option<&Member>; MAX_HOMES] {
        let mut homes = [None; MAX_HOMES];
        for (slot, name) in homes.iter_mut().zip(&self.ranked[function]) {
            *slot = self.view.get(name.as_str());
        }
        homes
    }

    /// The nodes that may take a call: up, not stopping, not excluded; by name.
    fn takers<'a>(&'a self, exclude: &'a [NodeName]) -> impl Iterator<Item = &'a Member> + 'a {
        self.view
            .members()
            .filter(move |m| m.takes_calls() && !exclude.contains(m.name()))
    }

    /// The first `homes` takers in `function`'s rendezvous ranking, best first.
    fn ranked_homes<'a>(
        &'a self,
        function: &str,
        exclude: &'a [NodeName],
    ) -> [Option<&'a Member>; MAX_HOMES] {
        let mut best: [Option<(u64, &Member)>; MAX_HOMES] = [None; MAX_HOMES];
        for member in self.takers(exclude) {
            let score = xxhash_rust::xxh3::xxh3_64_with_seed(function.as_bytes(), member.seed);
            // Insertion into the sorted prefix of length `homes`; ties go to the smaller name,
            // which comes first in `takers`, so every node ranks alike.
            let mut entry = Some((score, member));
            for slot in best.iter_mut().take(self.homes) {
                match (*slot, entry) {
                    (None, _) => {
                        *slot = entry;
                        break;
                    }
                    (Some((held, _)), Some((new, _))) if new > held => {
                        entry = std::mem::replace(slot, entry);
                    }
                    _ => {}
                }
            }
        }
        best.map(|slot| slot.map(|(_, member)| member))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Event;
    use crate::membership::Report;
    use crate::membership::tests::{idle, seen};
    use proptest::prelude::*;

    const MS: Duration = Duration::from_millis(1);

    /// Node `me` of a cluster of idle nodes `names`, each with `cores` cores.
    fn cluster(me: &str, names: &[&str], cores: u32) -> Placement {
        let mut view = Membership::new(idle(me, cores), Duration::ZERO);
        for name in names {
            view.apply(seen(idle(name, cores)));
        }
        Placement::new(view, PlacementConfig::default())
    }

    fn client(p: &mut Placement, function: &str) -> Decision {
        p.place(function, 10 * MS, Origin::Client, &[])
    }

    /// The node a decision at `me` names.
    fn node(me: &str, decision: &Decision) -> String {
        match decision {
            Decision::Here => me.to_owned(),
            Decision::Forward(n) => n.to_string(),
            Decision::Refuse => panic!("refused"),
        }
    }

    #[test]
    fn a_lone_node_runs_everything_until_it_stops() {
        let mut p = cluster("n1", &[], 1);
        for _ in 0..5 {
            assert_eq!(client(&mut p, "f"), Decision::Here);
        }
        let mut stopping = idle("n1", 1);
        stopping.draining = true;
        p.apply(seen(stopping));
        assert_eq!(client(&mut p, "f"), Decision::Refuse);
        assert_eq!(p.place("f", MS, Origin::Peer, &[]), Decision::Here);
    }

    #[test]
    fn an_idle_cluster_runs_a_function_on_a_home_and_here_when_this_node_is_one() {
        let names = ["n1", "n2", "n3", "n4"];
        for function in ["resize", "echo", "sort", "hash", "render"] {
            let homes = cluster("n1", &names[1..], 1).homes(function);
            assert_eq!(homes.len(), 2, "{function}");
            for me in names {
                let others: Vec<&str> = names.iter().copied().filter(|&n| n != me).collect();
                let mut p = cluster(me, &others, 1);
                assert_eq!(p.homes(function), homes, "every node ranks alike");
                let ran = node(me, &client(&mut p, function));
                match homes.iter().any(|h| h.as_str() == me) {
                    true => assert_eq!(ran, me),
                    false => assert_eq!(ran, homes[0].as_str()),
                }
            }
        }
    }

    #[test]
    fn a_burst_at_one_node_spreads_over_the_cluster() {
        let mut p = cluster("n1", &["n2", "n3"], 1);
        let ran: Vec<String> = (0..6).map(|_| node("n1", &client(&mut p, "f"))).collect();
        let mut nodes = ran.clone();
        nodes.sort();
        nodes.dedup();
        assert_eq!(nodes.len(), 3, "{ran:?}");
        let homes = p.homes("f");
        assert!(homes.iter().any(|h| h.as_str() == ran[0]), "{ran:?}");
        assert!(homes.iter().any(|h| h.as_str() == ran[1]), "{ran:?}");
    }

    #[test]
    fn calls_of_unknown_length_spread_by_count_and_answered_calls_stop_counting() {
        let mut p = cluster("n1", &["n2", "n3"], 1);
        let mut ran: Vec<String> = (0..9)
            .map(|_| node("n1", &p.place("f", Duration::ZERO, Origin::Client, &[])))
            .collect();
        ran.sort();
        assert_eq!(ran, ["n1", "n1", "n1", "n2", "n2", "n2", "n3", "n3", "n3"]);
        for peer in ["n2", "n3"] {
            for _ in 0..3 {
                p.answered(peer, Duration::ZERO);
            }
        }
        let me = crate::Load {
            cores: 1,
            running: 1,
            queued: 2,
            work: Duration::ZERO,
        };
        p.set_my_load(me, Duration::ZERO);
        let next = node("n1", &p.place("f", Duration::ZERO, Origin::Client, &[]));
        assert_ne!(next, "n1", "the peers answered, so they are free again");
    }

    #[test]
    fn each_node_fills_only_its_share_of_a_peers_free_cores() {
        let names: Vec<String> = (2..=10).map(|i| format!("n{i}")).collect();
        let others: Vec<&str> = names.iter().map(String::as_str).collect();
        let mut p = cluster("n1", &others, 4);
        let mut busy = idle("n1", 4);
        busy.load.running = 4;
        p.apply(seen(busy));
        let function = (0..)
            .map(|i| format!("f{i}"))
            .find(|f| !p.homes(f).iter().any(|h| h.as_str() == "n1"))
            .unwrap();
        let homes = p.homes(&function);
        // Ten nodes share each home's four free cores: this one may fill one of them.
        let ran: Vec<String> = (0..2)
            .map(|_| node("n1", &client(&mut p, &function)))
            .collect();
        assert_eq!(ran[0], homes[0].as_str());
        assert_eq!(ran[1], homes[1].as_str());
        let third = node("n1", &client(&mut p, &function));
        assert!(
            !homes.iter().any(|h| h.as_str() == third),
            "both homes had their share: {third}"
        );
        // A fresh report gives a new share.
        p.apply(seen(idle(homes[0].as_str(), 4)));
        assert_eq!(node("n1", &client(&mut p, &function)), homes[0].as_str());
    }

    #[test]
    fn busy_homes_overflow_to_the_least_loaded_node() {
        let mut p = cluster("n1", &["n2", "n3", "n4"], 2);
        let homes = p.homes("f");
        let busy = |name: &NodeName, work_ms: u64| Event::Seen {
            report: Report {
                load: crate::Load {
                    cores: 2,
                    running: 2,
                    queued: 1,
                    work: Duration::from_millis(work_ms),
                },
                ..idle(name.as_str(), 2)
            },
            at: Duration::ZERO,
        };
        for home in &homes {
            p.apply(busy(home, 100));
        }
        let others: Vec<NodeName> = ["n1", "n2", "n3", "n4"]
            .into_iter()
            .map(NodeName::from)
            .filter(|n| !homes.contains(n))
            .collect();
        p.apply(busy(&others[0], 40));
        p.apply(busy(&others[1], 30));
        assert_eq!(node("n1", &client(&mut p, "f")), others[1].as_str());
        p.apply(busy(&others[1], 300));
        assert_eq!(node("n1", &client(&mut p, "f")), others[0].as_str());
    }

    #[test]
    fn unreachable_and_departed_nodes_take_no_calls_and_a_returning_node_does() {
        let mut p = cluster("n1", &["n2", "n3"], 1);
        // A function this node is not a home of.
        let function = (0..)
            .map(|i| format!("f{i}"))
            .find(|f| !p.homes(f).iter().any(|h| h.as_str() == "n1"))
            .unwrap();
        let homes = p.homes(&function);
        let (first, second) = (homes[0].clone(), homes[1].clone());
        // This node is busy, the others idle, so a call runs here only when no other can take it.
        let fresh_call = |p: &mut Placement, exclude: &[NodeName]| {
            let mut busy = idle("n1", 1);
            busy.load.running = 1;
            p.apply(seen(busy));
            p.apply(seen(idle("n2", 1)));
            p.apply(seen(idle("n3", 1)));
            p.place(&function, MS, Origin::Client, exclude)
        };
        assert_eq!(fresh_call(&mut p, &[]), Decision::Forward(first.clone()));
        let tried = [first.clone()];
        assert_eq!(
            fresh_call(&mut p, &tried),
            Decision::Forward(second.clone())
        );
        let all: Vec<NodeName> = ["n1", "n2", "n3"].map(NodeName::from).to_vec();
        assert_eq!(fresh_call(&mut p, &all), Decision::Refuse);

        // Homes ranked for earlier calls are ranked again when a node leaves, stops or returns.
        p.apply(Event::Gone(first.clone()));
        assert_eq!(
            p.place(&function, MS, Origin::Client, &[]),
            Decision::Forward(second.clone())
        );
        p.apply(seen(idle(first.as_str(), 1)));
        assert_eq!(p.homes(&function), homes);
        assert_eq!(fresh_call(&mut p, &[]), Decision::Forward(first.clone()));
        let mut stopping = idle(first.as_str(), 1);
        stopping.draining = true;
        p.apply(seen(stopping));
        assert_eq!(
            p.place(&function, MS, Origin::Client, &[]),
            Decision::Forward(second.clone())
        );

        // A node this node could not connect to takes nothing until it reports again.
        p.apply(seen(idle(first.as_str(), 1)));
        p.apply(seen(idle(second.as_str(), 1)));
        p.unreachable(first.as_str());
        assert!(!p.view().get(first.as_str()).unwrap().takes_calls());
        assert_eq!(
            fresh_call_keeping(&mut p, &function),
            Decision::Forward(second.clone())
        );
        p.apply(seen(idle(first.as_str(), 1)));
        assert_eq!(
            fresh_call_keeping(&mut p, &function),
            Decision::Forward(first)
        );
        p.unreachable("n1");
        assert!(
            p.view().get("n1").unwrap().takes_calls(),
            "this node is never unreachable"
        );
    }

    /// A call of `function` while this node (n1) is busy and the others are as they were.
    fn fresh_call_keeping(p: &mut Placement, function: &str) -> Decision {
        let mut busy = idle("n1", 1);
        busy.load.running = 1;
        p.apply(seen(busy));
        p.place(function, MS, Origin::Client, &[])
    }

    /// A cluster of `n` nodes named n0.., seen from n0, with random loads and some stopping.
    fn arbitrary_cluster() -> impl Strategy<Value = (Placement, Vec<NodeName>)> {
        let node = (0u32..3, 0u32..4, 0u64..50, prop::bool::weighted(0.2));
        (prop::collection::vec(node, 1..12), 1usize..4).prop_map(|(nodes, homes)| {
            let mut view = None;
            let mut names = Vec::new();
            for (i, (running, queued, work_ms, draining)) in nodes.into_iter().enumerate() {
                let name = format!("n{i}");
                let report = Report {
                    load: crate::Load {
                        cores: 2,
                        running,
                        queued,
                        work: Duration::from_millis(work_ms),
                    },
                    draining,
                    ..idle(&name, 2)
                };
                names.push(NodeName::from(name.as_str()));
                match &mut view {
                    None => view = Some(Membership::new(report, Duration::ZERO)),
                    Some(view) => view.apply(seen(report)),
                }
            }
            let view = view.expect("at least one node");
            (Placement::new(view, PlacementConfig { homes }), names)
        })
    }

    proptest! {
        #[test]
        fn calls_go_only_to_nodes_that_can_take_them(
            (mut p, names) in arbitrary_cluster(),
            excluded in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
            functions in prop::collection::vec("[a-z]{1,8}", 1..20),
        ) {
            let exclude: Vec<NodeName> = excluded.iter().map(|i| i.get(&names).clone()).collect();
            for function in &functions {
                let takers: Vec<NodeName> = p
                    .view()
                    .members()
                    .filter(|m| !m.draining() && !exclude.contains(m.name()))
                    .map(|m| m.name().clone())
                    .collect();
                match p.place(function, MS, Origin::Client, &exclude) {
                    Decision::Refuse => prop_assert!(takers.is_empty()),
                    Decision::Here => prop_assert!(takers.contains(p.view().me())),
                    Decision::Forward(to) => prop_assert!(takers.contains(&to)),
                }
                prop_assert_eq!(p.place(function, MS, Origin::Peer, &exclude), Decision::Here);
            }
        }

        #[test]
        fn a_node_leaving_moves_only_the_functions_it_was_home_of(
            (mut p, names) in arbitrary_cluster(),
            leaving in any::<prop::sample::Index>(),
            functions in prop::collection::vec("[a-z]{1,8}", 1..20),
        ) {
            let leaving = leaving.get(&names).clone();
            prop_assume!(&leaving != p.view().me());
            let before: Vec<Vec<NodeName>> = functions.iter().map(|f| p.homes(f)).collect();
            p.apply(Event::Gone(leaving.clone()));
            for (function, before) in functions.iter().zip(before) {
                let after = p.homes(function);
                let kept: Vec<&NodeName> = before.iter().filter(|n| **n != leaving).collect();
                prop_assert_eq!(
                    after.iter().take(kept.len()).collect::<Vec<_>>(),
                    kept,
                    "{}", function
                );
            }
        }
    }
}
