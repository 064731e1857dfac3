//! A job's controller (section 3.3), on the node `mote job run` talked to. It chose the workers
//! and computed the partition map before the job started; afterwards it schedules no task but
//! keeps the job balanced and alive. Every decision is `mote_jobs::Supervisor`'s, which does no
//! I/O: the controller feeds it what it hears (the workers' reports, a look at the job four
//! times a second with the nodes whose leases are alive, a user's cancel, how each order went)
//! and carries out the actions it answers (`act`). What it decides, in short:
//!
//! - **Load**: partitions move off a worker markedly slower than the fastest two windows in a
//!   row, destination first; the map changes, for every worker, when they arrive.
//! - **Snapshots**: with `--snapshot-every N`, workers store their partitions' images at every
//!   N-th iteration's barrier; a snapshot is complete when every partition is stored, and then
//!   the ones before it are deleted.
//! - **Failures**: a worker whose node's lease expired, that fell silent, or that another
//!   cannot reach is gone. Every other worker rolls back to the last complete snapshot (a new
//!   generation); with no snapshot the job fails, saying so. A gone worker whose node is live
//!   again takes partitions at the next complete snapshot.
//!
//! When the job ends its snapshots are deleted (if they cannot be, the status says where they
//! are), and its output is committed if it succeeded, deleted if not (`crate::output`).
//! `status` turns the supervision into what the API shows.

mod act;
mod status;

pub use mote_api::{
    JobState, JobStatus, MigrationStatus, RestoreStatus, SnapshotState, SnapshotStatus,
    WorkerStatus,
};

use crate::output::Output;
use crate::record::{JobRecord, JobRecords, RecordedWorker};
use crate::request::ClusterNodes;
use crate::transport::Transport;
use mote_jobs::message::{JobSpec, Report};
use mote_jobs::supervisor::{Action, LiveNode, LiveNodes, Resumable, SetupError, WorkerSetup};
use mote_jobs::{Supervisor, WorkerId};
use mote_objects::Objects;
use parking_lot::Mutex;
use status::Shown;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// How often the controller looks at its job.
const LOOK: Duration = Duration::from_millis(250);

/// How often a running job's record is written at least, for the status other nodes show.
const SAVE_EVERY: Duration = Duration::from_secs(1);

/// The nodes whose leases are alive, draining and unreachable ones too: a worker (or a
/// controller) whose node is not among them left the cluster.
pub(crate) fn live_nodes(cluster: &dyn ClusterNodes) -> LiveNodes {
    LiveNodes {
        nodes: cluster
            .live()
            .into_iter()
            .map(|n| LiveNode {
                name: n.name,
                url: n.url,
            })
            .collect(),
    }
}

/// What a controller needs beyond its workers and map.
pub struct ControllerSetup {
    /// The spec every worker was started with (its `me` is the first worker's): a worker that
    /// rejoins gets a copy.
    pub spec: JobSpec,
    /// Whether to move partitions off slow workers.
    pub rebalance: bool,
    /// The node's object storage, where snapshots and output are.
    pub objects: Option<Arc<Objects>>,
    /// The job's outputs, committed when it succeeds and deleted otherwise.
    pub outputs: Vec<Output>,
    /// The cluster's nodes: where gone workers come back, and whose leases say who is alive.
    pub cluster: Arc<dyn ClusterNodes>,
    /// Where the job's record goes, when the node has a store.
    pub records: Option<JobRecords>,
    /// This node's name, which the record names as the controller's.
    pub me: String,
}

/// One job's controller.
pub struct Controller {
    id: String,
    job: Mutex<Job>,
    /// Another node took the job over: this one acts no more.
    stood_down: AtomicBool,
    transport: Arc<dyn Transport>,
    setup: ControllerSetup,
}

/// What the controller keeps under its lock: the supervision, and what the status shows beside
/// it.
struct Job {
    supervisor: Supervisor,
    shown: Shown,
    /// What the record last written resumes from, and when it was written.
    saved: Option<(Resumable, Instant)>,
}

