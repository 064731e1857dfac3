//! Rebalancing: once a [`WINDOW`], the workers' guest time per partition over the window is
//! compared; a worker that takes [`SLOWER`] times the fastest's two windows in a row gives
//! partitions away, so that each worker's share follows its speed (`PartitionMap::rebalance`,
//! index by index, so co-partitioned data stays on one worker). A move makes the destination
//! ready before the source lets go, and the map changes, for every worker, when the
//! destination reports the partitions arrived. No rebalance is decided while a move is under
//! way, nor within a window of the last move's end or of a restore.

use super::action::{Action, MoveOrder};
use super::history::MigrationRecord;
use super::{Supervisor, WorkerState};
use crate::map::{Entry, PartitionKey, PartitionMap, WorkerId};
use crate::message::{Envelope, Progress, WorkerMessage};
use crate::program::GroupId;
use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

/// How often the workers' speed is compared.
pub const WINDOW: Duration = Duration::from_secs(1);

/// A worker whose guest time per partition is this many times the fastest's gives partitions
/// away.
pub const SLOWER: f64 = 1.3;

/// What a worker had done at the start of the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Sample {
    wall_us: u64,
    task_us: u64,
}

impl Sample {
    pub(super) fn of(progress: &Progress) -> Self {
        Self {
            wall_us: progress.wall_us,
            task_us: progress.task_us,
        }
    }
}

/// A move under way: the partitions not arrived yet.
struct Moving {
    keys: HashSet<PartitionKey>,
    started: Instant,
    record: usize,
}

/// The rebalancing state of one job.
pub(super) struct Balance {
    enabled: bool,
    /// When the current window began.
    window_at: Instant,
    /// When the last move ended or a restore was taken: the next rebalance waits a window.
    settled: Instant,
    /// The worker found markedly slower in the last window: a second window in a row moves
    /// partitions, so that a passing hiccup (a load stage, another process's burst) does not.
    slower: Option<WorkerId>,
    /// By worker: its cost in the last window it was measured (`window_costs`).
    last_cost: Vec<Option<f64>>,
    moving: Vec<Moving>,
}

impl Balance {
    pub(super) fn new(enabled: bool, now: Instant) -> Self {
        Self {
            enabled,
            window_at: now,
            settled: now,
            slower: None,
            last_cost: Vec::new(),
            moving: Vec::new(),
        }
    }

    /// The job runs (again) from `now`: a window starts, and the next rebalance waits for it.
    pub(super) fn settle(&mut self, now: Instant) {
        self.window_at = now;
        self.settled = now;
    }
}

/// The slowest worker, the moves that even out the workers' time per partition and why, when
/// the slowest takes [`SLOWER`] times the fastest's time over the window.
struct Uneven {
    slow: WorkerId,
    moves: Vec<(PartitionKey, Entry)>,
    reason: String,
}

/// Each worker's guest time per index held over the window: measured for a worker that ran
/// tasks in it (a batch still running counts as far as it got); for one that ran none (it
/// waited for the others throughout, or its clock began anew), the last it measured, so that
/// a fast worker waiting on a slow one does not hide the slow one; none for a gone worker, one
/// holding nothing, or one never measured.
fn window_costs(
    workers: &[WorkerState],
    map: &PartitionMap,
    last: &[Option<f64>],
) -> Vec<Option<f64>> {
    // A worker's load is the indices it holds of its fullest group.
    let units = |w: usize| {
        (0..map.groups())
            .map(|g| map.held_by(WorkerId(w as u16), GroupId(g as u16)).count())
            .max()
            .unwrap_or(0)
    };
    workers
        .iter()
        .enumerate()
        .map(|(w, s)| {
            let spent = s.progress.task_us.saturating_sub(s.window.task_us);
            let held = units(w);
            let ran = s.progress.wall_us > s.window.wall_us;
            let measured = (ran && spent > 0).then(|| spent as f64 / held as f64);
            match s.live && held > 0 {
                true => measured.or(last.get(w).copied().flatten()),
                false => None,
            }
        })
        .collect()
}

