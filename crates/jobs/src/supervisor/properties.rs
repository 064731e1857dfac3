//! The supervisor's invariants under arbitrary interleavings of reports (progress, stale ones,
//! snapshots stored or failed, arrivals, unreachable peers, done, failed), ticks, time passing,
//! nodes lost and back, orders carried out or not (moves, probes, restores), cancels, and
//! another node taking the job over from what its record keeps. A world plays the workers and
//! the controller; after every input it checks what the supervisor answered against what the
//! world saw.

use super::tests::{held, job, name, progress, restore_of, url};
use super::*;
use crate::cursor::Cursor;
use crate::message::{Progress, WorkerMessage};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Duration;

#[derive(Clone, Debug)]
enum Op {
    /// Time passes, in ms.
    Wait(u64),
    /// A worker reports, having spent its load (quarters of a second) in tasks since its last.
    Progress(usize),
    /// A worker reports in a generation that is not the supervisor's.
    Stale(usize),
    Tick,
    NodeDown(usize),
    NodeUp(usize),
    /// A worker stores the partitions it holds at the current barrier, or fails to.
    Snapshot(usize, bool),
    /// Every live worker stores at the current barrier (one fails, if asked), and the job
    /// goes on to the next.
    SnapshotAll(bool),
    Done(usize),
    Failed(usize),
    Unreachable(usize, usize),
    /// The destination of a move under way reports its partitions arrived.
    Arrive(usize),
    MoveNotTaken(usize),
    /// The controller answers a probe: nodes that are up answer, unless `silent`.
    Probed(usize, bool),
    Restored,
    RestoreFailed,
    Cancel,
    /// The controller's node is gone: another takes the job over, and the old one's orders
    /// not carried out yet are lost with it.
    TakeOver,
}

fn op(workers: usize) -> impl Strategy<Value = Op> {
    let w = 0..workers;
    prop_oneof![
        24 => (1u64..2_500).prop_map(Op::Wait),
        40 => w.clone().prop_map(Op::Progress),
        4 => w.clone().prop_map(Op::Stale),
        32 => Just(Op::Tick),
        6 => w.clone().prop_map(Op::NodeDown),
        10 => w.clone().prop_map(Op::NodeUp),
        12 => (w.clone(), prop::bool::weighted(0.1)).prop_map(|(w, f)| Op::Snapshot(w, f)),
        16 => prop::bool::weighted(0.1).prop_map(Op::SnapshotAll),
        3 => w.clone().prop_map(Op::Done),
        1 => w.clone().prop_map(Op::Failed),
        6 => (w.clone(), w).prop_map(|(a, b)| Op::Unreachable(a, b)),
        24 => (0usize..4).prop_map(Op::Arrive),
        4 => (0usize..4).prop_map(Op::MoveNotTaken),
        12 => (0usize..4, prop::bool::weighted(0.2)).prop_map(|(i, s)| Op::Probed(i, s)),
        24 => Just(Op::Restored),
        2 => Just(Op::RestoreFailed),
        1 => Just(Op::Cancel),
        2 => Just(Op::TakeOver),
    ]
}

/// The workers, the nodes and the controller around one supervisor, and what they saw.
struct World {
    s: Supervisor,
    now: Instant,
    snapshots: bool,
    rebalance: bool,
    down: Vec<bool>,
    /// Each worker's time in tasks between two reports, in quarters of a second: some are
    /// slower than others throughout, so partitions move.
    loads: Vec<u64>,
    task_us: Vec<u64>,
    /// Orders the controller has not carried out yet.
    moves: Vec<MoveOrder>,
    probes: Vec<Vec<Target>>,
    restores: Vec<u32>,
    /// The current barrier's iteration.
    iteration: u64,
    /// Partitions stored per (generation, iteration) as the world sent them, and whether a
    /// store failed.
    stored: BTreeMap<(u32, u64), (HashSet<PartitionKey>, bool)>,
    /// Iterations whose snapshot the world saw complete.
    complete: BTreeSet<u64>,
    all: usize,
    generation: u32,
    ended: bool,
}

