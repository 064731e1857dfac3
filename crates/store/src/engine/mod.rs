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
//! - An engine method either makes its whole change or refuses before making any.
//!
//! This module rebuilds the engine's state from disk and runs the KV requests (Range, Put,
//! DeleteRange, Txn), each checked as etcd checks it and then applied at the next revision. The
//! rest is split by concern, each part adding methods to [`Engine`]:
//!
//! - `state`: the engine's fields, and what a change reports.
//! - `index`: the key index and the records of the history.
//! - `validate`: what etcd refuses in a request, and its limits.
//! - `mvcc`: writing a record, what is visible at a revision, compaction, the events a watch
//!   replays.
//! - `range`: reading a range at a revision as etcd answers it.
//! - `txn`: transactions: compares, the branches taken, running their operations.
//! - `leases`: granting, renewing, revoking and expiring leases, deleting their keys.
//! - `replication`: what a peer pulls, merging what was pulled, the puller's cursor.

mod index;
mod leases;
mod mvcc;
mod range;
mod replication;
mod state;
#[cfg(test)]
mod testing;
mod txn;
mod validate;

pub use index::KeyRange;
pub use replication::PullCursor;
pub use state::{Applied, Compaction, Engine, NEVER_COMPACTED, Restored};
pub use validate::MAX_TXN_OPS;

use crate::clock::{Clock, Stamp};
use crate::error::StoreError;
use crate::lease::Leases;
use etcd_client::proto::{
    PbDeleteRequest, PbDeleteResponse, PbPutRequest, PbPutResponse, PbRangeRequest,
    PbRangeResponse, PbResponseHeader, PbTxnRequest, PbTxnResponse,
};
use index::{EVENT_DELETE, Record, Rev};
use std::collections::BTreeMap;
use validate::{check_put, check_range, check_txn, written};

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
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::testing::*;
    use etcd_client::proto::PbDeleteRequest;

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
}
