//! The multi-version store under the engine: writing a record at the pending revision, what is
//! visible at a revision, compaction, and the watch events history replays (the index and the
//! records themselves are `index`'s).
//!
//! Invariants:
//! - A key's index lists its records' revisions in ascending order, and every one of them is in
//!   the history; a record is written at `revision + 1` (the pending revision) and the engine
//!   moves to it only once the whole request is written.
//! - A key's stamp is the stamp of the write that set its current state, deletions included. A
//!   deleted key keeps its index (empty once compacted) for that stamp, so a stale remote write
//!   cannot bring it back.
//! - Compaction keeps, for every key, its newest record at or below the compaction point (a
//!   deletion only if it is at the point), so reads at the point still see every live key.
//! - A lease's key set follows the keys whose current record carries it.

use super::index::{EVENT_DELETE, EVENT_PUT, KeyRange, Record, Rev, Write, kv_of};
use super::state::{Applied, Compaction, Engine};
use crate::clock::Stamp;
use crate::error::StoreError;
use etcd_client::proto::{
    PbDeleteRequest, PbDeleteResponse, PbEvent, PbKeyValue, PbPutRequest, PbPutResponse,
};

impl Engine {
    pub(super) fn apply_put(
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

    pub(super) fn apply_delete(
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
    pub(super) fn write(
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
    pub(super) fn current(&self, key: &[u8]) -> Option<(Rev, &Record)> {
        let rev = *self.keys.get(key)?.revs.last()?;
        let record = &self.records[&rev];
        (!record.deleted).then_some((rev, record))
    }

    /// The live keys in `range` as of revision `at`, in key order, with the revision of the
    /// record that set each.
    pub(super) fn visible<'a>(
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
    pub(super) fn event(&self, rev: Rev, record: &Record) -> PbEvent {
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
    pub(super) fn state_before(&self, key: &[u8], main: i64) -> Option<PbKeyValue> {
        let index = self.keys.get(key)?;
        let before = index.revs.iter().rev().find(|r| r.main < main)?;
        let record = &self.records[before];
        (!record.deleted).then(|| kv_of(*before, record))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::testing::*;
    use crate::error::StoreError;
    use etcd_client::proto::{PbDeleteRequest, PbKeyValue, PbTxnRequestOp};

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
}
