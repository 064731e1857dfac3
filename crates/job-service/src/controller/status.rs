//! What `GET /v1/jobs/ID` shows of a job: the supervision turned into the API's types, and
//! what only the status needs beside it ([`Shown`]: the rates, measured over a second or so,
//! and the end once it was carried out).

use super::{
    Controller, Job, JobState, JobStatus, MigrationStatus, RestoreStatus, SnapshotState,
    SnapshotStatus, WorkerStatus,
};
use mote_jobs::message::Progress;
use mote_jobs::supervisor::{self, History, Supervisor};
use mote_jobs::{PartitionMap, WorkerId};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A rate is measured over at least this long.
const RATE_WINDOW: Duration = Duration::from_millis(900);

/// What the status shows beside the supervision.
pub(super) struct Shown {
    partitions: u32,
    /// When the job started, in milliseconds since the Unix epoch.
    started_ms: u64,
    /// Per worker: the progress its rates are measured from, and the rates last measured.
    samples: Vec<Sample>,
    rates: Vec<Option<Rates>>,
    /// (when, tasks) a second or so ago, and the job's rate since.
    sample: (Instant, u64),
    tasks_per_s: f64,
    /// Where the job's snapshots are, when they could not be deleted.
    pub(super) snapshots_left: Option<String>,
    /// How the job ended, once its workers were stopped and its snapshots deleted.
    end: Option<(JobState, Option<String>)>,
}

impl Shown {
    /// What a job of `partitions` on `workers` shows, started at `started_ms` (now if none: a
    /// job taken over keeps its start).
    pub(super) fn new(
        now: Instant,
        partitions: u32,
        workers: usize,
        started_ms: Option<u64>,
    ) -> Self {
        Self {
            partitions,
            started_ms: started_ms.unwrap_or_else(|| {
                SystemTime::now()
                    .duration_since(UNIX_EPOCH)
                    .map_or(0, |d| d.as_millis() as u64)
            }),
            samples: vec![Sample::default(); workers],
            rates: vec![None; workers],
            sample: (now, 0),
            tasks_per_s: 0.0,
            snapshots_left: None,
            end: None,
        }
    }

    pub(super) fn running(&mut self, now: Instant) {
        self.sample = (now, 0);
    }

    /// A worker's progress as the supervisor took it: its rates move once a window passed, or
    /// when its clock began anew (a restored worker's).
    pub(super) fn sample(&mut self, worker: WorkerId, progress: &Progress) {
        let w = worker.0 as usize;
        let Some(before) = self.samples.get(w) else {
            return;
        };
        let dt = progress.wall_us.saturating_sub(before.wall_us);
        if dt >= RATE_WINDOW.as_micros() as u64 || before.wall_us > progress.wall_us {
            let now = Sample::of(progress);
            self.rates[w] = before.rates_to(&now, progress.cores);
            self.samples[w] = now;
        }
    }

    /// The job ended as `state`, for the reason `error`.
    pub(super) fn end(&mut self, state: JobState, error: Option<String>) {
        self.end.get_or_insert((state, error));
    }

    pub(super) fn ended(&self) -> bool {
        self.end.is_some()
    }
}

impl Controller {
    /// The job's status now.
    pub fn status(&self) -> JobStatus {
        let now = Instant::now();
        let mut job = self.job.lock();
        let Job {
            supervisor, shown, ..
        } = &mut *job;
        let workers = supervisor.workers();
        let sum = |f: fn(&Progress) -> u64| workers.iter().map(|w| f(&w.progress)).sum::<u64>();
        let tasks = sum(|p| p.tasks);
        let started = supervisor.started();
        let end = supervisor.ended_at().unwrap_or(now);
        if supervisor.ended_at().is_some() {
            let secs = end.saturating_duration_since(started).as_secs_f64();
            shown.tasks_per_s = tasks as f64 / secs.max(1e-6);
        } else if now.saturating_duration_since(shown.sample.0) >= RATE_WINDOW {
            let secs = now.saturating_duration_since(shown.sample.0).as_secs_f64();
            shown.tasks_per_s = tasks.saturating_sub(shown.sample.1) as f64 / secs;
            shown.sample = (now, tasks);
        }
        let (state, error) = shown.end.clone().unwrap_or((JobState::Running, None));
        let plan = self.setup.spec.snapshots.as_ref();
        let history = supervisor.history();
        JobStatus {
            id: self.id.clone(),
            function: self.setup.spec.function.clone(),
            state,
            controller: self.setup.me.clone(),
            error,
            partitions: shown.partitions,
            iteration: workers
                .iter()
                .filter(|w| w.live)
                .map(|w| w.progress.iterations)
                .min()
                .unwrap_or(0),
            tasks,
            tasks_per_s: shown.tasks_per_s,
            elapsed_ms: end.saturating_duration_since(started).as_millis() as u64,
            started_ms: shown.started_ms,
            task_us: sum(|p| p.task_us),
            scheduling_us: sum(|p| p.scheduling_us),
            generation: supervisor.generation(),
            rebalance: self.setup.rebalance,
            snapshot_to: plan.map(|p| format!("{}/{}", p.bucket, p.prefix)),
            snapshot_every: plan.map(|p| p.every),
            snapshots_left: shown.snapshots_left.clone(),
            workers: worker_statuses(supervisor, &shown.rates),
            migrations: migrations(supervisor),
            older_migrations: history.migrations.older(),
            snapshots: history.snapshots.iter().map(snapshot).collect(),
            older_snapshots: history.snapshots.older(),
            restores: restores(history),
        }
    }
}

