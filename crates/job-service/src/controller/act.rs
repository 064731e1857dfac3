//! The controller carrying out what its supervisor answered: messages to workers, moves
//! (destination first), probes of gone workers' nodes, restores, snapshot deletions and the
//! job's end. Whatever the supervisor must know of how an order went is told to it, and what
//! it answers then is carried out next, before the rest.

use super::{Controller, JobState};
use mote_jobs::message::Envelope;
use mote_jobs::supervisor::{Action, MoveOrder, Outcome, RestoreOrder, Target};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Instant;

impl Controller {
    /// Carries out `actions` in order, and what each leads to before the next.
    pub(super) async fn carry_out(self: &Arc<Self>, actions: Vec<Action>) {
        let mut queue = VecDeque::from(actions);
        while let Some(action) = queue.pop_front() {
            let next = match action {
                Action::Broadcast { to, envelope } => {
                    self.broadcast(&to, &envelope).await;
                    Vec::new()
                }
                Action::Move(order) => self.move_partitions(&order).await,
                Action::Probe(targets) => self.probe(targets).await,
                Action::Restore(order) => self.restore(order).await,
                Action::DeleteSnapshot { iteration } => {
                    self.delete_snapshot(iteration).await;
                    Vec::new()
                }
                Action::End { outcome, stop } => {
                    self.end(outcome, stop).await;
                    Vec::new()
                }
            };
            for action in next.into_iter().rev() {
                queue.push_front(action);
            }
        }
    }

    /// A worker that does not take a map update routes by the older entries it has, and
    /// whoever gets data by those forwards it by the version rule.
    async fn broadcast(&self, to: &[Target], envelope: &Envelope) {
        for t in to {
            if let Err(e) = self.transport.message(&t.url, &self.id, envelope).await {
                tracing::debug!(job = self.id, worker = t.url, error = %e, "a map update was not taken");
            }
        }
    }

    /// The destination is made ready before the source lets go.
    async fn move_partitions(&self, order: &MoveOrder) -> Vec<Action> {
        let arrived = self
            .transport
            .message(&order.destination.url, &self.id, &order.arrive)
            .await;
        let left = match arrived {
            Ok(()) => {
                self.transport
                    .message(&order.source.url, &self.id, &order.leave)
                    .await
            }
            Err(e) => Err(e),
        };
        if let Err(e) = left {
            tracing::warn!(job = self.id, error = %e, "a move was not taken; it is dropped");
            self.job.lock().supervisor.on_move_not_taken(order.number);
        }
        Vec::new()
    }

    /// Asking a gone worker's node to stop the job is the probe: the cluster may still list a
    /// node that died (until its lease expires), so only a node that answers, even with a
    /// refusal, is back; and it clears whatever a cut-off worker left there.
    async fn probe(&self, targets: Vec<Target>) -> Vec<Action> {
        let asks = targets.iter().map(|t| async move {
            let answered = match self.transport.stop(&t.url, &self.id).await {
                Ok(()) => true,
                Err(e) => e.refused,
            };
            (t.worker, answered)
        });
        let probed = futures_util::future::join_all(asks).await;
        self.job
            .lock()
            .supervisor
            .on_probed(Instant::now(), &probed)
    }

    /// Stops the gone workers without waiting (a node that is down would not answer), starts
    /// the ones back, sends the restore to every worker taking part, and runs the ones started.
    async fn restore(self: &Arc<Self>, order: RestoreOrder) -> Vec<Action> {
        tracing::warn!(
            job = self.id,
            generation = order.generation,
            "restoring the job from its last complete snapshot"
        );
        for t in order.stop {
            let (transport, id) = (self.transport.clone(), self.id.clone());
            tokio::spawn(async move {
                let _ = transport.stop(&t.url, &id).await;
            });
        }
        let failed = |error: String| {
            tracing::warn!(job = self.id, error, "the restore failed");
            self.job
                .lock()
                .supervisor
                .on_restore_failed(Instant::now(), order.generation, &error)
        };
        let mut started = Vec::new();
        for (t, spec) in &order.start {
            if let Err(e) = self.transport.start(&t.url, spec).await {
                return failed(format!(
                    "worker {} could not start: {e}",
                    self.name(t.worker)
                ));
            }
            started.push(t);
        }
        let restore = &order.restore;
        let sends = order.to.iter().map(|t| async move {
            self.transport
                .message(&t.url, &self.id, restore)
                .await
                .map_err(|e| format!("worker {} did not take it: {e}", self.name(t.worker)))
        });
        let taken = futures_util::future::join_all(sends).await;
        if let Some(error) = taken.into_iter().find_map(Result::err) {
            return failed(error);
        }
        for t in started {
            if let Err(e) = self.transport.run(&t.url, &self.id).await {
                tracing::warn!(job = self.id, error = %e, "a rejoining worker did not run");
            }
        }
        self.job
            .lock()
            .supervisor
            .on_restored(Instant::now(), order.generation);
        Vec::new()
    }

