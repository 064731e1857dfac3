//! Supervision of one running job as a state machine without I/O: every decision a job's
//! controller makes after the job started (section 3.3 of the paper), stepped by what the
//! controller hears and answering what it is to do, the way raft-rs's `RawNode` answers a
//! `Ready`.
//!
//! A [`Supervisor`] is made from what the controller has when the job starts: the spec every
//! worker was started with, the workers, and whether to rebalance. The controller then feeds
//! it the workers' reports ([`Supervisor::on_report`]), looks at the job four times a second
//! with the nodes the cluster's leases say are alive ([`Supervisor::tick`]), passes on a
//! user's cancel ([`Supervisor::cancel`]), and tells it how the orders it carried out went
//! ([`Supervisor::on_move_not_taken`], [`Supervisor::on_probed`], [`Supervisor::on_restored`],
//! [`Supervisor::on_restore_failed`]). Each input answers the [`Action`]s to carry out, in
//! order. Every input takes the time: the supervisor reads no clock, so a test steps it
//! through seconds in microseconds.
//!
//! - `balance`: partitions move off a worker [`SLOWER`] than the fastest two windows in a
//!   row, destination first; the map changes, for every worker, when they arrive.
//! - `snapshots`: a snapshot is complete when every partition is stored; the older ones are
//!   deleted then.
//! - `recovery`: a worker silent for [`SILENCE`], whose node's lease is gone, or that another
//!   cannot reach, is gone. The job rolls back to the last complete snapshot without it, in a
//!   new generation, or fails, saying why, when there is none. A gone worker whose node is
//!   alive again rejoins at the next complete snapshot.
//! - `takeover`: another node takes a job over when its controller's node is gone, from what
//!   the job's record keeps ([`Resumable`]).
//! - `history`: the moves, snapshots and restores the job's status lists.
//! - `action`: what the supervisor answers and is told.
//!
//! Invariants, which the property tests (`properties`) check after every input under any
//! interleaving of reports, ticks, nodes lost and back, orders not taken, snapshots and
//! cancels:
//! - while the job runs, every partition's entry names a live worker;
//! - the generation never decreases, and each restore begins a new one;
//! - a restore rolls back to a complete snapshot, and only a restore gives a gone worker
//!   partitions again;
//! - a snapshot's objects are deleted only once a newer snapshot is complete;
//! - a job that loses a worker with no complete snapshot fails, saying so;
//! - once the job ended (succeeded, failed or cancelled), no input answers anything.

mod action;
mod balance;
mod history;
mod recovery;
mod snapshots;
mod takeover;

#[cfg(test)]
mod properties;
#[cfg(test)]
mod tests;

pub use action::{Action, LiveNode, LiveNodes, MoveOrder, Outcome, RestoreOrder, Target};
pub use balance::{SLOWER, WINDOW};
pub use history::{
    History, LISTED, Listed, MigrationRecord, RestoreRecord, SnapshotRecord, SnapshotState,
};
pub use recovery::SILENCE;
pub use takeover::{Resumable, SnapshotPoint};

use crate::map::{PartitionKey, PartitionMap, WorkerId};
use crate::message::{JobSpec, Progress, Report};
use crate::program::GroupId;
use balance::{Balance, Sample};
use snapshots::{Snapshots, Stored};
use std::time::Instant;

/// A worker as the job started with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerSetup {
    /// Its node's name: the worker is the same worker on a node of that name.
    pub name: String,
    /// Its base URL.
    pub url: String,
    /// Its executor threads.
    pub cores: u32,
}

/// A worker as the supervisor sees it.
#[derive(Clone, Debug)]
pub struct WorkerState {
    /// Its node's name.
    pub name: String,
    /// Its base URL: a worker that rejoins takes its node's new one.
    pub url: String,
    /// Its executor threads.
    pub cores: u32,
    /// Taking part: not gone, or back.
    pub live: bool,
    /// It ran its whole program in this generation.
    pub done: bool,
    /// Its last report's progress in this generation, or a former one's.
    pub progress: Progress,
    /// When it last reported in the current generation, or when it was last told to run.
    heard: Instant,
    /// Its progress at the start of the rebalancing window.
    window: Sample,
}

