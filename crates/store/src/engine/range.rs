//! Reading a range at a revision as etcd answers `Range`: which revision a request may read,
//! then every live key in the range counted, filtered by revision, sorted and limited in etcd's
//! order of steps. Reads change nothing.

use super::index::{KeyRange, kv_of};
use super::state::Engine;
use crate::error::StoreError;
use etcd_client::proto::{PbKeyValue, PbRangeRequest, PbRangeResponse};

/// `RangeRequest.SortOrder`: none (key order), and descending, the last one.
const SORT_NONE: i32 = 0;
pub(super) const SORT_DESCEND: i32 = 2;

impl Engine {
    /// A range at revision `at`, as etcd answers it: `count` is every key in the range, then
    /// the revision filters, the sort and the limit apply. Without an order or filters etcd
    /// reads only one key past the limit (to know whether there are more) and sorts only those,
    /// so a sort target without an order applies to the first keys, not to all of them.
    pub(super) fn range_at(&self, req: &PbRangeRequest, at: i64) -> PbRangeResponse {
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

    pub(super) fn read_revision(&self, revision: i64) -> Result<i64, StoreError> {
        match revision {
            r if r <= 0 => Ok(self.revision),
            r if r > self.revision => Err(StoreError::FutureRevision),
            r if r < self.compacted => Err(StoreError::Compacted),
            r => Ok(r),
        }
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

#[cfg(test)]
mod tests {
    use crate::engine::Engine;
    use crate::engine::testing::*;
    use etcd_client::proto::{PbRangeRequest, PbRangeResponse};

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
}
