//! Runs small enough to work out by hand, under each policy and balancer.

use super::*;

const MS: Duration = Duration::from_millis(1);

fn spec(nodes: usize, cores: u32, policy: Policy) -> ClusterSpec {
    ClusterSpec {
        nodes,
        cores,
        policy,
        homes: 2,
        report_interval: Duration::from_secs(1),
        forward_cost: Duration::from_micros(150),
        fc_window: Duration::from_secs(60),
        preempt: None,
        balancer: Balancer::Nodes,
        choices: 2,
        late_correction: false,
    }
}

fn suite() -> Vec<SimFunction> {
    vec![
        SimFunction {
            name: "long",
            idle: 1000 * MS,
            waits: false,
        },
        SimFunction {
            name: "short",
            idle: 200 * MS,
            waits: false,
        },
        SimFunction {
            name: "nap",
            idle: 1000 * MS,
            waits: true,
        },
    ]
}

fn responses(outcome: &RunOutcome) -> Vec<Duration> {
    outcome.calls.iter().map(|c| c.response).collect()
}

#[test]
fn hermod_packs_calls_on_the_first_free_node_then_spreads_them_by_count() {
    let hermod = ClusterSpec {
        balancer: Balancer::Hermod,
        ..spec(3, 1, Policy::Baseline)
    };
    // One at a time: each finds the first node free.
    let apart = [(Duration::ZERO, 1), (300 * MS, 1), (600 * MS, 1)];
    let outcome = run(&hermod, &suite(), &apart, 1);
    assert!(outcome.calls.iter().all(|c| c.node == 0 && !c.forwarded));
    // Together: the first three fill a node each, the fourth goes to the first of equals,
    // and the fifth to a node holding one call.
    let together = [(Duration::ZERO, 0); 5];
    let outcome = run(&hermod, &suite(), &together, 1);
    let nodes: Vec<usize> = outcome.calls.iter().map(|c| c.node).collect();
    assert_eq!(nodes, [0, 1, 2, 0, 1]);
    // Two long calls sharing node 0's core end at 2 s, as processor sharing gives them.
    assert_eq!(outcome.calls[0].response, 2000 * MS);
    assert_eq!(outcome.calls[2].response, 1000 * MS);
}

#[test]
fn one_core_fifo_runs_calls_one_after_another_in_arrival_order() {
    // long at 0 runs 0–1 s; short at 0.5 s waits, runs 1–1.2 s; long at 0.6 s runs 1.2–2.2 s.
    let plan = [(Duration::ZERO, 0), (500 * MS, 1), (600 * MS, 0)];
    let outcome = run(&spec(1, 1, Policy::Fifo), &suite(), &plan, 1);
    assert_eq!(responses(&outcome), [1000 * MS, 700 * MS, 1600 * MS]);
    assert_eq!(outcome.last_response, 2200 * MS);
    assert!(outcome.calls.iter().all(|c| !c.forwarded && c.node == 0));
}

#[test]
fn one_core_sept_lets_the_short_call_overtake() {
    // The same burst, but two longs wait while the first runs: SEPT runs short before them.
    let plan = [(Duration::ZERO, 0), (500 * MS, 0), (600 * MS, 1)];
    let fifo = run(&spec(1, 1, Policy::Fifo), &suite(), &plan, 1);
    assert_eq!(responses(&fifo), [1000 * MS, 1500 * MS, 1600 * MS]);
    let sept = run(&spec(1, 1, Policy::Sept), &suite(), &plan, 1);
    assert_eq!(responses(&sept), [1000 * MS, 1700 * MS, 600 * MS]);
}