/// The moves off the slowest worker when it takes [`SLOWER`] times the fastest's `cost` (from
/// [`window_costs`]); a worker without a cost counts as the fastest.
fn uneven(workers: &[WorkerState], map: &PartitionMap, cost: &[Option<f64>]) -> Option<Uneven> {
    if workers.iter().filter(|w| w.live).count() < 2 {
        return None;
    }
    let known: Vec<f64> = cost.iter().flatten().copied().collect();
    if known.len() < 2 {
        return None;
    }
    let fastest = known.iter().copied().fold(f64::INFINITY, f64::min);
    let slowest = known.iter().copied().fold(0.0, f64::max);
    if slowest < fastest * SLOWER {
        return None;
    }
    let weights: Vec<f64> = workers
        .iter()
        .zip(cost)
        .map(|(s, c)| match s.live {
            true => f64::from(s.cores.max(1)) / c.unwrap_or(fastest),
            false => 0.0,
        })
        .collect();
    // The last of equally slow workers, as the controller always chose.
    let slow = (0..workers.len())
        .max_by(|&a, &b| cost[a].unwrap_or(0.0).total_cmp(&cost[b].unwrap_or(0.0)))
        .expect("two workers at least");
    Some(Uneven {
        slow: WorkerId(slow as u16),
        moves: map.rebalance(&weights),
        reason: format!(
            "worker {} took {:.1}x the fastest worker's time per partition",
            workers[slow].name,
            slowest / fastest
        ),
    })
}

impl Supervisor {
    /// A window's end: moves off a worker found markedly slower in this window and the last.
    pub(super) fn rebalance(&mut self, now: Instant) -> Vec<Action> {
        let b = &self.balance;
        if !b.enabled
            || !b.moving.is_empty()
            || now.saturating_duration_since(b.window_at) < WINDOW
            || now.saturating_duration_since(b.settled) < WINDOW
        {
            return Vec::new();
        }
        let cost = window_costs(&self.workers, &self.map, &self.balance.last_cost);
        let found = uneven(&self.workers, &self.map, &cost);
        self.balance.last_cost = cost;
        let slow = found.as_ref().map(|u| u.slow);
        let confirmed = slow.is_some() && slow == self.balance.slower;
        self.balance.slower = slow;
        self.balance.window_at = now;
        for w in &mut self.workers {
            w.window = Sample::of(&w.progress);
        }
        match found {
            Some(u) if confirmed && !u.moves.is_empty() => self.start_moves(now, u),
            _ => Vec::new(),
        }
    }

    /// Records the moves, one per (source, destination), and answers the orders that start them.
    fn start_moves(&mut self, now: Instant, uneven: Uneven) -> Vec<Action> {
        let mut by_pair: BTreeMap<(WorkerId, WorkerId), Vec<(PartitionKey, Entry)>> =
            BTreeMap::new();
        for (key, entry) in uneven.moves {
            let from = self.map.entry(key).worker;
            by_pair
                .entry((from, entry.worker))
                .or_default()
                .push((key, entry));
        }
        let at = now.saturating_duration_since(self.started);
        let mut orders = Vec::new();
        for ((from, to), entries) in by_pair {
            let number = self.history.migrations.push(MigrationRecord {
                at,
                from,
                to,
                partitions: entries.len(),
                bytes: 0,
                took: None,
                reason: uneven.reason.clone(),
            });
            self.balance.moving.push(Moving {
                keys: entries.iter().map(|(k, _)| *k).collect(),
                started: now,
                record: number,
            });
            let envelope = |message| Envelope {
                generation: self.generation,
                message,
            };
            orders.push(Action::Move(Box::new(MoveOrder {
                number,
                source: self.target(from),
                destination: self.target(to),
                arrive: envelope(WorkerMessage::Arrive {
                    keys: entries.iter().map(|(k, _)| *k).collect(),
                }),
                leave: envelope(WorkerMessage::Leave { entries }),
            })));
        }
        orders
    }

