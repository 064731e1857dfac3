//! Requests built from strings, for the engine's unit tests.

use super::state::Engine;
use crate::error::StoreError;
use etcd_client::proto::{
    PbCompare, PbCompareTarget, PbDeleteRequest, PbPutRequest, PbPutResponse, PbRangeRequest,
    PbRangeResponse, PbTargetUnion, PbTxnOpRequest, PbTxnRequest, PbTxnRequestOp,
};

pub(super) fn op(request: PbTxnOpRequest) -> PbTxnRequestOp {
    PbTxnRequestOp {
        request: Some(request),
    }
}

pub(super) fn put(e: &mut Engine, key: &str, value: &str) -> PbPutResponse {
    let req = PbPutRequest {
        key: key.into(),
        value: value.into(),
        prev_kv: true,
        ..PbPutRequest::default()
    };
    e.put(req, 1000).expect("put").0
}

pub(super) fn get(e: &Engine, key: &str, revision: i64) -> Result<PbRangeResponse, StoreError> {
    e.range(&PbRangeRequest {
        key: key.into(),
        revision,
        ..PbRangeRequest::default()
    })
}

pub(super) fn value(e: &Engine, key: &str) -> Option<Vec<u8>> {
    let resp = get(e, key, 0).expect("range");
    resp.kvs.into_iter().next().map(|kv| kv.value)
}

pub(super) fn put_op(key: &str, value: &str) -> PbTxnRequestOp {
    op(PbTxnOpRequest::RequestPut(PbPutRequest {
        key: key.into(),
        value: value.into(),
        ..PbPutRequest::default()
    }))
}

pub(super) fn delete_op(key: &str, range_end: &str) -> PbTxnRequestOp {
    op(PbTxnOpRequest::RequestDeleteRange(PbDeleteRequest {
        key: key.into(),
        range_end: range_end.into(),
        ..PbDeleteRequest::default()
    }))
}

pub(super) fn range_op(req: PbRangeRequest) -> PbTxnRequestOp {
    op(PbTxnOpRequest::RequestRange(req))
}

pub(super) fn txn_op(compare: Vec<PbCompare>, success: Vec<PbTxnRequestOp>) -> PbTxnRequestOp {
    op(PbTxnOpRequest::RequestTxn(PbTxnRequest {
        compare,
        success,
        failure: Vec::new(),
    }))
}

pub(super) fn then(success: Vec<PbTxnRequestOp>) -> PbTxnRequest {
    PbTxnRequest {
        success,
        ..PbTxnRequest::default()
    }
}

pub(super) fn version_is(key: &str, version: i64) -> PbCompare {
    PbCompare {
        result: 0,
        target: PbCompareTarget::Version as i32,
        key: key.into(),
        target_union: Some(PbTargetUnion::Version(version)),
        range_end: Vec::new(),
    }
}