    /// A newer snapshot is complete: the record names it before the older one's objects go,
    /// so that a takeover never resumes from a snapshot that was deleted. If the record cannot
    /// be written, the older snapshot stays (the job's end deletes it with the rest).
    async fn delete_snapshot(&self, iteration: u64) {
        let (Some(plan), Some(objects)) = (&self.setup.spec.snapshots, &self.setup.objects) else {
            return;
        };
        if !self.save().await {
            return;
        }
        let prefix = plan.snapshot_prefix(&self.id, iteration);
        if let Err(e) = objects.delete_prefix(&plan.bucket, &prefix).await {
            tracing::warn!(job = self.id, error = %e, "an old snapshot was not deleted");
        }
    }

    /// Commits every output of the job, which succeeded; the first that cannot be fails it,
    /// and the rest are deleted.
    async fn commit(&self) -> Result<(), String> {
        let Some(objects) = &self.setup.objects else {
            return Ok(());
        };
        for (n, output) in self.setup.outputs.iter().enumerate() {
            if let Err(e) = output.commit(objects, &self.id).await {
                for rest in &self.setup.outputs[n..] {
                    let _ = rest.abort(objects, &self.id).await;
                }
                return Err(format!(
                    "the job ran, but its output --arg {}={}/{} could not be committed: {e}",
                    output.arg, output.bucket, output.prefix
                ));
            }
        }
        Ok(())
    }

    /// Deletes what the job staged of its outputs: it ended without a result.
    async fn abort(&self) {
        let Some(objects) = &self.setup.objects else {
            return;
        };
        for output in &self.setup.outputs {
            if let Err(e) = output.abort(objects, &self.id).await {
                tracing::warn!(job = self.id, error = %e, "a failed job's output was not deleted");
            }
        }
    }

    /// Stops every worker, deletes the job's snapshots and commits or deletes its output, then
    /// shows the end: a job seen ended has left nothing behind, or says what it left.
    async fn end(&self, outcome: Outcome, stop: Vec<Target>) {
        let stops = stop.iter().map(|t| async move {
            if let Err(e) = self.transport.stop(&t.url, &self.id).await {
                tracing::debug!(job = self.id, error = %e, "a worker could not be told to stop");
            }
        });
        futures_util::future::join_all(stops).await;
        let left = match (&self.setup.spec.snapshots, &self.setup.objects) {
            (Some(plan), Some(objects)) => {
                let prefix = plan.job_prefix(&self.id);
                Some(
                    objects
                        .delete_prefix(&plan.bucket, &prefix)
                        .await
                        .map(|_| ())
                        .map_err(|e| {
                            format!(
                                "the job's snapshots under {}/{prefix} were not deleted ({e}); delete them by hand",
                                plan.bucket
                            )
                        }),
                )
            }
            _ => None,
        };
        let (state, error) = match outcome {
            Outcome::Succeeded => match self.commit().await {
                Ok(()) => (JobState::Succeeded, None),
                Err(error) => (JobState::Failed, Some(error)),
            },
            Outcome::Failed(error) => {
                self.abort().await;
                (JobState::Failed, Some(error))
            }
            Outcome::Cancelled => {
                self.abort().await;
                (JobState::Cancelled, Some("cancelled by a user".to_owned()))
            }
        };
        {
            let mut job = self.job.lock();
            match left {
                Some(Ok(())) => job.supervisor.on_snapshots_deleted(),
                Some(Err(left)) => job.shown.snapshots_left = Some(left),
                None => {}
            }
            job.shown.end(state, error);
        }
        self.save().await;
        if let Some(records) = &self.setup.records
            && let Err(e) = records.cancel_done(&self.id).await
        {
            tracing::debug!(job = self.id, error = %e, "a cancel asked elsewhere was not cleared");
        }
    }
}