    /// Partitions arrived at worker `at`: the map names it, for every worker from now.
    pub(super) fn arrived(
        &mut self,
        now: Instant,
        at: WorkerId,
        entries: Vec<(PartitionKey, Entry)>,
        bytes: u64,
    ) -> Vec<Action> {
        // A worker reports only partitions that arrived at it; anything else would give a
        // partition to a worker the supervisor does not watch.
        let entries: Vec<(PartitionKey, Entry)> = entries
            .into_iter()
            .filter(|(k, e)| e.worker == at && self.has(*k))
            .collect();
        if entries.is_empty() {
            return Vec::new();
        }
        for &(key, entry) in &entries {
            self.map.apply(key, entry);
        }
        let mut ended = Vec::new();
        for (n, m) in self.balance.moving.iter_mut().enumerate() {
            let before = m.keys.len();
            for (key, _) in &entries {
                m.keys.remove(key);
            }
            if m.keys.len() < before
                && let Some(r) = self.history.migrations.get_mut(m.record)
            {
                r.bytes += bytes;
            }
            if m.keys.is_empty() {
                ended.push(n);
            }
        }
        for n in ended.into_iter().rev() {
            let m = self.balance.moving.remove(n);
            if let Some(r) = self.history.migrations.get_mut(m.record) {
                r.took = Some(now.saturating_duration_since(m.started));
            }
            self.balance.settled = now;
        }
        vec![Action::Broadcast {
            to: self.live_targets(),
            envelope: Envelope {
                generation: self.generation,
                message: WorkerMessage::MapUpdate { entries },
            },
        }]
    }

    /// The move `number` did not start: its destination or its source did not take its order.
    /// The map is unchanged; the next window may decide again.
    pub fn on_move_not_taken(&mut self, number: usize) {
        let Some(n) = self.balance.moving.iter().position(|m| m.record == number) else {
            return;
        };
        self.balance.moving.remove(n);
        if let Some(r) = self.history.migrations.get_mut(number) {
            r.took = Some(Duration::ZERO);
            r.reason
                .push_str(" (not started: a worker did not take it)");
        }
    }

