//! Durability: a replica's state in a redb database under `--data`, written by one thread that
//! commits every change queued since its last commit in one transaction (group commit), so a
//! burst of concurrent writes shares one fsync. A write is acknowledged, and its events reach
//! watchers, only once the commit holding it is on disk.
//!
//! The tables mirror the engine: `records` is history keyed by (revision, sub-revision), each
//! the event that wrote it (without its previous value); `stamps` holds every key's stamp,
//! tombstones included; `leases` the granted leases; `meta` the revision and compaction point.
//! Compaction removes the records it drops, so the file stays as large as the live history.

use crate::clock::Stamp;
use crate::engine::{Applied, NEVER_COMPACTED, Restored};
use crate::error::StoreError;
use etcd_client::proto::PbEvent;
use prost::Message;
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc;
use tokio::sync::oneshot;

const RECORDS: TableDefinition<(i64, u32), &[u8]> = TableDefinition::new("records");
const STAMPS: TableDefinition<&[u8], (u64, u32, u64)> = TableDefinition::new("stamps");
const LEASES: TableDefinition<i64, i64> = TableDefinition::new("leases");
const META: TableDefinition<&str, i64> = TableDefinition::new("meta");

const REVISION: &str = "revision";
const COMPACTED: &str = "compacted";

/// Changes queued behind one commit at most; more wait for the next.
const MAX_BATCH: usize = 4096;

/// The file inside `--data`.
const FILE: &str = "store.redb";

/// One change on its way to disk.
struct Job {
    /// The engine's revision once the change was applied.
    revision: i64,
    /// The change, its events taken out into `events`.
    applied: Applied,
    /// Its events, recorded as history and sent to watchers once committed.
    events: Option<Arc<Vec<PbEvent>>>,
    /// Told once committed; `None` for changes nobody waits on (merges, expiries).
    done: Option<oneshot::Sender<Result<(), StoreError>>>,
}

/// Called with each committed change's events, in commit order.
pub type Publish = Box<dyn FnMut(i64, Option<Arc<Vec<PbEvent>>>) + Send>;

/// The queue to the committing thread. Dropping it commits what is queued, then closes the
/// database, so the same directory can be opened again at once.
pub struct Disk {
    jobs: Option<mpsc::Sender<Job>>,
    thread: Option<std::thread::JoinHandle<()>>,
    path: PathBuf,
}

fn disk_error(path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::Disk(format!("{}: {e}", path.display()))
}

/// Opens (or creates) the database in `dir` and reads back the state it holds.
pub fn open(dir: &Path) -> Result<(Database, Restored), StoreError> {
    std::fs::create_dir_all(dir).map_err(|e| disk_error(dir, e))?;
    let path = dir.join(FILE);
    let fail = |e: redb::Error| disk_error(&path, e);
    let db = Database::create(&path).map_err(|e| fail(e.into()))?;
    // Creating the tables up front lets the reads below assume they exist.
    let txn = db.begin_write().map_err(|e| fail(e.into()))?;
    for open in [
        |t: &redb::WriteTransaction| t.open_table(RECORDS).map(drop),
        |t: &redb::WriteTransaction| t.open_table(STAMPS).map(drop),
        |t: &redb::WriteTransaction| t.open_table(LEASES).map(drop),
        |t: &redb::WriteTransaction| t.open_table(META).map(drop),
    ] {
        open(&txn).map_err(|e| fail(e.into()))?;
    }
    txn.commit().map_err(|e| fail(e.into()))?;
    let restored = read(&db).map_err(fail)?;
    Ok((db, restored))
}

fn read(db: &Database) -> Result<Restored, redb::Error> {
    let txn = db.begin_read()?;
    let meta = txn.open_table(META)?;
    let get =
        |name, or| -> Result<i64, redb::Error> { Ok(meta.get(name)?.map_or(or, |v| v.value())) };
    let mut state = Restored {
        revision: get(REVISION, 0)?,
        compacted: get(COMPACTED, NEVER_COMPACTED)?,
        ..Restored::default()
    };
    for entry in txn.open_table(RECORDS)?.iter()? {
        let (rev, bytes) = entry?;
        let (main, sub) = rev.value();
        let event = PbEvent::decode(bytes.value()).map_err(|e| {
            redb::Error::Corrupted(format!(
                "record at revision {main}.{sub} does not decode: {e}"
            ))
        })?;
        state.records.push((main, sub, event));
    }
    for entry in txn.open_table(STAMPS)?.iter()? {
        let (key, stamp) = entry?;
        let (wall_ms, logical, replica) = stamp.value();
        let stamp = Stamp {
            wall_ms,
            logical,
            replica,
        };
        state.stamps.push((key.value().to_vec(), stamp));
    }
    for entry in txn.open_table(LEASES)?.iter()? {
        let (id, ttl) = entry?;
        state.leases.push((id.value(), ttl.value()));
    }
    Ok(state)
}