impl Controller {
    /// The controller of a job of `partitions` about to start on `workers` (name, URL, cores),
    /// in the order its spec lists them.
    pub fn new(
        partitions: u32,
        workers: &[(String, String, u32)],
        transport: Arc<dyn Transport>,
        setup: ControllerSetup,
    ) -> Result<Arc<Self>, SetupError> {
        let now = Instant::now();
        let setups = workers
            .iter()
            .map(|(name, url, cores)| WorkerSetup {
                name: name.clone(),
                url: url.clone(),
                cores: *cores,
            })
            .collect();
        let supervisor = Supervisor::new(now, setup.spec.clone(), setups, setup.rebalance)?;
        let shown = Shown::new(now, partitions, workers.len(), None);
        Ok(Self::made(supervisor, shown, transport, setup))
    }

    /// Takes over the job `record` keeps, whose controller is gone (`reason` says how): the
    /// controller, and what to carry out with [`Controller::resume`].
    pub fn take_over(
        record: JobRecord,
        transport: Arc<dyn Transport>,
        setup: ControllerSetup,
        reason: String,
    ) -> Result<(Arc<Self>, Vec<Action>), SetupError> {
        let now = Instant::now();
        let nodes = live_nodes(setup.cluster.as_ref());
        let workers = record
            .workers
            .iter()
            .map(|w| WorkerSetup {
                name: w.name.clone(),
                url: w.url.clone(),
                cores: w.cores,
            })
            .collect();
        let (supervisor, actions) = Supervisor::take_over(
            now,
            setup.spec.clone(),
            workers,
            setup.rebalance,
            record.resumable,
            &nodes,
            reason,
        )?;
        let shown = Shown::new(
            now,
            record.status.partitions,
            record.workers.len(),
            Some(record.status.started_ms),
        );
        Ok((Self::made(supervisor, shown, transport, setup), actions))
    }

    fn made(
        supervisor: Supervisor,
        shown: Shown,
        transport: Arc<dyn Transport>,
        setup: ControllerSetup,
    ) -> Arc<Self> {
        Arc::new(Self {
            id: setup.spec.id.clone(),
            job: Mutex::new(Job {
                supervisor,
                shown,
                saved: None,
            }),
            stood_down: AtomicBool::new(false),
            transport,
            setup,
        })
    }

    /// Carries out what a takeover answered, once the workers the job had are stopped (the
    /// old controller's may still run), and watches the job from then on.
    pub async fn resume(self: &Arc<Self>, actions: Vec<Action>) {
        let urls: Vec<String> = {
            let job = self.job.lock();
            job.supervisor
                .workers()
                .iter()
                .map(|w| w.url.clone())
                .collect()
        };
        let stops = urls.iter().map(|url| self.transport.stop(url, &self.id));
        futures_util::future::join_all(stops).await;
        self.save().await;
        self.carry_out(actions).await;
        self.watch();
    }

    /// The job's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Every worker runs: the job's clock starts now, after each compiled the module and
    /// instantiated its partitions.
    pub fn running(&self) {
        let now = Instant::now();
        let mut job = self.job.lock();
        job.supervisor.running(now);
        job.shown.running(now);
    }

    /// Whether it ended, and the status shows how: the workers were stopped and the snapshots
    /// deleted.
    pub fn ended(&self) -> bool {
        self.job.lock().shown.ended()
    }

    /// Whether it ended or is ending: the workers are stopped before the status shows the end,
    /// so a worker may be gone while the job still reads as running.
    pub fn ending(&self) -> bool {
        self.job.lock().supervisor.outcome().is_some()
    }

    /// A worker's report.
    pub async fn report(self: &Arc<Self>, report: Report) {
        if self.stood_down() {
            return;
        }
        let worker = report.progress().worker;
        let actions = {
            let mut job = self.job.lock();
            let job = &mut *job;
            let actions = job.supervisor.on_report(Instant::now(), report);
            // The status's rates follow the progress the supervisor took: a report it dropped
            // left that unchanged.
            if let Some(w) = job.supervisor.workers().get(worker.0 as usize) {
                job.shown.sample(worker, &w.progress);
            }
            actions
        };
        self.carry_out(actions).await;
    }

