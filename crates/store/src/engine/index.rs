//! What the multi-version store is made of: every key's index of records ([`KeyIndex`]), one
//! key's state as written at one revision ([`Record`], at a [`Rev`]), a write that won
//! ([`Write`]), and the keys a request names ([`KeyRange`]).

use crate::clock::Stamp;
use etcd_client::proto::PbKeyValue;
use std::ops::Bound;

/// `mvccpb.Event.EventType`.
pub(super) const EVENT_PUT: i32 = 0;
pub(super) const EVENT_DELETE: i32 = 1;

/// A revision and the position of an operation within it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Rev {
    pub(super) main: i64,
    pub(super) sub: u32,
}

/// One key's state as written at one revision.
#[derive(Clone, Debug)]
pub(super) struct Record {
    pub(super) key: Vec<u8>,
    pub(super) value: Vec<u8>,
    pub(super) create_revision: i64,
    pub(super) version: i64,
    pub(super) lease: i64,
    pub(super) deleted: bool,
}

/// Where a key's records are, and the stamp of its current state.
#[derive(Clone, Debug, Default)]
pub(super) struct KeyIndex {
    pub(super) revs: Vec<Rev>,
    pub(super) stamp: Stamp,
}

/// A write that won: what it sets a key to.
#[derive(Clone, Debug)]
pub(super) struct Write {
    pub(super) value: Vec<u8>,
    pub(super) lease: i64,
    pub(super) deleted: bool,
    pub(super) stamp: Stamp,
}

/// The keys a request names: one key, or `[start, end)` with `None` meaning no upper bound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRange {
    start: Vec<u8>,
    end: Option<Vec<u8>>,
    single: bool,
}

impl KeyRange {
    /// etcd's encoding: an empty `range_end` is the one key, `"\0"` is every key from `key`
    /// up, anything else is `[key, range_end)`.
    pub fn new(key: &[u8], range_end: &[u8]) -> Self {
        match range_end {
            [] => Self {
                start: key.to_vec(),
                end: None,
                single: true,
            },
            [0] => Self {
                start: key.to_vec(),
                end: None,
                single: false,
            },
            end => Self {
                start: key.to_vec(),
                end: Some(end.to_vec()),
                single: false,
            },
        }
    }

    /// Whether `key` is in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        if self.single {
            return key == self.start.as_slice();
        }
        key >= self.start.as_slice() && self.end.as_deref().is_none_or(|end| key < end)
    }

    pub(super) fn bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        let start = Bound::Included(self.start.as_slice());
        match (&self.end, self.single) {
            (_, true) => (start, Bound::Included(self.start.as_slice())),
            (Some(end), false) if end.as_slice() <= self.start.as_slice() => {
                (start, Bound::Excluded(self.start.as_slice()))
            }
            (Some(end), false) => (start, Bound::Excluded(end.as_slice())),
            (None, false) => (start, Bound::Unbounded),
        }
    }
}

pub(super) fn kv_of(rev: Rev, record: &Record) -> PbKeyValue {
    PbKeyValue {
        key: record.key.clone(),
        create_revision: record.create_revision,
        mod_revision: rev.main,
        version: record.version,
        value: record.value.clone(),
        lease: record.lease,
    }
}