/// Why a supervisor cannot be made from what the controller has.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SetupError {
    /// A job has a worker at least.
    #[error("a job needs a worker at least")]
    NoWorkers,
    /// The spec lists other workers than those given.
    #[error("the spec lists {spec} workers, and {given} were given")]
    Workers {
        /// Workers the spec lists.
        spec: usize,
        /// Workers given.
        given: usize,
    },
    /// The map gives a partition to a worker the job does not have.
    #[error("the map gives partition {index} of group {group} to worker {worker}, of {workers}")]
    Holder {
        /// The partition's group.
        group: u16,
        /// The partition's index.
        index: u32,
        /// The worker the map names.
        worker: u16,
        /// Workers the job has.
        workers: usize,
    },
}

/// Where the job is.
#[derive(Debug, PartialEq)]
enum Phase {
    Running,
    /// A restore was ordered and not every worker took it yet: no worker is taken for gone
    /// and nothing moves until then.
    Restoring {
        generation: u32,
        since: Instant,
        record: usize,
    },
    Ended {
        outcome: Outcome,
        at: Instant,
    },
}

/// The supervision of one running job: its workers and their liveness, the partition map, the
/// generation, the snapshots, the moves under way and the rebalancing window.
pub struct Supervisor {
    /// The spec every worker was started with: a worker that rejoins gets a copy.
    spec: JobSpec,
    workers: Vec<WorkerState>,
    map: PartitionMap,
    generation: u32,
    phase: Phase,
    balance: Balance,
    snapshots: Snapshots,
    /// Gone workers whose nodes are alive again, to rejoin at the next complete snapshot.
    joining: Vec<WorkerId>,
    /// Gone workers whose nodes were asked whether they are back.
    probing: Vec<WorkerId>,
    history: History,
    /// When every worker ran: times in the history count from here.
    started: Instant,
}

impl Supervisor {
    /// The supervision of a job about to run on `workers`, in the order the spec lists them,
    /// started with `spec` (its map and generation are the job's first).
    pub fn new(
        now: Instant,
        spec: JobSpec,
        workers: Vec<WorkerSetup>,
        rebalance: bool,
    ) -> Result<Self, SetupError> {
        if workers.is_empty() {
            return Err(SetupError::NoWorkers);
        }
        if workers.len() != spec.workers.len() {
            return Err(SetupError::Workers {
                spec: spec.workers.len(),
                given: workers.len(),
            });
        }
        if let Some(key) =
            keys(&spec.map).find(|k| spec.map.entry(*k).worker.0 as usize >= workers.len())
        {
            return Err(SetupError::Holder {
                group: key.group.0,
                index: key.index,
                worker: spec.map.entry(key).worker.0,
                workers: workers.len(),
            });
        }
        let workers = workers
            .into_iter()
            .map(|w| WorkerState {
                name: w.name,
                url: w.url,
                cores: w.cores,
                live: true,
                done: false,
                progress: Progress::default(),
                heard: now,
                window: Sample::default(),
            })
            .collect();
        Ok(Self {
            map: spec.map.clone(),
            generation: spec.generation,
            phase: Phase::Running,
            balance: Balance::new(rebalance, now),
            snapshots: Snapshots::new(keys(&spec.map).count()),
            joining: Vec::new(),
            probing: Vec::new(),
            history: History::default(),
            started: now,
            spec,
            workers,
        })
    }

    /// Every worker runs: the job's clock starts now, after each compiled the module and
    /// instantiated its partitions, and silence counts from now.
    pub fn running(&mut self, now: Instant) {
        self.started = now;
        self.balance.settle(now);
        for w in &mut self.workers {
            w.heard = now;
        }
    }

    /// A worker's report. Reports of another generation, and of gone workers, are dropped.
    pub fn on_report(&mut self, now: Instant, report: Report) -> Vec<Action> {
        let progress = report.progress();
        let w = progress.worker;
        let taken = self
            .workers
            .get(w.0 as usize)
            .is_some_and(|s| s.live && progress.generation == self.generation);
        if !taken || self.outcome().is_some() {
            return Vec::new();
        }
        let state = &mut self.workers[w.0 as usize];
        state.heard = now;
        state.progress = progress.clone();
        match report {
            Report::Progress(_) => Vec::new(),
            Report::Done(_) => {
                self.workers[w.0 as usize].done = true;
                if self.workers.iter().all(|s| s.done || !s.live) {
                    self.end(now, Outcome::Succeeded)
                } else {
                    Vec::new()
                }
            }
            Report::Failed { error, .. } => {
                let error = format!("on worker {}: {error}", self.workers[w.0 as usize].name);
                self.end(now, Outcome::Failed(error))
            }
            Report::Snapshotted {
                iteration,
                keys,
                bytes,
                write_us,
                cursor,
                error,
                ..
            } => {
                let keys = keys.into_iter().filter(|k| self.has(*k)).collect();
                self.snapshotted(Stored {
                    iteration,
                    keys,
                    bytes,
                    write_us,
                    cursor,
                    error,
                })
            }
            Report::Arrived { entries, bytes, .. } => self.arrived(now, w, entries, bytes),
            Report::Unreachable { peer, error, .. } => {
                let Some(p) = self.workers.get(peer.0 as usize).filter(|p| p.live) else {
                    return Vec::new();
                };
                let reason = format!(
                    "worker {} could not be reached by worker {}: {error}",
                    p.name, self.workers[w.0 as usize].name
                );
                self.recover(now, vec![peer], Vec::new(), reason)
            }
        }
    }