#[test]
fn a_preempting_node_gives_the_short_calls_core_at_the_next_tick() {
    // The long call has run 500 ms, past its quantum, when the short one arrives: at the
    // next tick (500.5 ms) the short call takes the core for its 200 ms, and the long one
    // resumes after, ending 200 ms later than alone.
    let plan = [(Duration::ZERO, 0), (500 * MS, 1)];
    let preemptive = ClusterSpec {
        preempt: Some(PreemptSpec::NODE),
        ..spec(1, 1, Policy::Sept)
    };
    let tick = PreemptSpec::NODE.tick;
    let preempting = run(&preemptive, &suite(), &plan, 1);
    assert_eq!(responses(&preempting), [1200 * MS, 200 * MS + tick]);
    let to_the_end = run(&spec(1, 1, Policy::Sept), &suite(), &plan, 1);
    assert_eq!(responses(&to_the_end), [1000 * MS, 700 * MS]);
}

#[test]
fn processor_sharing_ends_two_equal_calls_together_at_twice_their_time() {
    let plan = [(Duration::ZERO, 0), (Duration::ZERO, 0)];
    let outcome = run(&spec(1, 1, Policy::Baseline), &suite(), &plan, 1);
    assert_eq!(responses(&outcome), [2000 * MS, 2000 * MS]);
}

#[test]
fn a_waiting_call_takes_no_share_under_processor_sharing_but_holds_a_core_otherwise() {
    let plan = [(Duration::ZERO, 0), (Duration::ZERO, 2)];
    let shared = run(&spec(1, 1, Policy::Baseline), &suite(), &plan, 1);
    assert_eq!(responses(&shared), [1000 * MS, 1000 * MS]);
    let queued = run(&spec(1, 1, Policy::Fifo), &suite(), &plan, 1);
    assert_eq!(responses(&queued), [1000 * MS, 2000 * MS]);
}

#[test]
fn a_light_load_runs_on_the_functions_homes_and_an_overload_on_every_node() {
    // No reports during the run: each node knows its peers' load only from the calls it
    // sent them, so a report taken while a home was busy cannot send a call elsewhere.
    let spec = ClusterSpec {
        report_interval: Duration::from_secs(3600),
        ..spec(4, 1, Policy::Fc)
    };
    let homes = {
        let names: Vec<NodeName> = (0..4).map(node_name).collect();
        let mut view = Membership::new(
            Report {
                name: names[0].clone(),
                url: String::new(),
                load: Load::default(),
                draining: false,
            },
            Duration::ZERO,
        );
        for name in &names[1..] {
            view.apply(Event::Seen {
                report: Report {
                    name: name.clone(),
                    url: String::new(),
                    load: Load::default(),
                    draining: false,
                },
                at: Duration::ZERO,
            });
        }
        let homes = Placement::new(
            view,
            PlacementConfig {
                homes: 2,
                ..PlacementConfig::default()
            },
        )
        .homes("short");
        homes.iter().map(|h| h.to_string()).collect::<Vec<_>>()
    };
    // One short call every 300 ms, from clients at random nodes: each finds its homes free.
    let light: Vec<(Duration, usize)> = (0..40).map(|i| (i * 300 * MS, 1)).collect();
    let outcome = run(&spec, &suite(), &light, 7);
    assert!(outcome.calls.iter().any(|c| c.forwarded));
    for c in &outcome.calls {
        assert!(homes.contains(&node_name(c.node).to_string()), "{c:?}");
        let cost = if c.forwarded {
            spec.forward_cost
        } else {
            Duration::ZERO
        };
        assert_eq!(c.response, 200 * MS + cost, "{c:?}");
    }
    // Forty calls at once: the homes are busy, so the others take calls too.
    let burst: Vec<(Duration, usize)> = (0..40).map(|i| (i * MS / 10, 1)).collect();
    let outcome = run(&spec, &suite(), &burst, 7);
    for node in 0..4 {
        let ran = outcome.calls.iter().filter(|c| c.node == node).count();
        assert!(ran >= 5, "node {node} ran {ran} of 40");
    }
}

