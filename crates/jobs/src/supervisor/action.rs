//! What a supervisor answers and what it is told about the cluster: the [`Action`]s its
//! controller carries out, in the order given, and the [`LiveNodes`] a look at the job takes.
//! Each action that can go wrong in a way the supervisor must know of says which input reports
//! it back.

use crate::map::WorkerId;
use crate::message::{Envelope, JobSpec};

/// A worker of the job and where it listens now (a worker that came back may listen elsewhere).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The worker.
    pub worker: WorkerId,
    /// Its base URL.
    pub url: String,
}

/// The nodes the cluster's leases say are alive, each by its name and where it listens. Every
/// node whose lease is alive belongs here, draining or not: a worker whose node is missing is
/// taken for gone. An empty list says nothing: the controller's own node is alive while it
/// runs, so the cluster never lists no node, and a controller that does not know its cluster
/// (its store unreachable) must not lose every worker for it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveNodes {
    /// The nodes.
    pub nodes: Vec<LiveNode>,
}

/// A node whose lease is alive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LiveNode {
    /// Its name: a worker is the same worker on a node of the same name, wherever it listens.
    pub name: String,
    /// Its base URL.
    pub url: String,
}

impl LiveNodes {
    /// The live node called `name`.
    pub fn named(&self, name: &str) -> Option<&LiveNode> {
        self.nodes.iter().find(|n| n.name == name)
    }
}

/// How a job ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Every live worker ran its whole program.
    Succeeded,
    /// It cannot go on, for this reason.
    Failed(String),
    /// A user cancelled it.
    Cancelled,
}

/// A move of partitions from one running worker to another (section 4.4).
#[derive(Clone, Debug, PartialEq)]
pub struct MoveOrder {
    /// The move's number among all the job made, which
    /// [`Supervisor::on_move_not_taken`](super::Supervisor::on_move_not_taken) names.
    pub number: usize,
    /// Where the partitions are.
    pub source: Target,
    /// Where they go.
    pub destination: Target,
    /// For the destination: get instances ready (`WorkerMessage::Arrive`).
    pub arrive: Envelope,
    /// For the source: send the partitions once their tasks there are done
    /// (`WorkerMessage::Leave`).
    pub leave: Envelope,
}

/// A rollback of every live worker to the last complete snapshot, which begins a generation.
#[derive(Clone, Debug, PartialEq)]
pub struct RestoreOrder {
    /// The generation it begins.
    pub generation: u32,
    /// Workers gone: stop the job there, without waiting for an answer (a node that is down
    /// would not give one).
    pub stop: Vec<Target>,
    /// Workers back: start each with its spec before the restore is sent, and run each once
    /// every worker took it.
    pub start: Vec<(Target, JobSpec)>,
    /// Every worker taking part, the ones started included: send each `restore`.
    pub to: Vec<Target>,
    /// The `WorkerMessage::Restore`, in its generation.
    pub restore: Envelope,
}

/// What the controller carries out, in the order answered.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Send `envelope` to every worker of `to`. A worker that does not take it is not reported
    /// back: it routes by the older entries it has, and whoever gets data by those forwards it
    /// by the version rule (`Exchange`).
    Broadcast {
        /// The workers.
        to: Vec<Target>,
        /// A `WorkerMessage::MapUpdate`.
        envelope: Envelope,
    },
    /// Send `arrive` to the destination and, once it took it, `leave` to the source: the
    /// destination is ready before the source lets go. When either is not taken, tell
    /// [`Supervisor::on_move_not_taken`](super::Supervisor::on_move_not_taken).
    Move(Box<MoveOrder>),
    /// Ask each of these gone workers' nodes to stop the job: a node that answers, even with a
    /// refusal, is back (and whatever a cut-off worker left there is cleared). Tell
    /// [`Supervisor::on_probed`](super::Supervisor::on_probed) which answered.
    Probe(Vec<Target>),
    /// Stop the gone workers, start the ones back, send the restore to every worker taking part
    /// and run the ones started, in that order. Tell
    /// [`Supervisor::on_restored`](super::Supervisor::on_restored) when every worker took it,
    /// or [`Supervisor::on_restore_failed`](super::Supervisor::on_restore_failed) as soon as
    /// one was not started or did not take it.
    Restore(RestoreOrder),
    /// Delete the objects of the job's snapshot at `iteration`: a newer one is complete.
    DeleteSnapshot {
        /// The snapshot's iteration.
        iteration: u64,
    },
    /// The job ended: stop every worker of `stop` and delete the job's snapshots, then show
    /// `outcome`. Tell [`Supervisor::on_snapshots_deleted`](super::Supervisor::on_snapshots_deleted)
    /// when they were.
    End {
        /// How it ended.
        outcome: Outcome,
        /// Every worker the job ever had, gone ones too (a cut-off one may still run).
        stop: Vec<Target>,
    },
}
