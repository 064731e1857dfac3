//! What a controller keeps under its lock ([`Inner`]: the status it shows, the workers'
//! progress, the map, snapshots and moves under way) and what a report or a look at the job
//! leads to ([`Action`]), done once the lock is released.

use mote_api::{JobState, JobStatus, MigrationStatus, SnapshotStatus};
use mote_jobs::message::{Progress, WorkerMessage};
use mote_jobs::{Cursor, Entry, PartitionKey, PartitionMap, WorkerId};
use std::collections::{BTreeMap, HashSet};
use std::time::Instant;

/// Snapshots and moves a status lists; older ones are only counted.
pub(super) const LISTED: usize = 16;

/// A move under way.
pub(super) struct Moving {
    pub(super) keys: HashSet<PartitionKey>,
    pub(super) started: Instant,
    pub(super) record: usize,
}

/// What each worker had done at the start of the current window.
#[derive(Clone, Debug, Default)]
pub(super) struct Sample {
    pub(super) wall_us: u64,
    pub(super) task_us: u64,
    pub(super) busy_us: u64,
    pub(super) tasks: u64,
}

/// A worker's rates over a window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) struct Rates {
    pub(super) tasks_per_s: f64,
    pub(super) idle_share: f64,
}

impl Sample {
    /// What `progress` says the worker had done.
    pub(super) fn of(progress: &Progress) -> Self {
        Self {
            wall_us: progress.wall_us,
            task_us: progress.task_us,
            busy_us: progress.task_us + progress.scheduling_us,
            tasks: progress.tasks,
        }
    }

    /// The rates from this sample to `now`, on `cores` cores; none when no time passed
    /// between them or the worker's clock began anew (a restored worker's), where a rate would
    /// be 0/0 or count work of another life.
    pub(super) fn rates_to(&self, now: &Sample, cores: u32) -> Option<Rates> {
        let dt = now.wall_us.checked_sub(self.wall_us).filter(|dt| *dt > 0)?;
        let tasks = now.tasks.saturating_sub(self.tasks);
        let busy = now.busy_us.saturating_sub(self.busy_us);
        let capacity = dt as f64 * f64::from(cores.max(1));
        Some(Rates {
            tasks_per_s: tasks as f64 * 1e6 / dt as f64,
            idle_share: (1.0 - busy as f64 / capacity).clamp(0.0, 1.0),
        })
    }
}

pub(super) struct Partial {
    pub(super) keys: HashSet<PartitionKey>,
    pub(super) cursor: Option<Cursor>,
    pub(super) record: usize,
}

pub(super) struct Inner {
    pub(super) status: JobStatus,
    pub(super) progress: Vec<Progress>,
    pub(super) heard: Vec<Instant>,
    pub(super) started: Instant,
    pub(super) ended: Option<Instant>,
    /// (when, tasks) a second or so ago, for the rate.
    pub(super) sample: (Instant, u64),
    pub(super) map: PartitionMap,
    pub(super) generation: u32,
    pub(super) live: Vec<bool>,
    /// Per worker: the rate sample for the status, and the start of the rebalance window.
    pub(super) rates: Vec<Sample>,
    pub(super) window: Vec<Sample>,
    pub(super) window_at: Instant,
    pub(super) moving: Vec<Moving>,
    /// When the last move ended, or a restore: the next rebalance waits a window after it.
    pub(super) settled: Instant,
    pub(super) snapshots: BTreeMap<u64, Partial>,
    pub(super) complete: Option<(u64, Cursor)>,
    pub(super) restoring: bool,
    /// Gone workers whose nodes are live again, taking partitions at the next snapshot.
    pub(super) joining: Vec<WorkerId>,
    pub(super) keys: usize,
    /// The worker found markedly slower in the last window: a second window in a row moves
    /// partitions, so that a passing hiccup (a load stage, another process's burst) does not.
    pub(super) slower: Option<usize>,
}