impl World {
    fn new(loads: Vec<u64>, snapshots: bool, rebalance: bool) -> Self {
        let workers = loads.len();
        let (s, t0) = job(workers, snapshots, rebalance);
        let all = keys(s.map()).count();
        Self {
            s,
            now: t0,
            snapshots,
            rebalance,
            down: vec![false; workers],
            loads,
            task_us: vec![0; workers],
            moves: Vec::new(),
            probes: Vec::new(),
            restores: Vec::new(),
            iteration: 10,
            stored: BTreeMap::new(),
            complete: BTreeSet::new(),
            all,
            generation: 0,
            ended: false,
        }
    }

    fn nodes(&self) -> LiveNodes {
        LiveNodes {
            nodes: (0..self.down.len())
                .filter(|w| !self.down[*w])
                .map(|w| LiveNode {
                    name: name(w),
                    url: url(w),
                })
                .collect(),
        }
    }

    /// Whether the supervisor takes a report of `w` in its generation.
    fn taken(&self, w: usize) -> bool {
        self.s.workers()[w].live && self.s.outcome().is_none()
    }

    fn current(&self, w: usize) -> Progress {
        Progress {
            wall_us: self
                .now
                .saturating_duration_since(self.s.started())
                .as_micros() as u64,
            task_us: self.task_us[w],
            ..progress(w, self.s.generation())
        }
    }

    fn store(&mut self, w: usize, fail: bool) -> Vec<Action> {
        let keys = held(&self.s, w);
        let generation = self.s.generation();
        if self.taken(w) && self.complete.last().is_none_or(|c| *c < self.iteration) {
            let seen = self.stored.entry((generation, self.iteration)).or_default();
            seen.0.extend(keys.iter().copied());
            seen.1 |= fail;
            if seen.0.len() == self.all && !seen.1 {
                self.complete.insert(self.iteration);
            }
        }
        let report = Report::Snapshotted {
            progress: self.current(w),
            iteration: self.iteration,
            keys,
            bytes: 1,
            write_us: 1,
            cursor: Cursor::new(),
            error: fail.then(|| "disk full".to_owned()),
        };
        self.s.on_report(self.now, report)
    }

