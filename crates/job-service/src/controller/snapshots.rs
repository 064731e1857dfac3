//! Snapshots and recovery: a snapshot completes when every partition is stored (and the older
//! ones are deleted), and a lost or returning worker rolls the job back to the last complete
//! one in a new generation, or fails it when there is none.

use super::Controller;
use super::state::{Action, Inner, LISTED, Partial};
use mote_api::{JobState, RestoreStatus, SnapshotState, SnapshotStatus};
use mote_jobs::message::{Envelope, Restore, WorkerMessage};
use mote_jobs::{Cursor, PartitionKey, WorkerId};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Instant;

impl Controller {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn snapshotted(
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

    pub(super) async fn delete_snapshots(&self, iterations: Vec<u64>) {
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
    pub(super) async fn restore(
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
}
