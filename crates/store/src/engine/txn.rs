//! Transactions as etcd runs them: every compare, nested ones included, is evaluated against
//! the state the transaction starts from, which fixes the branch each (nested) transaction takes
//! before anything runs; the operations of those branches are checked against that state too;
//! then they run in order, each range seeing the writes before it, every write at the one
//! pending revision.

use super::index::{KeyRange, kv_of};
use super::state::{Applied, Engine};
use crate::clock::Stamp;
use crate::error::StoreError;
use etcd_client::proto::{
    PbCompare, PbCompareTarget, PbKeyValue, PbResponseHeader, PbResponseOp, PbTargetUnion,
    PbTxnOpRequest, PbTxnOpResponse, PbTxnRequest, PbTxnRequestOp, PbTxnResponse,
};

impl Engine {
    /// The branch every transaction in `req` takes, decided before any of them runs.
    pub(super) fn branches(&self, req: &PbTxnRequest) -> Branches {
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
    pub(super) fn check_taken(
        &self,
        req: &PbTxnRequest,
        branches: &Branches,
    ) -> Result<(), StoreError> {
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

    pub(super) fn run_txn(
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
    pub(super) fn pending_header(&self, sub: u32) -> PbResponseHeader {
        PbResponseHeader {
            revision: self.revision + i64::from(sub > 0),
            ..PbResponseHeader::default()
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
pub(super) struct Branches {
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

#[cfg(test)]
mod tests {
    use crate::engine::Engine;
    use crate::engine::testing::*;
    use crate::error::StoreError;
    use etcd_client::proto::{
        PbCompare, PbCompareTarget, PbDeleteRequest, PbPutRequest, PbRangeRequest,
        PbResponseHeader, PbTargetUnion, PbTxnOpRequest, PbTxnOpResponse, PbTxnRequest,
    };

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
}
