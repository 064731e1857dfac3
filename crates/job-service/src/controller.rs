//! A job's controller (section 3.3), on the node `mote job run` talked to. It chose the workers
//! and computed the partition map before the job started; afterwards it schedules no task but
//! keeps the job balanced and alive:
//!
//! - **Load**: workers report four times a second, with the guest time each partition took.
//!   Once a second the controller compares the workers' time per partition; when one is
//!   markedly slower ([`SLOWER`]) two seconds in a row, it moves partitions to even the time out
//!   (`PartitionMap::rebalance`, index by index so co-partitioned data stays together): the
//!   destination is made ready first, then the source sends them (`mote_jobs::Handoffs`), and
//!   the map changes, for every worker, when the destination reports them arrived.
//! - **Snapshots**: with `--snapshot-every N`, workers store their partitions' images at every
//!   N-th iteration's barrier; a snapshot is complete when every partition is stored, and then
//!   the ones before it are deleted.
//! - **Failures**: a worker that falls silent or that another cannot reach is gone. Its
//!   partitions go to the others and every worker rolls back to the last complete snapshot (a
//!   new generation); with no snapshot the job fails, saying so. A gone worker whose node is
//!   live again takes partitions at the next complete snapshot.
//!
//! When the job ends its snapshots are deleted; if they cannot be, the status says where they
//! are.

use crate::transport::Transport;
use crate::{ClusterNodes, input};
use mote_jobs::message::{
    Envelope, JobSpec, Progress, Report, Restore, SnapshotPlan, WorkerMessage,
};
use mote_jobs::{Cursor, Entry, PartitionKey, PartitionMap, WorkerId};
use mote_objects::Objects;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// A worker silent for this long is taken for gone.
const SILENCE: Duration = Duration::from_secs(3);

/// How often the controller compares the workers' speed.
const WINDOW: Duration = Duration::from_secs(1);

/// A worker whose time per partition is this many times the fastest's gives partitions away.
pub const SLOWER: f64 = 1.3;

/// Snapshots and moves a status lists; older ones are only counted.
const LISTED: usize = 16;

/// Where a job is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JobState {
    /// Its workers are running it.
    Running,
    /// Every worker ran the whole program.
    Succeeded,
    /// A task failed or a worker was lost.
    Failed,
    /// A user cancelled it.
    Cancelled,
}

/// One worker as the controller sees it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WorkerStatus {
    /// The node's name.
    pub name: String,
    /// Its URL.
    pub url: String,
    /// Its cores.
    pub cores: u32,
    /// Whether it takes part (false once it is gone).
    pub live: bool,
    /// Partitions it holds, of every group.
    pub partitions: usize,
    /// Which: per group, index ranges (`g0: 0-9, g1: 0`).
    pub holds: String,
    /// Tasks it ran.
    pub tasks: u64,
    /// Tasks per second over the last second or so.
    pub tasks_per_s: f64,
    /// Share of its executors' time spent waiting for work over the last second or so.
    pub idle_share: f64,
    /// Share of its executors' busy time spent outside guest code.
    pub scheduling_share: f64,
    /// Whether it ran the whole program.
    pub done: bool,
}

/// A move of partitions between workers.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MigrationStatus {
    /// When it started, in ms since the job ran.
    pub at_ms: u64,
    /// The source.
    pub from: String,
    /// The destination.
    pub to: String,
    /// Partitions moved (every group's at each index moved).
    pub partitions: usize,
    /// Bytes of their images.
    pub bytes: u64,
    /// Time until the last one arrived, in ms; none while moving.
    pub ms: Option<u64>,
    /// Why.
    pub reason: String,
}

/// Where a snapshot is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SnapshotState {
    /// Workers are storing it.
    Storing,
    /// Every partition is stored: a restore may use it.
    Complete,
    /// It will not complete (a partition was not stored, or a restore overtook it).
    Incomplete,
    /// A newer one completed, or the job ended: its objects were deleted.
    Deleted,
}

/// One snapshot.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SnapshotStatus {
    /// The iteration it was taken at.
    pub iteration: u64,
    /// Where it is.
    pub state: SnapshotState,
    /// Partitions stored.
    pub stored: usize,
    /// Partitions the job has.
    pub of: usize,
    /// Bytes stored.
    pub bytes: u64,
    /// The longest time a worker took from the barrier to its last image stored, in ms.
    pub write_ms: f64,
    /// Why it is incomplete.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// One rollback to a snapshot.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RestoreStatus {
    /// When it was decided, in ms since the job ran.
    pub at_ms: u64,
    /// Why.
    pub reason: String,
    /// The snapshot's iteration.
    pub iteration: u64,
    /// The generation it began.
    pub generation: u32,
    /// Time until every worker ran again from the snapshot, in ms.
    pub ms: Option<u64>,
}