#[test]
fn a_run_is_the_same_for_the_same_seed() {
    let plan: Vec<(Duration, usize)> = (0..300u32).map(|i| (i * 7 * MS, i as usize % 3)).collect();
    for policy in [Policy::Fc, Policy::Baseline] {
        let spec = spec(3, 2, policy);
        let first = run(&spec, &suite(), &plan, 5);
        assert_eq!(first.calls.len(), 300);
        assert_eq!(first.refused, 0);
        assert_eq!(first, run(&spec, &suite(), &plan, 5));
        let ran_on = |o: &RunOutcome| o.calls.iter().map(|c| c.node).collect::<Vec<_>>();
        assert_ne!(ran_on(&first), ran_on(&run(&spec, &suite(), &plan, 6)));
    }
}

/// Runs `plan` on `spec` with every call reaching node `entry`, once `prepare` set the scene.
fn run_at(
    spec: &ClusterSpec,
    plan: &[(Duration, usize)],
    entry: usize,
    prepare: impl FnOnce(&mut Sim),
) -> RunOutcome {
    let suite = suite();
    let mut sim = Sim::new(spec, &suite, plan, 1);
    for c in &mut sim.calls {
        (c.entry, c.runs_on) = (entry, entry);
    }
    prepare(&mut sim);
    sim.run();
    sim.outcome()
}

/// Has `node` believe that `peer` last reported `load` (at the start).
fn believe(sim: &mut Sim, node: usize, peer: usize, load: Load) {
    let report = Report {
        name: node_name(peer),
        url: String::new(),
        load,
        draining: false,
    };
    sim.nodes[node].placement.apply(Event::Seen {
        report,
        at: Duration::ZERO,
    });
}

/// Two one-core nodes under SEPT, preempting as `preempt` says, pulling as `late_correction`
/// says.
fn pulling(preempt: Option<PreemptSpec>, late_correction: bool) -> ClusterSpec {
    ClusterSpec {
        preempt,
        late_correction,
        ..spec(2, 1, Policy::Sept)
    }
}

#[test]
fn an_idle_node_pulls_calls_that_wait_on_a_busy_one() {
    // Twelve calls reach node 0 at once, which believes node 1 busy for an hour (a stale
    // report), so keeps them all; node 1, idle, hears node 0's report and pulls.
    let plan: Vec<(Duration, usize)> = (0..12).map(|i| (Duration::ZERO, i % 2)).collect();
    let busy = Load {
        cores: 1,
        running: 1,
        queued: 1,
        backlog: Backlog::all_ahead(Duration::from_secs(3600)),
    };
    let stale = |sim: &mut Sim| believe(sim, 0, 1, busy);
    for preempt in [Some(PreemptSpec::NODE), None] {
        let off = run_at(&pulling(preempt, false), &plan, 0, stale);
        assert!(off.calls.iter().all(|c| c.node == 0 && !c.moved));
        let on = run_at(&pulling(preempt, true), &plan, 0, stale);
        assert_eq!(on.calls.len() + on.refused, plan.len());
        assert_eq!(on.refused, 0);
        let moved = on.calls.iter().filter(|c| c.moved).count();
        assert!(moved >= 3, "{moved} moved: {on:?}");
        // Every call node 1 ran it pulled, and a call that moved never moved back.
        for c in &on.calls {
            assert_eq!(c.node == 1, c.moved, "{c:?}");
            assert_eq!(c.forwarded, c.moved, "{c:?}");
        }
        // One core free at a time: a pull brings one call at most.
        assert!(on.pulls >= moved, "{} pulls, {moved} moved", on.pulls);
        let avg = |o: &RunOutcome| o.calls.iter().map(|c| c.response).sum::<Duration>() / 12;
        assert!(
            avg(&on) < avg(&off),
            "{:?} with, {:?} without",
            avg(&on),
            avg(&off)
        );
        assert!(on.last_response < off.last_response);
        assert_eq!(on, run_at(&pulling(preempt, true), &plan, 0, stale));
    }
}

