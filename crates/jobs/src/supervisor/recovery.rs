//! Lost workers and workers back. A worker is gone when it has not reported for [`SILENCE`],
//! as soon as the cluster no longer lists its node (its lease expired), or when another worker
//! could not reach it. Its partitions go to the others and every worker rolls back to the last
//! complete snapshot, in a new generation; with no snapshot to roll back to, the job fails and
//! the error says why. A gone worker whose node is alive again (by name: it may listen
//! elsewhere) is asked, at the next complete snapshot, whether it answers, and rejoins with a
//! restore to that snapshot.

use super::action::{Action, LiveNodes, Outcome, RestoreOrder};
use super::history::RestoreRecord;
use super::snapshots::Stored;
use super::{Phase, Supervisor};
use crate::map::WorkerId;
use crate::message::{Envelope, JobSpec, Restore, WorkerMessage};
use std::time::{Duration, Instant};

/// A worker silent for longer than this is taken for gone.
pub const SILENCE: Duration = Duration::from_secs(3);

impl Supervisor {
    /// The live workers silent for too long or whose nodes left the cluster, and what losing
    /// them leads to; none when every live worker is there.
    pub(super) fn lost(&mut self, now: Instant, nodes: &LiveNodes) -> Option<Vec<Action>> {
        let (mut silent, mut left) = (Vec::new(), Vec::new());
        for (w, s) in self.workers.iter().enumerate() {
            let w = WorkerId(w as u16);
            if !s.live {
                continue;
            }
            if now.saturating_duration_since(s.heard) > SILENCE {
                silent.push(w);
            } else if !nodes.nodes.is_empty() && nodes.named(&s.name).is_none() {
                left.push(w);
            }
        }
        let mut why = Vec::new();
        if !silent.is_empty() {
            why.push(format!(
                "worker {} has not reported for {} s: its node is down or cut off",
                self.names_and_urls(&silent),
                SILENCE.as_secs()
            ));
        }
        if !left.is_empty() {
            why.push(format!(
                "worker {} left the cluster: its node's lease expired",
                self.names_and_urls(&left)
            ));
        }
        if why.is_empty() {
            return None;
        }
        silent.extend(left);
        Some(self.recover(now, silent, Vec::new(), why.join("; ")))
    }

    /// Gone workers whose nodes are alive again wait for the next complete snapshot, at their
    /// nodes' URLs. A job without snapshots has nothing to take them back at.
    pub(super) fn rejoin(&mut self, nodes: &LiveNodes) {
        if self.spec.snapshots.is_none() {
            return;
        }
        for w in 0..self.workers.len() {
            let id = WorkerId(w as u16);
            if self.workers[w].live || self.joining.contains(&id) || self.probing.contains(&id) {
                continue;
            }
            if let Some(node) = nodes.named(&self.workers[w].name) {
                self.workers[w].url = node.url.clone();
                self.joining.push(id);
            }
        }
    }

    /// A worker stored partitions of a snapshot. One that completes lets the older ones go,
    /// and the gone workers whose nodes are back are asked whether they answer.
    pub(super) fn snapshotted(&mut self, stored: Stored) -> Vec<Action> {
        let Some(completed) = self.snapshots.stored(&mut self.history, stored) else {
            return Vec::new();
        };
        let mut actions: Vec<Action> = completed
            .delete
            .into_iter()
            .map(|iteration| Action::DeleteSnapshot { iteration })
            .collect();
        if !self.joining.is_empty() {
            let asked = std::mem::take(&mut self.joining);
            actions.push(Action::Probe(
                asked.iter().map(|w| self.target(*w)).collect(),
            ));
            self.probing.extend(asked);
        }
        actions
    }

    /// The answers to a [`Action::Probe`]: whether each worker's node answered. Those that did
    /// rejoin now, with a restore to the last complete snapshot.
    pub fn on_probed(&mut self, now: Instant, probed: &[(WorkerId, bool)]) -> Vec<Action> {
        let mut back = Vec::new();
        for &(w, answered) in probed {
            let Some(at) = self.probing.iter().position(|p| *p == w) else {
                continue;
            };
            self.probing.remove(at);
            if answered && !self.workers[w.0 as usize].live {
                back.push(w);
            }
        }
        if back.is_empty() {
            return Vec::new();
        }
        let reason = format!("worker {} is back", self.names(&back));
        self.recover(now, Vec::new(), back, reason)
    }

    /// Every worker took the restore that began `generation`: the job runs again, and silence
    /// and the rebalancing window count from now.
    pub fn on_restored(&mut self, now: Instant, generation: u32) {
        let Phase::Restoring {
            generation: restoring,
            since,
            record,
        } = self.phase
        else {
            return;
        };
        if restoring != generation {
            return;
        }
        self.phase = Phase::Running;
        self.balance.settle(now);
        for w in self.workers.iter_mut().filter(|w| w.live) {
            w.heard = now;
        }
        self.history.restores[record].took = Some(now.saturating_duration_since(since));
    }

