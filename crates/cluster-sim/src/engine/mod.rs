//! The event loop of one simulated run: a cluster of nodes, each placing calls with the real
//! [`Placement`] and running them with [`Local`], under one burst, in virtual time.
//!
//! A call reaches a node chosen uniformly at random (a load balancer in front). That node sets
//! its own load as measured now ([`Placement::set_my_load`]) and places the call with its own
//! expected time for the function; a call placed on a peer lands there half the forwarding cost
//! later and runs there whatever that node's load (as `mote_peers::Peers::route` does for a
//! peer's call, without placing it again), and its response comes back the other half later,
//! when the entry node tells its placement the call was answered. Each node writes its load to
//! its peers every report interval (staggered, so not all at once), and they apply it as an
//! [`Event::Seen`]: between reports a node knows its peers only from those reports and from the
//! calls it sent them itself.
//!
//! With late correction ([`ClusterSpec::late_correction`], `engine::pull`), a node with a core
//! free and no call waiting asks the peer furthest behind for calls that have not started, as
//! the real node does; the calls it is handed move once, as forwarded calls.
//!
//! The loop is pure: no I/O, no threads, no clock; the same inputs give the same outcome.

use crate::CallId;
use crate::local::{Admitted, Local};
use crate::preempt::PreemptSpec;
use crate::suite::SimFunction;
use crate::workload::SplitMix;
use mote_cluster::{
    Backlog, Decision, Event, Load, Membership, NodeName, Origin, Placement, PlacementConfig,
    Report,
};
use mote_sched::Policy;
use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::time::Duration;

/// The cluster of one run.
#[derive(Clone, Debug)]
pub struct ClusterSpec {
    /// Nodes.
    pub nodes: usize,
    /// Cores of each node.
    pub cores: u32,
    /// Every node's scheduling policy.
    pub policy: Policy,
    /// Home nodes per function (`mote up --homes`).
    pub homes: usize,
    /// How often each node writes its load to its peers (`mote up` writes it three times a
    /// lease TTL: every second by default).
    pub report_interval: Duration,
    /// What forwarding adds to a call's response time, half on the way there, half back.
    pub forward_cost: Duration,
    /// Fair-Choice's window `T`.
    pub fc_window: Duration,
    /// How nodes under a ranking policy preempt; `None`: they run every call to its end.
    pub preempt: Option<PreemptSpec>,
    /// Who decides where a call runs.
    pub balancer: Balancer,
    /// Busy nodes a node draws at random to compare ([`PlacementConfig::choices`]).
    pub choices: usize,
    /// Whether a node with a core free and no call waiting pulls calls that would wait from
    /// the peer furthest behind (late correction, as `mote up` does); only under
    /// [`Balancer::Nodes`], and only where queues rank calls (an arrival-order queue hands
    /// over nothing).
    pub late_correction: bool,
}

/// Who decides where a call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Balancer {
    /// mote: the node a call reaches places it with its own [`Placement`], knowing its peers
    /// from their reports and the calls it sent them.
    Nodes,
    /// Hermod's (Kaffes et al., SoCC 2022): one balancer in front binds each call to a node as
    /// it arrives (early binding), knowing exactly how many calls each node holds, since every
    /// call and response passes through it; it packs calls on the first node (in a fixed order)
    /// with a core free, and once none has, sends them to the node holding the fewest
    /// (hybrid). No forwarding: the balancer's hop is the one every call makes.
    Hermod,
}

/// What became of one call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallOutcome {
    /// Its function, by index in the suite.
    pub function: usize,
    /// The node it ran on.
    pub node: usize,
    /// Whether the node it reached forwarded it: placed it on a peer, or handed it to one that
    /// asked ([`CallOutcome::moved`]).
    pub forwarded: bool,
    /// Whether it waited on a node until a peer pulled it (late correction).
    pub moved: bool,
    /// From reaching the cluster to its response leaving it.
    pub response: Duration,
}

