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
