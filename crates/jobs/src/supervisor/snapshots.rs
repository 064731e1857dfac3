//! Snapshot completion: workers report the partitions they stored at an iteration; the
//! snapshot is complete once every partition of the job is stored and no worker failed to
//! store one. The last complete snapshot is what a restore rolls back to, so it is kept until
//! a newer one completes; then it goes, with every older one that never completed.

use super::history::{History, SnapshotRecord, SnapshotState};
use crate::cursor::Cursor;
use crate::map::PartitionKey;
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

/// A snapshot being stored.
struct Partial {
    keys: HashSet<PartitionKey>,
    /// The cursor the first worker reported at the barrier; every worker's is the same there.
    cursor: Cursor,
    /// A worker failed to store a partition: it will never complete.
    failed: bool,
    record: usize,
}

/// The last complete snapshot.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Complete {
    pub(super) iteration: u64,
    pub(super) cursor: Cursor,
    record: usize,
}

/// One worker's report of a snapshot, its partitions checked against the map.
pub(super) struct Stored {
    pub(super) iteration: u64,
    pub(super) keys: Vec<PartitionKey>,
    pub(super) bytes: u64,
    pub(super) write_us: u64,
    pub(super) cursor: Cursor,
    pub(super) error: Option<String>,
}

/// A snapshot just completed, and the older ones whose objects may go now.
#[derive(Debug, PartialEq)]
pub(super) struct Completed {
    pub(super) iteration: u64,
    pub(super) delete: Vec<u64>,
}

/// The snapshots of one job.
pub(super) struct Snapshots {
    /// Partitions the job has, of every group.
    keys: usize,
    partial: BTreeMap<u64, Partial>,
    complete: Option<Complete>,
}

impl Snapshots {
    pub(super) fn new(keys: usize) -> Self {
        Self {
            keys,
            partial: BTreeMap::new(),
            complete: None,
        }
    }

    /// A job taken over resumes from the snapshot at `iteration`, which its former controller
    /// saw complete.
    pub(super) fn resume(&mut self, history: &mut History, iteration: u64, cursor: Cursor) {
        let record = history.snapshots.push(SnapshotRecord {
            iteration,
            state: SnapshotState::Complete,
            stored: self.keys,
            of: self.keys,
            bytes: 0,
            write: Duration::ZERO,
            error: None,
        });
        self.complete = Some(Complete {
            iteration,
            cursor,
            record,
        });
    }

    /// The last complete snapshot.
    pub(super) fn complete(&self) -> Option<&Complete> {
        self.complete.as_ref()
    }

    /// Takes a worker's report; answers the snapshot it completed, if it did.
    pub(super) fn stored(&mut self, history: &mut History, stored: Stored) -> Option<Completed> {
        let iteration = stored.iteration;
        // A report of a snapshot no newer than the complete one is of no use: it would not be
        // restored from, and its objects are deleted.
        if self
            .complete
            .as_ref()
            .is_some_and(|c| c.iteration >= iteration)
        {
            return None;
        }
        let of = self.keys;
        let partial = self.partial.entry(iteration).or_insert_with(|| Partial {
            keys: HashSet::new(),
            cursor: stored.cursor,
            failed: false,
            record: history.snapshots.push(SnapshotRecord {
                iteration,
                state: SnapshotState::Storing,
                stored: 0,
                of,
                bytes: 0,
                write: Duration::ZERO,
                error: None,
            }),
        });
        partial.keys.extend(stored.keys);
        partial.failed |= stored.error.is_some();
        let (count, failed, record) = (partial.keys.len(), partial.failed, partial.record);
        if let Some(r) = history.snapshots.get_mut(record) {
            r.stored = count;
            r.bytes += stored.bytes;
            r.write = r.write.max(Duration::from_micros(stored.write_us));
            if let Some(error) = stored.error {
                r.state = SnapshotState::Incomplete;
                r.error.get_or_insert(error);
            }
        }
        if failed || count < of {
            return None;
        }
        let partial = self.partial.remove(&iteration).expect("just updated");
        if let Some(r) = history.snapshots.get_mut(partial.record) {
            r.state = SnapshotState::Complete;
        }
        let previous = self.complete.replace(Complete {
            iteration,
            cursor: partial.cursor,
            record: partial.record,
        });
        let mut delete = Vec::new();
        // Older snapshots are of no use now, and those still storing will never complete: no
        // restore goes back before this one, so nothing writes to their iterations again.
        let older: Vec<u64> = self.partial.range(..iteration).map(|(i, _)| *i).collect();
        for i in older {
            let p = self.partial.remove(&i).expect("listed");
            if let Some(r) = history.snapshots.get_mut(p.record) {
                r.state = SnapshotState::Deleted;
            }
            delete.push(i);
        }
        if let Some(previous) = previous {
            if let Some(r) = history.snapshots.get_mut(previous.record) {
                r.state = SnapshotState::Deleted;
            }
            delete.push(previous.iteration);
        }
        delete.sort_unstable();
        Some(Completed { iteration, delete })
    }

