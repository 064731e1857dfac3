//! Object storage for guest functions: buckets of keyed objects, kept in any S3-compatible
//! server or, on a single machine, in a local directory with one subdirectory per bucket.
//!
//! Both backends go through the `object_store` crate, so a caller sees one set of semantics,
//! S3's: a bucket must exist before objects are put in it (this crate never creates one), a put
//! replaces the whole object, deleting a key that is not there succeeds, and a listing returns
//! keys in lexicographic order. Every error names the bucket, the key or the endpoint it is
//! about and says what to do ([`ObjectError`]).
//!
//! Calls to an S3 server fail fast rather than retry for minutes: a connection that cannot be
//! made within [`CONNECT_TIMEOUT`] is reported as [`ObjectError::Unreachable`] after at most
//! [`RETRIES`] retries, because a guest waiting on it holds a call open.

mod config;
mod error;
mod names;

pub use config::{ObjectsConfig, S3Endpoint};
pub use error::ObjectError;
pub use names::{check_bucket, check_key};

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use object_store::aws::AmazonS3Builder;
use object_store::local::LocalFileSystem;
use object_store::path::Path as ObjectPath;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, PutPayload, RetryConfig};
use parking_lot::RwLock;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// How long a connection to the S3 server may take before the attempt fails.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How many times a failed S3 request is retried (with backoff) before the error is returned.
pub const RETRIES: usize = 2;
/// The longest a single S3 request may take, transfer included.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// One object in a listing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectEntry {
    /// The object's key.
    pub key: String,
    /// Its size in bytes.
    pub size: u64,
}

/// A listing: the keys found, in order, and whether more matched than were returned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Listing {
    /// Objects whose keys start with the prefix, lowest keys first.
    pub entries: Vec<ObjectEntry>,
    /// True if more objects matched than the listing's limit.
    pub truncated: bool,
}

/// A client for the configured object storage, shared by every call on a node.
#[derive(Debug)]
pub struct Objects {
    config: ObjectsConfig,
    /// One `object_store` client per bucket (an S3 client is bound to one bucket), made on first
    /// use and kept: it holds the connection pool.
    buckets: RwLock<HashMap<String, Arc<dyn ObjectStore>>>,
}

impl Objects {
    /// A client for `config`. Nothing is contacted yet; a directory is created if missing.
    pub fn new(config: ObjectsConfig) -> Result<Self, ObjectError> {
        match &config {
            ObjectsConfig::S3(endpoint) => {
                if !(endpoint.url.starts_with("http://") || endpoint.url.starts_with("https://")) {
                    return Err(ObjectError::Config(format!(
                        "the S3 endpoint `{}` is not an http:// or https:// URL",
                        endpoint.url
                    )));
                }
            }
            ObjectsConfig::Directory(dir) => {
                std::fs::create_dir_all(dir).map_err(|e| {
                    ObjectError::Config(format!(
                        "cannot create the object directory {}: {e}",
                        dir.display()
                    ))
                })?;
            }
        }
        Ok(Self {
            config,
            buckets: RwLock::new(HashMap::new()),
        })
    }

    /// The whole object `key` of `bucket`, refused if it is larger than `max_bytes`.
    pub async fn get(&self, bucket: &str, key: &str, max_bytes: u64) -> Result<Bytes, ObjectError> {
        let (store, path) = self.locate(bucket, key)?;
        let found = store
            .get(&path)
            .await
            .map_err(|e| self.explain(e, bucket, Some(key)))?;
        if found.meta.size > max_bytes {
            return Err(ObjectError::TooLarge {
                bucket: bucket.to_owned(),
                key: key.to_owned(),
                size: found.meta.size,
                limit: max_bytes,
            });
        }
        found
            .bytes()
            .await
            .map_err(|e| self.explain(e, bucket, Some(key)))
    }