/// What became of every call of a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunOutcome {
    /// The calls that ran, in schedule order.
    pub calls: Vec<CallOutcome>,
    /// Calls no node would take (none, while no node stops).
    pub refused: usize,
    /// When the last response left, after the burst started.
    pub last_response: Duration,
    /// Pulls the nodes sent (late correction), whether or not they brought calls.
    pub pulls: usize,
}

/// The name of node `i`.
pub fn node_name(i: usize) -> NodeName {
    NodeName::from(format!("n{i}").as_str())
}

/// Runs `plan` (offsets from the start, indices into `suite`) on `spec`; `seed` picks the node
/// each call reaches. Every node starts warm: each function ran once at its idle time, as after
/// the burst experiment's warm-up.
pub fn run(
    spec: &ClusterSpec,
    suite: &[SimFunction],
    plan: &[(Duration, usize)],
    seed: u64,
) -> RunOutcome {
    let mut sim = Sim::new(spec, suite, plan, seed);
    sim.run();
    sim.outcome()
}

/// One call as the run follows it. Times in nanoseconds since the start.
struct Call {
    function: usize,
    /// The node the load balancer sent it to.
    entry: usize,
    /// The node it runs on.
    runs_on: usize,
    arrived_ns: u64,
    /// When it reached the node it runs on.
    landed_ns: u64,
    responded_ns: Option<u64>,
    /// Handed by the node it waited on to a peer that pulled it: it moves no more.
    moved: bool,
    /// The node a call placed on a peer waited on before it moved: its response passes back
    /// through it, a second trip.
    relay: Option<usize>,
}

#[derive(Clone, Copy, Debug)]
enum Step {
    /// A forwarded call reaches the node it runs on.
    Land(CallId),
    /// A call that held a core (or waited without one) is done.
    End(usize, CallId),
    /// A sharing node's next call may be done, or a preemptive node's next call end or look
    /// at its running calls, if nothing changed since (the generation).
    NodeEvent(usize, u64),
    /// A forwarded call's response reaches the node the client called.
    Respond(CallId),
    /// A node writes its load.
    Report(usize),
    /// Node `by`'s pull for up to `most` calls reaches node `from`.
    Pull { from: usize, by: usize, most: u32 },
    /// Node `from`'s answer to node `by`'s pull reaches it: it handed over `moved` calls.
    Pulled { by: usize, from: usize, moved: u32 },
}

/// A step at a time; steps at the same time run in the order they were scheduled.
struct Timed {
    at_ns: u64,
    seq: u64,
    step: Step,
}

impl PartialEq for Timed {
    fn eq(&self, other: &Self) -> bool {
        (self.at_ns, self.seq) == (other.at_ns, other.seq)
    }
}

impl Eq for Timed {}

impl PartialOrd for Timed {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Timed {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at_ns, self.seq).cmp(&(other.at_ns, other.seq))
    }
}

#[derive(Default)]
struct Agenda {
    steps: BinaryHeap<Reverse<Timed>>,
    seq: u64,
}

impl Agenda {
    fn at(&mut self, at_ns: u64, step: Step) {
        self.seq += 1;
        self.steps.push(Reverse(Timed {
            at_ns,
            seq: self.seq,
            step,
        }));
    }

    fn next_at(&self) -> Option<u64> {
        self.steps.peek().map(|Reverse(t)| t.at_ns)
    }

    fn pop(&mut self) -> Option<(u64, Step)> {
        self.steps.pop().map(|Reverse(t)| (t.at_ns, t.step))
    }
}

struct SimNode {
    placement: Placement,
    local: Local,
    /// Bumped whenever the sharing or preemptive node's calls change, so an event scheduled
    /// before is ignored.
    generation: u64,
    /// Its mean expected time as of its last report.
    mean_expected: Duration,
    /// Whether it asked a peer for calls and has no answer yet.
    pulling: bool,
    /// Calls handed to it that have not landed yet.
    promised: u32,
}

