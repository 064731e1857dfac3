//! The [`StateStore`] over the etcd v3 API: mote store (embedded by `mote up`, or a cluster of
//! replicas) or a real etcd. Every key lives under one prefix, so the platform can share an etcd
//! with other users and an operator can list its state with `etcdctl get --prefix /mote/`.

use crate::{StateError, StateStore};
use async_trait::async_trait;
use etcd_client::{Client, ConnectOptions, DeleteOptions, GetOptions};
use std::time::Duration;

/// The prefix of every key the platform writes.
pub const KEY_PREFIX: &str = "/mote/";

/// How long to wait for a store endpoint to accept a connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// How long one request may take before the platform gives up on the store.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// A state store reached through an etcd v3 client; cheap to clone.
#[derive(Clone)]
pub struct EtcdStore {
    client: Client,
    endpoints: String,
}

impl EtcdStore {
    /// Connects to the etcd API at `endpoints` (URLs such as `http://127.0.0.1:2379`, or
    /// `https://` ones, whose certificates `tls` says whom to trust) and checks that it answers.
    pub async fn connect(
        endpoints: &[String],
        tls: Option<etcd_client::TlsOptions>,
    ) -> Result<Self, StateError> {
        let named = endpoints.join(",");
        let mut options = ConnectOptions::new()
            .with_connect_timeout(CONNECT_TIMEOUT)
            .with_timeout(REQUEST_TIMEOUT);
        // etcd-client refuses TLS options with plain http:// endpoints.
        if let Some(tls) = tls
            && endpoints.iter().any(|url| url.starts_with("https://"))
        {
            options = options.with_tls(tls);
        }
        let unreachable = |e: etcd_client::Error| StateError::Remote {
            endpoints: named.clone(),
            message: format!("{e} (is the store running there?)"),
        };
        let mut client = Client::connect(endpoints, Some(options))
            .await
            .map_err(unreachable)?;
        // The client connects lazily; one read proves the endpoint speaks the etcd API.
        client.status().await.map_err(unreachable)?;
        Ok(Self {
            client,
            endpoints: named,
        })
    }

    /// A handle on the client, for one request (the client is a cheap clone over one channel).
    pub(crate) fn client(&self) -> Client {
        self.client.clone()
    }

    /// The endpoints, as the user gave them.
    pub fn endpoints(&self) -> &str {
        &self.endpoints
    }

    pub(crate) fn remote(&self, e: etcd_client::Error) -> StateError {
        StateError::Remote {
            endpoints: self.endpoints.clone(),
            message: e.to_string(),
        }
    }
}

pub(crate) fn full_key(key: &str) -> String {
    format!("{KEY_PREFIX}{key}")
}

#[async_trait]
impl StateStore for EtcdStore {
    async fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StateError> {
        let mut kv = self.client.kv_client();
        let resp = kv
            .get(full_key(key), None)
            .await
            .map_err(|e| self.remote(e))?;
        Ok(resp.kvs().first().map(|kv| kv.value().to_vec()))
    }

    async fn put(&self, key: &str, value: Vec<u8>) -> Result<(), StateError> {
        let mut kv = self.client.kv_client();
        kv.put(full_key(key), value, None)
            .await
            .map_err(|e| self.remote(e))?;
        Ok(())
    }

    async fn delete(&self, key: &str) -> Result<bool, StateError> {
        let mut kv = self.client.kv_client();
        let resp = kv
            .delete(full_key(key), Some(DeleteOptions::new()))
            .await
            .map_err(|e| self.remote(e))?;
        Ok(resp.deleted() > 0)
    }

    async fn list(&self, prefix: &str) -> Result<Vec<(String, Vec<u8>)>, StateError> {
        let mut kv = self.client.kv_client();
        let resp = kv
            .get(full_key(prefix), Some(GetOptions::new().with_prefix()))
            .await
            .map_err(|e| self.remote(e))?;
        resp.kvs()
            .iter()
            .map(|kv| {
                let key = kv.key_str().map_err(|e| self.remote(e))?;
                let key = key.strip_prefix(KEY_PREFIX).unwrap_or(key);
                Ok((key.to_owned(), kv.value().to_vec()))
            })
            .collect()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use mote_store::replica::{Member, Replica};

    /// Serves an in-memory mote store replica on a free port; answers its URL.
    pub(crate) async fn replica() -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let replica = Replica::open(vec![Member::new("test", vec![url.clone()], vec![])], None)
            .expect("an in-memory replica opens");
        tokio::spawn(mote_store::service::serve(
            replica,
            Duration::from_secs(1),
            listener,
            None,
            None,
            None,
            std::future::pending(),
        ));
        url
    }

    /// A client of a fresh in-memory replica.
    pub(crate) async fn store() -> EtcdStore {
        EtcdStore::connect(&[replica().await], None).await.unwrap()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn put_get_list_delete_under_the_prefix() {
        let url = replica().await;
        let s = EtcdStore::connect(std::slice::from_ref(&url), None)
            .await
            .unwrap();
        s.put("f/a", b"1".to_vec()).await.unwrap();
        s.put("f/b", b"2".to_vec()).await.unwrap();
        s.put("g/c", b"3".to_vec()).await.unwrap();
        assert_eq!(s.get("f/a").await.unwrap(), Some(b"1".to_vec()));
        assert_eq!(s.get("f/z").await.unwrap(), None);
        let listed = s.list("f/").await.unwrap();
        assert_eq!(
            listed,
            [
                ("f/a".to_owned(), b"1".to_vec()),
                ("f/b".to_owned(), b"2".to_vec())
            ]
        );
        assert!(s.delete("f/a").await.unwrap());
        assert!(!s.delete("f/a").await.unwrap());
        assert_eq!(s.list("").await.unwrap().len(), 2);

        // Everything sits under the prefix, where an operator would look for it.
        let mut client = Client::connect([url], None).await.unwrap();
        let raw = client
            .get(
                KEY_PREFIX,
                Some(GetOptions::new().with_prefix().with_keys_only()),
            )
            .await
            .unwrap();
        let keys: Vec<_> = raw.kvs().iter().map(|kv| kv.key_str().unwrap()).collect();
        assert_eq!(keys, ["/mote/f/b", "/mote/g/c"]);
    }

    #[tokio::test]
    async fn an_unreachable_endpoint_is_named() {
        let endpoints = ["http://127.0.0.1:9".to_owned()];
        let err = EtcdStore::connect(&endpoints, None).await.err().unwrap();
        let message = err.to_string();
        assert!(
            message.contains("http://127.0.0.1:9") && message.contains("is the store running"),
            "{message}"
        );
    }
}
