//! Jobs across the cluster, from their records in the store (`crate::record`): any node lists
//! and shows every job and cancels one wherever its controller is, and takes a job over when
//! its controller's node left the cluster. Every node looks at the records once a second; of
//! the nodes alive, the first by name among the job's workers (or the first of all, if none of
//! them is left) takes the job over, so that every node that sees the same cluster picks the
//! same one, once it has looked at the cluster long enough to list every member ([`SETTLE`]). A
//! node that restarted under its name takes its own jobs back at once: their records name it,
//! and it does not control them any more.

use crate::controller::{Controller, ControllerSetup, JobState, JobStatus, live_nodes};
use crate::error::JobServiceError;
use crate::record::JobRecord;
use crate::service::JobService;
use mote_jobs::message::JobSpec;
use mote_jobs::supervisor::LiveNodes;
use std::sync::Arc;
use std::time::Duration;

/// How often a node looks at the cluster's job records.
const LOOK: Duration = Duration::from_secs(1);

/// How long a node looks at the cluster before it judges another node's job orphaned: a node
/// that just started may not list every member yet, and would take over jobs whose controller
/// is alive (seen: a worker restarted in a test took the job from the controller it could not
/// list yet).
const SETTLE: Duration = Duration::from_secs(5);

/// How long a cancel asked on another node waits for the job to end there.
const CANCEL_WAIT: Duration = Duration::from_secs(5);

/// Ended jobs' records kept in the store, the latest.
const KEEP_RECORDS: usize = 100;

impl JobService {
    /// Every job, this node's and those of the cluster's records, oldest first.
    pub fn list(&self) -> Vec<JobStatus> {
        let jobs: Vec<Arc<Controller>> = self.jobs.lock().clone();
        let mut all: Vec<JobStatus> = jobs
            .iter()
            .filter(|j| !j.stood_down())
            .map(|j| j.status())
            .collect();
        let recorded = self.recorded.lock().clone();
        for status in recorded {
            if !all.iter().any(|s| s.id == status.id) {
                all.push(status);
            }
        }
        all.sort_by_key(|s| s.started_ms);
        all
    }

    /// One job's status: this node's, or as its record shows it.
    pub async fn status(&self, id: &str) -> Result<JobStatus, JobServiceError> {
        if let Ok(controller) = self.controller(id) {
            return Ok(controller.status());
        }
        Ok(self.recorded_job(id).await?.status)
    }

    /// Cancels a job wherever its controller is; a job that already ended is left as it
    /// ended. A job controlled elsewhere is asked through the store, and its status is
    /// answered once it ended there (or as it is after a few seconds).
    pub async fn cancel(&self, id: &str) -> Result<JobStatus, JobServiceError> {
        if let Ok(controller) = self.controller(id) {
            controller.cancel().await;
            return Ok(controller.status());
        }
        let record = self.recorded_job(id).await?;
        if record.status.state != JobState::Running {
            return Ok(record.status);
        }
        let records = self.records.as_ref().expect("a record was read");
        records
            .ask_cancel(id)
            .await
            .map_err(|e| JobServiceError::Records(e.to_string()))?;
        let deadline = tokio::time::Instant::now() + CANCEL_WAIT;
        let mut status = record.status;
        while status.state == JobState::Running && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if let Ok(record) = self.recorded_job(id).await {
                status = record.status;
            }
        }
        Ok(status)
    }

    /// Job `id`'s record.
    async fn recorded_job(&self, id: &str) -> Result<JobRecord, JobServiceError> {
        let missing = || JobServiceError::NoSuchJob { id: id.to_owned() };
        let Some(records) = &self.records else {
            return Err(missing());
        };
        records
            .get(id)
            .await
            .map_err(|e| JobServiceError::Records(e.to_string()))?
            .ok_or_else(missing)
    }

    /// Looks at the cluster's job records once a second, for as long as the service lives:
    /// keeps what they show for [`JobService::list`], takes over the jobs whose controller's
    /// node is gone when this node is the one to, and forgets the oldest ended records.
    pub fn watch_records(self: &Arc<Self>) {
        let Some(records) = self.records.clone() else {
            return;
        };
        let weak = Arc::downgrade(self);
        let watched = std::time::Instant::now();
        tokio::spawn(async move {
            let mut look = tokio::time::interval(LOOK);
            loop {
                look.tick().await;
                let Some(service) = weak.upgrade() else {
                    return;
                };
                let listed = match records.list().await {
                    Ok(listed) => listed,
                    Err(e) => {
                        tracing::debug!(error = %e, "the job records could not be read");
                        continue;
                    }
                };
                *service.recorded.lock() = listed.iter().map(|r| r.status.clone()).collect();
                service.forget_oldest(&listed).await;
                let nodes = live_nodes(service.cluster.as_ref());
                let me = service.me();
                let settled = watched.elapsed() >= SETTLE;
                for record in listed {
                    if record.status.state != JobState::Running
                        || service.controller(&record.spec.id).is_ok()
                    {
                        continue;
                    }
                    if let Some(reason) = orphaned(&record, &me.name, &nodes, settled) {
                        service.take_over(record, reason).await;
                    }
                }
            }
        });
    }

    /// Takes over the job `record` keeps.
    async fn take_over(self: &Arc<Self>, record: JobRecord, reason: String) {
        let me = self.me();
        let id = record.spec.id.clone();
        tracing::warn!(job = id, reason, "taking the job over");
        let setup = ControllerSetup {
            spec: JobSpec {
                controller: me.url,
                ..record.spec.clone()
            },
            rebalance: record.rebalance,
            objects: self.env.objects.clone(),
            outputs: record.outputs.clone(),
            cluster: self.cluster.clone(),
            records: self.records.clone(),
            me: me.name,
        };
        match Controller::take_over(record, self.env.transport.clone(), setup, reason) {
            Ok((controller, actions)) => {
                self.keep(controller.clone());
                controller.resume(actions).await;
            }
            Err(e) => tracing::warn!(job = id, error = %e, "the job could not be taken over"),
        }
    }

    /// Deletes the records of the oldest ended jobs past [`KEEP_RECORDS`].
    async fn forget_oldest(&self, listed: &[JobRecord]) {
        let Some(records) = &self.records else {
            return;
        };
        let mut ended: Vec<&JobRecord> = listed
            .iter()
            .filter(|r| r.status.state != JobState::Running)
            .collect();
        if ended.len() <= KEEP_RECORDS {
            return;
        }
        ended.sort_by_key(|r| r.status.started_ms);
        for r in &ended[..ended.len() - KEEP_RECORDS] {
            if let Err(e) = records.forget(&r.spec.id).await {
                tracing::debug!(job = r.spec.id, error = %e, "an old job record was not deleted");
            }
        }
    }
}