/// A job's status, as `GET /v1/jobs/{id}` shows it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobStatus {
    /// Its id.
    pub id: String,
    /// The job function.
    pub function: String,
    /// Where it is.
    pub state: JobState,
    /// Why it failed, naming the stage, the partition and the cause.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The job's partition count.
    pub partitions: u32,
    /// Iterations of the program's top-level loops every worker has reached.
    pub iteration: u64,
    /// Tasks run so far, on every worker.
    pub tasks: u64,
    /// Tasks per second over the last second (over the whole run once it ended).
    pub tasks_per_s: f64,
    /// Time from when every worker ran until it ended, in ms.
    pub elapsed_ms: u64,
    /// When it started, in ms since the Unix epoch.
    pub started_ms: u64,
    /// Time the executors spent in guest tasks, in µs, on every worker.
    pub task_us: u64,
    /// Time the executors spent scheduling (declaring, spawning, settling), in µs.
    pub scheduling_us: u64,
    /// Restores so far, each beginning a generation.
    pub generation: u32,
    /// Whether the controller moves partitions off slow workers.
    pub rebalance: bool,
    /// Where snapshots go (`BUCKET/PREFIX`), when they are on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_to: Option<String>,
    /// Snapshot every this many iterations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_every: Option<u64>,
    /// Snapshot objects that could not be deleted when the job ended, and why.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshots_left: Option<String>,
    /// The workers, by worker id.
    pub workers: Vec<WorkerStatus>,
    /// The latest moves of partitions, oldest first.
    pub migrations: Vec<MigrationStatus>,
    /// Moves older than those listed.
    pub older_migrations: usize,
    /// The latest snapshots, oldest first.
    pub snapshots: Vec<SnapshotStatus>,
    /// Snapshots older than those listed.
    pub older_snapshots: usize,
    /// Rollbacks, oldest first.
    pub restores: Vec<RestoreStatus>,
}

/// What a controller needs beyond its workers and map.
pub struct ControllerSetup {
    /// The spec every worker was started with (its `me` is the first worker's): a worker that
    /// rejoins gets a copy.
    pub spec: JobSpec,
    /// Whether to move partitions off slow workers.
    pub rebalance: bool,
    /// The node's object storage, where snapshots are.
    pub objects: Option<Arc<Objects>>,
    /// The cluster's live nodes, where gone workers come back.
    pub cluster: Arc<dyn ClusterNodes>,
}

/// One job's controller.
pub struct Controller {
    id: String,
    status: Mutex<Inner>,
    transport: Arc<dyn Transport>,
    setup: ControllerSetup,
}

/// A move under way.
struct Moving {
    keys: HashSet<PartitionKey>,
    started: Instant,
    record: usize,
}

/// What each worker had done at the start of the current window.
#[derive(Clone, Default)]
struct Sample {
    wall_us: u64,
    task_us: u64,
    busy_us: u64,
    tasks: u64,
}

struct Partial {
    keys: HashSet<PartitionKey>,
    cursor: Option<Cursor>,
    record: usize,
}

struct Inner {
    status: JobStatus,
    progress: Vec<Progress>,
    heard: Vec<Instant>,
    started: Instant,
    ended: Option<Instant>,
    /// (when, tasks) a second or so ago, for the rate.
    sample: (Instant, u64),
    map: PartitionMap,
    generation: u32,
    live: Vec<bool>,
    /// Per worker: the rate sample for the status, and the start of the rebalance window.
    rates: Vec<Sample>,
    window: Vec<Sample>,
    window_at: Instant,
    moving: Vec<Moving>,
    /// When the last move ended, or a restore: the next rebalance waits a window after it.
    settled: Instant,
    snapshots: BTreeMap<u64, Partial>,
    complete: Option<(u64, Cursor)>,
    restoring: bool,
    /// Gone workers whose nodes are live again, taking partitions at the next snapshot.
    joining: Vec<WorkerId>,
    keys: usize,
    /// The worker found markedly slower in the last window: a second window in a row moves
    /// partitions, so that a passing hiccup (a load stage, another process's burst) does not.
    slower: Option<usize>,
}

impl Inner {
    /// A snapshot's entry in the status, by its number among all taken, if still listed.
    fn snapshot(&mut self, record: usize) -> Option<&mut SnapshotStatus> {
        let at = record.checked_sub(self.status.older_snapshots)?;
        self.status.snapshots.get_mut(at)
    }

    /// A move's entry in the status, by its number among all made, if still listed.
    fn migration(&mut self, record: usize) -> Option<&mut MigrationStatus> {
        let at = record.checked_sub(self.status.older_migrations)?;
        self.status.migrations.get_mut(at)
    }