    /// Stores `body` as `key` in `bucket`, replacing any object there.
    pub async fn put(&self, bucket: &str, key: &str, body: Bytes) -> Result<(), ObjectError> {
        let (store, path) = self.locate(bucket, key)?;
        store
            .put(&path, PutPayload::from_bytes(body))
            .await
            .map_err(|e| self.explain(e, bucket, Some(key)))?;
        Ok(())
    }

    /// The objects of `bucket` whose keys start with `prefix` (all of them if it is empty), at
    /// most `limit`, in key order. A prefix is a key prefix, not a directory: `a/b` matches
    /// `a/b/c` and `a/bc`.
    pub async fn list(
        &self,
        bucket: &str,
        prefix: &str,
        limit: usize,
    ) -> Result<Listing, ObjectError> {
        self.list_after(bucket, prefix, "", limit).await
    }

    /// As [`Objects::list`], but only keys after `after` (S3's `start-after`; empty: from the
    /// first). A listing that was truncated continues from its last key.
    pub async fn list_after(
        &self,
        bucket: &str,
        prefix: &str,
        after: &str,
        limit: usize,
    ) -> Result<Listing, ObjectError> {
        let store = self.bucket(bucket)?;
        // `object_store` lists whole path segments; list from the prefix's parent and filter.
        let parent = prefix.rsplit_once('/').map(|(dir, _)| dir).unwrap_or("");
        let parent = match parent {
            "" => None,
            dir => Some(check_key(dir).map(|_| ObjectPath::from_iter(dir.split('/')))?),
        };
        // S3 lists in key order, so reading stops after the first `limit + 1` matches; the
        // directory backend lists in directory order, so it reads them all and sorts.
        let wanted = match self.config {
            ObjectsConfig::S3(_) => limit.saturating_add(1),
            ObjectsConfig::Directory(_) => usize::MAX,
        };
        // The server skips to `after` when it is a key it could hold; the filter below decides
        // either way, so a string no key could be (`a//b`) still lists what follows it.
        let offset = match after {
            "" => None,
            after => check_key(after)
                .ok()
                .map(|_| ObjectPath::from_iter(after.split('/'))),
        };
        let listed = match &offset {
            Some(offset) => store.list_with_offset(parent.as_ref(), offset),
            None => store.list(parent.as_ref()),
        };
        let mut entries: Vec<ObjectEntry> = listed
            .map_ok(|meta| ObjectEntry {
                key: meta.location.to_string(),
                size: meta.size,
            })
            .try_filter(|entry| {
                std::future::ready(entry.key.starts_with(prefix) && entry.key.as_str() > after)
            })
            .take(wanted)
            .try_collect()
            .await
            .map_err(|e| self.explain(e, bucket, None))?;
        entries.sort_unstable_by(|a, b| a.key.cmp(&b.key));
        let truncated = entries.len() > limit;
        entries.truncate(limit);
        Ok(Listing { entries, truncated })
    }

    /// Deletes `key` from `bucket`; succeeds if there was no such object, as S3 does.
    pub async fn delete(&self, bucket: &str, key: &str) -> Result<(), ObjectError> {
        let (store, path) = self.locate(bucket, key)?;
        match store.delete(&path).await {
            Ok(()) => Ok(()),
            Err(object_store::Error::NotFound { .. })
                if matches!(self.config, ObjectsConfig::Directory(_)) =>
            {
                Ok(())
            }
            Err(e) => Err(self.explain(e, bucket, Some(key))),
        }
    }

    /// Moves the object `from` to `to` in `bucket`, replacing any object there: a rename in a
    /// directory, a server-side copy and a delete in S3.
    pub async fn rename(&self, bucket: &str, from: &str, to: &str) -> Result<(), ObjectError> {
        let (store, source) = self.locate(bucket, from)?;
        check_key(to)?;
        let target = ObjectPath::from_iter(to.split('/'));
        store
            .rename(&source, &target)
            .await
            .map_err(|e| self.explain(e, bucket, Some(from)))
    }