    /// Plays one input; answers what the supervisor answered.
    fn step(&mut self, op: Op) -> Vec<Action> {
        let workers = self.down.len();
        match op {
            Op::Wait(ms) => {
                self.now += Duration::from_millis(ms);
                Vec::new()
            }
            Op::Progress(w) => {
                if self.down[w] {
                    return Vec::new();
                }
                self.task_us[w] += self.loads[w] * 250_000;
                let p = self.current(w);
                self.s.on_report(self.now, Report::Progress(p))
            }
            Op::Stale(w) => {
                let p = Progress {
                    generation: self.s.generation().wrapping_sub(1),
                    ..self.current(w)
                };
                self.s.on_report(self.now, Report::Done(p))
            }
            Op::Tick => {
                let nodes = self.nodes();
                self.s.tick(self.now, &nodes)
            }
            Op::NodeDown(w) => {
                self.down[w] = true;
                Vec::new()
            }
            Op::NodeUp(w) => {
                self.down[w] = false;
                Vec::new()
            }
            Op::Snapshot(w, fail) => match self.down[w] {
                true => Vec::new(),
                false => self.store(w, fail),
            },
            Op::SnapshotAll(fail) => {
                let mut actions = Vec::new();
                let live: Vec<usize> = (0..workers).filter(|w| self.taken(*w)).collect();
                for (n, w) in live.iter().enumerate() {
                    let out = self.store(*w, fail && n == 0);
                    // Each report's answer is checked as its own batch.
                    self.check(&out, &[]);
                    actions.extend(out);
                }
                self.iteration += 10;
                actions
            }
            Op::Done(w) => {
                let p = self.current(w);
                self.s.on_report(self.now, Report::Done(p))
            }
            Op::Failed(w) => {
                let progress = self.current(w);
                let error = "trap".to_owned();
                self.s
                    .on_report(self.now, Report::Failed { progress, error })
            }
            Op::Unreachable(w, peer) => {
                let progress = self.current(w);
                let (peer, error) = (WorkerId(peer as u16), "refused".to_owned());
                let report = Report::Unreachable {
                    progress,
                    peer,
                    error,
                };
                self.s.on_report(self.now, report)
            }
            Op::Arrive(i) if !self.moves.is_empty() => {
                let order = self.moves.remove(i % self.moves.len());
                let WorkerMessage::Leave { entries } = order.leave.message else {
                    panic!("a move's second message is a Leave")
                };
                let report = Report::Arrived {
                    progress: Progress {
                        generation: order.leave.generation,
                        ..self.current(order.destination.worker.0 as usize)
                    },
                    entries,
                    bytes: 1,
                };
                self.s.on_report(self.now, report)
            }
            Op::MoveNotTaken(i) if !self.moves.is_empty() => {
                let order = self.moves.remove(i % self.moves.len());
                self.s.on_move_not_taken(order.number);
                Vec::new()
            }
            Op::Probed(i, silent) if !self.probes.is_empty() => {
                let asked = self.probes.remove(i % self.probes.len());
                let answers: Vec<(WorkerId, bool)> = asked
                    .iter()
                    .map(|t| (t.worker, !silent && !self.down[t.worker.0 as usize]))
                    .collect();
                self.s.on_probed(self.now, &answers)
            }
            Op::Restored if !self.restores.is_empty() => {
                let generation = self.restores.remove(0);
                self.s.on_restored(self.now, generation);
                Vec::new()
            }
            Op::RestoreFailed if !self.restores.is_empty() => {
                let generation = self.restores.remove(0);
                self.s.on_restore_failed(self.now, generation, "refused")
            }
            Op::Cancel => self.s.cancel(self.now),
            Op::TakeOver if self.s.outcome().is_none() && self.down.contains(&false) => {
                let spec = JobSpec {
                    controller: "http://another".into(),
                    ..self.s.spec.clone()
                };
                let setups = self
                    .s
                    .workers()
                    .iter()
                    .map(|w| WorkerSetup {
                        name: w.name.clone(),
                        url: w.url.clone(),
                        cores: w.cores,
                    })
                    .collect();
                let (nodes, resumed) = (self.nodes(), self.s.resumable());
                let reason = "the controller's node left the cluster".to_owned();
                let (s, actions) = Supervisor::take_over(
                    self.now,
                    spec,
                    setups,
                    self.rebalance,
                    resumed,
                    &nodes,
                    reason,
                )
                .expect("the job's own workers");
                self.s = s;
                self.moves.clear();
                self.probes.clear();
                self.restores.clear();
                actions
            }
            Op::Arrive(_)
            | Op::MoveNotTaken(_)
            | Op::Probed(..)
            | Op::Restored
            | Op::RestoreFailed
            | Op::TakeOver => Vec::new(),
        }
    }

