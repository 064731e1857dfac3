//! Moving a partition between running workers (section 4.4), as decisions without I/O.
//!
//! The controller makes the destination ready first, then tells the source. The source
//! [`Handoffs::leave`]s: it spawns no more tasks on the partition from the next occurrence on
//! and lets the ones it spawned finish. Once they have, the partition departs
//! ([`Handoffs::departures`]) with the sequence number of the first occurrence it has not run
//! (so the destination knows which tasks come next) and the pieces that reached the source for
//! gathers it will not run; from then on the source's map names the destination, so pieces
//! that still reach the source are forwarded with the new entry's version. The destination
//! [`arrive`]s it: it spawns the tasks of the occurrences it has declared since, takes the
//! pieces, and takes over the entry, which releases the pieces it held because their sender's
//! entry was newer than its own. The controller changes its map, and tells every worker, only
//! once the destination reports the partition arrived.
//!
//! Invariants (checked by the property test below under any interleaving of tasks, pieces,
//! transfers and map updates): every occurrence of a stage runs on every partition exactly
//! once, every piece reaches its gather exactly once, and the job computes what it computes
//! without moves.

use crate::cursor::Cursor;
use crate::graph::{EarlyPieces, TaskGraph, TaskRef};
use crate::map::{Entry, Exchange, PartitionKey, Routed, WorkerId};
use crate::program::{Program, StageKind};
use bytes::Bytes;

/// Scatter data as workers route it: the occurrence, the emitting partition, and the bytes
/// (`None` for an empty piece).
pub type PieceItem = (u64, u32, Option<Bytes>);

/// A partition leaving this worker.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Leaving {
    key: PartitionKey,
    to: WorkerId,
    version: u32,
    from: u64,
}

/// A partition whose tasks here are done, ready to travel: the caller adds its instance's image.
#[derive(Debug)]
pub struct Departure {
    /// The partition.
    pub key: PartitionKey,
    /// Where it goes.
    pub to: WorkerId,
    /// The version of its new map entry.
    pub version: u32,
    /// The first occurrence it has not run: the destination's tasks on it start there.
    pub from: u64,
    /// Pieces for its gathers from `from` on that reached this worker, by occurrence.
    pub early: Vec<(u64, EarlyPieces)>,
}

/// The partitions leaving one worker.
#[derive(Debug, Default)]
pub struct Handoffs {
    leaving: Vec<Leaving>,
}

impl Handoffs {
    /// The controller moves `key` to worker `to` under entry version `version`; the cursor
    /// here has declared every occurrence before `next_seq`, which still run here.
    pub fn leave(
        &mut self,
        graph: &mut TaskGraph,
        key: PartitionKey,
        to: WorkerId,
        version: u32,
        next_seq: u64,
    ) {
        if self.leaving.iter().any(|l| l.key == key) {
            return;
        }
        graph.release(key);
        self.leaving.push(Leaving {
            key,
            to,
            version,
            from: next_seq,
        });
    }

    /// Whether partitions are waiting for their tasks here to finish.
    pub fn pending(&self) -> bool {
        !self.leaving.is_empty()
    }

    /// The partitions whose tasks here are all done: they depart now, and this worker's map
    /// names their new holder, so pieces that reach it later are forwarded.
    pub fn departures(
        &mut self,
        graph: &mut TaskGraph,
        exchange: &mut Exchange<PieceItem>,
    ) -> Vec<Departure> {
        let mut out = Vec::new();
        self.leaving.retain(|l| {
            if graph.busy(l.key) {
                return true;
            }
            let released = exchange.update(
                l.key,
                Entry {
                    worker: l.to,
                    version: l.version,
                },
            );
            debug_assert!(released.is_empty(), "a holder holds nothing back");
            out.push(Departure {
                key: l.key,
                to: l.to,
                version: l.version,
                from: l.from,
                early: graph.take_early(l.key),
            });
            false
        });
        out
    }
}

/// What a worker must do after a partition arrived.
#[derive(Debug, Default)]
pub struct Arrival {
    /// Scatter occurrences that got a task on it: each sends its pieces when done.
    pub scatters: Vec<u64>,
    /// Signal occurrences that got a task on it, with their signal's number.
    pub signals: Vec<(u64, u64)>,
    /// Load tasks spawned, which wait for their input.
    pub loads: Vec<TaskRef>,
    /// Pieces held for it that go elsewhere after all (a later move overtook this one).
    pub forward: Vec<Routed<PieceItem>>,
}

