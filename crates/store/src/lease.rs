//! Leases: a TTL that a client keeps alive, and the keys that are deleted when it runs out.
//!
//! A lease lives on the replica that granted it: that replica expires it and deletes its keys,
//! and the deletions replicate like any other write. Lease ids carry the granting replica in
//! their high bits, so ids granted on different replicas never collide.

use crate::error::StoreError;
use std::collections::{BTreeMap, BTreeSet};

/// etcd's largest TTL (`MaxLeaseTTL`), in seconds.
pub const MAX_TTL: i64 = 9_000_000_000;

/// One lease.
#[derive(Clone, Debug)]
pub struct Lease {
    /// The TTL it was granted with, in seconds.
    pub granted_ttl: i64,
    expires_ms: u64,
    keys: BTreeSet<Vec<u8>>,
}

impl Lease {
    /// Whole seconds left at `now_ms`, rounded down as etcd reports them; 0 once expired.
    /// etcd's clock counts nanoseconds, so a lease asked about the moment it was granted has
    /// already lost some and reports one second less than its TTL; this clock counts
    /// milliseconds, so a question in the grant's own millisecond counts as one later.
    pub fn remaining(&self, now_ms: u64) -> i64 {
        (self.expires_ms.saturating_sub(now_ms).saturating_sub(1) / 1000) as i64
    }

    /// The keys attached to it.
    pub fn keys(&self) -> impl Iterator<Item = &Vec<u8>> {
        self.keys.iter()
    }
}

/// Every lease a replica granted.
#[derive(Clone, Debug, Default)]
pub struct Leases {
    by_id: BTreeMap<i64, Lease>,
    counter: i64,
}

impl Leases {
    /// A fresh id for a lease granted on `replica`.
    pub fn next_id(&mut self, replica: u64) -> i64 {
        loop {
            self.counter = (self.counter + 1) & ((1 << 47) - 1);
            let id = (((replica & 0x7fff) as i64) << 47) | self.counter;
            if id > 0 && !self.by_id.contains_key(&id) {
                return id;
            }
        }
    }

    /// Grants `id` (positive) for `ttl` seconds from `now_ms`; returns the TTL granted (at
    /// least 1).
    pub fn grant(&mut self, id: i64, ttl: i64, now_ms: u64) -> Result<i64, StoreError> {
        if ttl > MAX_TTL {
            return Err(StoreError::LeaseTtlTooLarge);
        }
        if self.by_id.contains_key(&id) {
            return Err(StoreError::LeaseExists);
        }
        let ttl = ttl.max(1);
        self.by_id.insert(
            id,
            Lease {
                granted_ttl: ttl,
                expires_ms: now_ms + ttl as u64 * 1000,
                keys: BTreeSet::new(),
            },
        );
        Ok(ttl)
    }

    /// Restarts `id`'s TTL at `now_ms`; returns the TTL.
    pub fn renew(&mut self, id: i64, now_ms: u64) -> Result<i64, StoreError> {
        let lease = self.by_id.get_mut(&id).ok_or(StoreError::LeaseNotFound)?;
        lease.expires_ms = now_ms + lease.granted_ttl as u64 * 1000;
        Ok(lease.granted_ttl)
    }

    /// Removes `id`, returning its keys for deletion.
    pub fn revoke(&mut self, id: i64) -> Result<BTreeSet<Vec<u8>>, StoreError> {
        let lease = self.by_id.remove(&id).ok_or(StoreError::LeaseNotFound)?;
        Ok(lease.keys)
    }

    /// Removes every lease expired by `now_ms`, returning their ids and keys.
    pub fn expire(&mut self, now_ms: u64) -> Vec<(i64, BTreeSet<Vec<u8>>)> {
        let expired: Vec<i64> = self
            .by_id
            .iter()
            .filter(|(_, l)| l.expires_ms <= now_ms)
            .map(|(id, _)| *id)
            .collect();
        expired
            .into_iter()
            .filter_map(|id| Some((id, self.by_id.remove(&id)?.keys)))
            .collect()
    }

    /// When the next lease expires, if any.
    pub fn next_expiry_ms(&self) -> Option<u64> {
        self.by_id.values().map(|l| l.expires_ms).min()
    }

    /// Whether `id` is granted here.
    pub fn exists(&self, id: i64) -> bool {
        self.by_id.contains_key(&id)
    }

    /// Lease `id`, if granted here.
    pub fn get(&self, id: i64) -> Option<&Lease> {
        self.by_id.get(&id)
    }

    /// Every lease id, ascending.
    pub fn ids(&self) -> impl Iterator<Item = i64> + '_ {
        self.by_id.keys().copied()
    }

    /// Every lease id, the first to expire first: the order etcd lists leases in.
    pub fn ids_by_expiry(&self) -> Vec<i64> {
        let mut ids: Vec<(u64, i64)> = self
            .by_id
            .iter()
            .map(|(id, l)| (l.expires_ms, *id))
            .collect();
        ids.sort_unstable();
        ids.into_iter().map(|(_, id)| id).collect()
    }

    /// Notes that `key` now carries lease `id`. A lease granted on another replica is not
    /// tracked here: its own replica deletes the key when it expires.
    pub fn attach(&mut self, id: i64, key: &[u8]) {
        if let Some(lease) = self.by_id.get_mut(&id) {
            lease.keys.insert(key.to_vec());
        }
    }

    /// Notes that `key` no longer carries lease `id`.
    pub fn detach(&mut self, id: i64, key: &[u8]) {
        if let Some(lease) = self.by_id.get_mut(&id) {
            lease.keys.remove(key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// etcd reports the whole seconds left, rounded down: a lease granted for 60 s reports 59
    /// a moment later. Rounding up reported 60, and so did a question in the grant's own
    /// millisecond (the etcd suite's TestLease failed so in 1 run of 4).
    #[test]
    fn remaining_rounds_down_as_etcd() {
        let mut leases = Leases::default();
        leases.grant(1, 60, 1_000).unwrap();
        let lease = leases.get(1).unwrap();
        assert_eq!(lease.remaining(1_000), 59);
        assert_eq!(lease.remaining(1_001), 59);
        assert_eq!(lease.remaining(1_999), 59);
        assert_eq!(lease.remaining(2_000), 58);
        assert_eq!(lease.remaining(60_999), 0);
        assert_eq!(lease.remaining(70_000), 0);
    }

    /// etcd lists leases by expiry; listing by id put a short lease granted late last.
    #[test]
    fn leases_are_listed_by_expiry() {
        let mut leases = Leases::default();
        leases.grant(1, 30, 0).unwrap();
        leases.grant(2, 10, 0).unwrap();
        leases.grant(3, 20, 0).unwrap();
        assert_eq!(leases.ids_by_expiry(), [2, 3, 1]);
        leases.renew(2, 25_000).unwrap();
        assert_eq!(leases.ids_by_expiry(), [3, 1, 2]);
    }
}
