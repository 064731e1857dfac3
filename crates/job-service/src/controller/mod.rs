//! A job's controller (section 3.3), on the node `mote job run` talked to. It chose the workers
//! and computed the partition map before the job started; afterwards it schedules no task but
//! keeps the job balanced and alive:
//!
//! - **Load**: workers report four times a second, with the guest time each partition took.
//!   Once a second the controller compares the workers' time per partition; when one is
//!   markedly slower (`watch::SLOWER`) two seconds in a row, it moves partitions to even the time out
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
//!
//! This module takes reports and carries out what they lead to; `watch` looks at the job four
//! times a second (silence, rejoins, moves), `snapshots` completes snapshots and restores from
//! them, `state` is what the controller keeps under its lock, and `status` what the API shows.

mod snapshots;
mod state;
mod watch;

pub use mote_api::{
    JobState, JobStatus, MigrationStatus, RestoreStatus, SnapshotState, SnapshotStatus,
    WorkerStatus,
};

use crate::request::ClusterNodes;
use crate::transport::Transport;
use mote_jobs::PartitionMap;
use mote_jobs::message::{Envelope, JobSpec, Progress, Report};
use mote_objects::Objects;
use parking_lot::Mutex;
use state::{Action, Inner, Sample};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

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
                        tasks_per_s: None,
                        idle_share: None,
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

    fn lock(&self) -> parking_lot::MutexGuard<'_, Inner> {
        self.status.lock()
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
            let now = Sample::of(&progress);
            let worker = &mut inner.status.workers[w];
            let rates = rate.rates_to(&now, progress.cores);
            worker.tasks_per_s = rates.map(|r| r.tasks_per_s);
            worker.idle_share = rates.map(|r| r.idle_share);
            inner.rates[w] = now;
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
}

impl Controller {}