    /// Looks at the job four times a second until it ended: workers gone (silent, or their
    /// nodes' leases expired), workers back, and slow ones.
    pub fn watch(self: &Arc<Self>) {
        let controller = self.clone();
        tokio::spawn(async move {
            let mut look = tokio::time::interval(LOOK);
            loop {
                look.tick().await;
                if controller.ending() {
                    return;
                }
                let nodes = live_nodes(controller.setup.cluster.as_ref());
                let actions = controller
                    .job
                    .lock()
                    .supervisor
                    .tick(Instant::now(), &nodes);
                controller.carry_out(actions).await;
                if controller.record_due() {
                    if controller.superseded().await {
                        return;
                    }
                    controller.save().await;
                    controller.cancel_if_asked().await;
                }
            }
        });
    }

    /// A user cancels the job; a job that ended stays as it ended.
    pub async fn cancel(self: &Arc<Self>) {
        let actions = self.job.lock().supervisor.cancel(Instant::now());
        self.carry_out(actions).await;
    }

    /// The job cannot go on (a worker did not start or run): it fails with `error`, and every
    /// worker is stopped. A job that ended stays as it ended.
    pub async fn fail(self: &Arc<Self>, error: String) {
        let actions = self.job.lock().supervisor.fail(Instant::now(), error);
        self.carry_out(actions).await;
    }

    /// Whether the record is to be written: what a takeover would resume from changed, or a
    /// second passed since the last.
    fn record_due(&self) -> bool {
        let now = Instant::now();
        let mut job = self.job.lock();
        let resumable = job.supervisor.resumable();
        let due = job
            .saved
            .as_ref()
            .is_none_or(|(saved, at)| *saved != resumable || now - *at >= SAVE_EVERY);
        if due {
            job.saved = Some((resumable, now));
        }
        due
    }

    /// Writes the job's record; a store that cannot be written leaves the job running, only
    /// not resumable elsewhere. Says whether the record now is this controller's view (true
    /// without a store: nothing else resumes the job).
    pub async fn save(&self) -> bool {
        let Some(records) = &self.setup.records else {
            return true;
        };
        match records.put(&self.record()).await {
            Ok(()) => true,
            Err(e) => {
                tracing::warn!(job = self.id, error = %e, "the job's record could not be written");
                false
            }
        }
    }

    /// Whether another node took the job over (this node's lease expired while it was cut off
    /// from the store, say): the record names that node. This controller then stands down, does
    /// nothing more and leaves the job to it; the status is the record's from then on.
    async fn superseded(&self) -> bool {
        let Some(records) = &self.setup.records else {
            return false;
        };
        let Ok(Some(record)) = records.get(&self.id).await else {
            return false;
        };
        if record.controller == self.setup.me {
            return false;
        }
        tracing::warn!(
            job = self.id,
            by = record.controller,
            "another node took the job over; this one stands down"
        );
        self.stood_down.store(true, Ordering::Relaxed);
        true
    }

    /// Whether this controller stood down for another node's.
    pub fn stood_down(&self) -> bool {
        self.stood_down.load(Ordering::Relaxed)
    }

    /// Cancels the job if a user asked another node to.
    async fn cancel_if_asked(self: &Arc<Self>) {
        let Some(records) = &self.setup.records else {
            return;
        };
        if records.cancel_asked(&self.id).await.unwrap_or(false) {
            self.cancel().await;
        }
    }

    /// The job as the store keeps it.
    fn record(&self) -> JobRecord {
        let status = self.status();
        let job = self.job.lock();
        JobRecord {
            spec: self.setup.spec.clone(),
            workers: job
                .supervisor
                .workers()
                .iter()
                .map(|w| RecordedWorker {
                    name: w.name.clone(),
                    url: w.url.clone(),
                    cores: w.cores,
                })
                .collect(),
            rebalance: self.setup.rebalance,
            outputs: self.setup.outputs.clone(),
            controller: self.setup.me.clone(),
            resumable: job.supervisor.resumable(),
            status,
        }
    }

    /// A worker's node's name, for messages.
    fn name(&self, worker: WorkerId) -> String {
        let job = self.job.lock();
        job.supervisor
            .workers()
            .get(worker.0 as usize)
            .map_or_else(|| format!("#{}", worker.0), |w| w.name.clone())
    }
}