    /// A restore overtook the moves under way: the workers roll back past them.
    pub(super) fn abandon_moves(&mut self) {
        for m in std::mem::take(&mut self.balance.moving) {
            if let Some(r) = self.history.migrations.get_mut(m.record) {
                r.took = Some(Duration::ZERO);
                r.reason.push_str(" (abandoned: a restore overtook it)");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::message::Report;
    use crate::supervisor::tests::{job, ms, nodes_but, progress, snapshot, spec};
    use crate::supervisor::{Action, Supervisor};
    use proptest::prelude::*;

    /// What the first window's end finds.
    fn found(workers: &[WorkerState], map: &PartitionMap) -> Option<Uneven> {
        uneven(workers, map, &window_costs(workers, map, &[]))
    }

    fn worker(live: bool, cores: u32, window: (u64, u64), now: (u64, u64)) -> WorkerState {
        let progress = Progress {
            wall_us: now.0,
            task_us: now.1,
            ..Progress::default()
        };
        WorkerState {
            name: "w".into(),
            url: String::new(),
            cores,
            live,
            done: false,
            heard: Instant::now(),
            window: Sample {
                wall_us: window.0,
                task_us: window.1,
            },
            progress,
        }
    }

    #[test]
    fn a_worker_under_the_threshold_keeps_its_partitions() {
        let map = PartitionMap::assign(&[8, 1], &[1, 1]);
        let workers = [
            worker(true, 1, (0, 0), (1_000_000, 400_000)),
            worker(true, 1, (0, 0), (1_000_000, 500_000)),
        ];
        assert!(
            found(&workers, &map).is_none(),
            "1.25x is not markedly slower"
        );
    }

    #[test]
    fn a_markedly_slower_worker_gives_partitions_by_speed() {
        // Four indices each (and worker 0 holds the single group too); worker 1 takes twice
        // the time per index: the indices split 2 to 1.
        let map = PartitionMap::assign(&[8, 1], &[1, 1]);
        let workers = [
            worker(true, 1, (0, 0), (1_000_000, 400_000)),
            worker(true, 1, (0, 0), (1_000_000, 800_000)),
        ];
        let u = found(&workers, &map).expect("2x is markedly slower");
        assert_eq!(u.slow, WorkerId(1));
        assert_eq!(
            u.reason,
            "worker w took 2.0x the fastest worker's time per partition"
        );
        assert!(!u.moves.is_empty());
        assert!(u.moves.iter().all(|(_, e)| e.worker == WorkerId(0)));
    }

    #[test]
    fn a_worker_that_ran_nothing_in_the_window_is_not_compared() {
        let map = PartitionMap::assign(&[8], &[1, 1]);
        let workers = [
            worker(true, 1, (0, 0), (1_000_000, 100_000)),
            // Its clock began anew (a restored worker's).
            worker(true, 1, (5_000_000, 0), (1_000_000, 900_000)),
        ];
        assert!(found(&workers, &map).is_none());
    }

    #[test]
    fn a_gone_worker_is_neither_compared_nor_given_partitions() {
        let map = PartitionMap::assign(&[9], &[1, 1, 1]);
        let workers = [
            worker(true, 1, (0, 0), (1_000_000, 300_000)),
            worker(true, 1, (0, 0), (1_000_000, 900_000)),
            worker(false, 1, (0, 0), (1_000_000, 10)),
        ];
        let u = found(&workers, &map).expect("3x");
        assert!(u.moves.iter().all(|(_, e)| e.worker == WorkerId(0)));
    }

    /// Reports from both workers of a two-worker job after `ms`: worker 0 spent `fast` ms in
    /// tasks since the start, worker 1 `slow`.
    fn worked(s: &mut Supervisor, now: Instant, wall_ms: u64, fast: u64, slow: u64) {
        for (w, task) in [(0, fast), (1, slow)] {
            let p = Progress {
                wall_us: wall_ms * 1_000,
                task_us: task * 1_000,
                ..progress(w, s.generation())
            };
            assert!(s.on_report(now, Report::Progress(p)).is_empty());
        }
    }

    #[test]
    fn a_fast_worker_that_waits_on_a_slow_one_keeps_the_speed_it_showed() {
        // Worker 1's tasks crawl (its core is another process's); worker 0 ran its share in
        // the first window and then waited on worker 1 for the whole second one.
        let (mut s, t0) = job(2, false, true);
        worked(&mut s, ms(t0, 500), 500, 50, 500);
        assert!(s.tick(ms(t0, 1_000), &nodes_but(2, &[])).is_empty());
        worked(&mut s, ms(t0, 1_500), 1_500, 50, 1_500);
        let actions = s.tick(ms(t0, 2_000), &nodes_but(2, &[]));
        let [Action::Move(order)] = actions.as_slice() else {
            panic!("the slow worker was not found twice: {actions:?}")
        };
        assert_eq!(
            (order.source.worker, order.destination.worker),
            (WorkerId(1), WorkerId(0))
        );
    }

    #[test]
    fn a_worker_markedly_slower_two_windows_in_a_row_gives_partitions_destination_first() {
        let (mut s, t0) = job(2, false, true);
        worked(&mut s, ms(t0, 500), 500, 200, 400);
        assert!(
            s.tick(ms(t0, 999), &nodes_but(2, &[])).is_empty(),
            "within the first window"
        );
        assert!(
            s.tick(ms(t0, 1_000), &nodes_but(2, &[])).is_empty(),
            "once is a hiccup"
        );
        worked(&mut s, ms(t0, 1_500), 1_500, 600, 1_200);
        let actions = s.tick(ms(t0, 2_000), &nodes_but(2, &[]));
        let [Action::Move(order)] = actions.as_slice() else {
            panic!("{actions:?}")
        };
        // Three indices each, worker 1 at twice the time: its highest index moves, in both
        // partitioned groups.
        let moved = |index| PartitionKey {
            group: GroupId(0),
            index,
        };
        let entries = vec![
            (
                moved(5),
                Entry {
                    worker: WorkerId(0),
                    version: 2,
                },
            ),
            (
                PartitionKey {
                    group: GroupId(1),
                    index: 5,
                },
                Entry {
                    worker: WorkerId(0),
                    version: 2,
                },
            ),
        ];
        assert_eq!(
            (order.source.worker, order.destination.worker),
            (WorkerId(1), WorkerId(0))
        );
        assert_eq!(
            order.arrive.message,
            WorkerMessage::Arrive {
                keys: entries.iter().map(|(k, _)| *k).collect()
            }
        );
        assert_eq!(
            order.leave.message,
            WorkerMessage::Leave {
                entries: entries.clone()
            }
        );
        let record = s.history().migrations.iter().next().unwrap().clone();
        assert_eq!(
            record.reason,
            "worker n1 took 2.0x the fastest worker's time per partition"
        );
        assert_eq!((record.partitions, record.at), (2, Duration::from_secs(2)));
        // The map changes only when they arrive; nothing else moves meanwhile.
        assert_eq!(s.map().entry(moved(5)).worker, WorkerId(1));
        worked(&mut s, ms(t0, 3_500), 3_500, 1_000, 3_000);
        assert!(s.tick(ms(t0, 4_000), &nodes_but(2, &[])).is_empty());
        let arrived = |keys: &[(PartitionKey, Entry)]| Report::Arrived {
            progress: progress(0, 0),
            entries: keys.to_vec(),
            bytes: 1_000,
        };
        let actions = s.on_report(ms(t0, 4_100), arrived(&entries[..1]));
        assert_eq!(s.map().entry(moved(5)).worker, WorkerId(0));
        assert!(matches!(&actions[..], [Action::Broadcast { to, .. }] if to.len() == 2));
        assert_eq!(s.history().migrations.iter().next().unwrap().took, None);
        s.on_report(ms(t0, 4_300), arrived(&entries[1..]));
        let record = s.history().migrations.iter().next().unwrap();
        assert_eq!(
            (record.bytes, record.took),
            (2_000, Some(Duration::from_millis(2_300)))
        );
        // The next comparison waits a window after the move.
        worked(&mut s, ms(t0, 5_000), 5_000, 2_000, 6_000);
        assert!(s.tick(ms(t0, 5_299), &nodes_but(2, &[])).is_empty());
    }

    #[test]
    fn an_arrival_naming_another_worker_or_no_partition_of_the_job_is_ignored() {
        let (mut s, t0) = job(2, false, true);
        let key = PartitionKey {
            group: GroupId(0),
            index: 0,
        };
        let elsewhere = Report::Arrived {
            progress: progress(1, 0),
            entries: vec![(
                key,
                Entry {
                    worker: WorkerId(0),
                    version: 9,
                },
            )],
            bytes: 1,
        };
        assert!(s.on_report(ms(t0, 1), elsewhere).is_empty());
        let nowhere = Report::Arrived {
            progress: progress(1, 0),
            entries: vec![(
                PartitionKey {
                    group: GroupId(0),
                    index: 99,
                },
                Entry {
                    worker: WorkerId(1),
                    version: 9,
                },
            )],
            bytes: 1,
        };
        assert!(s.on_report(ms(t0, 1), nowhere).is_empty());
        assert_eq!(*s.map(), spec(2, false).map);
    }

    #[test]
    fn a_move_not_taken_is_dropped_and_a_restore_abandons_those_under_way() {
        let (mut s, t0) = job(3, true, true);
        snapshot(&mut s, ms(t0, 100), 10);
        let work = |s: &mut Supervisor, at: u64| {
            for (w, per) in [(0, 2), (1, 2), (2, 6)] {
                let p = Progress {
                    wall_us: at * 1_000,
                    task_us: at * per * 100,
                    ..progress(w, s.generation())
                };
                s.on_report(ms(t0, at), Report::Progress(p));
            }
        };
        work(&mut s, 1_000);
        s.tick(ms(t0, 1_000), &nodes_but(3, &[]));
        work(&mut s, 2_000);
        let moves = s.tick(ms(t0, 2_000), &nodes_but(3, &[]));
        let numbers: Vec<usize> = moves
            .iter()
            .map(|a| match a {
                Action::Move(m) => m.number,
                other => panic!("{other:?}"),
            })
            .collect();
        // Worker 2 takes three times as long: its highest index goes to worker 0.
        assert_eq!(numbers, [0]);
        s.on_move_not_taken(numbers[0]);
        let first = s.history().migrations.iter().next().unwrap();
        assert!(
            first
                .reason
                .ends_with("(not started: a worker did not take it)")
        );
        assert_eq!(first.took, Some(Duration::ZERO));
        // The next window decides again; that move is then overtaken by a restore.
        work(&mut s, 3_000);
        assert!(matches!(
            s.tick(ms(t0, 3_000), &nodes_but(3, &[]))[..],
            [Action::Move(_)]
        ));
        s.tick(ms(t0, 3_100), &nodes_but(3, &[2]));
        let last = s.history().migrations.iter().last().unwrap();
        assert!(
            last.reason.ends_with("(abandoned: a restore overtook it)"),
            "{last:?}"
        );
    }

    #[test]
    fn without_rebalancing_nothing_moves() {
        let (mut s, t0) = job(2, false, false);
        for t in [1_000, 2_000, 3_000] {
            worked(&mut s, ms(t0, t), t, t / 10, t);
            assert!(s.tick(ms(t0, t), &nodes_but(2, &[])).is_empty());
        }
    }

    proptest! {
        /// Partitions move exactly when the slowest worker compared takes [`SLOWER`] times
        /// the fastest's time per index, away from their holders and only to live workers.
        #[test]
        fn moves_happen_past_the_threshold_and_go_to_live_workers_only(
            spent in proptest::collection::vec((any::<bool>(), 1u32..4, 0u64..2_000_000), 2..5),
        ) {
            let cores: Vec<u32> = spent.iter().map(|s| s.1).collect();
            let map = PartitionMap::assign(&[12, 12, 1], &cores);
            let workers: Vec<WorkerState> = spent
                .iter()
                .map(|&(live, cores, task)| worker(live, cores, (0, 0), (1_000_000, task)))
                .collect();
            let cost = |w: usize| {
                let held = (0..3)
                    .map(|g| map.held_by(WorkerId(w as u16), GroupId(g)).count())
                    .max()
                    .unwrap_or(0);
                let s = &workers[w];
                (s.live && held > 0 && s.progress.task_us > 0)
                    .then(|| s.progress.task_us as f64 / held as f64)
            };
            let known: Vec<f64> = (0..workers.len()).filter_map(cost).collect();
            let fastest = known.iter().copied().fold(f64::INFINITY, f64::min);
            let slowest = known.iter().copied().fold(0.0, f64::max);
            let expected = known.len() >= 2 && slowest >= fastest * SLOWER;
            let found = found(&workers, &map);
            prop_assert_eq!(found.is_some(), expected);
            if let Some(u) = found {
                prop_assert_eq!(cost(u.slow.0 as usize), Some(slowest));
                for (k, e) in &u.moves {
                    prop_assert!(workers[e.worker.0 as usize].live);
                    prop_assert_ne!(map.entry(*k).worker, e.worker);
                }
            }
        }
    }
}
