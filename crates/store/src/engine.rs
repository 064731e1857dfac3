//! The replica's state machine: a multi-version key-value store with etcd's revisions, whose
//! keys are last-writer-wins registers so that replicas merge into the same state. No I/O, no
//! clock: the caller passes the wall time, and gets back the watch events each write produced.
//!
//! - Every write transaction (and every merged batch of remote changes) takes the next
//!   `revision`; the operations inside it take sub-revisions. So revisions are unique and
//!   strictly increasing on a replica, and `Txn(If mod_revision == R)` behaves as on etcd.
//! - Each key remembers the stamp of the write that set its current state, deletions included
//!   (a tombstone outlives compaction), and a remote change is applied only if its stamp is
//!   greater. Local writes take a fresh stamp from the replica's clock, which is greater than
//!   every stamp the replica has seen, so they always apply.
//! - History (every record since the compacted revision) serves reads at a past revision and
//!   watches that start in the past.

use crate::clock::{Clock, Stamp};
use crate::error::StoreError;
use crate::lease::Leases;
use crate::pb;
use etcd_client::proto::{
    PbCompare, PbCompareTarget, PbDeleteRequest, PbDeleteResponse, PbEvent, PbKeyValue,
    PbPutRequest, PbPutResponse, PbRangeRequest, PbRangeResponse, PbResponseHeader, PbResponseOp,
    PbTargetUnion, PbTxnOpRequest, PbTxnOpResponse, PbTxnRequest, PbTxnRequestOp, PbTxnResponse,
};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

/// etcd's limit on operations in one transaction (`--max-txn-ops`).
pub const MAX_TXN_OPS: usize = 128;

/// The compaction point before the first compaction. As on etcd it is below 0, so the first
/// compaction may be to revision 0 (a no-op that succeeds once).
pub const NEVER_COMPACTED: i64 = -1;

/// `mvccpb.Event.EventType`.
const EVENT_PUT: i32 = 0;
const EVENT_DELETE: i32 = 1;

/// `RangeRequest.SortOrder`: none (key order), and descending, the last one.
const SORT_NONE: i32 = 0;
const SORT_DESCEND: i32 = 2;

/// A revision and the position of an operation within it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Rev {
    main: i64,
    sub: u32,
}

/// One key's state as written at one revision.
#[derive(Clone, Debug)]
struct Record {
    key: Vec<u8>,
    value: Vec<u8>,
    create_revision: i64,
    version: i64,
    lease: i64,
    deleted: bool,
}

/// Where a key's records are, and the stamp of its current state.
#[derive(Clone, Debug, Default)]
struct KeyIndex {
    revs: Vec<Rev>,
    stamp: Stamp,
}

/// A write that won: what it sets a key to.
#[derive(Clone, Debug)]
struct Write {
    value: Vec<u8>,
    lease: i64,
    deleted: bool,
    stamp: Stamp,
}

/// A replica's state.
#[derive(Debug)]
pub struct Engine {
    replica: u64,
    clock: Clock,
    revision: i64,
    compacted: i64,
    keys: BTreeMap<Vec<u8>, KeyIndex>,
    records: BTreeMap<Rev, Record>,
    leases: Leases,
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

    fn bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
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

impl Engine {
    /// An empty replica with id `replica`.
    pub fn new(replica: u64) -> Self {
        Self {
            replica,
            clock: Clock::new(replica),
            revision: 1,
            compacted: NEVER_COMPACTED,
            keys: BTreeMap::new(),
            records: BTreeMap::new(),
            leases: Leases::default(),
        }
    }

    /// The replica `replica` as the disk left it. Leases start a full TTL from `now_ms`, as
    /// etcd's do after a restart: their holders had no way to renew them while it was down.
    pub fn restore(replica: u64, state: Restored, now_ms: u64) -> Self {
        let mut engine = Self::new(replica);
        engine.revision = state.revision.max(1);
        engine.compacted = state.compacted;
        for (id, ttl) in state.leases {
            // A lease that cannot be granted again (a TTL over the limit) was never stored.
            let _ = engine.leases.grant(id, ttl, now_ms);
        }
        for (main, sub, event) in state.records {
            let Some(kv) = event.kv else { continue };
            let deleted = event.r#type == EVENT_DELETE;
            let key = kv.key;
            engine
                .keys
                .entry(key.clone())
                .or_default()
                .revs
                .push(Rev { main, sub });
            let record = Record {
                key,
                value: kv.value,
                create_revision: kv.create_revision,
                version: kv.version,
                lease: kv.lease,
                deleted,
            };
            engine.records.insert(Rev { main, sub }, record);
        }
        // A key carries the lease of its latest record only.
        let attached: Vec<(i64, Vec<u8>)> = engine
            .keys
            .keys()
            .filter_map(|key| Some((engine.current(key)?.1.lease, key.clone())))
            .filter(|(lease, _)| *lease != 0)
            .collect();
        for (lease, key) in attached {
            engine.leases.attach(lease, &key);
        }
        for (key, stamp) in state.stamps {
            engine.clock.observe(stamp);
            engine.keys.entry(key).or_default().stamp = stamp;
        }
        engine
    }

    /// This replica's id.
    pub fn replica(&self) -> u64 {
        self.replica
    }

    /// The current revision (etcd starts at 1).
    pub fn revision(&self) -> i64 {
        self.revision
    }

    /// About how many bytes the history holds (keys and values): the database size a replica
    /// without a disk reports.
    pub fn history_bytes(&self) -> u64 {
        self.records
            .values()
            .map(|r| (r.key.len() + r.value.len()) as u64)
            .sum()
    }

    /// The revision history has been compacted to ([`NEVER_COMPACTED`] before the first
    /// compaction).
    pub fn compacted(&self) -> i64 {
        self.compacted
    }

    /// The response header at the current revision.
    pub fn header(&self) -> PbResponseHeader {
        PbResponseHeader {
            cluster_id: 0,
            member_id: self.replica,
            revision: self.revision,
            raft_term: 0,
        }
    }

    /// The leases, for the lease API.
    pub fn leases(&self) -> &Leases {
        &self.leases
    }

    /// `KV.Range`.
    pub fn range(&self, req: &PbRangeRequest) -> Result<PbRangeResponse, StoreError> {
        check_range(req)?;
        let at = self.read_revision(req.revision)?;
        let mut resp = self.range_at(req, at);
        resp.header = Some(self.header());
        Ok(resp)
    }

    /// `KV.Put`.
    pub fn put(
        &mut self,
        req: PbPutRequest,
        wall_ms: u64,
    ) -> Result<(PbPutResponse, Applied), StoreError> {
        check_put(&req)?;
        // etcd looks the lease up before the previous value `ignore_*` needs.
        self.check_lease(req.lease)?;
        self.check_ignores(&req)?;
        let (mut resp, applied) = self.write_next(wall_ms, |e, stamp, sub, applied| {
            e.apply_put(req, stamp, sub, applied)
        });
        resp.header = Some(self.header());
        Ok((resp, applied))
    }

    /// `KV.DeleteRange`.
    pub fn delete_range(
        &mut self,
        req: PbDeleteRequest,
        wall_ms: u64,
    ) -> Result<(PbDeleteResponse, Applied), StoreError> {
        if req.key.is_empty() {
            return Err(StoreError::EmptyKey);
        }
        let (mut resp, applied) = self.write_next(wall_ms, |e, stamp, sub, applied| {
            e.apply_delete(req, stamp, sub, applied)
        });
        resp.header = Some(self.header());
        Ok((resp, applied))
    }

    /// `KV.Txn`, as etcd runs it: every compare, nested ones included, is evaluated against the
    /// state the transaction starts from, which decides the branch each (nested) transaction
    /// takes; what the operations of those branches need (a lease, a key for `ignore_*`, a
    /// readable revision) is checked against that state too; then the operations run in
    /// order, each range seeing the writes before it, all writes at one new revision (none if
    /// nothing is written).
    pub fn txn(
        &mut self,
        req: PbTxnRequest,
        wall_ms: u64,
    ) -> Result<(PbTxnResponse, Applied), StoreError> {
        check_txn(&req, MAX_TXN_OPS)?;
        written(&req.success)?;
        written(&req.failure)?;
        let branches = self.branches(&req);
        self.check_taken(&req, &branches)?;
        let (mut resp, applied) = self.write_next(wall_ms, |e, stamp, sub, applied| {
            e.run_txn(req, &branches, stamp, sub, applied)
        });
        resp.header = Some(self.header());
        Ok((resp, applied))
    }

