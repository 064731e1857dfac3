//! Jobs in the cluster's store, so that a job is the platform's and not one node's memory:
//! `/mote/jobs/ID` holds what any node needs to list it, show it and take it over when its
//! controller's node is gone ([`JobRecord`]: the spec, the workers, where output goes, the
//! controller's node, what a takeover resumes from and the last status shown), written by the
//! controller when the job starts, when what a takeover would resume from changes, once a
//! second while it runs, and when it ended. A cancel asked on another node is a key of its own,
//! `/mote/job-cancels/ID`, which the controller reads: a record written by the controller never
//! overwrites a user's cancel. The controller's liveness is its node's lease
//! (`/mote/nodes/NAME`), which every node follows already.

use crate::output::Output;
use mote_api::JobStatus;
use mote_jobs::message::JobSpec;
use mote_jobs::supervisor::Resumable;
use mote_state::{StateError, StateStore};
use serde::{Deserialize, Serialize};

/// Where job records are, below the store's `/mote/`.
const JOBS: &str = "jobs/";

/// Where cancels asked on other nodes are.
const CANCELS: &str = "job-cancels/";

/// A job as the cluster's store keeps it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct JobRecord {
    /// The spec every worker was started with; `controller` is the URL workers report to.
    pub spec: JobSpec,
    /// The workers, in the spec's order.
    pub workers: Vec<RecordedWorker>,
    /// Whether partitions move off slow workers.
    pub rebalance: bool,
    /// Where its output goes, committed when it succeeds.
    pub outputs: Vec<Output>,
    /// The controller's node, by name.
    pub controller: String,
    /// What a takeover resumes from.
    pub resumable: Resumable,
    /// The status the controller last showed.
    pub status: JobStatus,
}

/// A job's worker as its record keeps it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordedWorker {
    /// Its node's name.
    pub name: String,
    /// Its URL when the record was written.
    pub url: String,
    /// Its executor threads.
    pub cores: u32,
}

/// Job records in a store.
#[derive(Clone)]
pub struct JobRecords {
    store: std::sync::Arc<dyn StateStore>,
}

impl JobRecords {
    /// The records in `store`.
    pub fn new(store: std::sync::Arc<dyn StateStore>) -> Self {
        Self { store }
    }

    /// Writes `record`, replacing the job's last.
    pub async fn put(&self, record: &JobRecord) -> Result<(), StateError> {
        let json = serde_json::to_vec(record).expect("a record is JSON");
        self.store
            .put(&format!("{JOBS}{}", record.spec.id), json)
            .await
    }

    /// Job `id`'s record, if the store has one that reads.
    pub async fn get(&self, id: &str) -> Result<Option<JobRecord>, StateError> {
        let found = self.store.get(&format!("{JOBS}{id}")).await?;
        Ok(found.and_then(|bytes| read(id, &bytes)))
    }

    /// Every job's record, by id.
    pub async fn list(&self) -> Result<Vec<JobRecord>, StateError> {
        let listed = self.store.list(JOBS).await?;
        Ok(listed
            .iter()
            .filter_map(|(key, bytes)| read(key, bytes))
            .collect())
    }

    /// Deletes job `id`'s record, once it is old news.
    pub async fn forget(&self, id: &str) -> Result<(), StateError> {
        self.store.delete(&format!("{JOBS}{id}")).await.map(drop)
    }

    /// Asks job `id`'s controller, wherever it is, to cancel it.
    pub async fn ask_cancel(&self, id: &str) -> Result<(), StateError> {
        self.store
            .put(&format!("{CANCELS}{id}"), b"cancel".to_vec())
            .await
    }

    /// Whether a user asked to cancel job `id` on another node.
    pub async fn cancel_asked(&self, id: &str) -> Result<bool, StateError> {
        Ok(self.store.get(&format!("{CANCELS}{id}")).await?.is_some())
    }

    /// Forgets a cancel once the job ended.
    pub async fn cancel_done(&self, id: &str) -> Result<(), StateError> {
        self.store.delete(&format!("{CANCELS}{id}")).await.map(drop)
    }
}

/// A record as stored, or none when it does not read (written by a newer version, or
/// damaged): one bad record must not hide every other job.
fn read(key: &str, bytes: &[u8]) -> Option<JobRecord> {
    match serde_json::from_slice(bytes) {
        Ok(record) => Some(record),
        Err(e) => {
            tracing::warn!(key, error = %e, "a job record does not read; it is left out");
            None
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use mote_state::EmbeddedStore;
    use std::sync::Arc;

    fn status(id: &str) -> JobStatus {
        let json = serde_json::json!({
            "id": id, "function": "lr", "state": "running", "partitions": 4, "iteration": 3,
            "tasks": 10, "tasks_per_s": 1.0, "elapsed_ms": 5, "started_ms": 1, "task_us": 1,
            "scheduling_us": 1, "generation": 0, "rebalance": true, "workers": [],
            "migrations": [], "older_migrations": 0, "snapshots": [], "older_snapshots": 0,
            "restores": []
        });
        serde_json::from_value(json).unwrap()
    }

    pub(crate) fn record(id: &str) -> JobRecord {
        let map = mote_jobs::PartitionMap::assign(&[4], &[1, 1]);
        JobRecord {
            spec: JobSpec {
                id: id.into(),
                function: "lr".into(),
                sha256: "00".into(),
                args: vec![("iterations".into(), "5".into())],
                partitions: 4,
                workers: vec!["http://a".into(), "http://b".into()],
                me: mote_jobs::WorkerId(0),
                map: map.clone(),
                controller: "http://a".into(),
                generation: 0,
                live: vec![true, true],
                snapshots: None,
            },
            workers: vec![
                RecordedWorker {
                    name: "a".into(),
                    url: "http://a".into(),
                    cores: 1,
                },
                RecordedWorker {
                    name: "b".into(),
                    url: "http://b".into(),
                    cores: 1,
                },
            ],
            rebalance: true,
            outputs: Vec::new(),
            controller: "a".into(),
            resumable: Resumable {
                generation: 0,
                map,
                snapshot: None,
            },
            status: status(id),
        }
    }

    #[tokio::test]
    async fn records_round_trip_and_a_bad_one_hides_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let store: Arc<dyn StateStore> =
            Arc::new(EmbeddedStore::open(&dir.path().join("db")).unwrap());
        let records = JobRecords::new(store.clone());
        records.put(&record("1-1")).await.unwrap();
        records.put(&record("1-2")).await.unwrap();
        store.put("jobs/1-3", b"{not json".to_vec()).await.unwrap();
        let got = records.get("1-2").await.unwrap().unwrap();
        assert_eq!(got.spec.args, record("1-2").spec.args);
        assert_eq!(got.workers, record("1-2").workers);
        assert_eq!(got.resumable, record("1-2").resumable);
        let ids: Vec<String> = records
            .list()
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.spec.id)
            .collect();
        assert_eq!(ids, ["1-1", "1-2"]);
        assert!(records.get("1-3").await.unwrap().is_none());

        assert!(!records.cancel_asked("1-1").await.unwrap());
        records.ask_cancel("1-1").await.unwrap();
        assert!(records.cancel_asked("1-1").await.unwrap());
        records.cancel_done("1-1").await.unwrap();
        assert!(!records.cancel_asked("1-1").await.unwrap());
        assert_eq!(
            records.list().await.unwrap().len(),
            2,
            "cancels are not records"
        );
    }
}