struct Sim<'a> {
    spec: &'a ClusterSpec,
    suite: &'a [SimFunction],
    nodes: Vec<SimNode>,
    names: Vec<NodeName>,
    index: HashMap<NodeName, usize>,
    calls: Vec<Call>,
    agenda: Agenda,
    /// Calls not yet answered or refused.
    open: usize,
    refused: usize,
    /// Under [`Balancer::Hermod`], each node's calls bound and not yet answered.
    in_flight: Vec<u32>,
    /// Pulls sent.
    pulls: usize,
}

impl<'a> Sim<'a> {
    fn new(
        spec: &'a ClusterSpec,
        suite: &'a [SimFunction],
        plan: &[(Duration, usize)],
        seed: u64,
    ) -> Self {
        let n = spec.nodes.max(1);
        let names: Vec<NodeName> = (0..n).map(node_name).collect();
        let idle = |name: &NodeName| Report {
            name: name.clone(),
            // There is no network: nothing is ever sent to a URL.
            url: String::new(),
            load: Load::idle(spec.cores, Backlog::empty(!spec.policy.arrival_order())),
            draining: false,
        };
        let warm_mean = suite
            .iter()
            .map(|f| f.idle)
            .sum::<Duration>()
            .checked_div(suite.len() as u32)
            .unwrap_or_default();
        let nodes = names
            .iter()
            .map(|me| {
                let mut view = Membership::new(idle(me), Duration::ZERO);
                for peer in names.iter().filter(|p| *p != me) {
                    view.apply(Event::Seen {
                        report: idle(peer),
                        at: Duration::ZERO,
                    });
                }
                let mut local = Local::new(spec.policy, spec.cores, spec.fc_window, spec.preempt);
                for (key, f) in suite.iter().enumerate() {
                    local.warm(key as u64, f.idle);
                }
                SimNode {
                    placement: Placement::new(
                        view,
                        PlacementConfig {
                            homes: spec.homes,
                            forward: spec.forward_cost,
                            choices: spec.choices,
                            ..PlacementConfig::default()
                        },
                    ),
                    local,
                    generation: 0,
                    mean_expected: warm_mean,
                    pulling: false,
                    promised: 0,
                }
            })
            .collect();
        // The burst's schedule was drawn from `seed`: the load balancer's stream must differ.
        let mut balancer = SplitMix(seed ^ 0xBA1A_9CE5_0FC0_FFEE);
        let calls = plan
            .iter()
            .map(|&(at, function)| {
                let entry = balancer.below(n);
                Call {
                    function,
                    entry,
                    runs_on: entry,
                    arrived_ns: at.as_nanos() as u64,
                    landed_ns: 0,
                    responded_ns: None,
                    moved: false,
                    relay: None,
                }
            })
            .collect();
        let mut agenda = Agenda::default();
        let interval = spec.report_interval.as_nanos().max(1) as u64;
        for node in 0..n {
            agenda.at(interval * node as u64 / n as u64, Step::Report(node));
        }
        Self {
            spec,
            suite,
            index: names.iter().cloned().zip(0..).collect(),
            names,
            nodes,
            calls,
            agenda,
            open: plan.len(),
            refused: 0,
            in_flight: vec![0; n],
            pulls: 0,
        }
    }

    /// What became of the calls, once the run is over.
    fn outcome(&self) -> RunOutcome {
        let calls: Vec<CallOutcome> = self
            .calls
            .iter()
            .filter_map(|c| {
                Some(CallOutcome {
                    function: c.function,
                    node: c.runs_on,
                    forwarded: c.runs_on != c.entry || c.relay.is_some(),
                    moved: c.moved,
                    response: Duration::from_nanos(c.responded_ns?.saturating_sub(c.arrived_ns)),
                })
            })
            .collect();
        let last = self.calls.iter().filter_map(|c| c.responded_ns).max();
        RunOutcome {
            calls,
            refused: self.refused,
            last_response: Duration::from_nanos(last.unwrap_or(0)),
            pulls: self.pulls,
        }
    }