impl Disk {
    /// Starts the committing thread on `db`; `publish` hands each committed change's events to
    /// watchers.
    pub fn start(db: Database, path: PathBuf, publish: Publish) -> Result<Self, StoreError> {
        let (jobs, queue) = mpsc::channel();
        let thread_path = path.clone();
        let thread = std::thread::Builder::new()
            .name("mote-store-disk".into())
            .spawn(move || commit_loop(db, &thread_path, queue, publish))
            .map_err(|e| disk_error(&path, format!("cannot start the disk thread: {e}")))?;
        Ok(Self {
            jobs: Some(jobs),
            thread: Some(thread),
            path,
        })
    }

    /// The size of the database file in bytes, what `Status` reports as the database size.
    pub fn size(&self) -> u64 {
        std::fs::metadata(self.path.join(FILE)).map_or(0, |m| m.len())
    }

    /// Queues `applied` (which left the engine at `revision`) for the next commit. The caller
    /// holds the engine's lock, so changes reach the disk in revision order.
    pub fn submit(
        &self,
        revision: i64,
        applied: Applied,
        events: Option<Arc<Vec<PbEvent>>>,
        done: Option<oneshot::Sender<Result<(), StoreError>>>,
    ) -> Result<(), StoreError> {
        let job = Job {
            revision,
            applied,
            events,
            done,
        };
        let stopped = || disk_error(&self.path, "the disk thread stopped after an earlier error");
        self.jobs
            .as_ref()
            .ok_or_else(stopped)?
            .send(job)
            .map_err(|_| stopped())
    }
}