#[test]
fn a_call_placed_on_a_peer_moves_once_at_most() {
    // Node 0 believes node 1 has eight idle cores, so forwards it five of six long calls; it
    // has one. Once its own call ends, node 0 asks node 1 for calls, and those it gets (which
    // it placed there) come back, to stay: a second move would fail the run's own check.
    let spec = ClusterSpec {
        report_interval: Duration::from_secs(3600),
        ..pulling(Some(PreemptSpec::NODE), true)
    };
    let plan = [(Duration::ZERO, 0); 6];
    let roomy = Load::idle(8, Backlog::empty(true));
    let outcome = run_at(&spec, &plan, 0, |sim| believe(sim, 0, 1, roomy));
    assert_eq!(outcome.calls.len(), plan.len());
    assert!(outcome.pulls >= 1, "node 0 never asked");
    let forwarded = outcome.calls.iter().filter(|c| c.forwarded).count();
    assert_eq!(forwarded, 5, "{outcome:?}");
    let moved: Vec<_> = outcome.calls.iter().filter(|c| c.moved).collect();
    assert!(!moved.is_empty(), "{outcome:?}");
    let suite = suite();
    for c in moved {
        assert!(c.node == 0 && c.forwarded, "{c:?}");
        // There and back twice: to node 1, back to node 0 to run, and the response the same
        // way.
        assert!(
            c.response >= suite[c.function].idle + 2 * spec.forward_cost,
            "{c:?}"
        );
    }
}

#[test]
fn late_correction_changes_nothing_under_hermod_nor_in_arrival_order() {
    let plan: Vec<(Duration, usize)> = (0..300u32).map(|i| (i * 3 * MS, i as usize % 3)).collect();
    let clusters = [
        (Policy::Baseline, Balancer::Nodes, None),
        (Policy::Baseline, Balancer::Hermod, None),
        (Policy::Fifo, Balancer::Nodes, None),
        (Policy::Sept, Balancer::Hermod, Some(PreemptSpec::NODE)),
        (Policy::Fc, Balancer::Hermod, None),
    ];
    for (policy, balancer, preempt) in clusters {
        let off = ClusterSpec {
            balancer,
            preempt,
            ..spec(3, 2, policy)
        };
        let on = ClusterSpec {
            late_correction: true,
            ..off.clone()
        };
        let with = run(&on, &suite(), &plan, 5);
        assert_eq!(with.pulls, 0, "{policy} {balancer:?}");
        assert_eq!(with, run(&off, &suite(), &plan, 5), "{policy} {balancer:?}");
    }
}

#[test]
fn with_late_correction_every_call_is_answered_once_whichever_node_the_client_called() {
    // Calls from clients at every node, more than the cores can take: the ranking policies,
    // preemptive or not, pull; no call is lost or answered twice (the loop asserts that), and
    // a run is the same for the same seed.
    let plan: Vec<(Duration, usize)> = (0..400u32).map(|i| (i * 2 * MS, i as usize % 3)).collect();
    for (policy, preempt) in [
        (Policy::Sept, Some(PreemptSpec::NODE)),
        (Policy::Fc, Some(PreemptSpec::NODE)),
        (Policy::Sept, None),
        (Policy::Fc, None),
    ] {
        let spec = ClusterSpec {
            preempt,
            late_correction: true,
            report_interval: 100 * MS,
            ..spec(4, 1, policy)
        };
        let outcome = run(&spec, &suite(), &plan, 3);
        assert_eq!(outcome.calls.len() + outcome.refused, plan.len());
        assert_eq!(outcome.refused, 0);
        assert!(outcome.pulls > 0, "{policy} {preempt:?}");
        assert!(outcome.calls.iter().all(|c| c.forwarded || !c.moved));
        assert_eq!(outcome, run(&spec, &suite(), &plan, 3));
    }
}
