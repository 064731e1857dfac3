//! The engine's side of leases: granting, renewing, revoking and expiring them, and deleting
//! the keys they carry, all of a lease's keys in one revision. Which leases exist and which keys
//! each carries is `crate::lease`'s bookkeeping; only the replica that granted a lease expires
//! it.

use super::index::Write;
use super::state::{Applied, Engine};
use crate::error::StoreError;
use std::collections::BTreeSet;

impl Engine {
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
}

#[cfg(test)]
mod tests {
    use crate::engine::Engine;
    use crate::engine::testing::*;
    use crate::error::StoreError;
    use etcd_client::proto::PbPutRequest;

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
}