impl Drop for Disk {
    fn drop(&mut self) {
        // Closing the queue ends the commit loop once it has committed what is queued.
        self.jobs = None;
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Commits queued changes until every sender is gone or a commit fails; after a failure the
/// queue closes, so every later write fails too instead of being acknowledged unwritten.
fn commit_loop(db: Database, path: &Path, queue: mpsc::Receiver<Job>, mut publish: Publish) {
    while let Ok(first) = queue.recv() {
        let mut jobs = vec![first];
        while jobs.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        let result = commit(&db, &jobs).map_err(|e| disk_error(path, e));
        if let Err(e) = &result {
            tracing::error!(error = %e, "mote store cannot write its data; writes now fail");
        }
        for job in jobs {
            if result.is_ok() {
                publish(job.revision, job.events);
            }
            if let Some(done) = job.done {
                // The writer may have gone away (its client hung up); the write stands.
                let _ = done.send(result.clone());
            }
        }
        if result.is_err() {
            return;
        }
    }
}

fn commit(db: &Database, jobs: &[Job]) -> Result<(), redb::Error> {
    let mut txn = db.begin_write()?;
    txn.set_durability(Durability::Immediate)?;
    {
        let mut records = txn.open_table(RECORDS)?;
        let mut stamps = txn.open_table(STAMPS)?;
        let mut leases = txn.open_table(LEASES)?;
        let mut meta = txn.open_table(META)?;
        let mut bytes = Vec::new();
        for job in jobs {
            let applied = &job.applied;
            for (id, ttl) in &applied.granted {
                leases.insert(id, ttl)?;
            }
            let events = job.events.as_deref().map_or(&[][..], Vec::as_slice);
            for (sub, event) in events.iter().enumerate() {
                let Some(kv) = &event.kv else { continue };
                bytes.clear();
                let record = PbEvent {
                    r#type: event.r#type,
                    kv: Some(kv.clone()),
                    prev_kv: None,
                };
                record.encode(&mut bytes).expect("a Vec grows to fit");
                records.insert((kv.mod_revision, sub as u32), bytes.as_slice())?;
            }
            for (key, s) in &applied.stamps {
                stamps.insert(key.as_slice(), (s.wall_ms, s.logical, s.replica))?;
            }
            for id in &applied.ended {
                leases.remove(id)?;
            }
            if let Some(compaction) = &applied.compaction {
                for rev in &compaction.dropped {
                    records.remove(rev)?;
                }
                meta.insert(COMPACTED, compaction.revision)?;
            }
        }
        if let Some(last) = jobs.last() {
            meta.insert(REVISION, last.revision)?;
        }
    }
    txn.commit()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::engine::Engine;
    use crate::replica::{Member, Replica};
    use etcd_client::proto::{
        PbDeleteRequest, PbKeyValue, PbPutRequest, PbRangeRequest, PbTxnRequest,
    };
    use proptest::prelude::*;
    use std::path::Path;
    use std::sync::Arc;

    #[derive(Clone, Debug)]
    enum Op {
        Put { key: u8, value: u8, leased: bool },
        Delete { key: u8 },
        TxnPutPair { key: u8, value: u8 },
        Compact { back: i64 },
        Grant,
        Revoke,
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        let op = prop_oneof![
            4 => (0..6u8, any::<u8>(), any::<bool>())
                .prop_map(|(key, value, leased)| Op::Put { key, value, leased }),
            2 => (0..6u8).prop_map(|key| Op::Delete { key }),
            1 => (0..5u8, any::<u8>()).prop_map(|(key, value)| Op::TxnPutPair { key, value }),
            1 => (0..4i64).prop_map(|back| Op::Compact { back }),
            1 => Just(Op::Grant),
            1 => Just(Op::Revoke),
        ];
        proptest::collection::vec(op, 1..40)
    }

    /// Everything a client could observe of a replica: revision, compaction point, every key
    /// at every retained revision, and the leases with their keys.
    type Observed = (
        i64,
        i64,
        Vec<Vec<PbKeyValue>>,
        Vec<(i64, i64, Vec<Vec<u8>>)>,
    );

    fn observe(engine: &Engine) -> Observed {
        let history = (engine.compacted().max(1)..=engine.revision())
            .map(|revision| {
                let all = PbRangeRequest {
                    key: vec![0],
                    range_end: vec![0],
                    revision,
                    ..PbRangeRequest::default()
                };
                engine.range(&all).expect("a retained revision reads").kvs
            })
            .collect();
        let leases = engine
            .leases()
            .ids()
            .map(|id| {
                let lease = engine.leases().get(id).expect("listed lease exists");
                (id, lease.granted_ttl, lease.keys().cloned().collect())
            })
            .collect();
        (engine.revision(), engine.compacted(), history, leases)
    }

    fn open(dir: &Path) -> Arc<Replica> {
        Replica::open(vec![Member::new("a", vec![], vec![])], Some(dir)).expect("the data opens")
    }

    /// Runs `ops` against a replica on `dir`; a rejected operation (an unknown lease, a
    /// compaction past the revision) is part of the history too, and must change nothing.
    async fn run(replica: &Replica, ops: Vec<Op>) {
        let mut leases = Vec::new();
        for op in ops {
            let _ = match op {
                Op::Put { key, value, leased } => {
                    let lease = if leased {
                        leases.last().copied().unwrap_or(0)
                    } else {
                        0
                    };
                    let req = PbPutRequest {
                        key: vec![key],
                        value: vec![value],
                        lease,
                        prev_kv: true,
                        ..PbPutRequest::default()
                    };
                    replica.write(|e, now| e.put(req, now)).await.map(drop)
                }
                Op::Delete { key } => {
                    let req = PbDeleteRequest {
                        key: vec![key],
                        ..PbDeleteRequest::default()
                    };
                    replica
                        .write(|e, now| e.delete_range(req, now))
                        .await
                        .map(drop)
                }
                Op::TxnPutPair { key, value } => {
                    let put = |key: u8| PbPutRequest {
                        key: vec![key],
                        value: vec![value],
                        ..PbPutRequest::default()
                    };
                    let ops = [put(key), put(key + 1)]
                        .into_iter()
                        .map(|p| etcd_client::proto::PbTxnRequestOp {
                            request: Some(etcd_client::proto::PbTxnOpRequest::RequestPut(p)),
                        })
                        .collect();
                    let req = PbTxnRequest {
                        success: ops,
                        ..PbTxnRequest::default()
                    };
                    replica.write(|e, now| e.txn(req, now)).await.map(drop)
                }
                Op::Compact { back } => {
                    replica
                        .write(|e, _| Ok(((), e.compact(e.revision() - back)?)))
                        .await
                }
                Op::Grant => replica
                    .write(|e, now| {
                        let ((id, _), applied) = e.grant_lease(0, 100, now)?;
                        Ok((id, applied))
                    })
                    .await
                    .map(|id| leases.push(id)),
                Op::Revoke => match leases.pop() {
                    Some(id) => {
                        replica
                            .write(|e, now| e.revoke_lease(id, now).map(|a| ((), a)))
                            .await
                    }
                    None => Ok(()),
                },
            };
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// Whatever a replica acknowledged is what it reads back after reopening its data:
        /// the same revision and compaction point, every retained revision of every key, and
        /// the same leases holding the same keys.
        #[test]
        fn reopening_restores_everything_acknowledged(ops in ops()) {
            let dir = tempfile::tempdir().unwrap();
            let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let before = {
                let replica = open(dir.path());
                rt.block_on(run(&replica, ops));
                observe(&replica.engine())
            };
            let replica = open(dir.path());
            let after = observe(&replica.engine());
            prop_assert_eq!(before, after);
        }
    }
}