    /// Runs `f`, whose writes all take the next revision, if it writes anything.
    fn write_next<T>(
        &mut self,
        wall_ms: u64,
        f: impl FnOnce(&mut Self, Stamp, &mut u32, &mut Applied) -> T,
    ) -> (T, Applied) {
        let stamp = self.clock.tick(wall_ms);
        let mut applied = Applied::default();
        let mut sub = 0;
        let value = f(self, stamp, &mut sub, &mut applied);
        if sub > 0 {
            self.revision += 1;
        }
        (value, applied)
    }

    /// The branch every transaction in `req` takes, decided before any of them runs.
    fn branches(&self, req: &PbTxnRequest) -> Branches {
        let succeeded = req.compare.iter().all(|c| self.compare(c));
        let nested = taken(req, succeeded)
            .iter()
            .filter_map(|op| match &op.request {
                Some(PbTxnOpRequest::RequestTxn(t)) => Some(self.branches(t)),
                _ => None,
            })
            .collect();
        Branches { succeeded, nested }
    }

    /// What etcd checks of the operations a transaction will run, on the branches it takes
    /// only.
    fn check_taken(&self, req: &PbTxnRequest, branches: &Branches) -> Result<(), StoreError> {
        let mut nested = branches.nested.iter();
        for op in taken(req, branches.succeeded) {
            match &op.request {
                Some(PbTxnOpRequest::RequestRange(r)) => match r.revision {
                    0 => {}
                    r if r > self.revision => return Err(StoreError::FutureRevision),
                    r if r < self.compacted => return Err(StoreError::Compacted),
                    _ => {}
                },
                Some(PbTxnOpRequest::RequestPut(p)) => {
                    self.check_ignores(p)?;
                    self.check_lease(p.lease)?;
                }
                Some(PbTxnOpRequest::RequestTxn(t)) => {
                    let branches = nested.next().expect("every nested txn has its branch");
                    self.check_taken(t, branches)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn run_txn(
        &mut self,
        req: PbTxnRequest,
        branches: &Branches,
        stamp: Stamp,
        sub: &mut u32,
        applied: &mut Applied,
    ) -> PbTxnResponse {
        let ops = match branches.succeeded {
            true => req.success,
            false => req.failure,
        };
        let mut nested = branches.nested.iter();
        let responses = ops
            .into_iter()
            .filter_map(|op| op.request)
            .map(|request| {
                let response = match request {
                    PbTxnOpRequest::RequestRange(r) => {
                        // Inside a transaction a range sees the writes before it.
                        let at = if r.revision > 0 { r.revision } else { i64::MAX };
                        let mut resp = self.range_at(&r, at);
                        resp.header = Some(self.pending_header(*sub));
                        PbTxnOpResponse::ResponseRange(resp)
                    }
                    PbTxnOpRequest::RequestPut(p) => {
                        let mut resp = self.apply_put(p, stamp, sub, applied);
                        resp.header = Some(self.pending_header(*sub));
                        PbTxnOpResponse::ResponsePut(resp)
                    }
                    PbTxnOpRequest::RequestDeleteRange(d) => {
                        let mut resp = self.apply_delete(d, stamp, sub, applied);
                        resp.header = Some(self.pending_header(*sub));
                        PbTxnOpResponse::ResponseDeleteRange(resp)
                    }
                    PbTxnOpRequest::RequestTxn(t) => {
                        let branches = nested.next().expect("every nested txn has its branch");
                        PbTxnOpResponse::ResponseTxn(self.run_txn(t, branches, stamp, sub, applied))
                    }
                };
                PbResponseOp {
                    response: Some(response),
                }
            })
            .collect();
        PbTxnResponse {
            // etcd fills in the outermost header only: a nested transaction's stays empty.
            header: Some(PbResponseHeader::default()),
            succeeded: branches.succeeded,
            responses,
        }
    }

    /// The header of a response to an operation inside a transaction: as on etcd, only the
    /// revision, the one the transaction will have if it has written anything so far.
    fn pending_header(&self, sub: u32) -> PbResponseHeader {
        PbResponseHeader {
            revision: self.revision + i64::from(sub > 0),
            ..PbResponseHeader::default()
        }
    }

    /// A range at revision `at`, as etcd answers it: `count` is every key in the range, then
    /// the revision filters, the sort and the limit apply. Without an order or filters etcd
    /// reads only one key past the limit (to know whether there are more) and sorts only those,
    /// so a sort target without an order applies to the first keys, not to all of them.
    fn range_at(&self, req: &PbRangeRequest, at: i64) -> PbRangeResponse {
        let range = KeyRange::new(&req.key, &req.range_end);
        let filtered = req.min_mod_revision != 0
            || req.max_mod_revision != 0
            || req.min_create_revision != 0
            || req.max_create_revision != 0;
        let limit = usize::try_from(req.limit).unwrap_or(0);
        let read = match limit > 0 && req.sort_order == SORT_NONE && !filtered {
            true => limit + 1,
            false => usize::MAX,
        };
        let mut count = 0;
        let mut kvs = Vec::new();
        for (rev, record) in self.visible(&range, at) {
            count += 1;
            if !req.count_only && kvs.len() < read {
                kvs.push(kv_of(rev, record));
            }
        }
        let within = |v: i64, min: i64, max: i64| (min == 0 || v >= min) && (max == 0 || v <= max);
        kvs.retain(|kv| {
            within(kv.mod_revision, req.min_mod_revision, req.max_mod_revision)
                && within(
                    kv.create_revision,
                    req.min_create_revision,
                    req.max_create_revision,
                )
        });
        sort(&mut kvs, req.sort_order, req.sort_target);
        let more = limit > 0 && kvs.len() > limit;
        if more {
            kvs.truncate(limit);
        }
        if req.keys_only {
            kvs.iter_mut().for_each(|kv| kv.value.clear());
        }
        PbRangeResponse {
            header: None,
            kvs,
            more,
            count,
        }
    }

    /// `ignore_value` and `ignore_lease` need the key to exist.
    fn check_ignores(&self, p: &PbPutRequest) -> Result<(), StoreError> {
        match (p.ignore_value || p.ignore_lease) && self.current(&p.key).is_none() {
            true => Err(StoreError::KeyNotFound),
            false => Ok(()),
        }
    }

    /// A put's lease must be granted here (0 is none).
    fn check_lease(&self, lease: i64) -> Result<(), StoreError> {
        match lease != 0 && !self.leases.exists(lease) {
            true => Err(StoreError::LeaseNotFound),
            false => Ok(()),
        }
    }

    fn apply_put(
        &mut self,
        p: PbPutRequest,
        stamp: Stamp,
        sub: &mut u32,
        applied: &mut Applied,
    ) -> PbPutResponse {
        let prev = self.current(&p.key).map(|(_, r)| r.clone());
        let value = match (&prev, p.ignore_value) {
            (Some(prev), true) => prev.value.clone(),
            _ => p.value,
        };
        let lease = match (&prev, p.ignore_lease) {
            (Some(prev), true) => prev.lease,
            _ => p.lease,
        };
        let write = Write {
            value,
            lease,
            deleted: false,
            stamp,
        };
        let prev_kv = self.write(p.key, write, sub, applied);
        PbPutResponse {
            header: None,
            prev_kv: if p.prev_kv { prev_kv } else { None },
        }
    }

    fn apply_delete(
        &mut self,
        d: PbDeleteRequest,
        stamp: Stamp,
        sub: &mut u32,
        applied: &mut Applied,
    ) -> PbDeleteResponse {
        let range = KeyRange::new(&d.key, &d.range_end);
        let doomed: Vec<Vec<u8>> = self
            .visible(&range, i64::MAX)
            .map(|(_, record)| record.key.clone())
            .collect();
        let mut prev_kvs = Vec::new();
        for key in &doomed {
            let write = Write {
                value: Vec::new(),
                lease: 0,
                deleted: true,
                stamp,
            };
            if let Some(prev) = self.write(key.clone(), write, sub, applied) {
                prev_kvs.push(prev);
            }
        }
        PbDeleteResponse {
            header: None,
            deleted: doomed.len() as i64,
            prev_kvs: if d.prev_kv { prev_kvs } else { Vec::new() },
        }
    }

    /// Records `write` to `key` at the pending revision and returns the key's previous value.
    fn write(
        &mut self,
        key: Vec<u8>,
        write: Write,
        sub: &mut u32,
        applied: &mut Applied,
    ) -> Option<PbKeyValue> {
        let rev = Rev {
            main: self.revision + 1,
            sub: *sub,
        };
        *sub += 1;
        let prev = self.current(&key).map(|(rev, r)| (rev, r.clone()));
        let prev_kv = prev.as_ref().map(|(r, record)| kv_of(*r, record));
        if let Some((_, record)) = &prev
            && record.lease != 0
        {
            self.leases.detach(record.lease, &key);
        }
        let record = match write.deleted {
            true => Record {
                key: key.clone(),
                value: Vec::new(),
                create_revision: 0,
                version: 0,
                lease: 0,
                deleted: true,
            },
            false => Record {
                key: key.clone(),
                value: write.value,
                create_revision: prev.as_ref().map_or(rev.main, |(_, r)| r.create_revision),
                version: prev.as_ref().map_or(0, |(_, r)| r.version) + 1,
                lease: write.lease,
                deleted: false,
            },
        };
        if record.lease != 0 {
            self.leases.attach(record.lease, &key);
        }
        applied.events.push(self.event(rev, &record));
        applied.stamps.push((key.clone(), write.stamp));
        let index = self.keys.entry(key).or_default();
        index.revs.push(rev);
        index.stamp = write.stamp;
        self.records.insert(rev, record);
        prev_kv
    }

    /// The key's live record at the latest state, if it exists.
    fn current(&self, key: &[u8]) -> Option<(Rev, &Record)> {
        let rev = *self.keys.get(key)?.revs.last()?;
        let record = &self.records[&rev];
        (!record.deleted).then_some((rev, record))
    }

    /// The live keys in `range` as of revision `at`, in key order, with the revision of the
    /// record that set each.
    fn visible<'a>(
        &'a self,
        range: &'a KeyRange,
        at: i64,
    ) -> impl Iterator<Item = (Rev, &'a Record)> + 'a {
        self.keys
            .range::<[u8], _>(range.bounds())
            .filter_map(move |(_, index)| {
                let rev = index.revs.iter().rev().find(|r| r.main <= at)?;
                let record = &self.records[rev];
                (!record.deleted).then_some((*rev, record))
            })
    }

    fn read_revision(&self, revision: i64) -> Result<i64, StoreError> {
        match revision {
            r if r <= 0 => Ok(self.revision),
            r if r > self.revision => Err(StoreError::FutureRevision),
            r if r < self.compacted => Err(StoreError::Compacted),
            r => Ok(r),
        }
    }

    fn compare(&self, c: &PbCompare) -> bool {
        let range = KeyRange::new(&c.key, &c.range_end);
        let mut kvs = self.visible(&range, i64::MAX).peekable();
        if kvs.peek().is_none() {
            // As on etcd: no key compares as a key of zero values, except that a value
            // comparison with no key is false.
            return c.target != PbCompareTarget::Value as i32
                && compare_one(&PbKeyValue::default(), c);
        }
        kvs.all(|(rev, record)| compare_one(&kv_of(rev, record), c))
    }

    /// `KV.Compact`: drops history below `revision`; reads and watches below it then fail.
    pub fn compact(&mut self, revision: i64) -> Result<Applied, StoreError> {
        if revision <= self.compacted {
            return Err(StoreError::Compacted);
        }
        if revision > self.revision {
            return Err(StoreError::FutureRevision);
        }
        self.compacted = revision;
        let mut dropped = Vec::new();
        for index in self.keys.values_mut() {
            // Keep the newest record at or below the compaction point, unless it is a deletion
            // below it: a deletion at the point is an event a watch from there still gets.
            let keep_from = index.revs.iter().rposition(|r| r.main <= revision);
            let Some(keep_from) = keep_from else { continue };
            let kept = index.revs[keep_from];
            let drop_to = match self.records[&kept].deleted && kept.main < revision {
                true => keep_from + 1,
                false => keep_from,
            };
            // A deleted key keeps its index, empty, for its stamp: a stale remote write must
            // not bring it back (see `merge`).
            for rev in index.revs.drain(..drop_to) {
                self.records.remove(&rev);
                dropped.push((rev.main, rev.sub));
            }
        }
        Ok(Applied {
            compaction: Some(Compaction { revision, dropped }),
            ..Applied::default()
        })
    }

    /// The events after revision `after`, oldest first, for a watch that starts in the past.
    pub fn events_after(&self, after: i64) -> Result<Vec<PbEvent>, StoreError> {
        if after + 1 < self.compacted {
            return Err(StoreError::Compacted);
        }
        let from = Rev {
            main: after + 1,
            sub: 0,
        };
        Ok(self
            .records
            .range(from..)
            .map(|(rev, record)| self.event(*rev, record))
            .collect())
    }

    /// The event of `record`, written at `rev`. Its `prev_kv` is what etcd reads: the key as
    /// of the revision before (not as an earlier operation of the same transaction left it),
    /// and none for a put that creates the key.
    fn event(&self, rev: Rev, record: &Record) -> PbEvent {
        let (r#type, kv) = match record.deleted {
            true => (
                EVENT_DELETE,
                PbKeyValue {
                    key: record.key.clone(),
                    mod_revision: rev.main,
                    ..PbKeyValue::default()
                },
            ),
            false => (EVENT_PUT, kv_of(rev, record)),
        };
        let creates = !record.deleted && record.create_revision == rev.main;
        PbEvent {
            r#type,
            kv: Some(kv),
            prev_kv: match creates {
                true => None,
                false => self.state_before(&record.key, rev.main),
            },
        }
    }

    /// The key's live state at the revision before `main`, if history still has it: an
    /// event's `prev_kv`, as etcd reads it.
    fn state_before(&self, key: &[u8], main: i64) -> Option<PbKeyValue> {
        let index = self.keys.get(key)?;
        let before = index.revs.iter().rev().find(|r| r.main < main)?;
        let record = &self.records[before];
        (!record.deleted).then(|| kv_of(*before, record))
    }

    /// Grants lease `id` (0 or, as on etcd, a negative id picks one) for `ttl` seconds at
    /// `now_ms`. Returns the id and the TTL granted.
    pub fn grant_lease(
        &mut self,
        id: i64,
        ttl: i64,
        now_ms: u64,
    ) -> Result<((i64, i64), Applied), StoreError> {
        let id = match id {
            id if id <= 0 => self.leases.next_id(self.replica),
            id => id,
        };
        let granted = self.leases.grant(id, ttl, now_ms)?;
        let applied = Applied {
            granted: vec![(id, granted)],
            ..Applied::default()
        };
        Ok(((id, granted), applied))
    }

    /// Renews lease `id` at `now_ms`; returns its TTL.
    pub fn keep_alive(&mut self, id: i64, now_ms: u64) -> Result<i64, StoreError> {
        self.leases.renew(id, now_ms)
    }

    /// Revokes lease `id`, deleting its keys.
    pub fn revoke_lease(&mut self, id: i64, wall_ms: u64) -> Result<Applied, StoreError> {
        let keys = self.leases.revoke(id)?;
        let mut applied = self.delete_keys(keys, wall_ms);
        applied.ended.push(id);
        Ok(applied)
    }

    /// Revokes every lease that expired by `now_ms`, deleting their keys.
    pub fn expire_leases(&mut self, now_ms: u64) -> Applied {
        let expired = self.leases.expire(now_ms);
        let ended = expired.iter().map(|(id, _)| *id).collect();
        let keys: BTreeSet<Vec<u8>> = expired.into_iter().flat_map(|(_, keys)| keys).collect();
        Applied {
            ended,
            ..self.delete_keys(keys, now_ms)
        }
    }

    fn delete_keys(&mut self, keys: impl IntoIterator<Item = Vec<u8>>, wall_ms: u64) -> Applied {
        let mut applied = Applied::default();
        let stamp = self.clock.tick(wall_ms);
        let mut sub = 0;
        for key in keys {
            if self.current(&key).is_some() {
                let write = Write {
                    value: Vec::new(),
                    lease: 0,
                    deleted: true,
                    stamp,
                };
                self.write(key, write, &mut sub, &mut applied);
            }
        }
        if sub > 0 {
            self.revision += 1;
        }
        applied
    }

    /// What a peer pulls: the current state of every key written after revision `since`,
    /// oldest first, whole revisions only, until about `limit` keys or `max_bytes` of keys and
    /// values. Below the compaction point history is gone, so a peer that far behind pages
    /// through every key's current state instead, deletions included, in key order after
    /// `resume_key`.
    pub fn changes_after(
        &self,
        since: i64,
        resume_key: &[u8],
        limit: usize,
        max_bytes: usize,
    ) -> pb::PullResponse {
        let change = |key: &[u8], index: &KeyIndex| {
            let latest = index.revs.last().map(|rev| &self.records[rev]);
            pb::Change {
                key: key.to_vec(),
                value: latest.map(|r| r.value.clone()).unwrap_or_default(),
                deleted: latest.is_none_or(|r| r.deleted),
                lease: latest.map_or(0, |r| r.lease),
                stamp: Some(index.stamp.into()),
            }
        };
        let full = |changes: &[pb::Change], bytes: usize| {
            changes.len() >= limit.max(1) || bytes >= max_bytes
        };
        let mut changes = Vec::new();
        let mut bytes = 0;
        if since < self.compacted || !resume_key.is_empty() {
            let after = (Bound::Excluded(resume_key), Bound::Unbounded);
            for (key, index) in self.keys.range::<[u8], _>(after) {
                if full(&changes, bytes) {
                    let resume_key = changes
                        .last()
                        .map_or_else(Vec::new, |c: &pb::Change| c.key.clone());
                    return pb::PullResponse {
                        changes,
                        next: self.revision,
                        more: true,
                        incarnation: 0,
                        resume_key,
                    };
                }
                let change = change(key, index);
                bytes += change.key.len() + change.value.len();
                changes.push(change);
            }
            return pb::PullResponse {
                changes,
                next: self.revision,
                more: false,
                incarnation: 0,
                resume_key: Vec::new(),
            };
        }
        let mut seen = BTreeSet::new();
        let from = Rev {
            main: since + 1,
            sub: 0,
        };
        let mut last = since;
        for (rev, record) in self.records.range(from..) {
            if full(&changes, bytes) && rev.main != last {
                return pb::PullResponse {
                    changes,
                    next: last,
                    more: true,
                    incarnation: 0,
                    resume_key: Vec::new(),
                };
            }
            last = rev.main;
            if seen.insert(record.key.as_slice()) {
                let change = change(&record.key, &self.keys[&record.key]);
                bytes += change.key.len() + change.value.len();
                changes.push(change);
            }
        }
        pb::PullResponse {
            changes,
            next: self.revision,
            more: false,
            incarnation: 0,
            resume_key: Vec::new(),
        }
    }

    /// Merges changes pulled from a peer: each is applied if its stamp beats the key's, all
    /// at one new revision.
    pub fn merge(&mut self, changes: Vec<pb::Change>) -> Applied {
        let mut applied = Applied::default();
        let mut sub = 0;
        for change in changes {
            let stamp: Stamp = change.stamp.unwrap_or_default().into();
            self.clock.observe(stamp);
            let ours = self.keys.get(&change.key).map(|i| i.stamp);
            if ours.is_some_and(|ours| ours >= stamp) {
                continue;
            }
            let live = self.current(&change.key).is_some();
            if change.deleted && !live {
                // Nothing to delete here, but remember the stamp so an older write stays out.
                applied.stamps.push((change.key.clone(), stamp));
                self.keys.entry(change.key).or_default().stamp = stamp;
                continue;
            }
            let write = Write {
                value: change.value,
                lease: change.lease,
                deleted: change.deleted,
                stamp,
            };
            self.write(change.key, write, &mut sub, &mut applied);
        }
        if sub > 0 {
            self.revision += 1;
        }
        applied
    }

    /// Every live key and value with its stamp, in key order: what replicas compare to prove
    /// they converged.
    pub fn digest(&self) -> Vec<(Vec<u8>, Vec<u8>, Stamp)> {
        self.keys
            .iter()
            .filter_map(|(key, index)| {
                let rev = index.revs.last()?;
                let record = &self.records[rev];
                (!record.deleted).then(|| (key.clone(), record.value.clone(), index.stamp))
            })
            .collect()
    }
}

fn kv_of(rev: Rev, record: &Record) -> PbKeyValue {
    PbKeyValue {
        key: record.key.clone(),
        create_revision: record.create_revision,
        mod_revision: rev.main,
        version: record.version,
        value: record.value.clone(),
        lease: record.lease,
    }
}

/// Sorts as etcd does (`RangeRequest.SortOrder` and `SortTarget`, as etcd numbers them): a
/// target other than the key with no order means ascending. Ties keep key order, as etcd's
/// sort does for the dozen keys it sorts without reordering ties.
fn sort(kvs: &mut [PbKeyValue], order: i32, target: i32) {
    const KEY: i32 = 0;
    if order == SORT_NONE && target == KEY {
        return;
    }
    let by = |a: &PbKeyValue, b: &PbKeyValue| match target {
        1 => a.version.cmp(&b.version),
        2 => a.create_revision.cmp(&b.create_revision),
        3 => a.mod_revision.cmp(&b.mod_revision),
        4 => a.value.cmp(&b.value),
        _ => a.key.cmp(&b.key),
    };
    match order {
        SORT_DESCEND => kvs.sort_by(|a, b| by(b, a)),
        _ => kvs.sort_by(by),
    }
}

/// One key against one compare (`Compare.CompareResult` as etcd numbers it). A target or a
/// result etcd does not define behaves as on etcd: the target compares as equal, the result
/// holds.
fn compare_one(kv: &PbKeyValue, c: &PbCompare) -> bool {
    use std::cmp::Ordering;
    let ord = match (PbCompareTarget::try_from(c.target), &c.target_union) {
        (Ok(PbCompareTarget::Version), Some(PbTargetUnion::Version(v))) => kv.version.cmp(v),
        (Ok(PbCompareTarget::Create), Some(PbTargetUnion::CreateRevision(v))) => {
            kv.create_revision.cmp(v)
        }
        (Ok(PbCompareTarget::Mod), Some(PbTargetUnion::ModRevision(v))) => kv.mod_revision.cmp(v),
        (Ok(PbCompareTarget::Value), Some(PbTargetUnion::Value(v))) => kv.value.as_slice().cmp(v),
        (Ok(PbCompareTarget::Lease), Some(PbTargetUnion::Lease(v))) => kv.lease.cmp(v),
        // A target without its value compares against the zero value.
        (Ok(PbCompareTarget::Value), _) => kv.value.as_slice().cmp(&[][..]),
        (Ok(PbCompareTarget::Version), _) => kv.version.cmp(&0),
        (Ok(PbCompareTarget::Create), _) => kv.create_revision.cmp(&0),
        (Ok(PbCompareTarget::Mod), _) => kv.mod_revision.cmp(&0),
        (Ok(PbCompareTarget::Lease), _) => kv.lease.cmp(&0),
        (Err(_), _) => Ordering::Equal,
    };
    match c.result {
        0 => ord == Ordering::Equal,
        1 => ord == Ordering::Greater,
        2 => ord == Ordering::Less,
        3 => ord != Ordering::Equal,
        _ => true,
    }
}

/// Which branch a transaction takes, and the nested transactions of that branch, in order:
/// decided from the state before the transaction, as etcd does.
#[derive(Debug)]
struct Branches {
    succeeded: bool,
    nested: Vec<Branches>,
}

/// The operations of the branch a transaction takes.
fn taken(req: &PbTxnRequest, succeeded: bool) -> &[PbTxnRequestOp] {
    match succeeded {
        true => &req.success,
        false => &req.failure,
    }
}

/// What etcd rejects in a range before reading: no key, an order or target it does not define.
fn check_range(r: &PbRangeRequest) -> Result<(), StoreError> {
    if r.key.is_empty() {
        return Err(StoreError::EmptyKey);
    }
    if !(0..=SORT_DESCEND).contains(&r.sort_order) || !(0..=4).contains(&r.sort_target) {
        return Err(StoreError::InvalidSortOption);
    }
    Ok(())
}

/// What etcd rejects in a put before looking at the store.
fn check_put(p: &PbPutRequest) -> Result<(), StoreError> {
    if p.key.is_empty() {
        return Err(StoreError::EmptyKey);
    }
    if p.ignore_value && !p.value.is_empty() {
        return Err(StoreError::ValueProvided);
    }
    if p.ignore_lease && p.lease != 0 {
        return Err(StoreError::LeaseProvided);
    }
    Ok(())
}

/// What etcd rejects in a transaction before looking at the store, both branches, nested
/// transactions included: more than `max_ops` compares or operations in a branch (a nested
/// transaction may use what its parent's largest list left), a request without a key, an
/// operation that is none of range, put, delete or txn.
fn check_txn(req: &PbTxnRequest, max_ops: usize) -> Result<(), StoreError> {
    let ops = req
        .compare
        .len()
        .max(req.success.len())
        .max(req.failure.len());
    if ops > max_ops {
        return Err(StoreError::TooManyOps);
    }
    if req.compare.iter().any(|c| c.key.is_empty()) {
        return Err(StoreError::EmptyKey);
    }
    for op in req.success.iter().chain(&req.failure) {
        match &op.request {
            Some(PbTxnOpRequest::RequestRange(r)) => check_range(r)?,
            Some(PbTxnOpRequest::RequestPut(p)) => check_put(p)?,
            Some(PbTxnOpRequest::RequestDeleteRange(d)) if d.key.is_empty() => {
                return Err(StoreError::EmptyKey);
            }
            Some(PbTxnOpRequest::RequestDeleteRange(_)) => {}
            Some(PbTxnOpRequest::RequestTxn(t)) => check_txn(t, max_ops - ops)?,
            // etcd's answer to an empty operation.
            None => return Err(StoreError::KeyNotFound),
        }
    }
    Ok(())
}

/// The keys a delete in a transaction covers, for etcd's duplicate check: one key, or
/// `[key, range_end)` compared byte by byte, so that there "from key" (`range_end` "\0")
/// covers no key.
struct Deleted<'a> {
    key: &'a [u8],
    end: &'a [u8],
}

impl Deleted<'_> {
    fn covers(&self, key: &[u8]) -> bool {
        match self.end {
            [] => key == self.key,
            end => self.key <= key && key < end,
        }
    }
}

/// The keys a branch puts and what it deletes, nested transactions included, or
/// `DuplicateKey` where etcd finds a key written twice: a put of a key another put of the
/// branch writes (the two branches of one nested transaction exclude each other) or a delete
/// covers. Deletes may overlap each other, and a nested transaction's delete does not count
/// against puts of nested transactions before it.
fn written(ops: &[PbTxnRequestOp]) -> Result<(BTreeSet<&[u8]>, Vec<Deleted<'_>>), StoreError> {
    let mut deletes: Vec<Deleted> = ops
        .iter()
        .filter_map(|op| match &op.request {
            Some(PbTxnOpRequest::RequestDeleteRange(d)) => Some(Deleted {
                key: &d.key,
                end: &d.range_end,
            }),
            _ => None,
        })
        .collect();
    let mut puts = BTreeSet::new();
    let covered = |deletes: &[Deleted], key: &[u8]| deletes.iter().any(|d| d.covers(key));
    for op in ops {
        let Some(PbTxnOpRequest::RequestTxn(t)) = &op.request else {
            continue;
        };
        let (puts_then, deletes_then) = written(&t.success)?;
        let (puts_else, deletes_else) = written(&t.failure)?;
        for key in &puts_then {
            if puts.contains(key) || covered(&deletes, key) {
                return Err(StoreError::DuplicateKey);
            }
            puts.insert(*key);
        }
        for key in &puts_else {
            if (puts.contains(key) && !puts_then.contains(key)) || covered(&deletes, key) {
                return Err(StoreError::DuplicateKey);
            }
            puts.insert(*key);
        }
        deletes.extend(deletes_then);
        deletes.extend(deletes_else);
    }
    for op in ops {
        if let Some(PbTxnOpRequest::RequestPut(p)) = &op.request {
            if puts.contains(p.key.as_slice()) || covered(&deletes, &p.key) {
                return Err(StoreError::DuplicateKey);
            }
            puts.insert(&p.key);
        }
    }
    Ok((puts, deletes))
}

/// Where a replica is in pulling one peer: the revision of the peer it has everything up to,
/// in which incarnation of the peer, and, while it pages through the peer's whole state, the
/// last key it got and the revision that paging started at.
#[derive(Clone, Debug, Default)]
pub struct PullCursor {
    since: i64,
    incarnation: u64,
    paging: Option<(Vec<u8>, i64)>,
}

impl PullCursor {
    /// The next request to the peer, from `replica`, for about `limit` keys and `max_bytes`.
    pub fn request(&self, replica: u64, limit: u32, max_bytes: u32) -> pb::PullRequest {
        pb::PullRequest {
            replica,
            since: self.since,
            limit,
            incarnation: self.incarnation,
            resume_key: self
                .paging
                .as_ref()
                .map_or_else(Vec::new, |(k, _)| k.clone()),
            max_bytes,
        }
    }

    /// Takes the peer's answer to the last request; returns its changes, to merge.
    pub fn advance(&mut self, resp: pb::PullResponse) -> Vec<pb::Change> {
        if resp.incarnation != self.incarnation {
            // The peer restarted (or this is the first answer): the peer started over, and
            // any paging state belongs to its earlier run.
            self.paging = None;
            self.incarnation = resp.incarnation;
        }
        if !resp.resume_key.is_empty() {
            let started = self
                .paging
                .as_ref()
                .map_or(resp.next, |(_, started)| *started);
            self.paging = Some((resp.resume_key, started));
        } else if let Some((_, started)) = self.paging.take() {
            // Writes made while paging carry revisions after the first page's.
            self.since = started;
        } else {
            self.since = resp.next;
        }
        resp.changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn op(request: PbTxnOpRequest) -> PbTxnRequestOp {
        PbTxnRequestOp {
            request: Some(request),
        }
    }

    fn put(e: &mut Engine, key: &str, value: &str) -> PbPutResponse {
        let req = PbPutRequest {
            key: key.into(),
            value: value.into(),
            prev_kv: true,
            ..PbPutRequest::default()
        };
        e.put(req, 1000).expect("put").0
    }

    fn get(e: &Engine, key: &str, revision: i64) -> Result<PbRangeResponse, StoreError> {
        e.range(&PbRangeRequest {
            key: key.into(),
            revision,
            ..PbRangeRequest::default()
        })
    }

    fn value(e: &Engine, key: &str) -> Option<Vec<u8>> {
        let resp = get(e, key, 0).expect("range");
        resp.kvs.into_iter().next().map(|kv| kv.value)
    }

    fn put_op(key: &str, value: &str) -> PbTxnRequestOp {
        op(PbTxnOpRequest::RequestPut(PbPutRequest {
            key: key.into(),
            value: value.into(),
            ..PbPutRequest::default()
        }))
    }

    fn delete_op(key: &str, range_end: &str) -> PbTxnRequestOp {
        op(PbTxnOpRequest::RequestDeleteRange(PbDeleteRequest {
            key: key.into(),
            range_end: range_end.into(),
            ..PbDeleteRequest::default()
        }))
    }

    fn range_op(req: PbRangeRequest) -> PbTxnRequestOp {
        op(PbTxnOpRequest::RequestRange(req))
    }

    fn txn_op(compare: Vec<PbCompare>, success: Vec<PbTxnRequestOp>) -> PbTxnRequestOp {
        op(PbTxnOpRequest::RequestTxn(PbTxnRequest {
            compare,
            success,
            failure: Vec::new(),
        }))
    }

    fn then(success: Vec<PbTxnRequestOp>) -> PbTxnRequest {
        PbTxnRequest {
            success,
            ..PbTxnRequest::default()
        }
    }

    fn version_is(key: &str, version: i64) -> PbCompare {
        PbCompare {
            result: 0,
            target: PbCompareTarget::Version as i32,
            key: key.into(),
            target_union: Some(PbTargetUnion::Version(version)),
            range_end: Vec::new(),
        }
    }

    /// A nested compare was evaluated after the operations before it had run, so it saw the
    /// transaction's own writes; etcd evaluates every compare against the state the
    /// transaction starts from (ranges still see the writes before them).
    #[test]
    fn nested_compares_see_the_state_before_the_txn() {
        let mut e = Engine::new(1);
        let req = then(vec![
            put_op("n", "1"),
            txn_op(
                vec![version_is("n", 0)],
                vec![
                    put_op("inner", "then"),
                    range_op(PbRangeRequest {
                        key: "n".into(),
                        ..PbRangeRequest::default()
                    }),
                ],
            ),
        ]);
        let (resp, _) = e.txn(req, 1000).unwrap();
        let Some(PbTxnOpResponse::ResponseTxn(inner)) = &resp.responses[1].response else {
            panic!("a txn answers a txn")
        };
        assert!(inner.succeeded);
        let Some(PbTxnOpResponse::ResponseRange(seen)) = &inner.responses[1].response else {
            panic!("a range answers a range")
        };
        assert_eq!(seen.kvs[0].value, b"1");
        assert_eq!(value(&e, "inner").as_deref(), Some(&b"then"[..]));
    }

    /// An unknown lease or a missing key for `ignore_value` anywhere in a transaction failed
    /// it; etcd checks the branches the transaction takes only, and also refuses a range in
    /// them at a revision it cannot read.
    #[test]
    fn txn_checks_follow_the_branches_taken() {
        let mut e = Engine::new(1);
        put(&mut e, "k", "v");
        let unknown_lease = op(PbTxnOpRequest::RequestPut(PbPutRequest {
            key: "x".into(),
            lease: 77,
            ..PbPutRequest::default()
        }));
        let req = PbTxnRequest {
            compare: vec![version_is("k", 1)],
            success: vec![put_op("x", "ok")],
            failure: vec![unknown_lease.clone()],
        };
        assert!(e.txn(req, 1000).unwrap().0.succeeded);
        assert_eq!(
            e.txn(then(vec![unknown_lease]), 1000).unwrap_err(),
            StoreError::LeaseNotFound
        );
        let at = |revision| {
            then(vec![range_op(PbRangeRequest {
                key: "k".into(),
                revision,
                ..PbRangeRequest::default()
            })])
        };
        assert_eq!(e.txn(at(9), 1000).unwrap_err(), StoreError::FutureRevision);
        e.compact(3).unwrap();
        assert_eq!(e.txn(at(2), 1000).unwrap_err(), StoreError::Compacted);
        assert!(e.txn(at(3), 1000).is_ok());
    }

    /// Only the top-level branch lengths were limited, the message carried the limit, and an
    /// empty operation or an unknown sort passed; etcd gives a nested transaction what its
    /// parent's longest list leaves, and refuses the others with its own errors.
    #[test]
    fn txn_limits_and_malformed_operations_are_refused_as_etcd() {
        let mut e = Engine::new(1);
        let puts = |n: usize, prefix: &str| -> Vec<PbTxnRequestOp> {
            (0..n)
                .map(|i| put_op(&format!("{prefix}{i}"), "v"))
                .collect()
        };
        let nested = |inner: usize| {
            let mut ops = puts(100, "outer/");
            ops.push(txn_op(Vec::new(), puts(inner, "inner/")));
            then(ops)
        };
        assert_eq!(e.txn(nested(28), 1000).unwrap_err(), StoreError::TooManyOps);
        assert!(e.txn(nested(27), 1000).is_ok());
        let empty = then(vec![PbTxnRequestOp { request: None }]);
        assert_eq!(e.txn(empty, 1000).unwrap_err(), StoreError::KeyNotFound);
        let bad_sort = PbRangeRequest {
            key: "k".into(),
            sort_target: 5,
            ..PbRangeRequest::default()
        };
        assert_eq!(
            e.range(&bad_sort).unwrap_err(),
            StoreError::InvalidSortOption
        );
        assert_eq!(
            e.txn(then(vec![range_op(bad_sort)]), 1000).unwrap_err(),
            StoreError::InvalidSortOption
        );
    }

    /// Duplicate keys were found by overlap in operation order; etcd's rules differ: puts in
    /// nested transactions count against later puts and deletes before them, the branches of
    /// one nested transaction exclude each other, a delete in a nested transaction does not
    /// count against puts of earlier nested transactions, and a "from key" delete covers no
    /// key at all.
    #[test]
    fn duplicate_keys_are_the_ones_etcd_finds() {
        let mut e = Engine::new(1);
        put(&mut e, "b", "1");
        let nested = |ops| txn_op(Vec::new(), ops);
        let duplicates = [
            vec![put_op("d", "1"), put_op("d", "2")],
            vec![put_op("d/x", "1"), delete_op("d/", "d0")],
            vec![delete_op("d/", "d0"), put_op("d/x", "1")],
            vec![nested(vec![put_op("d", "1")]), put_op("d", "2")],
            vec![put_op("d", "2"), nested(vec![put_op("d", "1")])],
            vec![nested(vec![delete_op("d", "")]), put_op("d", "2")],
            vec![
                nested(vec![delete_op("d", "")]),
                nested(vec![put_op("d", "1")]),
            ],
        ];
        for ops in duplicates {
            let dump = format!("{ops:?}");
            assert_eq!(
                e.txn(then(ops), 1000).unwrap_err(),
                StoreError::DuplicateKey,
                "{dump}"
            );
        }
        let either = op(PbTxnOpRequest::RequestTxn(PbTxnRequest {
            compare: Vec::new(),
            success: vec![put_op("d", "1")],
            failure: vec![put_op("d", "2")],
        }));
        let allowed = [
            vec![either],
            vec![delete_op("d", ""), delete_op("a", "z")],
            vec![
                nested(vec![put_op("d", "1")]),
                nested(vec![delete_op("d", "")]),
            ],
            vec![put_op("b", "2"), delete_op("a", "\0")],
        ];
        for ops in allowed {
            let dump = format!("{ops:?}");
            assert!(e.txn(then(ops), 1000).is_ok(), "{dump}");
        }
        assert!(
            value(&e, "b").is_none(),
            "the from-key delete ran after the put"
        );
    }

    /// Inside a transaction etcd's responses carry a header with the revision only, and a
    /// nested transaction's header is empty; they carried the member id, and the nested one
    /// a revision.
    #[test]
    fn headers_inside_a_txn_are_etcds() {
        let mut e = Engine::new(7);
        let req = then(vec![
            range_op(PbRangeRequest {
                key: "k".into(),
                ..PbRangeRequest::default()
            }),
            put_op("k", "v"),
            txn_op(Vec::new(), vec![put_op("j", "v")]),
        ]);
        let (resp, _) = e.txn(req, 1000).unwrap();
        assert_eq!(resp.header, Some(e.header()));
        let headers: Vec<Option<PbResponseHeader>> = resp
            .responses
            .iter()
            .map(|r| match &r.response {
                Some(PbTxnOpResponse::ResponseRange(r)) => r.header,
                Some(PbTxnOpResponse::ResponsePut(r)) => r.header,
                Some(PbTxnOpResponse::ResponseTxn(r)) => r.header,
                _ => None,
            })
            .collect();
        let revision = |revision| {
            Some(PbResponseHeader {
                revision,
                ..PbResponseHeader::default()
            })
        };
        assert_eq!(headers, [revision(1), revision(2), revision(0)]);
    }

    /// `count_only` with a limit reported more keys it did not return, and a sort target
    /// without an order sorted every key before the limit; etcd returns no `more` without
    /// keys, and sorts only the keys it read, one past the limit.
    #[test]
    fn count_only_and_unordered_sorts_limit_as_etcd() {
        let mut e = Engine::new(1);
        for (k, v) in [("a", "5"), ("b", "3"), ("c", "9"), ("d", "1")] {
            put(&mut e, k, v);
        }
        let all = |f: fn(&mut PbRangeRequest)| {
            let mut req = PbRangeRequest {
                key: vec![0],
                range_end: vec![0],
                limit: 2,
                ..PbRangeRequest::default()
            };
            f(&mut req);
            e.range(&req).unwrap()
        };
        let counted = all(|r| r.count_only = true);
        assert_eq!(
            (counted.count, counted.kvs.len(), counted.more),
            (4, 0, false)
        );
        let keys = |resp: PbRangeResponse| -> Vec<Vec<u8>> {
            resp.kvs.into_iter().map(|kv| kv.key).collect()
        };
        // By value without an order: a, b, c read, sorted 3, 5, 9, the first two kept.
        let unordered = all(|r| r.sort_target = 4);
        assert!(unordered.more);
        assert_eq!(keys(unordered), [b"b".to_vec(), b"a".to_vec()]);
        let ascending = all(|r| {
            r.sort_target = 4;
            r.sort_order = 1;
        });
        assert_eq!(keys(ascending), [b"d".to_vec(), b"b".to_vec()]);
    }

    /// The compaction point started at 0, so a first compaction to 0 failed, where etcd's
    /// starts below it; and a deletion at the compaction point was dropped, so a watch from
    /// there missed it.
    #[test]
    fn compaction_starts_below_zero_and_keeps_a_deletion_at_the_point() {
        let mut e = Engine::new(1);
        assert_eq!(e.compact(-1).unwrap_err(), StoreError::Compacted);
        assert!(e.compact(0).is_ok());
        assert_eq!(e.compact(0).unwrap_err(), StoreError::Compacted);
        put(&mut e, "k", "v");
        let del = PbDeleteRequest {
            key: "k".into(),
            ..PbDeleteRequest::default()
        };
        e.delete_range(del, 1000).unwrap();
        e.compact(3).unwrap();
        let events = e.events_after(2).unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!(events[0].r#type, EVENT_DELETE);
        put(&mut e, "j", "v");
        let dropped = e.compact(4).unwrap().compaction.unwrap().dropped;
        assert_eq!(dropped, [(3, 0)], "below the point the deletion goes");
    }

    /// An unknown compare target fell back to the version and an unknown result failed; on
    /// etcd the target compares as equal and the result holds.
    #[test]
    fn unknown_compare_targets_and_results_behave_as_on_etcd() {
        let mut e = Engine::new(1);
        put(&mut e, "k", "v");
        let compare = |target, result| PbCompare {
            result,
            target,
            key: "k".into(),
            target_union: Some(PbTargetUnion::Version(5)),
            range_end: Vec::new(),
        };
        let succeeds = |e: &mut Engine, c: PbCompare| {
            let req = PbTxnRequest {
                compare: vec![c],
                ..PbTxnRequest::default()
            };
            e.txn(req, 1000).unwrap().0.succeeded
        };
        assert!(succeeds(&mut e, compare(9, 0)));
        assert!(!succeeds(&mut e, compare(9, 3)));
        assert!(succeeds(
            &mut e,
            compare(PbCompareTarget::Version as i32, 9)
        ));
    }

    /// An event's `prev_kv` was the key as an earlier operation of the same transaction left
    /// it; etcd reads the key at the revision before, and gives a put that creates the key
    /// none.
    #[test]
    fn event_prev_kv_is_the_key_at_the_revision_before() {
        let mut e = Engine::new(1);
        put(&mut e, "a", "old");
        put(&mut e, "b", "old");
        // "b" is put, then deleted by the "from key" delete; "a" is deleted, then put again.
        let req = then(vec![put_op("b", "new"), nested_delete_then_put()]);
        let (_, applied) = e.txn(req, 1000).unwrap();
        let seen: Vec<(Vec<u8>, i32, Option<Vec<u8>>)> = applied
            .events
            .iter()
            .map(|ev| {
                let kv = ev.kv.clone().unwrap();
                (kv.key, ev.r#type, ev.prev_kv.clone().map(|p| p.value))
            })
            .collect();
        let old = Some(b"old".to_vec());
        assert_eq!(
            seen,
            [
                (b"b".to_vec(), EVENT_PUT, old.clone()),
                (b"a".to_vec(), EVENT_DELETE, old.clone()),
                (b"b".to_vec(), EVENT_DELETE, old),
                (b"a".to_vec(), EVENT_PUT, None),
            ]
        );
        let history: Vec<Option<PbKeyValue>> = e
            .events_after(3)
            .unwrap()
            .into_iter()
            .map(|ev| ev.prev_kv)
            .collect();
        let live: Vec<Option<PbKeyValue>> =
            applied.events.into_iter().map(|ev| ev.prev_kv).collect();
        assert_eq!(history, live, "history replays the same prev_kv");
    }

    /// A delete of every key from "a" (which etcd's duplicate check does not count), then a
    /// put of "a".
    fn nested_delete_then_put() -> PbTxnRequestOp {
        txn_op(Vec::new(), vec![delete_op("a", "\0"), put_op("a", "new")])
    }

    /// A put with an unknown lease and `ignore_value` on a missing key failed with
    /// `KeyNotFound`; etcd looks the lease up first. A negative lease id was refused; etcd
    /// picks an id for it as for 0.
    #[test]
    fn put_and_grant_checks_come_in_etcds_order() {
        let mut e = Engine::new(1);
        let req = PbPutRequest {
            key: "missing".into(),
            ignore_value: true,
            lease: 77,
            ..PbPutRequest::default()
        };
        assert_eq!(e.put(req, 1000).unwrap_err(), StoreError::LeaseNotFound);
        let ((id, ttl), _) = e.grant_lease(-5, 10, 0).unwrap();
        assert!(id > 0);
        assert_eq!(ttl, 10);
    }

    #[test]
    fn revisions_versions_and_history_follow_etcd() {
        let mut e = Engine::new(1);
        assert_eq!(e.revision(), 1);
        assert!(put(&mut e, "a", "1").prev_kv.is_none());
        let prev = put(&mut e, "a", "2").prev_kv.expect("prev_kv asked for");
        assert_eq!((prev.value.as_slice(), prev.mod_revision), (&b"1"[..], 2));
        let kv = &get(&e, "a", 0).unwrap().kvs[0];
        assert_eq!((kv.create_revision, kv.mod_revision, kv.version), (2, 3, 2));
        assert_eq!(get(&e, "a", 2).unwrap().kvs[0].value, b"1");
        let del = PbDeleteRequest {
            key: "a".into(),
            ..PbDeleteRequest::default()
        };
        assert_eq!(e.delete_range(del, 1000).unwrap().0.deleted, 1);
        assert_eq!(e.revision(), 4);
        assert!(value(&e, "a").is_none());
        put(&mut e, "a", "3");
        let kv = &get(&e, "a", 0).unwrap().kvs[0];
        assert_eq!((kv.create_revision, kv.version), (5, 1), "a new generation");
        assert_eq!(get(&e, "a", 9), Err(StoreError::FutureRevision));
    }

    #[test]
    fn compaction_drops_history_but_not_the_present() {
        let mut e = Engine::new(1);
        put(&mut e, "a", "1");
        put(&mut e, "a", "2");
        put(&mut e, "b", "1");
        let compaction = e.compact(3).unwrap().compaction.unwrap();
        // "a"@2 is below the point and superseded; "a"@3 and "b"@4 stay.
        assert_eq!(compaction.dropped, vec![(2, 0)]);
        assert_eq!(get(&e, "a", 2), Err(StoreError::Compacted));
        assert_eq!(get(&e, "a", 3).unwrap().kvs[0].value, b"2");
        assert_eq!(value(&e, "b").as_deref(), Some(&b"1"[..]));
        assert_eq!(e.compact(3).unwrap_err(), StoreError::Compacted);
        assert_eq!(e.events_after(0).unwrap_err(), StoreError::Compacted);
        assert_eq!(e.events_after(3).unwrap().len(), 1);
    }

    #[test]
    fn txn_compares_pick_the_branch_and_writes_share_a_revision() {
        let mut e = Engine::new(1);
        put(&mut e, "k", "v");
        let cas = |rev: i64| PbTxnRequest {
            compare: vec![PbCompare {
                result: 0,
                target: PbCompareTarget::Mod as i32,
                key: "k".into(),
                target_union: Some(PbTargetUnion::ModRevision(rev)),
                range_end: Vec::new(),
            }],
            success: vec![
                op(PbTxnOpRequest::RequestPut(PbPutRequest {
                    key: "k".into(),
                    value: "w".into(),
                    ..PbPutRequest::default()
                })),
                op(PbTxnOpRequest::RequestPut(PbPutRequest {
                    key: "other".into(),
                    ..PbPutRequest::default()
                })),
                op(PbTxnOpRequest::RequestRange(PbRangeRequest {
                    key: "k".into(),
                    ..PbRangeRequest::default()
                })),
            ],
            failure: Vec::new(),
        };
        let (stale, _) = e.txn(cas(1), 1000).unwrap();
        assert!(!stale.succeeded);
        assert_eq!(e.revision(), 2, "a failed compare writes nothing");
        let (fresh, applied) = e.txn(cas(2), 1000).unwrap();
        assert!(fresh.succeeded);
        assert_eq!(e.revision(), 3);
        assert_eq!(applied.events.len(), 2);
        let Some(PbTxnOpResponse::ResponseRange(seen)) = &fresh.responses[2].response else {
            panic!("a range answers a range")
        };
        assert_eq!(seen.kvs[0].value, b"w", "a range sees the writes before it");
        let dup = PbTxnRequest {
            success: vec![
                op(PbTxnOpRequest::RequestPut(PbPutRequest {
                    key: "x".into(),
                    ..PbPutRequest::default()
                })),
                op(PbTxnOpRequest::RequestDeleteRange(PbDeleteRequest {
                    key: "a".into(),
                    range_end: "z".into(),
                    ..PbDeleteRequest::default()
                })),
            ],
            ..PbTxnRequest::default()
        };
        assert_eq!(e.txn(dup, 1000).unwrap_err(), StoreError::DuplicateKey);
    }

    #[test]
    fn ranges_count_sort_limit_and_filter_as_etcd() {
        let mut e = Engine::new(1);
        for (k, v) in [("a", "3"), ("b", "1"), ("c", "2"), ("d", "0")] {
            put(&mut e, k, v);
        }
        let resp = e
            .range(&PbRangeRequest {
                key: "a".into(),
                range_end: "d".into(),
                limit: 2,
                sort_target: 4,
                sort_order: 2,
                ..PbRangeRequest::default()
            })
            .unwrap();
        let keys: Vec<&[u8]> = resp.kvs.iter().map(|kv| kv.key.as_slice()).collect();
        assert_eq!(keys, [&b"a"[..], b"c"]);
        assert!(resp.more);
        assert_eq!(resp.count, 3);
        let all = e
            .range(&PbRangeRequest {
                key: vec![0],
                range_end: vec![0],
                min_mod_revision: 4,
                keys_only: true,
                ..PbRangeRequest::default()
            })
            .unwrap();
        assert_eq!(
            all.count, 4,
            "count ignores the revision filters, as on etcd"
        );
        assert_eq!(all.kvs.len(), 2);
        assert!(all.kvs.iter().all(|kv| kv.value.is_empty()));
    }

    #[test]
    fn leases_delete_their_keys_when_revoked_or_expired() {
        let mut e = Engine::new(1);
        let ((id, ttl), _) = e.grant_lease(0, 5, 0).unwrap();
        assert_eq!(ttl, 5);
        let with_lease = |key: &str| PbPutRequest {
            key: key.into(),
            lease: id,
            ..PbPutRequest::default()
        };
        e.put(with_lease("a"), 0).unwrap();
        e.put(with_lease("b"), 0).unwrap();
        put(&mut e, "b", "no lease now");
        assert!(e.expire_leases(4_000).events.is_empty());
        assert_eq!(e.keep_alive(id, 4_000), Ok(5));
        let expired = e.expire_leases(9_000);
        assert_eq!(expired.events.len(), 1, "only `a` still has the lease");
        assert!(value(&e, "a").is_none());
        assert!(value(&e, "b").is_some());
        assert_eq!(
            e.revoke_lease(id, 9_000).unwrap_err(),
            StoreError::LeaseNotFound
        );
        let unknown = PbPutRequest {
            key: "c".into(),
            lease: 42,
            ..PbPutRequest::default()
        };
        assert_eq!(e.put(unknown, 0).unwrap_err(), StoreError::LeaseNotFound);
    }

    /// One replica's operation in a generated history.
    #[derive(Clone, Debug)]
    enum Op {
        Put { replica: usize, key: u8, value: u8 },
        Delete { replica: usize, key: u8 },
        Sync { from: usize, to: usize },
        Compact { replica: usize },
    }

    fn ops() -> impl Strategy<Value = Vec<Op>> {
        let op = prop_oneof![
            (0..3usize, 0..4u8, any::<u8>()).prop_map(|(replica, key, value)| Op::Put {
                replica,
                key,
                value
            }),
            (0..3usize, 0..4u8).prop_map(|(replica, key)| Op::Delete { replica, key }),
            (0..3usize, 0..3usize).prop_map(|(from, to)| Op::Sync { from, to }),
            (0..3usize).prop_map(|replica| Op::Compact { replica }),
        ];
        proptest::collection::vec(op, 0..60)
    }

    /// `to` pulls everything `from` has after `cursor`, in small pages.
    /// `to` pulls from `from` in small pages: one page, or until nothing is left. One page at
    /// a time lets writes and compactions land between the pages of a paged pull.
    fn pull(
        replicas: &mut [Engine],
        cursors: &mut [[PullCursor; 3]; 3],
        (from, to): (usize, usize),
        drain: bool,
    ) {
        if from == to {
            return;
        }
        loop {
            let req = cursors[to][from].request(0, 2, 3);
            let resp = replicas[from].changes_after(req.since, &req.resume_key, 2, 3);
            let more = resp.more;
            replicas[to].merge(cursors[to][from].advance(resp));
            if !(more && drain) {
                break;
            }
        }
    }

    proptest! {
        /// Whatever the interleaving of writes, pulls and compactions, replicas that have all
        /// pulled from each other hold the same keys and values, revisions never go back, and
        /// the last write to a key wins, deletions included.
        #[test]
        fn replicas_converge(ops in ops()) {
            let mut replicas: Vec<Engine> = (1..=3).map(Engine::new).collect();
            let mut cursors: [[PullCursor; 3]; 3] = Default::default();
            let mut wall = 1_000u64;
            let mut last_write: BTreeMap<u8, Option<u8>> = BTreeMap::new();
            for op in ops {
                wall += 1;
                let before: Vec<i64> = replicas.iter().map(Engine::revision).collect();
                match op {
                    Op::Put { replica, key, value } => {
                        let req = PbPutRequest { key: vec![key], value: vec![value], ..PbPutRequest::default() };
                        replicas[replica].put(req, wall).unwrap();
                        last_write.insert(key, Some(value));
                    }
                    Op::Delete { replica, key } => {
                        let req = PbDeleteRequest { key: vec![key], ..PbDeleteRequest::default() };
                        // A delete removes what its replica sees; a key it has not seen yet
                        // is not deleted, as on etcd.
                        if replicas[replica].delete_range(req, wall).unwrap().0.deleted > 0 {
                            last_write.insert(key, None);
                        }
                    }
                    Op::Sync { from, to } => pull(&mut replicas, &mut cursors, (from, to), false),
                    Op::Compact { replica } => {
                        let r = &mut replicas[replica];
                        let _ = r.compact(r.revision());
                    }
                }
                for (r, before) in replicas.iter().zip(before) {
                    prop_assert!(r.revision() >= before);
                }
            }
            for _ in 0..2 {
                for from in 0..3 {
                    for to in 0..3 {
                        pull(&mut replicas, &mut cursors, (from, to), true);
                    }
                }
            }
            let digest = replicas[0].digest();
            prop_assert_eq!(&digest, &replicas[1].digest());
            prop_assert_eq!(&digest, &replicas[2].digest());
            // With one wall clock and every write on a fresh tick, the last write wins.
            let live: BTreeMap<u8, u8> = digest.iter().map(|(k, v, _)| (k[0], v[0])).collect();
            let expected: BTreeMap<u8, u8> = last_write
                .into_iter()
                .filter_map(|(k, v)| v.map(|v| (k, v)))
                .collect();
            prop_assert_eq!(live, expected);
        }
    }
}