    /// Deletes every object whose key starts with `prefix` (a "directory", ending in `/`);
    /// returns how many. In a directory, files a writer killed mid-put left under it go too:
    /// a put is staged in a file beside its key and renamed into place, and listings skip the
    /// staged files, so nothing else would ever remove them. The directories left empty above
    /// it go as well, up to the bucket's: S3 has no directories, and a job that cleans up
    /// after itself should leave none behind.
    pub async fn delete_prefix(&self, bucket: &str, prefix: &str) -> Result<usize, ObjectError> {
        let mut deleted = 0;
        loop {
            let page = self.list(bucket, prefix, 1000).await?;
            for entry in &page.entries {
                self.delete(bucket, &entry.key).await?;
            }
            deleted += page.entries.len();
            if !page.truncated {
                break;
            }
        }
        if let ObjectsConfig::Directory(root) = &self.config
            && let Some(dir) = prefix.strip_suffix('/')
            && !dir.is_empty()
        {
            check_key(dir)?;
            let path = root.join(bucket).join(dir);
            match std::fs::remove_dir_all(&path) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(ObjectError::Backend {
                        bucket: bucket.to_owned(),
                        key: Some(prefix.to_owned()),
                        reason: format!("cannot remove {}: {e}", path.display()),
                    });
                }
            }
            // An ancestor that still holds something stays, and so do those above it.
            let top = root.join(bucket);
            for dir in path.ancestors().skip(1).take_while(|d| *d != top) {
                if std::fs::remove_dir(dir).is_err() {
                    break;
                }
            }
        }
        Ok(deleted)
    }

    fn locate(
        &self,
        bucket: &str,
        key: &str,
    ) -> Result<(Arc<dyn ObjectStore>, ObjectPath), ObjectError> {
        check_key(key)?;
        let store = self.bucket(bucket)?;
        Ok((store, ObjectPath::from_iter(key.split('/'))))
    }

    /// The client for `bucket`. For a directory, the bucket's subdirectory must exist: the
    /// directory backend would otherwise create it on the first put, which S3 never does.
    fn bucket(&self, bucket: &str) -> Result<Arc<dyn ObjectStore>, ObjectError> {
        check_bucket(bucket)?;
        if let ObjectsConfig::Directory(dir) = &self.config
            && !dir.join(bucket).is_dir()
        {
            return Err(ObjectError::NoSuchBucket {
                bucket: bucket.to_owned(),
                fix: format!("create the directory {}", dir.join(bucket).display()),
            });
        }
        let known = self.buckets.read().get(bucket).cloned();
        if let Some(store) = known {
            return Ok(store);
        }
        let store = self.open(bucket)?;
        self.buckets
            .write()
            .insert(bucket.to_owned(), store.clone());
        Ok(store)
    }

    fn open(&self, bucket: &str) -> Result<Arc<dyn ObjectStore>, ObjectError> {
        let store: Arc<dyn ObjectStore> = match &self.config {
            ObjectsConfig::S3(endpoint) => {
                let retry = RetryConfig {
                    backoff: BackoffConfig {
                        init_backoff: Duration::from_millis(50),
                        max_backoff: Duration::from_millis(500),
                        base: 2.0,
                    },
                    max_retries: RETRIES,
                    retry_timeout: Duration::from_secs(10),
                };
                let client = ClientOptions::new()
                    .with_allow_http(true)
                    .with_connect_timeout(CONNECT_TIMEOUT)
                    .with_timeout(REQUEST_TIMEOUT);
                let s3 = AmazonS3Builder::new()
                    .with_endpoint(&endpoint.url)
                    .with_region(&endpoint.region)
                    .with_access_key_id(&endpoint.access_key)
                    .with_secret_access_key(&endpoint.secret_key)
                    .with_bucket_name(bucket)
                    .with_virtual_hosted_style_request(false)
                    .with_retry(retry)
                    .with_client_options(client)
                    .build()
                    .map_err(|e| {
                        ObjectError::Config(format!("S3 endpoint {}: {e}", endpoint.url))
                    })?;
                Arc::new(s3)
            }
            ObjectsConfig::Directory(dir) => {
                let fs = LocalFileSystem::new_with_prefix(dir.join(bucket)).map_err(|e| {
                    ObjectError::Config(format!("bucket directory {}: {e}", dir.display()))
                })?;
                Arc::new(fs)
            }
        };
        Ok(store)
    }

    fn explain(&self, e: object_store::Error, bucket: &str, key: Option<&str>) -> ObjectError {
        error::explain(e, bucket, key, &self.config)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn directory() -> (tempfile::TempDir, Objects) {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("data")).unwrap();
        let objects = Objects::new(ObjectsConfig::Directory(dir.path().into())).unwrap();
        (dir, objects)
    }

    #[tokio::test]
    async fn put_get_list_delete_in_a_directory() {
        let (_dir, objects) = directory();
        objects
            .put("data", "in/part-1", Bytes::from_static(b"one"))
            .await
            .unwrap();
        objects
            .put("data", "in/part-0", Bytes::from_static(b"zero!"))
            .await
            .unwrap();
        objects
            .put("data", "out", Bytes::from_static(b""))
            .await
            .unwrap();
        assert_eq!(
            &objects.get("data", "in/part-1", 100).await.unwrap()[..],
            b"one"
        );

        let all = objects.list("data", "", 100).await.unwrap();
        let keys: Vec<_> = all
            .entries
            .iter()
            .map(|e| (e.key.as_str(), e.size))
            .collect();
        assert_eq!(keys, [("in/part-0", 5), ("in/part-1", 3), ("out", 0)]);
        assert!(!all.truncated);

        let some = objects.list("data", "in/part-", 1).await.unwrap();
        assert_eq!(some.entries.len(), 1);
        assert_eq!(some.entries[0].key, "in/part-0");
        assert!(some.truncated);
        assert!(objects.list("data", "i", 10).await.unwrap().entries.len() == 2);
        let rest = objects
            .list_after("data", "in/part-", "in/part-0", 1)
            .await
            .unwrap();
        assert_eq!(rest.entries[0].key, "in/part-1");
        assert!(!rest.truncated);
        // After a string that is no key (an empty segment), and after the last key.
        let after_odd = objects.list_after("data", "", "in//", 10).await.unwrap();
        assert_eq!(after_odd.entries.len(), 3);
        let after_last = objects.list_after("data", "", "out", 10).await.unwrap();
        assert!(after_last.entries.is_empty() && !after_last.truncated);

        objects.delete("data", "in/part-0").await.unwrap();
        objects.delete("data", "in/part-0").await.unwrap();
        assert!(matches!(
            objects.get("data", "in/part-0", 100).await,
            Err(ObjectError::NoSuchKey { .. })
        ));
        assert_eq!(
            objects.list("data", "in/", 10).await.unwrap().entries.len(),
            1
        );
    }

    #[tokio::test]
    async fn deleting_a_prefix_removes_its_objects_and_what_killed_writers_left() {
        let (dir, objects) = directory();
        std::fs::create_dir(dir.path().join("bkt")).unwrap();
        for key in ["job/1/a", "job/1/b", "job/2/c", "other/d"] {
            objects
                .put("bkt", key, Bytes::from_static(b"x"))
                .await
                .unwrap();
        }
        // What a put killed between its staging write and its rename leaves.
        std::fs::write(dir.path().join("bkt/job/2/c#1"), b"half").unwrap();
        assert_eq!(objects.delete_prefix("bkt", "job/").await.unwrap(), 3);
        assert!(
            !dir.path().join("bkt/job").exists(),
            "the staged file went too"
        );
        let left = objects.list("bkt", "", 100).await.unwrap();
        assert_eq!(left.entries.len(), 1, "{left:?}");
        assert_eq!(objects.delete_prefix("bkt", "job/").await.unwrap(), 0);

        // Directories left empty above the prefix go, up to the bucket; one that holds
        // something stays.
        for key in ["a/b/c/x", "a/y"] {
            objects
                .put("bkt", key, Bytes::from_static(b"x"))
                .await
                .unwrap();
        }
        assert_eq!(objects.delete_prefix("bkt", "a/b/c/").await.unwrap(), 1);
        assert!(!dir.path().join("bkt/a/b").exists(), "a/b was left empty");
        assert!(dir.path().join("bkt/a/y").exists(), "a holds y");
        objects.delete("bkt", "a/y").await.unwrap();
        objects.delete("bkt", "other/d").await.unwrap();
        assert_eq!(objects.delete_prefix("bkt", "a/").await.unwrap(), 0);
        assert!(dir.path().join("bkt").is_dir(), "the bucket stays");
    }

    #[tokio::test]
    async fn a_rename_moves_the_object_and_replaces_the_target() {
        let (_dir, objects) = directory();
        for (key, body) in [("out/_temporary/1/part-0", "new"), ("out/part-0", "old")] {
            objects.put("data", key, Bytes::from(body)).await.unwrap();
        }
        objects
            .rename("data", "out/_temporary/1/part-0", "out/part-0")
            .await
            .unwrap();
        assert_eq!(
            &objects.get("data", "out/part-0", 10).await.unwrap()[..],
            b"new"
        );
        let left = objects.list("data", "", 10).await.unwrap().entries;
        assert_eq!(left.len(), 1, "{left:?}");
        let e = objects.rename("data", "nothing", "x").await.unwrap_err();
        assert!(e.to_string().contains("`nothing`"), "{e}");
    }

    #[tokio::test]
    async fn a_put_replaces_the_whole_object() {
        let (_dir, objects) = directory();
        objects
            .put("data", "k", Bytes::from_static(b"a long first value"))
            .await
            .unwrap();
        objects
            .put("data", "k", Bytes::from_static(b"short"))
            .await
            .unwrap();
        assert_eq!(&objects.get("data", "k", 100).await.unwrap()[..], b"short");
    }

    #[tokio::test]
    async fn errors_name_the_bucket_the_key_and_the_fix() {
        let (dir, objects) = directory();
        let e = objects.get("data", "nothing", 10).await.unwrap_err();
        assert!(matches!(e, ObjectError::NoSuchKey { .. }), "{e:?}");
        assert!(
            e.to_string().contains("`nothing`") && e.to_string().contains("`data`"),
            "{e}"
        );

        let e = objects.put("missing", "k", Bytes::new()).await.unwrap_err();
        assert!(matches!(e, ObjectError::NoSuchBucket { .. }), "{e:?}");
        assert!(e.to_string().contains("create the directory"), "{e}");
        assert!(
            !dir.path().join("missing").exists(),
            "a put must not create a bucket"
        );

        objects
            .put("data", "big", Bytes::from(vec![7; 1000]))
            .await
            .unwrap();
        let e = objects.get("data", "big", 999).await.unwrap_err();
        assert!(
            e.to_string().contains("1000 bytes") && e.to_string().contains("999"),
            "{e}"
        );

        assert!(matches!(
            objects.get("Bad_Bucket", "k", 10).await,
            Err(ObjectError::InvalidBucket { .. })
        ));
        assert!(matches!(
            objects.put("data", "a//b", Bytes::new()).await,
            Err(ObjectError::InvalidKey { .. })
        ));
    }

    #[test]
    fn an_endpoint_that_is_not_a_url_is_refused() {
        let e = Objects::new(ObjectsConfig::S3(S3Endpoint {
            url: "localhost:9000".into(),
            region: "us-east-1".into(),
            access_key: "k".into(),
            secret_key: "s".into(),
        }))
        .expect_err("refused");
        assert!(e.to_string().contains("localhost:9000"), "{e}");
    }
}