    fn since_start_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    fn refresh_holdings(&mut self) {
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

impl Controller {
    /// The controller of a job about to start on `workers` (name, URL, cores) with `map`.
    pub fn new(
        partitions: u32,
        workers: &[(String, String, u32)],
        map: &PartitionMap,
        transport: Arc<dyn Transport>,
        setup: ControllerSetup,
    ) -> Arc<Self> {
        let now = Instant::now();
        let started_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let plan = setup.spec.snapshots.clone();
        let keys = (0..map.groups())
            .map(|g| map.size(mote_jobs::GroupId(g as u16)) as usize)
            .sum();
        let mut inner = Inner {
            status: JobStatus {
                id: setup.spec.id.clone(),
                function: setup.spec.function.clone(),
                state: JobState::Running,
                error: None,
                partitions,
                iteration: 0,
                tasks: 0,
                tasks_per_s: 0.0,
                elapsed_ms: 0,
                started_ms,
                task_us: 0,
                scheduling_us: 0,
                generation: 0,
                rebalance: setup.rebalance,
                snapshot_to: plan.as_ref().map(|p| format!("{}/{}", p.bucket, p.prefix)),
                snapshot_every: plan.as_ref().map(|p| p.every),
                snapshots_left: None,
                workers: workers
                    .iter()
                    .map(|(name, url, cores)| WorkerStatus {
                        name: name.clone(),
                        url: url.clone(),
                        cores: *cores,
                        live: true,
                        partitions: 0,
                        holds: String::new(),
                        tasks: 0,
                        tasks_per_s: 0.0,
                        idle_share: 0.0,
                        scheduling_share: 0.0,
                        done: false,
                    })
                    .collect(),
                migrations: Vec::new(),
                older_migrations: 0,
                snapshots: Vec::new(),
                older_snapshots: 0,
                restores: Vec::new(),
            },
            progress: vec![Progress::default(); workers.len()],
            heard: vec![now; workers.len()],
            started: now,
            ended: None,
            sample: (now, 0),
            map: map.clone(),
            generation: 0,
            live: vec![true; workers.len()],
            rates: vec![Sample::default(); workers.len()],
            window: vec![Sample::default(); workers.len()],
            window_at: now,
            moving: Vec::new(),
            settled: now,
            snapshots: BTreeMap::new(),
            complete: None,
            restoring: false,
            joining: Vec::new(),
            keys,
            slower: None,
        };
        inner.refresh_holdings();
        Arc::new(Self {
            id: setup.spec.id.clone(),
            status: Mutex::new(inner),
            transport,
            setup,
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.status
            .lock()
            .expect("a controller's lock is never poisoned")
    }

    /// The job's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The job's status now.
    pub fn status(&self) -> JobStatus {
        let mut inner = self.lock();
        let now = Instant::now();
        let end = inner.ended.unwrap_or(now);
        inner.status.elapsed_ms = (end - inner.started).as_millis() as u64;
        let tasks = inner.status.tasks;
        if inner.ended.is_some() {
            let secs = (end - inner.started).as_secs_f64().max(1e-6);
            inner.status.tasks_per_s = tasks as f64 / secs;
        } else if now - inner.sample.0 >= Duration::from_millis(900) {
            let secs = (now - inner.sample.0).as_secs_f64();
            inner.status.tasks_per_s = tasks.saturating_sub(inner.sample.1) as f64 / secs;
            inner.sample = (now, tasks);
        }
        inner.status.clone()
    }

    /// Every worker runs: the job's clock starts now, after each compiled the module and
    /// instantiated its partitions.
    pub fn running(&self) {
        let mut inner = self.lock();
        let now = Instant::now();
        inner.started = now;
        inner.sample = (now, 0);
        inner.window_at = now;
        inner.settled = now;
        inner.heard.iter_mut().for_each(|h| *h = now);
    }

    /// Whether it ended.
    pub fn ended(&self) -> bool {
        self.lock().status.state != JobState::Running
    }

    /// Whether it ended or is ending: `end` stops the workers before the state changes, so a
    /// worker may be gone while the job still reads as running.
    pub fn ending(&self) -> bool {
        let inner = self.lock();
        inner.ended.is_some() || inner.status.state != JobState::Running
    }

    /// A worker's report.
    pub async fn report(self: &Arc<Self>, report: Report) {
        let progress = report.progress().clone();
        let w = progress.worker.0 as usize;
        let action = {
            let mut inner = self.lock();
            if w >= inner.progress.len()
                || inner.status.state != JobState::Running
                || inner.ended.is_some()
                || progress.generation != inner.generation
                || !inner.live[w]
            {
                return;
            }
            inner.heard[w] = Instant::now();
            self.take_progress(&mut inner, progress);
            match report {
                Report::Progress(_) => Action::None,
                Report::Done(_) => {
                    inner.status.workers[w].done = true;
                    let live = inner.live.clone();
                    let all = inner
                        .status
                        .workers
                        .iter()
                        .zip(&live)
                        .all(|(s, live)| s.done || !live);
                    if all {
                        Action::End(JobState::Succeeded, None)
                    } else {
                        Action::None
                    }
                }
                Report::Failed { error, .. } => {
                    let name = inner.status.workers[w].name.clone();
                    Action::End(JobState::Failed, Some(format!("on worker {name}: {error}")))
                }
                Report::Snapshotted {
                    iteration,
                    keys,
                    bytes,
                    write_us,
                    cursor,
                    error,
                    ..
                } => self.snapshotted(&mut inner, iteration, keys, bytes, write_us, cursor, error),
                Report::Arrived { entries, bytes, .. } => self.arrived(&mut inner, entries, bytes),
                Report::Unreachable { peer, error, .. } => {
                    let p = peer.0 as usize;
                    if p < inner.live.len() && inner.live[p] {
                        let (name, by) = (
                            inner.status.workers[p].name.clone(),
                            inner.status.workers[w].name.clone(),
                        );
                        Action::Recover(
                            vec![peer],
                            format!("worker {name} could not be reached by worker {by}: {error}"),
                        )
                    } else {
                        Action::None
                    }
                }
            }
        };
        self.act(action).await;
    }

    fn take_progress(&self, inner: &mut Inner, progress: Progress) {
        let w = progress.worker.0 as usize;
        let busy = progress.task_us + progress.scheduling_us;
        let rate = &inner.rates[w];
        let dt = progress.wall_us.saturating_sub(rate.wall_us);
        if dt >= 900_000 || rate.wall_us > progress.wall_us {
            let dbusy = busy.saturating_sub(rate.busy_us);
            let cores = u64::from(progress.cores.max(1));
            let worker = &mut inner.status.workers[w];
            worker.tasks_per_s = progress.tasks.saturating_sub(rate.tasks) as f64 * 1e6 / dt as f64;
            worker.idle_share = (1.0 - dbusy as f64 / (dt * cores) as f64).clamp(0.0, 1.0);
            inner.rates[w] = Sample {
                wall_us: progress.wall_us,
                task_us: progress.task_us,
                busy_us: busy,
                tasks: progress.tasks,
            };
        }
        let worker = &mut inner.status.workers[w];
        worker.tasks = progress.tasks;
        worker.scheduling_share = progress.scheduling_us as f64 / busy.max(1) as f64;
        inner.progress[w] = progress;
        let live = inner.live.clone();
        let sum = |all: &[Progress], f: fn(&Progress) -> u64| all.iter().map(f).sum::<u64>();
        inner.status.tasks = sum(&inner.progress, |p| p.tasks);
        inner.status.task_us = sum(&inner.progress, |p| p.task_us);
        inner.status.scheduling_us = sum(&inner.progress, |p| p.scheduling_us);
        inner.status.iteration = inner
            .progress
            .iter()
            .zip(&live)
            .filter(|(_, l)| **l)
            .map(|(p, _)| p.iterations)
            .min()
            .unwrap_or(0);
    }

    #[allow(clippy::too_many_arguments)]
    fn snapshotted(
        &self,
        inner: &mut Inner,
        iteration: u64,
        keys: Vec<PartitionKey>,
        bytes: u64,
        write_us: u64,
        cursor: Cursor,
        error: Option<String>,
    ) -> Action {
        if inner
            .complete
            .as_ref()
            .is_some_and(|(i, _)| *i >= iteration)
        {
            return Action::None;
        }
        let of = inner.keys;
        let record = match inner.snapshots.get(&iteration) {
            Some(p) => p.record,
            None => {
                inner.status.snapshots.push(SnapshotStatus {
                    iteration,
                    state: SnapshotState::Storing,
                    stored: 0,
                    of,
                    bytes: 0,
                    write_ms: 0.0,
                    error: None,
                });
                let record = inner.status.older_snapshots + inner.status.snapshots.len() - 1;
                if inner.status.snapshots.len() > LISTED {
                    inner.status.snapshots.remove(0);
                    inner.status.older_snapshots += 1;
                }
                inner.snapshots.insert(
                    iteration,
                    Partial {
                        keys: HashSet::new(),
                        cursor: None,
                        record,
                    },
                );
                record
            }
        };
        let partial = inner.snapshots.get_mut(&iteration).expect("inserted");
        partial.keys.extend(keys);
        partial.cursor.get_or_insert(cursor);
        let stored = partial.keys.len();
        let Some(status) = inner.snapshot(record) else {
            return Action::None;
        };
        status.stored = stored;
        status.bytes += bytes;
        status.write_ms = status.write_ms.max(write_us as f64 / 1000.0);
        if let Some(error) = error {
            status.state = SnapshotState::Incomplete;
            status.error.get_or_insert(error);
            return Action::None;
        }
        if stored < of || status.state != SnapshotState::Storing {
            return Action::None;
        }
        status.state = SnapshotState::Complete;
        let partial = inner.snapshots.remove(&iteration).expect("present");
        inner.complete = Some((iteration, partial.cursor.expect("set with the keys")));
        // Older snapshots are of no use now; those still storing will never complete.
        let older: Vec<u64> = inner
            .snapshots
            .range(..iteration)
            .map(|(i, _)| *i)
            .collect();
        for i in older {
            let p = inner.snapshots.remove(&i).expect("listed");
            if let Some(s) = inner.snapshot(p.record) {
                s.state = SnapshotState::Incomplete;
            }
        }
        let mut stale = Vec::new();
        for s in inner.status.snapshots.iter_mut() {
            if s.iteration < iteration && s.state == SnapshotState::Complete {
                s.state = SnapshotState::Deleted;
                stale.push(s.iteration);
            }
        }
        if !inner.joining.is_empty() {
            return Action::Join(std::mem::take(&mut inner.joining), stale);
        }
        Action::Delete(stale)
    }

    fn arrived(
        &self,
        inner: &mut Inner,
        entries: Vec<(PartitionKey, Entry)>,
        bytes: u64,
    ) -> Action {
        for &(key, entry) in &entries {
            inner.map.apply(key, entry);
        }
        let now = Instant::now();
        let mut took = Vec::new();
        let mut finished = Vec::new();
        for (n, m) in inner.moving.iter_mut().enumerate() {
            let before = m.keys.len();
            for (key, _) in &entries {
                m.keys.remove(key);
            }
            if m.keys.len() < before {
                took.push(m.record);
            }
            if m.keys.is_empty() {
                finished.push(n);
            }
        }
        for record in took {
            if let Some(s) = inner.migration(record) {
                s.bytes += bytes;
            }
        }
        for n in finished.into_iter().rev() {
            let m = inner.moving.remove(n);
            if let Some(s) = inner.migration(m.record) {
                s.ms = Some((now - m.started).as_millis() as u64);
            }
            inner.settled = now;
        }
        inner.refresh_holdings();
        Action::Broadcast(WorkerMessage::MapUpdate { entries })
    }

    async fn act(self: &Arc<Self>, action: Action) {
        match action {
            Action::None => {}
            Action::End(state, error) => self.end(state, error).await,
            Action::Broadcast(message) => {
                let (targets, generation) = self.targets();
                let envelope = Envelope {
                    generation,
                    message,
                };
                for url in targets {
                    if let Err(e) = self.transport.message(&url, &self.id, &envelope).await {
                        tracing::debug!(job = self.id, error = %e, "a map update was not taken");
                    }
                }
            }
            Action::Recover(gone, reason) => self.restore(gone, Vec::new(), reason).await,
            Action::Join(joining, stale) => {
                self.delete_snapshots(stale).await;
                // The cluster's view may still list a node that died (until its lease
                // expires): only a node that answers rejoins. Asking it to stop the job's
                // worker is the probe, and clears what a cut-off worker left there.
                let mut back = Vec::new();
                for w in joining {
                    let url = self.lock().status.workers[w.0 as usize].url.clone();
                    match self.transport.stop(&url, &self.id).await {
                        Ok(()) => back.push(w),
                        Err(e) if e.refused => back.push(w),
                        Err(_) => {}
                    }
                }
                if back.is_empty() {
                    return;
                }
                let names: Vec<String> = {
                    let inner = self.lock();
                    back.iter()
                        .map(|w| inner.status.workers[w.0 as usize].name.clone())
                        .collect()
                };
                let reason = format!("worker {} is back", names.join(", "));
                self.restore(Vec::new(), back, reason).await;
            }
            Action::Delete(stale) => self.delete_snapshots(stale).await,
            Action::Move(moves, generation) => self.start(moves, generation).await,
        }
    }

    fn targets(&self) -> (Vec<String>, u32) {
        let inner = self.lock();
        let urls = inner
            .status
            .workers
            .iter()
            .zip(&inner.live)
            .filter(|(_, l)| **l)
            .map(|(w, _)| w.url.clone())
            .collect();
        (urls, inner.generation)
    }

    async fn delete_snapshots(&self, iterations: Vec<u64>) {
        let (Some(plan), Some(objects)) = (&self.setup.spec.snapshots, &self.setup.objects) else {
            return;
        };
        for iteration in iterations {
            let prefix = format!("{}{iteration:010}/", plan.job_prefix(&self.id));
            if let Err(e) = objects.delete_prefix(&plan.bucket, &prefix).await {
                tracing::warn!(job = self.id, error = %e, "an old snapshot was not deleted");
            }
        }
    }

    /// Rolls every live worker back to the last complete snapshot, without the workers `gone`
    /// and with the workers `joining`, in a new generation; fails the job when there is no
    /// snapshot to roll back to.
    async fn restore(
        self: &Arc<Self>,
        gone: Vec<WorkerId>,
        joining: Vec<WorkerId>,
        reason: String,
    ) {
        let decided = Instant::now();
        let plan = {
            let mut inner = self.lock();
            if inner.status.state != JobState::Running || inner.ended.is_some() || inner.restoring {
                if !joining.is_empty() {
                    inner.joining.extend(joining);
                }
                return;
            }
            for w in &gone {
                inner.live[w.0 as usize] = false;
                inner.status.workers[w.0 as usize].live = false;
            }
            let names = |inner: &Inner, ws: &[WorkerId]| -> String {
                ws.iter()
                    .map(|w| inner.status.workers[w.0 as usize].name.clone())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let failure = if self.setup.spec.snapshots.is_none() {
                Some(format!(
                    "{reason}; the job has no snapshots to fall back to (run it with --snapshot-every N --snapshot-to BUCKET/PREFIX to survive a lost worker)"
                ))
            } else if inner.complete.is_none() {
                Some(format!(
                    "{reason}; no snapshot was complete yet (the first comes after iteration {}), so there is nothing to fall back to",
                    self.setup.spec.snapshots.as_ref().map_or(0, |p| p.every)
                ))
            } else if inner.live.iter().all(|l| !l) && joining.is_empty() {
                Some(format!("{reason}; no worker is left"))
            } else {
                None
            };
            if let Some(error) = failure {
                Err(error)
            } else {
                for w in &joining {
                    inner.live[w.0 as usize] = true;
                    inner.status.workers[w.0 as usize].live = true;
                }
                let weights: Vec<f64> = inner
                    .status
                    .workers
                    .iter()
                    .zip(&inner.live)
                    .map(|(w, l)| if *l { f64::from(w.cores.max(1)) } else { 0.0 })
                    .collect();
                for (key, entry) in inner.map.rebalance(&weights) {
                    inner.map.apply(key, entry);
                }
                inner.refresh_holdings();
                inner.generation += 1;
                inner.status.generation = inner.generation;
                inner.restoring = true;
                inner.moving.clear();
                for p in std::mem::take(&mut inner.snapshots).into_values() {
                    if let Some(s) = inner.snapshot(p.record) {
                        s.state = SnapshotState::Incomplete;
                        s.error = Some("a restore overtook it".to_owned());
                    }
                }
                for s in inner.status.migrations.iter_mut() {
                    if s.ms.is_none() {
                        s.reason.push_str(" (abandoned: a restore overtook it)");
                        s.ms = Some(0);
                    }
                }
                let (iteration, cursor) = inner.complete.clone().expect("checked above");
                let at_ms = inner.since_start_ms();
                let generation = inner.generation;
                inner.status.restores.push(RestoreStatus {
                    at_ms,
                    reason: reason.clone(),
                    iteration,
                    generation,
                    ms: None,
                });
                for s in inner.status.workers.iter_mut() {
                    s.done = false;
                }
                tracing::warn!(
                    job = self.id,
                    reason,
                    iteration,
                    gone = names(&inner, &gone),
                    "restoring the job from its last complete snapshot"
                );
                Ok((
                    Restore {
                        generation: inner.generation,
                        iteration,
                        cursor,
                        map: inner.map.clone(),
                        live: inner.live.clone(),
                        workers: inner.status.workers.iter().map(|w| w.url.clone()).collect(),
                    },
                    inner.status.restores.len() - 1,
                ))
            }
        };
        let (restore, record) = match plan {
            Ok(plan) => plan,
            Err(error) => {
                tracing::warn!(job = self.id, error, "the job cannot recover");
                self.end(JobState::Failed, Some(error)).await;
                return;
            }
        };
        for w in &gone {
            let url = self.lock().status.workers[w.0 as usize].url.clone();
            let (transport, id) = (self.transport.clone(), self.id.clone());
            tokio::spawn(async move {
                let _ = transport.stop(&url, &id).await;
            });
        }
        let mut started = Vec::new();
        for w in &joining {
            let url = self.lock().status.workers[w.0 as usize].url.clone();
            let mut spec = self.setup.spec.clone();
            spec.me = *w;
            spec.map = restore.map.clone();
            spec.live = restore.live.clone();
            spec.workers = restore.workers.clone();
            spec.generation = restore.generation - 1;
            match self.transport.start(&url, &spec).await {
                Ok(()) => started.push(url),
                Err(e) => {
                    self.lock().status.restores[record]
                        .reason
                        .push_str(&format!(" (it could not start: {e})"));
                }
            }
        }
        let urls = self.targets().0;
        let envelope = Envelope {
            generation: restore.generation,
            message: WorkerMessage::Restore(restore),
        };
        let sends = urls.iter().map(|url| {
            let envelope = &envelope;
            async move {
                self.transport
                    .message(url, &self.id, envelope)
                    .await
                    .map_err(|e| e.to_string())
            }
        });
        let results = futures_util::future::join_all(sends).await;
        if let Some(error) = results.into_iter().find_map(Result::err) {
            self.lock().restoring = false;
            self.end(
                JobState::Failed,
                Some(format!(
                    "the restore from the last snapshot failed: {error}"
                )),
            )
            .await;
            return;
        }
        for url in started {
            if let Err(e) = self.transport.run(&url, &self.id).await {
                tracing::warn!(job = self.id, error = %e, "a rejoining worker did not run");
            }
        }
        let mut inner = self.lock();
        inner.restoring = false;
        let now = Instant::now();
        inner.settled = now;
        inner.window_at = now;
        let live = inner.live.clone();
        for (w, l) in live.iter().enumerate() {
            if *l {
                inner.heard[w] = now;
            }
        }
        inner.status.restores[record].ms = Some((now - decided).as_millis() as u64);
    }

    /// Ends the job in `state`, stops every worker and deletes its snapshots; the state
    /// changes once that is done, so a job seen ended has left nothing behind (or says what).
    /// Only the first end counts.
    pub async fn end(&self, state: JobState, error: Option<String>) {
        let urls: Vec<String> = {
            let mut inner = self.lock();
            if inner.status.state != JobState::Running || inner.ended.is_some() {
                return;
            }
            inner.ended = Some(Instant::now());
            inner.status.workers.iter().map(|w| w.url.clone()).collect()
        };
        for url in urls {
            if let Err(e) = self.transport.stop(&url, &self.id).await {
                tracing::debug!(job = self.id, error = %e, "a worker could not be told to stop");
            }
        }
        let left = match (&self.setup.spec.snapshots, &self.setup.objects) {
            (Some(plan), Some(objects)) => {
                let prefix = plan.job_prefix(&self.id);
                Some(
                    objects
                        .delete_prefix(&plan.bucket, &prefix)
                        .await
                        .map_err(|e| (format!("{}/{prefix}", plan.bucket), e.to_string())),
                )
            }
            _ => None,
        };
        let mut inner = self.lock();
        inner.status.state = state;
        inner.status.error = error;
        let Some(left) = left else {
            return;
        };
        match left {
            Ok(_) => {
                for s in inner.status.snapshots.iter_mut() {
                    if s.state == SnapshotState::Complete || s.state == SnapshotState::Storing {
                        s.state = SnapshotState::Deleted;
                    }
                }
            }
            Err((place, e)) => {
                inner.status.snapshots_left = Some(format!(
                    "the job's snapshots under {place} were not deleted ({e}); delete them by hand"
                ))
            }
        }
    }

    /// Watches the job until it ends: gone workers (silent ones), workers back, and slow ones.
    pub fn watch(self: &Arc<Self>) {
        let controller = self.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(250));
            loop {
                tick.tick().await;
                let action = controller.check();
                if controller.ended() {
                    return;
                }
                controller.act(action).await;
            }
        });
    }

    /// One look at the job: a silent worker, a worker back, or a rebalance.
    fn check(self: &Arc<Self>) -> Action {
        let mut inner = self.lock();
        if inner.status.state != JobState::Running || inner.ended.is_some() || inner.restoring {
            return Action::None;
        }
        let silent: Vec<WorkerId> = (0..inner.live.len())
            .filter(|&w| inner.live[w] && inner.heard[w].elapsed() > SILENCE)
            .map(|w| WorkerId(w as u16))
            .collect();
        if !silent.is_empty() {
            let names: Vec<String> = silent
                .iter()
                .map(|w| {
                    let s = &inner.status.workers[w.0 as usize];
                    format!("{} ({})", s.name, s.url)
                })
                .collect();
            return Action::Recover(
                silent,
                format!(
                    "worker {} has not reported for {} s: its node is down or cut off",
                    names.join(", "),
                    SILENCE.as_secs()
                ),
            );
        }
        if self.setup.spec.snapshots.is_some() && inner.live.iter().any(|l| !l) {
            let nodes = self.setup.cluster.nodes();
            for w in 0..inner.live.len() {
                if inner.live[w] || inner.joining.contains(&WorkerId(w as u16)) {
                    continue;
                }
                // A node is the same worker by name: restarted, it may listen elsewhere.
                let name = inner.status.workers[w].name.clone();
                if let Some(node) = nodes.iter().find(|n| n.name == name) {
                    tracing::info!(
                        job = self.id,
                        name,
                        url = node.url,
                        "a gone worker's node is back; it rejoins at the next snapshot"
                    );
                    inner.status.workers[w].url = node.url.clone();
                    inner.joining.push(WorkerId(w as u16));
                }
            }
        }
        if !self.setup.rebalance
            || !inner.moving.is_empty()
            || inner.window_at.elapsed() < WINDOW
            || inner.settled.elapsed() < WINDOW
        {
            return Action::None;
        }
        let (slow, moves) = match rebalance_moves(&inner) {
            Some((slow, moves)) => (Some(slow), moves),
            None => (None, Vec::new()),
        };
        let confirmed = slow.is_some() && slow == inner.slower;
        inner.slower = slow;
        let moves = if confirmed { moves } else { Vec::new() };
        inner.window_at = Instant::now();
        inner.window = inner
            .progress
            .iter()
            .map(|p| Sample {
                wall_us: p.wall_us,
                task_us: p.task_us,
                busy_us: p.task_us + p.scheduling_us,
                tasks: p.tasks,
            })
            .collect();
        if moves.is_empty() {
            return Action::None;
        }
        self.start_moves(&mut inner, moves)
    }

    /// Records moves and returns the messages that start them: one `Arrive` to each
    /// destination, then one `Leave` to each source.
    fn start_moves(&self, inner: &mut Inner, moves: Vec<Move>) -> Action {
        let mut by_pair: BTreeMap<(u16, u16), Vec<(PartitionKey, Entry)>> = BTreeMap::new();
        let mut reason = String::new();
        for (key, entry, why) in moves {
            let from = inner.map.entry(key).worker;
            by_pair
                .entry((from.0, entry.worker.0))
                .or_default()
                .push((key, entry));
            reason = why;
        }
        let now = Instant::now();
        let mut sends = Vec::new();
        for ((from, to), entries) in by_pair {
            let at_ms = inner.since_start_ms();
            inner.status.migrations.push(MigrationStatus {
                at_ms,
                from: inner.status.workers[from as usize].name.clone(),
                to: inner.status.workers[to as usize].name.clone(),
                partitions: entries.len(),
                bytes: 0,
                ms: None,
                reason: reason.clone(),
            });
            inner.moving.push(Moving {
                keys: entries.iter().map(|(k, _)| *k).collect(),
                started: now,
                record: inner.status.older_migrations + inner.status.migrations.len() - 1,
            });
            if inner.status.migrations.len() > LISTED {
                inner.status.migrations.remove(0);
                inner.status.older_migrations += 1;
            }
            let urls = (
                inner.status.workers[from as usize].url.clone(),
                inner.status.workers[to as usize].url.clone(),
            );
            sends.push((urls, entries));
        }
        Action::Move(sends, inner.generation)
    }
}

/// The slowest worker and the moves that even out the workers' time per partition, when it is
/// markedly slower than the fastest, with the reason.
fn rebalance_moves(inner: &Inner) -> Option<(usize, Vec<Move>)> {
    let workers = inner.live.len();
    let live: Vec<usize> = (0..workers).filter(|&w| inner.live[w]).collect();
    if live.len() < 2 {
        return None;
    }
    let units = |w: usize| {
        (0..inner.map.groups())
            .map(|g| {
                inner
                    .map
                    .held_by(WorkerId(w as u16), mote_jobs::GroupId(g as u16))
                    .count()
            })
            .max()
            .unwrap_or(0)
    };
    // Guest time per partition index held, per core, over the window.
    let mut cost: Vec<Option<f64>> = vec![None; workers];
    for &w in &live {
        let p = &inner.progress[w];
        let s = &inner.window[w];
        let dt = p.task_us.saturating_sub(s.task_us);
        let held = units(w);
        if p.wall_us <= s.wall_us || held == 0 || dt == 0 {
            continue;
        }
        cost[w] = Some(dt as f64 / held as f64);
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
    let weights: Vec<f64> = (0..workers)
        .map(|w| {
            if !inner.live[w] {
                return 0.0;
            }
            let cores = f64::from(inner.status.workers[w].cores.max(1));
            cores / cost[w].unwrap_or(fastest)
        })
        .collect();
    let slow = (0..workers)
        .max_by(|&a, &b| cost[a].unwrap_or(0.0).total_cmp(&cost[b].unwrap_or(0.0)))
        .expect("some worker");
    let reason = format!(
        "worker {} took {:.1}x the fastest worker's time per partition",
        inner.status.workers[slow].name,
        slowest / fastest
    );
    let moves = inner
        .map
        .rebalance(&weights)
        .into_iter()
        .map(|(k, e)| (k, e, reason.clone()))
        .collect();
    Some((slow, moves))
}

/// A partition's new entry, and why it moves.
type Move = (PartitionKey, Entry, String);

/// The moves from one worker to another: (source URL, destination URL), the new entries.
type MoveBatch = ((String, String), Vec<(PartitionKey, Entry)>);

/// What a report or a look at the job leads to, done after the lock is released.
enum Action {
    None,
    End(JobState, Option<String>),
    Broadcast(WorkerMessage),
    Recover(Vec<WorkerId>, String),
    Join(Vec<WorkerId>, Vec<u64>),
    Delete(Vec<u64>),
    /// ((source URL, destination URL), new entries), in generation.
    Move(Vec<MoveBatch>, u32),
}

impl Controller {
    async fn start(self: &Arc<Self>, moves: Vec<MoveBatch>, generation: u32) {
        for ((from, to), entries) in moves {
            let arrive = Envelope {
                generation,
                message: WorkerMessage::Arrive {
                    keys: entries.iter().map(|(k, _)| *k).collect(),
                },
            };
            // The destination is ready before the source lets go.
            if let Err(e) = self.transport.message(&to, &self.id, &arrive).await {
                tracing::warn!(job = self.id, error = %e, "a move's destination is not ready; the move is dropped");
                self.drop_move(&entries);
                continue;
            }
            let leave = Envelope {
                generation,
                message: WorkerMessage::Leave {
                    entries: entries.clone(),
                },
            };
            if let Err(e) = self.transport.message(&from, &self.id, &leave).await {
                tracing::warn!(job = self.id, error = %e, "a move's source did not take it; the move is dropped");
                self.drop_move(&entries);
            }
        }
    }

    fn drop_move(&self, entries: &[(PartitionKey, Entry)]) {
        let mut inner = self.lock();
        let first = entries[0].0;
        if let Some(n) = inner.moving.iter().position(|m| m.keys.contains(&first)) {
            let m = inner.moving.remove(n);
            if let Some(s) = inner.migration(m.record) {
                s.ms = Some(0);
                s.reason
                    .push_str(" (not started: a worker did not take it)");
            }
        }
    }
}

/// Where a job's snapshots go, from `--snapshot-to BUCKET/PREFIX` and `--snapshot-every N`.
pub fn snapshot_plan(every: u64, to: &str) -> Option<SnapshotPlan> {
    let (bucket, prefix) = input::bucket_and_prefix(to)?;
    let prefix = match prefix.trim_end_matches('/') {
        "" => String::new(),
        p => format!("{p}/"),
    };
    Some(SnapshotPlan {
        every,
        bucket: bucket.to_owned(),
        prefix,
    })
}