/// Why node `me` takes over the running job `record` keeps, which no controller of this node
/// holds: the record names `me` (this node restarted), or, once this node's view of the cluster
/// has `settled`, the controller's node is not among the live `nodes` and `me` is its
/// [`successor`].
fn orphaned(record: &JobRecord, me: &str, nodes: &LiveNodes, settled: bool) -> Option<String> {
    if record.controller == me {
        return Some(format!("the controller's node {me} restarted"));
    }
    let left = settled && !nodes.nodes.is_empty() && nodes.named(&record.controller).is_none();
    (left && successor(record, nodes).is_some_and(|s| s == me)).then(|| {
        format!(
            "the controller's node {} left the cluster",
            record.controller
        )
    })
}

/// The node to take over the job `record` keeps: of the nodes alive, the first by name among
/// its workers, or the first of all when none of them is alive.
fn successor(record: &JobRecord, nodes: &LiveNodes) -> Option<String> {
    let mut alive: Vec<&str> = nodes.nodes.iter().map(|n| n.name.as_str()).collect();
    alive.sort_unstable();
    alive
        .iter()
        .find(|name| record.workers.iter().any(|w| w.name == **name))
        .or(alive.first())
        .map(|name| (*name).to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::RecordedWorker;
    use mote_jobs::supervisor::LiveNode;

    fn nodes(names: &[&str]) -> LiveNodes {
        LiveNodes {
            nodes: names
                .iter()
                .map(|n| LiveNode {
                    name: (*n).to_owned(),
                    url: format!("http://{n}"),
                })
                .collect(),
        }
    }

    fn workers(names: &[&str]) -> Vec<RecordedWorker> {
        names
            .iter()
            .map(|n| RecordedWorker {
                name: (*n).to_owned(),
                url: format!("http://{n}"),
                cores: 1,
            })
            .collect()
    }

    #[test]
    fn the_first_live_worker_by_name_takes_over_else_the_first_node() {
        let mut record = crate::record::tests::record("1-1");
        record.workers = workers(&["n1", "n3", "n2"]);
        assert_eq!(
            successor(&record, &nodes(&["n4", "n3", "n2"])).as_deref(),
            Some("n2")
        );
        assert_eq!(
            successor(&record, &nodes(&["n5", "n4"])).as_deref(),
            Some("n4")
        );
        assert_eq!(successor(&record, &nodes(&[])), None);
    }

    #[test]
    fn a_restarted_controller_takes_its_job_back_and_others_wait_for_a_settled_view() {
        let mut record = crate::record::tests::record("1-1");
        record.workers = workers(&["n1", "n2", "n3"]);
        record.controller = "n3".into();
        let all = nodes(&["n1", "n2", "n3"]);
        // n3 restarted: its own job, though n1 would be the successor.
        assert!(orphaned(&record, "n3", &all, false).is_some_and(|r| r.contains("restarted")));
        // The controller is alive: nobody takes over.
        assert_eq!(orphaned(&record, "n1", &all, true), None);
        // n3 gone: n1, first by name, takes over, once its view settled; n2 does not.
        let without = nodes(&["n1", "n2"]);
        assert_eq!(orphaned(&record, "n1", &without, false), None);
        assert!(orphaned(&record, "n1", &without, true).is_some_and(|r| r.contains("left")));
        assert_eq!(orphaned(&record, "n2", &without, true), None);
    }
}
