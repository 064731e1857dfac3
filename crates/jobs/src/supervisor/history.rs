//! What a supervisor did, for the job's status: the moves, snapshots and restores, each a
//! record numbered in the order made. A status lists the latest [`LISTED`] moves and
//! snapshots and counts the older ones; the records are only shown, and no decision reads
//! them back.

use crate::map::WorkerId;
use std::collections::VecDeque;
use std::time::Duration;

/// Moves and snapshots a status lists; older ones are only counted.
pub const LISTED: usize = 16;

/// The latest [`LISTED`] records of a kind, numbered from the job's first.
#[derive(Clone, Debug, PartialEq)]
pub struct Listed<T> {
    older: usize,
    items: VecDeque<T>,
}

impl<T> Default for Listed<T> {
    fn default() -> Self {
        Self {
            older: 0,
            items: VecDeque::new(),
        }
    }
}

impl<T> Listed<T> {
    /// Adds a record and returns its number; the oldest listed one is only counted from then.
    pub(super) fn push(&mut self, item: T) -> usize {
        let number = self.older + self.items.len();
        self.items.push_back(item);
        if self.items.len() > LISTED {
            self.items.pop_front();
            self.older += 1;
        }
        number
    }

    /// Record `number`, while listed.
    pub(super) fn get_mut(&mut self, number: usize) -> Option<&mut T> {
        self.items.get_mut(number.checked_sub(self.older)?)
    }

    /// Every listed record, oldest first.
    pub(super) fn iter_mut(&mut self) -> impl Iterator<Item = &mut T> {
        self.items.iter_mut()
    }

    /// The listed records, oldest first.
    pub fn iter(&self) -> impl Iterator<Item = &T> {
        self.items.iter()
    }

    /// How many records are no longer listed.
    pub fn older(&self) -> usize {
        self.older
    }
}

/// Partitions moved from one worker to another.
#[derive(Clone, Debug, PartialEq)]
pub struct MigrationRecord {
    /// When it started, since the job ran.
    pub at: Duration,
    /// The source.
    pub from: WorkerId,
    /// The destination.
    pub to: WorkerId,
    /// Partitions moved (every group's at each index).
    pub partitions: usize,
    /// Bytes of their images, as they arrive.
    pub bytes: u64,
    /// Time until the last one arrived; zero when it never started or a restore overtook it,
    /// none while moving.
    pub took: Option<Duration>,
    /// Why, and how it ended if not by arriving.
    pub reason: String,
}

/// Where a snapshot is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotState {
    /// Workers are storing it.
    Storing,
    /// Every partition is stored: a restore may use it.
    Complete,
    /// It will not complete (a partition was not stored, or a restore overtook it).
    Incomplete,
    /// A newer one completed, or the job ended: its objects were deleted.
    Deleted,
}

/// One snapshot.
#[derive(Clone, Debug, PartialEq)]
pub struct SnapshotRecord {
    /// The iteration it was taken at.
    pub iteration: u64,
    /// Where it is.
    pub state: SnapshotState,
    /// Partitions stored so far.
    pub stored: usize,
    /// Partitions the job has.
    pub of: usize,
    /// Bytes stored.
    pub bytes: u64,
    /// The longest a worker took from the barrier to its last object stored.
    pub write: Duration,
    /// Why it is incomplete, if so.
    pub error: Option<String>,
}

/// One rollback.
#[derive(Clone, Debug, PartialEq)]
pub struct RestoreRecord {
    /// When it was decided, since the job ran.
    pub at: Duration,
    /// Why.
    pub reason: String,
    /// The snapshot's iteration.
    pub iteration: u64,
    /// The generation it began.
    pub generation: u32,
    /// Time until every worker took it; none until then, or when it failed.
    pub took: Option<Duration>,
}

/// Every record a status shows.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    /// Moves.
    pub migrations: Listed<MigrationRecord>,
    /// Snapshots.
    pub snapshots: Listed<SnapshotRecord>,
    /// Restores, every one (a job has few).
    pub restores: Vec<RestoreRecord>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_latest_are_listed_and_numbers_stay_with_their_records() {
        let mut listed = Listed::default();
        for i in 0..LISTED + 3 {
            assert_eq!(listed.push(i), i);
        }
        assert_eq!(listed.older(), 3);
        assert_eq!(listed.iter().count(), LISTED);
        assert_eq!(listed.get_mut(2), None, "no longer listed");
        assert_eq!(listed.get_mut(3).copied(), Some(3));
        assert_eq!(listed.get_mut(LISTED + 2).copied(), Some(LISTED + 2));
        assert_eq!(listed.get_mut(LISTED + 3), None, "not made yet");
    }
}
