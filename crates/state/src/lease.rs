//! Keys that live as long as their owner: written under a lease that a task keeps alive, so that
//! the key disappears by itself a TTL after its owner dies or loses the store. A node announces
//! itself this way, as Kubernetes components hold their leases.

use crate::etcd::full_key;
use crate::{EtcdStore, StateError};
use etcd_client::PutOptions;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::Duration;
use tokio::task::JoinHandle;

/// A key kept alive under a lease. Dropping it stops the keep-alive (the key expires a TTL
/// later); [`LeasedKey::release`] deletes it at once.
pub struct LeasedKey {
    store: EtcdStore,
    key: String,
    shared: Arc<Shared>,
    keeper: JoinHandle<()>,
}

/// What the keep-alive task shares with the owner.
struct Shared {
    ttl: Duration,
    /// The value to write again if the lease is lost, and the lease it is under now.
    state: Mutex<(Vec<u8>, i64)>,
}

impl EtcdStore {
    /// Writes `key` = `value` under a new lease of `ttl` (whole seconds, at least one) and keeps
    /// the lease alive until the returned [`LeasedKey`] is dropped. If the lease is lost anyway
    /// (the store was out of reach for longer than `ttl`), the key is written again under a new
    /// one once the store answers.
    pub async fn lease_key(
        &self,
        key: &str,
        value: Vec<u8>,
        ttl: Duration,
    ) -> Result<LeasedKey, StateError> {
        let ttl = Duration::from_secs(ttl.as_secs().max(1));
        let key = full_key(key);
        let lease = self.grant_and_put(&key, value.clone(), ttl).await?;
        let shared = Arc::new(Shared {
            ttl,
            state: Mutex::new((value, lease)),
        });
        let keeper = tokio::spawn(keep_alive(self.clone(), key.clone(), shared.clone()));
        Ok(LeasedKey {
            store: self.clone(),
            key,
            shared,
            keeper,
        })
    }

    async fn grant_and_put(
        &self,
        key: &str,
        value: Vec<u8>,
        ttl: Duration,
    ) -> Result<i64, StateError> {
        let mut client = self.client();
        let ttl_s = i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX);
        let lease = client
            .lease_grant(ttl_s, None)
            .await
            .map_err(|e| self.remote(e))?
            .id();
        client
            .put(key, value, Some(PutOptions::new().with_lease(lease)))
            .await
            .map_err(|e| self.remote(e))?;
        Ok(lease)
    }
}

impl LeasedKey {
    /// Writes `value` under the key, keeping its lease.
    pub async fn update(&self, value: Vec<u8>) -> Result<(), StateError> {
        let lease = {
            let mut state = self.shared.state.lock();
            state.0.clone_from(&value);
            state.1
        };
        self.store
            .client()
            .put(
                self.key.as_str(),
                value,
                Some(PutOptions::new().with_lease(lease)),
            )
            .await
            .map_err(|e| self.store.remote(e))?;
        Ok(())
    }

    /// Deletes the key now, by revoking its lease.
    pub async fn release(self) -> Result<(), StateError> {
        self.keeper.abort();
        let lease = self.shared.state.lock().1;
        self.store
            .client()
            .lease_revoke(lease)
            .await
            .map_err(|e| self.store.remote(e))?;
        Ok(())
    }
}

impl Drop for LeasedKey {
    fn drop(&mut self) {
        self.keeper.abort();
    }
}

/// Keeps the lease of `key` alive, renewing it three times a TTL; writes the key again under
/// a new lease if the store forgot the old one.
async fn keep_alive(store: EtcdStore, key: String, shared: Arc<Shared>) {
    let period = shared.ttl / 3;
    loop {
        tokio::time::sleep(period).await;
        let lease = shared.state.lock().1;
        match renew(&store, lease, period).await {
            Ok(()) => {}
            Err(Lost::Expired) => {
                let value = shared.state.lock().0.clone();
                match store.grant_and_put(&key, value, shared.ttl).await {
                    Ok(lease) => {
                        tracing::info!(key, "the store had let this key expire; written again");
                        shared.state.lock().1 = lease;
                    }
                    Err(e) => tracing::warn!(key, error = %e, "cannot write this key again"),
                }
            }
            Err(Lost::Unreachable(e)) => {
                tracing::warn!(key, error = %e, "cannot renew this key's lease; trying again");
            }
        }
    }
}

/// Why a lease could not be renewed.
enum Lost {
    /// The store no longer knows it: its TTL passed without a renewal.
    Expired,
    /// The store did not answer.
    Unreachable(StateError),
}

/// Renews `lease` once, waiting at most `within` for the answer. Each renewal opens its own
/// keep-alive stream (the client sends the first request and checks its answer), so a stream
/// broken by a restart or a partition needs no recovery of its own.
async fn renew(store: &EtcdStore, lease: i64, within: Duration) -> Result<(), Lost> {
    let mut client = store.client();
    match tokio::time::timeout(within, client.lease_keep_alive(lease)).await {
        Ok(Ok(_)) => Ok(()),
        // etcd-client's only sign that the store answered a TTL of 0 (etcd's answer for a lease
        // it does not know).
        Ok(Err(etcd_client::Error::LeaseKeepAliveError(m))) if m == "lease not found" => {
            Err(Lost::Expired)
        }
        Ok(Err(e)) => Err(Lost::Unreachable(store.remote(e))),
        Err(_) => Err(Lost::Unreachable(StateError::Remote {
            endpoints: store.endpoints().to_owned(),
            message: format!("no answer to a lease renewal within {within:?}"),
        })),
    }
}

#[cfg(test)]
mod tests {
    use crate::StateStore;
    use crate::etcd::tests::store;
    use std::time::{Duration, Instant};

    const TTL: Duration = Duration::from_secs(1);

    /// Waits up to 5 s for `key` to hold `want`; fails naming what it held.
    async fn eventually(store: &crate::EtcdStore, key: &str, want: Option<&[u8]>) {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let held = store.get(key).await.unwrap();
            if held.as_deref() == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{key} holds {held:?}, not {want:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_leased_key_lives_while_kept_and_goes_when_released_or_dropped() {
        let s = store().await;
        let kept = s.lease_key("nodes/a", b"1".to_vec(), TTL).await.unwrap();
        tokio::time::sleep(3 * TTL).await;
        assert_eq!(s.get("nodes/a").await.unwrap(), Some(b"1".to_vec()));
        kept.update(b"2".to_vec()).await.unwrap();
        assert_eq!(s.get("nodes/a").await.unwrap(), Some(b"2".to_vec()));
        kept.release().await.unwrap();
        assert_eq!(s.get("nodes/a").await.unwrap(), None);

        let dropped = s.lease_key("nodes/b", b"1".to_vec(), TTL).await.unwrap();
        drop(dropped);
        eventually(&s, "nodes/b", None).await;
    }

    /// A store out of reach for longer than the TTL lets the key expire; its owner writes it
    /// again once it can, so a node that was cut off rejoins without an operator.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_key_whose_lease_expired_is_written_again() {
        let s = store().await;
        let _kept = s
            .lease_key("nodes/a", b"1".to_vec(), 3 * TTL)
            .await
            .unwrap();
        let mut client = s.client();
        for lease in client.leases().await.unwrap().leases() {
            client.lease_revoke(lease.id()).await.unwrap();
        }
        assert_eq!(s.get("nodes/a").await.unwrap(), None);
        eventually(&s, "nodes/a", Some(b"1")).await;
    }
}
