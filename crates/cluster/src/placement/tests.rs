//! Placement decisions on small clusters, and properties over arbitrary ones.

use super::*;
use crate::membership::Report;
use crate::membership::tests::{idle, seen};
use crate::{Backlog, Event};
use proptest::prelude::*;

const MS: Duration = Duration::from_millis(1);

/// Placement that compares every busy node, so a test can tell which is best.
fn every_node() -> PlacementConfig {
    PlacementConfig {
        choices: 0,
        ..PlacementConfig::default()
    }
}

/// Node `me` of a cluster of idle nodes `names`, each with `cores` cores.
fn cluster(me: &str, names: &[&str], cores: u32) -> Placement {
    let mut view = Membership::new(idle(me, cores), Duration::ZERO);
    for name in names {
        view.apply(seen(idle(name, cores)));
    }
    Placement::new(view, every_node())
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
        backlog: Backlog::all_ahead(Duration::ZERO),
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
                backlog: Backlog::all_ahead(Duration::from_millis(work_ms)),
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
fn a_short_call_waits_for_short_work_only_on_a_ranked_node() {
    // Every node's one core is busy. n2 (preempting) runs a 2 s call that yields after
    // 2 ms more; n3 queues three 5 ms calls behind a 5 ms one; this node runs a call to its
    // end, 1 s left.
    let mut p = cluster("n1", &["n2", "n3"], 1);
    let report = |name: &str, backlog: Backlog, queued: u32| {
        seen(Report {
            load: crate::Load {
                cores: 1,
                running: 1,
                queued,
                backlog,
            },
            ..idle(name, 1)
        })
    };
    let mut long = Backlog::ranked();
    long.running(2000 * MS, 1500 * MS, 2 * MS);
    let mut short = Backlog::ranked();
    short.running(5 * MS, 5 * MS, 5 * MS);
    for _ in 0..3 {
        short.queue(5 * MS);
    }
    p.apply(report("n2", long, 0));
    p.apply(report("n3", short, 3));
    p.apply(report("n1", Backlog::all_ahead(1000 * MS), 0));
    // A function none of them is a home of would pay the same to go anywhere.
    p.set_my_load(p.view().get("n1").unwrap().load(), Duration::ZERO);
    assert_eq!(
        node("n1", &p.place("f", 10 * MS, Origin::Client, &[])),
        "n2"
    );
    // A long call waits behind n2's long one and n3's short ones: n3 first.
    assert_eq!(
        node("n1", &p.place("f", 3000 * MS, Origin::Client, &[])),
        "n3"
    );
    // Half a second later n3's short calls are done and n2 has done 500 ms of its call.
    p.set_my_load(p.view().get("n1").unwrap().load(), 500 * MS);
    let n3 = p.view().get("n3").unwrap();
    assert_eq!(n3.wait_at(500 * MS, 10 * MS), Duration::ZERO);
    assert_eq!(
        n3.wait_at(500 * MS, 3000 * MS),
        3000 * MS,
        "only the long call this node sent since counts"
    );
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
    let calls = prop::collection::vec(0u64..3000, 0..6);
    let node = (0u32..3, calls, any::<bool>(), prop::bool::weighted(0.2));
    (prop::collection::vec(node, 1..12), 1usize..4).prop_map(|(nodes, homes)| {
        let mut view = None;
        let mut names = Vec::new();
        for (i, (running, calls, ranked, draining)) in nodes.into_iter().enumerate() {
            let name = format!("n{i}");
            let mut backlog = Backlog::empty(ranked);
            for &ms in &calls {
                backlog.queue(Duration::from_millis(ms));
            }
            let report = Report {
                load: crate::Load {
                    cores: 2,
                    running,
                    queued: calls.len() as u32,
                    backlog,
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
        (
            Placement::new(
                view,
                PlacementConfig {
                    homes,
                    ..every_node()
                },
            ),
            names,
        )
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

    /// Once no home has a free core, a call goes to a node where it is expected to finish
    /// no later than anywhere else, counting forwarding and leaving its homes.
    #[test]
    fn a_call_goes_where_it_is_expected_to_finish_first(
        (mut p, _) in arbitrary_cluster(),
        functions in prop::collection::vec(("[a-z]{1,8}", 1u64..3000), 1..20),
        at_ms in 0u64..2000,
    ) {
        let config = every_node();
        p.set_my_load(p.view().get(p.view().me().as_str()).unwrap().load(), Duration::from_millis(at_ms));
        for (function, ms) in &functions {
            let expected = Duration::from_millis(*ms);
            let homes = p.homes(function);
            let now = p.view().now();
            let senders = p.view().members().filter(|m| m.takes_calls()).count() as u32;
            let me = p.view().me().clone();
            let free = |m: &Member| match *m.name() == me {
                true => m.load_at(now).has_free_core(),
                false => m.free_for(now, senders),
            };
            let home_free = homes.iter().any(|h| free(p.view().get(h.as_str()).unwrap()));
            let finish = |m: &Member| {
                let wait = if free(m) { Duration::ZERO } else { m.wait_at(now, expected) };
                let forward = if *m.name() == me { Duration::ZERO } else { config.forward };
                let away = if homes.contains(m.name()) { Duration::ZERO } else { config.away };
                wait + forward + away
            };
            let finishes: Vec<(NodeName, Duration)> = p
                .view()
                .members()
                .filter(|m| m.takes_calls())
                .map(|m| (m.name().clone(), finish(m)))
                .collect();
            let best = finishes.iter().map(|(_, f)| *f).min();
            let chosen = match p.place(function, expected, Origin::Client, &[]) {
                Decision::Here => me.clone(),
                Decision::Forward(to) => to,
                Decision::Refuse => {
                    prop_assert!(best.is_none());
                    continue;
                }
            };
            if !home_free {
                let chosen = finishes.iter().find(|(n, _)| *n == chosen).map(|(_, f)| *f);
                prop_assert_eq!(chosen, best, "{} expected {:?}: {:?}", function, expected, finishes);
            }
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

proptest! {
    // The cases that tell (a free node excluded for one call, then wanted by the next) are
    // rare among random clusters: a few thousand runs find them where the default 256 may not.
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// Remembering that every peer was busy never changes a decision: the same cluster
    /// placing the same calls, made to scan every node each time, decides alike.
    #[test]
    fn remembering_that_all_peers_are_busy_changes_no_decision(
        nodes in prop::collection::vec((0u32..6, prop::collection::vec(1u64..2000, 0..4)), 6..30),
        ops in prop::collection::vec((0u8..6, any::<prop::sample::Index>(), 1u64..3000), 1..200),
    ) {
        let report = |i: usize, running: u32, calls: &[u64]| {
            let mut backlog = Backlog::ranked();
            for &ms in calls {
                backlog.queue(Duration::from_millis(ms));
            }
            Report {
                load: crate::Load { cores: 4, running, queued: calls.len() as u32, backlog },
                ..idle(&format!("n{i}"), 4)
            }
        };
        let mut view = Membership::new(report(0, nodes[0].0, &nodes[0].1), Duration::ZERO);
        for (i, (running, calls)) in nodes.iter().enumerate().skip(1) {
            view.apply(seen(report(i, *running, calls)));
        }
        let mut remembering = Placement::new(view, PlacementConfig::default());
        let mut scanning = remembering.clone();
        let mut now = Duration::ZERO;
        for (op, index, ms) in ops {
            let node = index.index(nodes.len());
            match op {
                0 | 1 => {
                    now += Duration::from_millis(ms);
                    for p in [&mut remembering, &mut scanning] {
                        p.set_my_calls(4, 1, now);
                    }
                }
                2 => {
                    let (running, calls) = &nodes[node];
                    let event = Event::Seen { report: report(node, *running, calls), at: now };
                    remembering.apply(event.clone());
                    scanning.apply(event);
                }
                3 => {
                    let name = format!("n{node}");
                    remembering.answered(&name, Duration::from_millis(ms));
                    scanning.answered(&name, Duration::from_millis(ms));
                }
                _ => {
                    let function = format!("f{}", ms % 7);
                    let expected = Duration::from_millis(ms);
                    // Now and then a node was unreachable for this call.
                    let exclude = match ms % 5 {
                        0 => vec![NodeName::from(format!("n{node}").as_str())],
                        _ => Vec::new(),
                    };
                    scanning.forget_busy();
                    let a = remembering.place(&function, expected, Origin::Client, &exclude);
                    let b = scanning.place(&function, expected, Origin::Client, &exclude);
                    prop_assert_eq!(a, b);
                }
            }
        }
    }
}