    fn run(&mut self) {
        let mut next_arrival = 0;
        loop {
            // Arrivals come from the schedule, already in order, rather than the agenda: a
            // burst at scale holds millions of calls.
            let arrival = self.calls.get(next_arrival).map(|c| c.arrived_ns);
            match arrival {
                Some(at) if self.agenda.next_at().is_none_or(|step| at <= step) => {
                    self.arrive(next_arrival, at);
                    next_arrival += 1;
                }
                _ => match self.agenda.pop() {
                    Some((now, step)) => {
                        self.step(now, step, next_arrival < self.calls.len());
                    }
                    None => break,
                },
            }
        }
    }

    fn step(&mut self, now: u64, step: Step, arrivals_left: bool) {
        match step {
            Step::Land(call) => self.land(call, now),
            Step::End(node, call) => {
                let function = self.calls[call].function;
                let processing = self.suite[function].idle;
                if let Some(next) =
                    self.nodes[node]
                        .local
                        .end(now, call, function as u64, processing)
                {
                    self.started(node, next, now);
                }
                self.done(call, now);
                self.maybe_pull(node, now);
            }
            Step::NodeEvent(node, generation) => {
                if generation != self.nodes[node].generation {
                    return;
                }
                let calls = &self.calls;
                let ended = self.nodes[node].local.advance(
                    now,
                    |c| calls[c].function as u64,
                    |c| calls[c].landed_ns,
                );
                self.reschedule(node, now);
                for call in ended {
                    self.done(call, now);
                }
                self.maybe_pull(node, now);
            }
            Step::Respond(call) => {
                let (entry, runs_on, function, relay) = {
                    let c = &self.calls[call];
                    (c.entry, c.runs_on, c.function, c.relay)
                };
                // As the real gateways: each node that forwarded the call hears the answer,
                // with its own expected time when it came.
                if let Some(relay) = relay {
                    let node = &mut self.nodes[relay];
                    let expected = node.local.expected(function as u64);
                    node.placement
                        .answered(self.names[runs_on].as_str(), expected);
                }
                let node = &mut self.nodes[entry];
                let expected = node.local.expected(function as u64);
                let sent_to = relay.unwrap_or(runs_on);
                node.placement
                    .answered(self.names[sent_to].as_str(), expected);
                self.respond(call, now);
            }
            Step::Report(node) => {
                let mean = self.mean_expected(node);
                self.nodes[node].mean_expected = mean;
                let report = Report {
                    name: self.names[node].clone(),
                    url: String::new(),
                    load: self.load(node, now, mean),
                    draining: false,
                };
                let at = Duration::from_nanos(now);
                for (_, peer) in self
                    .nodes
                    .iter_mut()
                    .enumerate()
                    .filter(|(i, _)| *i != node)
                {
                    peer.placement.apply(Event::Seen {
                        report: report.clone(),
                        at,
                    });
                }
                if self.open > 0 || arrivals_left {
                    let interval = self.spec.report_interval.as_nanos().max(1) as u64;
                    self.agenda.at(now + interval, Step::Report(node));
                }
                // The node looks for calls to pull as it reports, and each peer as the report
                // reaches it: the real node looks every 2 ms, so acts on a report at once.
                self.maybe_pull(node, now);
                for peer in (0..self.nodes.len()).filter(|&peer| peer != node) {
                    self.maybe_pull(peer, now);
                }
            }
            Step::Pull { from, by, most } => self.hand_over(from, by, most, now),
            Step::Pulled { by, from, moved } => self.pulled(by, from, moved, now),
        }
    }

    /// The mean expected time of the functions `node` has run, as the real node computes it for
    /// its report.
    fn mean_expected(&self, node: usize) -> Duration {
        let local = &self.nodes[node].local;
        let (mut sum, mut known) = (Duration::ZERO, 0u32);
        for f in 0..self.suite.len() as u64 {
            let expected = local.expected(f);
            if !expected.is_zero() {
                sum += expected;
                known += 1;
            }
        }
        sum.checked_div(known).unwrap_or_default()
    }

    /// `node`'s load at `now`: its calls and its backlog (a sharing node's from `mean`, its
    /// mean expected time: fresh in a report, as of the last report on the call path, as in
    /// `mote_peers`).
    fn load(&self, node: usize, now: u64, mean: Duration) -> Load {
        let local = &self.nodes[node].local;
        let (running, queued) = local.calls();
        Load {
            cores: self.spec.cores,
            running,
            queued,
            backlog: local.backlog(now, mean),
        }
    }