/// Worker `me` takes partition `key`, which ran every occurrence before `from` on its source,
/// with the pieces that reached the source for later gathers.
#[allow(clippy::too_many_arguments)]
pub fn arrive(
    program: &Program,
    graph: &mut TaskGraph,
    cursor: &Cursor,
    exchange: &mut Exchange<PieceItem>,
    me: WorkerId,
    key: PartitionKey,
    version: u32,
    from: u64,
    early: Vec<(u64, EarlyPieces)>,
) -> Arrival {
    let declared = cursor.declared_since(program, from);
    let stages: Vec<_> = declared
        .iter()
        .map(|&(seq, stage, _)| (seq, stage))
        .collect();
    let mut arrival = Arrival::default();
    arrival.scatters = graph.adopt(program, key, from, &stages, &mut arrival.loads);
    for &(seq, stage, signal) in &declared {
        if let (Some(signal), StageKind::Signal) = (signal, &program.stage(stage).kind)
            && program.group_of(program.stage(stage)) == key.group
        {
            arrival.signals.push((seq, signal));
        }
    }
    for (seq, pieces) in early {
        for (source, data) in pieces {
            graph.piece(seq, key.group, key.index, source, data);
        }
    }
    for routed in exchange.update(
        key,
        Entry {
            worker: me,
            version,
        },
    ) {
        match routed {
            Routed::Accept(k, (seq, source, data)) => {
                graph.piece(seq, k.group, k.index, source, data)
            }
            forward => arrival.forward.push(forward),
        }
    }
    arrival
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cursor::Next;
    use crate::graph::{TaskKind, TaskView};
    use crate::map::PartitionMap;
    use crate::program::tests::{compute, scatter};
    use crate::program::{GroupId, ProgramBuilder};
    use proptest::prelude::*;
    use rustc_hash::FxHashMap;

    /// A piece on the wire: partition, emitting partition, entry version, bytes.
    type WirePiece = (u32, u32, u32, Option<Bytes>);

    enum Message {
        Pieces {
            seq: u64,
            group: GroupId,
            pieces: Vec<WirePiece>,
        },
        Leave {
            key: PartitionKey,
            to: WorkerId,
            version: u32,
        },
        Transfer {
            departure: Departure,
            state: u64,
        },
        MapUpdate(PartitionKey, Entry),
    }

    /// One worker: the same state machines a node's worker drives, with a task's effect on
    /// its partition reduced to a hash.
    struct Worker {
        me: WorkerId,
        cursor: Cursor,
        graph: TaskGraph,
        exchange: Exchange<PieceItem>,
        handoffs: Handoffs,
        states: FxHashMap<PartitionKey, u64>,
        running: Vec<(TaskRef, TaskView)>,
        scatters_left: FxHashMap<u64, u32>,
        outgoing: FxHashMap<(u64, WorkerId), Vec<WirePiece>>,
    }

    fn mix(a: u64, b: u64) -> u64 {
        (a ^ b.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .rotate_left(23)
            .wrapping_mul(0xbf58_476d_1ce4_e5b9)
    }

    struct World {
        program: Program,
        workers: Vec<Worker>,
        /// (to, message); `None` is the controller.
        net: Vec<(Option<usize>, Message)>,
        /// Moves the destination reported done: (key, entry).
        reports: Vec<(PartitionKey, Entry)>,
        map: PartitionMap,
        moving: Vec<PartitionKey>,
        /// Moves finished.
        moved: usize,
    }

    impl World {
        fn new(program: Program, workers: usize) -> Self {
            let map = PartitionMap::assign(program.groups.sizes(), &vec![1; workers]);
            let workers = (0..workers)
                .map(|w| {
                    let me = WorkerId(w as u16);
                    let graph = TaskGraph::new(&program, &map, me);
                    let mut states = FxHashMap::default();
                    for (g, &size) in program.groups.sizes().iter().enumerate() {
                        for index in 0..size {
                            let key = PartitionKey {
                                group: GroupId(g as u16),
                                index,
                            };
                            if map.entry(key).worker == me {
                                states.insert(key, u64::from(index) + 1);
                            }
                        }
                    }
                    Worker {
                        me,
                        cursor: Cursor::new(),
                        graph,
                        exchange: Exchange::new(me, map.clone()),
                        handoffs: Handoffs::default(),
                        states,
                        running: Vec::new(),
                        scatters_left: FxHashMap::default(),
                        outgoing: FxHashMap::default(),
                    }
                })
                .collect();
            Self {
                program,
                workers,
                net: Vec::new(),
                reports: Vec::new(),
                map,
                moving: Vec::new(),
                moved: 0,
            }
        }

        fn declare(&mut self, w: usize) {
            let program = &self.program;
            let wk = &mut self.workers[w];
            let mut loads = Vec::new();
            while let Next::Stage { seq, stage } = wk.cursor.next(program) {
                let spawned = wk.graph.declare(program, seq, stage, &mut loads);
                if matches!(program.stage(stage).kind, StageKind::Scatter { .. }) && spawned > 0 {
                    wk.scatters_left.insert(seq, spawned);
                }
            }
        }

        /// Starts a ready task, finishes a running one, or lets partitions depart.
        fn step(&mut self, w: usize, pick: usize) -> bool {
            self.declare(w);
            for departure in {
                let wk = &mut self.workers[w];
                wk.handoffs.departures(&mut wk.graph, &mut wk.exchange)
            } {
                let state = self.workers[w]
                    .states
                    .remove(&departure.key)
                    .expect("a departing partition was held");
                let to = departure.to.0 as usize;
                self.net
                    .push((Some(to), Message::Transfer { departure, state }));
            }
            let wk = &mut self.workers[w];
            if pick.is_multiple_of(2)
                && let Some(task) = wk.graph.pop()
            {
                let view = wk.graph.view(task);
                wk.running.push((task, view));
                return true;
            }
            if wk.running.is_empty() {
                return false;
            }
            let (task, view) = wk.running.swap_remove(pick / 2 % wk.running.len());
            self.finish(w, task, view);
            true
        }

        fn finish(&mut self, w: usize, task: TaskRef, view: TaskView) {
            let program = &self.program;
            let wk = &mut self.workers[w];
            let key = PartitionKey {
                group: view.group,
                index: view.index,
            };
            let inputs = wk.graph.take_inputs(task);
            let state = wk
                .states
                .get_mut(&key)
                .expect("tasks run where the partition is");
            match view.kind {
                TaskKind::Scatter => {
                    let to = program.gather_group_of(program.stage(view.stage));
                    for dest in 0..program.groups.size(to) {
                        let data = (dest % 2 == 0).then(|| {
                            Bytes::from(mix(*state, u64::from(dest)).to_le_bytes().to_vec())
                        });
                        let dkey = PartitionKey {
                            group: to,
                            index: dest,
                        };
                        let entry = wk.exchange.route(dkey);
                        if entry.worker == wk.me {
                            wk.graph.piece(view.seq, to, dest, view.index, data);
                        } else {
                            wk.outgoing
                                .entry((view.seq, entry.worker))
                                .or_default()
                                .push((dest, view.index, entry.version, data));
                        }
                    }
                    let left = wk.scatters_left.get_mut(&view.seq).expect("counted");
                    *left -= 1;
                    if *left == 0 {
                        wk.scatters_left.remove(&view.seq);
                        let batches: Vec<_> = wk
                            .outgoing
                            .iter()
                            .filter(|((seq, _), _)| *seq == view.seq)
                            .map(|(k, _)| *k)
                            .collect();
                        for k in batches {
                            let pieces = wk.outgoing.remove(&k).expect("listed");
                            self.net.push((
                                Some(k.1.0 as usize),
                                Message::Pieces {
                                    seq: view.seq,
                                    group: to,
                                    pieces,
                                },
                            ));
                        }
                    }
                }
                TaskKind::Gather => {
                    for input in &inputs {
                        let bytes: [u8; 8] = input.data[..].try_into().expect("8 bytes");
                        *state = mix(*state, u64::from_le_bytes(bytes) ^ u64::from(input.source));
                    }
                    *state = mix(*state, view.seq);
                }
                _ => *state = mix(*state, u64::from(view.func) << 32 | view.seq),
            }
            let wk = &mut self.workers[w];
            wk.graph.return_inputs(task, inputs);
            wk.graph.complete(task);
        }

        fn deliver(&mut self, n: usize) {
            let (to, message) = self.net.swap_remove(n);
            let Some(w) = to else {
                let Message::MapUpdate(key, entry) = message else {
                    unreachable!("the controller hears only of moves")
                };
                self.reports.push((key, entry));
                return;
            };
            let program = &self.program;
            let wk = &mut self.workers[w];
            match message {
                Message::Pieces { seq, group, pieces } => {
                    for (index, source, version, data) in pieces {
                        let key = PartitionKey { group, index };
                        match wk.exchange.receive(key, version, (seq, source, data)) {
                            Some(Routed::Accept(k, (seq, source, data))) => {
                                wk.graph.piece(seq, k.group, k.index, source, data)
                            }
                            Some(Routed::Forward(k, e, (seq, source, data))) => self.net.push((
                                Some(e.worker.0 as usize),
                                Message::Pieces {
                                    seq,
                                    group: k.group,
                                    pieces: vec![(k.index, source, e.version, data)],
                                },
                            )),
                            None => {}
                        }
                    }
                }
                Message::Leave { key, to, version } => {
                    let next = wk.cursor.seq();
                    wk.handoffs.leave(&mut wk.graph, key, to, version, next);
                }
                Message::Transfer { departure, state } => {
                    wk.states.insert(departure.key, state);
                    let arrival = arrive(
                        program,
                        &mut wk.graph,
                        &wk.cursor,
                        &mut wk.exchange,
                        wk.me,
                        departure.key,
                        departure.version,
                        departure.from,
                        departure.early,
                    );
                    for seq in arrival.scatters {
                        *wk.scatters_left.entry(seq).or_default() += 1;
                    }
                    assert!(
                        arrival.forward.is_empty(),
                        "one move of a partition at a time"
                    );
                    let entry = Entry {
                        worker: wk.me,
                        version: departure.version,
                    };
                    self.net
                        .push((None, Message::MapUpdate(departure.key, entry)));
                }
                Message::MapUpdate(key, entry) => {
                    for routed in wk.exchange.update(key, entry) {
                        match routed {
                            Routed::Accept(k, (seq, source, data)) => {
                                wk.graph.piece(seq, k.group, k.index, source, data)
                            }
                            Routed::Forward(k, e, (seq, source, data)) => self.net.push((
                                Some(e.worker.0 as usize),
                                Message::Pieces {
                                    seq,
                                    group: k.group,
                                    pieces: vec![(k.index, source, e.version, data)],
                                },
                            )),
                        }
                    }
                }
            }
        }

        /// The controller moves `key` to `to`, unless it is moving already.
        fn start_move(&mut self, key: PartitionKey, to: WorkerId) {
            let entry = self.map.entry(key);
            if entry.worker == to || self.moving.contains(&key) {
                return;
            }
            self.moving.push(key);
            self.net.push((
                Some(entry.worker.0 as usize),
                Message::Leave {
                    key,
                    to,
                    version: entry.version + 1,
                },
            ));
        }

        /// The controller heard a move finished: its map changes, and every worker is told.
        fn settle_reports(&mut self) {
            for (key, entry) in std::mem::take(&mut self.reports) {
                self.map.apply(key, entry);
                self.moving.retain(|k| *k != key);
                self.moved += 1;
                for w in 0..self.workers.len() {
                    self.net.push((Some(w), Message::MapUpdate(key, entry)));
                }
            }
        }

        fn finished(&self) -> bool {
            self.net.is_empty()
                && self.reports.is_empty()
                && self.moving.is_empty()
                && self
                    .workers
                    .iter()
                    .all(|w| w.cursor.is_done() && w.graph.live() == 0 && !w.handoffs.pending())
        }

        /// Runs to the end; every partition's final state, by key, and the moves made.
        fn run(
            mut self,
            schedule: &[(u8, usize)],
            moves: &[(u32, u16, usize)],
        ) -> (FxHashMap<PartitionKey, u64>, usize) {
            let sizes = self.program.groups.sizes().to_vec();
            let mut moves = moves.iter().peekable();
            let mut steps = 0usize;
            let mut choices = schedule.iter().cycle();
            while !self.finished() {
                steps += 1;
                assert!(
                    steps < 200_000,
                    "the job never finishes: a piece or task was lost"
                );
                while let Some(&&(p, to, at)) = moves.peek() {
                    if at > steps {
                        break;
                    }
                    moves.next();
                    let g = (p as usize) % sizes.len();
                    let key = PartitionKey {
                        group: GroupId(g as u16),
                        index: p % sizes[g],
                    };
                    let to = WorkerId(to % self.workers.len() as u16);
                    self.start_move(key, to);
                }
                self.settle_reports();
                let &(kind, pick) = choices.next().expect("cycles");
                if kind % 3 == 0 && !self.net.is_empty() {
                    let n = pick % self.net.len();
                    self.deliver(n);
                    continue;
                }
                let w = pick % self.workers.len();
                if !self.step(w, pick / 7) {
                    // Nothing to do there: make progress elsewhere, so a schedule cannot stall.
                    let progressed =
                        (0..self.workers.len()).any(|w| self.step(w, 0) || self.step(w, 1));
                    if !progressed && !self.net.is_empty() {
                        self.deliver(0);
                    }
                }
            }
            let mut states = FxHashMap::default();
            for w in &self.workers {
                assert_eq!(w.graph.early_pieces(), 0, "a piece reached no gather");
                assert_eq!(w.exchange.held(), 0, "a piece stayed held");
                for (&key, &state) in &w.states {
                    assert_eq!(self.map.entry(key).worker, w.me, "the map names the holder");
                    assert!(
                        states.insert(key, state).is_none(),
                        "one holder per partition"
                    );
                }
            }
            (states, self.moved)
        }
    }

    /// Four stages a loop over one group of `partitions` and one single partition: compute,
    /// a scatter into the group, a scatter into the single one, and a merge.
    fn program(partitions: u32, iterations: u64) -> Program {
        let mut b = ProgramBuilder::new(partitions);
        let a = b.dataset("a", true);
        let inbox = b.dataset("inbox", true);
        let total = b.dataset("total", false);
        b.repeat(iterations);
        b.stage(compute(1, &[a], &[a])).unwrap();
        b.stage(scatter(2, &[a], 3, &[inbox])).unwrap();
        b.stage(compute(4, &[a, inbox], &[a])).unwrap();
        b.stage(scatter(5, &[a], 6, &[total])).unwrap();
        b.stage(compute(7, &[total], &[total])).unwrap();
        b.end().unwrap();
        b.finish().unwrap()
    }

    #[test]
    fn a_partition_moved_mid_run_computes_the_same() {
        let (reference, _) = World::new(program(4, 3), 1).run(&[(1, 0)], &[]);
        let (states, moved) =
            World::new(program(4, 3), 2).run(&[(1, 3), (0, 1), (2, 8)], &[(1, 1, 40), (2, 0, 90)]);
        assert_eq!(moved, 2, "both moves happened mid-run");
        assert_eq!(states, reference);
    }

    proptest! {
        /// Under any interleaving of task runs, piece deliveries, transfers and map updates,
        /// with partitions moved at any time (several at once, back and forth), no piece is
        /// lost or applied twice, every task runs once, and the job computes exactly what a
        /// single worker computes without moves.
        #[test]
        fn moves_under_any_interleaving_compute_what_no_move_computes(
            workers in 2usize..4,
            partitions in 2u32..6,
            iterations in 1u64..4,
            schedule in proptest::collection::vec((0u8..6, 0usize..10_000), 1..400),
            moves in proptest::collection::vec((0u32..12, 0u16..4, 0usize..120), 1..10),
        ) {
            let (reference, _) = World::new(program(partitions, iterations), 1).run(&[(1, 0)], &[]);
            let mut moves = moves;
            moves.sort_by_key(|m| m.2);
            let (states, _) =
                World::new(program(partitions, iterations), workers).run(&schedule, &moves);
            prop_assert_eq!(states, reference);
        }
    }
}
