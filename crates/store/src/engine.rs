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
    PbTargetUnion, PbTxnOpRequest, PbTxnOpResponse, PbTxnRequest, PbTxnResponse,
};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

/// etcd's limit on operations in one transaction (`--max-txn-ops`).
pub const MAX_TXN_OPS: usize = 128;

/// `mvccpb.Event.EventType`.
const EVENT_PUT: i32 = 0;
const EVENT_DELETE: i32 = 1;

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

    fn overlaps(&self, other: &KeyRange) -> bool {
        let (a_start, a_end) = (self.start.as_slice(), self.upper());
        let (b_start, b_end) = (other.start.as_slice(), other.upper());
        let below = |start: &[u8], end: &Option<Vec<u8>>| end.as_deref().is_none_or(|e| start < e);
        below(a_start, &b_end) && below(b_start, &a_end)
    }

    /// The exclusive upper bound, for overlap checks (a single key ends just after itself).
    fn upper(&self) -> Option<Vec<u8>> {
        match self.single {
            true => {
                let mut next = self.start.clone();
                next.push(0);
                Some(next)
            }
            false => self.end.clone(),
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
    /// The compaction point.
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
            compacted: 0,
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

    /// The revision history has been compacted to.
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
        if req.key.is_empty() {
            return Err(StoreError::EmptyKey);
        }
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
        let txn = PbTxnRequest {
            compare: Vec::new(),
            success: vec![op(PbTxnOpRequest::RequestPut(req))],
            failure: Vec::new(),
        };
        let (resp, applied) = self.txn(txn, wall_ms)?;
        match first_response(resp) {
            Some(PbTxnOpResponse::ResponsePut(mut put)) => {
                put.header = Some(self.header());
                Ok((put, applied))
            }
            _ => unreachable!("a put transaction answers with a put"),
        }
    }

    /// `KV.DeleteRange`.
    pub fn delete_range(
        &mut self,
        req: PbDeleteRequest,
        wall_ms: u64,
    ) -> Result<(PbDeleteResponse, Applied), StoreError> {
        let txn = PbTxnRequest {
            compare: Vec::new(),
            success: vec![op(PbTxnOpRequest::RequestDeleteRange(req))],
            failure: Vec::new(),
        };
        let (resp, applied) = self.txn(txn, wall_ms)?;
        match first_response(resp) {
            Some(PbTxnOpResponse::ResponseDeleteRange(mut del)) => {
                del.header = Some(self.header());
                Ok((del, applied))
            }
            _ => unreachable!("a delete transaction answers with a delete"),
        }
    }

    /// `KV.Txn`: the comparisons against the current state pick a branch, whose operations run
    /// in order, each seeing the writes before it, all at one new revision (none if nothing is
    /// written).
    pub fn txn(
        &mut self,
        req: PbTxnRequest,
        wall_ms: u64,
    ) -> Result<(PbTxnResponse, Applied), StoreError> {
        check_txn(&req, &self.leases)?;
        self.check_ignores(&req)?;
        let mut applied = Applied::default();
        let mut sub = 0;
        let stamp = self.clock.tick(wall_ms);
        let resp = self.run_txn(req, stamp, &mut sub, &mut applied);
        if sub > 0 {
            self.revision += 1;
        }
        Ok((resp, applied))
    }

    fn run_txn(
        &mut self,
        req: PbTxnRequest,
        stamp: Stamp,
        sub: &mut u32,
        applied: &mut Applied,
    ) -> PbTxnResponse {
        let succeeded = req.compare.iter().all(|c| self.compare(c));
        let branch = if succeeded { req.success } else { req.failure };
        let responses = branch
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
                        PbTxnOpResponse::ResponsePut(self.apply_put(p, stamp, sub, applied))
                    }
                    PbTxnOpRequest::RequestDeleteRange(d) => PbTxnOpResponse::ResponseDeleteRange(
                        self.apply_delete(d, stamp, sub, applied),
                    ),
                    PbTxnOpRequest::RequestTxn(t) => {
                        let mut resp = self.run_txn(t, stamp, sub, applied);
                        resp.header = Some(self.pending_header(*sub));
                        PbTxnOpResponse::ResponseTxn(resp)
                    }
                };
                PbResponseOp {
                    response: Some(response),
                }
            })
            .collect();
        PbTxnResponse {
            header: Some(self.pending_header(*sub)),
            succeeded,
            responses,
        }
    }

    /// The header a response inside a transaction carries: the revision the transaction will
    /// have once it is done.
    fn pending_header(&self, sub: u32) -> PbResponseHeader {
        let mut header = self.header();
        header.revision = self.revision + i64::from(sub > 0);
        header
    }

    /// A range at revision `at`, as etcd answers it: `count` is every key in the range, then
    /// the revision filters, the sort and the limit apply.
    fn range_at(&self, req: &PbRangeRequest, at: i64) -> PbRangeResponse {
        let range = KeyRange::new(&req.key, &req.range_end);
        let mut kvs: Vec<PbKeyValue> = self.visible(&range, at).collect();
        let count = kvs.len() as i64;
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
        let limit = usize::try_from(req.limit).unwrap_or(0);
        let more = limit > 0 && kvs.len() > limit;
        if limit > 0 {
            kvs.truncate(limit);
        }
        if req.count_only {
            kvs.clear();
        } else if req.keys_only {
            kvs.iter_mut().for_each(|kv| kv.value.clear());
        }
        PbRangeResponse {
            header: None,
            kvs,
            more,
            count,
        }
    }

    /// `ignore_value` and `ignore_lease` need the key to exist (etcd checks every branch).
    fn check_ignores(&self, req: &PbTxnRequest) -> Result<(), StoreError> {
        for op in req.success.iter().chain(&req.failure) {
            match &op.request {
                Some(PbTxnOpRequest::RequestPut(p))
                    if (p.ignore_value || p.ignore_lease) && self.current(&p.key).is_none() =>
                {
                    return Err(StoreError::KeyNotFound);
                }
                Some(PbTxnOpRequest::RequestTxn(t)) => self.check_ignores(t)?,
                _ => {}
            }
        }
        Ok(())
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
        let doomed: Vec<Vec<u8>> = self.visible(&range, i64::MAX).map(|kv| kv.key).collect();
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
        applied.events.push(PbEvent {
            r#type: if record.deleted {
                EVENT_DELETE
            } else {
                EVENT_PUT
            },
            kv: Some(match record.deleted {
                true => PbKeyValue {
                    key: key.clone(),
                    mod_revision: rev.main,
                    ..PbKeyValue::default()
                },
                false => kv_of(rev, &record),
            }),
            prev_kv: prev_kv.clone(),
        });
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

    /// The live keys in `range` as of revision `at`, in key order.
    fn visible<'a>(
        &'a self,
        range: &'a KeyRange,
        at: i64,
    ) -> impl Iterator<Item = PbKeyValue> + 'a {
        self.keys
            .range::<[u8], _>(range.bounds())
            .filter_map(move |(_, index)| {
                let rev = index.revs.iter().rev().find(|r| r.main <= at)?;
                let record = &self.records[rev];
                (!record.deleted).then(|| kv_of(*rev, record))
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
        let target = PbCompareTarget::try_from(c.target).unwrap_or(PbCompareTarget::Version);
        let kvs: Vec<PbKeyValue> = self.visible(&range, i64::MAX).collect();
        if kvs.is_empty() {
            // As on etcd: no key compares as a key of zero values, except that a value
            // comparison with no key is false.
            return target != PbCompareTarget::Value
                && compare_one(&PbKeyValue::default(), target, c);
        }
        kvs.iter().all(|kv| compare_one(kv, target, c))
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
            // Keep the newest record at or below the compaction point, unless it is a deletion.
            let keep_from = index.revs.iter().rposition(|r| r.main <= revision);
            let Some(keep_from) = keep_from else { continue };
            let drop_to = match self.records[&index.revs[keep_from]].deleted {
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
            .map(|(rev, record)| {
                let prev = self.previous(&record.key, *rev);
                PbEvent {
                    r#type: if record.deleted {
                        EVENT_DELETE
                    } else {
                        EVENT_PUT
                    },
                    kv: Some(match record.deleted {
                        true => PbKeyValue {
                            key: record.key.clone(),
                            mod_revision: rev.main,
                            ..PbKeyValue::default()
                        },
                        false => kv_of(*rev, record),
                    }),
                    prev_kv: prev,
                }
            })
            .collect())
    }

    /// The key's live state just before `rev`, if history still has it.
    fn previous(&self, key: &[u8], rev: Rev) -> Option<PbKeyValue> {
        let index = self.keys.get(key)?;
        let before = index.revs.iter().rev().find(|r| **r < rev)?;
        let record = &self.records[before];
        (!record.deleted).then(|| kv_of(*before, record))
    }

    /// Grants lease `id` (0 picks one) for `ttl` seconds at `now_ms`.
    /// Returns the id and the TTL granted.
    pub fn grant_lease(
        &mut self,
        id: i64,
        ttl: i64,
        now_ms: u64,
    ) -> Result<((i64, i64), Applied), StoreError> {
        let id = match id {
            0 => self.leases.next_id(self.replica),
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

    /// The current state of every key written after revision `since`, oldest first, about
    /// `limit` of them (whole revisions only), the revision to pass next time, and whether more
    /// are waiting: what a peer pulls. Below the compaction point history is gone, so a peer
    /// that far behind gets every key's current state, deletions included, in one answer.
    pub fn changes_after(&self, since: i64, limit: usize) -> (Vec<pb::Change>, i64, bool) {
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
        if since < self.compacted {
            let all = self.keys.iter().map(|(key, index)| change(key, index));
            return (all.collect(), self.revision, false);
        }
        let mut changes = Vec::new();
        let mut seen = BTreeSet::new();
        let from = Rev {
            main: since + 1,
            sub: 0,
        };
        let mut last = since;
        for (rev, record) in self.records.range(from..) {
            if changes.len() >= limit && rev.main != last {
                return (changes, last, true);
            }
            last = rev.main;
            if seen.insert(record.key.as_slice()) {
                changes.push(change(&record.key, &self.keys[&record.key]));
            }
        }
        (changes, self.revision, false)
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

fn op(request: PbTxnOpRequest) -> etcd_client::proto::PbTxnRequestOp {
    etcd_client::proto::PbTxnRequestOp {
        request: Some(request),
    }
}

fn first_response(resp: PbTxnResponse) -> Option<PbTxnOpResponse> {
    resp.responses.into_iter().next()?.response
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
/// target other than the key with no order means ascending. Ties keep key order.
fn sort(kvs: &mut [PbKeyValue], order: i32, target: i32) {
    const NONE: i32 = 0;
    const DESCEND: i32 = 2;
    const KEY: i32 = 0;
    if order == NONE && target == KEY {
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
        DESCEND => kvs.sort_by(|a, b| by(b, a)),
        _ => kvs.sort_by(by),
    }
}

/// `Compare.CompareResult`, as etcd numbers it.
fn compare_one(kv: &PbKeyValue, target: PbCompareTarget, c: &PbCompare) -> bool {
    use std::cmp::Ordering;
    let ord = match (target, &c.target_union) {
        (PbCompareTarget::Version, Some(PbTargetUnion::Version(v))) => kv.version.cmp(v),
        (PbCompareTarget::Create, Some(PbTargetUnion::CreateRevision(v))) => {
            kv.create_revision.cmp(v)
        }
        (PbCompareTarget::Mod, Some(PbTargetUnion::ModRevision(v))) => kv.mod_revision.cmp(v),
        (PbCompareTarget::Value, Some(PbTargetUnion::Value(v))) => kv.value.as_slice().cmp(v),
        (PbCompareTarget::Lease, Some(PbTargetUnion::Lease(v))) => kv.lease.cmp(v),
        // A target without its value compares against the zero value.
        (PbCompareTarget::Value, _) => kv.value.as_slice().cmp(&[][..]),
        (PbCompareTarget::Version, _) => kv.version.cmp(&0),
        (PbCompareTarget::Create, _) => kv.create_revision.cmp(&0),
        (PbCompareTarget::Mod, _) => kv.mod_revision.cmp(&0),
        (PbCompareTarget::Lease, _) => kv.lease.cmp(&0),
    };
    match c.result {
        0 => ord == Ordering::Equal,
        1 => ord == Ordering::Greater,
        2 => ord == Ordering::Less,
        3 => ord != Ordering::Equal,
        _ => false,
    }
}

/// Rejects what etcd rejects before running a transaction: too many operations, missing
/// keys, a key written twice, value or lease given with `ignore_*`, an unknown lease.
fn check_txn(req: &PbTxnRequest, leases: &Leases) -> Result<(), StoreError> {
    if req.compare.len() > MAX_TXN_OPS
        || req.success.len() > MAX_TXN_OPS
        || req.failure.len() > MAX_TXN_OPS
    {
        return Err(StoreError::TooManyOps { limit: MAX_TXN_OPS });
    }
    if req.compare.iter().any(|c| c.key.is_empty()) {
        return Err(StoreError::EmptyKey);
    }
    for branch in [&req.success, &req.failure] {
        let mut puts: Vec<KeyRange> = Vec::new();
        let mut deletes: Vec<KeyRange> = Vec::new();
        check_branch(branch, leases, &mut puts, &mut deletes)?;
    }
    Ok(())
}

fn check_branch(
    ops: &[etcd_client::proto::PbTxnRequestOp],
    leases: &Leases,
    puts: &mut Vec<KeyRange>,
    deletes: &mut Vec<KeyRange>,
) -> Result<(), StoreError> {
    for op in ops {
        match &op.request {
            Some(PbTxnOpRequest::RequestRange(r)) if r.key.is_empty() => {
                return Err(StoreError::EmptyKey);
            }
            Some(PbTxnOpRequest::RequestPut(p)) => {
                if p.key.is_empty() {
                    return Err(StoreError::EmptyKey);
                }
                if p.ignore_value && !p.value.is_empty() {
                    return Err(StoreError::ValueProvided);
                }
                if p.ignore_lease && p.lease != 0 {
                    return Err(StoreError::LeaseProvided);
                }
                if p.lease != 0 && !leases.exists(p.lease) {
                    return Err(StoreError::LeaseNotFound);
                }
                let key = KeyRange::new(&p.key, &[]);
                if puts.contains(&key) || deletes.iter().any(|d| d.overlaps(&key)) {
                    return Err(StoreError::DuplicateKey);
                }
                puts.push(key);
            }
            Some(PbTxnOpRequest::RequestDeleteRange(d)) => {
                if d.key.is_empty() {
                    return Err(StoreError::EmptyKey);
                }
                let range = KeyRange::new(&d.key, &d.range_end);
                if puts.iter().any(|p| p.overlaps(&range)) {
                    return Err(StoreError::DuplicateKey);
                }
                deletes.push(range);
            }
            Some(PbTxnOpRequest::RequestTxn(t)) => {
                if t.compare.iter().any(|c| c.key.is_empty()) {
                    return Err(StoreError::EmptyKey);
                }
                for branch in [&t.success, &t.failure] {
                    let (mut p, mut d) = (puts.clone(), deletes.clone());
                    check_branch(branch, leases, &mut p, &mut d)?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
    fn pull(replicas: &mut [Engine], cursors: &mut [[i64; 3]; 3], from: usize, to: usize) {
        if from == to {
            return;
        }
        loop {
            let (changes, next, more) = replicas[from].changes_after(cursors[to][from], 2);
            replicas[to].merge(changes);
            cursors[to][from] = next;
            if !more {
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
            let mut cursors = [[0i64; 3]; 3];
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
                    Op::Sync { from, to } => pull(&mut replicas, &mut cursors, from, to),
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
                        pull(&mut replicas, &mut cursors, from, to);
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
