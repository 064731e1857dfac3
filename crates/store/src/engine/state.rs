//! The engine's state ([`Engine`]'s fields: the clock, the revisions, the key index, the
//! history and the leases), and what a change reports ([`Applied`]) or a restore starts from
//! ([`Restored`]). The methods that read and change it are the other modules' of `engine`.

use super::index::{KeyIndex, Record, Rev};
use crate::clock::{Clock, Stamp};
use crate::lease::Leases;
use etcd_client::proto::PbEvent;
use std::collections::BTreeMap;

/// The compaction point before the first compaction. As on etcd it is below 0, so the first
/// compaction may be to revision 0 (a no-op that succeeds once).
pub const NEVER_COMPACTED: i64 = -1;

/// A replica's state.
#[derive(Debug)]
pub struct Engine {
    pub(super) replica: u64,
    pub(super) clock: Clock,
    pub(super) revision: i64,
    pub(super) compacted: i64,
    pub(super) keys: BTreeMap<Vec<u8>, KeyIndex>,
    pub(super) records: BTreeMap<Rev, Record>,
    pub(super) leases: Leases,
}

/// What a change to the engine did besides its response: the events for watchers, and
/// everything the disk must record to restore the same state.
#[derive(Debug, Default)]
pub struct Applied {
    /// Events in revision order, each with the key's previous state. All of them share one
    /// revision, and an event's position is its sub-revision.
    pub events: Vec<PbEvent>,
    /// Keys whose stamp changed, with the new stamp (a deletion merged for a key that is
    /// already gone changes only its stamp).
    pub stamps: Vec<(Vec<u8>, Stamp)>,
    /// Leases granted, as (id, TTL in seconds).
    pub granted: Vec<(i64, i64)>,
    /// Leases revoked or expired.
    pub ended: Vec<i64>,
    /// History compacted: the new compaction point and the records it dropped.
    pub compaction: Option<Compaction>,
}

impl Applied {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
            && self.stamps.is_empty()
            && self.granted.is_empty()
            && self.ended.is_empty()
            && self.compaction.is_none()
    }
}

/// What one compaction did.
#[derive(Debug, Default)]
pub struct Compaction {
    /// The revision reads below which now fail.
    pub revision: i64,
    /// The records dropped, as (revision, sub-revision).
    pub dropped: Vec<(i64, u32)>,
}

/// A replica's state as the disk keeps it, to rebuild an engine from.
#[derive(Debug, Default)]
pub struct Restored {
    /// The current revision.
    pub revision: i64,
    /// The compaction point ([`NEVER_COMPACTED`] before the first compaction).
    pub compacted: i64,
    /// Every record in history, in revision order, as (revision, sub-revision, the event that
    /// wrote it).
    pub records: Vec<(i64, u32, PbEvent)>,
    /// Every key's stamp, tombstones included.
    pub stamps: Vec<(Vec<u8>, Stamp)>,
    /// Every lease, as (id, TTL in seconds).
    pub leases: Vec<(i64, i64)>,
}