    /// A look at the job, four times a second: gone workers (silent, or their nodes' leases
    /// expired), gone workers whose nodes are back, and slow workers. Nothing while a restore
    /// is under way.
    pub fn tick(&mut self, now: Instant, nodes: &LiveNodes) -> Vec<Action> {
        if self.phase != Phase::Running {
            return Vec::new();
        }
        if let Some(actions) = self.lost(now, nodes) {
            return actions;
        }
        self.rejoin(nodes);
        self.rebalance(now)
    }

    /// A user cancels the job; a job that ended stays as it ended.
    pub fn cancel(&mut self, now: Instant) -> Vec<Action> {
        self.end(now, Outcome::Cancelled)
    }

    /// The controller cannot go on with the job (a worker did not start or run): it fails with
    /// `error`; a job that ended stays as it ended.
    pub fn fail(&mut self, now: Instant, error: String) -> Vec<Action> {
        self.end(now, Outcome::Failed(error))
    }

    /// The job ended and the objects of its snapshots were deleted.
    pub fn on_snapshots_deleted(&mut self) {
        self.snapshots.deleted(&mut self.history);
    }

    /// The workers, by [`WorkerId`].
    pub fn workers(&self) -> &[WorkerState] {
        &self.workers
    }

    /// Who holds what.
    pub fn map(&self) -> &PartitionMap {
        &self.map
    }

    /// The current generation.
    pub fn generation(&self) -> u32 {
        self.generation
    }

    /// How the job ended, once it did.
    pub fn outcome(&self) -> Option<&Outcome> {
        match &self.phase {
            Phase::Ended { outcome, .. } => Some(outcome),
            _ => None,
        }
    }

    /// When it ended, once it did.
    pub fn ended_at(&self) -> Option<Instant> {
        match self.phase {
            Phase::Ended { at, .. } => Some(at),
            _ => None,
        }
    }

    /// When every worker ran.
    pub fn started(&self) -> Instant {
        self.started
    }

    /// The moves, snapshots and restores so far.
    pub fn history(&self) -> &History {
        &self.history
    }

    /// Ends the job, if it runs: every worker is stopped, gone ones too.
    fn end(&mut self, now: Instant, outcome: Outcome) -> Vec<Action> {
        if self.outcome().is_some() {
            return Vec::new();
        }
        self.phase = Phase::Ended {
            outcome: outcome.clone(),
            at: now,
        };
        let stop = (0..self.workers.len())
            .map(|w| self.target(WorkerId(w as u16)))
            .collect();
        vec![Action::End { outcome, stop }]
    }

    fn target(&self, worker: WorkerId) -> Target {
        Target {
            worker,
            url: self.workers[worker.0 as usize].url.clone(),
        }
    }

    fn live_targets(&self) -> Vec<Target> {
        (0..self.workers.len())
            .map(|w| WorkerId(w as u16))
            .filter(|w| self.workers[w.0 as usize].live)
            .map(|w| self.target(w))
            .collect()
    }

    /// Whether the job has partition `key`: what a report names is checked before the map is
    /// indexed by it.
    fn has(&self, key: PartitionKey) -> bool {
        (key.group.0 as usize) < self.map.groups() && key.index < self.map.size(key.group)
    }
}

/// Every partition of `map`, group by group.
fn keys(map: &PartitionMap) -> impl Iterator<Item = PartitionKey> + '_ {
    (0..map.groups()).flat_map(move |g| {
        let group = GroupId(g as u16);
        (0..map.size(group)).map(move |index| PartitionKey { group, index })
    })
}
