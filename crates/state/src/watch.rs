//! Following every key under a prefix: what is there now, then each change after it, with no gap
//! between the two (the watch starts at the revision the listing was read at).

use crate::etcd::full_key;
use crate::{EtcdStore, KEY_PREFIX, StateError};
use etcd_client::{EventType, GetOptions, WatchOptions, WatchStream};
use std::collections::VecDeque;

/// A change to a key under a watched prefix.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// The key was written (created, or changed).
    Put {
        /// The key, without the platform's prefix.
        key: String,
        /// Its new value.
        value: Vec<u8>,
    },
    /// The key was deleted, or its lease expired.
    Delete {
        /// The key, without the platform's prefix.
        key: String,
    },
}

/// The changes under a prefix, in the order the store made them.
pub struct PrefixWatch {
    store: EtcdStore,
    stream: WatchStream,
    ready: VecDeque<Change>,
}

impl EtcdStore {
    /// Every key under `prefix` and its value now, and a [`PrefixWatch`] of every change after.
    pub async fn watch_prefix(
        &self,
        prefix: &str,
    ) -> Result<(Vec<(String, Vec<u8>)>, PrefixWatch), StateError> {
        let mut client = self.client();
        let full = full_key(prefix);
        let now = client
            .get(full.as_str(), Some(GetOptions::new().with_prefix()))
            .await
            .map_err(|e| self.remote(e))?;
        let revision = now.header().map_or(0, |h| h.revision());
        let listed = now
            .kvs()
            .iter()
            .map(|kv| Ok((self.short_key(kv.key())?, kv.value().to_vec())))
            .collect::<Result<_, StateError>>()?;
        let options = WatchOptions::new()
            .with_prefix()
            .with_start_revision(revision + 1);
        let stream = client
            .watch(full, Some(options))
            .await
            .map_err(|e| self.remote(e))?;
        let watch = PrefixWatch {
            store: self.clone(),
            stream,
            ready: VecDeque::new(),
        };
        Ok((listed, watch))
    }

    fn short_key(&self, key: &[u8]) -> Result<String, StateError> {
        let key = std::str::from_utf8(key).map_err(|e| StateError::Remote {
            endpoints: self.endpoints().to_owned(),
            message: format!("a key that is not UTF-8: {e}"),
        })?;
        Ok(key.strip_prefix(KEY_PREFIX).unwrap_or(key).to_owned())
    }
}

impl PrefixWatch {
    /// The next change; an error if the watch ended (the store stopped or cancelled it), after
    /// which the caller lists and watches again.
    pub async fn next(&mut self) -> Result<Change, StateError> {
        loop {
            if let Some(change) = self.ready.pop_front() {
                return Ok(change);
            }
            let ended = |message: String| StateError::Remote {
                endpoints: self.store.endpoints().to_owned(),
                message,
            };
            let response = match self.stream.message().await {
                Ok(Some(response)) => response,
                Ok(None) => return Err(ended("the store ended the watch".into())),
                Err(e) => return Err(self.store.remote(e)),
            };
            if response.canceled() {
                return Err(ended(format!(
                    "the store cancelled the watch: {}",
                    response.cancel_reason()
                )));
            }
            for event in response.events() {
                let Some(kv) = event.kv() else { continue };
                let key = self.store.short_key(kv.key())?;
                self.ready.push_back(match event.event_type() {
                    EventType::Put => Change::Put {
                        key,
                        value: kv.value().to_vec(),
                    },
                    EventType::Delete => Change::Delete { key },
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StateStore;
    use crate::etcd::tests::store;
    use std::time::Duration;

    async fn next(watch: &mut PrefixWatch) -> Change {
        tokio::time::timeout(Duration::from_secs(5), watch.next())
            .await
            .expect("a change within 5 s")
            .unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_watch_lists_then_follows_writes_deletions_and_expiries_under_its_prefix() {
        let s = store().await;
        s.put("nodes/a", b"1".to_vec()).await.unwrap();
        s.put("other/x", b"1".to_vec()).await.unwrap();
        let (listed, mut watch) = s.watch_prefix("nodes/").await.unwrap();
        assert_eq!(listed, [("nodes/a".to_owned(), b"1".to_vec())]);

        s.put("other/y", b"1".to_vec()).await.unwrap();
        s.put("nodes/b", b"2".to_vec()).await.unwrap();
        s.delete("nodes/a").await.unwrap();
        let leased = s
            .lease_key("nodes/c", b"3".to_vec(), Duration::from_secs(1))
            .await
            .unwrap();
        drop(leased);
        let put = |key: &str, value: &[u8]| Change::Put {
            key: key.to_owned(),
            value: value.to_vec(),
        };
        let delete = |key: &str| Change::Delete {
            key: key.to_owned(),
        };
        let mut seen = Vec::new();
        for _ in 0..4 {
            seen.push(next(&mut watch).await);
        }
        assert_eq!(
            seen,
            [
                put("nodes/b", b"2"),
                delete("nodes/a"),
                put("nodes/c", b"3"),
                delete("nodes/c")
            ]
        );
    }
}