fn worker_statuses(supervisor: &Supervisor, rates: &[Option<Rates>]) -> Vec<WorkerStatus> {
    let map = supervisor.map();
    let counts = map.counts(supervisor.workers().len());
    supervisor
        .workers()
        .iter()
        .enumerate()
        .map(|(w, s)| {
            let p = &s.progress;
            let busy = p.task_us + p.scheduling_us;
            let rates = rates.get(w).copied().flatten();
            WorkerStatus {
                name: s.name.clone(),
                url: s.url.clone(),
                cores: s.cores,
                live: s.live,
                partitions: counts[w],
                holds: holdings(map, WorkerId(w as u16)),
                tasks: p.tasks,
                tasks_per_s: rates.map(|r| r.tasks_per_s),
                idle_share: rates.map(|r| r.idle_share),
                scheduling_share: p.scheduling_us as f64 / busy.max(1) as f64,
                done: s.done,
            }
        })
        .collect()
}

fn migrations(supervisor: &Supervisor) -> Vec<MigrationStatus> {
    let name = |w: WorkerId| {
        supervisor
            .workers()
            .get(w.0 as usize)
            .map_or_else(String::new, |s| s.name.clone())
    };
    supervisor
        .history()
        .migrations
        .iter()
        .map(|m| MigrationStatus {
            at_ms: m.at.as_millis() as u64,
            from: name(m.from),
            to: name(m.to),
            partitions: m.partitions,
            bytes: m.bytes,
            ms: m.took.map(|t| t.as_millis() as u64),
            reason: m.reason.clone(),
        })
        .collect()
}

fn snapshot(s: &supervisor::SnapshotRecord) -> SnapshotStatus {
    SnapshotStatus {
        iteration: s.iteration,
        state: match s.state {
            supervisor::SnapshotState::Storing => SnapshotState::Storing,
            supervisor::SnapshotState::Complete => SnapshotState::Complete,
            supervisor::SnapshotState::Incomplete => SnapshotState::Incomplete,
            supervisor::SnapshotState::Deleted => SnapshotState::Deleted,
        },
        stored: s.stored,
        of: s.of,
        bytes: s.bytes,
        write_ms: s.write.as_secs_f64() * 1e3,
        error: s.error.clone(),
    }
}

fn restores(history: &History) -> Vec<RestoreStatus> {
    history
        .restores
        .iter()
        .map(|r| RestoreStatus {
            at_ms: r.at.as_millis() as u64,
            reason: r.reason.clone(),
            iteration: r.iteration,
            generation: r.generation,
            ms: r.took.map(|t| t.as_millis() as u64),
        })
        .collect()
}

/// What a worker had done when its rates were last measured.
#[derive(Clone, Debug, Default)]
struct Sample {
    wall_us: u64,
    busy_us: u64,
    tasks: u64,
}

/// A worker's rates over a window.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Rates {
    tasks_per_s: f64,
    idle_share: f64,
}

impl Sample {
    fn of(progress: &Progress) -> Self {
        Self {
            wall_us: progress.wall_us,
            busy_us: progress.task_us + progress.scheduling_us,
            tasks: progress.tasks,
        }
    }

    /// The rates from this sample to `now`, on `cores` cores; none when no time passed
    /// between them or the worker's clock began anew (a restored worker's), where a rate would
    /// be 0/0 or count work of another life.
    fn rates_to(&self, now: &Sample, cores: u32) -> Option<Rates> {
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

/// `g0: 0-4, 9; g1: 0`: the indices `worker` holds, per group, in ranges.
fn holdings(map: &PartitionMap, worker: WorkerId) -> String {
    let mut out = Vec::new();
    for g in 0..map.groups() {
        let held: Vec<u32> = map.held_by(worker, mote_jobs::GroupId(g as u16)).collect();
        let Some((&first, rest)) = held.split_first() else {
            continue;
        };
        let mut ranges = Vec::new();
        let (mut start, mut prev) = (first, first);
        for &i in rest {
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

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample(wall_us: u64, busy_us: u64, tasks: u64) -> Sample {
        Sample {
            wall_us,
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

    #[test]
    fn holdings_are_ranges_per_group() {
        let map = PartitionMap::assign(&[6, 2], &[1, 1]);
        let first = holdings(&map, WorkerId(0));
        assert!(first.starts_with("g0: "), "{first}");
        assert!(first.contains("; g1: "), "{first}");
        assert_eq!(range(3, 3), "3");
        assert_eq!(range(0, 4), "0-4");
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