impl Inner {
    /// A snapshot's entry in the status, by its number among all taken, if still listed.
    pub(super) fn snapshot(&mut self, record: usize) -> Option<&mut SnapshotStatus> {
        let at = record.checked_sub(self.status.older_snapshots)?;
        self.status.snapshots.get_mut(at)
    }

    /// A move's entry in the status, by its number among all made, if still listed.
    pub(super) fn migration(&mut self, record: usize) -> Option<&mut MigrationStatus> {
        let at = record.checked_sub(self.status.older_migrations)?;
        self.status.migrations.get_mut(at)
    }

    pub(super) fn since_start_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    pub(super) fn refresh_holdings(&mut self) {
        let workers = self.status.workers.len();
        let counts = self.map.counts(workers);
        for (w, status) in self.status.workers.iter_mut().enumerate() {
            status.partitions = counts[w];
            status.holds = holdings(&self.map, WorkerId(w as u16));
        }
    }
}

/// `g0: 0-4, 9, g1: 0`: the indices `worker` holds, per group, in ranges.
fn holdings(map: &PartitionMap, worker: WorkerId) -> String {
    let mut out = Vec::new();
    for g in 0..map.groups() {
        let held: Vec<u32> = map.held_by(worker, mote_jobs::GroupId(g as u16)).collect();
        if held.is_empty() {
            continue;
        }
        let mut ranges = Vec::new();
        let mut start = held[0];
        let mut prev = held[0];
        for &i in &held[1..] {
            if i != prev + 1 {
                ranges.push(range(start, prev));
                start = i;
            }
            prev = i;
        }
        ranges.push(range(start, prev));
        out.push(format!("g{g}: {}", ranges.join(", ")));
    }
    out.join("; ")
}

fn range(a: u32, b: u32) -> String {
    if a == b {
        a.to_string()
    } else {
        format!("{a}-{b}")
    }
}

/// A partition's new entry, and why it moves.
pub(super) type Move = (PartitionKey, Entry, String);

/// The moves from one worker to another: (source URL, destination URL), the new entries.
pub(super) type MoveBatch = ((String, String), Vec<(PartitionKey, Entry)>);

/// What a report or a look at the job leads to, done after the lock is released.
pub(super) enum Action {
    None,
    End(JobState, Option<String>),
    Broadcast(WorkerMessage),
    Recover(Vec<WorkerId>, String),
    Join(Vec<WorkerId>, Vec<u64>),
    Delete(Vec<u64>),
    /// ((source URL, destination URL), new entries), in generation.
    Move(Vec<MoveBatch>, u32),
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample(wall_us: u64, busy_us: u64, tasks: u64) -> Sample {
        Sample {
            wall_us,
            task_us: busy_us,
            busy_us,
            tasks,
        }
    }

    #[test]
    fn a_window_of_no_time_or_of_a_clock_begun_anew_has_no_rate() {
        let before = sample(5_000_000, 4_000_000, 900);
        assert_eq!(before.rates_to(&before, 2), None);
        assert_eq!(before.rates_to(&sample(1_000_000, 10, 3), 2), None);
    }

    #[test]
    fn a_second_of_half_busy_cores_is_half_idle() {
        let rates = sample(0, 0, 0)
            .rates_to(&sample(1_000_000, 1_000_000, 250), 2)
            .unwrap();
        assert_eq!(
            rates,
            Rates {
                tasks_per_s: 250.0,
                idle_share: 0.5
            }
        );
    }

    proptest! {
        /// What the status serves is always a number JSON can carry, whatever the reports said.
        #[test]
        fn every_rate_is_finite(
            a in (any::<u64>(), any::<u64>(), any::<u64>()),
            b in (any::<u64>(), any::<u64>(), any::<u64>()),
            cores in any::<u32>(),
        ) {
            let (before, now) = (sample(a.0, a.1, a.2), sample(b.0, b.1, b.2));
            if let Some(r) = before.rates_to(&now, cores) {
                prop_assert!(r.tasks_per_s.is_finite() && r.tasks_per_s >= 0.0);
                prop_assert!((0.0..=1.0).contains(&r.idle_share));
            }
        }
    }
}