    /// Checks one batch of actions against the invariants; `live` is who was live before it
    /// (empty: the caller checks that part itself).
    fn check(&mut self, actions: &[Action], live: &[bool]) {
        let s = &self.s;
        if self.ended {
            assert!(actions.is_empty(), "an ended job answered {actions:?}");
            return;
        }
        let before = self.generation;
        assert!(s.generation() >= before, "the generation went back");
        assert_eq!(
            s.snapshots.complete().map(|c| c.iteration),
            self.complete.last().copied(),
            "the supervisor and the world disagree on the last complete snapshot"
        );
        self.generation = s.generation();
        if s.outcome().is_none() {
            for k in keys(s.map()) {
                let holder = s.map().entry(k).worker.0 as usize;
                assert!(
                    s.workers()[holder].live,
                    "{k:?} is held by gone worker {holder}"
                );
            }
        }
        let lost = (0..live.len()).any(|w| live[w] && !s.workers()[w].live);
        if lost && self.complete.is_empty() {
            let [
                Action::End {
                    outcome: Outcome::Failed(error),
                    ..
                },
            ] = actions
            else {
                panic!("a worker was lost without a complete snapshot: {actions:?}")
            };
            let says = match self.snapshots {
                true => "no snapshot was complete yet",
                false => "no snapshots to fall back to",
            };
            assert!(error.contains(says), "{error}");
        }
        let mut started = HashSet::new();
        let mut ends = 0;
        for a in actions {
            match a {
                Action::Restore(order) => {
                    let r = restore_of(a);
                    assert!(
                        self.complete.contains(&r.iteration),
                        "restore to {}",
                        r.iteration
                    );
                    assert_eq!(r.generation, s.generation());
                    assert!(r.generation > before, "a restore begins a new generation");
                    let live_now: Vec<bool> = s.workers().iter().map(|w| w.live).collect();
                    assert_eq!(r.live, live_now);
                    for k in keys(&r.map) {
                        assert!(r.live[r.map.entry(k).worker.0 as usize]);
                    }
                    let to: Vec<usize> = order.to.iter().map(|t| t.worker.0 as usize).collect();
                    let expect: Vec<usize> = (0..live_now.len()).filter(|w| live_now[*w]).collect();
                    assert_eq!(to, expect);
                    started.extend(order.start.iter().map(|(t, _)| t.worker.0 as usize));
                    self.restores.push(order.generation);
                }
                Action::DeleteSnapshot { iteration } => {
                    let newer = s.snapshots.complete().map(|c| c.iteration);
                    assert!(newer.is_some_and(|n| n > *iteration), "deleted {iteration}");
                    assert!(self.complete.range(iteration + 1..).next().is_some());
                }
                Action::End { .. } => ends += 1,
                Action::Move(order) => self.moves.push((**order).clone()),
                Action::Probe(asked) => self.probes.push(asked.clone()),
                Action::Broadcast { .. } => {}
            }
        }
        for (w, was) in live.iter().enumerate() {
            if !was && s.workers()[w].live {
                assert!(
                    started.contains(&w),
                    "worker {w} came back without a restore"
                );
            }
        }
        assert!(ends <= 1);
        if ends == 1 {
            assert!(s.outcome().is_some());
            self.ended = true;
        }
    }
}

/// Plays `ops` on a job of `loads.len()` workers and checks every answer.
fn play(loads: Vec<u64>, snapshots: bool, rebalance: bool, ops: Vec<Op>) {
    let workers = loads.len();
    let mut world = World::new(loads, snapshots, rebalance);
    for op in ops {
        let op = match op {
            Op::Progress(w) => Op::Progress(w % workers),
            Op::Stale(w) => Op::Stale(w % workers),
            Op::NodeDown(w) => Op::NodeDown(w % workers),
            Op::NodeUp(w) => Op::NodeUp(w % workers),
            Op::Snapshot(w, f) => Op::Snapshot(w % workers, f),
            Op::Done(w) => Op::Done(w % workers),
            Op::Failed(w) => Op::Failed(w % workers),
            Op::Unreachable(a, b) => Op::Unreachable(a % workers, b % workers),
            other => other,
        };
        let live: Vec<bool> = world.s.workers().iter().map(|w| w.live).collect();
        let batch_checked = matches!(op, Op::SnapshotAll(_));
        let actions = world.step(op);
        if batch_checked {
            // Its reports were checked one by one; what is left is who came back.
            world.check(&[], &live);
        } else {
            world.check(&actions, &live);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Whatever happens, in whatever order, the supervisor keeps every invariant its module
    /// states.
    #[test]
    fn supervision_keeps_its_invariants_under_any_interleaving(
        loads in proptest::collection::vec(1u64..5, 2..5),
        snapshots in prop::bool::weighted(0.8),
        rebalance in any::<bool>(),
        ops in proptest::collection::vec(op(4), 1..300),
    ) {
        play(loads, snapshots, rebalance, ops);
    }

    /// The same with slow workers and no loss: partitions move back and forth, and every
    /// snapshot, move and map update keeps the invariants.
    #[test]
    fn rebalancing_keeps_the_invariants_while_no_worker_is_lost(
        loads in proptest::collection::vec(1u64..5, 2..5),
        ops in proptest::collection::vec(op(4), 1..300),
    ) {
        let ops = ops
            .into_iter()
            .map(|op| match op {
                Op::NodeDown(_)
                | Op::Unreachable(..)
                | Op::Failed(_)
                | Op::Cancel
                | Op::TakeOver => Op::Tick,
                // Silence would lose a worker: time passes in short steps.
                Op::Wait(ms) => Op::Wait(ms / 8),
                other => other,
            })
            .collect();
        play(loads, true, true, ops);
    }
}