    /// A restore overtook the snapshots being stored: the workers roll back before them and
    /// store them again, in the new generation, as new snapshots. Their objects stay, to be
    /// written over: the new generation writes under the same iterations.
    pub(super) fn abandon(&mut self, history: &mut History) {
        for p in std::mem::take(&mut self.partial).into_values() {
            if let Some(r) = history.snapshots.get_mut(p.record) {
                r.state = SnapshotState::Incomplete;
                r.error = Some("a restore overtook it".to_owned());
            }
        }
    }

    /// The job ended and its snapshots' objects were deleted.
    pub(super) fn deleted(&mut self, history: &mut History) {
        for r in history.snapshots.iter_mut() {
            if matches!(r.state, SnapshotState::Storing | SnapshotState::Complete) {
                r.state = SnapshotState::Deleted;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::program::GroupId;
    use crate::supervisor::history::LISTED;

    fn key(index: u32) -> PartitionKey {
        PartitionKey {
            group: GroupId(0),
            index,
        }
    }

    fn stored(iteration: u64, keys: &[u32], error: Option<&str>) -> Stored {
        Stored {
            iteration,
            keys: keys.iter().map(|&i| key(i)).collect(),
            bytes: 10,
            write_us: 2_000,
            cursor: Cursor::new(),
            error: error.map(str::to_owned),
        }
    }

    #[test]
    fn a_snapshot_completes_when_every_partition_is_stored_once_at_least() {
        let (mut s, mut h) = (Snapshots::new(3), History::default());
        assert_eq!(s.stored(&mut h, stored(5, &[0, 1], None)), None);
        // A partition stored twice (it moved between two workers' barriers) counts once.
        assert_eq!(s.stored(&mut h, stored(5, &[1], None)), None);
        let done = s.stored(&mut h, stored(5, &[2], None));
        assert_eq!(
            done,
            Some(Completed {
                iteration: 5,
                delete: vec![]
            })
        );
        assert_eq!(s.complete().map(|c| c.iteration), Some(5));
        let r = h.snapshots.iter().next().unwrap();
        assert_eq!(
            (r.state, r.stored, r.of, r.bytes),
            (SnapshotState::Complete, 3, 3, 30)
        );
    }

    #[test]
    fn a_failed_store_keeps_its_snapshot_from_completing() {
        let (mut s, mut h) = (Snapshots::new(2), History::default());
        assert_eq!(s.stored(&mut h, stored(5, &[0], Some("disk full"))), None);
        assert_eq!(s.stored(&mut h, stored(5, &[1], None)), None);
        assert!(s.complete().is_none());
        let r = h.snapshots.iter().next().unwrap();
        assert_eq!(r.state, SnapshotState::Incomplete);
        assert_eq!(r.error.as_deref(), Some("disk full"));
    }

    #[test]
    fn a_newer_complete_snapshot_deletes_the_previous_and_older_incomplete_ones() {
        let (mut s, mut h) = (Snapshots::new(2), History::default());
        s.stored(&mut h, stored(5, &[0, 1], None)).unwrap();
        assert_eq!(s.stored(&mut h, stored(10, &[0], Some("lost"))), None);
        assert_eq!(s.stored(&mut h, stored(15, &[0], None)), None);
        let done = s.stored(&mut h, stored(15, &[1], None));
        assert_eq!(
            done,
            Some(Completed {
                iteration: 15,
                delete: vec![5, 10]
            })
        );
        let states: Vec<_> = h.snapshots.iter().map(|r| r.state).collect();
        assert_eq!(
            states,
            [
                SnapshotState::Deleted,
                SnapshotState::Deleted,
                SnapshotState::Complete
            ]
        );
        // A late report of an older snapshot changes nothing.
        assert_eq!(s.stored(&mut h, stored(10, &[1], None)), None);
        assert_eq!(h.snapshots.iter().count(), 3);
    }

    #[test]
    fn a_restore_abandons_the_snapshots_being_stored_but_keeps_the_complete_one() {
        let (mut s, mut h) = (Snapshots::new(2), History::default());
        s.stored(&mut h, stored(5, &[0, 1], None)).unwrap();
        s.stored(&mut h, stored(10, &[0], None));
        s.abandon(&mut h);
        assert_eq!(s.complete().map(|c| c.iteration), Some(5));
        let r = h.snapshots.iter().nth(1).unwrap();
        assert_eq!(r.state, SnapshotState::Incomplete);
        // The new generation stores iteration 10 again, from nothing.
        assert_eq!(s.stored(&mut h, stored(10, &[1], None)), None);
        assert_eq!(h.snapshots.iter().nth(2).unwrap().stored, 1);
    }

    #[test]
    fn completion_does_not_depend_on_the_record_being_listed() {
        let (mut s, mut h) = (Snapshots::new(2), History::default());
        s.stored(&mut h, stored(1, &[0], None));
        for i in 2..(LISTED as u64 + 4) {
            s.stored(&mut h, stored(i, &[0], Some("slow")));
        }
        assert!(s.stored(&mut h, stored(1, &[1], None)).is_some());
    }
}