    /// The restore that began `generation` was not taken: a worker back did not start, or a
    /// worker did not take the restore (`error` says which and why). The job fails.
    pub fn on_restore_failed(&mut self, now: Instant, generation: u32, error: &str) -> Vec<Action> {
        match self.phase {
            Phase::Restoring {
                generation: restoring,
                ..
            } if restoring == generation => self.end(
                now,
                Outcome::Failed(format!(
                    "the restore from the last snapshot failed: {error}"
                )),
            ),
            _ => Vec::new(),
        }
    }

    /// Rolls every live worker back to the last complete snapshot, without the workers `gone`
    /// and with the workers `joining`, in a new generation; fails the job when there is no
    /// snapshot to roll back to or nobody to run it. During a restore, the workers joining
    /// wait for the next snapshot and those gone are found again after it.
    pub(super) fn recover(
        &mut self,
        now: Instant,
        gone: Vec<WorkerId>,
        joining: Vec<WorkerId>,
        reason: String,
    ) -> Vec<Action> {
        match self.phase {
            Phase::Ended { .. } => return Vec::new(),
            Phase::Restoring { .. } => {
                for w in joining {
                    if !self.joining.contains(&w) {
                        self.joining.push(w);
                    }
                }
                return Vec::new();
            }
            Phase::Running => {}
        }
        for w in &gone {
            self.workers[w.0 as usize].live = false;
        }
        let failure = if self.spec.snapshots.is_none() {
            Some(format!(
                "{reason}; the job has no snapshots to fall back to (run it with --snapshot-every N --snapshot-to BUCKET/PREFIX to survive a lost worker)"
            ))
        } else if self.snapshots.complete().is_none() {
            Some(format!(
                "{reason}; no snapshot was complete yet (the first comes after iteration {}), so there is nothing to fall back to",
                self.spec.snapshots.as_ref().map_or(0, |p| p.every)
            ))
        } else if joining.is_empty() && self.workers.iter().all(|w| !w.live) {
            Some(format!("{reason}; no worker is left"))
        } else {
            None
        };
        if let Some(error) = failure {
            return self.end(now, Outcome::Failed(error));
        }
        for w in &joining {
            self.workers[w.0 as usize].live = true;
        }
        // Each live worker's share follows its cores: the speeds measured were of the
        // generation that ends here.
        let weights: Vec<f64> = self
            .workers
            .iter()
            .map(|w| match w.live {
                true => f64::from(w.cores.max(1)),
                false => 0.0,
            })
            .collect();
        for (key, entry) in self.map.rebalance(&weights) {
            self.map.apply(key, entry);
        }
        self.generation += 1;
        self.abandon_moves();
        self.snapshots.abandon(&mut self.history);
        for w in &mut self.workers {
            w.done = false;
        }
        let complete = self.snapshots.complete().expect("checked above").clone();
        self.history.restores.push(RestoreRecord {
            at: now.saturating_duration_since(self.started),
            reason,
            iteration: complete.iteration,
            generation: self.generation,
            took: None,
        });
        self.phase = Phase::Restoring {
            generation: self.generation,
            since: now,
            record: self.history.restores.len() - 1,
        };
        let restore = Restore {
            generation: self.generation,
            iteration: complete.iteration,
            cursor: complete.cursor,
            map: self.map.clone(),
            live: self.workers.iter().map(|w| w.live).collect(),
            workers: self.workers.iter().map(|w| w.url.clone()).collect(),
        };
        // A worker back starts a generation before the restore's, which it then takes as
        // every other worker does.
        let start = joining
            .iter()
            .map(|&w| {
                let spec = JobSpec {
                    me: w,
                    map: restore.map.clone(),
                    live: restore.live.clone(),
                    workers: restore.workers.clone(),
                    generation: restore.generation - 1,
                    ..self.spec.clone()
                };
                (self.target(w), spec)
            })
            .collect();
        vec![Action::Restore(RestoreOrder {
            generation: self.generation,
            stop: gone.iter().map(|w| self.target(*w)).collect(),
            start,
            to: self.live_targets(),
            restore: Envelope {
                generation: self.generation,
                message: WorkerMessage::Restore(restore),
            },
        })]
    }

    fn names(&self, workers: &[WorkerId]) -> String {
        let names: Vec<&str> = workers
            .iter()
            .map(|w| self.workers[w.0 as usize].name.as_str())
            .collect();
        names.join(", ")
    }

    fn names_and_urls(&self, workers: &[WorkerId]) -> String {
        let names: Vec<String> = workers
            .iter()
            .map(|w| {
                let s = &self.workers[w.0 as usize];
                format!("{} ({})", s.name, s.url)
            })
            .collect();
        names.join(", ")
    }
}