    fn arrive(&mut self, call: CallId, now: u64) {
        if self.spec.balancer == Balancer::Hermod {
            let node = self.hermod_binds();
            self.in_flight[node] += 1;
            let c = &mut self.calls[call];
            (c.entry, c.runs_on) = (node, node);
            return self.land(call, now);
        }
        let (entry, function) = (self.calls[call].entry, self.calls[call].function);
        let load = self.load(entry, now, self.nodes[entry].mean_expected);
        let node = &mut self.nodes[entry];
        node.placement.set_my_load(load, Duration::from_nanos(now));
        let expected = node.local.expected(function as u64);
        let name = self.suite[function].name;
        match node.placement.place(name, expected, Origin::Client, &[]) {
            Decision::Here => self.land(call, now),
            Decision::Forward(peer) => {
                self.calls[call].runs_on = self.index[&peer];
                self.agenda.at(now + self.there_ns(), Step::Land(call));
            }
            Decision::Refuse => {
                self.refused += 1;
                self.open -= 1;
            }
        }
    }

    fn land(&mut self, call: CallId, now: u64) {
        let c = &mut self.calls[call];
        c.landed_ns = now;
        let (node, function) = (c.runs_on, c.function);
        if c.moved {
            let promised = &mut self.nodes[node].promised;
            *promised = promised.saturating_sub(1);
        }
        let f = self.suite[function];
        match self.nodes[node]
            .local
            .admit(now, function as u64, call, f.idle, f.waits)
        {
            Admitted::Runs(first) => self.started(node, first, now),
            Admitted::Rescheduled => self.reschedule(node, now),
            Admitted::Waits => {}
        }
    }

    /// `call` took a core of `node` (or began its wait) at `now`.
    fn started(&mut self, node: usize, call: CallId, now: u64) {
        let idle = self.suite[self.calls[call].function].idle;
        self.agenda
            .at(now + idle.as_nanos() as u64, Step::End(node, call));
    }

    /// Schedules `node`'s next event as of `now`, superseding the one scheduled before.
    fn reschedule(&mut self, node: usize, now: u64) {
        let n = &mut self.nodes[node];
        n.generation += 1;
        if let Some(at) = n.local.next_event(now) {
            let generation = n.generation;
            self.agenda.at(at, Step::NodeEvent(node, generation));
        }
    }

    /// The node Hermod's balancer binds the next call to: the first with a core free, or else
    /// the one holding the fewest calls (the first of equals).
    fn hermod_binds(&self) -> usize {
        let cores = self.spec.cores;
        let calls = self.in_flight.iter().copied().enumerate();
        calls
            .clone()
            .find(|&(_, held)| held < cores)
            .or_else(|| calls.min_by_key(|&(_, held)| held))
            .map_or(0, |(node, _)| node)
    }

    /// `call` is done on the node it ran on.
    fn done(&mut self, call: CallId, now: u64) {
        if self.spec.balancer == Balancer::Hermod {
            self.in_flight[self.calls[call].runs_on] -= 1;
        }
        let c = &self.calls[call];
        match c.runs_on == c.entry {
            true => self.respond(call, now),
            false => {
                let back = self.spec.forward_cost.as_nanos() as u64 - self.there_ns();
                let trips = 1 + u64::from(c.relay.is_some());
                self.agenda.at(now + back * trips, Step::Respond(call));
            }
        }
    }

    fn respond(&mut self, call: CallId, now: u64) {
        let answered = self.calls[call].responded_ns.replace(now);
        assert!(answered.is_none(), "call {call} was answered twice");
        self.open -= 1;
    }

    /// The forwarding cost on the way to the peer: half of it.
    fn there_ns(&self) -> u64 {
        self.spec.forward_cost.as_nanos() as u64 / 2
    }
}

mod pull;
#[cfg(test)]
mod tests;
