//! What etcd refuses in a request, with etcd's errors: the checks made before looking at the
//! store (a missing key, a bad sort, too many operations, a key written twice in one
//! transaction) and the ones that need its state (an unknown lease, `ignore_*` on a missing
//! key). A request is checked whole before anything is applied, so a refused request changes
//! nothing.

use super::range::SORT_DESCEND;
use super::state::Engine;
use crate::error::StoreError;
use etcd_client::proto::{
    PbPutRequest, PbRangeRequest, PbTxnOpRequest, PbTxnRequest, PbTxnRequestOp,
};
use std::collections::BTreeSet;

/// etcd's limit on operations in one transaction (`--max-txn-ops`).
pub const MAX_TXN_OPS: usize = 128;

impl Engine {
    /// `ignore_value` and `ignore_lease` need the key to exist.
    pub(super) fn check_ignores(&self, p: &PbPutRequest) -> Result<(), StoreError> {
        match (p.ignore_value || p.ignore_lease) && self.current(&p.key).is_none() {
            true => Err(StoreError::KeyNotFound),
            false => Ok(()),
        }
    }

    /// A put's lease must be granted here (0 is none).
    pub(super) fn check_lease(&self, lease: i64) -> Result<(), StoreError> {
        match lease != 0 && !self.leases.exists(lease) {
            true => Err(StoreError::LeaseNotFound),
            false => Ok(()),
        }
    }
}

/// What etcd rejects in a range before reading: no key, an order or target it does not define.
pub(super) fn check_range(r: &PbRangeRequest) -> Result<(), StoreError> {
    if r.key.is_empty() {
        return Err(StoreError::EmptyKey);
    }
    if !(0..=SORT_DESCEND).contains(&r.sort_order) || !(0..=4).contains(&r.sort_target) {
        return Err(StoreError::InvalidSortOption);
    }
    Ok(())
}

/// What etcd rejects in a put before looking at the store.
pub(super) fn check_put(p: &PbPutRequest) -> Result<(), StoreError> {
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
pub(super) fn check_txn(req: &PbTxnRequest, max_ops: usize) -> Result<(), StoreError> {
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
pub(super) struct Deleted<'a> {
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
pub(super) fn written(
    ops: &[PbTxnRequestOp],
) -> Result<(BTreeSet<&[u8]>, Vec<Deleted<'_>>), StoreError> {
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

#[cfg(test)]
mod tests {
    use crate::engine::Engine;
    use crate::engine::testing::*;
    use crate::error::StoreError;
    use etcd_client::proto::{
        PbPutRequest, PbRangeRequest, PbTxnOpRequest, PbTxnRequest, PbTxnRequestOp,
    };

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
}
