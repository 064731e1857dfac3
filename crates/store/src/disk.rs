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
use crate::engine::{Applied, Restored};
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

/// The queue to the committing thread.
pub struct Disk {
    jobs: mpsc::Sender<Job>,
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
    let get = |name| -> Result<i64, redb::Error> { Ok(meta.get(name)?.map_or(0, |v| v.value())) };
    let mut state = Restored {
        revision: get(REVISION)?,
        compacted: get(COMPACTED)?,
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
    pub fn start(db: Database, path: PathBuf, publish: Publish) -> Self {
        let (jobs, queue) = mpsc::channel();
        let thread_path = path.clone();
        std::thread::Builder::new()
            .name("mote-store-disk".into())
            .spawn(move || commit_loop(db, &thread_path, queue, publish))
            .expect("the OS refused to start the store's disk thread");
        Self { jobs, path }
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
        self.jobs
            .send(job)
            .map_err(|_| disk_error(&self.path, "the disk thread stopped after an earlier error"))
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
