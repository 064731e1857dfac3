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
    /// Seconds left at `now_ms`, rounded up; 0 once expired.
    pub fn remaining(&self, now_ms: u64) -> i64 {
        (self.expires_ms.saturating_sub(now_ms) as i64 + 999) / 1000
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

    /// Grants `id` for `ttl` seconds from `now_ms`; returns the TTL granted (at least 1).
    pub fn grant(&mut self, id: i64, ttl: i64, now_ms: u64) -> Result<i64, StoreError> {
        if ttl > MAX_TTL {
            return Err(StoreError::LeaseTtlTooLarge);
        }
        if id < 0 {
            return Err(StoreError::LeaseNotFound);
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
